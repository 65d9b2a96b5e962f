// GIN backend (GPU-initiated network put + signal through ncclGin), compiled
// when NCCL >= 2.28.7. It needs an RDMA NIC and NCCL's GIN support at run
// time: on a host without one (the 2xH200 NVLink box used for tests) asking
// for GIN resources makes ncclDevCommCreate fail with "GIN not supported", so
// these functions are compile-checked only there. The LSA path in lsa.cuh
// never sets any GIN requirement.
#pragma once
#include <cstdint>
#include <nccl.h>
#include <nccl_device.h>

#if NCCL_VERSION_CODE >= 22807
#define CUCO_HAVE_GIN 1
namespace cuco {
namespace gin {

// Adds GIN needs to device-communicator requirements (switches GIN on).
inline void add_requirements(ncclDevCommRequirements* req, int signals, int contexts) {
  req->ginSignalCount = signals;
  req->ginContextCount = contexts;
}

// The coop puts `bytes` from window offset srcOff to world rank `peer`'s
// window at dstOff; signal `sig` on the peer is incremented once the data
// (and earlier puts on this context to that peer) has landed.
template <class Coop>
__device__ void put_signal(Coop coop, const ncclDevComm& dc, int context, int peer,
                           ncclWindow_t win, size_t dstOff, size_t srcOff, size_t bytes,
                           ncclGinSignal_t sig) {
  ncclGin g(dc, context);
  g.put(ncclTeamWorld(dc), peer, win, dstOff, win, srcOff, bytes, ncclGin_SignalInc{sig},
        ncclGin_None{}, coop);
}

// Waits until signal `sig` reaches `least` (acquire); typical use:
// before = read_signal(); peers put with SignalInc; wait(before + nPuts).
template <class Coop>
__device__ void wait_signal(Coop coop, const ncclDevComm& dc, int context, ncclGinSignal_t sig,
                            uint64_t least) {
  ncclGin g(dc, context);
  g.waitSignal(coop, sig, least);
}

__device__ inline uint64_t read_signal(const ncclDevComm& dc, int context, ncclGinSignal_t sig) {
  ncclGin g(dc, context);
  return g.readSignal(sig);
}

// Source buffers of this coop's earlier puts may be reused after flush.
template <class Coop> __device__ void flush(Coop coop, const ncclDevComm& dc, int context) {
  ncclGin g(dc, context);
  g.flush(coop);
}

}  // namespace gin
}  // namespace cuco
#else
#define CUCO_HAVE_GIN 0
#endif
