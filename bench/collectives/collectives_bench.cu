// Benchmark of the device library's LSA collectives against NCCL's host
// collectives, in one run on the same GPUs: all-gather, reduce-scatter,
// all-reduce (nccl-tests size and busbw conventions), all-to-all in the MoE
// dispatch shape (7168 bf16 per token, top-8 of 64 experts; NCCL side:
// grouped ncclSend/ncclRecv) and put-with-signal ping-pong latency (NCCL
// side: ncclSend/ncclRecv ping-pong). Every measured result is verified.
// CTA count, threads, unroll and chunk are lists to sweep; the best and
// every point go to the JSON file; the first point is always the library's
// default launch (default_us in the JSON).
// Usage: collectives_bench --out FILE.json [--ops ag,rs,ar,a2a,put]
//        [--min BYTES] [--max BYTES] [--ctas L] [--threads L] [--unroll L]
//        [--chunk L] [--dtype float|bf16] [--iters N] [--warmup N] [--ranks N]
// One process, one thread per GPU.
#include <pthread.h>
#include <algorithm>
#include <type_traits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>
#include "cuco_device.cuh"

using cuco::Launch;

struct Opts {
  std::string out, ops = "ag,rs,ar,a2a,put", dtype = "float", cmd;
  size_t minB = 4096, maxB = 1u << 30;
  std::vector<int> ctas, threads, unroll;
  std::vector<size_t> chunk;
  int iters = 20, warmup = 5, ranks = -1;
};
static Opts g_o;
static pthread_barrier_t g_hb;

// ---------------------------------------------------------------- data
__host__ __device__ inline uint64_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return x;
}
__host__ __device__ inline int val(uint64_t seed, size_t i) { return (int)(mix(seed * 0x9E3779B97F4A7C15ULL + i) % 17) - 8; }
template <typename T> __device__ T make(float v) { return (T)v; }
template <> __device__ __nv_bfloat16 make<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <typename T> __device__ bool same(T a, T b) {
  using U = typename std::conditional<sizeof(T) == 2, unsigned short, unsigned>::type;
  return *reinterpret_cast<const U*>(&a) == *reinterpret_cast<const U*>(&b);
}
template <typename T> __global__ void gen(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = make<T>((float)val(seed, i));
}
// mode 0: out[i] == val(seed0 + i/per, i%per) (all-gather); mode 1: out[i] ==
// sum_r val(seed0 + r, base + i) (reductions); mode 2: out[i] == val(seed0, base + i)
template <typename T>
__global__ void check(const T* out, size_t n, size_t per, int nr, uint64_t seed0, size_t base, int mode,
                      unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    int e = 0;
    if (mode == 0) e = val(seed0 + i / per, i % per);
    else if (mode == 1) for (int r = 0; r < nr; r++) e += val(seed0 + r, base + i);
    else e = val(seed0, base + i);
    if (!same(out[i], make<T>((float)e))) atomicAdd(bad, 1ULL);
  }
}
__global__ void check_a2a(const __nv_bfloat16* out, size_t rows, size_t H, int nr, const size_t* recvOffs,
                          const size_t* srcOffs, uint64_t seed0, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * H; i += (size_t)gridDim.x * blockDim.x) {
    size_t row = i / H, j = i % H;
    int s = 0;
    while (s + 1 < nr && recvOffs[s + 1] <= row) s++;
    size_t srow = srcOffs[s] + (row - recvOffs[s]);
    if (!same(out[i], make<__nv_bfloat16>((float)val(seed0 + s, srow * H + j)))) atomicAdd(bad, 1ULL);
  }
}
__global__ void pingpong(cuco::SymmDev s, int peer, bool first, const void* src, size_t dstOff, size_t bytes,
                         int slot, uint64_t e0, int iters) {
  using P = cuco::Policy<ncclCoopCta, cuco::Sync::None, 4>;
  for (int i = 0; i < iters; i++) {
    uint64_t e = e0 + i;
    if (first) {
      cuco::put_signal<P>(ncclCoopCta(), s, peer, src, dstOff, bytes, slot, e);
      cuco::wait_signal(ncclCoopCta(), s, peer, slot, e);
    } else {
      cuco::wait_signal(ncclCoopCta(), s, peer, slot, e);
      cuco::put_signal<P>(ncclCoopCta(), s, peer, src, dstOff, bytes, slot, e);
    }
  }
}

// ------------------------------------------------------------ harness
struct Point { Launch l; double us; };
struct Row {
  std::string op;
  size_t bytes, perRank;
  double oursUs, ncclUs;
  double ncclWinUs = 0;  // NCCL on the symmetric window (its symmetric kernels); 0: not measured
  Launch best;
  bool ok;
  std::vector<Point> sweep;
};

struct Ctx {
  int rank, n;
  ncclComm_t comm;
  cudaStream_t st;
  cudaEvent_t e0, e1;
  cuco::Symm s;
  char *nbufA, *nbufB;  // plain buffers for NCCL
  size_t nbytes;
  unsigned long long* bad;
  std::vector<Row> rows;  // rank 0 only
  int fails;
};

#define DIE(x) do { if ((x) != 0) return -1; } while (0)

// Progress line on stderr as soon as a row is done (rank 0).
static void progress(const Row& r) {
  size_t bi = 0;
  for (size_t j = 1; j < r.sweep.size(); j++) if (r.sweep[j].us < r.sweep[bi].us) bi = j;
  std::fprintf(stderr, "progress %s %zu B: ours %.2f us (%d/%d/%d/%zu) nccl %.2f us, on the window %.2f us%s\n",
               r.op.c_str(), r.bytes, r.sweep[bi].us, r.sweep[bi].l.ctas, r.sweep[bi].l.threads, r.sweep[bi].l.unroll,
               r.sweep[bi].l.chunk, r.ncclUs, r.ncclWinUs, r.ok ? "" : " FAIL");
}

static int sync_all(Ctx& c) { return cuco::symm_barrier(c.s, c.st); }

template <class F> static int time_us(Ctx& c, int iters, F&& f, double* us) {
  for (int i = 0; i < g_o.warmup; i++) DIE(f());
  DIE(sync_all(c));
  CUCO_CUDA_TRY(cudaEventRecord(c.e0, c.st));
  for (int i = 0; i < iters; i++) DIE(f());
  CUCO_CUDA_TRY(cudaEventRecord(c.e1, c.st));
  CUCO_CUDA_TRY(cudaEventSynchronize(c.e1));
  float ms;
  CUCO_CUDA_TRY(cudaEventElapsedTime(&ms, c.e0, c.e1));
  *us = ms * 1e3 / iters;
  return 0;
}
static int iters_for(size_t bytes) {
  if (bytes >= (256u << 20)) return std::max(3, g_o.iters / 4);
  return g_o.iters;
}
static int fetch_bad(Ctx& c, unsigned long long* h) {
  CUCO_CUDA_TRY(cudaMemcpyAsync(h, c.bad, sizeof(*h), cudaMemcpyDeviceToHost, c.st));
  CUCO_CUDA_TRY(cudaStreamSynchronize(c.st));
  return 0;
}

static std::vector<Launch> configs() {
  std::vector<Launch> v(1);  // v[0]: the library defaults (all zero)
  if (g_o.ctas.empty() && g_o.threads.empty() && g_o.unroll.empty() && g_o.chunk.empty()) return v;
  std::vector<int> ct = g_o.ctas.empty() ? std::vector<int>{0} : g_o.ctas;
  std::vector<int> th = g_o.threads.empty() ? std::vector<int>{0} : g_o.threads;
  std::vector<int> un = g_o.unroll.empty() ? std::vector<int>{0} : g_o.unroll;
  std::vector<size_t> ch = g_o.chunk.empty() ? std::vector<size_t>{0} : g_o.chunk;
  for (int a : ct) for (int b : th) for (int u : un) for (size_t k : ch) {
    Launch l; l.ctas = a; l.threads = b; l.unroll = u; l.chunk = k; v.push_back(l);
  }
  return v;
}

// One size of AG/RS/AR: sweep ours, verify each, then NCCL, verify.
template <typename T> static int bench_coll(Ctx& c, const std::string& op, size_t bytes) {
  const int n = c.n;
  size_t esz = sizeof(T);
  size_t count;  // ag: per rank; rs: per rank block; ar: buffer
  if (op == "ar") count = bytes / esz;
  else count = bytes / esz / n;
  if (count == 0) return 0;
  uint64_t seed = mix(bytes * 7 + op.size());
  Row row;
  row.op = op; row.bytes = bytes; row.perRank = op == "ar" ? bytes : count * esz; row.ok = true;
  cuco::Op kind = op == "ag" ? cuco::Op::AllGather : op == "rs" ? cuco::Op::ReduceScatter : cuco::Op::AllReduce;
  int iters = iters_for(bytes);
  // inputs
  T* win = c.s.local<T>(0);
  T* rsOut = (T*)c.nbufB;
  auto prep = [&]() -> int {
    if (op == "ag") { gen<T><<<264, 512, 0, c.st>>>(win + c.rank * count, count, seed + c.rank); CUCO_CUDA_TRY(cudaGetLastError()); }
    else if (op == "rs") { gen<T><<<264, 512, 0, c.st>>>(win, count * n, seed + c.rank); CUCO_CUDA_TRY(cudaGetLastError()); }
    return 0;
  };
  size_t arOut = cuco::round_up(bytes, 4096);
  for (const Launch& l0 : configs()) {
    Launch l;
    DIE(cuco::resolve_launch(c.s, kind, row.perRank, l0, &l));
    l.threads = cuco::effective_threads<T>(kind, l.unroll, l.threads);
    DIE(prep());
    if (op == "ar") { gen<T><<<264, 512, 0, c.st>>>(win, count, seed + c.rank); CUCO_CUDA_TRY(cudaGetLastError()); }
    if (op == "ar") CUCO_CUDA_TRY(cudaMemsetAsync(win + arOut / esz, 0x7F, bytes, c.st));
    if (op == "rs") CUCO_CUDA_TRY(cudaMemsetAsync(rsOut, 0x7F, count * esz, c.st));
    if (op == "ag") {  // poison the other ranks' blocks
      for (int r = 0; r < n; r++)
        if (r != c.rank) CUCO_CUDA_TRY(cudaMemsetAsync(win + r * count, 0x7F, count * esz, c.st));
    }
    DIE(sync_all(c));
    double us;
    auto run = [&]() -> int {
      if (op == "ag") return cuco::all_gather<T>(c.s, nullptr, 0, count, c.st, l);
      if (op == "rs") return cuco::reduce_scatter<T>(c.s, 0, rsOut, count, c.st, l);
      return cuco::all_reduce<T>(c.s, 0, arOut, count, c.st, l);
    };
    DIE(time_us(c, iters, run, &us));
    CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, 8, c.st));
    if (op == "ag") check<T><<<264, 512, 0, c.st>>>(win, count * n, count, n, seed, 0, 0, c.bad);
    else if (op == "rs") check<T><<<264, 512, 0, c.st>>>(rsOut, count, 0, n, seed, (size_t)c.rank * count, 1, c.bad);
    else check<T><<<264, 512, 0, c.st>>>(win + arOut / esz, count, 0, n, seed, 0, 1, c.bad);
    unsigned long long h;
    DIE(fetch_bad(c, &h));
    if (h) { row.ok = false; std::printf("FAIL rank %d ours %s %zu B ctas=%d: %llu bad\n", c.rank, op.c_str(), bytes, l.ctas, h); }
    row.sweep.push_back(Point{l, us});
    DIE(sync_all(c));
  }
  // NCCL on plain buffers, then on the symmetric window (registered with
  // NCCL_WIN_COLL_SYMMETRIC, where NCCL may take its symmetric kernels)
  for (int onWin = 0; onWin < 2; onWin++) {
    T* a = onWin ? win : (T*)c.nbufA;
    T* b = onWin ? win + cuco::round_up(bytes, 4096) / esz : (T*)c.nbufB;
    if (op == "ag") gen<T><<<264, 512, 0, c.st>>>(a, count, seed + c.rank);
    else gen<T><<<264, 512, 0, c.st>>>(a, op == "rs" ? count * n : count, seed + c.rank);
    CUCO_CUDA_TRY(cudaGetLastError());
    CUCO_CUDA_TRY(cudaMemsetAsync(b, 0x7F, op == "ag" ? count * n * esz : count * esz, c.st));
    DIE(sync_all(c));
    auto run = [&]() -> int {
      if (op == "ag") CUCO_NCCL_TRY(ncclAllGather(a, b, count, cuco::DType<T>::nccl, c.comm, c.st));
      else if (op == "rs") CUCO_NCCL_TRY(ncclReduceScatter(a, b, count, cuco::DType<T>::nccl, ncclSum, c.comm, c.st));
      else CUCO_NCCL_TRY(ncclAllReduce(a, b, count, cuco::DType<T>::nccl, ncclSum, c.comm, c.st));
      return 0;
    };
    DIE(time_us(c, iters, run, onWin ? &row.ncclWinUs : &row.ncclUs));
    CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, 8, c.st));
    if (op == "ag") check<T><<<264, 512, 0, c.st>>>(b, count * n, count, n, seed, 0, 0, c.bad);
    else if (op == "rs") check<T><<<264, 512, 0, c.st>>>(b, count, 0, n, seed, (size_t)c.rank * count, 1, c.bad);
    else check<T><<<264, 512, 0, c.st>>>(b, count, 0, n, seed, 0, 1, c.bad);
    unsigned long long h;
    DIE(fetch_bad(c, &h));
    if (h) { row.ok = false; std::printf("FAIL rank %d nccl%s %s %zu B: %llu bad\n", c.rank, onWin ? " (window)" : "", op.c_str(), bytes, h); }
    DIE(sync_all(c));
  }
  if (!row.ok) c.fails++;
  if (c.rank == 0) { c.rows.push_back(row); progress(row); }
  return 0;
}

// MoE dispatch: T tokens per rank, top-8 of 64 experts, 7168 bf16 per token.
static int bench_a2a(Ctx& c, size_t tokens) {
  const int n = c.n, me = c.rank, K = 8, E = 64;
  const size_t H = 7168, rowB = H * 2;
  std::vector<size_t> cnt((size_t)n * n, 0);
  for (int s = 0; s < n; s++)
    for (size_t t = 0; t < tokens; t++) {
      uint64_t used = 0;
      for (int k = 0; k < K; k++) {
        uint64_t h = mix(((uint64_t)s << 40) ^ (t << 8) ^ (uint64_t)k);
        int e = (int)(h % E);
        while (used >> e & 1) e = (e + 1) % E;
        used |= 1ULL << e;
        cnt[s * n + e / (E / n)]++;
      }
    }
  std::vector<size_t> sendOffs((size_t)n * n), recvOffs((size_t)n * n);
  for (int s = 0; s < n; s++) { size_t a = 0; for (int d = 0; d < n; d++) { sendOffs[s * n + d] = a; a += cnt[s * n + d]; } }
  for (int d = 0; d < n; d++) { size_t a = 0; for (int s = 0; s < n; s++) { recvOffs[d * n + s] = a; a += cnt[s * n + d]; } }
  size_t sendRows = 0, recvRows = 0;
  for (int d = 0; d < n; d++) sendRows += cnt[me * n + d];
  for (int s = 0; s < n; s++) recvRows += cnt[s * n + me];
  size_t maxRecv = 0;
  for (int d = 0; d < n; d++) { size_t r = 0; for (int s = 0; s < n; s++) r += cnt[s * n + d]; maxRecv = std::max(maxRecv, r); }
  size_t maxSend = 0;  // the launch is chosen from the most any rank sends: every rank launches the same CTAs
  for (int s = 0; s < n; s++) { size_t r = 0; for (int d = 0; d < n; d++) r += cnt[s * n + d]; maxSend = std::max(maxSend, r); }
  size_t sendB = sendRows * rowB, maxSendB = maxSend * rowB;
  if (maxRecv * rowB + (1 << 20) > c.s.dataBytes || sendB > c.nbytes || maxRecv * rowB > c.nbytes) return 0;
  std::vector<size_t> hv(5 * (size_t)n);
  for (int p = 0; p < n; p++) {
    hv[p] = cnt[me * n + p]; hv[n + p] = sendOffs[me * n + p]; hv[2 * n + p] = recvOffs[p * n + me];
    hv[3 * n + p] = recvOffs[me * n + p]; hv[4 * n + p] = sendOffs[p * n + me];
  }
  size_t* dv;
  CUCO_CUDA_TRY(cudaMalloc(&dv, hv.size() * sizeof(size_t)));
  CUCO_CUDA_TRY(cudaMemcpy(dv, hv.data(), hv.size() * sizeof(size_t), cudaMemcpyHostToDevice));
  uint64_t seed = mix(tokens * 13 + 5);
  __nv_bfloat16* send = (__nv_bfloat16*)c.nbufA;
  gen<__nv_bfloat16><<<264, 512, 0, c.st>>>(send, sendRows * H, seed + me);
  CUCO_CUDA_TRY(cudaGetLastError());
  Row row;
  row.op = "a2a"; row.bytes = sendB; row.perRank = sendB; row.ok = true;
  int iters = iters_for(maxSendB);  // the same on every rank
  for (const Launch& l0 : configs()) {
    Launch l;
    DIE(cuco::resolve_launch(c.s, cuco::Op::AllToAll, maxSendB, l0, &l));
    l.threads = cuco::effective_threads<float>(cuco::Op::AllToAll, l.unroll, l.threads);
    CUCO_CUDA_TRY(cudaMemsetAsync(c.s.local<char>(0), 0x7F, recvRows * rowB + 2, c.st));
    DIE(sync_all(c));
    double us;
    auto run = [&]() { return cuco::all_to_all(c.s, send, 0, rowB, dv, dv + n, dv + 2 * n, maxSendB, c.st, l); };
    DIE(time_us(c, iters, run, &us));
    CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, 8, c.st));
    check_a2a<<<264, 512, 0, c.st>>>(c.s.local<__nv_bfloat16>(0), recvRows, H, n, dv + 3 * n, dv + 4 * n, seed, c.bad);
    unsigned long long h;
    DIE(fetch_bad(c, &h));
    if (h) { row.ok = false; std::printf("FAIL rank %d ours a2a %zu tokens: %llu bad\n", me, tokens, h); }
    row.sweep.push_back(Point{l, us});
    DIE(sync_all(c));
  }
  {
    __nv_bfloat16* recv = (__nv_bfloat16*)c.nbufB;
    CUCO_CUDA_TRY(cudaMemsetAsync(recv, 0x7F, recvRows * rowB + 2, c.st));
    DIE(sync_all(c));
    auto run = [&]() -> int {
      CUCO_NCCL_TRY(ncclGroupStart());
      for (int p = 0; p < n; p++) {
        CUCO_NCCL_TRY(ncclSend((char*)send + sendOffs[me * n + p] * rowB, cnt[me * n + p] * rowB, ncclChar, p, c.comm, c.st));
        CUCO_NCCL_TRY(ncclRecv((char*)recv + recvOffs[me * n + p] * rowB, cnt[p * n + me] * rowB, ncclChar, p, c.comm, c.st));
      }
      CUCO_NCCL_TRY(ncclGroupEnd());
      return 0;
    };
    DIE(time_us(c, iters, run, &row.ncclUs));
    CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, 8, c.st));
    check_a2a<<<264, 512, 0, c.st>>>(recv, recvRows, H, n, dv + 3 * n, dv + 4 * n, seed, c.bad);
    unsigned long long h;
    DIE(fetch_bad(c, &h));
    if (h) { row.ok = false; std::printf("FAIL rank %d nccl a2a %zu tokens: %llu bad\n", me, tokens, h); }
    DIE(sync_all(c));
  }
  CUCO_CUDA_TRY(cudaFree(dv));
  if (!row.ok) c.fails++;
  if (c.rank == 0) { c.rows.push_back(row); progress(row); }
  return 0;
}

// Ping-pong between ranks 0 and 1: one-way time = round trip / 2.
static int bench_put(Ctx& c, size_t bytes) {
  const int iters = 200;
  bool active = c.rank < 2;
  int peer = 1 - c.rank;
  Row row;
  row.op = "put"; row.bytes = bytes; row.perRank = bytes; row.ok = true;
  uint64_t seed = mix(bytes * 3 + 1);
  gen<int32_t><<<264, 512, 0, c.st>>>((int32_t*)c.nbufA, bytes / 4, seed + c.rank);
  CUCO_CUDA_TRY(cudaGetLastError());
  for (const Launch& l0 : configs()) {
    Launch l;
    DIE(cuco::resolve_launch(c.s, cuco::Op::Put, bytes, l0, &l));
    int mt = cuco::kernel_max_threads<pingpong>();
    if (mt > 0 && l.threads > mt) l.threads = mt / 32 * 32;
    CUCO_CUDA_TRY(cudaMemsetAsync(c.s.local<char>(0), 0x7F, bytes, c.st));
    DIE(sync_all(c));
    uint64_t e0 = c.s.epoch + 1;
    c.s.epoch += iters + 1;
    double us = 0;
    if (active) {
      CUCO_CUDA_TRY(cudaEventRecord(c.e0, c.st));
      pingpong<<<1, l.threads, 0, c.st>>>(c.s.dev(), peer, c.rank == 0, c.nbufA, 0, bytes, 0, e0, iters);
      CUCO_CUDA_TRY(cudaGetLastError());
      CUCO_CUDA_TRY(cudaEventRecord(c.e1, c.st));
      CUCO_CUDA_TRY(cudaEventSynchronize(c.e1));
      float ms;
      CUCO_CUDA_TRY(cudaEventElapsedTime(&ms, c.e0, c.e1));
      us = ms * 1e3 / iters / 2;
      CUCO_CUDA_TRY(cudaMemsetAsync(c.bad, 0, 8, c.st));
      check<int32_t><<<264, 512, 0, c.st>>>(c.s.local<int32_t>(0), bytes / 4, 0, 0, seed + peer, 0, 2, c.bad);
      unsigned long long h;
      DIE(fetch_bad(c, &h));
      if (h) { row.ok = false; std::printf("FAIL rank %d put %zu B: %llu bad\n", c.rank, bytes, h); }
    }
    l.ctas = 1;
    row.sweep.push_back(Point{l, us});
    DIE(sync_all(c));
  }
  {
    DIE(sync_all(c));
    float ms = 0;
    if (active) {
      char* a = c.nbufA; char* b = c.nbufB;
      CUCO_CUDA_TRY(cudaEventRecord(c.e0, c.st));
      for (int i = 0; i < iters; i++) {
        if (c.rank == 0) {
          CUCO_NCCL_TRY(ncclSend(a, bytes, ncclChar, peer, c.comm, c.st));
          CUCO_NCCL_TRY(ncclRecv(b, bytes, ncclChar, peer, c.comm, c.st));
        } else {
          CUCO_NCCL_TRY(ncclRecv(b, bytes, ncclChar, peer, c.comm, c.st));
          CUCO_NCCL_TRY(ncclSend(a, bytes, ncclChar, peer, c.comm, c.st));
        }
      }
      CUCO_CUDA_TRY(cudaEventRecord(c.e1, c.st));
      CUCO_CUDA_TRY(cudaEventSynchronize(c.e1));
      CUCO_CUDA_TRY(cudaEventElapsedTime(&ms, c.e0, c.e1));
    }
    row.ncclUs = ms * 1e3 / iters / 2;
    DIE(sync_all(c));
  }
  if (!row.ok) c.fails++;
  if (c.rank == 0) { c.rows.push_back(row); progress(row); }
  return 0;
}

static bool has_op(const char* op) {
  std::string s = "," + g_o.ops + ",";
  return s.find(std::string(",") + op + ",") != std::string::npos;
}

struct Arg { int rank, n; ncclUniqueId id; int rc; Ctx* c; };

static int run_rank(Arg* a, Ctx& c) {
  c.rank = a->rank; c.n = a->n;
  CUCO_CUDA_TRY(cudaSetDevice(a->rank));
  CUCO_NCCL_TRY(ncclCommInitRank(&c.comm, a->n, a->id, a->rank));
  CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
  CUCO_CUDA_TRY(cudaEventCreate(&c.e0));
  CUCO_CUDA_TRY(cudaEventCreate(&c.e1));
  size_t maxB = g_o.maxB;
  int maxCtas = 132;
  for (int x : g_o.ctas) maxCtas = std::max(maxCtas, x);
  CUCO_TRY(cuco::symm_create(c.comm, 2 * maxB + (4u << 20), maxCtas, 64, c.st, &c.s));
  c.nbytes = maxB + (4u << 20);
  CUCO_CUDA_TRY(cudaMalloc(&c.nbufA, c.nbytes));
  CUCO_CUDA_TRY(cudaMalloc(&c.nbufB, c.nbytes));
  CUCO_CUDA_TRY(cudaMalloc(&c.bad, 8));
  CUCO_TRY(cuco::load_kernels<float>());
  CUCO_TRY(cuco::load_kernels<__nv_bfloat16>());
  CUCO_ARG_TRY(cuco::kernel_max_threads<pingpong>() > 0, "cannot load pingpong");
  const char* ops[3] = {"ag", "rs", "ar"};
  for (const char* op : ops) {
    if (!has_op(op)) continue;
    for (size_t b = g_o.minB; b <= maxB; b *= 4) {
      if (g_o.dtype == "bf16") DIE(bench_coll<__nv_bfloat16>(c, op, b));
      else DIE(bench_coll<float>(c, op, b));
    }
  }
  if (has_op("a2a"))
    for (size_t t = 1; t * 8 * 7168 * 2 <= maxB; t *= 4) DIE(bench_a2a(c, t));
  if (has_op("put"))
    for (size_t b = 8; b <= std::min(maxB, (size_t)(4u << 20)); b *= 8) DIE(bench_put(c, b));
  CUCO_TRY(cuco::symm_destroy(&c.s, c.st));
  CUCO_CUDA_TRY(cudaFree(c.nbufA));
  CUCO_CUDA_TRY(cudaFree(c.nbufB));
  CUCO_CUDA_TRY(cudaFree(c.bad));
  CUCO_NCCL_TRY(ncclCommDestroy(c.comm));
  return c.fails ? 1 : 0;
}

static void* worker(void* p) {
  Arg* a = (Arg*)p;
  a->rc = run_rank(a, *a->c);
  return nullptr;
}

static double busf(const std::string& op, int n) {
  if (op == "ag" || op == "rs") return (double)(n - 1) / n;
  if (op == "ar") return 2.0 * (n - 1) / n;
  return 1.0;  // a2a: algorithm bandwidth (send bytes / time); put: bytes / one-way time
}

static std::vector<int> ilist(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) { v.push_back(std::atoi(p)); p = std::strchr(p, ','); if (!p) break; p++; }
  return v;
}
static std::vector<size_t> zlist(const char* s) {
  std::vector<size_t> v;
  for (const char* p = s; *p;) { v.push_back(std::strtoull(p, nullptr, 0)); p = std::strchr(p, ','); if (!p) break; p++; }
  return v;
}

static void json_launch(FILE* f, const Launch& l) {
  std::fprintf(f, "{\"ctas\": %d, \"threads\": %d, \"unroll\": %d, \"chunk\": %zu}", l.ctas, l.threads, l.unroll, l.chunk);
}

int main(int argc, char** argv) {
  for (int i = 0; i < argc; i++) { if (i) g_o.cmd += " "; g_o.cmd += argv[i]; }
  for (int i = 1; i < argc; i++) {
    std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) { std::fprintf(stderr, "missing value for %s\n", k.c_str()); return 2; }
    i++;
    if (k == "--out") g_o.out = v;
    else if (k == "--ops") g_o.ops = v;
    else if (k == "--min") g_o.minB = std::strtoull(v, nullptr, 0);
    else if (k == "--max") g_o.maxB = std::strtoull(v, nullptr, 0);
    else if (k == "--ctas") g_o.ctas = ilist(v);
    else if (k == "--threads") g_o.threads = ilist(v);
    else if (k == "--unroll") g_o.unroll = ilist(v);
    else if (k == "--chunk") g_o.chunk = zlist(v);
    else if (k == "--dtype") g_o.dtype = v;
    else if (k == "--iters") g_o.iters = std::atoi(v);
    else if (k == "--warmup") g_o.warmup = std::atoi(v);
    else if (k == "--ranks") g_o.ranks = std::atoi(v);
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (g_o.out.empty() || g_o.iters < 1 || g_o.minB < 16 || g_o.maxB < g_o.minB ||
      (g_o.dtype != "float" && g_o.dtype != "bf16")) {
    std::fprintf(stderr, "usage: %s --out FILE.json [--ops ag,rs,ar,a2a,put] [--min B] [--max B] [--ctas L] "
                 "[--threads L] [--unroll L] [--chunk L] [--dtype float|bf16] [--iters N] [--warmup N] [--ranks N]\n", argv[0]);
    return 2;
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 2) { std::fprintf(stderr, "need >= 2 GPUs\n"); return 77; }
  int n = g_o.ranks > 0 ? std::min(g_o.ranks, ngpu) : ngpu;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int ver = 0;
  ncclGetVersion(&ver);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  pthread_barrier_init(&g_hb, nullptr, n);
  std::vector<Ctx> ctx(n);
  std::vector<Arg> a(n);
  std::vector<pthread_t> t(n);
  for (int i = 0; i < n; i++) { a[i] = Arg{i, n, id, -1, &ctx[i]}; pthread_create(&t[i], nullptr, worker, &a[i]); }
  int rc = 0;
  for (int i = 0; i < n; i++) { pthread_join(t[i], nullptr); if (a[i].rc != 0) rc = 1; }
  FILE* f = std::fopen(g_o.out.c_str(), "w");
  if (!f) { std::perror(g_o.out.c_str()); return 1; }
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  std::string cmd;
  for (char ch : g_o.cmd) { if (ch == '"' || ch == '\\') cmd += '\\'; cmd += ch; }
  std::fprintf(f, "{\n \"command\": \"%s\",\n \"gpu\": \"%s\",\n \"gpus\": %d,\n \"nccl_version\": %d,\n \"date\": \"%s\",\n"
               " \"dtype\": \"%s\",\n \"verified\": %s,\n \"results\": [\n", cmd.c_str(), prop.name, n, ver, date,
               g_o.dtype.c_str(), rc ? "false" : "true");
  std::printf("%-4s %12s %12s %10s %10s %9s %9s %7s  %s\n", "op", "size", "per_rank", "ours_us", "nccl_us", "ours_bw", "nccl_bw", "speedup", "best(ctas/thr/unr/chunk)");
  const std::vector<Row>& rows = ctx[0].rows;
  for (size_t i = 0; i < rows.size(); i++) {
    Row r = rows[i];
    size_t bi = 0;
    for (size_t j = 1; j < r.sweep.size(); j++) if (r.sweep[j].us < r.sweep[bi].us) bi = j;
    r.oursUs = r.sweep[bi].us; r.best = r.sweep[bi].l;
    double f1 = busf(r.op, n);
    double ob = r.bytes / (r.oursUs * 1e3) * f1, nb = r.bytes / (r.ncclUs * 1e3) * f1;
    std::printf("%-4s %12zu %12zu %10.2f %10.2f %9.1f %9.1f %7.2f  %d/%d/%d/%zu%s\n", r.op.c_str(), r.bytes, r.perRank, r.oursUs,
                r.ncclUs, ob, nb, r.ncclUs / r.oursUs, r.best.ctas, r.best.threads, r.best.unroll, r.best.chunk, r.ok ? "" : "  FAIL");
    std::fprintf(f, "  {\"op\": \"%s\", \"bytes\": %zu, \"per_rank_bytes\": %zu, \"ours_us\": %.3f, \"nccl_us\": %.3f, "
                 "\"ours_busbw_GBps\": %.2f, \"nccl_busbw_GBps\": %.2f, \"speedup\": %.3f, \"verified\": %s, ",
                 r.op.c_str(), r.bytes, r.perRank, r.oursUs, r.ncclUs, ob, nb, r.ncclUs / r.oursUs, r.ok ? "true" : "false");
    if (r.ncclWinUs > 0) std::fprintf(f, "\"nccl_window_us\": %.3f, ", r.ncclWinUs);
    std::fprintf(f, "\"best\": ");
    json_launch(f, r.best);
    std::fprintf(f, ", \"default_us\": %.3f, \"default_busbw_GBps\": %.2f, \"default\": ", r.sweep[0].us,
                 r.bytes / (r.sweep[0].us * 1e3) * f1);
    json_launch(f, r.sweep[0].l);
    std::fprintf(f, ", \"sweep\": [");
    for (size_t j = 0; j < r.sweep.size(); j++) {
      std::fprintf(f, "%s{\"launch\": ", j ? ", " : "");
      json_launch(f, r.sweep[j].l);
      std::fprintf(f, ", \"us\": %.3f}", r.sweep[j].us);
    }
    std::fprintf(f, "]}%s\n", i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  std::fclose(f);
  std::printf("busbw: ag/rs (n-1)/n, ar 2(n-1)/n; a2a: algbw = send bytes/time per GPU; put: one-way (round trip/2)\n");
  std::printf("Verification: %s\n", rc ? "FAIL" : "PASS");
  return rc;
}
