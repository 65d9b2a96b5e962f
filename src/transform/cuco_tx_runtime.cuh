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
// Point-to-point: a receive posts {window, offset, size} of its buffer into
// its source's control window; the matching send (NCCL order: k-th send from
// A to B <-> k-th receive on B from A) waits for that post, stores its data
// there over NVLink and signals; the receive waits for the signal. The sender
// needs nothing but the peer's rank, so receive offsets computed from the
// receiver's own data work. Grouped calls run at group_end in the order
// posts, sends, waits, so no pair of ranks can wait on each other.
// All-to-all, broadcast, gather and scatter are groups of these.
//
// CUCO_COPY_ENGINE 1: all-gathers and all-to-alls move their blocks with the
// copy engines (cuco::all_gather_ce, all_to_all_ce: cudaMemcpyAsync into the
// peers' windows between two rendezvous made of stream memory operations)
// instead of CUCO_COMM_CTAS CTAs: no SM is taken, so the computation that
// overlaps them keeps every SM.
#define CUCO_COMM_CTAS 0          // cuco:knob run 0 8 16 32 64 128
#define CUCO_COMM_THREADS 512     // cuco:knob run 256 512 1024
#define CUCO_COMM_UNROLL 4        // cuco:knob 1 2 4 8
#define CUCO_CHUNK_BYTES 0        // cuco:knob run 0 65536 262144 1048576 4194304
#define CUCO_P2P_CTAS 8           // cuco:knob run 1 2 4 8 16 32
#define CUCO_COPY_ENGINE 0        // cuco:knob run 0 1
// Transport by message size (from the 2-rank collectives sweep,
// bench/results/2026-11-23-device-lib-h200x2-defaults.json: the device put
// beats NCCL's send up to 256 KiB, 7.95 vs 9.19 us, and loses from 2 MiB on,
// 47.8 vs 19.4 us). Sends and receives of at least CUCO_P2P_NCCL_FROM bytes
// go through NCCL's own send/recv (0: never); an all-reduce whose input lies
// outside its output's window goes through NCCL's all-reduce from
// CUCO_STAGED_NCCL_FROM bytes on (0: never) instead of a staging copy.
#define CUCO_P2P_NCCL_FROM 1048576     // cuco:knob run 0 262144 1048576 4194304 67108864
#define CUCO_STAGED_NCCL_FROM 4194304  // cuco:knob run 0 65536 4194304 67108864
// CUCO_P2P_CE 1: those large sends and receives (none when
// CUCO_P2P_NCCL_FROM is 0) stay on the device and the
// copy engines carry them (no SM): the receiver posts where its buffer is
// with stream memory operations, and a send whose destination is known
// waits for the post (cuStreamWaitValue64), copies into the peer's window
// and stamps its arrival, all from the stream's front end. A send goes by
// the SM kernel, which reads the post on the device, until three in a row of
// the same source range found the same destination (read back from the
// posts). The receiver checks that every send landed where it
// posted: a destination that changes after that is an error, not a silent
// misdelivery. A receive missing on the peer leaves a copy-engine send
// waiting for ever (a stream wait has no time limit), where the SM kernel
// gives up after kP2pWaitS. The transform declares it beside the glue (1 where schedule
// send_as_produced applies, whose early pieces need SMs otherwise).
#ifndef CUCO_P2P_CE
#define CUCO_P2P_CE 0
#endif
// CUCO_P2P_PIECES (a knob the transform sets, beside the glue, where schedule
// send_as_produced applies): sends and receives of at least 2 MiB move in
// this many equal pieces of at least 1 MiB. Both ends split alike (from the
// size alone), so a send whose buffer is made piece by piece can start each
// piece as soon as it is made.
#ifndef CUCO_P2P_PIECES
#define CUCO_P2P_PIECES 1
#endif

// Only the kernels of this unroll are compiled (device/launch.cuh); a value
// other than 1, 2, 4 or 8 runs as 4.
#define CUCO_DEVICE_UNROLL_ONLY \
  (CUCO_COMM_UNROLL == 1 || CUCO_COMM_UNROLL == 2 || CUCO_COMM_UNROLL == 8 ? CUCO_COMM_UNROLL : 4)
#include "cuco_device.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cuco_tx {

constexpr int kBarriers = 132;          // LSA barriers of the device communicator (>= any CTA count)
constexpr int kSlots = 1 + 64;          // signal slots of each buffer's window
constexpr int kMaxRanks = 64;           // the control window is sized for this many ranks
constexpr int kMaxWins = 64;            // symmetric buffers per communicator
constexpr int kRing = 64;               // receives from one peer in flight (one group)
constexpr int kMaxP2pCtas = 64;         // CUCO_P2P_CTAS is clamped to this
// Control window of a communicator, in uint64_t words (see point-to-point below).
// A point-to-point wait that lasts this long gives up and marks the
// communicator's error flag (kErrSendWait, kErrRecvWait): a receive missing
// on the peer, or calls matched in another order, end as an error that names
// the wait instead of a hang. Later waits give up at once.
constexpr int kP2pWaitS = 20;
constexpr unsigned long long kP2pWaitNs = kP2pWaitS * 1000ull * 1000 * 1000;
constexpr int kErrSize = 1, kErrSendWait = 2, kErrRecvWait = 3, kErrLanded = 4;
constexpr size_t kCtrlReady = 0;
constexpr size_t kCtrlPost = kMaxRanks;
constexpr size_t kCtrlData = kCtrlPost + (size_t)kMaxRanks * kRing * 4;
constexpr size_t kCtrlLanded = kCtrlData + (size_t)kMaxRanks * kMaxP2pCtas;
constexpr size_t kCtrlWords = kCtrlLanded + (size_t)kMaxRanks * kRing * 2;

struct Buf {
  void* base = nullptr;
  size_t bytes = 0;      // as asked
  size_t dataBytes = 0;  // rounded to 4 KiB
  bool registered = false;
  cuco::Symm symm;       // valid once registered
  int winIdx = -1;       // registration order within its communicator (same on every rank)
};

struct SymmDevLite {
  int rank, nranks;
};

// Where a send that repeats lands (CUCO_P2P_CE): each SM-kernel send of
// the same source range to the same peer writes the receive post it used
// into the entry's device slot, read back into pinned memory (kReadBacks in
// flight). kAgreeSends consecutive sends that all found the same window and
// offset make the destination known, and later copies go straight there; a
// send whose read-back could not be taken breaks the run at its place in
// the order. At most kMaxSendDests entries per communicator; sends beyond
// them stay on the SM kernel.
constexpr int kReadBacks = 4;
constexpr int kAgreeSends = 3;
constexpr size_t kMaxSendDests = 256;
struct SendDest {
  int peer = -1;
  const void* src = nullptr;
  size_t bytes = 0;
  uint64_t* used = nullptr;             // device: kReadBacks x {window, offset, bytes} the kernel used
  uint64_t* post = nullptr;             // pinned: their read-backs
  cudaEvent_t ev[kReadBacks] = {};      // each read-back is done
  bool gapBefore[kReadBacks] = {};      // a send was not seen just before this read-back
  bool gap = false;                     // a send was not seen since the last read-back taken
  int head = 0, inFlight = 0;           // the read-backs in flight, oldest first
  int agreed = 0;                       // consecutive sends that found the same place
  uint64_t win = 0, off = 0;            // that place
};

struct Comm {
  ncclComm_t comm = nullptr;
  ncclDevComm dc;
  bool live = false;
  int rank = 0, nranks = 0;
  void* ctrl = nullptr;          // control window memory (ncclMemAlloc)
  ncclWindow_t ctrlWin = nullptr;
  int nwins = 0;                 // data windows registered so far
  int* error = nullptr;          // device flag: a send found no fitting receive
  std::vector<uint64_t> postSeq, sendSeq, recvSeq;  // per peer
  cudaStream_t side = nullptr;   // send_as_produced: the pieces that go early
  cuco::Symm ctrlSymm;           // the control window's peer addresses (copy-engine sends)
  std::vector<SendDest*> dests;  // copy-engine sends' destinations, owned here
};

struct P2pOp {
  bool isSend;
  const void* buf;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};

inline std::vector<Buf*>& bufs() { static std::vector<Buf*> v; return v; }
inline std::vector<Comm>& comms() { static std::vector<Comm> v; return v; }
inline std::vector<P2pOp>& pending() { static std::vector<P2pOp> v; return v; }
inline int& group_depth() { static int d = 0; return d; }

// CUCO_TX_TRACE=1 (any value but 0): each communicator setup, window
// registration and point-to-point call on stderr as it is issued, with the
// rank, so that the ranks' sequences can be compared when a run hangs.
inline bool trace_on() {
  static int on = -1;
  if (on < 0) {
    const char* v = std::getenv("CUCO_TX_TRACE");
    on = v && *v && strcmp(v, "0") != 0;
  }
  return on != 0;
}
#define CUCO_TX_TRACE(...)                               \
  do {                                                   \
    if (::cuco_tx::trace_on()) {                         \
      fprintf(stderr, "cuco_tx trace: " __VA_ARGS__);    \
      fflush(stderr);                                    \
    }                                                    \
  } while (0)

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

// A count knob's value (CTAs, pieces) held to 1..most.
inline int clamp_count(int v, int most) { return v < 1 ? 1 : (v > most ? most : v); }

inline int p2p_ctas() { return clamp_count(CUCO_P2P_CTAS, kMaxP2pCtas); }

// Clears device memory before returning, on a private non-blocking stream:
// a memset on the legacy stream would not be ordered before the program's
// work on its own non-blocking streams (cudaStreamNonBlocking), and a device
// synchronisation could wait on a kernel that waits for another rank.
inline cudaError_t clear_now(void* p, size_t bytes) {
  static cudaStream_t st = nullptr;
  cudaError_t r = st ? cudaSuccess : cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  if (r == cudaSuccess) r = cudaMemsetAsync(p, 0, bytes, st);
  return r == cudaSuccess ? cudaStreamSynchronize(st) : r;
}

// Symmetric allocation: replaces cudaMalloc for buffers a collective needs in
// a window. Returns a cudaError_t so the program's own checks still apply.
inline cudaError_t symm_malloc(void** p, size_t bytes) {
  Buf* b = new Buf;
  b->bytes = bytes;
  b->dataBytes = cuco::round_up(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  // the slot area is sized for up to 64 ranks (comm_setup refuses more)
  size_t slotBytes = cuco::round_up(((size_t)kSlots * 64 + 64) * sizeof(uint64_t), NCCL_WIN_REQUIRED_ALIGNMENT);
  if (ncclMemAlloc(&b->base, b->dataBytes + slotBytes) != ncclSuccess) {
    delete b;
    return cudaErrorMemoryAllocation;
  }
  cudaError_t r = clear_now(static_cast<char*>(b->base) + b->dataBytes, slotBytes);
  if (r != cudaSuccess) return r;
  b->symm.bytes = b->dataBytes + slotBytes;
  bufs().push_back(b);
  *p = b->base;
  return cudaSuccess;
}
template <typename T> inline cudaError_t symm_malloc(T** p, size_t bytes) {
  return symm_malloc(reinterpret_cast<void**>(p), bytes);
}
// cudaMallocAsync's form: symmetric memory is allocated at once (every rank
// in the same order), so the stream only orders nothing and is ignored.
inline cudaError_t symm_malloc(void** p, size_t bytes, cudaStream_t) { return symm_malloc(p, bytes); }
template <typename T> inline cudaError_t symm_malloc(T** p, size_t bytes, cudaStream_t s) {
  return symm_malloc(reinterpret_cast<void**>(p), bytes, s);
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
  if (x.nranks > kMaxRanks) return CUCO_TX_FAIL("more than 64 ranks: the control window is sized for 64");
  ncclDevCommRequirements req;
  memset(&req, 0, sizeof(req));  // LSA only: any GIN field would switch GIN on
  req.lsaBarrierCount = kBarriers;
  if (ncclDevCommCreate(c, &req, &x.dc) != ncclSuccess) return CUCO_TX_FAIL("ncclDevCommCreate failed");
  if (x.dc.lsaSize != x.nranks) return CUCO_TX_FAIL("the LSA backend needs every rank in one LSA domain");
  size_t ctrlBytes = cuco::round_up(kCtrlWords * sizeof(uint64_t), NCCL_WIN_REQUIRED_ALIGNMENT);
  if (ncclMemAlloc(&x.ctrl, ctrlBytes) != ncclSuccess) return CUCO_TX_FAIL("ncclMemAlloc of the control window failed");
  if (clear_now(x.ctrl, ctrlBytes) != cudaSuccess) return CUCO_TX_FAIL("clearing the control window failed");
  if (ncclCommWindowRegister(c, x.ctrl, ctrlBytes, &x.ctrlWin, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess || !x.ctrlWin)
    return CUCO_TX_FAIL("ncclCommWindowRegister of the control window failed");
  if (cudaMalloc(&x.error, sizeof(int)) != cudaSuccess || clear_now(x.error, sizeof(int)) != cudaSuccess)
    return CUCO_TX_FAIL("cudaMalloc of the error flag failed");
  x.ctrlSymm.comm = c;
  x.ctrlSymm.win = x.ctrlWin;
  x.ctrlSymm.base = x.ctrl;
  x.ctrlSymm.rank = x.rank;
  x.ctrlSymm.nranks = x.nranks;
  x.postSeq.assign(x.nranks, 0);
  x.sendSeq.assign(x.nranks, 0);
  x.recvSeq.assign(x.nranks, 0);
  x.live = true;
  comms().push_back(x);
  CUCO_TX_TRACE("rank %d: device communicator of %d ranks ready\n", x.rank, x.nranks);
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
    s.ceOff = s.slotOff + (size_t)kSlots * x->nranks * sizeof(uint64_t);
    s.barriers = kBarriers;
    s.rank = x->rank;
    s.nranks = x->nranks;
    if (x->nwins >= kMaxWins) return CUCO_TX_FAIL("more than 64 symmetric buffers on one communicator");
    b->winIdx = x->nwins++;
    b->registered = true;
    CUCO_TX_TRACE("rank %d: window %d registered (%zu bytes)\n", x->rank, b->winIdx, b->bytes);
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
  if (CUCO_COPY_ENGINE)
    CUCO_TX_TRY(cuco::all_gather_ce(b->symm, src, outOff, bytes, stream));
  else
    CUCO_TX_TRY(cuco::all_gather<char>(b->symm, src, outOff, bytes, stream, comm_launch()));
  return ncclSuccess;
}

// ncclAvg on floating types: the device sum, then a local scale by 1/nranks
// of this rank's output (NCCL itself divides floating-point averages too).
template <typename T>
__global__ void scale_kernel(T* p, size_t n, float f) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = static_cast<T>(static_cast<float>(p[i]) * f);
}

inline bool avg_type(ncclDataType_t t) { return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16; }

inline ncclResult_t scale_by_ranks(void* out, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t st) {
  int nranks = 0;
  if (ncclCommCount(comm, &nranks) != ncclSuccess || nranks < 1) return CUCO_TX_FAIL("avg: bad communicator");
  if (nranks == 1 || n == 0) return ncclSuccess;
  float f = 1.0f / (float)nranks;
  unsigned blocks = (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
  switch (t) {
    case ncclFloat32: scale_kernel<float><<<blocks, 256, 0, st>>>(static_cast<float*>(out), n, f); break;
    case ncclFloat16: scale_kernel<__half><<<blocks, 256, 0, st>>>(static_cast<__half*>(out), n, f); break;
    case ncclBfloat16: scale_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(static_cast<__nv_bfloat16*>(out), n, f); break;
    default: return CUCO_TX_FAIL("avg: only floating-point averages are implemented on the device");
  }
  return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("avg: scale launch failed");
}

template <typename T>
inline ncclResult_t reduce_scatter_t(Buf* b, size_t inOff, void* out, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::reduce_scatter<T>(b->symm, inOff, static_cast<T*>(out), n, st, comm_launch()));
  return ncclSuccess;
}

inline ncclResult_t reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream) {
  if (op != ncclSum && !(op == ncclAvg && avg_type(datatype)))
    return CUCO_TX_FAIL("reduce_scatter: only ncclSum (and ncclAvg of floating types) is implemented on the device");
  size_t es = dtype_size(datatype);
  Comm* x = nullptr;
  if (!es || comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  Buf* b = nullptr;
  if (window_of(sendbuff, recvcount * es * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(b->base));
  ncclResult_t r;
  switch (datatype) {
    case ncclFloat32: r = reduce_scatter_t<float>(b, inOff, recvbuff, recvcount, stream); break;
    case ncclFloat16: r = reduce_scatter_t<__half>(b, inOff, recvbuff, recvcount, stream); break;
    case ncclBfloat16: r = reduce_scatter_t<__nv_bfloat16>(b, inOff, recvbuff, recvcount, stream); break;
    case ncclInt32: r = reduce_scatter_t<int32_t>(b, inOff, recvbuff, recvcount, stream); break;
    default: return CUCO_TX_FAIL("reduce_scatter: data type not implemented on the device");
  }
  return r == ncclSuccess && op == ncclAvg ? scale_by_ranks(recvbuff, recvcount, datatype, comm, stream) : r;
}

template <typename T>
inline ncclResult_t all_reduce_t(Buf* b, size_t inOff, size_t outOff, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::all_reduce<T>(b->symm, inOff, outOff, n, st, comm_launch()));
  return ncclSuccess;
}

inline ncclResult_t all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (op != ncclSum && !(op == ncclAvg && avg_type(datatype)))
    return CUCO_TX_FAIL("all_reduce: only ncclSum (and ncclAvg of floating types) is implemented on the device");
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
    if (CUCO_STAGED_NCCL_FROM > 0 && bytes >= (size_t)CUCO_STAGED_NCCL_FROM)
      return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
    // the input lives outside the output's window: stage it locally, reduce in place
    void* stage_dst = recvbuff;
    const void* stage_src = sendbuff;
    if (cudaMemcpyAsync(stage_dst, stage_src, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      return CUCO_TX_FAIL("all_reduce: staging copy failed");
  }
  ncclResult_t r;
  switch (datatype) {
    case ncclFloat32: r = all_reduce_t<float>(b, inOff, outOff, count, stream); break;
    case ncclFloat16: r = all_reduce_t<__half>(b, inOff, outOff, count, stream); break;
    case ncclBfloat16: r = all_reduce_t<__nv_bfloat16>(b, inOff, outOff, count, stream); break;
    case ncclInt32: r = all_reduce_t<int32_t>(b, inOff, outOff, count, stream); break;
    default: return CUCO_TX_FAIL("all_reduce: data type not implemented on the device");
  }
  return r == ncclSuccess && op == ncclAvg ? scale_by_ranks(recvbuff, count, datatype, comm, stream) : r;
}

// ---- point-to-point over the control window -------------------------------
// Layout of a communicator's control window (uint64_t words; S = source rank):
//   ready[S]            count of receives S has posted for this rank
//   post[S][k % kRing]  {window index, offset, bytes} of S's k-th receive
//   data[S][cta]        count of sends from S that CTA cta has completed
// The k-th send from A to B matches the k-th receive on B from A (NCCL's
// order). The receiver publishes where its buffer is, so the sender needs no
// knowledge of the receiver's addressing: any receive buffer in a symmetric
// window works, offsets computed from the receiver's own data included.

struct WinTable {
  ncclWindow_t w[kMaxWins];
};

__device__ __forceinline__ uint64_t* ctrl_word(ncclWindow_t ctrl, size_t word, int owner) {
  return static_cast<uint64_t*>(ncclGetLsaPointer(ctrl, word * sizeof(uint64_t), owner));
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until *flag reaches seq; false when it gave up (kP2pWaitNs passed,
// or an earlier wait already gave up), with the error flag set to code.
__device__ __forceinline__ bool wait_seq(uint64_t* flag, uint64_t seq, int* error, int code) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*flag);
  const unsigned long long t0 = global_ns();
  while (f.load(cuda::memory_order_acquire) < seq) {
    if (*(volatile int*)error != 0) return false;
    if (global_ns() - t0 > kP2pWaitNs) {
      atomicCAS(error, 0, code);
      return false;
    }
  }
  return true;
}

// Receiver `me` tells source `src` where its seq-th receive lands.
static __global__ void post_recv_kernel(ncclWindow_t ctrl, int me, int src, uint64_t seq, uint64_t win,
                                 uint64_t off, uint64_t bytes) {
  if (threadIdx.x != 0) return;
  volatile uint64_t* post = ctrl_word(ctrl, kCtrlPost + ((size_t)me * kRing + seq % kRing) * 4, src);
  post[0] = win;
  post[1] = off;
  post[2] = bytes;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(*ctrl_word(ctrl, kCtrlReady + me, src));
  f.store(seq, cuda::memory_order_release);
}

// Sender `me`: waits for peer's seq-th posted receive, copies `bytes` into it
// (every CTA a share), then each CTA signals its share done.
// used (may be null): where CTA 0 writes the post it found, for the
// copy-engine path's read-back (SendDest).
template <int U>
__global__ void send_kernel(WinTable wins, ncclWindow_t ctrl, SymmDevLite s, int peer, uint64_t seq,
                            const void* src, uint64_t bytes, int* error, uint64_t* used) {
  __shared__ uint64_t post[3];
  if (threadIdx.x == 0) {
    if (wait_seq(ctrl_word(ctrl, kCtrlReady + peer, s.rank), seq, error, kErrSendWait)) {
      volatile uint64_t* p = ctrl_word(ctrl, kCtrlPost + ((size_t)peer * kRing + seq % kRing) * 4, s.rank);
      post[0] = p[0];
      post[1] = p[1];
      post[2] = p[2];
    } else {
      post[0] = post[1] = post[2] = 0;  // nothing posted: copy nothing
    }
  }
  __syncthreads();
  uint64_t n = bytes;
  if (post[0] >= (uint64_t)kMaxWins || post[2] < bytes) {
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicCAS(error, 0, kErrSize);
    n = 0;  // still signal, so the receiver does not hang
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) {  // where it lands, for the receiver's check
    volatile uint64_t* landed = ctrl_word(ctrl, kCtrlLanded + ((size_t)s.rank * kRing + seq % kRing) * 2, peer);
    landed[0] = post[1];
    landed[1] = post[0] | (n << 8);
    if (used) {
      used[0] = post[0];
      used[1] = post[1];
      used[2] = post[2];
    }
  }
  if (n) {
    cuco::SymmDev d;
    d.win = wins.w[post[0]];
    d.rank = s.rank;
    d.nranks = s.nranks;
    d.dataBytes = 0;
    d.slotOff = 0;
    d.nslots = 0;
    cuco::detail::push_bytes<U>(ncclCoopCta(), cuco::Issuers{(int)blockIdx.x, (int)gridDim.x}, d, src,
                                post[1], n, peer, 1, 0);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> f(
        *ctrl_word(ctrl, kCtrlData + (size_t)s.rank * kMaxP2pCtas + blockIdx.x, peer));
    f.store(seq, cuda::memory_order_release);
  }
}

// Receiver: CTA b waits until share b of the seq-th send from src is in;
// CTA 0 then checks that the send landed where this receive posted (window
// win, offset off, at most bytes), since a copy-engine send goes where the
// same send's earlier receives were posted.
static __global__ void recv_wait_kernel(ncclWindow_t ctrl, int me, int src, uint64_t seq, uint64_t win,
                                        uint64_t off, uint64_t bytes, int* error) {
  if (threadIdx.x != 0) return;
  bool in = wait_seq(ctrl_word(ctrl, kCtrlData + (size_t)src * kMaxP2pCtas + blockIdx.x, me), seq, error,
                     kErrRecvWait);
  if (!in || blockIdx.x != 0) return;
  volatile uint64_t* landed = ctrl_word(ctrl, kCtrlLanded + ((size_t)src * kRing + seq % kRing) * 2, me);
  uint64_t at = landed[0], where = landed[1];
  if (at != off || (where & 0xff) != win || (where >> 8) > bytes) atomicCAS(error, 0, kErrLanded);
}

// Whether a send or receive of this size goes by the copy engine
// (CUCO_P2P_CE, messages of CUCO_P2P_NCCL_FROM bytes or more, a driver with
// stream memory operations). Both ends decide alike, from the size.
inline bool p2p_by_ce(const P2pOp& op) {
  return CUCO_P2P_CE && CUCO_P2P_NCCL_FROM > 0 && op.bytes >= (size_t)CUCO_P2P_NCCL_FROM &&
         op.peer != comm_rank(op.comm) && cuco::stream_mem_ops().ok;
}

// Address of word `word` of peer's control window, for stream memory operations.
inline CUdeviceptr ctrl_peer_word(Comm* x, int peer, size_t word) {
  return reinterpret_cast<CUdeviceptr>(static_cast<char*>(x->ctrlSymm.lsaBase[peer]) + word * sizeof(uint64_t));
}

inline ncclResult_t write_word(cudaStream_t st, CUdeviceptr at, uint64_t v) {
  if (cuco::stream_mem_ops().write64(reinterpret_cast<CUstream>(st), at, v, CU_STREAM_WRITE_VALUE_DEFAULT) !=
      CUDA_SUCCESS)
    return CUCO_TX_FAIL("cuStreamWriteValue64 to a peer's control window failed");
  return ncclSuccess;
}

// Receiver -> source: "posted here". Copy-engine receives post with stream
// memory operations (no SM); the others with a one-warp kernel.
inline ncclResult_t p2p_post(const P2pOp& op) {
  Buf* b = nullptr;
  if (window_of(op.buf, op.bytes, op.comm, &b) != ncclSuccess) return ncclInvalidUsage;
  Comm* x = comm_find(op.comm);
  uint64_t seq = ++x->postSeq[op.peer];
  size_t off = (size_t)(static_cast<const char*>(op.buf) - static_cast<char*>(b->base));
  if (!p2p_by_ce(op)) {
    post_recv_kernel<<<1, 32, 0, op.stream>>>(x->ctrlWin, x->rank, op.peer, seq, (uint64_t)b->winIdx,
                                              (uint64_t)off, (uint64_t)op.bytes);
    return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("post_recv launch failed");
  }
  if (cuco::lsa_peer_bases(x->ctrlSymm) != 0) return CUCO_TX_FAIL("no LSA addresses for the control window");
  size_t post = kCtrlPost + ((size_t)x->rank * kRing + seq % kRing) * 4;
  const uint64_t words[3] = {(uint64_t)b->winIdx, (uint64_t)off, (uint64_t)op.bytes};
  for (int i = 0; i < 3; i++)
    if (write_word(op.stream, ctrl_peer_word(x, op.peer, post + (size_t)i), words[i]) != ncclSuccess)
      return ncclInvalidUsage;
  return write_word(op.stream, ctrl_peer_word(x, op.peer, kCtrlReady + (size_t)x->rank), seq);
}

inline void send_dest_free(SendDest* d) {
  if (d->used) cudaFree(d->used);
  if (d->post) cudaFreeHost(d->post);
  for (cudaEvent_t e : d->ev)
    if (e) cudaEventDestroy(e);
  delete d;
}

// The entry of op's (peer, source range), made on its first send; null when
// the communicator holds kMaxSendDests already or memory ran out.
inline SendDest* send_dest_find_or_new(Comm* x, const P2pOp& op) {
  for (SendDest* d : x->dests)
    if (d->peer == op.peer && d->src == op.buf && d->bytes == op.bytes) return d;
  if (x->dests.size() >= kMaxSendDests) return nullptr;
  SendDest* d = new SendDest;
  d->peer = op.peer;
  d->src = op.buf;
  d->bytes = op.bytes;
  bool ok = cudaMalloc(reinterpret_cast<void**>(&d->used), kReadBacks * 3 * sizeof(uint64_t)) == cudaSuccess &&
            cudaMallocHost(reinterpret_cast<void**>(&d->post), kReadBacks * 3 * sizeof(uint64_t)) == cudaSuccess;
  for (cudaEvent_t& e : d->ev) ok = ok && cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess;
  if (!ok) {
    send_dest_free(d);
    return nullptr;
  }
  x->dests.push_back(d);
  return d;
}

// Takes in the finished read-backs, oldest first; the destination is known
// once none is in flight, no send went unseen since, and kAgreeSends in a
// row named the same place (and the receive held the send).
inline bool send_dest_known(SendDest* d) {
  while (d->inFlight > 0 && cudaEventQuery(d->ev[d->head]) == cudaSuccess) {
    const uint64_t* p = d->post + 3 * d->head;
    bool fits = p[0] < (uint64_t)kMaxWins && p[2] >= d->bytes;
    bool same = !d->gapBefore[d->head] && d->agreed > 0 && p[0] == d->win && p[1] == d->off;
    d->agreed = !fits ? 0 : same ? d->agreed + 1 : 1;
    d->win = p[0];
    d->off = p[1];
    d->head = (d->head + 1) % kReadBacks;
    d->inFlight--;
  }
  return d->inFlight == 0 && !d->gap && d->agreed >= kAgreeSends;
}

// The slot the next SM-kernel send of d writes its post into (nullptr when
// all are in flight: that send goes unseen, which breaks the run).
inline uint64_t* send_dest_slot(SendDest* d) {
  if (d->inFlight == kReadBacks) {
    d->gap = true;
    return nullptr;
  }
  return d->used + 3 * ((d->head + d->inFlight) % kReadBacks);
}

// After the SM kernel that wrote its post into send_dest_slot(d): reads it back.
inline ncclResult_t send_dest_read_back(SendDest* d, cudaStream_t st) {
  int slot = (d->head + d->inFlight) % kReadBacks;
  if (cudaMemcpyAsync(d->post + 3 * slot, d->used + 3 * slot, 3 * sizeof(uint64_t), cudaMemcpyDeviceToHost, st) !=
          cudaSuccess ||
      cudaEventRecord(d->ev[slot], st) != cudaSuccess)
    return CUCO_TX_FAIL("reading a send's destination back failed");
  d->gapBefore[slot] = d->gap;
  d->gap = false;
  d->inFlight++;
  return ncclSuccess;
}

// The registered window of index win on comm, or null (freed since).
inline Buf* window_at(ncclComm_t comm, uint64_t win) {
  for (Buf* b : bufs())
    if (b->registered && b->symm.comm == comm && b->winIdx == (int)win) return b;
  return nullptr;
}

// The seq-th send to peer by the copy engine, to the known destination:
// wait for the post, copy into the peer's window, write where it landed,
// then stamp every share's arrival word (the receiver waits on them all).
// A missing receive makes it wait for ever (cuStreamWaitValue64 has no
// time limit), where the SM kernel gives up after kP2pWaitS.
inline ncclResult_t p2p_send_ce(Comm* x, const SendDest& d, Buf* to, const P2pOp& op, uint64_t seq) {
  if (cuco::lsa_peer_bases(to->symm) != 0 || cuco::lsa_peer_bases(x->ctrlSymm) != 0)
    return CUCO_TX_FAIL("copy-engine send: no LSA address for the destination window");
  const uint64_t* ready = static_cast<const uint64_t*>(x->ctrl) + kCtrlReady + op.peer;
  if (cuco::stream_mem_ops().wait64(reinterpret_cast<CUstream>(op.stream), reinterpret_cast<CUdeviceptr>(ready), seq,
                                    CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
    return CUCO_TX_FAIL("cuStreamWaitValue64 on a receive's post failed");
  if (cuco::ce_copy(static_cast<char*>(to->symm.lsaBase[op.peer]) + d.off, op.buf, op.bytes, op.stream) != 0)
    return CUCO_TX_FAIL("copy-engine send: the copy failed");
  size_t landed = kCtrlLanded + ((size_t)x->rank * kRing + seq % kRing) * 2;
  ncclResult_t r = write_word(op.stream, ctrl_peer_word(x, op.peer, landed), d.off);
  if (r == ncclSuccess) r = write_word(op.stream, ctrl_peer_word(x, op.peer, landed + 1), d.win | (op.bytes << 8));
  for (int cta = 0; cta < p2p_ctas() && r == ncclSuccess; cta++)
    r = write_word(op.stream, ctrl_peer_word(x, op.peer, kCtrlData + (size_t)x->rank * kMaxP2pCtas + cta), seq);
  return r;
}

inline ncclResult_t p2p_send(const P2pOp& op) {
  if (windows_register(op.comm) != ncclSuccess) return ncclInvalidUsage;
  Comm* x = comm_find(op.comm);
  uint64_t seq = ++x->sendSeq[op.peer];
  SendDest* d = p2p_by_ce(op) ? send_dest_find_or_new(x, op) : nullptr;
  if (d && send_dest_known(d)) {
    Buf* to = window_at(op.comm, d->win);
    if (to) {
      CUCO_TX_TRACE("rank %d: send %llu to peer %d by the copy engine\n", x->rank, (unsigned long long)seq, op.peer);
      return p2p_send_ce(x, *d, to, op, seq);
    }
    d->agreed = 0;  // its window was freed: learn again
  }
  uint64_t* used = d ? send_dest_slot(d) : nullptr;
  WinTable t;
  memset(&t, 0, sizeof t);
  for (Buf* b : bufs())
    if (b->registered && b->symm.comm == op.comm) t.w[b->winIdx] = b->symm.win;
  SymmDevLite s{x->rank, x->nranks};
  int ctas = p2p_ctas(), threads = CUCO_COMM_THREADS;
  send_kernel<CUCO_DEVICE_UNROLL_ONLY><<<ctas, threads, 0, op.stream>>>(t, x->ctrlWin, s, op.peer, seq, op.buf,
                                                                      op.bytes, x->error, used);
  if (cudaGetLastError() != cudaSuccess) return CUCO_TX_FAIL("send kernel launch failed");
  return used ? send_dest_read_back(d, op.stream) : ncclSuccess;
}

inline ncclResult_t p2p_wait(const P2pOp& op) {
  Comm* x = comm_find(op.comm);
  Buf* b = nullptr;
  if (!x) return CUCO_TX_FAIL("receive on a communicator without device setup");
  if (window_of(op.buf, op.bytes, op.comm, &b) != ncclSuccess) return ncclInvalidUsage;
  uint64_t seq = ++x->recvSeq[op.peer];
  size_t off = (size_t)(static_cast<const char*>(op.buf) - static_cast<char*>(b->base));
  recv_wait_kernel<<<p2p_ctas(), 32, 0, op.stream>>>(x->ctrlWin, x->rank, op.peer, seq, (uint64_t)b->winIdx,
                                                     (uint64_t)off, (uint64_t)op.bytes, x->error);
  return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("receive wait launch failed");
}

// Sends to self become local copies into the matching receive to self (the
// k-th send to self of a group feeds its k-th receive from self).
inline ncclResult_t p2p_self(const std::vector<P2pOp>& ops) {
  std::vector<const P2pOp*> sends, recvs;
  for (const P2pOp& op : ops) {
    if (op.peer != comm_rank(op.comm)) continue;
    (op.isSend ? sends : recvs).push_back(&op);
  }
  if (sends.size() != recvs.size()) return CUCO_TX_FAIL("a send to self without its receive in the same group");
  for (size_t i = 0; i < sends.size(); i++) {
    const P2pOp& s = *sends[i];
    const P2pOp& r = *recvs[i];
    if (s.bytes > r.bytes) return CUCO_TX_FAIL("send to self larger than its receive");
    void* self_dst = const_cast<void*>(r.buf);
    const void* self_src = s.buf;
    if (self_dst != self_src &&
        cudaMemcpyAsync(self_dst, self_src, s.bytes, cudaMemcpyDeviceToDevice, s.stream) != cudaSuccess)
      return CUCO_TX_FAIL("local copy of a send to self failed");
    if (s.stream != r.stream) {
      cudaEvent_t ev;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
          cudaEventRecord(ev, s.stream) != cudaSuccess || cudaStreamWaitEvent(r.stream, ev, 0) != cudaSuccess)
        return CUCO_TX_FAIL("ordering a receive from self failed");
      cudaEventDestroy(ev);
    }
  }
  return ncclSuccess;
}

// Whether NCCL's local buffer registration is off (NCCL_LOCAL_REGISTER=0,
// read by NCCL once, at communicator creation; read here once too).
inline bool nccl_local_register_off() {
  static const bool off = [] {
    const char* v = std::getenv("NCCL_LOCAL_REGISTER");
    return v && strcmp(v, "0") == 0;
  }();
  return off;
}

// Whether a send or receive goes through NCCL's own send/recv: its size is
// past CUCO_P2P_NCCL_FROM, and NCCL may send from it. NCCL 2.28's send/recv
// hang when a buffer lies in a registered symmetric window while NCCL's
// local registration is on (seen at 2 ranks: the device all-to-all of
// counts registers the windows, then the rows' ncclSend/ncclRecv never
// complete; NCCL_LOCAL_REGISTER=0 runs), so once a window of the
// communicator is registered, every size takes the device path unless the
// environment turns local registration off. Both ends of a pair decide
// alike: the sizes match, windows are registered by every rank together, and
// the environment is the job's.
inline bool via_nccl(const P2pOp& op) {
  if (CUCO_P2P_NCCL_FROM <= 0 || op.bytes < (size_t)CUCO_P2P_NCCL_FROM || op.peer == comm_rank(op.comm) ||
      p2p_by_ce(op))
    return false;
  const Comm* x = comm_find(op.comm);
  return !x || x->nwins == 0 || nccl_local_register_off();
}

// The group's sends and receives that go through NCCL, as one NCCL group,
// after the device ones (every rank issues them in the same order).
inline ncclResult_t p2p_nccl(const std::vector<P2pOp>& ops) {
  bool any = false;
  for (const P2pOp& op : ops) any = any || via_nccl(op);
  if (!any) return ncclSuccess;
  ncclResult_t r = ::ncclGroupStart();
  for (const P2pOp& op : ops) {
    if (r != ncclSuccess || !via_nccl(op)) continue;
    r = op.isSend ? ::ncclSend(op.buf, op.bytes, ncclInt8, op.peer, op.comm, op.stream)
                  : ::ncclRecv(const_cast<void*>(op.buf), op.bytes, ncclInt8, op.peer, op.comm, op.stream);
  }
  ncclResult_t g = ::ncclGroupEnd();
  return r != ncclSuccess ? r : g;
}

// Posts every receive, then issues every send, then waits for every receive,
// so no two ranks can wait on each other; then the ones NCCL carries.
inline ncclResult_t p2p_flush() {
  std::vector<P2pOp> ops;
  ops.swap(pending());
  for (const P2pOp& op : ops)
    CUCO_TX_TRACE("rank %d: %s peer %d, %zu bytes, via %s\n", comm_rank(op.comm), op.isSend ? "send to" : "receive from",
                  op.peer, op.bytes, op.peer == comm_rank(op.comm) ? "a local copy" : via_nccl(op) ? "NCCL" : "the device");
  std::vector<P2pOp> viaNccl;
  for (size_t i = 0; i < ops.size();) {
    if (comm_setup(ops[i].comm) == ncclSuccess && via_nccl(ops[i])) {
      viaNccl.push_back(ops[i]);
      ops.erase(ops.begin() + (long)i);
    } else {
      i++;
    }
  }
  ncclResult_t r = ncclSuccess;
  std::vector<int> posted(kMaxRanks, 0);
  for (const P2pOp& op : ops) {
    if (r != ncclSuccess) break;
    if (comm_setup(op.comm) != ncclSuccess) return ncclInvalidUsage;
    if (op.isSend || op.peer == comm_rank(op.comm)) continue;
    if (++posted[op.peer] > kRing) return CUCO_TX_FAIL("more receives from one peer in a group than the ring holds");
    r = p2p_post(op);
  }
  for (const P2pOp& op : ops)
    if (r == ncclSuccess && op.isSend && op.peer != comm_rank(op.comm)) r = p2p_send(op);
  if (r == ncclSuccess) r = p2p_self(ops);
  for (const P2pOp& op : ops)
    if (r == ncclSuccess && !op.isSend && op.peer != comm_rank(op.comm)) r = p2p_wait(op);
  if (r == ncclSuccess) r = p2p_nccl(viaNccl);
  return r;
}

// ---- pieces, and what a GEMM made (schedule send_as_produced) -------------
// A GEMM that makes a later send's buffer records the range it wrote with an
// event (made_record, from cuco_tx::<gemm>_record); made_begin(site), at the
// entry of the function whose calls make and send the buffer, drops what an
// earlier call recorded, and a receive into a recorded range drops the
// records it overlaps. The send (send(made_site(...), ...)) issues each piece
// on a side stream once every record covering that piece is done, and its
// stream waits for the last piece; a piece no record covers, and every piece
// after it, goes on the send's stream as before.
constexpr size_t kMinPieceBytes = 1u << 20;
constexpr size_t kPieceAlign = 4096;
constexpr int kMaxP2pPieces = 16;
constexpr size_t kMaxMadeRecs = 4096;

struct MadeRec {
  int site;
  const char *lo, *hi;
  cudaEvent_t ev;
};
struct MadeSiteTag {
  int site, on;
};
inline MadeSiteTag made_site(int site, int on) { return MadeSiteTag{site, on}; }

inline std::vector<MadeRec>& made_recs() { static std::vector<MadeRec> v; return v; }
inline std::vector<cudaEvent_t>& event_pool() { static std::vector<cudaEvent_t> v; return v; }

inline cudaError_t event_take(cudaEvent_t* ev) {
  if (event_pool().empty()) return cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
  *ev = event_pool().back();
  event_pool().pop_back();
  return cudaSuccess;
}

// Pieces of a send or receive of `bytes` (1: whole; none under 1 MiB), and
// piece i of k as an operation.
inline int p2p_pieces(size_t bytes) {
  size_t most = std::min<size_t>(bytes / kMinPieceBytes, kMaxP2pPieces);
  return clamp_count(CUCO_P2P_PIECES, most < 1 ? 1 : (int)most);
}
inline size_t piece_off(size_t bytes, int k, int i) {
  return i >= k ? bytes : bytes / (size_t)k * (size_t)i / kPieceAlign * kPieceAlign;
}
inline P2pOp piece_op(bool isSend, const void* buf, size_t bytes, int k, int i, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  size_t lo = piece_off(bytes, k, i), hi = piece_off(bytes, k, i + 1);
  return P2pOp{isSend, static_cast<const char*>(buf) + lo, hi - lo, peer, comm, stream};
}

inline void made_drop(size_t i) {
  event_pool().push_back(made_recs()[i].ev);
  made_recs().erase(made_recs().begin() + (long)i);
}

inline void made_begin(int site) {
  for (size_t i = made_recs().size(); i-- > 0;)
    if (made_recs()[i].site == site) made_drop(i);
}

inline void made_forget(const void* p, size_t bytes) {
  const char *lo = static_cast<const char*>(p), *hi = lo + bytes;
  for (size_t i = made_recs().size(); i-- > 0;)
    if (made_recs()[i].lo < hi && made_recs()[i].hi > lo) made_drop(i);
}

inline ncclResult_t made_record(int site, const void* p, size_t bytes, cudaStream_t st) {
  cudaEvent_t ev;
  if (event_take(&ev) != cudaSuccess || cudaEventRecord(ev, st) != cudaSuccess)
    return CUCO_TX_FAIL("send_as_produced: recording a GEMM's event failed");
  if (made_recs().size() >= kMaxMadeRecs) made_drop(0);
  const char* lo = static_cast<const char*>(p);
  made_recs().push_back(MadeRec{site, lo, lo + bytes, ev});
  return ncclSuccess;
}

// Makes s wait for every record of site overlapping [lo, hi); false (nothing
// waited) unless those records cover the whole range.
inline bool made_wait(int site, const char* lo, const char* hi, cudaStream_t s) {
  std::vector<const MadeRec*> over;
  for (const MadeRec& r : made_recs())
    if (r.site == site && r.lo < hi && r.hi > lo) over.push_back(&r);
  std::sort(over.begin(), over.end(), [](const MadeRec* a, const MadeRec* b) { return a->lo < b->lo; });
  const char* at = lo;
  for (const MadeRec* r : over) {
    if (r->lo > at) return false;
    at = std::max(at, r->hi);
  }
  if (at < hi) return false;
  for (const MadeRec* r : over)
    if (cudaStreamWaitEvent(s, r->ev, 0) != cudaSuccess) return false;
  return true;
}

inline ncclResult_t p2p_enqueue(bool isSend, const void* buf, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL(isSend ? "send: unsupported data type" : "recv: unsupported data type");
  int n = 0;
  if (ncclCommCount(comm, &n) != ncclSuccess || peer < 0 || peer >= n) return CUCO_TX_FAIL("peer out of range");
  if (count == 0) return ncclSuccess;
  size_t bytes = count * es;
  if (!isSend) made_forget(buf, bytes);
  int k = p2p_pieces(bytes);
  for (int i = 0; i < k; i++) pending().push_back(piece_op(isSend, buf, bytes, k, i, peer, comm, stream));
  return group_depth() > 0 ? ncclSuccess : p2p_flush();
}

inline ncclResult_t send(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream) {
  return p2p_enqueue(true, sendbuff, count, datatype, peer, comm, stream);
}

inline ncclResult_t recv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream) {
  return p2p_enqueue(false, recvbuff, count, datatype, peer, comm, stream);
}

// The side stream of early pieces, at the device's highest priority: where
// the pieces go by SM kernels, their CTAs get the next free SM ahead of the
// computation's.
inline cudaError_t side_stream_create(cudaStream_t* st) {
  int least = 0, greatest = 0;
  cudaError_t r = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  return r == cudaSuccess ? cudaStreamCreateWithPriority(st, cudaStreamNonBlocking, greatest) : r;
}

// Makes stream wait for what the communicator's side stream holds now.
inline ncclResult_t side_join(Comm* x, cudaStream_t stream) {
  cudaEvent_t join;
  if (event_take(&join) != cudaSuccess || cudaEventRecord(join, x->side) != cudaSuccess ||
      cudaStreamWaitEvent(stream, join, 0) != cudaSuccess)
    return CUCO_TX_FAIL("send_as_produced: joining the side stream failed");
  event_pool().push_back(join);
  return ncclSuccess;
}

// A send whose buffer a recorded GEMM makes (schedule send_as_produced):
// each piece goes on the communicator's side stream as soon as what made it
// is done (see made_wait); the send's stream then waits for the last piece.
// Off (knob 0), inside a group, or whole: an ordinary send.
inline ncclResult_t send(MadeSiteTag m, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype), bytes = count * es;
  int k = p2p_pieces(bytes);
  Comm* x = comm_setup(comm) == ncclSuccess ? comm_find(comm) : nullptr;
  if (!m.on || !es || k < 2 || group_depth() > 0 || !x) {
    ncclResult_t r = send(sendbuff, count, datatype, peer, comm, stream);
    if (group_depth() == 0) made_begin(m.site);
    return r;
  }
  if (!x->side && side_stream_create(&x->side) != cudaSuccess)
    return CUCO_TX_FAIL("send_as_produced: creating the side stream failed");
  bool early = true;
  int earlyPieces = 0;
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < k && r == ncclSuccess; i++) {
    P2pOp op = piece_op(true, sendbuff, bytes, k, i, peer, comm, x->side);
    const char* lo = static_cast<const char*>(op.buf);
    bool wasEarly = early;
    early = early && made_wait(m.site, lo, lo + op.bytes, x->side);
    earlyPieces += early;
    // the first late piece starts after the early ones: a receive's wait
    // counts its source's sends in order, so they must end in order
    if (wasEarly && !early && earlyPieces > 0 && (r = side_join(x, stream)) != ncclSuccess) break;
    if (!early) op.stream = stream;
    pending().push_back(op);
    r = p2p_flush();
  }
  made_begin(m.site);
  CUCO_TX_TRACE("rank %d: send to peer %d in %d pieces, %d of them as soon as made\n", x->rank, peer, k,
                earlyPieces);
  if (r != ncclSuccess || earlyPieces == 0 || earlyPieces < k) return r;
  return side_join(x, stream);
}

inline ncclResult_t group_start();
inline ncclResult_t group_end();

// Collectives built from point-to-point: every rank's receive buffer must be
// symmetric memory; send buffers may be any device memory.
inline ncclResult_t all_to_all(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclComm_t comm, cudaStream_t stream) {
  int n = 0;
  size_t es = dtype_size(datatype);
  if (!es || ncclCommCount(comm, &n) != ncclSuccess) return CUCO_TX_FAIL("all_to_all: bad arguments");
  if (CUCO_COPY_ENGINE && group_depth() == 0 && count > 0) {
    size_t row = count * es;
    Buf* b = nullptr;
    const char* s = static_cast<const char*>(sendbuff);
    const char* d = static_cast<const char*>(recvbuff);
    bool apart = s + row * (size_t)n <= d || d + row * (size_t)n <= s;
    if (apart && comm_setup(comm) == ncclSuccess && window_of(recvbuff, row * (size_t)n, comm, &b) == ncclSuccess) {
      size_t outOff = (size_t)(d - static_cast<char*>(b->base));
      CUCO_TX_TRY(cuco::all_to_all_ce(b->symm, sendbuff, outOff, row, stream));
      return ncclSuccess;
    }
  }
  group_start();
  ncclResult_t r = ncclSuccess;
  for (int p = 0; p < n && r == ncclSuccess; p++) {
    r = send(static_cast<const char*>(sendbuff) + (size_t)p * count * es, count, datatype, p, comm, stream);
    if (r == ncclSuccess) r = recv(static_cast<char*>(recvbuff) + (size_t)p * count * es, count, datatype, p, comm, stream);
  }
  ncclResult_t g = group_end();
  return r != ncclSuccess ? r : g;
}

inline ncclResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              int root, ncclComm_t comm, cudaStream_t stream) {
  int n = 0, me = comm_rank(comm);
  if (ncclCommCount(comm, &n) != ncclSuccess) return CUCO_TX_FAIL("broadcast: bad communicator");
  group_start();
  ncclResult_t r = ncclSuccess;
  if (me == root) {
    for (int p = 0; p < n && r == ncclSuccess; p++)
      if (p != root) r = send(sendbuff, count, datatype, p, comm, stream);
    if (r == ncclSuccess && sendbuff != recvbuff) r = send(sendbuff, count, datatype, root, comm, stream);
    if (r == ncclSuccess && sendbuff != recvbuff) r = recv(recvbuff, count, datatype, root, comm, stream);
  } else {
    r = recv(recvbuff, count, datatype, root, comm, stream);
  }
  ncclResult_t g = group_end();
  return r != ncclSuccess ? r : g;
}

inline ncclResult_t bcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream) {
  return broadcast(buff, buff, count, datatype, root, comm, stream);
}

inline ncclResult_t gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  int n = 0, me = comm_rank(comm);
  size_t es = dtype_size(datatype);
  if (!es || ncclCommCount(comm, &n) != ncclSuccess) return CUCO_TX_FAIL("gather: bad arguments");
  group_start();
  ncclResult_t r = send(sendbuff, count, datatype, root, comm, stream);
  if (me == root)
    for (int p = 0; p < n && r == ncclSuccess; p++)
      r = recv(static_cast<char*>(recvbuff) + (size_t)p * count * es, count, datatype, p, comm, stream);
  ncclResult_t g = group_end();
  return r != ncclSuccess ? r : g;
}

inline ncclResult_t scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  int n = 0, me = comm_rank(comm);
  size_t es = dtype_size(datatype);
  if (!es || ncclCommCount(comm, &n) != ncclSuccess) return CUCO_TX_FAIL("scatter: bad arguments");
  group_start();
  ncclResult_t r = ncclSuccess;
  if (me == root)
    for (int p = 0; p < n && r == ncclSuccess; p++)
      r = send(static_cast<const char*>(sendbuff) + (size_t)p * count * es, count, datatype, p, comm, stream);
  if (r == ncclSuccess) r = recv(recvbuff, count, datatype, root, comm, stream);
  ncclResult_t g = group_end();
  return r != ncclSuccess ? r : g;
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

// What the communicator's error flag says (kErrSize, kErrSendWait, kErrRecvWait).
inline const char* p2p_error_text(int err) {
  static char text[200];
  if (err == kErrSendWait)
    snprintf(text, sizeof text,
             "a send waited %d s for its receive to be posted and gave up (a receive missing on the peer, or sends "
             "and receives matched in another order)",
             kP2pWaitS);
  else if (err == kErrRecvWait)
    snprintf(text, sizeof text, "a receive waited %d s for its data and gave up (the peer's send never came)",
             kP2pWaitS);
  else if (err == kErrLanded)
    return "a copy-engine send landed where the same send's earlier receives were posted, not where this receive "
           "was posted (the destination changed between steps; CUCO_P2P_CE=0 sends by the SM kernel)";
  else
    return "a send found its receive smaller than the data (counts differ between ncclSend and ncclRecv)";
  return text;
}

// Releases a communicator's device state: reports a send that found no
// fitting receive, frees the control window, destroys the device communicator.
inline ncclResult_t comm_release(Comm& x) {
  ncclResult_t r = ncclSuccess;
  int err = 0;
  if (x.error && cudaMemcpy(&err, x.error, sizeof err, cudaMemcpyDeviceToHost) == cudaSuccess && err)
    r = CUCO_TX_FAIL(p2p_error_text(err));
  if (x.ctrlWin && ncclCommWindowDeregister(x.comm, x.ctrlWin) != ncclSuccess) r = CUCO_TX_FAIL("control window deregister failed");
  if (x.ctrl && ncclMemFree(x.ctrl) != ncclSuccess) r = CUCO_TX_FAIL("control window free failed");
  if (x.error) cudaFree(x.error);
  x.ctrlWin = nullptr;
  x.ctrl = nullptr;
  x.error = nullptr;
  if (x.side) cudaStreamDestroy(x.side);
  x.side = nullptr;
  for (SendDest* d : x.dests) send_dest_free(d);
  x.dests.clear();
  if (ncclDevCommDestroy(x.comm, &x.dc) != ncclSuccess) r = CUCO_TX_FAIL("ncclDevCommDestroy failed");
  x.live = false;
  return r;
}

// Frees a symmetric buffer (collective when registered: every rank frees the
// same buffers in the same order); other pointers go to cudaFree.
inline cudaError_t symm_free(void* p) {
  std::vector<Buf*>& v = bufs();
  for (size_t i = 0; i < v.size(); i++) {
    Buf* b = v[i];
    if (b->base != p) continue;
    CUCO_TX_TRACE("window %d freed (%zu bytes)\n", b->winIdx, b->bytes);
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
        if (x.comm == c && x.live && comm_release(x) != ncclSuccess) return cudaErrorUnknown;
    }
    return cudaSuccess;
  }
  return cudaFree(p);
}

// cudaFreeAsync's form: a symmetric buffer is freed once the stream's work is
// done; other pointers go to cudaFreeAsync.
inline cudaError_t symm_free_async(void* p, cudaStream_t s) {
  for (Buf* b : bufs())
    if (b->base == p) {
      cudaError_t r = cudaStreamSynchronize(s);
      return r != cudaSuccess ? r : symm_free(p);
    }
  return cudaFreeAsync(p, s);
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
  for (Comm& x : comms())
    if (x.comm == c && x.live && comm_release(x) != ncclSuccess) return ncclInvalidUsage;
  return ncclSuccess;
}

// Schedule early_start_late_wait (knobs CUCO_EARLY_<site>, one per rewritten
// call that admits it): the call's stream argument goes through early_start,
// which records an event where the call was and returns a side stream of
// the site that waits for it, so the collective starts as soon as its inputs
// are ready; early_wait, inserted before the first later statement that may
// touch its buffers (or the end of its block), makes the call's stream (and
// the consumer's, when another) wait for it. The work in between overlaps the
// collective. With the knob at 0 both are no-ops: the call runs on its own
// stream, as without the schedule.
struct EarlySite {
  cudaStream_t side = nullptr, stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  bool pending = false;
};
inline std::vector<EarlySite>& early_sites() { static std::vector<EarlySite> v; return v; }

inline cudaStream_t early_start(int site, int on, cudaStream_t stream) {
  if (!on) return stream;
  std::vector<EarlySite>& v = early_sites();
  if ((size_t)site >= v.size()) v.resize((size_t)site + 1);
  EarlySite& e = v[(size_t)site];
  if (!e.side && (cudaStreamCreateWithFlags(&e.side, cudaStreamNonBlocking) != cudaSuccess ||
                  cudaEventCreateWithFlags(&e.ready, cudaEventDisableTiming) != cudaSuccess ||
                  cudaEventCreateWithFlags(&e.done, cudaEventDisableTiming) != cudaSuccess)) {
    fprintf(stderr, "cuco_tx: early_start(%d): cannot create its side stream; the call stays on its stream\n", site);
    e.side = nullptr;
    return stream;
  }
  if (cudaEventRecord(e.ready, stream) != cudaSuccess || cudaStreamWaitEvent(e.side, e.ready, 0) != cudaSuccess) {
    fprintf(stderr, "cuco_tx: early_start(%d): event record/wait failed; the call stays on its stream\n", site);
    return stream;
  }
  e.stream = stream;
  e.pending = true;
  return e.side;
}

inline void early_wait(int site, int on, cudaStream_t consumer) {
  if (!on || (size_t)site >= early_sites().size()) return;
  EarlySite& e = early_sites()[(size_t)site];
  if (!e.pending) return;
  e.pending = false;
  if (cudaEventRecord(e.done, e.side) != cudaSuccess || cudaStreamWaitEvent(e.stream, e.done, 0) != cudaSuccess ||
      (consumer != e.stream && cudaStreamWaitEvent(consumer, e.done, 0) != cudaSuccess)) {
    fprintf(stderr, "cuco_tx: early_wait(%d): event record/wait failed; synchronising the device\n", site);
    cudaDeviceSynchronize();
  }
}

inline void early_wait(int site, int on) {
  if (!on || (size_t)site >= early_sites().size()) return;
  early_wait(site, on, early_sites()[(size_t)site].stream);
}

// Schedule consumer_split_by_source (knobs CUCO_SPLIT_<site>): an all-gather
// whose first consumer is a cuBLAS GEMM reading the gathered buffer. The
// all-gather (its first argument split_site(site, CUCO_SPLIT_<site>)) pulls
// with the copy engines: its own block goes into its own slot of the receive
// window, a one-CTA barrier (every rank's block is there), one cudaMemcpyAsync
// per peer from the peer's window (its LSA address) into the local receive
// buffer, an event per source rank recorded after its copy, and a second
// barrier (no rank overwrites its window before every peer has pulled). The
// GEMM (gemm_ex_split & co., same arguments) then issues one GEMM per rank
// block on its handle's stream: its own block first, reading the local send
// buffer, then each peer's once its event has fired. With the knob at 0 (or
// when the layout does not split), the GEMM waits for the whole gather and
// runs unchanged.
// CUCO_SPLIT_CHUNKS (set by the transform beside CUCO_TX_GEMM_SPLIT): each
// peer's block is pulled in that many pieces, an event after each, and its
// GEMM runs as that many GEMMs, each after the piece its rows need.
#ifndef CUCO_SPLIT_CHUNKS
#define CUCO_SPLIT_CHUNKS 1
#endif
constexpr int kMaxSplitChunks = 8;
inline int split_chunks() { return clamp_count(CUCO_SPLIT_CHUNKS, kMaxSplitChunks); }

struct SplitSite {
  int site, on;
};
inline SplitSite split_site(int site, int on) { return SplitSite{site, on}; }

struct SplitRec {
  const char* recv = nullptr;  // the gathered buffer
  const void* send = nullptr;  // this rank's block, as given
  size_t bytes = 0;            // per rank
  int rank = 0, nranks = 0;
  cudaEvent_t arrived[kMaxRanks] = {};
  cudaEvent_t piece[kMaxRanks][kMaxSplitChunks] = {};  // piece j of peer p landed
  size_t pieceBytes = 0;                                // bytes of each piece but the last
  bool fresh = false;          // gathered and not consumed yet
  bool warned = false;         // the fallback was reported
};
// The record of a schedule's site, made on first use (nullptr for site < 0).
template <class R>
inline R* site_rec(std::vector<R>& v, int site) {
  if (site < 0) return nullptr;
  if ((size_t)site >= v.size()) v.resize((size_t)site + 1);
  return &v[(size_t)site];
}
inline SplitRec* split_rec(int site) {
  static std::vector<SplitRec> v;
  return site_rec(v, site);
}

// The pull itself, on `stream`; records r->arrived[p] after each block lands.
inline ncclResult_t all_gather_pull(SplitRec* r, Buf* b, const char* send, size_t outOff, cudaStream_t stream) {
  cuco::Symm& s = b->symm;
  char* recv = static_cast<char*>(b->base) + outOff;
  char* own = recv + (size_t)r->rank * r->bytes;
  CUCO_TX_TRY(cuco::lsa_peer_bases(s));
  if (send != own && cudaMemcpyAsync(own, send, r->bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return CUCO_TX_FAIL("all_gather (split): local copy failed");
  if (cudaEventRecord(r->arrived[r->rank], stream) != cudaSuccess) return CUCO_TX_FAIL("all_gather (split): event record failed");
  CUCO_TX_TRY(cuco::ce_rendezvous(s, stream));
  int pieces = split_chunks();
  r->pieceBytes = (r->bytes + pieces - 1) / pieces;
  for (int k = 1; k < r->nranks; k++) {
    int p = (r->rank + k) % r->nranks;
    const char* from = static_cast<const char*>(s.lsaBase[p]) + outOff + (size_t)p * r->bytes;
    char* to = recv + (size_t)p * r->bytes;
    for (int j = 0; j < pieces; j++) {
      size_t lo = std::min(r->bytes, (size_t)j * r->pieceBytes), hi = std::min(r->bytes, lo + r->pieceBytes);
      if ((hi > lo && cuco::ce_copy(to + lo, from + lo, hi - lo, stream) != 0) ||
          cudaEventRecord(r->piece[p][j], stream) != cudaSuccess)
        return CUCO_TX_FAIL("all_gather (split): pull from a peer failed");
    }
    if (cudaEventRecord(r->arrived[p], stream) != cudaSuccess)
      return CUCO_TX_FAIL("all_gather (split): pull from a peer failed");
  }
  CUCO_TX_TRY(cuco::ce_rendezvous(s, stream));
  return ncclSuccess;
}

inline ncclResult_t all_gather(SplitSite ss, const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  SplitRec* r = ss.on ? split_rec(ss.site) : nullptr;
  if (!r) return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  r->fresh = false;
  size_t es = dtype_size(datatype);
  Comm* x = nullptr;
  if (!es) return CUCO_TX_FAIL("all_gather: unsupported data type");
  if (comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  size_t bytes = sendcount * es;
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  if (outOff + bytes * (size_t)x->nranks > b->symm.dataBytes) return CUCO_TX_FAIL("all_gather (split): output past the window");
  for (int p = 0; p < x->nranks; p++) {
    if (!r->arrived[p] && cudaEventCreateWithFlags(&r->arrived[p], cudaEventDisableTiming) != cudaSuccess)
      return CUCO_TX_FAIL("all_gather (split): cannot create its events");
    for (int j = 0; j < split_chunks(); j++)
      if (!r->piece[p][j] && cudaEventCreateWithFlags(&r->piece[p][j], cudaEventDisableTiming) != cudaSuccess)
        return CUCO_TX_FAIL("all_gather (split): cannot create its events");
  }
  r->recv = static_cast<const char*>(recvbuff);
  r->send = sendbuff;
  r->bytes = bytes;
  r->rank = x->rank;
  r->nranks = x->nranks;
  if (bytes == 0) return ncclSuccess;
  ncclResult_t res = all_gather_pull(r, b, static_cast<const char*>(sendbuff), outOff, stream);
  r->fresh = res == ncclSuccess;
  return res;
}

// Makes `stream` wait for everything the site's side stream holds (the
// whole gather), when schedule early_start_late_wait put it there.
inline void split_join(int site, cudaStream_t stream) {
  if (site < 0 || (size_t)site >= early_sites().size()) return;
  EarlySite& e = early_sites()[(size_t)site];
  if (!e.pending || stream == e.side) return;
  if (cudaEventRecord(e.done, e.side) != cudaSuccess || cudaStreamWaitEvent(stream, e.done, 0) != cudaSuccess) {
    fprintf(stderr, "cuco_tx: split(%d): event record/wait failed; synchronising the device\n", site);
    cudaDeviceSynchronize();
  }
}

// Schedule producer_split (knobs CUCO_PSPLIT_<site>): an all-reduce whose
// input the cuBLAS GEMM right before it writes. The GEMM (gemm_ex_produce &
// co., same arguments) runs as CUCO_PSPLIT_PIECES GEMMs over ranges of its
// output columns and records an event after each; the all-reduce (its first
// argument produce_site(site, CUCO_PSPLIT_<site>)) reduces each range on a
// side stream as soon as the GEMM has made it, while the GEMM's next range
// runs, and the call's stream then waits for the side stream. Whatever
// transport all_reduce picks for a range (device kernel, or NCCL above
// CUCO_STAGED_NCCL_FROM) runs there. With the knob at 0, when the GEMM did
// not split, or when the all-reduce is not an in-place reduction of exactly
// the GEMM's output, the all-reduce runs whole on its stream.
#ifndef CUCO_PSPLIT_PIECES
#define CUCO_PSPLIT_PIECES 4
#endif
constexpr int kMaxProducePieces = 16;
inline int produce_pieces() { return clamp_count(CUCO_PSPLIT_PIECES, kMaxProducePieces); }

struct ProduceSite {
  int site, on;
};
inline ProduceSite produce_site(int site, int on) { return ProduceSite{site, on}; }

struct ProduceRec {
  const char* out = nullptr;                  // the GEMM's output
  size_t end[kMaxProducePieces] = {};         // byte end of each range made
  cudaEvent_t made[kMaxProducePieces] = {};   // range j written
  int pieces = 0;
  cudaStream_t gemmStream = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t entry = nullptr, done = nullptr;
  bool fresh = false;   // made and not reduced yet
  bool warned = false;  // the fallback was reported
};
inline ProduceRec* produce_rec(int site) {
  static std::vector<ProduceRec> v;
  return site_rec(v, site);
}

inline ncclResult_t produce_events(ProduceRec* r) {
  for (int j = 0; j < kMaxProducePieces; j++)
    if (!r->made[j] && cudaEventCreateWithFlags(&r->made[j], cudaEventDisableTiming) != cudaSuccess)
      return CUCO_TX_FAIL("producer split: cannot create its events");
  if ((!r->entry && cudaEventCreateWithFlags(&r->entry, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->done && cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->side && cudaStreamCreateWithFlags(&r->side, cudaStreamNonBlocking) != cudaSuccess))
    return CUCO_TX_FAIL("producer split: cannot create its stream");
  return ncclSuccess;
}

// Whether `stream` is ordered after everything the GEMM's stream had when
// the GEMM was issued: the same stream, or the side stream schedule
// early_start_late_wait made from it at this call (its `ready` event was
// recorded after the GEMM's ranges).
inline bool follows_gemm_stream(cudaStream_t stream, cudaStream_t gemm) {
  if (stream == gemm) return true;
  for (const EarlySite& e : early_sites())
    if (e.pending && e.side == stream && e.stream == gemm) return true;
  return false;
}

// Each range on the side stream once made; the stream waits for all of them
// (also after a range failed, so that nothing of the call is left running
// unjoined). In place only: an output elsewhere could be an input the GEMM's
// later ranges still read.
inline ncclResult_t all_reduce(ProduceSite ps, const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ProduceRec* r = ps.on ? produce_rec(ps.site) : nullptr;
  size_t es = dtype_size(datatype);
  bool fits = r && r->fresh && sendbuff == r->out && recvbuff == sendbuff && es && r->pieces > 0 &&
              count * es == r->end[r->pieces - 1];
  if (r && r->fresh && !fits && !r->warned) {
    fprintf(stderr,
            "cuco_tx: producer split(%d): the all-reduce runs whole: it is not an in-place reduction of exactly "
            "the GEMM's output\n",
            ps.site);
    r->warned = true;
  }
  if (r) r->fresh = false;
  if (!fits) return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  cudaStream_t side = r->side;
  // ordered after the stream's earlier work when it is not the GEMM's own
  if (!follows_gemm_stream(stream, r->gemmStream) &&
      (cudaEventRecord(r->entry, stream) != cudaSuccess || cudaStreamWaitEvent(side, r->entry, 0) != cudaSuccess))
    return CUCO_TX_FAIL("producer split: event record/wait failed");
  ncclResult_t res = ncclSuccess;
  size_t lo = 0;
  for (int j = 0; j < r->pieces && res == ncclSuccess; j++) {
    size_t hi = r->end[j];
    if (cudaStreamWaitEvent(side, r->made[j], 0) != cudaSuccess) {
      res = CUCO_TX_FAIL("producer split: event wait failed");
      break;
    }
    res = all_reduce(static_cast<const char*>(sendbuff) + lo, static_cast<char*>(recvbuff) + lo, (hi - lo) / es,
                     datatype, op, comm, side);
    lo = hi;
  }
  if (cudaEventRecord(r->done, side) != cudaSuccess || cudaStreamWaitEvent(stream, r->done, 0) != cudaSuccess) {
    fprintf(stderr, "cuco_tx: producer split(%d): event record/wait failed; synchronising the device\n", ps.site);
    cudaDeviceSynchronize();
    if (res == ncclSuccess) res = ncclSystemError;
  }
  return res;
}

}  // namespace cuco_tx

#if defined(CUCO_TX_GEMM_SPLIT)
#include <cublas_v2.h>
namespace cuco_tx {

inline size_t cuda_type_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_8I: case CUDA_R_8U: return 1;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_C_16F: return 4;
    case CUDA_R_64F: case CUDA_C_32F: return 8;
    case CUDA_C_64F: return 16;
    default: return 0;
  }
}

// A GEMM's operands as the split sees them (column-major cuBLAS terms).
struct GemmView {
  cublasOperation_t ta, tb;
  int m, n;
  const char *A, *B;
  char* C;
  int lda, ldb, ldc;
  size_t esA, esB, esC;
  const char* whole = nullptr;  // why the call cannot split at all, or nullptr
};

// How the gathered buffer splits the GEMM: the operand (0: A, 1: B; -1: no
// clean split) and the output rows (A) or columns (B) of each rank's block.
struct SplitShape {
  int operand = -1;
  long span = 0;
  const char* why = "the GEMM does not read the gathered buffer";
};

inline bool in_gather(const SplitRec& r, const char* p) {
  return p && r.recv && p >= r.recv && p < r.recv + r.bytes * (size_t)r.nranks;
}

// Rank block p of the gathered buffer as a range of output columns: B (not
// transposed) starts at the buffer, each block is whole columns of B (ldb
// elements) and the blocks cover n. Of output rows: A transposed, whole
// columns of A (lda elements) covering m.
inline SplitShape split_shape(const SplitRec& r, const GemmView& g) {
  SplitShape s;
  bool a = in_gather(r, g.A), b = in_gather(r, g.B);
  if (!a && !b) return s;
  if (g.whole) { s.why = g.whole; return s; }
  if (in_gather(r, g.C)) { s.why = "the GEMM writes into the gathered buffer"; return s; }
  if (a && b) { s.why = "both operands read the gathered buffer"; return s; }
  bool trans = a ? g.ta != CUBLAS_OP_N : g.tb != CUBLAS_OP_N;
  bool wantTrans = a;  // A's output rows are its columns only when transposed
  const char* p = a ? g.A : g.B;
  size_t es = a ? g.esA : g.esB;
  long ld = a ? g.lda : g.ldb, total = a ? g.m : g.n;
  if (trans != wantTrans) { s.why = "each rank's block is a range of the reduction dimension (k)"; return s; }
  if (p != r.recv) { s.why = "the operand does not start at the gathered buffer"; return s; }
  if (!es || !g.esC || ld <= 0 || r.bytes % ((size_t)ld * es) != 0) {
    s.why = "a rank's block is not a whole number of the operand's columns"; return s;
  }
  long span = (long)(r.bytes / ((size_t)ld * es));
  if (span * (long)r.nranks != total) { s.why = "the rank blocks do not cover the GEMM's output exactly"; return s; }
  s.operand = a ? 0 : 1;
  s.span = span;
  return s;
}

// Issues gemm(view) once per rank block, own block first (from the send
// buffer), each peer's after its arrival event; or, when the layout does not
// split or the knob is 0, joins the gather and issues gemm(g) unchanged.
template <class F>
inline cublasStatus_t split_run(int site, int on, cublasHandle_t h, const GemmView& g, F gemm) {
  cudaStream_t st = nullptr;
  if (cublasGetStream(h, &st) != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_INTERNAL_ERROR;
  SplitRec* r = on ? split_rec(site) : nullptr;
  SplitShape sh;
  if (r && r->fresh) sh = split_shape(*r, g);
  if (!r || sh.operand < 0) {
    // no fresh gather (the GEMM runs again on what an earlier one gathered):
    // nothing to split, nothing to say
    if (r && r->fresh && !r->warned) {
      fprintf(stderr, "cuco_tx: split(%d): the GEMM runs whole after the gather: %s\n", site, sh.why);
      r->warned = true;
    }
    if (r) r->fresh = false;
    split_join(site, st);
    return gemm(g);
  }
  r->fresh = false;
  size_t colBytes = sh.operand == 1 ? (size_t)g.ldb * g.esB : (size_t)g.lda * g.esA;
  for (int k = 0; k < r->nranks; k++) {
    int p = (r->rank + k) % r->nranks;
    int parts = k == 0 ? 1 : std::min<int>(split_chunks(), (int)sh.span);
    const char* block = k == 0 ? static_cast<const char*>(r->send) : r->recv + (size_t)p * r->bytes;
    for (int j = 0; j < parts; j++) {
      long lo = sh.span * j / parts, hi = sh.span * (j + 1) / parts;
      if (k > 0) {  // wait for the piece holding this part's last column
        size_t last = (size_t)hi * colBytes - 1;
        int piece = r->pieceBytes ? (int)std::min<size_t>(last / r->pieceBytes, kMaxSplitChunks - 1) : 0;
        cudaEvent_t ev = parts == 1 ? r->arrived[p] : r->piece[p][piece];
        if (cudaStreamWaitEvent(st, ev, 0) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
      }
      GemmView v = g;
      if (sh.operand == 1) {
        v.B = block + (size_t)lo * colBytes;
        v.n = (int)(hi - lo);
        v.C = g.C + (size_t)(p * sh.span + lo) * g.ldc * g.esC;
      } else {
        v.A = block + (size_t)lo * colBytes;
        v.m = (int)(hi - lo);
        v.C = g.C + (size_t)(p * sh.span + lo) * g.esC;
      }
      cublasStatus_t rc = gemm(v);
      if (rc != CUBLAS_STATUS_SUCCESS) return rc;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The producer split's GEMM: ranges of output columns (C column-major with
// ldc == m, so each range is contiguous), an event after each; or the GEMM
// whole (knob 0, or a layout that does not split: then the all-reduce runs
// whole too).
template <class F>
inline cublasStatus_t produce_run(int site, int on, cublasHandle_t h, const GemmView& g, F gemm) {
  ProduceRec* r = on ? produce_rec(site) : nullptr;
  if (r) r->fresh = false;
  const char* why = g.whole ? g.whole
                    : g.ldc != g.m || !g.esB || !g.esC ? "its output columns are not contiguous (ldc != m)"
                    : g.n < 2                          ? "its output has one column"
                                                       : nullptr;
  if (!r || why) {
    if (r && why && !r->warned) {
      fprintf(stderr, "cuco_tx: producer split(%d): the GEMM runs whole: %s\n", site, why);
      r->warned = true;
    }
    return gemm(g);
  }
  cudaStream_t st = nullptr;
  if (cublasGetStream(h, &st) != CUBLAS_STATUS_SUCCESS || produce_events(r) != ncclSuccess) {
    if (!r->warned) fprintf(stderr, "cuco_tx: producer split(%d): the GEMM runs whole (no stream or events)\n", site);
    r->warned = true;
    return gemm(g);  // r->fresh stays false: the all-reduce runs whole too
  }
  int pieces = std::min(produce_pieces(), g.n);
  size_t colB = g.tb == CUBLAS_OP_N ? (size_t)g.ldb * g.esB : g.esB;
  for (int j = 0; j < pieces; j++) {
    long lo = (long)g.n * j / pieces, hi = (long)g.n * (j + 1) / pieces;
    GemmView v = g;
    v.n = (int)(hi - lo);
    v.B = g.B + (size_t)lo * colB;
    v.C = g.C + (size_t)lo * g.ldc * g.esC;
    cublasStatus_t rc = gemm(v);
    if (rc != CUBLAS_STATUS_SUCCESS) return rc;
    if (cudaEventRecord(r->made[j], st) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    r->end[j] = (size_t)hi * g.ldc * g.esC;
  }
  r->out = g.C;
  r->pieces = pieces;
  r->gemmStream = st;
  r->fresh = true;
  return CUBLAS_STATUS_SUCCESS;
}

// The four cuBLAS calls the schedules route, each through a runner: the
// consumer split (split_run) or the producer split (produce_run). A runner
// gets the call's view and a function that issues the call on a view.
struct SplitRunner {
  template <class F>
  cublasStatus_t operator()(int site, int on, cublasHandle_t h, const GemmView& g, F gemm) const {
    return split_run(site, on, h, g, gemm);
  }
};
struct ProduceRunner {
  template <class F>
  cublasStatus_t operator()(int site, int on, cublasHandle_t h, const GemmView& g, F gemm) const {
    return produce_run(site, on, h, g, gemm);
  }
};
// send_as_produced: the GEMM whole, then (knob on) the range of C it wrote
// recorded with an event on its stream; a batch of several is not recorded.
struct RecordRunner {
  template <class F>
  cublasStatus_t operator()(int site, int on, cublasHandle_t h, const GemmView& g, F gemm) const {
    cublasStatus_t rc = gemm(g);
    cudaStream_t st = nullptr;
    if (rc != CUBLAS_STATUS_SUCCESS || !on || g.whole || g.m <= 0 || g.n <= 0 || !g.esC || g.ldc < g.m ||
        cublasGetStream(h, &st) != CUBLAS_STATUS_SUCCESS)
      return rc;
    size_t bytes = ((size_t)(g.n - 1) * (size_t)g.ldc + (size_t)g.m) * g.esC;
    return made_record(site, g.C, bytes, st) == ncclSuccess ? rc : CUBLAS_STATUS_EXECUTION_FAILED;
  }
};

template <class R>
inline cublasStatus_t gemm_ex_via(R run, int site, int on, cublasHandle_t h, cublasOperation_t ta,
                                  cublasOperation_t tb, int m, int n, int k, const void* alpha, const void* A,
                                  cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb,
                                  const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t ct,
                                  cublasGemmAlgo_t algo) {
  GemmView g{ta, tb, m, n, static_cast<const char*>(A), static_cast<const char*>(B), static_cast<char*>(C),
             lda, ldb, ldc, cuda_type_size(Atype), cuda_type_size(Btype), cuda_type_size(Ctype)};
  return run(site, on, h, g, [&](const GemmView& v) {
    return cublasGemmEx(h, ta, tb, v.m, v.n, k, alpha, v.A, Atype, lda, v.B, Btype, ldb, beta, v.C, Ctype, ldc, ct,
                        algo);
  });
}

// One batch splits like cublasGemmEx; several run whole.
template <class R>
inline cublasStatus_t gemm_strided_batched_ex_via(
    R run, int site, int on, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long sA, const void* B, cudaDataType Btype,
    int ldb, long long sB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long sC, int batch,
    cublasComputeType_t ct, cublasGemmAlgo_t algo) {
  GemmView g{ta, tb, m, n, static_cast<const char*>(A), static_cast<const char*>(B), static_cast<char*>(C),
             lda, ldb, ldc, cuda_type_size(Atype), cuda_type_size(Btype), cuda_type_size(Ctype)};
  if (batch != 1) g.whole = "a batch of several GEMMs is not split";
  return run(site, on, h, g, [&](const GemmView& v) {
    return cublasGemmStridedBatchedEx(h, ta, tb, v.m, v.n, k, alpha, v.A, Atype, lda, sA, v.B, Btype, ldb, sB, beta,
                                      v.C, Ctype, ldc, sC, batch, ct, algo);
  });
}

template <class R>
inline cublasStatus_t sgemm_via(R run, int site, int on, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                int m, int n, int k, const float* alpha, const float* A, int lda, const float* B,
                                int ldb, const float* beta, float* C, int ldc) {
  GemmView g{ta, tb, m, n, reinterpret_cast<const char*>(A), reinterpret_cast<const char*>(B),
             reinterpret_cast<char*>(C), lda, ldb, ldc, sizeof(float), sizeof(float), sizeof(float)};
  return run(site, on, h, g, [&](const GemmView& v) {
    return cublasSgemm(h, ta, tb, v.m, v.n, k, alpha, reinterpret_cast<const float*>(v.A), lda,
                       reinterpret_cast<const float*>(v.B), ldb, beta, reinterpret_cast<float*>(v.C), ldc);
  });
}

template <class R>
inline cublasStatus_t hgemm_via(R run, int site, int on, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                int m, int n, int k, const __half* alpha, const __half* A, int lda, const __half* B,
                                int ldb, const __half* beta, __half* C, int ldc) {
  GemmView g{ta, tb, m, n, reinterpret_cast<const char*>(A), reinterpret_cast<const char*>(B),
             reinterpret_cast<char*>(C), lda, ldb, ldc, sizeof(__half), sizeof(__half), sizeof(__half)};
  return run(site, on, h, g, [&](const GemmView& v) {
    return cublasHgemm(h, ta, tb, v.m, v.n, k, alpha, reinterpret_cast<const __half*>(v.A), lda,
                       reinterpret_cast<const __half*>(v.B), ldb, beta, reinterpret_cast<__half*>(v.C), ldc);
  });
}

// The names the transform writes: <call>_split, <call>_produce and
// <call>_record, each (site, knob, <the call's arguments>).
template <class... A>
inline cublasStatus_t gemm_ex_split(A... a) { return gemm_ex_via(SplitRunner{}, a...); }
template <class... A>
inline cublasStatus_t gemm_strided_batched_ex_split(A... a) { return gemm_strided_batched_ex_via(SplitRunner{}, a...); }
template <class... A>
inline cublasStatus_t sgemm_split(A... a) { return sgemm_via(SplitRunner{}, a...); }
template <class... A>
inline cublasStatus_t hgemm_split(A... a) { return hgemm_via(SplitRunner{}, a...); }
template <class... A>
inline cublasStatus_t gemm_ex_produce(A... a) { return gemm_ex_via(ProduceRunner{}, a...); }
template <class... A>
inline cublasStatus_t gemm_strided_batched_ex_produce(A... a) {
  return gemm_strided_batched_ex_via(ProduceRunner{}, a...);
}
template <class... A>
inline cublasStatus_t sgemm_produce(A... a) { return sgemm_via(ProduceRunner{}, a...); }
template <class... A>
inline cublasStatus_t hgemm_produce(A... a) { return hgemm_via(ProduceRunner{}, a...); }
template <class... A>
inline cublasStatus_t gemm_ex_record(A... a) { return gemm_ex_via(RecordRunner{}, a...); }
template <class... A>
inline cublasStatus_t gemm_strided_batched_ex_record(A... a) {
  return gemm_strided_batched_ex_via(RecordRunner{}, a...);
}
template <class... A>
inline cublasStatus_t sgemm_record(A... a) { return sgemm_via(RecordRunner{}, a...); }
template <class... A>
inline cublasStatus_t hgemm_record(A... a) { return hgemm_via(RecordRunner{}, a...); }

}  // namespace cuco_tx
#endif  // CUCO_TX_GEMM_SPLIT
// cuco_tx: end of the glue
