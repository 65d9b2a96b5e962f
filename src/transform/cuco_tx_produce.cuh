// cuco_tx glue, part 4 of 7: schedule producer_split, the GEMM's or
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
  size_t end[kMaxProducePieces] = {};         // byte end of each range made
  cudaEvent_t made[kMaxProducePieces] = {};   // range j written
  int pieces = 0;
  cudaStream_t gemmStream = nullptr;
  cudaStream_t side = nullptr;
  cudaStream_t fork = nullptr;                // a kernel's odd ranges (kernel_produce)
  cudaEvent_t entry = nullptr, done = nullptr, forked = nullptr;
  int ranks = 0;        // the communicator's size at the last all-reduce (0: none yet)
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
            "its producer's output\n",
            ps.site);
    r->warned = true;
  }
  if (r) r->fresh = false;
  if (r && ncclCommCount(comm, &r->ranks) != ncclSuccess) r->ranks = 0;
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
                     datatype, op, comm, side, CUCO_PSPLIT_CE != 0);
    lo = hi;
  }
  if (cudaEventRecord(r->done, side) != cudaSuccess || cudaStreamWaitEvent(stream, r->done, 0) != cudaSuccess) {
    fprintf(stderr, "cuco_tx: producer split(%d): event record/wait failed; synchronising the device\n", ps.site);
    cudaDeviceSynchronize();
    if (res == ncclSuccess) res = ncclSystemError;
  }
  return res;
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
  if (r) r->fresh = false;
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
    long long lo = rows * j / pieces, hi = rows * (j + 1) / pieces;
    cudaStream_t on = j % 2 ? r->fork : stream;
    q.rowOff = lo;
    q.rows = hi - lo;
    rc = L.run(&q, on);
    if (rc == cudaSuccess) rc = cudaEventRecord(r->made[j], on);
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
