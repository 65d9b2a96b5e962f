// predict_common.cuh: what the one-GPU predictions share: error checks,
// data that keeps a GEMM at its real clock, the copy that stands in for a
// peer's NVLink traffic and the host clock that paces it, and medians.
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

// A device-to-device copy on the copy engines where the driver takes the
// hint (a plain cudaMemcpyAsync inside one GPU may run as a kernel, which
// waits for SMs that a running kernel holds, where a pull from a peer would
// not); a plain copy where the batch call is refused.
// --copy plain: every stand-in copy a plain cudaMemcpyAsync.
inline bool& plain_copies() {
  static bool plain = false;
  return plain;
}
inline void ce_copy(void* dst, const void* src, size_t n, cudaStream_t st) {
  if (plain_copies()) {
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, st));
    return;
  }
  void* dsts[1] = {dst};
  const void* srcs[1] = {src};
  size_t sizes[1] = {n}, idx[1] = {0};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  if (cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, idx, 1, st) != cudaSuccess) {
    (void)cudaGetLastError();
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, st));
  }
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

