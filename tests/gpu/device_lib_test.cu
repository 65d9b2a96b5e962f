// Correctness test of the device library (device/): every collective, every
// dtype, sizes from 1 element to 1 GiB total with odd sizes and unaligned
// offsets, several launch shapes, and the design dims (Thread/Warp/Cta
// issuers, None/Cta/Lsa sync, fused "last K CTAs" and "some warps" use).
// One process with one thread per GPU (N ranks = visible GPUs), or with
// --procs one process per rank (for compute-sanitizer). Fresh random
// data for every check (seed printed), outputs poisoned before every run.
// Usage: device_lib_test [--small|--tiny] [--ranks N] [--procs]
//   --small: sizes <= 1 MiB; --tiny: a handful of small sizes (sanitizers)
// Prints "Verification: PASS" or "Verification: FAIL" and exits 0 / 1.
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <string>
#include <algorithm>
#include <type_traits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include "cuco_device.cuh"

extern char** environ;

using cuco::Launch;

static int g_small = 0;  // 1: sizes <= 1 MiB; 2 (--tiny): a few sizes, for compute-sanitizer
static uint64_t g_seed0 = 0;

// ---------------------------------------------------------------- data
__host__ __device__ inline uint64_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return x;
}
// Small integers in [-8, 8]: exact in every dtype, sums exact in any order.
__host__ __device__ inline int val(uint64_t seed, size_t i) {
  return (int)(mix(seed * 0x9E3779B97F4A7C15ULL + i) % 17) - 8;
}
template <typename T> __device__ T make(float v);
template <> __device__ float make<float>(float v) { return v; }
template <> __device__ int32_t make<int32_t>(float v) { return (int32_t)v; }
template <> __device__ __half make<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 make<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <typename T> __device__ bool same(T a, T b) {
  using U = typename std::conditional<sizeof(T) == 2, unsigned short, unsigned>::type;
  return *reinterpret_cast<const U*>(&a) == *reinterpret_cast<const U*>(&b);
}

template <typename T> __global__ void gen(T* p, size_t n, uint64_t seed, size_t base) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = make<T>((float)val(seed, base + i));
}
__device__ void bad(unsigned long long* res, size_t i) {
  if (atomicAdd(&res[0], 1ULL) == 0) res[1] = i;
}
// out[i] == sum over ranks r < nr of val(seed(r), base + i)
template <typename T>
__global__ void check_sum(const T* out, size_t n, uint64_t seedBase, int nr, size_t base, unsigned long long* res) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    int e = 0;
    for (int r = 0; r < nr; r++) e += val(seedBase + r, base + i);
    if (!same(out[i], make<T>((float)e))) bad(res, i);
  }
}
// all-gather output: block r of `per` elements == val(seedBase + r, j)
template <typename T>
__global__ void check_ag(const T* out, size_t per, int nr, uint64_t seedBase, unsigned long long* res) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < per * nr; i += (size_t)gridDim.x * blockDim.x) {
    int r = (int)(i / per);
    if (!same(out[i], make<T>((float)val(seedBase + r, i - r * per)))) bad(res, i);
  }
}
template <typename T>
__global__ void check_gen(const T* out, size_t n, uint64_t seed, size_t base, unsigned long long* res) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (!same(out[i], make<T>((float)val(seed, base + i)))) bad(res, i);
}
// all-to-all receive region: rows from source s start at row recvOffs[s]; they
// are rows srcOffs[s].. of s's send buffer (element (row*H + j) of seed s).
__global__ void check_a2a(const __nv_bfloat16* out, size_t rows, size_t H, int nr, const size_t* recvOffs,
                          const size_t* srcOffs, uint64_t seedBase, unsigned long long* res) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * H; i += (size_t)gridDim.x * blockDim.x) {
    size_t row = i / H, j = i % H;
    int s = 0;
    while (s + 1 < nr && recvOffs[s + 1] <= row) s++;
    size_t srow = srcOffs[s] + (row - recvOffs[s]);
    if (!same(out[i], make<__nv_bfloat16>((float)val(seedBase + s, srow * H + j)))) bad(res, i);
  }
}
__global__ void spin_ns(unsigned ns) {
  for (unsigned t = 0; t < ns; t += 1000) __nanosleep(1000);
}

// ------------------------------------------------------------ harness
struct Ctx {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t st;
  cuco::Symm s;
  char* scratch;            // 1 GiB (or 8 MiB with --small) of plain device memory
  size_t scratchBytes;
  unsigned long long* res;  // [count, first bad index]
  uint64_t check;           // checks done (same sequence on every rank)
  int fails;
};

static size_t max_total() { return g_small ? (1u << 20) : (1u << 30); }

static uint64_t next_seed(Ctx& c) { return mix(g_seed0 + 1000003ULL * (++c.check)); }

static int poison(Ctx& c, void* p, size_t bytes) {
  CUCO_CUDA_TRY(cudaMemsetAsync(p, 0x7F, bytes, c.st));
  return 0;
}
static int begin_check(Ctx& c) {
  CUCO_CUDA_TRY(cudaMemsetAsync(c.res, 0, 2 * sizeof(unsigned long long), c.st));
  return 0;
}
// Collects the result; every rank reports its own and they agree on nothing
// else, so a failure anywhere fails the run.
static int end_check(Ctx& c, const char* what, const char* dtype, size_t count, const Launch& l) {
  unsigned long long h[2];
  CUCO_CUDA_TRY(cudaMemcpyAsync(h, c.res, sizeof(h), cudaMemcpyDeviceToHost, c.st));
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
  if (h[0]) {
    c.fails++;
    std::printf("FAIL rank %d %s %s count=%zu ctas=%d threads=%d unroll=%d chunk=%zu: %llu bad, first at %llu\n",
                c.rank, what, dtype, count, l.ctas, l.threads, l.unroll, l.chunk, h[0], h[1]);
  } else if (c.rank == 0) {
    std::printf("ok   %-16s %-6s count=%-11zu ctas=%d threads=%d unroll=%d chunk=%zu\n", what, dtype, count,
                l.ctas, l.threads, l.unroll, l.chunk);
  }
  std::fflush(stdout);
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  return 0;
}

static const int G = 264, B = 512;

// copyEngine: cuco::all_gather_ce (Launch unused) instead of the SM kernel.
template <typename T>
static int test_ag(Ctx& c, size_t count, size_t outOff, bool inPlace, Launch l, bool copyEngine = false) {
  uint64_t seed = next_seed(c);
  size_t bytes = count * sizeof(T);
  T* out = c.s.local<T>(outOff);
  CUCO_TRY(poison(c, out, bytes * c.n));
  const T* src = nullptr;
  if (inPlace) {
    gen<T><<<G, B, 0, c.st>>>(out + c.rank * count, count, seed + c.rank, 0);
  } else {
    gen<T><<<G, B, 0, c.st>>>((T*)c.scratch, count, seed + c.rank, 0);
    src = (const T*)c.scratch;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));  // every rank's poison is done
  if (copyEngine)
    CUCO_TRY(cuco::all_gather_ce(c.s, src, outOff, bytes, c.st));
  else
    CUCO_TRY(cuco::all_gather<T>(c.s, src, outOff, count, c.st, l));
  CUCO_TRY(begin_check(c));
  check_ag<T><<<G, B, 0, c.st>>>(out, count, c.n, seed, c.res);
  const char* what = copyEngine ? (inPlace ? "all_gather_ce/inpl" : "all_gather_ce")
                                : (inPlace ? "all_gather/inpl" : "all_gather");
  return end_check(c, what, cuco::DType<T>::name, count, l);
}

template <typename T> static int test_rs(Ctx& c, size_t count, size_t inOff, Launch l) {
  uint64_t seed = next_seed(c);
  T* in = c.s.local<T>(inOff);
  T* out = (T*)c.scratch + 1;  // deliberately not 16-byte aligned when count is odd... see below
  if (count % 2 == 0) out = (T*)c.scratch;
  gen<T><<<G, B, 0, c.st>>>(in, count * c.n, seed + c.rank, 0);
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_TRY(poison(c, out, count * sizeof(T)));
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  CUCO_TRY(cuco::reduce_scatter<T>(c.s, inOff, out, count, c.st, l));
  CUCO_TRY(begin_check(c));
  check_sum<T><<<G, B, 0, c.st>>>(out, count, seed, c.n, (size_t)c.rank * count, c.res);
  return end_check(c, "reduce_scatter", cuco::DType<T>::name, count, l);
}

template <typename T> static int test_ar(Ctx& c, size_t count, size_t inOff, size_t outOff, Launch l) {
  uint64_t seed = next_seed(c);
  T* in = c.s.local<T>(inOff);
  T* out = c.s.local<T>(outOff);
  if (outOff != inOff) CUCO_TRY(poison(c, out, count * sizeof(T)));
  gen<T><<<G, B, 0, c.st>>>(in, count, seed + c.rank, 0);
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  CUCO_TRY(cuco::all_reduce<T>(c.s, inOff, outOff, count, c.st, l));
  CUCO_TRY(begin_check(c));
  check_sum<T><<<G, B, 0, c.st>>>(out, count, seed, c.n, 0, c.res);
  return end_check(c, outOff == inOff ? "all_reduce/inpl" : "all_reduce", cuco::DType<T>::name, count, l);
}

// cuco::all_reduce_ce: in place at window offset off (an odd element offset
// takes the kernel's one-element path), the peers' parts pulled into scratch.
template <typename T> static int test_ar_ce(Ctx& c, size_t count, size_t off) {
  uint64_t seed = next_seed(c);
  T* buf = c.s.local<T>(off);
  gen<T><<<G, B, 0, c.st>>>(buf, count, seed + c.rank, 0);
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_TRY(poison(c, c.scratch, cuco::all_reduce_ce_scratch<T>(count, c.n)));
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  CUCO_TRY(cuco::all_reduce_ce<T>(c.s, off, count, c.scratch, c.st));
  CUCO_TRY(begin_check(c));
  check_sum<T><<<G, B, 0, c.st>>>(buf, count, seed, c.n, 0, c.res);
  return end_check(c, off % 16 ? "all_reduce_ce/odd" : "all_reduce_ce", cuco::DType<T>::name, count, Launch());
}

// cuco::reduce_scatter_ce over `pieces` ranges of every rank's part, in
// place (each rank's part of the input is its output) or into plain memory
// at an odd element offset when count is odd.
template <typename T> static int test_rs_ce(Ctx& c, size_t count, size_t inOff, int pieces, bool inPlace) {
  uint64_t seed = next_seed(c);
  size_t total = count * c.n;
  T* in = c.s.local<T>(inOff);
  T* out = inPlace ? in + (size_t)c.rank * count : (T*)c.scratch + count % 2;
  void* scratch = c.scratch + cuco::round_up(count * sizeof(T) + 16, 4096);
  gen<T><<<G, B, 0, c.st>>>(in, total, seed + c.rank, 0);
  CUCO_CUDA_TRY(cudaGetLastError());
  if (!inPlace) CUCO_TRY(poison(c, out, count * sizeof(T)));
  CUCO_TRY(poison(c, scratch, cuco::reduce_scatter_ce_scratch<T>(count, c.n)));
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  for (int j = 0; j < pieces; j++)
    CUCO_TRY(cuco::reduce_scatter_ce<T>(c.s, inOff, out, count, count * j / pieces, count * (j + 1) / pieces,
                                        scratch, c.st, j == pieces - 1));
  CUCO_TRY(begin_check(c));
  check_sum<T><<<G, B, 0, c.st>>>(out, count, seed, c.n, (size_t)c.rank * count, c.res);
  Launch shown;
  shown.ctas = pieces;  // the report's ctas column: the ranges
  return end_check(c, inPlace ? "rs_ce/inpl" : "rs_ce", cuco::DType<T>::name, count, shown);
}

// MoE dispatch then combine, rows of H bf16; counts cnt[s][d] < maxRows.
static int test_a2a(Ctx& c, size_t H, size_t maxRows, Launch l) {
  uint64_t seed = next_seed(c);
  int n = c.n, me = c.rank;
  std::vector<size_t> cnt((size_t)n * n);
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) cnt[s * n + d] = mix(seed ^ (uint64_t)(s * 131 + d)) % (maxRows + 1);
  // sendOffs of every source, recvOffs at every destination, dstOffs for me
  std::vector<size_t> sendOffs((size_t)n * n), recvOffs((size_t)n * n);
  for (int s = 0; s < n; s++) {
    size_t a = 0;
    for (int d = 0; d < n; d++) { sendOffs[s * n + d] = a; a += cnt[s * n + d]; }
  }
  for (int d = 0; d < n; d++) {
    size_t a = 0;
    for (int s = 0; s < n; s++) { recvOffs[d * n + s] = a; a += cnt[s * n + d]; }
  }
  size_t sendRows = 0, recvRows = 0, mostRows = 0;  // the most any rank sends (or sends back)
  for (int d = 0; d < n; d++) sendRows += cnt[me * n + d];
  for (int s = 0; s < n; s++) recvRows += cnt[s * n + me];
  for (int r = 0; r < n; r++) {
    size_t out = 0, in = 0;
    for (int p = 0; p < n; p++) out += cnt[r * n + p], in += cnt[p * n + r];
    mostRows = std::max(mostRows, std::max(out, in));
  }
  std::vector<size_t> hv(6 * (size_t)n);
  for (int p = 0; p < n; p++) {
    hv[p] = cnt[me * n + p];                 // send counts (dispatch)
    hv[n + p] = sendOffs[me * n + p];        // send offsets
    hv[2 * n + p] = recvOffs[p * n + me];    // where p puts my rows
    hv[3 * n + p] = cnt[p * n + me];         // combine: send back what p sent me
    hv[4 * n + p] = recvOffs[me * n + p];    // ... from my receive layout
    hv[5 * n + p] = sendOffs[p * n + me];    // ... to where p had them
  }
  size_t* dv = (size_t*)(c.scratch + c.scratchBytes - 4096);
  CUCO_CUDA_TRY(cudaMemcpyAsync(dv, hv.data(), hv.size() * sizeof(size_t), cudaMemcpyHostToDevice, c.st));
  size_t row = H * sizeof(__nv_bfloat16);
  size_t recvOff = 0, combOff = cuco::round_up((size_t)n * maxRows * row + 16, 4096);
  CUCO_ARG_TRY(combOff * 2 <= c.s.dataBytes && (size_t)n * maxRows * row + 4096 <= c.scratchBytes, "a2a too big");
  __nv_bfloat16* send = (__nv_bfloat16*)c.scratch;
  gen<__nv_bfloat16><<<G, B, 0, c.st>>>(send, sendRows * H, seed + me, 0);
  CUCO_CUDA_TRY(cudaGetLastError());
  CUCO_TRY(poison(c, c.s.local<char>(recvOff), recvRows * row + 1));
  CUCO_TRY(poison(c, c.s.local<char>(combOff), sendRows * row + 1));
  CUCO_TRY(cuco::symm_barrier(c.s, c.st));
  CUCO_TRY(cuco::all_to_all(c.s, send, recvOff, row, dv, dv + n, dv + 2 * n, mostRows * row, c.st, l));
  CUCO_TRY(begin_check(c));
  check_a2a<<<G, B, 0, c.st>>>(c.s.local<__nv_bfloat16>(recvOff), recvRows, H, n, dv + 4 * n, dv + 5 * n, seed, c.res);
  CUCO_TRY(end_check(c, "a2a/dispatch", "bf16", recvRows * H, l));
  CUCO_TRY(cuco::all_to_all(c.s, c.s.local<char>(recvOff), combOff, row, dv + 3 * n, dv + 4 * n, dv + 5 * n,
                            mostRows * row, c.st, l));
  CUCO_TRY(begin_check(c));
  check_gen<__nv_bfloat16><<<G, B, 0, c.st>>>(c.s.local<__nv_bfloat16>(combOff), sendRows * H, seed + me, 0, c.res);
  return end_check(c, "a2a/combine", "bf16", sendRows * H, l);
}

// Rank r puts to r+1 with signals; the sender starts late so the receiver
// really waits; three rounds on the same slots (epochs must separate them).
static int test_put(Ctx& c, size_t bytes, Launch l) {
  int to = (c.rank + 1) % c.n, from = (c.rank + c.n - 1) % c.n;
  for (int round = 0; round < 3; round++) {
    uint64_t seed = next_seed(c);
    uint64_t epoch = c.s.next_epoch();
    size_t cnt = bytes / 4;
    gen<int32_t><<<G, B, 0, c.st>>>((int32_t*)c.scratch, cnt, seed + c.rank, 0);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_TRY(poison(c, c.s.local<char>(0), bytes));
    CUCO_TRY(cuco::symm_barrier(c.s, c.st));
    cudaStream_t s2;
    CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUCO_TRY(cuco::wait_signal(c.s, from, 0, l.ctas, epoch, s2));  // waits while the put is delayed
    spin_ns<<<1, 1, 0, c.st>>>(200000);
    CUCO_TRY(cuco::put_signal(c.s, to, c.scratch, 0, bytes, 0, epoch, c.st, l));
    CUCO_TRY(begin_check(c));
    CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
    check_gen<int32_t><<<G, B, 0, s2>>>(c.s.local<int32_t>(0), cnt, seed + from, 0, c.res);
    CUCO_CUDA_TRY(cudaStreamSynchronize(s2));
    CUCO_CUDA_TRY(cudaStreamDestroy(s2));
    CUCO_TRY(end_check(c, "put_signal", "int32", cnt, l));
  }
  return 0;
}

// ------------------------------------------------- design dims, fused use
// The last K CTAs all-gather (Coop, Sync) while the others compute y = 2x+1.
template <class P>
__global__ void fused_ag(cuco::SymmDev s, const float* x, float* y, size_t nx, const float* src, size_t outOff,
                         size_t bytes, int k) {
  if (cuco::in_last_ctas<typename P::Coop>(k)) {
    cuco::all_gather<P>(typename P::Coop(), cuco::issuers_last_ctas<typename P::Coop>(k), s, src, outOff, bytes);
    return;
  }
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nx; i += (size_t)(gridDim.x - k) * blockDim.x)
    y[i] = 2.f * x[i] + 1.f;
}
__global__ void check_axpy(const float* x, const float* y, size_t n, unsigned long long* res) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (y[i] != 2.f * x[i] + 1.f) bad(res, i);
}
// Warps [w0, w0+nw) of every CTA all-reduce; the other warps compute.
template <typename T>
__global__ void fused_ar_warps(cuco::SymmDev s, size_t inOff, size_t outOff, size_t count, const float* x, float* y,
                               size_t nx, int w0, int nw) {
  using P = cuco::Policy<ncclCoopWarp, cuco::Sync::Lsa, 2>;
  if (cuco::in_warps(w0, nw)) {
    cuco::all_reduce<P, T>(ncclCoopWarp(), cuco::issuers_warps(w0, nw), s, inOff, outOff, count);
    return;
  }
  int lane = threadIdx.x % 32, w = threadIdx.x / 32, other = blockDim.x / 32 - nw;
  int wi = w < w0 ? w : w - nw;
  for (size_t i = ((size_t)blockIdx.x * other + wi) * 32 + lane; i < nx; i += (size_t)gridDim.x * other * 32)
    y[i] = 2.f * x[i] + 1.f;
}
// Thread issuers with Sync::Cta (whole CTA calls), ordered across ranks by
// separate barrier kernels (Sync::None style).
template <class P>
__global__ void ag_plain(cuco::SymmDev s, const void* src, size_t outOff, size_t bytes) {
  cuco::all_gather<P>(typename P::Coop(), cuco::issuers_ctas<typename P::Coop>(0, gridDim.x), s, src, outOff, bytes);
}
template <class P, typename T>
__global__ void rs_plain(cuco::SymmDev s, size_t inOff, T* out, size_t count) {
  cuco::reduce_scatter<P, T>(typename P::Coop(), cuco::issuers_ctas<typename P::Coop>(0, gridDim.x), s, inOff, out,
                             count);
}

static int test_dims(Ctx& c) {
  size_t per = g_small ? 50001 : 3000001;  // floats per rank, odd
  size_t nx = g_small == 2 ? 4096 : 1 << 20;
  float* x = (float*)c.scratch + per + 64;
  float* y = x + nx + 64;
  Launch none;
  // fused: last 4 CTAs (Cta issuers, LSA), then last 2 CTAs with warp issuers
  for (int variant = 0; variant < 2; variant++) {
    uint64_t seed = next_seed(c);
    gen<float><<<G, B, 0, c.st>>>((float*)c.scratch, per, seed + c.rank, 0);
    gen<float><<<G, B, 0, c.st>>>(x, nx, seed + 99, 0);
    CUCO_TRY(poison(c, c.s.local<char>(0), per * 4 * c.n));
    CUCO_TRY(poison(c, y, nx * 4));
    CUCO_TRY(cuco::symm_barrier(c.s, c.st));
    if (variant == 0)
      fused_ag<cuco::Policy<ncclCoopCta, cuco::Sync::Lsa, 4>><<<32, 256, 0, c.st>>>(c.s.dev(), x, y, nx, (float*)c.scratch, 0, per * 4, 4);
    else
      fused_ag<cuco::Policy<ncclCoopWarp, cuco::Sync::Lsa, 2, 4096>><<<32, 256, 0, c.st>>>(c.s.dev(), x, y, nx, (float*)c.scratch, 0, per * 4, 2);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_TRY(begin_check(c));
    check_ag<float><<<G, B, 0, c.st>>>(c.s.local<float>(0), per, c.n, seed, c.res);
    check_axpy<<<G, B, 0, c.st>>>(x, y, nx, c.res);
    CUCO_TRY(end_check(c, variant ? "fused_ag/warps" : "fused_ag/cta", "float", per, none));
  }
  {  // some warps of every CTA all-reduce (bf16, in place) while the rest compute
    uint64_t seed = next_seed(c);
    size_t cnt = per * 2 + 1;
    gen<__nv_bfloat16><<<G, B, 0, c.st>>>(c.s.local<__nv_bfloat16>(0), cnt, seed + c.rank, 0);
    gen<float><<<G, B, 0, c.st>>>(x, nx, seed + 99, 0);
    CUCO_TRY(poison(c, y, nx * 4));
    CUCO_TRY(cuco::symm_barrier(c.s, c.st));
    fused_ar_warps<__nv_bfloat16><<<16, 256, 0, c.st>>>(c.s.dev(), 0, 0, cnt, x, y, nx, 6, 2);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_TRY(begin_check(c));
    check_sum<__nv_bfloat16><<<G, B, 0, c.st>>>(c.s.local<__nv_bfloat16>(0), cnt, seed, c.n, 0, c.res);
    check_axpy<<<G, B, 0, c.st>>>(x, y, nx, c.res);
    CUCO_TRY(end_check(c, "fused_ar/warps", "bf16", cnt, none));
  }
  {  // Thread issuers, Sync::Cta, separate device barriers
    uint64_t seed = next_seed(c);
    gen<float><<<G, B, 0, c.st>>>((float*)c.scratch, per, seed + c.rank, 0);
    CUCO_TRY(poison(c, c.s.local<char>(0), per * 4 * c.n));
    CUCO_TRY(cuco::symm_barrier(c.s, c.st));
    CUCO_TRY(cuco::device_barrier(c.s, c.st));
    ag_plain<cuco::Policy<ncclCoopThread, cuco::Sync::Cta, 8>><<<24, 128, 0, c.st>>>(c.s.dev(), c.scratch, 0, per * 4);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_TRY(cuco::device_barrier(c.s, c.st));
    CUCO_TRY(begin_check(c));
    check_ag<float><<<G, B, 0, c.st>>>(c.s.local<float>(0), per, c.n, seed, c.res);
    CUCO_TRY(end_check(c, "ag/thread+cta", "float", per, none));
  }
  {  // Warp issuers, Sync::None, runtime-chunked reduce-scatter, barriers around
    uint64_t seed = next_seed(c);
    size_t cnt = per;
    gen<__half><<<G, B, 0, c.st>>>(c.s.local<__half>(0), cnt * c.n, seed + c.rank, 0);
    CUCO_TRY(poison(c, c.scratch, cnt * 2));
    CUCO_TRY(cuco::symm_barrier(c.s, c.st));
    CUCO_TRY(cuco::device_barrier(c.s, c.st));
    rs_plain<cuco::Policy<ncclCoopWarp, cuco::Sync::None, 4, 8192>, __half><<<8, 256, 0, c.st>>>(c.s.dev(), 0, (__half*)c.scratch, cnt);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_TRY(cuco::device_barrier(c.s, c.st));
    CUCO_TRY(begin_check(c));
    check_sum<__half><<<G, B, 0, c.st>>>((__half*)c.scratch, cnt, seed, c.n, (size_t)c.rank * cnt, c.res);
    CUCO_TRY(end_check(c, "rs/warp+none", "half", cnt, none));
  }
  return 0;
}

template <typename T> static int test_dtype(Ctx& c) {
  const size_t esz = sizeof(T);
  std::vector<size_t> counts = {1, 3, 8, 17, 1000, 4097, 65537, (1u << 18) + 5};
  if (g_small == 2) counts = {1, 4097};
  if (!g_small) {
    counts.push_back((4u << 20) + 3);
    counts.push_back(max_total() / esz / c.n);  // 1 GiB total
  }
  std::vector<Launch> shapes(3);
  shapes[1].ctas = 1; shapes[1].threads = 64; shapes[1].unroll = 1;
  shapes[2].ctas = 7; shapes[2].threads = 96; shapes[2].unroll = 8; shapes[2].chunk = 4096;
  if (g_small == 2) shapes.resize(1);  // sanitizer runs: library defaults only
  for (size_t count : counts) {
    bool huge = count * esz * c.n > (64u << 20);
    for (size_t si = 0; si < shapes.size(); si++) {
      if (huge && si == 1) continue;  // one 64-thread CTA over 1 GiB is just slow
      const Launch& l = shapes[si];
      CUCO_TRY(test_ag<T>(c, count, si == 2 ? 3 * esz : 0, false, l));
      CUCO_TRY(test_rs<T>(c, count, si == 2 ? esz : 0, l));
      size_t arOut = cuco::round_up(count * esz * c.n, 4096);
      CUCO_TRY(test_ar<T>(c, count * c.n, 0, si == 1 ? 0 : arOut, l));
    }
    CUCO_TRY(test_ag<T>(c, count, 0, true, Launch()));
    CUCO_TRY(test_ag<T>(c, count, 3 * esz, false, Launch(), true));
    CUCO_TRY(test_ag<T>(c, count, 0, true, Launch(), true));
    CUCO_TRY(test_ar_ce<T>(c, count * c.n, 0));
    CUCO_TRY(test_ar_ce<T>(c, count * c.n + 1, esz));
    CUCO_TRY(test_rs_ce<T>(c, count, 0, 1, false));
    CUCO_TRY(test_rs_ce<T>(c, count, 0, 3, true));
    CUCO_TRY(test_rs_ce<T>(c, count, esz, 5, false));
  }
  return 0;
}

struct Arg {
  int rank, n;
  ncclUniqueId id;
  int rc;
};

static int run_rank(Arg* a, Ctx& c) {
  c.rank = a->rank; c.n = a->n; c.check = 0; c.fails = 0;
  CUCO_CUDA_TRY(cudaSetDevice(a->rank));
  CUCO_NCCL_TRY(ncclCommInitRank(&c.comm, a->n, a->id, a->rank));
  CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
  size_t total = max_total();
  // AR needs in + out of the total size; a2a its regions; plus slack.
  CUCO_TRY(cuco::symm_create(c.comm, 2 * total + (32u << 20), 256, 256, c.st, &c.s));
  c.scratchBytes = total + (16u << 20);
  CUCO_CUDA_TRY(cudaMalloc(&c.scratch, c.scratchBytes));
  CUCO_CUDA_TRY(cudaMalloc(&c.res, 2 * sizeof(unsigned long long)));
  // Load the test's own spinning kernel now: loading a kernel lazily while
  // another kernel of this device spins on a signal can deadlock.
  spin_ns<<<1, 1, 0, c.st>>>(0);
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
  CUCO_ARG_TRY(cuco::kernel_max_threads<check_gen<int32_t>>() > 0, "cannot load check_gen");
  CUCO_TRY(cuco::load_kernels<float>());
  CUCO_TRY(cuco::load_kernels<__half>());
  CUCO_TRY(cuco::load_kernels<__nv_bfloat16>());
  CUCO_TRY(cuco::load_kernels<int32_t>());
  CUCO_TRY(test_dtype<float>(c));
  CUCO_TRY(test_dtype<__half>(c));
  CUCO_TRY(test_dtype<__nv_bfloat16>(c));
  CUCO_TRY(test_dtype<int32_t>(c));
  if (g_small == 2) {  // sanitizer runs: the signal tests wait across streams, which tools may serialize
    CUCO_TRY(test_a2a(c, 5, 33, Launch()));
    CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
    CUCO_TRY(cuco::symm_destroy(&c.s, c.st));
    CUCO_CUDA_TRY(cudaFree(c.scratch));
    CUCO_CUDA_TRY(cudaFree(c.res));
    CUCO_NCCL_TRY(ncclCommDestroy(c.comm));
    return c.fails ? 1 : 0;
  }
  Launch l8; l8.ctas = 8; l8.unroll = 2;
  CUCO_TRY(test_a2a(c, 7168, g_small ? 8 : 160, Launch()));
  CUCO_TRY(test_a2a(c, 5, 333, l8));
  CUCO_TRY(test_a2a(c, 1, 3, l8));
  Launch l1; l1.ctas = 1;
  CUCO_TRY(test_put(c, 4, l1));
  CUCO_TRY(test_put(c, 4 * 1001, l8));
  CUCO_TRY(test_put(c, g_small == 2 ? 4096 : g_small ? (1u << 20) : (64u << 20), l8));
  CUCO_TRY(test_dims(c));
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
  CUCO_TRY(cuco::symm_destroy(&c.s, c.st));
  CUCO_CUDA_TRY(cudaFree(c.scratch));
  CUCO_CUDA_TRY(cudaFree(c.res));
  CUCO_NCCL_TRY(ncclCommDestroy(c.comm));
  return c.fails ? 1 : 0;
}

static void* worker(void* p) {
  Arg* a = (Arg*)p;
  Ctx c{};
  a->rc = run_rank(a, c);
  return nullptr;
}

static std::string hex_of(const ncclUniqueId& id) {
  std::string h;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(&id);
  char t[3];
  for (size_t i = 0; i < sizeof(id); i++) { std::snprintf(t, sizeof(t), "%02x", b[i]); h += t; }
  return h;
}
static bool id_of(const char* h, ncclUniqueId* id) {
  if (std::strlen(h) != 2 * sizeof(*id)) return false;
  unsigned char* b = reinterpret_cast<unsigned char*>(id);
  for (size_t i = 0; i < sizeof(*id); i++) {
    unsigned v;
    if (std::sscanf(h + 2 * i, "%2x", &v) != 1) return false;
    b[i] = (unsigned char)v;
  }
  return true;
}

// --procs: one process per rank (re-executes itself with --rank/--id), so
// that tools which serialize a process's kernels (compute-sanitizer) do not
// deadlock the cross-GPU barriers.
static int spawn_ranks(int n, const char* self, const ncclUniqueId& id) {
  std::string hid = hex_of(id), ranks = std::to_string(n);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    std::string rs = std::to_string(r);
    std::vector<const char*> av = {self, "--rank", rs.c_str(), "--ranks", ranks.c_str(), "--id", hid.c_str()};
    if (g_small == 1) av.push_back("--small");
    if (g_small == 2) av.push_back("--tiny");
    av.push_back(nullptr);
    pid_t pid;
    if (posix_spawn(&pid, self, nullptr, nullptr, const_cast<char* const*>(av.data()), environ) != 0) return 1;
    pids.push_back(pid);
  }
  int bad = 0;
  for (pid_t p : pids) {
    int st = 0;
    if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
  }
  return bad;
}

int main(int argc, char** argv) {
  int n = -1, rank = -1, procs = 0;
  const char* idHex = nullptr;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--small")) g_small = 1;
    else if (!std::strcmp(argv[i], "--tiny")) g_small = 2;
    else if (!std::strcmp(argv[i], "--procs")) procs = 1;
    else if (!std::strcmp(argv[i], "--ranks") && i + 1 < argc) n = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rank") && i + 1 < argc) rank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--id") && i + 1 < argc) idHex = argv[++i];
    else { std::fprintf(stderr, "usage: %s [--small|--tiny] [--ranks N] [--procs]\n", argv[0]); return 2; }
  }
  const char* se = std::getenv("CUCO_TEST_SEED");
  g_seed0 = se ? std::strtoull(se, nullptr, 0) : (uint64_t)std::time(nullptr);
  if (rank >= 0) {  // one rank of a --procs run
    Arg a;
    a.rank = rank; a.n = n; a.rc = -1;
    if (!idHex || n < 2 || !id_of(idHex, &a.id)) return 2;
    worker(&a);
    return a.rc == 0 ? 0 : 1;
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) { std::printf("no GPU\n"); return 77; }
  if (n < 0) n = ngpu;
  if (n < 2 || n > ngpu) { std::printf("need 2..%d ranks, asked %d\n", ngpu, n); return 77; }
  int v = 0;
  ncclGetVersion(&v);
  std::printf("device_lib_test ranks=%d nccl=%d seed=%llu %s%s\n", n, v, (unsigned long long)g_seed0,
              g_small == 2 ? "tiny" : g_small ? "small" : "full", procs ? " (one process per rank)" : "");
  std::fflush(stdout);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  int bad = 0;
  if (procs) {
    char seedEnv[32];
    std::snprintf(seedEnv, sizeof(seedEnv), "%llu", (unsigned long long)g_seed0);
    setenv("CUCO_TEST_SEED", seedEnv, 1);  // every rank must draw the same seeds
    bad = spawn_ranks(n, "/proc/self/exe", id);
  } else {
    std::vector<pthread_t> t(n);
    std::vector<Arg> a(n);
    for (int i = 0; i < n; i++) { a[i].rank = i; a[i].n = n; a[i].id = id; a[i].rc = -1; pthread_create(&t[i], nullptr, worker, &a[i]); }
    for (int i = 0; i < n; i++) { pthread_join(t[i], nullptr); if (a[i].rc != 0) bad = 1; }
  }
  std::printf("Verification: %s\n", bad ? "FAIL" : "PASS");
  return bad;
}
