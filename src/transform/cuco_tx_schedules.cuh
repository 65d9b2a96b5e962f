// cuco_tx glue, part 3 of 8: the schedules (send_as_produced's pieces,
// early_start_late_wait, consumer_split_by_source; consume_as_received is
// part 4, cuco_tx_recv.cuh; producer_split part 5, cuco_tx_produce.cuh).
namespace cuco_tx {

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
  return P2pOp{isSend, static_cast<const char*>(buf) + lo, hi - lo, peer, comm, stream, bytes};
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

// The pieces of a send or receive as operations on `stream`, appended to
// ops (none when count is 0), once its type and peer are checked; a
// receive drops the records of what GEMMs made that it overwrites.
inline ncclResult_t p2p_ops(bool isSend, const void* buf, size_t count, ncclDataType_t datatype, int peer,
                            ncclComm_t comm, cudaStream_t stream, std::vector<P2pOp>* ops) {
  size_t es = dtype_size(datatype);
  if (!es) return CUCO_TX_FAIL(isSend ? "send: unsupported data type" : "recv: unsupported data type");
  int n = 0;
  if (ncclCommCount(comm, &n) != ncclSuccess || peer < 0 || peer >= n) return CUCO_TX_FAIL("peer out of range");
  if (count == 0) return ncclSuccess;
  size_t bytes = count * es;
  if (!isSend) made_forget(buf, bytes);
  int k = p2p_pieces(bytes);
  for (int i = 0; i < k; i++) ops->push_back(piece_op(isSend, buf, bytes, k, i, peer, comm, stream));
  return ncclSuccess;
}

inline ncclResult_t p2p_enqueue(bool isSend, const void* buf, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = p2p_ops(isSend, buf, count, datatype, peer, comm, stream, &pending());
  if (r != ncclSuccess || count == 0) return r;
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

// A non-blocking stream at the device's greatest priority (or its least).
inline cudaError_t priority_stream_create(cudaStream_t* st, bool greatest) {
  int least = 0, most = 0;
  cudaError_t r = cudaDeviceGetStreamPriorityRange(&least, &most);
  return r == cudaSuccess ? cudaStreamCreateWithPriority(st, cudaStreamNonBlocking, greatest ? most : least) : r;
}

// A side stream, at the device's greatest priority: the SM work on it (the
// pieces of a send by SM kernels, the local copy of a pulled all-gather's own
// block) gets the next free SM ahead of the computation it overlaps, so that
// the transfers behind it start at once.
inline cudaError_t side_stream_create(cudaStream_t* st) { return priority_stream_create(st, true); }

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
  Comm* x = !on_host_comm(comm) && comm_setup(comm) == ncclSuccess ? comm_find(comm) : nullptr;
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
  if (capturing(stream) || to_nccl(comm, recvbuff)) {  // NCCL's own
    made_forget(recvbuff, (size_t)n * count * es);
    return kept_in_group(::ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream);
  }
  if (CUCO_COPY_ENGINE && group_depth() == 0 && count > 0) {
    size_t row = count * es;
    Buf* b = nullptr;
    if (apart(sendbuff, recvbuff, row * (size_t)n) && comm_setup(comm) == ncclSuccess &&
        window_of(recvbuff, row * (size_t)n, comm, &b) == ncclSuccess) {
      size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
      CUCO_TX_TRY(cuco::all_to_all_ce(b->symm, sendbuff, outOff, row, stream));
      return ncclSuccess;
    }
  }
  // Blocks whose sends and receives would all go through NCCL (via_nccl:
  // their size, local registration; every rank decides alike) go as NCCL's
  // own all-to-all, the call the program wrote: the rank's own block moves
  // inside it instead of by a local copy before the group.
  if (group_depth() == 0 && count > 0 && n > 1 && comm_setup(comm) == ncclSuccess) {
    P2pOp block{true, sendbuff, count * es, (comm_rank(comm) + 1) % n, comm, stream, count * es};
    if (via_nccl(block)) {
      made_forget(recvbuff, (size_t)n * count * es);  // as each receive does (p2p_ops)
      return ::ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
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
  if (to_nccl(comm, recvbuff))
    return kept_in_group(::ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
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
  // every rank receives into recvbuff: every rank decides alike
  if (outside_windows(recvbuff))
    return kept_in_group(::ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream);
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
  if (group_depth()++ == 0) group_order().any = false;
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
  for (void* p : x.ceScratch) cudaFree(p);
  x.ceScratch.clear();
  x.ceScratchBytes = 0;
  if (ncclDevCommDestroy(x.comm, &x.dc) != ncclSuccess) r = CUCO_TX_FAIL("ncclDevCommDestroy failed");
  x.live = false;
  return r;
}

// Deregisters (collective) and frees one window's memory.
inline cudaError_t window_release(Buf* b) {
  if (b->registered && ncclCommWindowDeregister(b->symm.comm, b->symm.win) != ncclSuccess)
    return cudaErrorUnknown;
  // its index is handed out again: every copy-engine send of the
  // communicator learns its destination anew, its read-backs in flight
  // (which may name the index) taken as stale
  if (Comm* x = b->registered ? comm_find(b->symm.comm) : nullptr) {
    x->freeWins.push_back(b->winIdx);
    for (SendDest* d : x->dests) {
      d->agreed = 0;
      d->gap = true;
      for (bool& g : d->gapBefore) g = true;
    }
  }
  if (ncclMemFree(b->base) != ncclSuccess) return cudaErrorUnknown;
  delete b;
  return cudaSuccess;
}

// Frees a symmetric buffer (collective when registered: every rank frees the
// same buffers in the same order); other pointers go to cudaFree. A
// registered window of a live communicator is kept as a spare instead
// (spare_bufs), once the device is done with it.
inline cudaError_t symm_free(void* p) {
  std::vector<Buf*>& v = bufs();
  for (size_t i = 0; i < v.size(); i++) {
    Buf* b = v[i];
    if (b->base != p) continue;
    cudaError_t r = cudaDeviceSynchronize();
    if (r != cudaSuccess) return r;
    v.erase(v.begin() + (long)i);
    if (b->registered && comm_find(b->symm.comm)) {
      CUCO_TX_TRACE("window %d kept for reuse (%zu bytes)\n", b->winIdx, b->bytes);
      std::vector<Buf*>& spares = spare_bufs();
      spares.push_back(b);
      if (spares.size() <= kSpareWindows) return cudaSuccess;
      b = spares.front();  // the oldest goes
      spares.erase(spares.begin());
    }
    CUCO_TX_TRACE("window %d freed (%zu bytes)\n", b->winIdx, b->bytes);
    ncclComm_t c = b->registered ? b->symm.comm : nullptr;
    if (window_release(b) != cudaSuccess) return cudaErrorUnknown;
    // the last window of a communicator gone: its device communicator goes too
    // (eager_comm sets it up again at the next allocation)
    bool used = false;
    for (Buf* o : v) used = used || (o->registered && o->symm.comm == c);
    for (Buf* o : spare_bufs()) used = used || o->symm.comm == c;
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

// Releases the device communicator and the windows of c (the program's
// memory stays until symm_free; the glue's own windows, the lend sites',
// are freed by their hooks). Call before ncclCommDestroy(c).
inline ncclResult_t comm_teardown(ncclComm_t c) {
  if (cudaDeviceSynchronize() != cudaSuccess) return CUCO_TX_FAIL("device error before teardown");
  // every step runs even after a failure (deregistration is collective: a
  // rank that stopped early would leave the others waiting); the first
  // failure is returned
  ncclResult_t r = ncclSuccess;
  for (TeardownHook h : teardown_hooks())
    if (h(c) != ncclSuccess && r == ncclSuccess) r = ncclInvalidUsage;
  for (Buf* b : bufs()) {
    if (!b->registered || b->symm.comm != c) continue;
    if (ncclCommWindowDeregister(c, b->symm.win) != ncclSuccess && r == ncclSuccess)
      r = CUCO_TX_FAIL("window deregister failed");
    b->registered = false;
  }
  std::vector<Buf*>& spares = spare_bufs();
  for (size_t i = spares.size(); i-- > 0;) {
    if (spares[i]->symm.comm != c) continue;
    Buf* b = spares[i];
    spares.erase(spares.begin() + (long)i);
    if (window_release(b) != cudaSuccess && r == ncclSuccess) r = CUCO_TX_FAIL("spare window release failed");
  }
  for (Comm& x : comms())
    if (x.comm == c && x.live && comm_release(x) != ncclSuccess && r == ncclSuccess) r = ncclInvalidUsage;
  if (one_comm() == c) one_comm() = nullptr;  // destroyed next: nothing registers with it
  return r;
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
// Every stream that started the site since its last wait is made to wait
// (a wrapper's call sites may pass different streams); a wait with nothing
// pending still makes its consumer wait for the last one's event.
struct EarlySite {
  cudaStream_t side = nullptr, stream = nullptr;  // stream: the last start's
  std::vector<cudaStream_t> streams;              // the streams that started it since the wait
  cudaEvent_t ready = nullptr, done = nullptr;
  bool pending = false, waited = false;
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;  // loop_guard: the buffers of a loop's calls since the wait
};
inline std::vector<EarlySite>& early_sites() { static std::vector<EarlySite> v; return v; }

inline cudaStream_t early_start(int site, int on, cudaStream_t stream) {
  if (!on) return stream;
  std::vector<EarlySite>& v = early_sites();
  if ((size_t)site >= v.size()) v.resize((size_t)site + 1);
  EarlySite& e = v[(size_t)site];
  if (!e.side && (side_stream_create(&e.side) != cudaSuccess ||
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
  if (std::find(e.streams.begin(), e.streams.end(), stream) == e.streams.end()) e.streams.push_back(stream);
  e.stream = stream;
  e.pending = true;
  return e.side;
}

// consumer: a stream that waits too (nullptr: none but the starting ones).
inline void early_wait_on(int site, int on, cudaStream_t consumer, bool has_consumer) {
  if (!on || (size_t)site >= early_sites().size()) return;
  EarlySite& e = early_sites()[(size_t)site];
  e.spans.clear();
  bool ok = true;
  if (e.pending) {
    e.pending = false;
    e.waited = true;
    ok = cudaEventRecord(e.done, e.side) == cudaSuccess;
    for (cudaStream_t s : e.streams) ok = ok && cudaStreamWaitEvent(s, e.done, 0) == cudaSuccess;
    if (has_consumer && std::find(e.streams.begin(), e.streams.end(), consumer) != e.streams.end())
      has_consumer = false;
    e.streams.clear();
  }
  if (ok && has_consumer && e.waited) ok = cudaStreamWaitEvent(consumer, e.done, 0) == cudaSuccess;
  if (!ok) {
    fprintf(stderr, "cuco_tx: early_wait(%d): event record/wait failed; synchronising the device\n", site);
    cudaDeviceSynchronize();
  }
}

inline void early_wait(int site, int on, cudaStream_t consumer) { early_wait_on(site, on, consumer, true); }
inline void early_wait(int site, int on) { early_wait_on(site, on, nullptr, false); }

// A call that ends a loop's body starts early in every iteration and is
// waited for once, after the loop (the transform checked that the body
// touches only its own iteration's elements of the call's buffers). Two
// elements may still share memory: loop_guard, at the top of the body, takes
// this iteration's buffers (the collective's arguments; send_all/recv_all:
// the buffer holds count elements of every rank) and, when they overlap a
// buffer of a call still in flight, waits for those calls before the
// iteration's work.
inline void loop_guard(int site, int on, const void* send, const void* recv, size_t count, ncclDataType_t dt,
                       ncclComm_t comm, int send_all, int recv_all) {
  if (!on) return;
  std::vector<EarlySite>& v = early_sites();
  if ((size_t)site >= v.size()) v.resize((size_t)site + 1);
  EarlySite& e = v[(size_t)site];
  int nranks = 1;
  if ((send_all || recv_all) && ncclCommCount(comm, &nranks) != ncclSuccess) nranks = 1 << 16;
  size_t bytes = count * dtype_size(dt), all = bytes * (size_t)nranks;
  const std::pair<uintptr_t, uintptr_t> mine[2] = {{(uintptr_t)send, (uintptr_t)send + (send_all ? all : bytes)},
                                                   {(uintptr_t)recv, (uintptr_t)recv + (recv_all ? all : bytes)}};
  bool overlap = false;
  for (const auto& s : e.spans)
    for (const auto& m : mine) overlap |= m.first < s.second && s.first < m.second;
  if (overlap) early_wait(site, on);
  e.spans.push_back(mine[0]);
  e.spans.push_back(mine[1]);
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
  const char* peersRead = nullptr;  // what peers may read of this rank while the split runs
  size_t peersReadBytes = 0;
  size_t bytes = 0;            // per rank
  int rank = 0, nranks = 0;
  ncclComm_t comm = nullptr;
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
inline std::vector<SplitRec>& split_recs() {
  static std::vector<SplitRec> v;
  return v;
}
inline SplitRec* split_rec(int site) { return site_rec(split_recs(), site); }

// This rank's own block into its slot of the receive buffer (a copy unless
// it is there already), then r->arrived[rank].
inline ncclResult_t own_block_copy(SplitRec* r, char* own, const char* send, cudaStream_t stream) {
  if (send != own && cudaMemcpyAsync(own, send, r->bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
    return CUCO_TX_FAIL("split pull: local copy failed");
  if (cudaEventRecord(r->arrived[r->rank], stream) != cudaSuccess) return CUCO_TX_FAIL("split pull: event record failed");
  return ncclSuccess;
}

// The pull itself, on `stream`; records r->arrived[p] after each block lands.
// Peer p's block for this rank lies in p's window `from`: at fromBase + p *
// r->bytes for an all-gather (every rank's block in its own slot), at
// fromBase + rank * r->bytes for an all-to-all (bySource false: this rank's
// block of p's send buffer). `send` is this rank's own block. An all-gather's
// peers pull this rank's block from its slot, so it is copied there first;
// an all-to-all's pull it from the send buffer, so its local copy follows the
// pulls instead of holding them back (the consumer reads the own block from
// the send buffer meanwhile: a 128 MiB local copy ahead of the pulls left
// them 0.7 ms late, bench/README.md "An all-to-all pulled before its own
// block's copy").
inline ncclResult_t block_pull(SplitRec* r, Buf* b, Buf* from, size_t fromBase, bool bySource, const char* send,
                               size_t outOff, cudaStream_t stream) {
  cuco::Symm& s = b->symm;
  char* recv = static_cast<char*>(b->base) + outOff;
  char* own = recv + (size_t)r->rank * r->bytes;
  CUCO_TX_TRY(cuco::lsa_peer_bases(s));
  CUCO_TX_TRY(cuco::lsa_peer_bases(from->symm));
  if (bySource) CUCO_TX_TRY(own_block_copy(r, own, send, stream));
  CUCO_TX_TRY(cuco::ce_rendezvous(s, stream));
  int pieces = split_chunks();
  r->pieceBytes = (r->bytes + pieces - 1) / pieces;
  for (int k = 1; k < r->nranks; k++) {
    int p = (r->rank + k) % r->nranks;
    const char* src = from->symm.peer<const char>(p, fromBase + (size_t)(bySource ? p : r->rank) * r->bytes);
    char* to = recv + (size_t)p * r->bytes;
    for (int j = 0; j < pieces; j++) {
      size_t lo = std::min(r->bytes, (size_t)j * r->pieceBytes), hi = std::min(r->bytes, lo + r->pieceBytes);
      if ((hi > lo && cuco::ce_copy(to + lo, src + lo, hi - lo, stream) != 0) ||
          cudaEventRecord(r->piece[p][j], stream) != cudaSuccess)
        return CUCO_TX_FAIL("split pull: pull from a peer failed");
    }
    if (cudaEventRecord(r->arrived[p], stream) != cudaSuccess) return CUCO_TX_FAIL("split pull: pull from a peer failed");
  }
  if (!bySource) CUCO_TX_TRY(own_block_copy(r, own, send, stream));
  CUCO_TX_TRY(cuco::ce_rendezvous(s, stream));
  return ncclSuccess;
}

// A site's record before its pull: events made, the layout noted.
inline ncclResult_t split_rec_ready(SplitRec* r, Comm* x, ncclComm_t comm, const void* recv, const void* own,
                                    size_t bytes, const void* peersRead, size_t peersReadBytes) {
  for (int p = 0; p < x->nranks; p++) {
    if (!r->arrived[p] && cudaEventCreateWithFlags(&r->arrived[p], cudaEventDisableTiming) != cudaSuccess)
      return CUCO_TX_FAIL("split: cannot create its events");
    for (int j = 0; j < split_chunks(); j++)
      if (!r->piece[p][j] && cudaEventCreateWithFlags(&r->piece[p][j], cudaEventDisableTiming) != cudaSuccess)
        return CUCO_TX_FAIL("split: cannot create its events");
  }
  r->recv = static_cast<const char*>(recv);
  r->send = own;
  r->peersRead = static_cast<const char*>(peersRead);
  r->peersReadBytes = peersReadBytes;
  r->bytes = bytes;
  r->rank = x->rank;
  r->nranks = x->nranks;
  r->comm = comm;
  return ncclSuccess;
}

inline ncclResult_t all_gather(SplitSite ss, const void* sendbuff, void* recvbuff, size_t sendcount,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  SplitRec* r = ss.on ? split_rec(ss.site) : nullptr;
  if (r) r->fresh = false;
  if (!r || on_host_comm(comm) || !buf_find(recvbuff, 1))
    return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  group_member(stream);
  size_t es = dtype_size(datatype);
  Comm* x = nullptr;
  if (!es) return CUCO_TX_FAIL("all_gather: unsupported data type");
  if (comm_setup(comm) != ncclSuccess || !(x = comm_find(comm))) return ncclInvalidUsage;
  size_t bytes = sendcount * es;
  Buf* b = nullptr;
  if (window_of(recvbuff, bytes * x->nranks, comm, &b) != ncclSuccess) return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  if (outOff + bytes * (size_t)x->nranks > b->symm.dataBytes) return CUCO_TX_FAIL("all_gather (split): output past the window");
  CUCO_TX_TRY(split_rec_ready(r, x, comm, recvbuff, sendbuff, bytes, sendbuff, bytes));
  if (bytes == 0) return ncclSuccess;
  ncclResult_t res = block_pull(r, b, b, outOff, true, static_cast<const char*>(sendbuff), outOff, stream);
  r->fresh = res == ncclSuccess;
  return res;
}

// Schedule consumer_split_by_source on an all-to-all (its first argument
// split_site(...)): the same pull as the all-gather's, each peer's block for
// this rank read from that peer's send buffer, so the consumer's parts run
// per source rank as for an all-gather. It needs the send buffer in a
// window too (the rules make it symmetric), 2 ranks or more, equal blocks
// and no group or capture; otherwise the all-to-all runs whole and the
// consumer waits for it (kernel_split & co. say why).
inline ncclResult_t all_to_all(SplitSite ss, const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  SplitRec* r = ss.on ? split_rec(ss.site) : nullptr;
  if (r) r->fresh = false;
  size_t es = dtype_size(datatype), bytes = count * es;
  Comm* x = nullptr;
  Buf *b = nullptr, *from = nullptr;
  if (!r || !es || !bytes || group_depth() > 0 || capturing(stream) || on_host_comm(comm) ||
      !buf_find(recvbuff, 1) || comm_setup(comm) != ncclSuccess ||
      !(x = comm_find(comm)) || x->nranks < 2 || !buf_find(sendbuff, bytes * x->nranks) ||
      !apart(sendbuff, recvbuff, bytes * x->nranks))
    return all_to_all(sendbuff, recvbuff, count, datatype, comm, stream);
  group_member(stream);
  if (window_of(recvbuff, bytes * x->nranks, comm, &b) != ncclSuccess ||
      window_of(sendbuff, bytes * x->nranks, comm, &from) != ncclSuccess)
    return ncclInvalidUsage;
  size_t outOff = (size_t)(static_cast<char*>(recvbuff) - static_cast<char*>(b->base));
  size_t inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(from->base));
  const char* own = static_cast<const char*>(sendbuff) + (size_t)x->rank * bytes;
  CUCO_TX_TRY(split_rec_ready(r, x, comm, recvbuff, own, bytes, sendbuff, bytes * x->nranks));
  CUCO_TX_TRACE("rank %d: all-to-all pulled per source rank (split %d)\n", x->rank, ss.site);
  ncclResult_t res = block_pull(r, b, from, inOff, false, own, outOff, stream);
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

// The event that part [.., lastByte] of peer p's block waits for: the piece
// holding that byte when the block is consumed in several parts, the whole
// block's arrival otherwise.
inline cudaEvent_t part_event(const SplitRec& r, int p, int parts, size_t lastByte) {
  if (parts == 1 || !r.pieceBytes) return r.arrived[p];
  return r.piece[p][std::min<size_t>(lastByte / r.pieceBytes, kMaxSplitChunks - 1)];
}

// consumer_split_by_source for a kernel the manifest declares
// rows_independent (rows= its row count's parameter, args= its pointers
// indexed by row, each with its width): kernel_split(site, on, spec,
// kernel, grid, block, smem, stream, args...) launches the
// kernel once per rank block of the gathered rows (own block first, each
// peer's after its arrival event, in CUCO_SPLIT_CHUNKS parts), with the row
// count set to the part's rows and each row argument moved to the part's
// first row (by its own elements per row, RowSpec, in its own type), on
// the launch's grid (a one-block-a-row grid shrunk to the part's rows). Anything else (knob 0, no fresh gather, the gathered
// argument not the start of the gathered buffer, rows not a multiple of the
// rank count, another row argument inside the gathered buffer, a width that
// does not fit) joins the gather and launches the kernel whole, saying why
// once on stderr.
namespace ksplit {
template <class T> struct Pointee { static constexpr size_t size = 0; static constexpr bool isConst = false; };
template <class T> struct Pointee<T*> {
  static constexpr size_t size =
      sizeof(typename std::conditional<std::is_void<T>::value || std::is_function<T>::value, char, T>::type);
  static constexpr bool isConst = std::is_const<T>::value;
};
template <class T> inline uintptr_t addr_of(const T& x, std::true_type) { return reinterpret_cast<uintptr_t>(x); }
template <class T> inline uintptr_t addr_of(const T&, std::false_type) { return 0; }
template <class T> inline long long int_of(const T& x, std::true_type) { return (long long)x; }
template <class T> inline long long int_of(const T&, std::false_type) { return -1; }

// What one part changes: the gathered arguments point at `at`, every other
// row argument i moves by `rowOff` rows of elems[i] elements, the row count
// is `rows`.
struct Part {
  unsigned long gathered, mask;
  int rowsPos;
  uintptr_t at;
  long long rowOff, rows;
  const long long* elems;
  bool gridRows;  // the launch has one block a row: the part's grid is its rows
  // attention_split: the first key's index (set to firstBase + rowOff), and
  // where this part's output and log-sum-exp go (-1: not changed)
  int firstPos = -1, outPos = -1, lsePos = -1;
  long long firstBase = 0;
  uintptr_t outAt = 0, lseAt = 0;
  const uintptr_t* own = nullptr;  // by position: where the part reads instead (0: moved by rowOff)
  // attention's queries: the query count's and first query's positions
  // (-1: not changed), their values, and the grid dimension over the
  // queries with its blocks for this part (-1: the launch's grid)
  int queriesPos = -1, firstQueryPos = -1, gridDim = -1;
  long long queries = 0, firstQuery = 0;
  unsigned gridBlocks = 0;
};
template <class T> inline void adjust(T& x, int i, const Part& q, std::true_type /*pointer*/, std::false_type) {
  if (i == q.outPos)
    x = reinterpret_cast<T>(q.outAt);
  else if (i == q.lsePos)
    x = reinterpret_cast<T>(q.lseAt);
  else if (q.own && q.own[i])
    x = reinterpret_cast<T>(q.own[i]);
  else if ((q.gathered >> i) & 1UL)
    x = reinterpret_cast<T>(q.at);
  else if ((q.mask >> i) & 1UL)
    x = reinterpret_cast<T>(reinterpret_cast<uintptr_t>(x) + (uintptr_t)(q.rowOff * q.elems[i]) * Pointee<T>::size);
}
template <class T> inline void adjust(T& x, int i, const Part& q, std::false_type, std::true_type /*integral*/) {
  if (i == q.rowsPos)
    x = (T)q.rows;
  else if (i == q.firstPos)
    x = (T)(q.firstBase + q.rowOff);
  else if (i == q.queriesPos)
    x = (T)q.queries;
  else if (i == q.firstQueryPos)
    x = (T)q.firstQuery;
}
template <class T> inline void adjust(T&, int, const Part&, std::false_type, std::false_type) {}

template <class Tup, size_t... I>
inline cudaError_t launch(const void* k, dim3 grid, dim3 block, size_t smem, cudaStream_t st, Tup& t,
                          const Part* q, std::index_sequence<I...>) {
  if (q) {
    int each[] = {0, (adjust(std::get<I>(t), (int)I, *q,
                             std::is_pointer<typename std::tuple_element<I, Tup>::type>{},
                             std::is_integral<typename std::tuple_element<I, Tup>::type>{}), 0)...};
    (void)each;
  }
  void* params[] = {static_cast<void*>(&std::get<I>(t))..., nullptr};
  return cudaLaunchKernel(k, grid, block, params, smem, st);
}

// The parameters' addresses (0: not a pointer), row counts (-1: not an
// integer), element sizes and constness, by position.
template <class Tup, size_t... I>
inline void describe(const Tup& t, uintptr_t* addr, long long* ints, size_t* es, bool* cst, std::index_sequence<I...>) {
  using std::tuple_element;
  int each[] = {0, (addr[I] = addr_of(std::get<I>(t), std::is_pointer<typename tuple_element<I, Tup>::type>{}),
                    ints[I] = int_of(std::get<I>(t), std::is_integral<typename tuple_element<I, Tup>::type>{}),
                    es[I] = Pointee<typename tuple_element<I, Tup>::type>::size,
                    cst[I] = Pointee<typename tuple_element<I, Tup>::type>::isConst, 0)...};
  (void)each;
}
// What each parameter of a launch is, by position (Launch's arrays): its
// address (0: not a pointer), its integer value (-1: not an integer), its
// element size and constness; elems gets each row argument's elements per
// row.
struct Params {
  int n;
  const uintptr_t* addr;
  const long long* ints;
  const size_t* es;
  const bool* cst;
  long long* elems;
};

// One launch as the splits see it: the kernel, its configuration, its
// arguments converted to its parameter types, and what each parameter is
// (address, integer value, element size and constness, by position).
template <class... P>
struct Launch {
  static constexpr size_t n = sizeof...(P);
  using Tup = std::tuple<P...>;
  const void* k;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  Tup t;
  uintptr_t addr[n + 1];
  long long ints[n + 1], elems[n + 1];
  size_t es[n + 1];
  bool cst[n + 1];
  template <class... A>
  Launch(void (*kernel)(P...), dim3 g, dim3 b, size_t sm, cudaStream_t st, A&&... a)
      : k(reinterpret_cast<const void*>(kernel)), grid(g), block(b), smem(sm), stream(st), t(std::forward<A>(a)...) {
    describe(t, addr, ints, es, cst, std::index_sequence_for<P...>{});
  }
  Params params() { return Params{(int)n, addr, ints, es, cst, elems}; }
  // The whole launch (q null) or one part of it, on its stream or on `on`.
  cudaError_t run(const Part* q, cudaStream_t on = nullptr) {
    Tup piece = t;
    dim3 g = grid;
    if (q && q->gridRows) g.x = (unsigned)q->rows;
    if (q && q->gridDim >= 0) (q->gridDim == 0 ? g.x : q->gridDim == 1 ? g.y : g.z) = q->gridBlocks;
    return launch(k, g, block, smem, on ? on : stream, piece, q, std::index_sequence_for<P...>{});
  }
};
}  // namespace ksplit

// The transform's reading of a rows_independent declaration at one launch:
// the row count's parameter, the row arguments' bits, whether the launch's
// grid is written as its row count (one block a row: a part then launches
// as many blocks as it has rows, when the grid is that count at run time),
// and where each row argument's elements per row come from (args= "x
// y:dout"): 0, as many as the gathered (or reduced) argument; k + 1, the
// value of parameter k.
struct RowSpec {
  int rowsPos;
  unsigned long mask;
  int gridRows;
  signed char widthFrom[64] = {};  // written only when some width is declared
};

// Elements per row of each row argument into pa.elems (ref for those of the
// reference width); why a width parameter is unusable, or nullptr.
inline const char* row_elems(const ksplit::Params& pa, const RowSpec& w, long long ref) {
  for (int i = 0; i < pa.n && i < 64; i++) {
    int from = w.widthFrom[i] - 1;
    if (!((w.mask >> i) & 1UL)) continue;
    if (from >= pa.n) return "a row argument's width parameter is out of range";
    pa.elems[i] = from < 0 ? ref : pa.ints[from];
    if (pa.elems[i] <= 0) return "a row argument's width parameter is not a positive integer";
  }
  return nullptr;
}

// What every part of a launch of `rows` rows shares: the row arguments,
// the row count's position, their widths, and whether the grid is one
// block a row (written so, and equal to the rows at run time).
inline ksplit::Part part_of(const ksplit::Params& pa, const RowSpec& w, unsigned gridX, long long rows) {
  ksplit::Part q{};
  q.mask = w.mask;
  q.rowsPos = w.rowsPos;
  q.elems = pa.elems;
  q.gridRows = w.gridRows && gridX == (unsigned long long)rows;
  return q;
}

// The row arguments that point at the start of the buffer [lo, hi) (their
// bits into *at, the first one's position into *first); why a parameter
// cannot be split with it (nullptr: none). `received` names the buffer in
// the reasons (a receive's, else a gather's).
inline const char* row_args_at(const ksplit::Params& pa, const RowSpec& w, uintptr_t lo, uintptr_t hi, bool received,
                               unsigned long* at, int* first) {
  static const char* const why[2][3] = {
      {"a parameter that is not a row argument points into the gathered buffer",
       "a row argument points inside the gathered buffer, not at its start",
       "no row argument is the start of the gathered buffer"},
      {"a parameter that is not a row argument points into the received buffer",
       "a row argument points inside the received buffer, not at its start",
       "no row argument is the start of the received buffer"}};
  const char* const* m = why[received ? 1 : 0];
  *at = 0;
  *first = -1;
  for (int i = 0; i < pa.n && i < 64; i++) {
    bool row = (w.mask >> i) & 1UL, inside = pa.es[i] && pa.addr[i] >= lo && pa.addr[i] < hi;
    if (row && !pa.es[i]) return "a row argument of its declaration is not a pointer";
    if (row && pa.addr[i] == lo) {
      *at |= 1UL << i;
      if (*first < 0) *first = i;
    } else if (inside) {
      // each part would read the whole buffer through it
      return row ? m[1] : m[0];
    }
  }
  return *first < 0 ? m[2] : nullptr;
}

// Why the launch cannot split by the gather r (nullptr: it can); fills q
// (with the gathered bits) and each row argument's elements per row.
inline const char* kernel_split_plan(const SplitRec& r, const ksplit::Params& pa, const RowSpec& w, unsigned gridX,
                                     ksplit::Part* q, bool* ownFromSend) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(r.recv), hi = lo + r.bytes * (size_t)r.nranks;
  uintptr_t rlo = reinterpret_cast<uintptr_t>(r.peersRead), rhi = rlo + r.peersReadBytes;
  bool inPlace = rlo && rlo < hi && lo < rhi;  // the send block lies in the gathered buffer
  for (int i = 0; i < pa.n && i < 64; i++) {
    bool writes = pa.es[i] && !pa.cst[i];
    if (writes && rlo && ((pa.addr[i] >= rlo && pa.addr[i] < rhi) || (inPlace && pa.addr[i] >= lo && pa.addr[i] < hi)))
      return "it writes through a pointer into this rank's send buffer, which peers may still be reading";
  }
  unsigned long gathered = 0;
  int g = -1;
  if (const char* why = row_args_at(pa, w, lo, hi, false, &gathered, &g)) return why;
  long long rows = w.rowsPos < pa.n ? pa.ints[w.rowsPos] : -1;
  if (rows <= 0 || rows % r.nranks) return "its row count is not a positive multiple of the rank count";
  long long rpr = rows / r.nranks;
  if (r.bytes % (size_t)rpr || (r.bytes / (size_t)rpr) % pa.es[g]) return "a rank's block is not a whole number of rows";
  long long ref = (long long)(r.bytes / (size_t)rpr / pa.es[g]);
  if (const char* why = row_elems(pa, w, ref)) return why;
  if (pa.elems[g] != ref) return "the gathered argument's declared width is not the gathered rows' width";
  *q = part_of(pa, w, gridX, rows);
  q->gathered = gathered;
  *ownFromSend = pa.cst[g] && (gathered & (gathered - 1)) == 0;
  return nullptr;
}

// A split launch that cannot split: it waits for its site's whole
// communication and runs whole, saying why once (r: the site's record,
// SplitRec or RecvRec, or nullptr; after: what it consumes).
template <class R, class... P>
inline cudaError_t launch_whole(R* r, int site, const char* after, const char* why, ksplit::Launch<P...>& L,
                                cudaStream_t stream) {
  if (r && r->fresh && !r->warned) {
    fprintf(stderr, "cuco_tx: split(%d): the kernel runs whole after the %s: %s\n", site, after, why);
    r->warned = true;
  }
  if (r) r->fresh = false;
  split_join(site, stream);
  return L.run(nullptr);
}

template <class... P, class... A>
inline cudaError_t kernel_split(int site, int on, const RowSpec& w, void (*kernel)(P...), dim3 grid, dim3 block,
                                size_t smem, cudaStream_t stream, A&&... a) {
  ksplit::Launch<P...> L(kernel, grid, block, smem, stream, std::forward<A>(a)...);
  SplitRec* r = on ? split_rec(site) : nullptr;
  ksplit::Part q{};
  bool ownFromSend = false;
  const char* why = r && r->fresh ? kernel_split_plan(*r, L.params(), w, grid.x, &q, &ownFromSend)
                                  : "no fresh gather";
  if (why) return launch_whole(r, site, "gather", why, L, stream);
  r->fresh = false;
  long long rpr = L.ints[w.rowsPos] / r->nranks;
  size_t rowBytes = r->bytes / (size_t)rpr;
  CUCO_TX_TRACE("split(%d): kernel per source rank, %lld rows each, peers' in up to %d parts\n", site, rpr,
                split_chunks());
  for (int j = 0; j < r->nranks; j++) {
    int p = (r->rank + j) % r->nranks;
    bool fromSend = j == 0 && ownFromSend;
    int parts = j == 0 ? 1 : (int)std::min<long long>(split_chunks(), rpr);
    const char* block0 = fromSend ? static_cast<const char*>(r->send) : r->recv + (size_t)p * r->bytes;
    for (int part = 0; part < parts; part++) {
      long long lo = rpr * part / parts, hi = rpr * (part + 1) / parts;
      if (!fromSend && cudaStreamWaitEvent(stream, part_event(*r, p, parts, (size_t)hi * rowBytes - 1), 0) != cudaSuccess)
        return cudaErrorUnknown;
      q.at = reinterpret_cast<uintptr_t>(block0 + (size_t)lo * rowBytes);
      q.rowOff = p * rpr + lo;
      q.rows = hi - lo;
      cudaError_t rc = L.run(&q);
      if (rc != cudaSuccess) return rc;
    }
  }
  return cudaSuccess;
}

}  // namespace cuco_tx
