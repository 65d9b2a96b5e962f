// Design-space dimensions of the device library as template parameters:
// issuer granularity (NCCL coop type), sync scope, unroll, chunk size and the
// memory order of the closing cross-rank barrier; plus Issuers, which says
// which unit of the communicating threads the caller is (so a chosen set of
// CTAs or warps of a compute kernel can do the communication).
#pragma once
#include <cstddef>
#include <cuda/atomic>
#include <nccl_device.h>

namespace cuco {

// Sync scope of a device collective.
//   None: data movement only; the caller orders it (barrier kernel, flags).
//   Cta:  __syncthreads() before and after; every thread of the CTA calls.
//   Lsa:  cross-rank LSA barrier per issuer unit: relaxed sync on entry (the
//         peers have entered; their previous use of the buffers is over) and
//         a sync with memory order Order on exit (the data is published).
enum class Sync { None, Cta, Lsa };

template <class C> struct CoopTraits { static constexpr bool known = false; };
template <> struct CoopTraits<ncclCoopThread> { static constexpr bool known = true; static constexpr int lanes = 1; };
template <> struct CoopTraits<ncclCoopWarp> { static constexpr bool known = true; static constexpr int lanes = 32; };
template <> struct CoopTraits<ncclCoopCta> { static constexpr bool known = true; static constexpr int lanes = 0; /* blockDim.x */ };

template <class Coop_, Sync S_ = Sync::Lsa, int Unroll_ = 4, size_t ChunkBytes_ = 0,
          cuda::memory_order Order_ = cuda::memory_order_acq_rel>
struct Policy {
  using Coop = Coop_;
  static constexpr Sync sync = S_;
  static constexpr int unroll = Unroll_;
  // 0: chunk size taken at run time (0 there too: one contiguous block per unit)
  static constexpr size_t chunkBytes = ChunkBytes_;
  static constexpr cuda::memory_order order = Order_;

  static_assert(CoopTraits<Coop_>::known,
                "issuer must be ncclCoopThread, ncclCoopWarp or ncclCoopCta");
  static_assert(Unroll_ == 1 || Unroll_ == 2 || Unroll_ == 4 || Unroll_ == 8,
                "unroll must be 1, 2, 4 or 8");
  static_assert(ChunkBytes_ % 16 == 0, "chunk size must be a multiple of 16 bytes");
  static_assert(!(S_ == Sync::Lsa && CoopTraits<Coop_>::lanes == 1),
                "an LSA barrier per thread is not supported: use Warp or Cta issuers, "
                "or Sync::None with a separate barrier");
  static_assert(Order_ == cuda::memory_order_relaxed || Order_ == cuda::memory_order_release ||
                    Order_ == cuda::memory_order_acquire || Order_ == cuda::memory_order_acq_rel,
                "barrier order must be relaxed, release, acquire or acq_rel");
  static_assert(S_ == Sync::Lsa || Order_ == cuda::memory_order_acq_rel,
                "a barrier memory order only applies to Sync::Lsa");
};

// One issuer unit among `units`; unit u on every rank handles the same part
// of the work, and with Sync::Lsa meets unit u of the peers at LSA barrier u.
struct Issuers {
  int unit;
  int units;
};

template <class Coop> __device__ __forceinline__ int coop_lanes() {
  return CoopTraits<Coop>::lanes ? CoopTraits<Coop>::lanes : (int)blockDim.x;
}

// Units formed by CTAs [firstCta, firstCta + nCtas) of the grid (every
// thread of those CTAs calls). With Coop = Cta one unit per CTA, with Warp
// one per warp, with Thread one per thread.
template <class Coop> __device__ __forceinline__ Issuers issuers_ctas(int firstCta, int nCtas) {
  int lanes = coop_lanes<Coop>();
  int perCta = (int)blockDim.x / lanes;
  int inCta = (int)threadIdx.x / lanes;
  return Issuers{((int)blockIdx.x - firstCta) * perCta + inCta, nCtas * perCta};
}

// The last K CTAs of the grid.
template <class Coop> __device__ __forceinline__ bool in_last_ctas(int k) {
  return (int)blockIdx.x >= (int)gridDim.x - k;
}
template <class Coop> __device__ __forceinline__ Issuers issuers_last_ctas(int k) {
  return issuers_ctas<Coop>((int)gridDim.x - k, k);
}

// Warps [firstWarp, firstWarp + nWarps) of every CTA, one unit per warp
// (Coop must be ncclCoopWarp).
__device__ __forceinline__ bool in_warps(int firstWarp, int nWarps) {
  int w = (int)threadIdx.x / 32;
  return w >= firstWarp && w < firstWarp + nWarps;
}
__device__ __forceinline__ Issuers issuers_warps(int firstWarp, int nWarps) {
  return Issuers{(int)blockIdx.x * nWarps + (int)threadIdx.x / 32 - firstWarp,
                 (int)gridDim.x * nWarps};
}

// Entry/exit synchronization for a policy; owns the LSA barrier session.
template <class P, Sync S = P::sync> struct SyncGuard;

template <class P> struct SyncGuard<P, Sync::None> {
  __device__ SyncGuard(typename P::Coop, const ncclDevComm&, Issuers) {}
  __device__ void finish(typename P::Coop) {}
};

template <class P> struct SyncGuard<P, Sync::Cta> {
  __device__ SyncGuard(typename P::Coop, const ncclDevComm&, Issuers) { __syncthreads(); }
  __device__ void finish(typename P::Coop) { __syncthreads(); }
};

template <class P> struct SyncGuard<P, Sync::Lsa> {
  ncclLsaBarrierSession<typename P::Coop> bar;
  __device__ SyncGuard(typename P::Coop coop, const ncclDevComm& dc, Issuers is)
      : bar(coop, dc, ncclTeamLsa(dc), dc.lsaBarrier, (uint32_t)is.unit) {
    bar.sync(coop, cuda::memory_order_relaxed);
  }
  __device__ void finish(typename P::Coop coop) { bar.sync(coop, P::order); }
};

}  // namespace cuco
