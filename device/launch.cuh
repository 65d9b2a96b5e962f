// Stand-alone kernels and host launchers for the LSA collectives: one CTA is
// one issuer unit (ncclCoopCta, Sync::Lsa). CTA count, threads per CTA,
// unroll and chunk size come from Launch; zeros pick the size-dependent
// defaults of default_launch (chosen from measurements, see docs/device.md).
#pragma once
#include <atomic>
#include <cstdint>
#include <cuda_runtime.h>
#include "check.cuh"
#include "host.cuh"
#include "lsa.cuh"

// CUCO_DEVICE_UNROLL_ONLY U (1, 2, 4 or 8), defined before this header is
// included: every launcher runs with unroll U whatever Launch::unroll asks,
// and only U's kernels are compiled. A program whose unroll is fixed when it
// is built (the transformed programs' CUCO_COMM_UNROLL) compiles a quarter of
// the kernels.
#ifdef CUCO_DEVICE_UNROLL_ONLY
#define CUCO_UNROLL_(u) (CUCO_DEVICE_UNROLL_ONLY)
static_assert(CUCO_DEVICE_UNROLL_ONLY == 1 || CUCO_DEVICE_UNROLL_ONLY == 2 || CUCO_DEVICE_UNROLL_ONLY == 4 ||
                  CUCO_DEVICE_UNROLL_ONLY == 8,
              "CUCO_DEVICE_UNROLL_ONLY must be 1, 2, 4 or 8");
#else
#define CUCO_UNROLL_(u) (u)
#endif

namespace cuco {

enum class Op { AllGather, ReduceScatter, AllReduce, AllToAll, Put };

struct Launch {
  int ctas = 0;      // issuer CTAs (<= Symm::barriers)
  int threads = 0;   // threads per CTA (multiple of 32, <= 1024)
  int unroll = 0;    // 1, 2, 4 or 8 16-byte vectors in flight per thread
  size_t chunk = 0;  // bytes per step of a CTA; 0: one contiguous block per CTA
};

// Defaults by operation and bytes moved per rank (the per-rank block for
// all-gather/reduce-scatter, the buffer for all-reduce, the send bytes for
// all-to-all). Large sizes (>= 8 MiB per rank) come from the sweep measured
// on 2xH200 NV18 (bench/results/2026-11-23-device-lib-h200x2-chunk-sweep.json:
// 128 CTAs for all-gather/all-reduce, 64 for reduce-scatter, 512 threads,
// unroll 4, chunk 0). The smaller-size rows are not tuned yet (the sweep
// over small sizes did not complete).
inline Launch default_launch(Op op, size_t bytes) {
  Launch l;
  l.threads = 512;
  l.unroll = 4;
  if (bytes <= (64u << 10)) l.ctas = 4;
  else if (bytes <= (512u << 10)) l.ctas = 16;
  else if (bytes <= (4u << 20)) l.ctas = 32;
  else l.ctas = op == Op::ReduceScatter ? 64 : 128;
  return l;
}

inline int resolve_launch(const Symm& s, Op op, size_t bytes, Launch in, Launch* out) {
  Launch d = default_launch(op, bytes);
  if (in.ctas <= 0) in.ctas = d.ctas;
  if (in.threads <= 0) in.threads = d.threads;
  if (in.unroll <= 0) in.unroll = d.unroll;
#ifdef CUCO_DEVICE_UNROLL_ONLY
  in.unroll = CUCO_DEVICE_UNROLL_ONLY;
#endif
  if (in.ctas > s.barriers) in.ctas = s.barriers;
  CUCO_ARG_TRY(in.threads % 32 == 0 && in.threads <= 1024, "threads=%d", in.threads);
  CUCO_ARG_TRY(in.unroll == 1 || in.unroll == 2 || in.unroll == 4 || in.unroll == 8, "unroll=%d",
               in.unroll);
  CUCO_ARG_TRY(in.chunk % 16 == 0, "chunk=%zu is not a multiple of 16", in.chunk);
  *out = in;
  return 0;
}

// Largest block kernel K can run with (its registers may not allow 1024
// threads). The query also loads K's module on this device, so a lazily
// loaded kernel is never loaded while another kernel spins waiting for it
// (a deadlock with CUDA_MODULE_LOADING=LAZY, the default). Cached per kernel
// (K is a template argument, so every kernel has its own cache) and device.
template <auto K> inline int kernel_max_threads() {
  constexpr int kMaxDev = 64;
  static std::atomic<int> cache[kMaxDev];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  if (dev >= 0 && dev < kMaxDev) {
    int v = cache[dev].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  cudaFuncAttributes a;
  if (cudaFuncGetAttributes(&a, K) != cudaSuccess) return -1;
  if (dev >= 0 && dev < kMaxDev) cache[dev].store(a.maxThreadsPerBlock, std::memory_order_relaxed);
  return a.maxThreadsPerBlock;
}

// Clamps l->threads to what kernel K can run (a multiple of 32).
template <auto K> inline int fit_threads(Launch* l) {
  int m = kernel_max_threads<K>();
  CUCO_ARG_TRY(m > 0, "cudaFuncGetAttributes failed for a library kernel");
  if (l->threads > m) l->threads = m / 32 * 32;
  return 0;
}

namespace kern {
template <int U>
__global__ void all_gather(SymmDev s, const void* src, size_t outOff, size_t bytes, size_t chunk) {
  cuco::all_gather<Policy<ncclCoopCta, Sync::Lsa, U>>(ncclCoopCta(), issuers_ctas<ncclCoopCta>(0, gridDim.x),
                                                      s, src, outOff, bytes, chunk);
}
template <typename T, int U>
__global__ void reduce_scatter(SymmDev s, size_t inOff, T* out, size_t count, size_t chunk) {
  cuco::reduce_scatter<Policy<ncclCoopCta, Sync::Lsa, U>, T>(
      ncclCoopCta(), issuers_ctas<ncclCoopCta>(0, gridDim.x), s, inOff, out, count, chunk);
}
template <typename T, int U>
__global__ void all_reduce(SymmDev s, size_t inOff, size_t outOff, size_t count, size_t chunk) {
  cuco::all_reduce<Policy<ncclCoopCta, Sync::Lsa, U>, T>(
      ncclCoopCta(), issuers_ctas<ncclCoopCta>(0, gridDim.x), s, inOff, outOff, count, chunk);
}
template <int U>
__global__ void all_to_all(SymmDev s, const void* src, size_t outOff, size_t rowBytes,
                           const size_t* sendCounts, const size_t* sendOffs, const size_t* dstOffs,
                           size_t chunk) {
  cuco::all_to_all<Policy<ncclCoopCta, Sync::Lsa, U>>(ncclCoopCta(),
                                                      issuers_ctas<ncclCoopCta>(0, gridDim.x), s, src,
                                                      outOff, rowBytes, sendCounts, sendOffs, dstOffs, chunk);
}
// CTA i puts its share of the bytes and signals slot firstSlot + i.
template <int U>
__global__ void put_signal(SymmDev s, int peer, const void* src, size_t dstOff, size_t bytes,
                           int firstSlot, uint64_t epoch) {
  size_t per = (bytes + gridDim.x - 1) / gridDim.x;
  per = (per + 15) / 16 * 16;
  size_t b = (size_t)blockIdx.x * per;
  size_t n = b < bytes ? (bytes - b < per ? bytes - b : per) : 0;
  cuco::put_signal<Policy<ncclCoopCta, Sync::None, U>>(ncclCoopCta(), s, peer,
                                                       static_cast<const char*>(src) + b, dstOff + b,
                                                       n, firstSlot + blockIdx.x, epoch);
}
__global__ void wait_signal(SymmDev s, int src, int firstSlot, uint64_t epoch) {
  cuco::wait_signal(ncclCoopCta(), s, src, firstSlot + blockIdx.x, epoch);
}
__global__ void barrier(SymmDev s) { cuco::lsa_barrier(ncclCoopCta(), s, 0); }
// out[p] = where LSA peer p's window starts, as seen from this process (ce.cuh).
__global__ void lsa_bases(ncclWindow_t win, int nranks, void** out) {
  for (int p = threadIdx.x; p < nranks; p += blockDim.x) out[p] = ncclGetLsaPointer(win, 0, p);
}
}  // namespace kern


// All-gather of countPerRank T's per rank from src (nullptr: in place, the
// block already sits at outOff + rank*bytes) into the window at outOff.
template <typename T>
int all_gather(Symm& s, const T* src, size_t outOff, size_t countPerRank, cudaStream_t st,
               Launch cfg = Launch()) {
  size_t bytes = countPerRank * sizeof(T);
  CUCO_ARG_TRY(outOff + bytes * s.nranks <= s.dataBytes, "out of window: off=%zu bytes=%zu x %d",
               outOff, bytes, s.nranks);
  Launch l;
  CUCO_TRY(resolve_launch(s, Op::AllGather, bytes, cfg, &l));
  const void* from = src ? (const void*)src : (const void*)s.local<char>(outOff + s.rank * bytes);
  SymmDev d = s.dev();
  switch (l.unroll) {
    case 1: CUCO_TRY((fit_threads<kern::all_gather<CUCO_UNROLL_(1)>>(&l))); kern::all_gather<CUCO_UNROLL_(1)><<<l.ctas, l.threads, 0, st>>>(d, from, outOff, bytes, l.chunk); break;
    case 2: CUCO_TRY((fit_threads<kern::all_gather<CUCO_UNROLL_(2)>>(&l))); kern::all_gather<CUCO_UNROLL_(2)><<<l.ctas, l.threads, 0, st>>>(d, from, outOff, bytes, l.chunk); break;
    case 4: CUCO_TRY((fit_threads<kern::all_gather<CUCO_UNROLL_(4)>>(&l))); kern::all_gather<CUCO_UNROLL_(4)><<<l.ctas, l.threads, 0, st>>>(d, from, outOff, bytes, l.chunk); break;
    default: CUCO_TRY((fit_threads<kern::all_gather<CUCO_UNROLL_(8)>>(&l))); kern::all_gather<CUCO_UNROLL_(8)><<<l.ctas, l.threads, 0, st>>>(d, from, outOff, bytes, l.chunk); break;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// Reduce-scatter (sum) of count*nranks T's at window offset inOff; rank r's
// block of count T's goes to out.
template <typename T>
int reduce_scatter(Symm& s, size_t inOff, T* out, size_t count, cudaStream_t st,
                   Launch cfg = Launch()) {
  CUCO_ARG_TRY(inOff + count * sizeof(T) * s.nranks <= s.dataBytes, "input out of window");
  Launch l;
  CUCO_TRY(resolve_launch(s, Op::ReduceScatter, count * sizeof(T), cfg, &l));
  SymmDev d = s.dev();
  switch (l.unroll) {
    case 1: CUCO_TRY((fit_threads<kern::reduce_scatter<T, CUCO_UNROLL_(1)>>(&l))); kern::reduce_scatter<T, CUCO_UNROLL_(1)><<<l.ctas, l.threads, 0, st>>>(d, inOff, out, count, l.chunk); break;
    case 2: CUCO_TRY((fit_threads<kern::reduce_scatter<T, CUCO_UNROLL_(2)>>(&l))); kern::reduce_scatter<T, CUCO_UNROLL_(2)><<<l.ctas, l.threads, 0, st>>>(d, inOff, out, count, l.chunk); break;
    case 4: CUCO_TRY((fit_threads<kern::reduce_scatter<T, CUCO_UNROLL_(4)>>(&l))); kern::reduce_scatter<T, CUCO_UNROLL_(4)><<<l.ctas, l.threads, 0, st>>>(d, inOff, out, count, l.chunk); break;
    default: CUCO_TRY((fit_threads<kern::reduce_scatter<T, CUCO_UNROLL_(8)>>(&l))); kern::reduce_scatter<T, CUCO_UNROLL_(8)><<<l.ctas, l.threads, 0, st>>>(d, inOff, out, count, l.chunk); break;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// All-reduce (sum) of count T's at window offset inOff into window offset
// outOff (may equal inOff).
template <typename T>
int all_reduce(Symm& s, size_t inOff, size_t outOff, size_t count, cudaStream_t st,
               Launch cfg = Launch()) {
  CUCO_ARG_TRY(inOff + count * sizeof(T) <= s.dataBytes && outOff + count * sizeof(T) <= s.dataBytes,
               "buffer out of window");
  CUCO_ARG_TRY(outOff == inOff || outOff + count * sizeof(T) <= inOff || inOff + count * sizeof(T) <= outOff,
               "partly overlapping in/out");
  Launch l;
  CUCO_TRY(resolve_launch(s, Op::AllReduce, count * sizeof(T), cfg, &l));
  SymmDev d = s.dev();
  switch (l.unroll) {
    case 1: CUCO_TRY((fit_threads<kern::all_reduce<T, CUCO_UNROLL_(1)>>(&l))); kern::all_reduce<T, CUCO_UNROLL_(1)><<<l.ctas, l.threads, 0, st>>>(d, inOff, outOff, count, l.chunk); break;
    case 2: CUCO_TRY((fit_threads<kern::all_reduce<T, CUCO_UNROLL_(2)>>(&l))); kern::all_reduce<T, CUCO_UNROLL_(2)><<<l.ctas, l.threads, 0, st>>>(d, inOff, outOff, count, l.chunk); break;
    case 4: CUCO_TRY((fit_threads<kern::all_reduce<T, CUCO_UNROLL_(4)>>(&l))); kern::all_reduce<T, CUCO_UNROLL_(4)><<<l.ctas, l.threads, 0, st>>>(d, inOff, outOff, count, l.chunk); break;
    default: CUCO_TRY((fit_threads<kern::all_reduce<T, CUCO_UNROLL_(8)>>(&l))); kern::all_reduce<T, CUCO_UNROLL_(8)><<<l.ctas, l.threads, 0, st>>>(d, inOff, outOff, count, l.chunk); break;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// All-to-all in rows of rowBytes (see cuco::all_to_all); counts/offsets are
// device arrays of nranks entries. maxSendBytes, from which the default
// launch is chosen, must be the same on every rank (the most any rank sends
// in this call, or a bound on it), as must cfg: each CTA meets the peers'
// CTA of the same index at the kernel's barriers, so ranks that launched
// different CTA counts would pass them unpaired.
inline int all_to_all(Symm& s, const void* src, size_t outOff, size_t rowBytes,
                      const size_t* sendCounts, const size_t* sendOffs, const size_t* dstOffs,
                      size_t maxSendBytes, cudaStream_t st, Launch cfg = Launch()) {
  Launch l;
  CUCO_TRY(resolve_launch(s, Op::AllToAll, maxSendBytes, cfg, &l));
  SymmDev d = s.dev();
  switch (l.unroll) {
    case 1: CUCO_TRY((fit_threads<kern::all_to_all<CUCO_UNROLL_(1)>>(&l))); kern::all_to_all<CUCO_UNROLL_(1)><<<l.ctas, l.threads, 0, st>>>(d, src, outOff, rowBytes, sendCounts, sendOffs, dstOffs, l.chunk); break;
    case 2: CUCO_TRY((fit_threads<kern::all_to_all<CUCO_UNROLL_(2)>>(&l))); kern::all_to_all<CUCO_UNROLL_(2)><<<l.ctas, l.threads, 0, st>>>(d, src, outOff, rowBytes, sendCounts, sendOffs, dstOffs, l.chunk); break;
    case 4: CUCO_TRY((fit_threads<kern::all_to_all<CUCO_UNROLL_(4)>>(&l))); kern::all_to_all<CUCO_UNROLL_(4)><<<l.ctas, l.threads, 0, st>>>(d, src, outOff, rowBytes, sendCounts, sendOffs, dstOffs, l.chunk); break;
    default: CUCO_TRY((fit_threads<kern::all_to_all<CUCO_UNROLL_(8)>>(&l))); kern::all_to_all<CUCO_UNROLL_(8)><<<l.ctas, l.threads, 0, st>>>(d, src, outOff, rowBytes, sendCounts, sendOffs, dstOffs, l.chunk); break;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// Put `bytes` from src into peer's window at dstOff with l.ctas CTAs, each
// signalling slot firstSlot + i with `epoch` (from Symm::next_epoch()).
inline int put_signal(Symm& s, int peer, const void* src, size_t dstOff, size_t bytes, int firstSlot,
                      uint64_t epoch, cudaStream_t st, Launch cfg = Launch()) {
  Launch l;
  CUCO_TRY(resolve_launch(s, Op::Put, bytes, cfg, &l));
  CUCO_ARG_TRY(peer >= 0 && peer < s.nranks && peer != s.rank, "peer=%d", peer);
  CUCO_ARG_TRY(firstSlot >= 0 && firstSlot + l.ctas <= s.nslots, "slots %d..%d of %d", firstSlot,
               firstSlot + l.ctas, s.nslots);
  CUCO_ARG_TRY(dstOff + bytes <= s.dataBytes, "out of window");
  SymmDev d = s.dev();
  switch (l.unroll) {
    case 1: CUCO_TRY((fit_threads<kern::put_signal<CUCO_UNROLL_(1)>>(&l))); kern::put_signal<CUCO_UNROLL_(1)><<<l.ctas, l.threads, 0, st>>>(d, peer, src, dstOff, bytes, firstSlot, epoch); break;
    case 2: CUCO_TRY((fit_threads<kern::put_signal<CUCO_UNROLL_(2)>>(&l))); kern::put_signal<CUCO_UNROLL_(2)><<<l.ctas, l.threads, 0, st>>>(d, peer, src, dstOff, bytes, firstSlot, epoch); break;
    case 4: CUCO_TRY((fit_threads<kern::put_signal<CUCO_UNROLL_(4)>>(&l))); kern::put_signal<CUCO_UNROLL_(4)><<<l.ctas, l.threads, 0, st>>>(d, peer, src, dstOff, bytes, firstSlot, epoch); break;
    default: CUCO_TRY((fit_threads<kern::put_signal<CUCO_UNROLL_(8)>>(&l))); kern::put_signal<CUCO_UNROLL_(8)><<<l.ctas, l.threads, 0, st>>>(d, peer, src, dstOff, bytes, firstSlot, epoch); break;
  }
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// Waits (on stream st) for nSlots signals from src starting at firstSlot.
inline int wait_signal(Symm& s, int src, int firstSlot, int nSlots, uint64_t epoch, cudaStream_t st) {
  CUCO_ARG_TRY(firstSlot >= 0 && nSlots > 0 && firstSlot + nSlots <= s.nslots, "slots");
  CUCO_ARG_TRY(kernel_max_threads<kern::wait_signal>() > 0, "cannot load the wait kernel");
  kern::wait_signal<<<nSlots, 32, 0, st>>>(s.dev(), src, firstSlot, epoch);
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// Device-side barrier across all ranks (one CTA, LSA barrier 0, acq_rel).
inline int device_barrier(Symm& s, cudaStream_t st) {
  CUCO_ARG_TRY(kernel_max_threads<kern::barrier>() > 0, "cannot load the barrier kernel");
  kern::barrier<<<1, 32, 0, st>>>(s.dev());
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

}  // namespace cuco

namespace cuco {
// Threads per CTA the launcher will really use for (op, T, unroll) when asked
// for `want` (kernels whose registers do not allow `want` get fewer).
template <typename T> inline int effective_threads(Op op, int unroll, int want) {
  int m = -1;
  switch (op) {
    case Op::AllGather:
      m = unroll == 1 ? kernel_max_threads<kern::all_gather<CUCO_UNROLL_(1)>>() : unroll == 2 ? kernel_max_threads<kern::all_gather<CUCO_UNROLL_(2)>>()
        : unroll == 4 ? kernel_max_threads<kern::all_gather<CUCO_UNROLL_(4)>>() : kernel_max_threads<kern::all_gather<CUCO_UNROLL_(8)>>();
      break;
    case Op::ReduceScatter:
      m = unroll == 1 ? kernel_max_threads<kern::reduce_scatter<T, CUCO_UNROLL_(1)>>() : unroll == 2 ? kernel_max_threads<kern::reduce_scatter<T, CUCO_UNROLL_(2)>>()
        : unroll == 4 ? kernel_max_threads<kern::reduce_scatter<T, CUCO_UNROLL_(4)>>() : kernel_max_threads<kern::reduce_scatter<T, CUCO_UNROLL_(8)>>();
      break;
    case Op::AllReduce:
      m = unroll == 1 ? kernel_max_threads<kern::all_reduce<T, CUCO_UNROLL_(1)>>() : unroll == 2 ? kernel_max_threads<kern::all_reduce<T, CUCO_UNROLL_(2)>>()
        : unroll == 4 ? kernel_max_threads<kern::all_reduce<T, CUCO_UNROLL_(4)>>() : kernel_max_threads<kern::all_reduce<T, CUCO_UNROLL_(8)>>();
      break;
    case Op::AllToAll:
      m = unroll == 1 ? kernel_max_threads<kern::all_to_all<CUCO_UNROLL_(1)>>() : unroll == 2 ? kernel_max_threads<kern::all_to_all<CUCO_UNROLL_(2)>>()
        : unroll == 4 ? kernel_max_threads<kern::all_to_all<CUCO_UNROLL_(4)>>() : kernel_max_threads<kern::all_to_all<CUCO_UNROLL_(8)>>();
      break;
    case Op::Put:
      m = unroll == 1 ? kernel_max_threads<kern::put_signal<CUCO_UNROLL_(1)>>() : unroll == 2 ? kernel_max_threads<kern::put_signal<CUCO_UNROLL_(2)>>()
        : unroll == 4 ? kernel_max_threads<kern::put_signal<CUCO_UNROLL_(4)>>() : kernel_max_threads<kern::put_signal<CUCO_UNROLL_(8)>>();
      break;
  }
  if (m <= 0) return want;
  return want > m ? m / 32 * 32 : want;
}
}  // namespace cuco

namespace cuco {
// Loads every stand-alone kernel of the library for element type T on the
// current device. Call it once per device before any kernel that spins on a
// signal is in flight: with lazy module loading (the CUDA default), loading a
// kernel while another kernel of the device spins on a flag can deadlock.
template <typename T> inline int load_kernels() {
  const Op ops[] = {Op::AllGather, Op::ReduceScatter, Op::AllReduce, Op::AllToAll, Op::Put};
  for (Op op : ops)
    for (int u = 1; u <= 8; u *= 2) (void)effective_threads<T>(op, u, 1024);
  CUCO_ARG_TRY(kernel_max_threads<kern::wait_signal>() > 0 && kernel_max_threads<kern::barrier>() > 0 &&
                   kernel_max_threads<kern::lsa_bases>() > 0,
               "cannot load the library kernels");
  return 0;
}
}  // namespace cuco
