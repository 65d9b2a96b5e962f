// LSA backend: collectives as __device__ functions (callable by a chosen set
// of CTAs/warps inside a compute kernel) built from two primitives:
//   push  - load local data once, store it into peers' windows (all-gather,
//           all-to-all, put-with-signal);
//   pull-reduce - load the same range from every rank's window, reduce in the
//           accumulator type, store locally or push to every rank
//           (reduce-scatter, all-reduce).
// Peer memory is reached through ncclGetLsaPointer (NVLink load/store).
// Work is split between issuer units: unit u of every rank takes the same
// chunks (u, u+units, ...) of each buffer; inside a chunk the lanes of the
// unit's coop stride over 16-byte vectors, `unroll` vectors in flight each.
// Misaligned buffers fall back to 4-byte or 1-byte moves (exact, slower).
#pragma once
#include <cstdint>
#include <cuda/atomic>
#include <nccl_device.h>
#include "dtype.cuh"
#include "host.cuh"
#include "policy.cuh"

namespace cuco {
namespace detail {

__device__ __forceinline__ size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Copies nvec V's from src to window offset dstOff of peers firstPeer,
// firstPeer+1, ... (npeers of them, wrapping at nranks).
template <typename V, int U, class Coop>
__device__ __forceinline__ void push_vec(Coop coop, Issuers is, const SymmDev& s, const V* src,
                                         size_t dstOff, size_t nvec, int firstPeer, int npeers,
                                         size_t chunkVec) {
  const int lane = coop.thread_rank(), nl = coop.size();
  if (chunkVec == 0) chunkVec = ceil_div(nvec, (size_t)is.units);
  if (chunkVec == 0) return;
  for (size_t c0 = (size_t)is.unit * chunkVec; c0 < nvec; c0 += (size_t)is.units * chunkVec) {
    const size_t c1 = c0 + chunkVec < nvec ? c0 + chunkVec : nvec;
    for (size_t i0 = c0 + lane; i0 < c1; i0 += (size_t)nl * U) {
      V r[U];
#pragma unroll
      for (int k = 0; k < U; k++) {
        size_t i = i0 + (size_t)k * nl;
        if (i < c1) r[k] = src[i];
      }
      for (int j = 0; j < npeers; j++) {
        int p = firstPeer + j;
        p = p % s.nranks;
        V* d = static_cast<V*>(ncclGetLsaPointer(s.win, dstOff, p));
        if (d == src) continue;  // in place
#pragma unroll
        for (int k = 0; k < U; k++) {
          size_t i = i0 + (size_t)k * nl;
          if (i < c1) d[i] = r[k];
        }
      }
    }
  }
}

// Byte copy to peers with the widest vector the alignment allows.
template <int U, class Coop>
__device__ __forceinline__ void push_bytes(Coop coop, Issuers is, const SymmDev& s,
                                           const void* src, size_t dstOff, size_t bytes,
                                           int firstPeer, int npeers, size_t chunkBytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src) | dstOff;
  if (a % 16 == 0) {
    size_t nvec = bytes / 16, done = nvec * 16;
    push_vec<int4, U>(coop, is, s, static_cast<const int4*>(src), dstOff, nvec, firstPeer, npeers,
                      chunkBytes / 16);
    if (done < bytes && is.unit == is.units - 1)
      push_vec<uint8_t, 1>(coop, Issuers{0, 1}, s, static_cast<const uint8_t*>(src) + done,
                           dstOff + done, bytes - done, firstPeer, npeers, 0);
  } else if (a % 4 == 0) {
    size_t nvec = bytes / 4, done = nvec * 4;
    push_vec<uint32_t, 1>(coop, is, s, static_cast<const uint32_t*>(src), dstOff, nvec, firstPeer,
                          npeers, chunkBytes / 4);
    if (done < bytes && is.unit == is.units - 1)
      push_vec<uint8_t, 1>(coop, Issuers{0, 1}, s, static_cast<const uint8_t*>(src) + done,
                           dstOff + done, bytes - done, firstPeer, npeers, 0);
  } else {
    push_vec<uint8_t, 1>(coop, is, s, static_cast<const uint8_t*>(src), dstOff, bytes, firstPeer,
                         npeers, chunkBytes);
  }
}

// Output of a pull-reduce: a local pointer, or window offset outOff on every rank.
struct ReduceOut {
  void* local;    // non-null: store here
  size_t outOff;  // else: push to outOff on all ranks
};

template <typename T, int U, class Coop>
__device__ __forceinline__ void reduce_vec(Coop coop, Issuers is, const SymmDev& s, size_t inOff,
                                           size_t nvec, ReduceOut out, size_t chunkVec) {
  const int lane = coop.thread_rank(), nl = coop.size();
  const int n = s.nranks, me = s.rank;
  const int4* mine = static_cast<const int4*>(ncclGetLocalPointer(s.win, inOff));
  if (chunkVec == 0) chunkVec = ceil_div(nvec, (size_t)is.units);
  if (chunkVec == 0) return;
  for (size_t c0 = (size_t)is.unit * chunkVec; c0 < nvec; c0 += (size_t)is.units * chunkVec) {
    const size_t c1 = c0 + chunkVec < nvec ? c0 + chunkVec : nvec;
    for (size_t i0 = c0 + lane; i0 < c1; i0 += (size_t)nl * U) {
      Pack<T> acc[U];
#pragma unroll
      for (int k = 0; k < U; k++) {
        size_t i = i0 + (size_t)k * nl;
        if (i < c1) acc[k].set(mine[i]);
      }
      for (int j = 1; j < n; j++) {
        const int4* q = static_cast<const int4*>(ncclGetLsaPointer(s.win, inOff, (me + j) % n));
        int4 raw[U];
#pragma unroll
        for (int k = 0; k < U; k++) {
          size_t i = i0 + (size_t)k * nl;
          if (i < c1) raw[k] = q[i];
        }
#pragma unroll
        for (int k = 0; k < U; k++) {
          size_t i = i0 + (size_t)k * nl;
          if (i < c1) acc[k].add(raw[k]);
        }
      }
      int4 res[U];
#pragma unroll
      for (int k = 0; k < U; k++) res[k] = acc[k].get();
      if (out.local) {
        int4* d = static_cast<int4*>(out.local);
#pragma unroll
        for (int k = 0; k < U; k++) {
          size_t i = i0 + (size_t)k * nl;
          if (i < c1) d[i] = res[k];
        }
      } else {
        for (int j = 1; j <= n; j++) {
          int4* d = static_cast<int4*>(ncclGetLsaPointer(s.win, out.outOff, (me + j) % n));
#pragma unroll
          for (int k = 0; k < U; k++) {
            size_t i = i0 + (size_t)k * nl;
            if (i < c1) d[i] = res[k];
          }
        }
      }
    }
  }
}

// Element-wise pull-reduce of elements [0, count) (misaligned buffers, tails).
template <typename T, class Coop>
__device__ __forceinline__ void reduce_scalar(Coop coop, Issuers is, const SymmDev& s,
                                              size_t inOff, size_t count, ReduceOut out) {
  const int lane = coop.thread_rank(), nl = coop.size();
  const int n = s.nranks, me = s.rank;
  const T* mine = static_cast<const T*>(ncclGetLocalPointer(s.win, inOff));
  size_t per = ceil_div(count, (size_t)is.units);
  size_t b = (size_t)is.unit * per, e = b + per < count ? b + per : count;
  for (size_t i = b + lane; i < e; i += nl) {
    typename DType<T>::Acc acc = DType<T>::to(mine[i]);
    for (int j = 1; j < n; j++)
      acc += DType<T>::to(static_cast<const T*>(ncclGetLsaPointer(s.win, inOff, (me + j) % n))[i]);
    T r = DType<T>::from(acc);
    if (out.local) {
      static_cast<T*>(out.local)[i] = r;
    } else {
      for (int j = 1; j <= n; j++)
        static_cast<T*>(ncclGetLsaPointer(s.win, out.outOff, (me + j) % n))[i] = r;
    }
  }
}

template <typename T, int U, class Coop>
__device__ __forceinline__ void reduce_elems(Coop coop, Issuers is, const SymmDev& s, size_t inOff,
                                             size_t count, ReduceOut out, size_t chunkBytes) {
  uintptr_t a = inOff | (out.local ? reinterpret_cast<uintptr_t>(out.local) : out.outOff);
  if (a % 16 != 0) {
    reduce_scalar<T>(coop, is, s, inOff, count, out);
    return;
  }
  constexpr size_t per = 16 / sizeof(T);
  size_t nvec = count / per, done = nvec * per;
  reduce_vec<T, U>(coop, is, s, inOff, nvec, out, chunkBytes / 16);
  if (done < count && is.unit == is.units - 1) {
    ReduceOut o2 = out;
    if (o2.local) o2.local = static_cast<T*>(o2.local) + done;
    else o2.outOff += done * sizeof(T);
    reduce_scalar<T>(coop, Issuers{0, 1}, s, inOff + done * sizeof(T), count - done, o2);
  }
}

template <class P> __device__ __forceinline__ size_t chunk_of(size_t runtimeChunk) {
  return P::chunkBytes ? P::chunkBytes : runtimeChunk;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Device functions. Every thread of every issuer unit calls them with the same
// arguments; `is` names the caller's unit. With Sync::Lsa the output this
// rank holds is complete once every unit has returned (e.g. at kernel end).

// All-gather: `bytesPerRank` bytes from `src` (any local device memory, or the
// window itself for in-place) land at outOff + rank*bytesPerRank on every rank.
template <class P>
__device__ void all_gather(typename P::Coop coop, Issuers is, const SymmDev& s, const void* src,
                           size_t outOff, size_t bytesPerRank, size_t chunkBytes = 0) {
  SyncGuard<P> g(coop, s.dc, is);
  detail::push_bytes<P::unroll>(coop, is, s, src, outOff + (size_t)s.rank * bytesPerRank,
                                bytesPerRank, s.rank + 1, s.nranks, detail::chunk_of<P>(chunkBytes));
  g.finish(coop);
}

// Reduce-scatter (sum): the input is count*nranks elements at window offset
// inOff on every rank; block r (count elements) of the sum lands in `out`
// (local memory, not overlapping any rank's input) on rank r.
template <class P, typename T>
__device__ void reduce_scatter(typename P::Coop coop, Issuers is, const SymmDev& s, size_t inOff,
                               T* out, size_t count, size_t chunkBytes = 0) {
  SyncGuard<P> g(coop, s.dc, is);
  detail::reduce_elems<T, P::unroll>(coop, is, s, inOff + (size_t)s.rank * count * sizeof(T), count,
                                     detail::ReduceOut{out, 0}, detail::chunk_of<P>(chunkBytes));
  g.finish(coop);
}

// Elements of rank r's block in an all-reduce of `count` elements: blocks are
// rounded up to 16 bytes so that aligned buffers stay vectorized.
template <typename T> __host__ __device__ inline size_t ar_block(size_t count, int nranks) {
  size_t per = (count + nranks - 1) / nranks, v = 16 / sizeof(T);
  return (per + v - 1) / v * v;
}

// All-reduce (sum): count elements at window offset inOff on every rank; the
// sum lands at window offset outOff on every rank (outOff == inOff: in place).
template <class P, typename T>
__device__ void all_reduce(typename P::Coop coop, Issuers is, const SymmDev& s, size_t inOff,
                           size_t outOff, size_t count, size_t chunkBytes = 0) {
  SyncGuard<P> g(coop, s.dc, is);
  size_t per = ar_block<T>(count, s.nranks);
  size_t b = (size_t)s.rank * per;
  if (b < count) {
    size_t n = count - b < per ? count - b : per;
    detail::reduce_elems<T, P::unroll>(coop, is, s, inOff + b * sizeof(T), n,
                                       detail::ReduceOut{nullptr, outOff + b * sizeof(T)},
                                       detail::chunk_of<P>(chunkBytes));
  }
  g.finish(coop);
}

// All-to-all with per-destination counts (MoE dispatch; combine is the same
// call with the layouts swapped). Counted in rows of rowBytes bytes:
// to peer p go sendCounts[p] rows from src + sendOffs[p] rows, landing at
// window offset outOff + dstOffs[p] rows on p (dstOffs[p]: where p expects
// this rank's rows). The three arrays have nranks entries in device memory.
template <class P>
__device__ void all_to_all(typename P::Coop coop, Issuers is, const SymmDev& s, const void* src,
                           size_t outOff, size_t rowBytes, const size_t* sendCounts,
                           const size_t* sendOffs, const size_t* dstOffs, size_t chunkBytes = 0) {
  SyncGuard<P> g(coop, s.dc, is);
  for (int j = 1; j <= s.nranks; j++) {
    int p = (s.rank + j) % s.nranks;
    detail::push_bytes<P::unroll>(coop, is, s, static_cast<const char*>(src) + sendOffs[p] * rowBytes,
                                  outOff + dstOffs[p] * rowBytes, sendCounts[p] * rowBytes, p, 1,
                                  detail::chunk_of<P>(chunkBytes));
  }
  g.finish(coop);
}

// Address of signal slot `slot` from source rank `src` in rank `owner`'s window.
__device__ __forceinline__ uint64_t* signal_slot(const SymmDev& s, int owner, int slot, int src) {
  return static_cast<uint64_t*>(
      ncclGetLsaPointer(s.win, s.slotOff + ((size_t)slot * s.nranks + src) * sizeof(uint64_t), owner));
}

// Put with signal: the coop stores `bytes` from src into peer's window at
// dstOff, then one thread stores `epoch` into the peer's slot (slot, rank)
// with release semantics (system scope). Epochs must grow from call to call.
template <class P>
__device__ void put_signal(typename P::Coop coop, const SymmDev& s, int peer, const void* src,
                           size_t dstOff, size_t bytes, int slot, uint64_t epoch) {
  detail::push_bytes<P::unroll>(coop, Issuers{0, 1}, s, src, dstOff, bytes, peer, 1, 0);
  coop.sync();
  if (coop.thread_rank() == 0) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*signal_slot(s, peer, slot, s.rank));
    f.store(epoch, cuda::memory_order_release);
  }
}

// Waits until slot (slot, src) of this rank reaches `epoch` (acquire), so the
// data put before that signal is visible to the whole coop.
template <class Coop>
__device__ void wait_signal(Coop coop, const SymmDev& s, int src, int slot, uint64_t epoch) {
  if (coop.thread_rank() == 0) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*signal_slot(s, s.rank, slot, src));
    while (f.load(cuda::memory_order_acquire) < epoch) {
    }
  }
  coop.sync();
}

// Cross-rank barrier for Sync::None callers (barrier index `index`).
template <class Coop>
__device__ void lsa_barrier(Coop coop, const SymmDev& s, uint32_t index,
                            cuda::memory_order order = cuda::memory_order_acq_rel) {
  ncclLsaBarrierSession<Coop> bar(coop, s.dc, ncclTeamLsa(s.dc), s.dc.lsaBarrier, index);
  bar.sync(coop, order);
}

}  // namespace cuco
