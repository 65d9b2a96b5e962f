// GPU test of the copy-engine transport's zero-SM rendezvous (device/ce.cuh)
// on one GPU:
//  1. order: two ranks simulated by two streams meet at stamp_and_wait; the
//     work one does after each rendezvous sees what the other did before it
//     (the other is held back by a spin each time). A control run without the
//     waits must see stale values, or the check proves nothing.
//  2. no SM: while a kernel holds every SM, a rendezvous pair completes; a
//     one-block kernel issued the same way must not (control). Copies within
//     the GPU and the stream memory operations alone are probed and reported
//     (a device-to-device copy within one GPU may be run by a kernel).
//  3. one rank through NCCL: all_gather_ce and all_to_all_ce on a window.
// Prints "Verification: PASS" or "Verification: FAIL" and exits 0 / 1.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>
#include <nccl.h>
#include "cuco_device.cuh"

#define TRY(x)                                                                  \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

__global__ void spin_then_write(unsigned long long cycles, unsigned long long* at, unsigned long long v) {
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {
  }
  *at = v;
}

__global__ void copy_word(const unsigned long long* from, unsigned long long* to) { *to = *from; }

// Holds its SM until *release is set (or about `limit` cycles pass).
__global__ void hog(volatile int* release, unsigned long long limit) {
  long long start = clock64();
  while (!*release && (unsigned long long)(clock64() - start) < limit) {
  }
}

static double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Test 1: with waits (sync=true) every seen[i] == i; returns mismatches.
static int order_run(bool sync, int rounds, int* mismatches) {
  unsigned long long *words = nullptr, *marker = nullptr, *seen = nullptr;
  TRY(cudaMalloc(&words, 8 * sizeof(unsigned long long)));
  TRY(cudaMemset(words, 0, 8 * sizeof(unsigned long long)));
  TRY(cudaMalloc(&marker, rounds * sizeof(unsigned long long)));
  TRY(cudaMalloc(&seen, rounds * sizeof(unsigned long long)));
  TRY(cudaMemset(marker, 0, rounds * sizeof(unsigned long long)));
  TRY(cudaMemset(seen, 0, rounds * sizeof(unsigned long long)));
  // rank r's words: words + 4*r ([0],[1]: per source rank)
  uint64_t* w[2] = {reinterpret_cast<uint64_t*>(words), reinterpret_cast<uint64_t*>(words + 4)};
  void* peer0[2] = {nullptr, w[1] + 0};  // rank 0 stamps word 0 of rank 1
  void* peer1[2] = {w[0] + 1, nullptr};  // rank 1 stamps word 1 of rank 0
  cudaStream_t s0, s1;
  TRY(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  TRY(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  for (int i = 1; i <= rounds; i++) {
    spin_then_write<<<1, 1, 0, s1>>>(2000000ULL, marker + (i - 1), (unsigned long long)i);
    if (sync) {
      if (cuco::stamp_and_wait(i, peer1, w[1], 1, 2, s1) ||
          cuco::stamp_and_wait(i, peer0, w[0], 0, 2, s0))
        return 1;
    }
    copy_word<<<1, 1, 0, s0>>>(marker + (i - 1), seen + (i - 1));
  }
  TRY(cudaStreamSynchronize(s0));
  TRY(cudaStreamSynchronize(s1));
  unsigned long long host[64];
  TRY(cudaMemcpy(host, seen, rounds * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  *mismatches = 0;
  for (int i = 1; i <= rounds; i++) *mismatches += host[i - 1] != (unsigned long long)i;
  cudaStreamDestroy(s0);
  cudaStreamDestroy(s1);
  cudaFree(words);
  cudaFree(marker);
  cudaFree(seen);
  return 0;
}

// Test 2: what is issued on s0 while hog holds every SM; *done: it completed
// before the hog was released. Kinds: the rendezvous pair and a copy (what
// the transport does), a one-block kernel (control), and each operation
// alone, to name the one that needs an SM when the pair does.
enum HogKind { kRendezvous, kKernel, kCopy8, kCopy1M, kBatch8, kBatch1M, kWrite, kWaitMet, kKinds };
static const char* const kHogNames[kKinds] = {
    "rendezvous pair", "one-block kernel (control)", "cudaMemcpyAsync 8 B", "cudaMemcpyAsync 1 MiB",
    "ce_copy 8 B", "ce_copy 1 MiB", "cuStreamWriteValue64", "cuStreamWaitValue64 (met)"};

static int issue(HogKind kind, cudaStream_t s0, cudaStream_t s1, unsigned long long* words, char* a, char* b) {
  uint64_t* w[2] = {reinterpret_cast<uint64_t*>(words), reinterpret_cast<uint64_t*>(words + 4)};
  void* peer0[2] = {nullptr, w[1] + 0};
  void* peer1[2] = {w[0] + 1, nullptr};
  const cuco::StreamMemOps& ops = cuco::stream_mem_ops();
  CUstream c0 = reinterpret_cast<CUstream>(s0);
  switch (kind) {
    case kRendezvous:
      if (cuco::stamp_and_wait(1, peer1, w[1], 1, 2, s1) ||
          cuco::stamp_and_wait(1, peer0, w[0], 0, 2, s0))
        return 1;
      return 0;
    case kKernel: copy_word<<<1, 1, 0, s0>>>(words, words + 7); return cudaGetLastError() != cudaSuccess;
    case kCopy8: return cudaMemcpyAsync(b, a, 8, cudaMemcpyDeviceToDevice, s0) != cudaSuccess;
    case kCopy1M: return cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, s0) != cudaSuccess;
    case kBatch8: return cuco::ce_copy(b, a, 8, s0);
    case kBatch1M: return cuco::ce_copy(b, a, 1 << 20, s0);
    case kWrite: return ops.write64(c0, reinterpret_cast<CUdeviceptr>(words + 6), 5, 0) != CUDA_SUCCESS;
    case kWaitMet: return ops.wait64(c0, reinterpret_cast<CUdeviceptr>(words + 6), 0, CU_STREAM_WAIT_VALUE_GEQ) !=
                          CUDA_SUCCESS;
    default: return 1;
  }
}

static int under_hog(HogKind kind, bool* done, bool* hogHeld) {
  int dev = 0, sms = 0, perSm = 0;
  TRY(cudaGetDevice(&dev));
  TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, hog, 1024, 0));
  int* release = nullptr;
  TRY(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped));
  *release = 0;
  int* releaseDev = nullptr;
  TRY(cudaHostGetDevicePointer(&releaseDev, release, 0));
  unsigned long long* words = nullptr;
  char *a = nullptr, *b = nullptr;
  TRY(cudaMalloc(&words, 8 * sizeof(unsigned long long)));
  TRY(cudaMemset(words, 0, 8 * sizeof(unsigned long long)));
  TRY(cudaMalloc(&a, 1 << 20));
  TRY(cudaMalloc(&b, 1 << 20));
  TRY(cudaDeviceSynchronize());
  cudaStream_t sh, s0, s1;
  TRY(cudaStreamCreateWithFlags(&sh, cudaStreamNonBlocking));
  TRY(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  TRY(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaEvent_t ev;
  TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  hog<<<sms * perSm, 1024, 0, sh>>>(releaseDev, 20000000000ULL);
  TRY(cudaGetLastError());
  double t0 = now_s();
  while (now_s() - t0 < 0.2) {
  }  // let the hog take the SMs
  if (issue(kind, s0, s1, words, a, b)) return 1;
  TRY(cudaEventRecord(ev, s0));
  *done = false;
  t0 = now_s();
  while (now_s() - t0 < 1.0 && !*done) *done = cudaEventQuery(ev) == cudaSuccess;
  *hogHeld = cudaStreamQuery(sh) == cudaErrorNotReady;
  *release = 1;
  TRY(cudaDeviceSynchronize());
  cudaEventDestroy(ev);
  cudaStreamDestroy(sh);
  cudaStreamDestroy(s0);
  cudaStreamDestroy(s1);
  cudaFree(words);
  cudaFree(a);
  cudaFree(b);
  cudaFreeHost(release);
  return 0;
}

// Test 3: one rank, a real window: all_gather_ce and all_to_all_ce.
static int one_rank(int* bad) {
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "one_rank: NCCL communicator failed\n");
    return 1;
  }
  cudaStream_t st;
  TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cuco::Symm s;
  const size_t bytes = (1 << 20) + 12;  // odd size
  if (cuco::symm_create(comm, 4 * bytes, 4, 4, st, &s)) return 1;
  char *src = nullptr, *host = nullptr;
  TRY(cudaMalloc(&src, bytes));
  TRY(cudaMallocHost(&host, bytes));
  for (size_t i = 0; i < bytes; i++) host[i] = (char)(i * 7 + 3);
  TRY(cudaMemcpy(src, host, bytes, cudaMemcpyHostToDevice));
  *bad = 0;
  for (int which = 0; which < 2; which++) {
    size_t off = 4096 + 20;  // odd offset in the window
    TRY(cudaMemset(s.local<char>(0), 0x55, 2 * bytes));
    int rc = which == 0 ? cuco::all_gather_ce(s, src, off, bytes, st)
                        : cuco::all_to_all_ce(s, src, off, bytes, st);
    if (rc) return 1;
    TRY(cudaStreamSynchronize(st));
    std::vector<char> got(bytes);
    TRY(cudaMemcpy(got.data(), s.local<char>(off), bytes, cudaMemcpyDeviceToHost));
    int diff = memcmp(got.data(), host, bytes) != 0;
    printf("%-14s 1 rank, %zu bytes at offset %zu: %s\n", which ? "all_to_all_ce" : "all_gather_ce", bytes, off,
           diff ? "WRONG" : "ok");
    *bad += diff;
  }
  if (cuco::symm_destroy(&s, st)) return 1;
  cudaFree(src);
  cudaFreeHost(host);
  ncclCommDestroy(comm);
  return 0;
}

int main() {
  int fails = 0;
  if (!cuco::stream_mem_ops().ok) {
    printf("stream memory operations unavailable from this driver\nVerification: FAIL\n");
    return 1;
  }
  const int rounds = 16;
  int withWait = 0, without = 0;
  if (order_run(true, rounds, &withWait) || order_run(false, rounds, &without)) return 1;
  printf("order: %d of %d rounds stale with the rendezvous, %d without (control)\n", withWait, rounds, without);
  fails += withWait != 0;
  if (without == 0) {
    printf("order: the control saw no stale value, so the check proves nothing\n");
    fails++;
  }
  bool done[kKinds] = {}, held[kKinds] = {};
  for (int k = 0; k < kKinds; k++) {
    if (under_hog((HogKind)k, &done[k], &held[k])) return 1;
    printf("no SM: %-28s under a kernel holding every SM: %s (hog still running: %s)\n", kHogNames[k],
           done[k] ? "completed" : "blocked", held[k] ? "yes" : "no");
  }
  fails += !(done[kRendezvous] && held[kRendezvous]);
  if (done[kKernel]) {
    printf("no SM: the control kernel ran beside the hog, so the check proves nothing\n");
    fails++;
  }
  int bad = 0;
  if (one_rank(&bad)) return 1;
  fails += bad;
  printf("Verification: %s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}
