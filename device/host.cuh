// Host side of the device library: symmetric memory, its window, the device
// communicator and a slot area for signals, held together in cuco::Symm.
//
// Window layout (same on every rank):
//   [0, dataBytes)                     data, addressed by byte offset
//   [slotOff, ceOff)                   uint64 signal slots: slot s from source
//                                      rank r lives at slotOff + (s*nranks + r)*8
//   [ceOff, ceOff + nranks*8)          copy-engine rendezvous (ce.cuh): word r
//                                      is the last sequence number rank r reached
// Ownership: symm_create allocates everything; symm_destroy releases it in
// the order NCCL needs (DevCommDestroy -> stream sync + barrier ->
// WindowDeregister -> MemFree). The ncclComm_t stays the caller's.
#pragma once
#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include "check.cuh"

namespace cuco {

constexpr int kMaxLsaRanks = 64;  // peer base addresses Symm caches for the copy engine (ce.cuh)

// What a kernel needs; passed by value.
struct SymmDev {
  ncclDevComm dc;
  ncclWindow_t win;
  size_t dataBytes;
  size_t slotOff;
  int nslots;
  int rank;    // LSA rank (== world rank: single LSA domain is required)
  int nranks;  // LSA size
};

struct Symm {
  ncclComm_t comm = nullptr;
  ncclDevComm dc;
  ncclWindow_t win = nullptr;
  void* base = nullptr;     // local address of the window
  size_t bytes = 0;         // whole window
  size_t dataBytes = 0;     // data part
  size_t slotOff = 0;       // signal slots start here
  size_t ceOff = 0;         // copy-engine rendezvous words start here
  uint64_t ceSeq = 0;       // last copy-engine rendezvous issued (ce.cuh)
  int nslots = 0;
  int barriers = 0;         // lsaBarrierCount requested
  int rank = 0, nranks = 0;
  uint64_t epoch = 0;       // last epoch handed out (flags start at 0)
  int* barrierScratch = nullptr;  // one int for the host barrier all-reduce
  bool haveDevComm = false;
  // Where each LSA peer's window starts in this process's address space
  // (ce.cuh fills it on first use; host code hands these to the copy engine).
  void* lsaBase[kMaxLsaRanks] = {};
  bool haveLsaBases = false;

  SymmDev dev() const {
    SymmDev d;
    d.dc = dc; d.win = win; d.dataBytes = dataBytes; d.slotOff = slotOff;
    d.nslots = nslots; d.rank = rank; d.nranks = nranks;
    return d;
  }
  // Next epoch for a signalled operation; iteration k+1 waits for a larger
  // value than iteration k wrote, so stale flags never satisfy it.
  uint64_t next_epoch() { return ++epoch; }
  template <typename T> T* local(size_t off) const {
    return reinterpret_cast<T*>(static_cast<char*>(base) + off);
  }
  // The same offset in LSA peer p's window (lsaBase filled: ce.cuh).
  template <typename T> T* peer(int p, size_t off) const {
    return reinterpret_cast<T*>(static_cast<char*>(lsaBase[p]) + off);
  }
};

inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Host barrier over the communicator: drains `stream`, then a 1-int
// all-reduce on it, then drains again.
inline int symm_barrier(Symm& s, cudaStream_t stream) {
  CUCO_CUDA_TRY(cudaStreamSynchronize(stream));
  CUCO_NCCL_TRY(ncclAllReduce(s.barrierScratch, s.barrierScratch, 1, ncclInt32, ncclSum,
                              s.comm, stream));
  CUCO_CUDA_TRY(cudaStreamSynchronize(stream));
  return 0;
}

// Collective over `comm` (same arguments on every rank). On failure the
// resources acquired so far are not released (the communicator is then
// usually unusable; destroy it). `maxBarriers` is the
// largest number of issuer units (CTAs or warps) that will hold an LSA
// barrier at once; `nslots` signal slots per source rank.
inline int symm_create(ncclComm_t comm, size_t dataBytes, int maxBarriers, int nslots,
                       cudaStream_t stream, Symm* out) {
  CUCO_ARG_TRY(out && comm, "null argument");
  CUCO_ARG_TRY(maxBarriers > 0 && nslots >= 0, "maxBarriers=%d nslots=%d", maxBarriers, nslots);
  Symm s;
  s.comm = comm;
  CUCO_NCCL_TRY(ncclCommUserRank(comm, &s.rank));
  CUCO_NCCL_TRY(ncclCommCount(comm, &s.nranks));
  s.dataBytes = round_up(dataBytes ? dataBytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  s.slotOff = s.dataBytes;
  s.nslots = nslots;
  s.ceOff = s.slotOff + (size_t)nslots * s.nranks * sizeof(uint64_t);
  size_t slotBytes = round_up((size_t)(nslots + 1) * s.nranks * sizeof(uint64_t),
                              NCCL_WIN_REQUIRED_ALIGNMENT);
  s.bytes = s.dataBytes + slotBytes;
  s.barriers = maxBarriers;
  CUCO_CUDA_TRY(cudaMalloc(&s.barrierScratch, sizeof(int)));
  CUCO_CUDA_TRY(cudaMemset(s.barrierScratch, 0, sizeof(int)));
  CUCO_NCCL_TRY(ncclMemAlloc(&s.base, s.bytes));
  CUCO_NCCL_TRY(ncclCommWindowRegister(comm, s.base, s.bytes, &s.win, NCCL_WIN_COLL_SYMMETRIC));
  CUCO_ARG_TRY(s.win != nullptr, "ncclCommWindowRegister gave no window (symmetric memory off?)");
  ncclDevCommRequirements req;
  std::memset(&req, 0, sizeof(req));  // no initializer macro in 2.28.9
  req.lsaBarrierCount = maxBarriers;   // GIN and multimem fields stay off (LSA path)
  CUCO_NCCL_TRY(ncclDevCommCreate(comm, &req, &s.dc));
  s.haveDevComm = true;
  CUCO_ARG_TRY(s.dc.lsaSize == s.nranks && s.dc.lsaRank == s.rank,
               "LSA backend needs every rank in one LSA domain (lsaSize=%d nranks=%d)",
               s.dc.lsaSize, s.nranks);
  CUCO_CUDA_TRY(cudaMemsetAsync(s.local<char>(s.slotOff), 0, slotBytes, stream));
  CUCO_TRY(symm_barrier(s, stream));
  *out = s;
  return 0;
}

inline int symm_destroy(Symm* s, cudaStream_t stream) {
  if (!s || !s->comm) return 0;
  if (s->haveDevComm) CUCO_NCCL_TRY(ncclDevCommDestroy(s->comm, &s->dc));
  s->haveDevComm = false;
  CUCO_TRY(symm_barrier(*s, stream));  // no peer still stores into our window
  if (s->win) CUCO_NCCL_TRY(ncclCommWindowDeregister(s->comm, s->win));
  s->win = nullptr;
  if (s->base) CUCO_NCCL_TRY(ncclMemFree(s->base));
  s->base = nullptr;
  if (s->barrierScratch) CUCO_CUDA_TRY(cudaFree(s->barrierScratch));
  s->barrierScratch = nullptr;
  s->comm = nullptr;
  return 0;
}

}  // namespace cuco
