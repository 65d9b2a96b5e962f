// predict_common.cuh: what the one-GPU predictions share: error checks,
// data that keeps a GEMM at its real clock, the host clock that paces the
// copy engine's stand-in for a peer's NVLink traffic, and medians.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#define CK(call)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)
#define CB(call)                                                                  \
  do {                                                                            \
    cublasStatus_t s_ = (call);                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d: %s: cuBLAS %d\n", __FILE__, __LINE__, #call, (int)s_); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

// Uniform values in [-1, 1) from a hash of the index, as bf16: a GEMM's power,
// and so its clock, depends on its data (constant inputs run faster).
static __global__ void fill(__nv_bfloat16* p, size_t n, unsigned salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 0x9E3779B9u ^ salt;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    p[i] = __float2bfloat16((float)(x % 2001u) / 1000.0f - 1.0f);
  }
}

inline double host_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

