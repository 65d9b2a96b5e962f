// Copy-engine transport: moves data into the peers' windows with
// cudaMemcpyAsync on their LSA addresses, so the DMA engines carry it over
// NVLink and no SM is spent on the copy. A compute kernel running beside it
// keeps every SM; an SM-driven copy (launch.cuh) competes with it for them,
// and a kernel that holds every SM (a large GEMM) can keep it from starting
// at all. The ranks meet at one-CTA LSA barriers before and after the copies
// (the only SM work), so completion has the same meaning as the SM path's.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>
#include "check.cuh"
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

// All-gather of `bytes` per rank with the copy engine: rank r's block (src,
// or in place at outOff + r*bytes when src is nullptr) lands at outOff +
// r*bytes in every rank's window. On stream st: an LSA barrier (every rank
// has reached the call, so its earlier work on the output is done), one
// cudaMemcpyAsync per destination rank, starting with the next rank so that
// no rank is every rank's first target, and a second barrier (every block
// has landed everywhere). The copies to the peers follow one another on st.
inline int all_gather_ce(Symm& s, const void* src, size_t outOff, size_t bytes, cudaStream_t st) {
  CUCO_ARG_TRY(outOff + bytes * (size_t)s.nranks <= s.dataBytes, "all_gather_ce: %zu bytes per rank at %zu "
               "do not fit the window's %zu", bytes, outOff, s.dataBytes);
  if (bytes == 0) return 0;
  CUCO_TRY(lsa_peer_bases(s));
  CUCO_TRY(device_barrier(s, st));
  const void* from = src ? src : s.local<char>(outOff + (size_t)s.rank * bytes);
  for (int k = 1; k <= s.nranks; k++) {
    int p = (s.rank + k) % s.nranks;
    if (p == s.rank && !src) continue;  // in place: the block is already there
    char* to = static_cast<char*>(s.lsaBase[p]) + outOff + (size_t)s.rank * bytes;
    CUCO_CUDA_TRY(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, st));
  }
  CUCO_TRY(device_barrier(s, st));
  return 0;
}

}  // namespace cuco
