// cuco_tx: the glue 'cuco transform' writes into a transformed program. It
// maps the host NCCL calls the rules rewrote (same arguments, same stream,
// same ncclResult_t) onto device/'s symmetric-memory kernels.
//
// Buffers: every allocation the rules found feeding a collective is made with
// symm_malloc (ncclMemAlloc, rounded to 4 KiB, plus a signal-slot area) and
// registered as a symmetric window at the first device collective, in
// allocation order (every rank allocates the same buffers in the same order,
// as symmetric memory requires). One ncclDevComm per communicator serves all
// windows. symm_free deregisters and frees (plain device memory falls back to
// cudaFree); comm_teardown releases everything of a communicator before
// ncclCommDestroy.
//
// Point-to-point: a receive first signals "ready" to its source, a send waits
// for that signal before it puts into the peer's copy of the receive buffer
// and signals "data"; the receive then waits for the data. Grouped calls run
// in that order at group_end (ready signals, then sends, then data waits), so
// no pair of ranks can wait on each other.
#include "cuco_device.cuh"

#include <cstdio>
#include <vector>

#define CUCO_COMM_CTAS 0          // cuco:knob 0 8 16 32 64 128
#define CUCO_COMM_THREADS 512     // cuco:knob 256 512 1024
#define CUCO_COMM_UNROLL 4        // cuco:knob 1 2 4 8
#define CUCO_CHUNK_BYTES 0        // cuco:knob 0 65536 262144 1048576 4194304
#define CUCO_P2P_CTAS 8           // cuco:knob 1 2 4 8 16 32

namespace cuco_tx {

constexpr int kBarriers = 132;          // LSA barriers of the device communicator (>= any CTA count)
constexpr int kReadySlot = 0;           // slot 0: "receive posted"; 1..: data, one per put CTA
constexpr int kSlots = 1 + 64;          // CUCO_P2P_CTAS is clamped to 64

struct Buf {
  void* base = nullptr;
  size_t bytes = 0;      // as asked
  size_t dataBytes = 0;  // rounded to 4 KiB
  bool registered = false;
  cuco::Symm symm;       // valid once registered
  std::vector<uint64_t> sendEpoch, recvEpoch, readyOut, readyIn;  // per peer
};

struct Comm {
  ncclComm_t comm = nullptr;
  ncclDevComm dc;
  bool live = false;
  int rank = 0, nranks = 0;
};

struct P2pOp {
  bool isSend;
  const void* buf;
  void* peerBuf;  // send: our copy of the peer's receive buffer
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};

inline std::vector<Buf*>& bufs() { static std::vector<Buf*> v; return v; }
inline std::vector<Comm>& comms() { static std::vector<Comm> v; return v; }
inline std::vector<P2pOp>& pending() { static std::vector<P2pOp> v; return v; }
inline int& group_depth() { static int d = 0; return d; }

inline ncclResult_t fail(const char* what, const char* file, int line) {
  fprintf(stderr, "cuco_tx: %s (%s:%d)\n", what, file, line);
  return ncclInvalidUsage;
}
#define CUCO_TX_FAIL(what) ::cuco_tx::fail(what, __FILE__, __LINE__)
#define CUCO_TX_TRY(call) do { if ((call) != 0) return CUCO_TX_FAIL("device library call failed: " #call); } while (0)

inline size_t dtype_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

inline cuco::Launch comm_launch() {
  cuco::Launch l;
  l.ctas = CUCO_COMM_CTAS;
  l.threads = CUCO_COMM_THREADS;
  l.unroll = CUCO_COMM_UNROLL;
  l.chunk = CUCO_CHUNK_BYTES;
  return l;
}

inline int p2p_ctas() { return CUCO_P2P_CTAS < 1 ? 1 : (CUCO_P2P_CTAS > kSlots - 1 ? kSlots - 1 : CUCO_P2P_CTAS); }

// Symmetric allocation: replaces cudaMalloc for buffers a collective needs in
// a window. Returns a cudaError_t so the program's own checks still apply.
inline cudaError_t symm_malloc(void** p, size_t bytes) {
  Buf* b = new Buf;
  b->bytes = bytes;
  b->dataBytes = cuco::round_up(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  // the slot area is sized for up to 64 ranks (comm_setup refuses more)
  size_t slotBytes = cuco::round_up((size_t)kSlots * 64 * sizeof(uint64_t), NCCL_WIN_REQUIRED_ALIGNMENT);
  if (ncclMemAlloc(&b->base, b->dataBytes + slotBytes) != ncclSuccess) {
    delete b;
    return cudaErrorMemoryAllocation;
  }
  cudaError_t r = cudaMemset(static_cast<char*>(b->base) + b->dataBytes, 0, slotBytes);
  if (r != cudaSuccess) return r;
  b->symm.bytes = b->dataBytes + slotBytes;
  bufs().push_back(b);
  *p = b->base;
  return cudaSuccess;
}
template <typename T> inline cudaError_t symm_malloc(T** p, size_t bytes) {
  return symm_malloc(reinterpret_cast<void**>(p), bytes);
}

inline int comm_rank(ncclComm_t c) {
  int r = -1;
  if (ncclCommUserRank(c, &r) != ncclSuccess) return -1;
  return r;
}

inline Comm* comm_find(ncclComm_t c) {
  for (Comm& x : comms())
    if (x.comm == c && x.live) return &x;
  return nullptr;
}

// Creates the device communicator (once per communicator). Collective.
inline ncclResult_t comm_setup(ncclComm_t c) {
  if (comm_find(c)) return ncclSuccess;
  Comm x;
  x.comm = c;
  if (ncclCommUserRank(c, &x.rank) != ncclSuccess || ncclCommCount(c, &x.nranks) != ncclSuccess)
    return CUCO_TX_FAIL("cannot query the communicator");
  if (x.nranks > 64) return CUCO_TX_FAIL("more than 64 ranks: the signal area is sized for 64");
  ncclDevCommRequirements req;
  memset(&req, 0, sizeof(req));  // LSA only: any GIN field would switch GIN on
  req.lsaBarrierCount = kBarriers;
  if (ncclDevCommCreate(c, &req, &x.dc) != ncclSuccess) return CUCO_TX_FAIL("ncclDevCommCreate failed");
  if (x.dc.lsaSize != x.nranks) return CUCO_TX_FAIL("the LSA backend needs every rank in one LSA domain");
  x.live = true;
  comms().push_back(x);
  CUCO_TX_TRY(cuco::load_kernels<float>());
  CUCO_TX_TRY(cuco::load_kernels<__half>());
  CUCO_TX_TRY(cuco::load_kernels<__nv_bfloat16>());
  CUCO_TX_TRY(cuco::load_kernels<int32_t>());
  return ncclSuccess;
}

// Registers every symmetric buffer not registered yet, in allocation order.
inline ncclResult_t windows_register(ncclComm_t c) {
  if (comm_setup(c) != ncclSuccess) return ncclInvalidUsage;
  Comm* x = comm_find(c);
  for (Buf* b : bufs()) {
    if (b->registered) continue;
    cuco::Symm& s = b->symm;
    if (ncclCommWindowRegister(c, b->base, s.bytes, &s.win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess || !s.win)
      return CUCO_TX_FAIL("ncclCommWindowRegister failed (symmetric memory unavailable?)");
    s.comm = c;
    s.dc = x->dc;
    s.base = b->base;
    s.dataBytes = b->dataBytes;
    s.slotOff = b->dataBytes;
    s.nslots = kSlots;
    s.barriers = kBarriers;
    s.rank = x->rank;
    s.nranks = x->nranks;
    b->sendEpoch.assign(x->nranks, 0);
    b->recvEpoch.assign(x->nranks, 0);
    b->readyOut.assign(x->nranks, 0);
    b->readyIn.assign(x->nranks, 0);
    b->registered = true;
  }
  return ncclSuccess;
}

// The registered buffer holding [p, p + bytes), or nullptr.
inline Buf* buf_find(const void* p, size_t bytes) {
  const char* q = static_cast<const char*>(p);
  for (Buf* b : bufs()) {
    const char* lo = static_cast<const char*>(b->base);
    if (q >= lo && q + bytes <= lo + b->bytes) return b;
  }
  return nullptr;
}

inline ncclResult_t window_of(const void* p, size_t bytes, ncclComm_t c, Buf** out) {
  if (windows_register(c) != ncclSuccess) return ncclInvalidUsage;
  Buf* b = buf_find(p, bytes);
  if (!b) return CUCO_TX_FAIL("buffer is not symmetric memory (not allocated by cuco_tx::symm_malloc)");
  if (b->symm.comm != c) return CUCO_TX_FAIL("buffer is registered with another communicator");
  *out = b;
  return ncclSuccess;
}

inline ncclResult_t all_gather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("all_gather: unsupported data type");
  Comm* x = nullptr;
  if (comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  size_t bytes = sendcount * es;
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  const char* src = static_cast<const char*>(sendbuff);
  if (src == static_cast<char*>(recvbuff) + (size_t)x->rank * bytes) src = nullptr;  // in place
  CUCO_TX_TRY(cuco::all_gather<char>(b->symm, src, outOff, bytes, stream, comm_launch()));
  return ncclSuccess;
}

template <typename T>
inline ncclResult_t reduce_scatter_t(Buf* b, size_t inOff, void* out, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::reduce_scatter<T>(b->symm, inOff, static_cast<T*>(out), n, st, comm_launch()));
  return ncclSuccess;
}

inline ncclResult_t reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream) {
  if (op != ncclSum) return CUCO_TX_FAIL("reduce_scatter: only ncclSum is implemented on the device");
  size_t es = dtype_size(datatype);
  Comm* x = nullptr;
  if (!es || comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  Buf* b = nullptr;
  if (window_of(sendbuff, recvcount * es * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(b->base));
  switch (datatype) {
    case ncclFloat32: return reduce_scatter_t<float>(b, inOff, recvbuff, recvcount, stream);
    case ncclFloat16: return reduce_scatter_t<__half>(b, inOff, recvbuff, recvcount, stream);
    case ncclBfloat16: return reduce_scatter_t<__nv_bfloat16>(b, inOff, recvbuff, recvcount, stream);
    case ncclInt32: return reduce_scatter_t<int32_t>(b, inOff, recvbuff, recvcount, stream);
    default: return CUCO_TX_FAIL("reduce_scatter: data type not implemented on the device");
  }
}

template <typename T>
inline ncclResult_t all_reduce_t(Buf* b, size_t inOff, size_t outOff, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::all_reduce<T>(b->symm, inOff, outOff, n, st, comm_launch()));
  return ncclSuccess;
}

inline ncclResult_t all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (op != ncclSum) return CUCO_TX_FAIL("all_reduce: only ncclSum is implemented on the device");
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("all_reduce: unsupported data type");
  size_t bytes = count * es;
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  size_t inOff = outOff;
  Buf* bs = buf_find(sendbuff, bytes);
  if (bs == b) {
    inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(b->base));
  } else if (sendbuff != recvbuff) {
    // the input lives outside the output's window: stage it locally, reduce in place
    void* stage_dst = recvbuff;
    const void* stage_src = sendbuff;
    if (cudaMemcpyAsync(stage_dst, stage_src, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      return CUCO_TX_FAIL("all_reduce: staging copy failed");
  }
  switch (datatype) {
    case ncclFloat32: return all_reduce_t<float>(b, inOff, outOff, count, stream);
    case ncclFloat16: return all_reduce_t<__half>(b, inOff, outOff, count, stream);
    case ncclBfloat16: return all_reduce_t<__nv_bfloat16>(b, inOff, outOff, count, stream);
    case ncclInt32: return all_reduce_t<int32_t>(b, inOff, outOff, count, stream);
    default: return CUCO_TX_FAIL("all_reduce: data type not implemented on the device");
  }
}

inline ncclResult_t p2p_ready(const P2pOp& op) {  // receiver -> source: "posted"
  Buf* b = nullptr;
  if (window_of(op.buf, op.bytes, op.comm, &b) != ncclSuccess) return ncclInvalidUsage;
  cuco::Launch one;
  one.ctas = 1;
  one.threads = 32;
  one.unroll = 1;
  uint64_t ep = ++b->readyOut[op.peer];
  CUCO_TX_TRY(cuco::put_signal(b->symm, op.peer, op.buf, 0, 0, kReadySlot, ep, op.stream, one));
  return ncclSuccess;
}

inline ncclResult_t p2p_send(const P2pOp& op) {
  Buf* b = nullptr;
  if (window_of(op.peerBuf, op.bytes, op.comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t dstOff = (size_t)(static_cast<char*>(op.peerBuf) - static_cast<char*>(b->base));
  CUCO_TX_TRY(cuco::wait_signal(b->symm, op.peer, kReadySlot, 1, ++b->readyIn[op.peer], op.stream));
  cuco::Launch l;
  l.ctas = p2p_ctas();
  l.threads = CUCO_COMM_THREADS;
  l.unroll = CUCO_COMM_UNROLL;
  CUCO_TX_TRY(cuco::put_signal(b->symm, op.peer, op.buf, dstOff, op.bytes, 1, ++b->sendEpoch[op.peer],
                               op.stream, l));
  return ncclSuccess;
}

inline ncclResult_t p2p_wait(const P2pOp& op) {
  Buf* b = nullptr;
  if (window_of(op.buf, op.bytes, op.comm, &b) != ncclSuccess) return ncclInvalidUsage;
  CUCO_TX_TRY(cuco::wait_signal(b->symm, op.peer, 1, p2p_ctas(), ++b->recvEpoch[op.peer], op.stream));
  return ncclSuccess;
}

// A rank sending to itself copies locally; its receive waits for that copy.
inline ncclResult_t p2p_self_send(const P2pOp& op, cudaEvent_t* done) {
  void* self_dst = op.peerBuf;
  const void* self_src = op.buf;
  if (self_dst != self_src &&
      cudaMemcpyAsync(self_dst, self_src, op.bytes, cudaMemcpyDeviceToDevice, op.stream) != cudaSuccess)
    return CUCO_TX_FAIL("local copy of a send to self failed");
  if (!*done && cudaEventCreateWithFlags(done, cudaEventDisableTiming) != cudaSuccess)
    return CUCO_TX_FAIL("cudaEventCreate failed");
  if (cudaEventRecord(*done, op.stream) != cudaSuccess) return CUCO_TX_FAIL("cudaEventRecord failed");
  return ncclSuccess;
}

inline ncclResult_t p2p_flush() {
  std::vector<P2pOp> ops;
  ops.swap(pending());
  cudaEvent_t selfDone = nullptr;
  ncclResult_t r = ncclSuccess;
  for (const P2pOp& op : ops)
    if (r == ncclSuccess && !op.isSend && op.peer != comm_rank(op.comm)) r = p2p_ready(op);
  for (const P2pOp& op : ops)
    if (r == ncclSuccess && op.isSend)
      r = op.peer == comm_rank(op.comm) ? p2p_self_send(op, &selfDone) : p2p_send(op);
  for (const P2pOp& op : ops) {
    if (r != ncclSuccess || op.isSend) continue;
    if (op.peer != comm_rank(op.comm)) r = p2p_wait(op);
    else if (selfDone && cudaStreamWaitEvent(op.stream, selfDone, 0) != cudaSuccess) r = ncclInvalidUsage;
  }
  if (selfDone) cudaEventDestroy(selfDone);
  return r;
}

// peerBuf: this rank's pointer to the buffer the peer receives into (the same
// symmetric allocation and offset in the peer's window).
inline ncclResult_t send(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream, const void* peerBuf) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("send: unsupported data type");
  pending().push_back(P2pOp{true, sendbuff, const_cast<void*>(peerBuf), count * es, peer, comm, stream});
  return group_depth() > 0 ? ncclSuccess : p2p_flush();
}

inline ncclResult_t recv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("recv: unsupported data type");
  pending().push_back(P2pOp{false, recvbuff, nullptr, count * es, peer, comm, stream});
  return group_depth() > 0 ? ncclSuccess : p2p_flush();
}

// Every NCCL call of a group was rewritten, so no ncclGroupStart is needed
// (window registration and device-communicator creation must not be grouped).
inline ncclResult_t group_start() {
  group_depth()++;
  return ncclSuccess;
}

inline ncclResult_t group_end() {
  if (group_depth() > 0 && --group_depth() == 0) return p2p_flush();
  return ncclSuccess;
}

// Frees a symmetric buffer (collective when registered: every rank frees the
// same buffers in the same order); other pointers go to cudaFree.
inline cudaError_t symm_free(void* p) {
  std::vector<Buf*>& v = bufs();
  for (size_t i = 0; i < v.size(); i++) {
    Buf* b = v[i];
    if (b->base != p) continue;
    cudaError_t r = cudaDeviceSynchronize();
    if (r != cudaSuccess) return r;
    if (b->registered && ncclCommWindowDeregister(b->symm.comm, b->symm.win) != ncclSuccess)
      return cudaErrorUnknown;
    if (ncclMemFree(b->base) != ncclSuccess) return cudaErrorUnknown;
    ncclComm_t c = b->registered ? b->symm.comm : nullptr;
    v.erase(v.begin() + (long)i);
    delete b;
    // the last window of a communicator gone: its device communicator goes too
    bool used = false;
    for (Buf* o : v) used = used || (o->registered && o->symm.comm == c);
    if (c && !used) {
      for (Comm& x : comms())
        if (x.comm == c && x.live) {
          if (ncclDevCommDestroy(c, &x.dc) != ncclSuccess) return cudaErrorUnknown;
          x.live = false;
        }
    }
    return cudaSuccess;
  }
  return cudaFree(p);
}

// Releases the device communicator and the windows of c (the memory stays
// until symm_free). Call before ncclCommDestroy(c).
inline ncclResult_t comm_teardown(ncclComm_t c) {
  if (cudaDeviceSynchronize() != cudaSuccess) return CUCO_TX_FAIL("device error before teardown");
  for (Buf* b : bufs()) {
    if (!b->registered || b->symm.comm != c) continue;
    if (ncclCommWindowDeregister(c, b->symm.win) != ncclSuccess) return CUCO_TX_FAIL("window deregister failed");
    b->registered = false;
  }
  for (Comm& x : comms()) {
    if (x.comm != c || !x.live) continue;
    if (ncclDevCommDestroy(c, &x.dc) != ncclSuccess) return CUCO_TX_FAIL("ncclDevCommDestroy failed");
    x.live = false;
  }
  return ncclSuccess;
}

}  // namespace cuco_tx
