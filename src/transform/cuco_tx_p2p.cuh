// cuco_tx glue, part 2 of 8 (after cuco_tx_runtime.cuh): point-to-point
// over the control window, by the SM kernel or the copy engine.
namespace cuco_tx {

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
  volatile uint64_t* post = ctrl_word(ctrl, post_word(me, seq), src);
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
      volatile uint64_t* p = ctrl_word(ctrl, post_word(peer, seq), s.rank);
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
    volatile uint64_t* landed = ctrl_word(ctrl, landed_word(s.rank, seq), peer);
    landed[0] = post[1];
    landed[1] = landed_where(post[0], n);
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
        *ctrl_word(ctrl, data_word(s.rank, blockIdx.x), peer));
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
  bool in = wait_seq(ctrl_word(ctrl, data_word(src, blockIdx.x), me), seq, error,
                     kErrRecvWait);
  if (!in || blockIdx.x != 0) return;
  volatile uint64_t* landed = ctrl_word(ctrl, landed_word(src, seq), me);
  uint64_t at = landed[0], where = landed[1];
  if (at != off || (where & 0xff) != win || (where >> 8) > bytes) atomicCAS(error, 0, kErrLanded);
}

// Whether a message is large enough for NCCL's own send/recv or the copy
// engine (CUCO_P2P_NCCL_FROM bytes or more; every piece judged by its
// whole message).
inline bool p2p_large(const P2pOp& op) {
  return CUCO_P2P_NCCL_FROM > 0 && op.msgBytes >= (size_t)CUCO_P2P_NCCL_FROM;
}
// Whether the copy engines carry the large ones (CUCO_P2P_CE, a driver with
// stream memory operations).
inline bool p2p_ce_on() { return CUCO_P2P_CE && cuco::stream_mem_ops().ok; }

// Whether a send or receive of this size goes by the copy engine
// (CUCO_P2P_CE, messages of CUCO_P2P_NCCL_FROM bytes or more, a driver with
// stream memory operations). Both ends decide alike, from the message's
// size (every piece of a message the same way).
inline bool p2p_by_ce(const P2pOp& op) {
  return p2p_ce_on() && p2p_large(op) && op.peer != comm_rank(op.comm);
}

// Address of word `word` of peer's control window, for stream memory operations.
inline CUdeviceptr ctrl_peer_word(Comm* x, int peer, size_t word) {
  return reinterpret_cast<CUdeviceptr>(x->ctrlSymm.peer<char>(peer, word * sizeof(uint64_t)));
}

inline ncclResult_t write_word(cudaStream_t st, CUdeviceptr at, uint64_t v) {
  if (cuco::stream_mem_ops().write64(reinterpret_cast<CUstream>(st), at, v, CU_STREAM_WRITE_VALUE_DEFAULT) !=
      CUDA_SUCCESS)
    return CUCO_TX_FAIL("cuStreamWriteValue64 to a peer's control window failed");
  return ncclSuccess;
}

// The window of a receive's buffer and the buffer's offset in it.
inline ncclResult_t recv_place(const P2pOp& op, Buf** b, size_t* off) {
  if (window_of(op.buf, op.bytes, op.comm, b) != ncclSuccess) return ncclInvalidUsage;
  *off = (size_t)(static_cast<const char*>(op.buf) - static_cast<char*>((*b)->base));
  return ncclSuccess;
}

// Receiver -> source: "posted here". Copy-engine receives post with stream
// memory operations (no SM); the others with a one-warp kernel.
inline ncclResult_t p2p_post(const P2pOp& op) {
  Buf* b = nullptr;
  size_t off = 0;
  if (recv_place(op, &b, &off) != ncclSuccess) return ncclInvalidUsage;
  Comm* x = comm_find(op.comm);
  uint64_t seq = ++x->postSeq[op.peer];
  if (!p2p_by_ce(op)) {
    post_recv_kernel<<<1, 32, 0, op.stream>>>(x->ctrlWin, x->rank, op.peer, seq, (uint64_t)b->winIdx,
                                              (uint64_t)off, (uint64_t)op.bytes);
    return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("post_recv launch failed");
  }
  if (cuco::lsa_peer_bases(x->ctrlSymm) != 0) return CUCO_TX_FAIL("no LSA addresses for the control window");
  size_t post = post_word(x->rank, seq);
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
  if (cuco::ce_copy(to->symm.peer<char>(op.peer, d.off), op.buf, op.bytes, op.stream) != 0)
    return CUCO_TX_FAIL("copy-engine send: the copy failed");
  size_t landed = landed_word(x->rank, seq);
  ncclResult_t r = write_word(op.stream, ctrl_peer_word(x, op.peer, landed), d.off);
  if (r == ncclSuccess) r = write_word(op.stream, ctrl_peer_word(x, op.peer, landed + 1), landed_where(d.win, op.bytes));
  for (int cta = 0; cta < p2p_ctas() && r == ncclSuccess; cta++)
    r = write_word(op.stream, ctrl_peer_word(x, op.peer, data_word(x->rank, cta)), seq);
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
  size_t off = 0;
  if (!x) return CUCO_TX_FAIL("receive on a communicator without device setup");
  if (recv_place(op, &b, &off) != ncclSuccess) return ncclInvalidUsage;
  uint64_t seq = ++x->recvSeq[op.peer];
  recv_wait_kernel<<<p2p_ctas(), 32, 0, op.stream>>>(x->ctrlWin, x->rank, op.peer, seq, (uint64_t)b->winIdx,
                                                     (uint64_t)off, (uint64_t)op.bytes, x->error);
  return cudaGetLastError() == cudaSuccess ? ncclSuccess : CUCO_TX_FAIL("receive wait launch failed");
}

// A group's sends to self and receives from self, in order, as indices into
// ops: the k-th send to self of a group feeds its k-th receive from self.
inline void self_ops(const std::vector<P2pOp>& ops, std::vector<size_t>* sends, std::vector<size_t>* recvs) {
  for (size_t i = 0; i < ops.size(); i++)
    if (ops[i].peer == comm_rank(ops[i].comm)) (ops[i].isSend ? sends : recvs)->push_back(i);
}

// Sends to self that NCCL's group does not carry (nccl_part) become local
// copies into the matching receive from self (self_ops).
inline ncclResult_t p2p_self(const std::vector<P2pOp>& ops) {
  std::vector<size_t> sends, recvs;
  self_ops(ops, &sends, &recvs);
  if (sends.size() != recvs.size()) return CUCO_TX_FAIL("a send to self without its receive in the same group");
  for (size_t i = 0; i < sends.size(); i++) {
    const P2pOp& s = ops[sends[i]];
    const P2pOp& r = ops[recvs[i]];
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

// Whether NCCL's own send/recv may move this communicator's buffers: no
// window of it registered yet, or NCCL's local registration off (below).
inline bool nccl_may_touch(ncclComm_t c) {
  const Comm* x = comm_find(c);
  return !x || x->nwins == 0 || nccl_local_register_off();
}

// Whether a send or receive goes through NCCL's own send/recv: its size is
// past CUCO_P2P_NCCL_FROM, and NCCL may send from it. NCCL 2.28's send/recv
// hang when a buffer lies in a registered symmetric window while NCCL's
// local registration is on (seen at 2 ranks: the device all-to-all of
// counts registers the windows, then the rows' ncclSend/ncclRecv never
// complete; NCCL_LOCAL_REGISTER=0 runs), so once a window of the
// communicator is registered, every size takes the device path unless local
// registration is off (the glue turns it off before main unless the job sets
// NCCL_LOCAL_REGISTER: LocalRegisterOff, cuco_tx_runtime.cuh). Both ends of a pair decide
// alike: the sizes match (a piece is judged by its whole message's size, so
// the pieces of one message go one way, whether its end flushes them one by
// one or together), windows are registered by every rank together, and the
// environment is the job's.
inline bool via_nccl(const P2pOp& op) {
  return p2p_large(op) && op.peer != comm_rank(op.comm) && !p2p_by_ce(op) && nccl_may_touch(op.comm);
}

// The group's sends and receives that go through NCCL (nccl_part), as one
// NCCL group, after the device ones (every rank issues them in the same
// order).
inline ncclResult_t p2p_nccl(const std::vector<P2pOp>& ops) {
  if (ops.empty()) return ncclSuccess;
  ncclResult_t r = ::ncclGroupStart();
  for (const P2pOp& op : ops) {
    if (r != ncclSuccess) continue;
    r = op.isSend ? ::ncclSend(op.buf, op.bytes, ncclInt8, op.peer, op.comm, op.stream)
                  : ::ncclRecv(const_cast<void*>(op.buf), op.bytes, ncclInt8, op.peer, op.comm, op.stream);
  }
  ncclResult_t g = ::ncclGroupEnd();
  return r != ncclSuccess ? r : g;
}

// Whether a send to self and its receive (the k-th of each in a group) go in
// NCCL's group: where a send of the same size to a peer would (via_nccl's
// size and registration tests), the two buffers differing and the sizes
// matching. NCCL then copies the block inside its kernel, beside the peers'
// transfers, instead of a local copy on the stream before them. Decided by
// the pair, so both of its ops go the same way.
inline bool self_pair_via_nccl(const P2pOp& send, const P2pOp& recv) {
  // (with the copy engine on, a peer send of that size goes by it: no NCCL kernel)
  return send.comm == recv.comm && send.buf != recv.buf && send.bytes == recv.bytes && p2p_large(send) &&
         !p2p_ce_on() && nccl_may_touch(send.comm);
}

// Splits a group's ops into those NCCL carries (via_nccl, the pairs to
// self of self_pair_via_nccl, and every op on a stream being captured into
// a graph: capturing), in order, and the rest (kept in ops).
inline std::vector<P2pOp> nccl_part(std::vector<P2pOp>& ops) {
  std::vector<char> nccl(ops.size(), 0), ready(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); i++) {
    if (capturing(ops[i].stream) || on_host_comm(ops[i].comm)) {  // NCCL's own, whatever the size
      nccl[i] = 1;
      continue;
    }
    ready[i] = comm_setup(ops[i].comm) == ncclSuccess;
    if (ready[i] && ops[i].peer != comm_rank(ops[i].comm)) nccl[i] = via_nccl(ops[i]);
  }
  std::vector<size_t> selfSends, selfRecvs;
  self_ops(ops, &selfSends, &selfRecvs);
  for (size_t k = 0; k < selfSends.size() && k < selfRecvs.size(); k++) {
    size_t s = selfSends[k], r = selfRecvs[k];
    if (ready[s] && ready[r] && self_pair_via_nccl(ops[s], ops[r])) nccl[s] = nccl[r] = 1;
  }
  std::vector<P2pOp> viaNccl, kept;
  for (size_t i = 0; i < ops.size(); i++) {
    const P2pOp& op = ops[i];
    CUCO_TX_TRACE("rank %d: %s peer %d, %zu bytes, via %s\n", comm_rank(op.comm), op.isSend ? "send to" : "receive from",
                  op.peer, op.bytes, nccl[i] ? "NCCL" : op.peer == comm_rank(op.comm) ? "a local copy" : "the device");
    (nccl[i] ? viaNccl : kept).push_back(op);
  }
  ops.swap(kept);
  return viaNccl;
}

// Posts every receive, then issues every send, then waits for every receive,
// so no two ranks can wait on each other; then the ones NCCL carries.
inline ncclResult_t p2p_flush() {
  std::vector<P2pOp> ops;
  ops.swap(pending());
  std::vector<P2pOp> viaNccl = nccl_part(ops);
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

}  // namespace cuco_tx
