// cuco_tx glue, part 4 of 8: what is done with what arrived. Schedule
// consume_as_received, a receive consumed piece by piece by the kernel that
// reads it (after the schedules' pieces and kernel splits of part 3, whose
// helpers it uses); schedule warm_read, a gathered buffer read once before
// the kernel that re-reads it; schedule prefetch_next, a layer loop's
// next all-gather made beside this iteration's work.
namespace cuco_tx {

// Schedule consume_as_received (knob CUCO_SPLIT_<site>): a receive whose
// first consumer is the launch of a kernel the manifest declares
// rows_independent, with the received buffer as one of its row arguments.
// The receive (its first argument recv_site(site, CUCO_SPLIT_<site>)) moves
// in CUCO_P2P_PIECES pieces on the stream early_start gave it: every piece
// is posted first, then each is waited for in order and an event is
// recorded after it. The kernel (kernel_recv_split, same arguments as its
// launch) then runs once per piece on its own stream, each launch after the
// event of the piece that completes its rows, with the row count set to the
// rows that landed and each row argument moved to their first row: the
// first rows are consumed while the last are still on the way. Anything
// else (knob 0, a group, a receive from self, one piece, a receive on the
// kernel's own stream, a received argument without a declared width, a
// launch whose row arguments do not cover the buffer row by row) waits for
// the whole receive and launches the kernel whole, saying why once on
// stderr.

struct RecvSite {
  int site, on;
};
inline RecvSite recv_site(int site, int on) { return RecvSite{site, on}; }

struct RecvRec {
  const char* buf = nullptr;  // the received buffer
  size_t bytes = 0;
  cudaStream_t stream = nullptr;  // the one the pieces were received on
  int pieces = 0;
  size_t pieceEnd[kMaxP2pPieces] = {};       // one past the last byte of piece i
  cudaEvent_t landed[kMaxP2pPieces] = {};    // piece i is in the buffer
  bool fresh = false;                        // received and not consumed yet
  bool warned = false;                       // the fallback was reported
};
inline std::vector<RecvRec>& recv_recs() {
  static std::vector<RecvRec> v;
  return v;
}
inline RecvRec* recv_rec(int site) { return site_rec(recv_recs(), site); }

// The pieces of a receive on `stream`: those the device carries posted
// first, then each piece in order (NCCL's receive, or the device's wait),
// then its event. Which way each piece goes is decided once, before the
// first post (every piece of a message goes the same way, see via_nccl).
inline ncclResult_t recv_pieces(RecvRec* r, const std::vector<P2pOp>& ops, cudaStream_t stream) {
  std::vector<char> nccl(ops.size());
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < ops.size(); i++) nccl[i] = via_nccl(ops[i]);
  for (size_t i = 0; i < ops.size() && res == ncclSuccess; i++)
    if (!nccl[i]) res = p2p_post(ops[i]);
  for (size_t i = 0; i < ops.size() && res == ncclSuccess; i++) {
    const P2pOp& op = ops[i];
    res = nccl[i] ? ::ncclRecv(const_cast<void*>(op.buf), op.bytes, ncclInt8, op.peer, op.comm, stream) : p2p_wait(op);
    if (res == ncclSuccess && cudaEventRecord(r->landed[i], stream) != cudaSuccess)
      res = CUCO_TX_FAIL("consume_as_received: recording a piece's event failed");
  }
  return res;
}

inline ncclResult_t recv(RecvSite rs, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                         ncclComm_t comm, cudaStream_t stream) {
  RecvRec* r = rs.on ? recv_rec(rs.site) : nullptr;
  if (r) r->fresh = false;
  size_t es = dtype_size(datatype), bytes = count * es;
  int k = es ? p2p_pieces(bytes) : 1;
  if (!r || k < 2 || group_depth() > 0 || on_host_comm(comm) || comm_setup(comm) != ncclSuccess ||
      peer == comm_rank(comm))
    return recv(recvbuff, count, datatype, peer, comm, stream);
  std::vector<P2pOp> ops;
  ncclResult_t made = p2p_ops(false, recvbuff, count, datatype, peer, comm, stream, &ops);
  if (made != ncclSuccess) return made;
  for (int i = 0; i < k; i++) {
    if (!r->landed[i] && cudaEventCreateWithFlags(&r->landed[i], cudaEventDisableTiming) != cudaSuccess)
      return CUCO_TX_FAIL("consume_as_received: cannot create its events");
    r->pieceEnd[i] = piece_off(bytes, k, i + 1);
  }
  CUCO_TX_TRACE("rank %d: receive from peer %d in %d pieces, each consumed as it lands\n", comm_rank(comm), peer, k);
  r->buf = static_cast<const char*>(recvbuff);
  r->bytes = bytes;
  r->stream = stream;
  r->pieces = k;
  ncclResult_t res = recv_pieces(r, ops, stream);
  r->fresh = res == ncclSuccess;
  return res;
}

// Why the launch cannot consume the receive r piece by piece (nullptr: it
// can); fills q (the received argument's bits) and the row arguments'
// elements per row.
inline const char* recv_split_plan(const RecvRec& r, const ksplit::Params& pa, const RowSpec& w, unsigned gridX,
                                   ksplit::Part* q) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(r.buf), hi = lo + r.bytes;
  unsigned long got = 0;
  int g = -1;
  if (const char* why = row_args_at(pa, w, lo, hi, true, &got, &g)) return why;
  // a receive may fill only part of what the kernel reads: its rows are
  // known only from the received argument's declared width
  if (g >= 64 || w.widthFrom[g] == 0)
    return "the received argument's width is not declared (args= NAME:WIDTH)";
  long long rows = w.rowsPos < pa.n ? pa.ints[w.rowsPos] : -1;
  if (rows <= 0 || r.bytes % (size_t)rows || (r.bytes / (size_t)rows) % pa.es[g])
    return "the received buffer is not a whole number of its rows";
  long long ref = (long long)(r.bytes / (size_t)rows / pa.es[g]);
  if (const char* why = row_elems(pa, w, ref)) return why;
  if (pa.elems[g] != ref) return "the received argument's declared width is not the received rows' width";
  *q = part_of(pa, w, gridX, rows);
  q->gathered = got;
  return nullptr;
}

template <class... P, class... A>
inline cudaError_t kernel_recv_split(int site, int on, const RowSpec& w, void (*kernel)(P...), dim3 grid, dim3 block,
                                     size_t smem, cudaStream_t stream, A&&... a) {
  ksplit::Launch<P...> L(kernel, grid, block, smem, stream, std::forward<A>(a)...);
  RecvRec* r = on ? recv_rec(site) : nullptr;
  ksplit::Part q{};
  const char* why = !r || !r->fresh        ? "no fresh receive"
                    : r->stream == stream ? "received on the kernel's own stream (CUCO_EARLY off): nothing to overlap"
                                          : recv_split_plan(*r, L.params(), w, grid.x, &q);
  if (why) return launch_whole(r, site, "receive", why, L, stream);
  r->fresh = false;
  long long rows = L.ints[w.rowsPos], done = 0;
  size_t rowBytes = r->bytes / (size_t)rows;
  int parts = 0;
  for (int i = 0; i < r->pieces && done < rows; i++) {
    long long upto = i + 1 == r->pieces ? rows : (long long)(r->pieceEnd[i] / rowBytes);
    if (upto <= done) continue;
    if (cudaStreamWaitEvent(stream, r->landed[i], 0) != cudaSuccess) return cudaErrorUnknown;
    q.at = reinterpret_cast<uintptr_t>(r->buf + (size_t)done * rowBytes);
    q.rowOff = done;
    q.rows = upto - done;
    cudaError_t rc = L.run(&q);
    if (rc != cudaSuccess) return rc;
    done = upto;
    parts++;
  }
  CUCO_TX_TRACE("split(%d): kernel over the received rows in %d parts, each as its piece lands\n", site, parts);
  return cudaSuccess;
}

// Schedule warm_read (knob CUCO_WARM_<site>): an all-gather or all-to-all
// whose first consumer is a kernel launch the consumer split does not take
// (its first argument warm_site(site, CUCO_WARM_<site>)) is followed, on its
// own stream, by one read pass over what it wrote: 1056 blocks of 256
// threads, each line read once. A kernel whose blocks all re-read a buffer
// that a copy (by SMs, by the copy engine, or by a peer) has just written
// runs 6% slower at 8 MiB than after such a pass, and 29% at 32 MiB; cuBLAS
// GEMMs do not (bench/overlap/write_then_read.cu, bench/README.md "A
// buffer read once before the kernel that re-reads it"). The pass costs
// about 5 us for 8 MiB and runs beside the work early_start puts between
// the collective and its wait. Outputs larger than the L2 cache are not
// read. In a group the device collective runs where it is issued, and the
// pass after it (a call handed to NCCL there runs at the group's end: its
// pass reads the output before it lands, and only costs its time).
struct WarmSite {
  int site, on;
};
inline WarmSite warm_site(int site, int on) { return WarmSite{site, on}; }

__device__ int warm_sink;  // one a device: written only when a pass's XOR hits the marker

static __global__ void warm_pass(const int4* p, size_t nvec, const unsigned char* tail, size_t tailBytes) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nvec; i += (size_t)gridDim.x * blockDim.x) {
    int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (blockIdx.x == 0)
    for (size_t i = threadIdx.x; i < tailBytes; i += blockDim.x) acc ^= tail[i];
  if (acc == 0x5eed1e55) warm_sink = acc;  // keeps the loads; the value is never used
}

// The current device's L2 size (0 when it cannot be read: no pass).
inline size_t l2_bytes() {
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
    return 0;
  return (size_t)bytes;
}

// The pass is only a help: when it cannot be launched the collective's
// result stands (its launch error cleared); with an error pending from the
// program's own launches it is not tried, and that error stays.
inline ncclResult_t warm_read(const void* buf, size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || bytes > l2_bytes() || cudaPeekAtLastError() != cudaSuccess) return ncclSuccess;
  const char* p = static_cast<const char*>(buf);
  size_t lead = (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
  if (lead > bytes) lead = bytes;
  size_t nvec = (bytes - lead) / 16, rest = bytes - lead - nvec * 16;
  // the unaligned head is left out: a line or less, read by the consumer
  warm_pass<<<1056, 256, 0, stream>>>(reinterpret_cast<const int4*>(p + lead), nvec,
                                      reinterpret_cast<const unsigned char*>(p + lead + nvec * 16), rest);
  if (cudaGetLastError() != cudaSuccess)  // ours: none was pending before the launch
    CUCO_TX_TRACE("warm_read: the read pass could not be launched\n");
  return ncclSuccess;
}

// The pass after collective result r, over its output of perRank bytes a rank.
inline ncclResult_t warm_after(ncclResult_t r, WarmSite ws, const void* out, size_t perRank, ncclComm_t comm,
                               cudaStream_t stream) {
  int n = 1;
  if (r != ncclSuccess || !ws.on || ncclCommCount(comm, &n) != ncclSuccess) return r;
  return warm_read(out, perRank * (size_t)n, stream);
}

inline ncclResult_t all_gather(WarmSite ws, const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return warm_after(all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream), ws, recvbuff,
                    sendcount * dtype_size(datatype), comm, stream);
}

inline ncclResult_t all_to_all(WarmSite ws, const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return warm_after(all_to_all(sendbuff, recvbuff, count, datatype, comm, stream), ws, recvbuff,
                    count * dtype_size(datatype), comm, stream);
}

// Schedule prefetch_next (knob CUCO_PREF_<site>): an all-gather at the top
// of a loop's body (its first argument prefetch_site(site, CUCO_PREF_<site>,
// next, nextCount): the send buffer and count of the loop's next iteration,
// or null past its end). After this iteration's gather, the next one's runs
// by the copy engine on a side stream into a window of the site's own,
// beside the rest of the iteration (the transform checked that the body does
// not touch the send
// buffers); the next call, when its arguments are the ones that gather was
// made for (send buffer, count, type, communicator), waits for it and copies
// the window into its receive buffer instead of gathering. Anything else
// (knob 0, one rank, a capture, a group, other arguments, CUCO_CE_SYNC=0, a
// next send buffer that does not hold the next count) gathers as without
// the schedule; a prefetch no call takes is dropped (prefetch_drop, at the
// loop's entry, drops one an earlier run of the loop left).
// Read in place (reads 1: the transform wrote each later use of the receive
// buffer in the body prefetched(site, buffer)): where the gather fills the
// whole allocation of the receive buffer, a taken prefetch is not copied;
// the body reads the window through prefetched(), and the next prefetch
// lands in the site's other window. The loop's last call, which prefetches
// nothing, still copies, so the buffer holds the last gather after the loop.
struct PrefSite {
  int site, on;
  const void* next;
  size_t nextCount;
  int reads;
};
inline PrefSite prefetch_site(int site, int on, const void* next, size_t nextCount, int reads = 0) {
  return PrefSite{site, on, next, nextCount, reads};
}

struct PrefRec {
  Buf* wins[2] = {nullptr, nullptr};  // where the next iteration's gathers land (owned)
  int pend = 0;                       // the window of the prefetch in flight
  int cur = -1;                       // the window the body reads in place, or -1
  void* curRecv = nullptr;            // the receive buffer it stands for
  size_t curBytes = 0;                // its gather's bytes
  cudaStream_t curStream = nullptr;   // the call's stream
  ncclComm_t comm = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t taken = nullptr, done = nullptr;  // the window copied out; the prefetch landed
  const void* send = nullptr;                   // what the prefetch was made for
  size_t count = 0;
  ncclDataType_t dt = ncclFloat32;
  bool ready = false;
  bool dropped = false;  // a prefetch no call took may still be in flight
  bool told = false;
};
inline std::vector<PrefRec>& pref_recs() {
  static std::vector<PrefRec> v;
  return v;
}

// At comm_teardown: the windows, streams and events of the sites on comm
// (sites by index: the same order on every rank).
inline ncclResult_t release_prefetch(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  for (PrefRec& p : pref_recs()) {
    if (!p.comm || p.comm != comm) continue;
    for (Buf*& win : p.wins) {
      Buf* w = win;
      win = nullptr;
      if (w && symm_free(w->base) != cudaSuccess) r = CUCO_TX_FAIL("prefetch_next: freeing its window failed");
    }
    if ((p.side && cudaStreamDestroy(p.side) != cudaSuccess) || (p.taken && cudaEventDestroy(p.taken) != cudaSuccess) ||
        (p.done && cudaEventDestroy(p.done) != cudaSuccess))
      r = CUCO_TX_FAIL("prefetch_next: releasing its stream failed");
    p = PrefRec{};
  }
  return r;
}

// The site's window k of at least `bytes` on comm (collective: every rank
// reaches the call with the same sizes), its stream and events.
inline ncclResult_t prefetch_setup(PrefRec* r, int k, size_t bytes, ncclComm_t comm) {
  if (r->comm && r->comm != comm) return CUCO_TX_FAIL("prefetch_next: its window belongs to another communicator");
  if ((!r->side && side_stream_create(&r->side) != cudaSuccess) ||
      (!r->taken && cudaEventCreateWithFlags(&r->taken, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->done && cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) != cudaSuccess))
    return CUCO_TX_FAIL("prefetch_next: cannot create its stream");
  if (r->wins[k] && r->wins[k]->bytes >= bytes) return ncclSuccess;
  Buf* old = r->wins[k];
  r->wins[k] = nullptr;
  if (old && symm_free(old->base) != cudaSuccess) return CUCO_TX_FAIL("prefetch_next: cannot free its smaller window");
  on_teardown(release_prefetch);
  void* p = nullptr;
  Buf* b = nullptr;
  if (symm_malloc_window(&p, bytes) != cudaSuccess || window_of(p, bytes, comm, &b) != ncclSuccess)
    return CUCO_TX_FAIL("prefetch_next: cannot register its window");
  r->wins[k] = b;
  r->comm = comm;
  return ncclSuccess;
}

// Whether [p, p + bytes) lies in one allocation of device memory
// (alloc_range). A prefetch reads ahead what the next call will send: the
// guard keeps a next iteration whose buffer is smaller than this one's, or
// no device memory at all, from being read past its end. False where the
// driver cannot tell. Every rank gives the same answer where the ranks'
// buffers of one iteration have one size (a collective's count is the
// same on every rank).
inline bool within_allocation(const void* p, size_t bytes) {
  uintptr_t base = 0;
  size_t size = 0;
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  return alloc_range(p, &base, &size) && at >= base && at - base <= size && bytes <= size - (at - base);
}

// The next iteration's gather into the site's window, on its side stream
// after what `stream` has issued (this call's copy out of the window too),
// by the copy engine: it takes no SM from the work beside it. Every rank
// issues it alike, so a failure is the call's (a rank that went on alone
// would leave its peers waiting in the gather's rendezvous).
inline ncclResult_t prefetch_issue(PrefRec* r, const PrefSite& ps, ncclDataType_t dt, ncclComm_t comm, int nranks,
                                   cudaStream_t stream) {
  size_t bytes = ps.nextCount * dtype_size(dt);
  // the window the body reads in place stays as it is until the next call
  r->pend = r->cur >= 0 ? 1 - r->cur : r->pend;
  CUCO_TX_TRY(prefetch_setup(r, r->pend, bytes * (size_t)nranks, comm));
  if (cudaEventRecord(r->taken, stream) != cudaSuccess || cudaStreamWaitEvent(r->side, r->taken, 0) != cudaSuccess ||
      cuco::all_gather_ce(r->wins[r->pend]->symm, ps.next, 0, bytes, r->side) != 0 ||
      cudaEventRecord(r->done, r->side) != cudaSuccess)
    return CUCO_TX_FAIL("prefetch_next: the next iteration's gather failed");
  if (!r->told)
    CUCO_TX_TRACE("prefetch_next(%d): the next iteration's all-gather runs beside this one's work\n", ps.site);
  r->told = true;
  r->send = ps.next;
  r->count = ps.nextCount;
  r->dt = dt;
  r->ready = true;
  return ncclSuccess;
}

// prefetch_next through a function's calls: the loop around a call of the
// function that gathers passes its counter through prefetch_hint (the
// counter's next value, when the loop's condition holds for it); the
// function's gather reads it through prefetch_hinted(site, counter) and
// prefetch_hint_next(site). A hint counts for the call whose counter it
// was made with, once: the site's gather clears it, and a call of the
// function from elsewhere (no hint, or another counter) prefetches nothing.
struct PrefHint {
  bool set = false, has = false;
  long long cur = 0, next = 0;
};
inline std::vector<PrefHint>& pref_hints() {
  static std::vector<PrefHint> v;
  return v;
}
template <typename T, typename U>
inline T prefetch_hint(int site, int on, bool has, U next, T counter) {
  if constexpr (std::is_integral<T>::value && std::is_integral<U>::value) {
    if (PrefHint* h = on ? site_rec(pref_hints(), site) : nullptr)
      *h = PrefHint{true, has, static_cast<long long>(counter), static_cast<long long>(next)};
  }
  return counter;
}
// The site's hint when a call made one, else null.
inline PrefHint* pref_hint_of(int site) {
  std::vector<PrefHint>& v = pref_hints();
  return site >= 0 && (size_t)site < v.size() ? &v[(size_t)site] : nullptr;
}
template <typename T>
inline bool prefetch_hinted(int site, T counter) {
  const PrefHint* h = pref_hint_of(site);
  if constexpr (std::is_integral<T>::value) {
    return h && h->set && h->has && h->cur == static_cast<long long>(counter);
  }
  return false;
}
inline long long prefetch_hint_next(int site) { return pref_hints()[(size_t)site].next; }

// The site's record when a call of it made one, else null (made by none).
inline PrefRec* pref_rec_of(int site) {
  std::vector<PrefRec>& v = pref_recs();
  return site >= 0 && (size_t)site < v.size() ? &v[(size_t)site] : nullptr;
}

// At the entry of the site's loop (before its `for`): a prefetch that an
// earlier run of the loop made and no call took (the loop left early) is
// dropped, so that no later call takes data gathered before the loop began.
inline void prefetch_drop(int site, int on) {
  PrefRec* r = on ? site_rec(pref_recs(), site) : nullptr;
  if (r) r->cur = -1;
  if (!r || !r->ready) return;
  r->ready = false;
  r->dropped = true;
}

// After the site's loop: a window read in place is copied into its receive
// buffer, so that the buffer holds the last gather (and what the body
// wrote into it) whichever iteration was the last.
inline void prefetch_settle(int site, int on) {
  PrefRec* r = on ? pref_rec_of(site) : nullptr;
  if (!r || r->cur < 0 || !r->wins[r->cur]) return;
  if (cudaMemcpyAsync(r->curRecv, r->wins[r->cur]->base, r->curBytes, cudaMemcpyDeviceToDevice, r->curStream) !=
      cudaSuccess)
    CUCO_TX_FAIL("prefetch_next: copying the window read in place after the loop failed");
  r->cur = -1;
}

// What the body reads for the receive buffer p of the site's call: the
// window that call's prefetch landed in, when it was taken in place; p
// otherwise.
template <typename T>
inline T* prefetched(int site, T* p) {
  const PrefRec* r = pref_rec_of(site);
  if (!r || r->cur < 0 || r->curRecv != static_cast<const void*>(p) || !r->wins[r->cur]) return p;
  return static_cast<T*>(r->wins[r->cur]->base);
}

// Whether the call's gather of `bytes` into recv may be read in place: the
// body was written for it, a later iteration follows, and the gather fills
// recv's whole allocation (any use of the buffer lies in what the window
// holds).
inline bool prefetch_in_place(const PrefSite& ps, const void* recv, size_t bytes) {
  const Buf* b = ps.reads && ps.next && ps.nextCount ? buf_find(recv, bytes) : nullptr;
  return b && b->base == recv && b->bytes == bytes;
}

inline ncclResult_t all_gather(PrefSite ps, const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (PrefHint* h = pref_hint_of(ps.site)) h->set = false;
  PrefRec* r = ps.on ? site_rec(pref_recs(), ps.site) : nullptr;
  int nranks = 1;
  size_t es = dtype_size(datatype);
  bool ready = r && r->ready;
  bool hit = ready && r->send == sendbuff && r->count == sendcount && r->dt == datatype && r->comm == comm;
  bool unused = r && ((ready && !hit) || r->dropped);
  if (r) {
    r->ready = r->dropped = false;
    r->cur = -1;
  }
  // a prefetch this call does not take is finished first: no two gathers of
  // the site in flight at once
  if (unused && cudaStreamWaitEvent(stream, r->done, 0) != cudaSuccess)
    return CUCO_TX_FAIL("prefetch_next: waiting for an unused prefetch failed");
  if (!r || !es || group_depth() > 0 || capturing(stream) || on_host_comm(comm) ||
      ncclCommCount(comm, &nranks) != ncclSuccess || nranks < 2)
    return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  size_t bytes = sendcount * es * (size_t)nranks;
  if (!hit) {
    CUCO_TX_TRY(all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream));
  } else if (cudaStreamWaitEvent(stream, r->done, 0) != cudaSuccess) {
    return CUCO_TX_FAIL("prefetch_next: waiting for the prefetched gather failed");
  } else if (prefetch_in_place(ps, recvbuff, bytes)) {
    r->cur = r->pend;
    r->curRecv = recvbuff;
    r->curBytes = bytes;
    r->curStream = stream;
  } else if (cudaMemcpyAsync(recvbuff, r->wins[r->pend]->base, bytes, cudaMemcpyDeviceToDevice, stream) !=
             cudaSuccess) {
    return CUCO_TX_FAIL("prefetch_next: copying the prefetched gather failed");
  }
  // the prefetch runs beside the body's collectives too: only with the
  // rendezvous that takes no barrier of the communicator (CUCO_CE_SYNC)
  bool ahead = ps.next && ps.nextCount && cuco::ce_sync_zero_sm() &&
               within_allocation(ps.next, ps.nextCount * es);
  return ahead ? prefetch_issue(r, ps, datatype, comm, nranks, stream) : ncclSuccess;
}

}  // namespace cuco_tx
