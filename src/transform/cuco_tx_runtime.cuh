// cuco_tx: the glue 'cuco transform' writes into a transformed program. It
// maps the host NCCL calls the rules rewrote (same arguments, same stream,
// same ncclResult_t) onto device/'s symmetric-memory kernels. This file is
// part 1 of 8 (knobs, buffers and windows, communicators, collectives); the
// program gets it joined with cuco_tx_p2p.cuh, cuco_tx_schedules.cuh,
// cuco_tx_recv.cuh, cuco_tx_produce.cuh, cuco_tx_lend.cuh,
// cuco_tx_attention.cuh and cuco_tx_gemm.cuh, in that order
// (cuco_transform_runtime).
//
// Buffers: every allocation the rules found feeding a collective is made with
// symm_malloc (ncclMemAlloc, rounded to 4 KiB, plus a signal-slot area) and
// registered as a symmetric window (see eager_comm for when), in
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
// CUCO_AR_CE_FROM: an all-reduce of at least this many bytes (0: none) that
// ends in place in a window (its input there, or staged there) at 2 ranks
// or more goes by the copy engines (cuco::all_reduce_ce: each rank pulls
// its part from the peers, sums it with one short kernel and pushes it
// back, between rendezvous of stream memory operations): the data moves
// with no SM held, beside a kernel that holds them all.
#define CUCO_AR_CE_FROM 0              // cuco:knob run 0 1048576 16777216
// CUCO_AR_NCCL_UPTO: an all-reduce of at most this many bytes (0: none) at 2
// ranks or more goes through NCCL's own ncclAllReduce, on its buffers in
// their windows (registered with NCCL_WIN_COLL_SYMMETRIC, where NCCL takes
// its symmetric kernels). In a loop of small all-reduces synchronised with
// the host (decode steps) those finish sooner than the device LSA kernel,
// whose barriers cost NVLink round trips: 16 KiB 0.264 against 0.280 ms a
// step of four, 64 KiB 33.7 against 35.9 us a step of one
// (bench/results/2026-11-28-small-allreduce-h200x2.json).
#define CUCO_AR_NCCL_UPTO 65536        // cuco:knob run 0 16384 65536 262144 1048576 1073741824
// CUCO_AG_NCCL_UPTO: the same for an all-gather of at most this many bytes
// gathered (all ranks' blocks together; 0: none): NCCL's own ncclAllGather
// on the gathered buffer's window. One gather a step between host
// synchronisations (greedy decoding's logits): 64 KiB 65.9 against 67.7 us
// a step, 256 KiB 104.3 against 107.5, 1 MiB 292.3 against 294.0
// (bench/results/2026-11-28-small-allgather-h200x2.json); back to back the
// LSA kernel wins at every size. Before a kernel that re-reads the gathered
// buffer from L2 it can lose (an 8 MiB gather before 256 blocks that each
// read all of it: 1.645 against NCCL's 1.575 ms a step,
// bench/results/2026-11-28-params-struct-h200x2.json), so the choices reach
// 1 GiB: every all-gather NCCL's own, on its window.
#define CUCO_AG_NCCL_UPTO 262144       // cuco:knob run 0 65536 262144 1048576 4194304 16777216 1073741824
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
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuco_tx {

constexpr int kBarriers = 132;          // LSA barriers of the device communicator (>= any CTA count)
constexpr int kSlots = 1 + 64;          // signal slots of each buffer's window
constexpr int kMaxRanks = 64;           // the control window is sized for this many ranks
constexpr int kMaxWins = 256;           // symmetric buffers per communicator (a send kernel's table)
constexpr int kGlueWins = 16;           // of them kept for the glue's own windows (symm_malloc)
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
// The control window's words (cuco_tx_p2p.cuh): the seq-th post of rank src
// (3 of its 4 words used), src's arrival word of share cta, where src's
// seq-th send landed (offset, then landed_where), and how that second word
// holds the window (low 8 bits) and the bytes sent.
__host__ __device__ constexpr size_t post_word(int src, uint64_t seq) {
  return kCtrlPost + ((size_t)src * kRing + seq % kRing) * 4;
}
__host__ __device__ constexpr size_t data_word(int src, int cta) { return kCtrlData + (size_t)src * kMaxP2pCtas + cta; }
__host__ __device__ constexpr size_t landed_word(int src, uint64_t seq) {
  return kCtrlLanded + ((size_t)src * kRing + seq % kRing) * 2;
}
__host__ __device__ constexpr uint64_t landed_where(uint64_t win, uint64_t bytes) { return win | (bytes << 8); }

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
  int nwins = 0;                 // data window indices handed out so far
  std::vector<int> freeWins;     // indices of released windows, handed out again first
  bool setupFailed = false;      // its windows could not be registered at setup (eager_comm)
  int* error = nullptr;          // device flag: a send found no fitting receive
  std::vector<uint64_t> postSeq, sendSeq, recvSeq;  // per peer
  cudaStream_t side = nullptr;   // send_as_produced: the pieces that go early
  cuco::Symm ctrlSymm;           // the control window's peer addresses (copy-engine sends)
  std::vector<SendDest*> dests;  // copy-engine sends' destinations, owned here
  std::vector<void*> ceScratch;  // copy-engine all-reduces' scratch, the last the largest (owned)
  size_t ceScratchBytes = 0;
};

struct P2pOp {
  bool isSend;
  const void* buf;
  size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
  size_t msgBytes;  // the whole message's bytes when the op is one of its pieces
};

// The runtime's lists are never destroyed: a program's global object whose
// destructor frees a symmetric buffer (a unique_ptr with the glue's free as
// its deleter) may run after function-local statics are gone.
inline std::vector<Buf*>& bufs() { static std::vector<Buf*>* v = new std::vector<Buf*>; return *v; }
// Windows the program freed, kept registered for its next allocation of the
// same size (symm_free, symm_malloc): a buffer made and freed every step
// costs no collective registration after the first. At most kSpareWindows,
// the oldest released first; comm_teardown releases those of its
// communicator. Every rank frees and allocates in the same order, so every
// rank takes the same spare.
constexpr size_t kSpareWindows = 4;
inline std::vector<Buf*>& spare_bufs() { static std::vector<Buf*>* v = new std::vector<Buf*>; return *v; }
// What a later part of the glue holds per communicator (windows of its
// own, streams) is released by a hook it registers once; comm_teardown runs
// the hooks first, on every rank in the same order.
using TeardownHook = ncclResult_t (*)(ncclComm_t);
inline std::vector<TeardownHook>& teardown_hooks() { static std::vector<TeardownHook> v; return v; }
inline void on_teardown(TeardownHook h) {
  for (TeardownHook x : teardown_hooks())
    if (x == h) return;
  teardown_hooks().push_back(h);
}
inline std::vector<Comm>& comms() { static std::vector<Comm>* v = new std::vector<Comm>; return *v; }
inline std::vector<P2pOp>& pending() { static std::vector<P2pOp> v; return v; }
inline int& group_depth() { static int d = 0; return d; }

// Collectives inside a cuco_tx group run where they are issued (only the
// point-to-point calls wait for group_end), each on its own stream when
// schedule early_start_late_wait moved it to a side stream. Members of one
// group run one after another, in the order issued: two device collectives
// of one communicator running at once on different streams could wait for
// each other's peers. group_member(stream), at each collective's entry,
// makes `stream` wait for the previous member's stream when it differs.
struct GroupOrder {
  cudaStream_t last = nullptr;
  cudaEvent_t done = nullptr;
  bool any = false;  // a member was issued in the current group
};
inline GroupOrder& group_order() { static GroupOrder g; return g; }
inline void group_member(cudaStream_t stream) {
  GroupOrder& g = group_order();
  if (group_depth() == 0) return;
  if (g.any && g.last != stream) {
    if (!g.done && cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming) != cudaSuccess) g.done = nullptr;
    if (!g.done || cudaEventRecord(g.done, g.last) != cudaSuccess || cudaStreamWaitEvent(stream, g.done, 0) != cudaSuccess) {
      fprintf(stderr, "cuco_tx: group: event record/wait failed; synchronising the device\n");
      cudaDeviceSynchronize();
    }
  }
  g.last = stream;
  g.any = true;
}

// A collective kept host NCCL inside a cuco_tx group ("ncclX(args)" written
// "kept_in_group(ncclX, args)" by the rules): group_start issued no
// ncclGroupStart, so it runs where it stands, as its own NCCL operation,
// after the group's earlier members (group_member on its stream, the last
// argument of every NCCL collective).
template <class... P, class... A>
inline ncclResult_t kept_in_group(ncclResult_t (*call)(P...), A&&... a) {
  static_assert(sizeof...(A) > 0, "an NCCL collective takes its stream last");
  cudaStream_t stream = std::get<sizeof...(A) - 1>(std::forward_as_tuple(a...));
  group_member(stream);
  return call(std::forward<A>(a)...);
}

// CUCO_TX_TRACE=1 (any value but 0): each communicator setup, window
// registration and point-to-point call on stderr as it is issued, with the
// rank, so that the ranks' sequences can be compared when a run hangs; and
// each GEMM or kernel a schedule splits, as it is split.
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

// When windows are registered (a collective of every rank of the
// communicator). By default at the first use of one, every buffer allocated
// by then, with the communicator of that use. Where the transform saw one
// communicator made once, in main (CUCO_TX_ONE_COMM), they are registered
// as soon as both exist instead: at comm_setup the buffers allocated before
// it, and later ones when they are allocated. Every rank reaches both
// places, so a program whose ranks 2 and up never communicate while rank 0
// sends to rank 1 does not wait on them at the send.
#ifndef CUCO_TX_ONE_COMM
#define CUCO_TX_ONE_COMM 0
#endif

// CUCO_TX_DTYPES: the element types the device reductions are built for, as
// bits (1 float, 2 half, 4 bfloat16, 8 int32). The transform sets it to
// float plus the types the program's reductions name as literals or macros
// when it can read them all: each type left out spares its kernels' compilation (about
// a fifth of the program's nvcc time for the three of them); a call of a
// type left out goes to NCCL's own call (device_reduces).
#ifndef CUCO_TX_DTYPES
#define CUCO_TX_DTYPES 0xF
#endif
#define CUCO_TX_HAS_HALF ((CUCO_TX_DTYPES & 2) != 0)
#define CUCO_TX_HAS_BF16 ((CUCO_TX_DTYPES & 4) != 0)
#define CUCO_TX_HAS_INT32 ((CUCO_TX_DTYPES & 8) != 0)

inline ncclResult_t windows_register(ncclComm_t c);
// The program's one communicator once comm_setup has seen it, until
// comm_teardown (CUCO_TX_ONE_COMM).
inline ncclComm_t& one_comm() { static ncclComm_t c = nullptr; return c; }
// The communicator windows are registered with as they are allocated, or
// null (registration waits for a first use): the one communicator while it
// is the only live one, or while none is (symm_free releases the device
// communicator with its last window; registering sets it up again, at an
// allocation every rank reaches).
inline ncclComm_t eager_comm() {
  if (!CUCO_TX_ONE_COMM) return nullptr;
  ncclComm_t only = nullptr;
  int live = 0;
  for (const Comm& x : comms())
    if (x.live && ++live == 1) only = x.comm;
  if (live == 0) return one_comm();
  return live == 1 ? only : nullptr;
}

// NCCL 2.28's own send/recv hang on a buffer inside a registered symmetric
// window while NCCL's local registration is on (via_nccl, cuco_tx_p2p.cuh),
// and windows may be registered before a program's first send. So the
// transformed program turns NCCL's local registration off before main, before
// NCCL reads it, unless the job sets NCCL_LOCAL_REGISTER itself: large sends
// and receives keep NCCL's transport (CUCO_P2P_NCCL_FROM). NCCL then moves
// the program's other NCCL calls through its own buffers, as it does for the
// cudaMalloc buffers of a program that registers none.
static struct LocalRegisterOff {
  LocalRegisterOff() { setenv("NCCL_LOCAL_REGISTER", "0", 0); }
} local_register_off;

// A symmetric buffer of the glue's own or the program's (symm_malloc).
inline cudaError_t symm_malloc_window(void** p, size_t bytes) {
  ncclComm_t eager = eager_comm();
  std::vector<Buf*>& spares = spare_bufs();
  for (size_t i = 0; eager && i < spares.size(); i++) {
    Buf* s = spares[i];
    if (!s->registered || s->symm.comm != eager ||
        s->dataBytes != cuco::round_up(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT))
      continue;
    spares.erase(spares.begin() + (long)i);
    s->bytes = bytes;
    bufs().push_back(s);
    *p = s->base;
    CUCO_TX_TRACE("window %d reused (%zu bytes)\n", s->winIdx, bytes);
    return cudaSuccess;
  }
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
  if (eager && windows_register(eager) != ncclSuccess) return cudaErrorInvalidValue;
  return cudaSuccess;
}
inline bool tell_once(bool& told, const char* what);
// Whether the program's symmetric buffers are at their most: kMaxWins -
// kGlueWins live windows (every rank allocates alike, so every rank gets
// there at the same allocation). Its next buffers come from the allocator it
// named, as without the transform: their collectives go through NCCL's own
// (outside_windows), a receive into one fails with a message. Said once.
inline bool windows_full() {
  if (bufs().size() + spare_bufs().size() < (size_t)(kMaxWins - kGlueWins)) return false;
  static bool told = false;
  return tell_once(told, "more than 240 symmetric buffers live: the next ones come from the program's own "
                         "allocator, and their collectives go through NCCL's own");
}
// Symmetric allocation: replaces cudaMalloc for buffers a collective needs in
// a window. Returns a cudaError_t so the program's own checks still apply.
inline cudaError_t symm_malloc(void** p, size_t bytes) {
  return windows_full() ? cudaMalloc(p, bytes) : symm_malloc_window(p, bytes);
}
template <typename T> inline cudaError_t symm_malloc(T** p, size_t bytes) {
  return symm_malloc(reinterpret_cast<void**>(p), bytes);
}
// cudaMallocAsync's form: symmetric memory is allocated at once (every rank
// in the same order), so the stream only orders nothing and is ignored.
inline cudaError_t symm_malloc(void** p, size_t bytes, cudaStream_t s) {
  return windows_full() ? cudaMallocAsync(p, bytes, s) : symm_malloc_window(p, bytes);
}
template <typename T> inline cudaError_t symm_malloc(T** p, size_t bytes, cudaStream_t s) {
  return symm_malloc(reinterpret_cast<void**>(p), bytes, s);
}

inline int comm_rank(ncclComm_t c) {
  int r = -1;
  if (ncclCommUserRank(c, &r) != ncclSuccess) return -1;
  return r;
}

// The allocation of device memory holding p (*base, *size, from the
// driver's cuMemGetAddressRange, looked up through the runtime: nothing
// links libcuda); false when the driver cannot say.
inline bool alloc_range(const void* p, uintptr_t* base, size_t* size) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const Fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    return cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
                   q == cudaDriverEntryPointSuccess
               ? reinterpret_cast<Fn>(f)
               : nullptr;
  }();
  CUdeviceptr b = 0;
  if (!fn || !p || fn(&b, size, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return false;
  *base = (uintptr_t)b;
  return true;
}

// The start of the allocation holding p, or 0 when the driver cannot say.
inline uintptr_t alloc_start(const void* p) {
  uintptr_t base = 0;
  size_t size = 0;
  return alloc_range(p, &base, &size) ? base : 0;
}

inline Comm* comm_find(ncclComm_t c) {
  for (Comm& x : comms())
    if (x.comm == c && x.live) return &x;
  return nullptr;
}

// Creates the device communicator (once per communicator). Collective.
// A null communicator (a rank left out of ncclCommSplit by
// NCCL_SPLIT_NOCOLOR) has nothing to set up: ncclInvalidArgument, as NCCL
// answers for it, without a message (the setup after the split runs on
// every rank).
inline ncclResult_t comm_setup(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  if (const Comm* found = comm_find(c)) return found->setupFailed ? ncclInvalidUsage : ncclSuccess;
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
#if CUCO_TX_HAS_HALF
  CUCO_TX_TRY(cuco::load_kernels<__half>());
#endif
#if CUCO_TX_HAS_BF16
  CUCO_TX_TRY(cuco::load_kernels<__nv_bfloat16>());
#endif
#if CUCO_TX_HAS_INT32
  CUCO_TX_TRY(cuco::load_kernels<int32_t>());
#endif
  if (CUCO_TX_ONE_COMM && comms().size() == 1) one_comm() = c;
  if (eager_comm() != c || windows_register(c) == ncclSuccess) return ncclSuccess;
  comm_find(c)->setupFailed = true;  // every later use fails too: the ranks disagree on the windows now
  return CUCO_TX_FAIL("registering the windows allocated before the communicator failed");
}

// The setup of a communicator made inside a condition (`if
// (ncclCommInitRank(&comm, ...) != ncclSuccess) { fail }`): right after a
// successful creation; the creation's own result is what the program sees
// (a failed setup is reported by the first device call on the communicator).
inline ncclResult_t comm_made(ncclResult_t made, ncclComm_t* comm) {
  if (made == ncclSuccess && comm) (void)comm_setup(*comm);
  return made;
}

// Registers every symmetric buffer not registered yet, in allocation order.
inline ncclResult_t windows_register(ncclComm_t c) {
  if (comm_setup(c) != ncclSuccess) return ncclInvalidUsage;
  Comm* x = comm_find(c);
  for (Buf* b : bufs()) {
    if (b->registered) continue;
    cuco::Symm& s = b->symm;
    if (x->freeWins.empty() && x->nwins >= kMaxWins)
      return CUCO_TX_FAIL("more than 256 symmetric buffers on one communicator");
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
    // every rank registers and releases alike, so the index is the same on every rank
    if (!x->freeWins.empty()) {
      b->winIdx = x->freeWins.back();
      x->freeWins.pop_back();
    } else {
      b->winIdx = x->nwins++;
    }
    b->registered = true;
    CUCO_TX_TRACE("rank %d: window %d registered (%zu bytes)\n", x->rank, b->winIdx, b->bytes);
  }
  return ncclSuccess;
}

// Whether [a, a + n) and [b, b + n) do not overlap.
inline bool apart(const void* a, const void* b, size_t n) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return x + n <= y || y + n <= x;
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
  if (!b)
    return CUCO_TX_FAIL("buffer is not symmetric memory (not allocated by cuco_tx::symm_malloc, or past its 240 "
                        "live windows)");
  if (b->symm.comm != c) return CUCO_TX_FAIL("buffer is registered with another communicator");
  *out = b;
  return ncclSuccess;
}

// Prints "cuco_tx: what" on stderr the first time `told` is false; true.
inline bool tell_once(bool& told, const char* what) {
  if (!told) fprintf(stderr, "cuco_tx: %s\n", what);
  told = true;
  return true;
}

// The communicator whose calls take the device path: the first one set up
// that is still live (comm_setup runs right after each creation the
// transform saw, in creation order, which every rank shares; otherwise at a
// first use), or null while none is.
inline ncclComm_t window_comm() {
  for (const Comm& x : comms())
    if (x.live) return x.comm;
  return nullptr;
}

// Whether a rewritten call on comm goes through NCCL's own: another
// communicator takes the device path (window_comm). The transform takes the
// calls of one communicator to the device; where it could not tell two
// apart (elements of an array of communicators made by ncclCommSplit, one
// that an accessor returns), the other one's calls come here, and its
// buffers may be windows of the first. Decided by the communicator and the
// order of the setups alone, so both ends of a send decide alike. Said once.
inline bool on_host_comm(ncclComm_t comm) {
  ncclComm_t owner = window_comm();
  if (!comm || !owner || owner == comm) return false;
  static bool told = false;
  return tell_once(told, "the symmetric windows belong to another communicator: calls on a second "
                         "communicator go through NCCL's own");
}

// Whether a collective goes through NCCL's own because the buffer it needs
// in a window (p) lies in none: memory from an allocator the transform did
// not rewrite (cudaMallocManaged on another path of the program, a pool, a
// library's). Every rank of an SPMD program holds the same kind of buffer
// there, so the ranks decide alike; sends and receives, whose two ends hold
// different buffers, do not ask. Said once.
inline bool outside_windows(const void* p) {
  if (!p || buf_find(p, 1)) return false;
  static bool told = false;
  return tell_once(told, "a collective's buffer is not symmetric memory (another allocator): it goes "
                         "through NCCL's own");
}

// Whether a collective on comm whose buffer in a window would be p goes
// through NCCL's own (on_host_comm, outside_windows).
inline bool to_nccl(ncclComm_t comm, const void* p) { return on_host_comm(comm) || outside_windows(p); }

// Whether `stream` is being captured into a CUDA graph. A graph replays its
// nodes with the arguments they had when captured, while the device paths
// number their point-to-point calls and copy-engine rendezvous on the host
// and set communicators and windows up at a first use: a call on a
// capturing stream goes through NCCL's own, which captures, unless its
// device path keeps every state on the device (replayable_on_device).
// Every rank of an SPMD program captures the same calls, so both ends of a
// transfer decide alike.
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess || st == cudaStreamCaptureStatusNone) return false;
  static bool told = false;
  if (!told) CUCO_TX_TRACE("a call on a capturing stream: NCCL's own, or an SM collective on registered windows\n");
  told = true;
  return true;
}

// Whether a collective may keep its SM kernel under capture (all-gather,
// reduce-scatter, all-reduce; their copy-engine forms number their
// rendezvous on the host and stay off): the communicator set up, no window
// waiting for registration (a collective host call), and the buffer the
// kernel reads or writes through the window (p, bytes) inside a registered
// one. The kernels' LSA barriers keep their epochs in device memory, so
// every replay synchronises afresh. perRank: bytes is one rank's block of a
// buffer that holds one for every rank of comm.
inline bool replayable_on_device(const void* p, size_t bytes, ncclComm_t comm, bool perRank = false) {
  const Comm* x = comm_find(comm);
  if (!x || x->setupFailed) return false;
  for (const Buf* b : bufs())
    if (!b->registered) return false;
  const Buf* b = buf_find(p, perRank ? bytes * (size_t)x->nranks : bytes);
  return b && b->symm.comm == comm;
}

// v >= from, v <= upto, with the threshold a parameter: a knob's 0 written
// into the comparison itself would be a "pointless comparison" warning.
inline bool at_least(size_t v, size_t from) { return v >= from; }
inline bool at_most(size_t v, size_t upto) { return v <= upto; }

inline ncclResult_t all_gather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("all_gather: unsupported data type");
  size_t bytes = sendcount * es;
  bool captured = capturing(stream);
  if (captured && !replayable_on_device(recvbuff, bytes, comm, true))
    return ::ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  if (to_nccl(comm, recvbuff))
    return kept_in_group(::ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
  group_member(stream);
  Comm* x = nullptr;
  if (comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  const char* src = static_cast<const char*>(sendbuff);
  if (src == static_cast<char*>(recvbuff) + (size_t)x->rank * bytes) src = nullptr;  // in place
  if (x->nranks > 1 && CUCO_AG_NCCL_UPTO > 0 && at_most(bytes * x->nranks, (size_t)CUCO_AG_NCCL_UPTO))
    return ::ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  if (CUCO_COPY_ENGINE && !captured)
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

// Whether the device reductions implement op on t: a sum of float, half,
// bfloat16 or int32, or the average of a floating type. The rules keep
// every other literal host NCCL; one they could not read (a data type or
// operation passed in a variable) is checked here, and what the device does
// not implement goes through NCCL's own call (reduced_by_nccl), said once.
inline bool device_reduces(ncclRedOp_t op, ncclDataType_t t) {
  bool typed = t == ncclFloat32 || (t == ncclFloat16 && CUCO_TX_HAS_HALF) || (t == ncclBfloat16 && CUCO_TX_HAS_BF16) ||
               (t == ncclInt32 && CUCO_TX_HAS_INT32);
  return typed && (op == ncclSum || (op == ncclAvg && avg_type(t)));
}

inline void reduced_by_nccl(const char* call, ncclRedOp_t op, ncclDataType_t t) {
  static bool told = false;
  if (!told)
    fprintf(stderr, "cuco_tx: %s of data type %d with operation %d: not reduced on the device, NCCL's own call\n",
            call, (int)t, (int)op);
  told = true;
}

inline ncclResult_t scale_by_ranks(void* out, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t st) {
  int nranks = 0;
  if (ncclCommCount(comm, &nranks) != ncclSuccess || nranks < 1) return CUCO_TX_FAIL("avg: bad communicator");
  if (nranks == 1 || n == 0) return ncclSuccess;
  float f = 1.0f / (float)nranks;
  unsigned blocks = (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
  switch (t) {
    case ncclFloat32: scale_kernel<float><<<blocks, 256, 0, st>>>(static_cast<float*>(out), n, f); break;
#if CUCO_TX_HAS_HALF
    case ncclFloat16: scale_kernel<__half><<<blocks, 256, 0, st>>>(static_cast<__half*>(out), n, f); break;
#endif
#if CUCO_TX_HAS_BF16
    case ncclBfloat16: scale_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(static_cast<__nv_bfloat16*>(out), n, f); break;
#endif
    default: return CUCO_TX_FAIL("avg: only floating-point averages are implemented on the device");
  }
  return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("avg: scale launch failed");
}

// f(T{}) for the element type of t (float, half, bfloat16, int32), else
// the failure `what`.
template <class F>
inline ncclResult_t with_dtype(ncclDataType_t t, const char* what, F f) {
  switch (t) {
    case ncclFloat32: return f(float{});
#if CUCO_TX_HAS_HALF
    case ncclFloat16: return f(__half{});
#endif
#if CUCO_TX_HAS_BF16
    case ncclBfloat16: return f(__nv_bfloat16{});
#endif
#if CUCO_TX_HAS_INT32
    case ncclInt32: return f(int32_t{});
#endif
    default: return CUCO_TX_FAIL(what);
  }
}

template <typename T>
inline ncclResult_t reduce_scatter_t(Buf* b, size_t inOff, void* out, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::reduce_scatter<T>(b->symm, inOff, static_cast<T*>(out), n, st, comm_launch()));
  return ncclSuccess;
}

inline ncclResult_t reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream) {
  if (capturing(stream) && !replayable_on_device(sendbuff, recvcount * dtype_size(datatype), comm, true))
    return ::ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  if (to_nccl(comm, sendbuff))
    return kept_in_group(::ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  group_member(stream);
  if (!device_reduces(op, datatype)) {
    reduced_by_nccl("reduce_scatter", op, datatype);
    return ::ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  }
  size_t es = dtype_size(datatype);
  Comm* x = nullptr;
  if (!es || comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  Buf* b = nullptr;
  if (window_of(sendbuff, recvcount * es * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(b->base));
  ncclResult_t r = with_dtype(datatype, "reduce_scatter: data type not implemented on the device", [&](auto zero) {
    return reduce_scatter_t<decltype(zero)>(b, inOff, recvbuff, recvcount, stream);
  });
  return r == ncclSuccess && op == ncclAvg ? scale_by_ranks(recvbuff, recvcount, datatype, comm, stream) : r;
}

template <typename T>
inline ncclResult_t all_reduce_t(Buf* b, size_t inOff, size_t outOff, size_t n, cudaStream_t st) {
  CUCO_TX_TRY(cuco::all_reduce<T>(b->symm, inOff, outOff, n, st, comm_launch()));
  return ncclSuccess;
}

// At least `bytes` of scratch for x's copy-engine all-reduces. A larger one
// replaces it; the smaller ones stay allocated until comm_release (freeing
// them here would wait for the device, whose streams may wait on peers).
inline void* ce_scratch(Comm* x, size_t bytes) {
  if (bytes <= x->ceScratchBytes && !x->ceScratch.empty()) return x->ceScratch.back();
  void* p = nullptr;
  if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) return nullptr;
  x->ceScratch.push_back(p);
  x->ceScratchBytes = bytes;
  return p;
}

template <typename T>
inline ncclResult_t all_reduce_ce_t(Comm* x, Buf* b, size_t off, size_t n, cudaStream_t st) {
  void* scratch = ce_scratch(x, cuco::all_reduce_ce_scratch<T>(n, x->nranks));
  if (!scratch) return CUCO_TX_FAIL("all_reduce: cannot allocate the copy engine's scratch");
  CUCO_TX_TRY(cuco::all_reduce_ce<T>(b->symm, off, n, scratch, st));
  return ncclSuccess;
}

// copyEngine: the copy engines wherever they can carry it (in place in a
// window, 2 ranks or more), whatever CUCO_AR_CE_FROM says (the producer
// split's ranges, CUCO_PSPLIT_CE).
inline ncclResult_t all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream, bool copyEngine = false) {
  if (on_host_comm(comm))
    return kept_in_group(::ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (!device_reduces(op, datatype)) {
    group_member(stream);
    reduced_by_nccl("all_reduce", op, datatype);
    return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  }
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL("all_reduce: unsupported data type");
  size_t bytes = count * es;
  bool captured = capturing(stream);
  if (captured && !replayable_on_device(recvbuff, bytes, comm))
    return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  group_member(stream);
  Comm* x = nullptr;
  if (comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  if (x->nranks == 1) {  // the sum of one: a copy, or nothing in place (as NCCL)
    if (sendbuff != recvbuff && bytes &&
        cudaMemcpyAsync(recvbuff, sendbuff, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      return CUCO_TX_FAIL("all_reduce: copy failed");
    return ncclSuccess;
  }
  if (outside_windows(recvbuff)) return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  if (!copyEngine && CUCO_AR_NCCL_UPTO > 0 && at_most(bytes, (size_t)CUCO_AR_NCCL_UPTO))
    return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
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
  // (a run knob: its value may be read at run time, so no `if constexpr`)
  bool ce = !captured && (copyEngine || (CUCO_AR_CE_FROM > 0 && at_least(bytes, (size_t)CUCO_AR_CE_FROM))) && inOff == outOff &&
            cuco::ce_sync_zero_sm();
  ncclResult_t r = with_dtype(datatype, "all_reduce: data type not implemented on the device", [&](auto zero) {
    using T = decltype(zero);
    return ce ? all_reduce_ce_t<T>(x, b, outOff, count, stream) : all_reduce_t<T>(b, inOff, outOff, count, stream);
  });
  return r == ncclSuccess && op == ncclAvg ? scale_by_ranks(recvbuff, count, datatype, comm, stream) : r;
}

}  // namespace cuco_tx
