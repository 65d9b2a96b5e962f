// cuco_tx glue, part 5 of 8: schedule producer_split, the GEMM's or
// declared kernel's ranges and the all-reduce that reduces each one as it is
// made (the GEMM's side is in cuco_tx_gemm.cuh, produce_run).
namespace cuco_tx {

// Schedule producer_split (knobs CUCO_PSPLIT_<site>): an all-reduce whose
// input the cuBLAS GEMM right before it writes. The GEMM (gemm_ex_produce &
// co., same arguments) runs as CUCO_PSPLIT_PIECES GEMMs over ranges of its
// output columns and records an event after each; the all-reduce (its first
// argument produce_site(site, CUCO_PSPLIT_<site>)) reduces each range on a
// side stream as soon as the GEMM has made it, while the GEMM's next range
// runs, and the call's stream then waits for the side stream. Each range
// goes by the copy engines (CUCO_PSPLIT_CE) or by the transport all_reduce
// picks for its size. With the knob at 0, when the GEMM did not split, or
// when the all-reduce is not an in-place reduction of exactly the GEMM's
// output, the all-reduce runs whole on its stream. The side stream has the
// greatest priority, so that the ranges' kernels (the SM all-reduce, or the
// copy engine's short sum) take the next free SMs ahead of the producer's
// later ranges.
#ifndef CUCO_PSPLIT_PIECES
#define CUCO_PSPLIT_PIECES 8
#endif
// CUCO_PSPLIT_CE 1: the ranges are reduced by the copy engines
// (cuco::all_reduce_ce) wherever they can be, so that no SM is held while
// the data moves beside the producer's later ranges; 0: by the transport
// all_reduce picks for the range's size.
#ifndef CUCO_PSPLIT_CE
#define CUCO_PSPLIT_CE 1
#endif
constexpr int kMaxProducePieces = 16;
// CUCO_PSPLIT_MIN_BYTES: no range below this many bytes. Each range's
// reduction pays its rendezvous and a launch, worth it only for a range that
// takes a while to move (measured at 16 MiB ranges of a 128 MiB all-reduce;
// smaller ones not yet). A compile-time setting, not a search knob: tests
// that check the ranges at small sizes build with -DCUCO_PSPLIT_MIN_BYTES=0.
#ifndef CUCO_PSPLIT_MIN_BYTES
#define CUCO_PSPLIT_MIN_BYTES (8 << 20)
#endif
// The ranges for an output of `bytes`: CUCO_PSPLIT_PIECES, fewer where the
// ranges would be smaller than CUCO_PSPLIT_MIN_BYTES (1: run whole).
inline int produce_pieces(size_t bytes) {
  size_t least = (size_t)CUCO_PSPLIT_MIN_BYTES, most = least ? bytes / least : (size_t)kMaxProducePieces;
  int knob = clamp_count(CUCO_PSPLIT_PIECES, kMaxProducePieces);
  return most < (size_t)knob ? (int)std::max<size_t>(most, 1) : knob;
}

struct ProduceSite {
  int site, on;
};
inline ProduceSite produce_site(int site, int on) { return ProduceSite{site, on}; }

struct ProduceRec {
  const char* out = nullptr;                  // the producer's (GEMM's or kernel's) output
  size_t begin[kMaxProducePieces] = {};       // byte range of each range made
  size_t end[kMaxProducePieces] = {};
  cudaEvent_t made[kMaxProducePieces] = {};   // range j written
  int pieces = 0;
  cudaStream_t gemmStream = nullptr;
  cudaStream_t side = nullptr;
  cudaStream_t fork = nullptr;                // a kernel's odd ranges (kernel_produce)
  cudaEvent_t entry = nullptr, done = nullptr, forked = nullptr;
  int ranks = 0;        // the communicator's size at the last all-reduce (0: none yet)
  int chunks = 0;       // the ranks of the reduce-scatter the site fed last (0: an all-reduce)
  const void* inputs[2] = {};  // a GEMM's A and B (a kernel's inputs are not known: nullptr)
  bool fresh = false;   // made and not reduced yet
  bool warned = false;  // the fallback was reported
};
inline ProduceRec* produce_rec(int site) {
  static std::vector<ProduceRec> v;
  return site_rec(v, site);
}

// Whether the producer (`what`: "GEMM", "kernel") of site runs whole because
// an all-reduce of the site has seen a communicator of one rank: the
// reduction moves nothing, the ranges would only cost.
inline bool produce_at_one_rank(const ProduceRec* r, int site, const char* what) {
  if (!r || r->ranks != 1) return false;
  CUCO_TX_TRACE("producer split(%d): one rank, the %s runs whole\n", site, what);
  return true;
}

// Range j of `units` (a GEMM's output columns, a kernel's rows) in
// `pieces` ranges: step by step over the ranks' parts once the site was
// seen to feed a reduce-scatter (device/produce_plan.cuh).
inline void produce_range(const ProduceRec* r, long long units, int pieces, int j, long long* lo, long long* hi) {
  cuco::produce::range(r->chunks, units, pieces, j, lo, hi);
}

inline ncclResult_t produce_events(ProduceRec* r) {
  for (int j = 0; j < kMaxProducePieces; j++)
    if (!r->made[j] && cudaEventCreateWithFlags(&r->made[j], cudaEventDisableTiming) != cudaSuccess)
      return CUCO_TX_FAIL("producer split: cannot create its events");
  if ((!r->entry && cudaEventCreateWithFlags(&r->entry, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->done && cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->forked && cudaEventCreateWithFlags(&r->forked, cudaEventDisableTiming) != cudaSuccess) ||
      (!r->fork && cudaStreamCreateWithFlags(&r->fork, cudaStreamNonBlocking) != cudaSuccess) ||
      (!r->side && side_stream_create(&r->side) != cudaSuccess))
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

// Whether the collective of site ps (`what`, sendbuff, `bytes` of input,
// `inPlace`) may reduce its producer's ranges as they are made: the ranges
// are fresh and cover exactly sendbuff. Says once why not. Marks the
// ranges taken and counts the communicator's ranks either way.
inline ProduceRec* produce_taken(ProduceSite ps, const char* what, const void* sendbuff, size_t bytes, bool inPlace,
                                 ncclComm_t comm) {
  ProduceRec* r = ps.on ? produce_rec(ps.site) : nullptr;
  if (!r) return nullptr;
  size_t made = 0;
  for (int j = 0; j < r->pieces; j++) made += r->end[j] - r->begin[j];
  bool fits = r->fresh && sendbuff == r->out && inPlace && bytes && r->pieces > 0 && bytes == made;
  if (r->fresh && !fits && !r->warned) {
    fprintf(stderr, "cuco_tx: producer split(%d): the %s runs whole: %s\n", ps.site, what,
            inPlace ? "its input is not exactly its producer's output"
                    : "it is not an in-place reduction of exactly its producer's output");
    r->warned = true;
  }
  r->fresh = false;
  if (ncclCommCount(comm, &r->ranks) != ncclSuccess) r->ranks = 0;
  return fits ? r : nullptr;
}

// The side stream, ordered after `stream`'s earlier work when that is not
// the producer's own stream.
inline ncclResult_t produce_enter(ProduceRec* r, cudaStream_t stream) {
  if (!follows_gemm_stream(stream, r->gemmStream) &&
      (cudaEventRecord(r->entry, stream) != cudaSuccess || cudaStreamWaitEvent(r->side, r->entry, 0) != cudaSuccess))
    return CUCO_TX_FAIL("producer split: event record/wait failed");
  return ncclSuccess;
}

// `stream` waits for the side stream (also after a range failed, so that
// nothing of the call is left running unjoined).
inline ncclResult_t produce_join(ProduceRec* r, int site, cudaStream_t stream, ncclResult_t res) {
  if (cudaEventRecord(r->done, r->side) != cudaSuccess || cudaStreamWaitEvent(stream, r->done, 0) != cudaSuccess) {
    fprintf(stderr, "cuco_tx: producer split(%d): event record/wait failed; synchronising the device\n", site);
    cudaDeviceSynchronize();
    if (res == ncclSuccess) res = ncclSystemError;
  }
  return res;
}

// Each range on the side stream once made; the stream waits for all of
// them. In place only: an output elsewhere could be an input the GEMM's
// later ranges still read.
inline ncclResult_t all_reduce(ProduceSite ps, const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  size_t es = dtype_size(datatype);
  ProduceRec* r = produce_taken(ps, "all-reduce", sendbuff, count * es, recvbuff == sendbuff, comm);
  if (!r || on_host_comm(comm)) return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  r->chunks = 0;
  ncclResult_t res = produce_enter(r, stream);
  for (int j = 0; j < r->pieces && res == ncclSuccess; j++) {
    size_t lo = r->begin[j], hi = r->end[j];
    if (cudaStreamWaitEvent(r->side, r->made[j], 0) != cudaSuccess) {
      res = CUCO_TX_FAIL("producer split: event wait failed");
      break;
    }
    res = all_reduce(static_cast<const char*>(sendbuff) + lo, static_cast<char*>(recvbuff) + lo, (hi - lo) / es,
                     datatype, op, comm, r->side, CUCO_PSPLIT_CE != 0);
  }
  return produce_join(r, ps.site, stream, res);
}

// The communicator's size (the reduce-scatter's input is recvcount times
// it, for kernel_produce's count).
inline size_t comm_size(ncclComm_t comm) {
  int n = 0;
  return ncclCommCount(comm, &n) == ncclSuccess && n > 0 ? (size_t)n : 0;
}

// Whether out lies in none of the producer's inputs' allocations (known for
// a GEMM only), so that a reduction may write it while later ranges run.
inline bool apart_from_inputs(const ProduceRec* r, const void* out) {
  uintptr_t o = alloc_start(out), a = alloc_start(r->inputs[0]), b = alloc_start(r->inputs[1]);
  return o && a && b && o != a && o != b;
}

// Whether the ranges were made step by step over n parts of partBytes.
inline bool produce_in_steps(const ProduceRec* r, int n, size_t partBytes) {
  return cuco::produce::in_steps(r->begin, r->end, r->pieces, n, partBytes);
}

// The reduce-scatter by the copy engines (cuco::reduce_scatter_ce) on the
// side stream: a step as soon as the producer has made it, where the ranges
// come in steps over the ranks' parts; otherwise whole once all are made
// (the producer learns from this call to make the next one in steps). Its
// output is written directly when in place (this rank's part of the input)
// or outside the producer's inputs' allocations; otherwise it is summed into
// scratch and copied out once the producer is done: recvbuff could be an
// input of the producer's later ranges.
template <typename T>
inline ncclResult_t produce_rs_ranges(int site, ProduceRec* r, Comm* x, Buf* b, const void* sendbuff, void* recvbuff,
                                      size_t count) {
  size_t inOff = (size_t)(static_cast<const char*>(sendbuff) - static_cast<char*>(b->base)), es = sizeof(T);
  const T* part = reinterpret_cast<const T*>(b->symm.local<char>(inOff)) + (size_t)x->rank * count;
  bool direct = recvbuff == part || apart_from_inputs(r, recvbuff), steps = produce_in_steps(r, x->nranks, count * es);
  CUCO_TX_TRACE("producer split(%d): reduce-scatter of %d ranges by the copy engines%s%s\n", site, r->pieces,
                steps ? ", in steps over the ranks' parts" : ", whole",
                recvbuff == part ? ", in place" : direct ? ", into its output" : ", staged");
  size_t staged = direct ? 0 : cuco::round_up(count * es, 256);
  char* scratch = static_cast<char*>(ce_scratch(x, staged + cuco::reduce_scatter_ce_scratch<T>(count, x->nranks)));
  ncclResult_t res = scratch ? ncclSuccess : CUCO_TX_FAIL("reduce_scatter: cannot allocate the copy engine's scratch");
  T* out = direct ? static_cast<T*>(recvbuff) : reinterpret_cast<T*>(scratch);
  char* pulled = scratch ? scratch + staged : nullptr;
  int n = steps ? x->nranks : r->pieces, last = steps ? r->pieces / n - 1 : 0;
  for (int k = 0; k <= last; k++) {
    for (int j = k * n; j < (k + 1) * n && res == ncclSuccess; j++)
      if (cudaStreamWaitEvent(r->side, r->made[j], 0) != cudaSuccess)
        res = CUCO_TX_FAIL("producer split: event wait failed");
    // after a failure each step still meets the peers (moving nothing), so
    // that none of them waits at a rendezvous this rank never reaches
    size_t lo = res == ncclSuccess && steps ? r->begin[k * n] / es : 0;
    size_t hi = res != ncclSuccess ? lo : steps ? r->end[k * n] / es : count;
    if (cuco::reduce_scatter_ce<T>(b->symm, inOff, out, count, lo, hi, pulled, r->side, k == last) != 0 &&
        res == ncclSuccess)
      res = CUCO_TX_FAIL("device library call failed: cuco::reduce_scatter_ce");
  }
  if (res == ncclSuccess && !direct &&
      cudaMemcpyAsync(recvbuff, out, count * es, cudaMemcpyDeviceToDevice, r->side) != cudaSuccess)
    res = CUCO_TX_FAIL("reduce_scatter: copy of the result failed");
  return res;
}

// A reduce-scatter of exactly its producer's output, on 2 ranks or more,
// whose input is in a window: each range reduced to its owners by the copy
// engines as soon as it is made, on the side stream; the stream then waits.
inline ncclResult_t reduce_scatter(ProduceSite ps, const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  size_t n = comm_size(comm), es = dtype_size(datatype);
  ProduceRec* r = produce_taken(ps, "reduce-scatter", sendbuff, recvcount * es * n, true, comm);
  Comm* x = nullptr;
  Buf* b = nullptr;
  bool ce = r && n > 1 && CUCO_PSPLIT_CE && device_reduces(op, datatype) && !on_host_comm(comm) && buf_find(sendbuff, 1) &&
            comm_setup(comm) == ncclSuccess && (x = comm_find(comm)) &&
            window_of(sendbuff, recvcount * es * n, comm, &b) == ncclSuccess;
  if (r && !ce) CUCO_TX_TRACE("producer split(%d): the reduce-scatter runs whole (copy engines off or no window)\n", ps.site);
  if (!ce) return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  group_member(stream);
  r->chunks = (int)n;
  // the steps meet the peers even when this rank's entry failed (a rank
  // that skipped them would leave the others waiting); the error is kept
  ncclResult_t entered = produce_enter(r, stream);
  ncclResult_t res = with_dtype(datatype, "reduce_scatter: data type not implemented on the device", [&](auto zero) {
    return produce_rs_ranges<decltype(zero)>(ps.site, r, x, b, sendbuff, recvbuff, recvcount);
  });
  if (entered != ncclSuccess) res = entered;
  if (res == ncclSuccess && op == ncclAvg) res = scale_by_ranks(recvbuff, recvcount, datatype, comm, r->side);
  return produce_join(r, ps.site, stream, res);
}

// producer_split for a kernel the manifest declares rows_independent:
// kernel_produce(site, on, spec, outPos, count, datatype, kernel, grid,
// block, smem, stream, args...) launches the kernel
// in CUCO_PSPLIT_PIECES ranges of rows (row count set to the range's, every
// row argument moved to its first row, the launch's grid), an event after
// each. count and datatype are the all-reduce's: parameter outPos, the
// buffer it reduces, holds count / rows elements per row (the reference
// width of RowSpec). Anything else (knob 0, outPos not a row argument of
// that element size, fewer than 2 rows, count not a multiple of the rows, a
// width that does not fit) launches the kernel whole, and the all-reduce
// then runs whole too.
inline const char* kernel_produce_plan(const ksplit::Params& pa, const RowSpec& w, int outPos, size_t count,
                                       ncclDataType_t dt) {
  if (outPos < 0 || outPos >= pa.n || !((w.mask >> outPos) & 1UL)) return "the reduced buffer is not a row argument";
  for (int i = 0; i < pa.n && i < 64; i++)
    if (((w.mask >> i) & 1UL) && !pa.es[i]) return "a row argument of its declaration is not a pointer";
  if (pa.es[outPos] != dtype_size(dt)) return "the reduced buffer's element type is not the all-reduce's";
  long long rows = w.rowsPos < pa.n ? pa.ints[w.rowsPos] : -1;
  if (rows < 2) return "it has fewer than 2 rows";
  if (count % (size_t)rows) return "the all-reduce's count is not a whole number of rows";
  long long ref = (long long)(count / (size_t)rows);
  if (const char* why = row_elems(pa, w, ref)) return why;
  if (pa.elems[outPos] != ref) return "the reduced argument's declared width is not the all-reduce's count per row";
  return nullptr;
}

template <class... P, class... A>
inline cudaError_t kernel_produce(int site, int on, const RowSpec& w, int outPos, size_t count, ncclDataType_t dt,
                                  void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                  A&&... a) {
  ksplit::Launch<P...> L(kernel, grid, block, smem, stream, std::forward<A>(a)...);
  ProduceRec* r = on ? produce_rec(site) : nullptr;
  if (r) r->fresh = false, r->inputs[0] = r->inputs[1] = nullptr;
  if (produce_at_one_rank(r, site, "kernel")) return L.run(nullptr);
  const char* why = r ? kernel_produce_plan(L.params(), w, outPos, count, dt) : nullptr;
  if (r && !why && produce_events(r) != ncclSuccess) why = "its events could not be made";
  if (!r || why) {
    if (r && !r->warned) {
      fprintf(stderr, "cuco_tx: producer split(%d): the kernel runs whole: %s\n", site, why);
      r->warned = true;
    }
    return L.run(nullptr);
  }
  long long rows = L.ints[w.rowsPos];
  size_t bytes = count * dtype_size(dt);
  int pieces = (int)std::min<long long>(produce_pieces(bytes), rows);
  if (pieces < 2) {  // too small to gain from ranges
    CUCO_TX_TRACE("producer split(%d): %zu bytes, the kernel runs whole\n", site, bytes);
    return L.run(nullptr);
  }
  ksplit::Part q = part_of(L.params(), w, grid.x, rows);
  CUCO_TX_TRACE("producer split(%d): kernel in %d ranges of %lld rows\n", site, pieces, rows / pieces);
  // Even ranges on the launch's stream, odd ones on the fork stream (after
  // everything the stream had): a range's blocks fill the SMs the previous
  // range's last blocks leave idle, as one launch's would, instead of
  // waiting for its end. The stream then waits for the fork.
  cudaError_t rc = cudaEventRecord(r->forked, stream);
  if (rc == cudaSuccess) rc = cudaStreamWaitEvent(r->fork, r->forked, 0);
  for (int j = 0; j < pieces && rc == cudaSuccess; j++) {
    long long lo, hi;
    produce_range(r, rows, pieces, j, &lo, &hi);
    cudaStream_t on = j % 2 ? r->fork : stream;
    q.rowOff = lo;
    q.rows = hi - lo;
    rc = L.run(&q, on);
    if (rc == cudaSuccess) rc = cudaEventRecord(r->made[j], on);
    r->begin[j] = (size_t)(lo * L.elems[outPos]) * L.es[outPos];
    r->end[j] = (size_t)(hi * L.elems[outPos]) * L.es[outPos];
  }
  int lastOdd = pieces % 2 ? pieces - 2 : pieces - 1;
  if (lastOdd > 0 && rc == cudaSuccess) rc = cudaStreamWaitEvent(stream, r->made[lastOdd], 0);
  if (rc != cudaSuccess) return rc;
  r->out = reinterpret_cast<const char*>(L.addr[outPos]);
  r->pieces = pieces;
  r->gemmStream = stream;
  r->fresh = true;
  return cudaSuccess;
}

}  // namespace cuco_tx
