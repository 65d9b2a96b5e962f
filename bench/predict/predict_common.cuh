// predict_common.cuh: what the one-GPU predictions share: error checks,
// data that keeps a GEMM at its real clock, what stands in for a peer's
// NVLink traffic and the host clock that paces it, and medians.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
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

// What stands in for one chunk of a peer's NVLink traffic, enqueued on st
// at the chunk's start (the caller paces the chunks):
//   copy   (default) a local device-to-device copy of its bytes: the memory
//          traffic is there, but inside one GPU the copy runs on SMs, so it
//          queues behind the blocks of a kernel already running, where a
//          pull from a peer would not;
//   timed  (--stand-in timed) the stream held until the chunk has arrived
//          at the link's rate (a host function): no SM and no traffic.
enum class StandIn { copy, timed };
inline StandIn& stand_in() {
  static StandIn s = StandIn::copy;
  return s;
}
inline const char* stand_in_name() { return stand_in() == StandIn::copy ? "copy" : "timed"; }

static void CUDART_CB hold_until(void* p) {
  double* at = static_cast<double*>(p);
  while (host_s() < *at) {
  }
  delete at;
}

inline void stand_in_chunk(void* dst, const void* src, size_t n, double rate_gbps, cudaStream_t st) {
  if (stand_in() == StandIn::copy) {
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, st));
    return;
  }
  CK(cudaLaunchHostFunc(st, hold_until, new double(host_s() + n / (rate_gbps * 1e9))));
}

// One numeric option of a predictor: its flag and the field it sets.
struct Opt {
  const char* flag;
  long* l = nullptr;
  int* i = nullptr;
  double* d = nullptr;
  Opt(const char* f, long* p) : flag(f), l(p) {}
  Opt(const char* f, int* p) : flag(f), i(p) {}
  Opt(const char* f, double* p) : flag(f), d(p) {}
};

// Reads "--flag value" pairs: --out FILE, --stand-in copy|timed, and the
// predictor's own numbers. False, with a message, on an unknown flag.
inline bool read_opts(int argc, char** argv, std::string* out, std::initializer_list<Opt> opts) {
  for (int a = 1; a + 1 < argc; a += 2) {
    std::string f = argv[a];
    const char* v = argv[a + 1];
    bool known = true;
    if (f == "--out") {
      *out = v;
    } else if (f == "--stand-in") {
      stand_in() = std::string(v) == "timed" ? StandIn::timed : StandIn::copy;
    } else {
      known = false;
      for (const Opt& o : opts) {
        if (f != o.flag) continue;
        if (o.l) *o.l = strtol(v, nullptr, 10);
        if (o.i) *o.i = (int)strtol(v, nullptr, 10);
        if (o.d) *o.d = strtod(v, nullptr);
        known = true;
      }
    }
    if (!known) {
      fprintf(stderr, "unknown option %s\n", f.c_str());
      return false;
    }
  }
  return true;
}

// The result file, opened for writing (NULL, with a message, when it
// cannot be), and this GPU's properties (its name goes in the result).
inline FILE* result_file(const std::string& path, cudaDeviceProp* prop) {
  CK(cudaGetDeviceProperties(prop, 0));
  FILE* f = fopen(path.c_str(), "w");
  if (!f) perror(path.c_str());
  return f;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

