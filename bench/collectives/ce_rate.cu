// ce_rate.cu: how fast the copy engines move data to a peer GPU over NVLink,
// by how the copy is issued: one cudaMemcpyAsync, one cudaMemcpyBatchAsync
// of k equal parts (hint: overlap with compute), or k parts on k streams;
// each alone and beside a kernel that holds every SM of the source GPU.
// One process, GPUs 0 and 1 with peer access (the copy engines take the same
// path to a peer's memory as to its NCCL window).
// Build: nvcc -std=c++17 -O3 -arch=sm_90 -o ce_rate ce_rate.cu
// Prints one JSON object per line: {"how", "parts", "busy", "mb", "ms", "gbps"}.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

// Holds every SM until *stop is set (one CTA per SM slot it can get).
__global__ void hold_sms(volatile int* stop, unsigned long long limit_ns) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    if (*stop) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > limit_ns) return;
  }
}

static void issue(const char* how, int parts, char* dst, const char* src, size_t bytes,
                  std::vector<cudaStream_t>& st) {
  size_t part = bytes / parts;
  if (how[0] == 'm') {  // memcpy
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st[0]));
  } else if (how[0] == 'b') {  // batch
    std::vector<void*> d(parts);
    std::vector<const void*> s(parts);
    std::vector<size_t> n(parts, part);
    for (int i = 0; i < parts; i++) {
      d[i] = dst + i * part;
      s[i] = src + i * part;
    }
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    CK(cudaMemcpyBatchAsync(d.data(), s.data(), n.data(), parts, &attr, &idx, 1, st[0]));
  } else {  // streams
    for (int i = 0; i < parts; i++)
      CK(cudaMemcpyAsync(dst + i * part, src + i * part, part, cudaMemcpyDefault, st[i]));
  }
}

int main(int argc, char** argv) {
  size_t mb = argc > 1 ? strtoul(argv[1], nullptr, 10) : 128;
  size_t bytes = mb << 20;
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    fprintf(stderr, "ce_rate: needs two GPUs\n");
    return 1;
  }
  char *src, *dst;
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&dst, bytes));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaMalloc(&src, bytes));
  int* stop;
  CK(cudaMallocManaged(&stop, sizeof(int)));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<cudaStream_t> st(8);
  for (auto& s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaStream_t busy;
  CK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const char* hows[] = {"memcpy", "batch", "streams"};
  for (int busyOn = 0; busyOn < 2; busyOn++)
    for (const char* how : hows)
      for (int parts : {1, 2, 4, 8}) {
        if (how[0] == 'm' && parts > 1) continue;
        float best = 1e30f;
        for (int rep = 0; rep < 5; rep++) {
          *stop = 0;
          if (busyOn) hold_sms<<<sms * 16, 64, 0, busy>>>(stop, 2000000000ull);
          CK(cudaEventRecord(a, st[0]));
          for (int i = 1; i < parts && how[0] == 's'; i++) CK(cudaStreamWaitEvent(st[i], a, 0));
          issue(how, parts, dst, src, bytes, st);
          for (int i = 1; i < parts && how[0] == 's'; i++) {
            cudaEvent_t j;
            CK(cudaEventCreateWithFlags(&j, cudaEventDisableTiming));
            CK(cudaEventRecord(j, st[i]));
            CK(cudaStreamWaitEvent(st[0], j, 0));
            CK(cudaEventDestroy(j));
          }
          CK(cudaEventRecord(b, st[0]));
          CK(cudaEventSynchronize(b));
          *stop = 1;
          CK(cudaDeviceSynchronize());
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, a, b));
          if (rep > 0 && ms < best) best = ms;
        }
        printf("{\"how\": \"%s\", \"parts\": %d, \"busy\": %d, \"mb\": %zu, \"ms\": %.4f, \"gbps\": %.1f}\n", how,
               parts, busyOn, mb, best, bytes / (best * 1e6));
        fflush(stdout);
      }
  return 0;
}
