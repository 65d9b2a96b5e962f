// Copy-engine transport: moves data into the peers' windows with copies on
// their LSA addresses (ce_copy), so the DMA engines carry it over
// NVLink and no SM is spent on the copy. A compute kernel running beside it
// keeps every SM; an SM-driven copy (launch.cuh) competes with it for them,
// and a kernel that holds every SM (a large GEMM) can keep it from starting
// at all.
//
// The ranks meet at a rendezvous that takes no SM (ce_rendezvous): each rank
// writes a sequence number into its word of every peer's window with a
// stream memory operation (cuStreamWriteValue64), and the stream waits
// (cuStreamWaitValue64, GEQ) until every peer's word in its own window has
// reached the same number. Data copied to a peer before the stamp on the
// same stream has landed there when the peer sees the stamp.
// Rendezvous of one window are issued from one stream at a time (the ranks
// count them in the same order). CUCO_CE_SYNC=0 in the environment uses the
// one-CTA LSA barrier kernel instead.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include "check.cuh"
#include "dtype.cuh"
#include "host.cuh"
#include "launch.cuh"

namespace cuco {

// Fills s.lsaBase once per window. Synchronizes a private stream the first
// time (the kernel waits on nothing, so this cannot block on a peer).
inline int lsa_peer_bases(Symm& s) {
  if (s.haveLsaBases) return 0;
  CUCO_ARG_TRY(s.win && s.nranks > 0 && s.nranks <= kMaxLsaRanks, "window not set up or %d ranks (at most %d)",
               s.nranks, kMaxLsaRanks);
  CUCO_ARG_TRY(kernel_max_threads<kern::lsa_bases>() > 0, "cannot load the lsa_bases kernel");
  cudaStream_t st = nullptr;
  void** dev = nullptr;
  CUCO_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaError_t r = cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(void*) * s.nranks);
  if (r == cudaSuccess) {
    kern::lsa_bases<<<1, 64, 0, st>>>(s.win, s.nranks, dev);
    r = cudaGetLastError();
  }
  if (r == cudaSuccess) r = cudaMemcpyAsync(s.lsaBase, dev, sizeof(void*) * s.nranks, cudaMemcpyDeviceToHost, st);
  if (r == cudaSuccess) r = cudaStreamSynchronize(st);
  if (dev) cudaFree(dev);
  cudaStreamDestroy(st);
  CUCO_CUDA_TRY(r);
  for (int p = 0; p < s.nranks; p++) CUCO_ARG_TRY(s.lsaBase[p] != nullptr, "no LSA address for peer %d", p);
  s.haveLsaBases = true;
  return 0;
}

// The driver's stream memory operations, looked up once through the runtime
// (nothing links libcuda). ok is false where the driver has none.
struct StreamMemOps {
  using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  WriteFn write64 = nullptr;
  WaitFn wait64 = nullptr;
  bool ok = false;
};

inline const StreamMemOps& stream_mem_ops() {
  static StreamMemOps ops = [] {
    StreamMemOps o;
    void* w = nullptr;
    void* t = nullptr;
    cudaDriverEntryPointQueryResult qw, qt;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &w, 12000, cudaEnableDefault, &qw) ==
            cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &t, 12000, cudaEnableDefault, &qt) ==
            cudaSuccess &&
        qw == cudaDriverEntryPointSuccess && qt == cudaDriverEntryPointSuccess && w && t) {
      o.write64 = reinterpret_cast<StreamMemOps::WriteFn>(w);
      o.wait64 = reinterpret_cast<StreamMemOps::WaitFn>(t);
      o.ok = true;
    }
    return o;
  }();
  return ops;
}

// One copy for the copy engine: cudaMemcpyBatchAsync with the hint that it
// should overlap compute (cudaMemcpyFlagPreferOverlapWithCompute). Measured
// on an H200 (tests/gpu/ce_sync_test.cu): a copy within one GPU does not
// complete while a kernel holds every SM, with or without the hint, so it is
// run by a kernel; copies to a peer's memory over NVLink are the ones the
// copy engines carry (NCCL's zero-CTA collectives rely on it; not measurable
// on one GPU). CUCO_CE_HINT=0 in the environment uses plain cudaMemcpyAsync.
inline int ce_copy(void* dst, const void* src, size_t bytes, cudaStream_t st) {
  static const bool hint = [] {
    const char* v = std::getenv("CUCO_CE_HINT");
    return !(v && v[0] == '0' && v[1] == '\0');
  }();
  if (bytes == 0) return 0;
  if (!hint) {
    CUCO_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    return 0;
  }
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t attrIdx = 0;
  void* dsts[1] = {dst};
  const void* srcs[1] = {src};
  size_t sizes[1] = {bytes};
  CUCO_CUDA_TRY(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &attrIdx, 1, st));
  return 0;
}

// Whether rendezvous use stream memory operations (the default) or the
// one-CTA LSA barrier kernel (CUCO_CE_SYNC=0, or no stream memory operations).
inline bool ce_sync_zero_sm() {
  static const bool on = [] {
    const char* v = std::getenv("CUCO_CE_SYNC");
    return !(v && v[0] == '0' && v[1] == '\0');
  }();
  return on && stream_mem_ops().ok;
}

// The rendezvous primitive on raw addresses, so that it can be exercised
// without a communicator: writes `seq` into peerWord[p] for every p != me
// (the word for `me` in peer p's memory) with a stream memory operation, then
// waits until myWords[p] >= seq for every p != me. Both are carried out by
// the GPU's front end: no SM, no copy (a device-to-device copy within one
// GPU is run by a kernel, tests/gpu/ce_sync_test.cu shows). The write has
// the default memory barrier: what the stream wrote before it is visible
// first.
inline int stamp_and_wait(uint64_t seq, void* const* peerWord, const uint64_t* myWords, int me, int n,
                          cudaStream_t st) {
  const StreamMemOps& ops = stream_mem_ops();
  CUCO_ARG_TRY(ops.ok, "stream memory operations are not available from this driver");
  CUstream cs = reinterpret_cast<CUstream>(st);
  for (int k = 1; k < n; k++) {
    int p = (me + k) % n;
    CUdeviceptr w = reinterpret_cast<CUdeviceptr>(peerWord[p]);
    CUCO_ARG_TRY(ops.write64(cs, w, seq, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS,
                 "cuStreamWriteValue64 to peer %d failed", p);
  }
  for (int k = 1; k < n; k++) {
    int p = (me + k) % n;
    CUdeviceptr w = reinterpret_cast<CUdeviceptr>(myWords + p);
    CUCO_ARG_TRY(ops.wait64(cs, w, seq, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS,
                 "cuStreamWaitValue64 failed");
  }
  return 0;
}

// Every rank's earlier work on stream st (copies to peers included) is done
// before any rank's later work on st starts. No SM is used unless
// ce_sync_zero_sm() is false.
inline int ce_rendezvous(Symm& s, cudaStream_t st) {
  if (!ce_sync_zero_sm()) return device_barrier(s, st);
  if (s.nranks <= 1) return 0;
  CUCO_TRY(lsa_peer_bases(s));
  uint64_t seq = ++s.ceSeq;
  uint64_t* words = s.local<uint64_t>(s.ceOff);
  void* peerWord[kMaxLsaRanks];
  for (int p = 0; p < s.nranks; p++)
    peerWord[p] = s.peer<char>(p, s.ceOff + (size_t)s.rank * sizeof(uint64_t));
  return stamp_and_wait(seq, peerWord, words, s.rank, s.nranks, st);
}

// All-gather of `bytes` per rank with the copy engine: rank r's block (src,
// or in place at outOff + r*bytes when src is nullptr) lands at outOff +
// r*bytes in every rank's window. On stream st: a rendezvous (every rank
// has reached the call, so its earlier work on the output is done), one
// cudaMemcpyAsync per destination rank, starting with the next rank so that
// no rank is every rank's first target, and a second rendezvous (every block
// has landed everywhere). The window's offsets are the same on every rank.
inline int all_gather_ce(Symm& s, const void* src, size_t outOff, size_t bytes, cudaStream_t st) {
  CUCO_ARG_TRY(outOff + bytes * (size_t)s.nranks <= s.dataBytes, "all_gather_ce: %zu bytes per rank at %zu "
               "do not fit the window's %zu", bytes, outOff, s.dataBytes);
  if (bytes == 0) return 0;
  CUCO_TRY(lsa_peer_bases(s));
  CUCO_TRY(ce_rendezvous(s, st));
  const void* from = src ? src : s.local<char>(outOff + (size_t)s.rank * bytes);
  for (int k = 1; k <= s.nranks; k++) {
    int p = (s.rank + k) % s.nranks;
    if (p == s.rank && !src) continue;  // in place: the block is already there
    char* to = s.peer<char>(p, outOff + (size_t)s.rank * bytes);
    CUCO_TRY(ce_copy(to, from, bytes, st));
  }
  CUCO_TRY(ce_rendezvous(s, st));
  return 0;
}

// All-to-all of `rowBytes` per (source, destination) pair with the copy
// engine: block p of src (src + p*rowBytes) lands at outOff + rank*rowBytes
// in rank p's window. Same rendezvous and order as all_gather_ce; src must
// not overlap the output.
inline int all_to_all_ce(Symm& s, const void* src, size_t outOff, size_t rowBytes, cudaStream_t st) {
  CUCO_ARG_TRY(outOff + rowBytes * (size_t)s.nranks <= s.dataBytes, "all_to_all_ce: %zu bytes per rank at %zu "
               "do not fit the window's %zu", rowBytes, outOff, s.dataBytes);
  if (rowBytes == 0) return 0;
  CUCO_TRY(lsa_peer_bases(s));
  CUCO_TRY(ce_rendezvous(s, st));
  for (int k = 1; k <= s.nranks; k++) {
    int p = (s.rank + k) % s.nranks;
    const char* from = static_cast<const char*>(src) + (size_t)p * rowBytes;
    char* to = s.peer<char>(p, outOff + (size_t)s.rank * rowBytes);
    CUCO_TRY(ce_copy(to, from, rowBytes, st));
  }
  CUCO_TRY(ce_rendezvous(s, st));
  return 0;
}

namespace kern {
// out[i] = base[i] + scratch[k * stride + i] summed over k < peers: the sums
// of one rank's part of a copy-engine all-reduce or reduce-scatter (the
// peers' parts pulled into scratch; base may be out). Vec: 16 bytes at a
// time (every pointer and the stride aligned).
template <typename T, bool Vec>
__global__ void ce_sum(T* out, const T* base, const T* scratch, size_t len, size_t stride, int peers) {
  size_t step = (size_t)gridDim.x * blockDim.x;
  if constexpr (Vec) {
    constexpr int n = 16 / sizeof(T);
    int4* o = reinterpret_cast<int4*>(out);
    const int4* b = reinterpret_cast<const int4*>(base);
    const int4* sc = reinterpret_cast<const int4*>(scratch);
    for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < len / n; v += step) {
      Pack<T> acc;
      acc.set(b[v]);
      for (int k = 0; k < peers; k++) acc.add(sc[k * (stride / n) + v]);
      o[v] = acc.get();
    }
  } else {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += step) {
      typename DType<T>::Acc acc = DType<T>::to(base[i]);
      for (int k = 0; k < peers; k++) acc += DType<T>::to(scratch[k * stride + i]);
      out[i] = DType<T>::from(acc);
    }
  }
}
}  // namespace kern

// The elements of rank p's part of an n-element copy-engine all-reduce
// among `ranks`: equal parts rounded to 16 bytes, the last ones shorter.
template <typename T> inline size_t ce_part_len(size_t n, int ranks) {
  constexpr size_t v = 16 / sizeof(T);
  return (n + (size_t)ranks * v - 1) / ((size_t)ranks * v) * v;
}

// out[i] = base[i] + the `peers` copies in scratch (stride elements apart),
// by one short kernel on st; 16 bytes at a time where every pointer and the
// stride allow it. With no peer, a copy (none when base is out).
template <typename T>
inline int ce_sum_into(T* out, const T* base, const T* sc, size_t len, size_t stride, int peers,
                       cudaStream_t st) {
  if (!len || (peers < 1 && out == base)) return 0;
  constexpr size_t v = 16 / sizeof(T);
  bool vec = (reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(base) |
              reinterpret_cast<uintptr_t>(sc)) % 16 == 0 &&
             len % v == 0 && stride % v == 0;
  size_t items = vec ? len / v : len;
  unsigned blocks = (unsigned)std::min<size_t>((items + 255) / 256, 1024);
  if (vec)
    kern::ce_sum<T, true><<<blocks, 256, 0, st>>>(out, base, sc, len, stride, peers);
  else
    kern::ce_sum<T, false><<<blocks, 256, 0, st>>>(out, base, sc, len, stride, peers);
  CUCO_CUDA_TRY(cudaGetLastError());
  return 0;
}

// Pulls len elements at window offset off from every peer (starting with
// the next rank) into scratch, the k-th peer's copy stride elements after
// the (k-1)-th: what this rank sums of a copy-engine all-reduce or
// reduce-scatter.
template <typename T>
inline int ce_pull_peers(const Symm& s, size_t off, T* scratch, size_t len, size_t stride, cudaStream_t st) {
  for (int d = 1; d < s.nranks && len; d++) {
    int p = (s.rank + d) % s.nranks;
    CUCO_TRY(ce_copy(scratch + (size_t)(d - 1) * stride, s.peer<const T>(p, off), len * sizeof(T), st));
  }
  return 0;
}

// The scratch all_reduce_ce needs for n elements: the peers' copies of
// this rank's part.
template <typename T> inline size_t all_reduce_ce_scratch(size_t n, int ranks) {
  return ranks > 1 ? (size_t)(ranks - 1) * ce_part_len<T>(n, ranks) * sizeof(T) : 0;
}

// In-place sum of n elements at window offset off over every rank, with the
// copy engines carrying the data and one short SM kernel a rank (the sum of
// its part): a rendezvous (every rank's input made); each rank pulls its
// part from every peer's window into scratch (plain device memory of
// all_reduce_ce_scratch bytes) and adds them to its own; a rendezvous
// (every part summed, every pull done); each rank pushes its summed part
// into every peer's window; a rendezvous (every part landed everywhere).
// Like reduce-scatter then all-gather, 2 (ranks - 1) / ranks of the data
// over NVLink, no SM held while it moves. One rank: nothing to do.
template <typename T>
inline int all_reduce_ce(Symm& s, size_t off, size_t n, void* scratch, cudaStream_t st) {
  CUCO_ARG_TRY(off + n * sizeof(T) <= s.dataBytes, "all_reduce_ce: %zu elements at %zu do not fit the window's %zu "
               "bytes", n, off, s.dataBytes);
  if (s.nranks <= 1 || n == 0) return 0;
  CUCO_ARG_TRY(scratch != nullptr, "all_reduce_ce: no scratch");
  CUCO_TRY(lsa_peer_bases(s));
  size_t q = ce_part_len<T>(n, s.nranks);
  size_t lo = std::min(n, (size_t)s.rank * q), len = std::min(n, lo + q) - lo;
  T* mine = s.local<T>(off) + lo;
  T* sc = static_cast<T*>(scratch);
  CUCO_TRY(ce_rendezvous(s, st));
  CUCO_TRY(ce_pull_peers(s, off + lo * sizeof(T), sc, len, q, st));
  CUCO_TRY(ce_sum_into(mine, mine, sc, len, q, s.nranks - 1, st));
  CUCO_TRY(ce_rendezvous(s, st));
  for (int d = 1; d < s.nranks && len; d++) {
    int p = (s.rank + d) % s.nranks;
    T* theirs = s.peer<T>(p, off) + lo;
    CUCO_TRY(ce_copy(theirs, mine, len * sizeof(T), st));
  }
  CUCO_TRY(ce_rendezvous(s, st));
  return 0;
}

// The scratch reduce_scatter_ce needs for `count` output elements a rank:
// the peers' copies of this rank's part.
template <typename T> inline size_t reduce_scatter_ce_scratch(size_t count, int ranks) {
  return ranks > 1 ? (size_t)(ranks - 1) * round_up(count, 16 / sizeof(T)) * sizeof(T) : 0;
}

// Sum-reduce-scatter of elements [lo, hi) of every rank's part with the
// copy engines. The input, `count` elements for each rank, is at window
// offset inOff on every rank; rank r's out[i] becomes the sum over ranks of
// input element r*count + i, for lo <= i < hi (lo 0 and hi count: the whole
// reduce-scatter; a range lets a producer that makes every rank's part step
// by step have each step reduced as soon as it is made, all ranks pulling at
// once). On stream st: a rendezvous (every rank's range made); this rank
// pulls its part's range from every peer's window into scratch
// (reduce_scatter_ce_scratch bytes) and one short kernel writes its own plus
// the peers' into out (in place when out is its part of the input); with
// `closing`, a second rendezvous (every pull done: the inputs may be
// rewritten). Ranges of one input are issued in order on one stream, the
// last one closing. One rank: a copy.
template <typename T>
inline int reduce_scatter_ce(Symm& s, size_t inOff, T* out, size_t count, size_t lo, size_t hi, void* scratch,
                             cudaStream_t st, bool closing = true) {
  CUCO_ARG_TRY(lo <= hi && hi <= count && inOff + count * (size_t)s.nranks * sizeof(T) <= s.dataBytes,
               "reduce_scatter_ce: elements %zu..%zu of %zu a rank at %zu do not fit the window's %zu bytes", lo, hi,
               count, inOff, s.dataBytes);
  size_t len = hi - lo, at = (size_t)s.rank * count + lo;
  if (s.nranks > 1) {
    CUCO_ARG_TRY(scratch != nullptr || !len, "reduce_scatter_ce: no scratch");
    CUCO_TRY(lsa_peer_bases(s));
    CUCO_TRY(ce_rendezvous(s, st));
  }
  size_t stride = round_up(len, 16 / sizeof(T));
  T* sc = static_cast<T*>(scratch);
  CUCO_TRY(ce_pull_peers(s, inOff + at * sizeof(T), sc, len, stride, st));
  CUCO_TRY(ce_sum_into(out + lo, s.local<T>(inOff) + at, sc, len, stride, s.nranks - 1, st));
  if (closing && s.nranks > 1) CUCO_TRY(ce_rendezvous(s, st));
  return 0;
}

}  // namespace cuco
