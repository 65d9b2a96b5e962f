#if defined(CUCO_TX_GEMM_SPLIT)
// cuco_tx glue, part 8 of 8: the cuBLAS part of the schedules, compiled
// only where a GEMM takes one (CUCO_TX_GEMM_SPLIT); the glue's end after it.
#include <cublas_v2.h>
#if defined(CUCO_TX_GEMM_LT)
#include <cublasLt.h>
#endif  // CUCO_TX_GEMM_LT
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

// A GEMM's operands as the split sees them (column-major cuBLAS terms), and
// the stream it runs on.
struct GemmView {
  cublasOperation_t ta, tb;
  int m, n;
  const char *A, *B;
  char* C;
  int lda, ldb, ldc;
  size_t esA, esB, esC;
  const char* whole = nullptr;  // why the call cannot split at all, or nullptr
  cudaStream_t stream = nullptr;
  bool streamKnown = true;  // false: the handle's stream could not be read
};

// The stream of a cuBLAS handle into g.stream; a handle whose stream cannot
// be read runs its GEMM whole.
inline GemmView on_handle_stream(GemmView g, cublasHandle_t h) {
  if (cublasGetStream(h, &g.stream) != CUBLAS_STATUS_SUCCESS) {
    g.whole = "its handle's stream could not be read";
    g.streamKnown = false;
  }
  return g;
}

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

// Whether the output C (column-major, ldc by n) overlaps what peers read of
// this rank (its send block, or all its all-to-all send buffer): split, the
// GEMM runs while they may still be reading it.
inline bool writes_send(const SplitRec& r, const GemmView& g) {
  if (!r.peersRead || !g.C || g.n <= 0 || g.m <= 0 || g.esC == 0) return false;
  size_t cbytes = ((size_t)g.ldc * (size_t)(g.n - 1) + (size_t)g.m) * g.esC;
  return g.C < r.peersRead + r.peersReadBytes && r.peersRead < g.C + cbytes;
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
  if (writes_send(r, g)) { s.why = "the GEMM writes into this rank's send buffer, which peers may still be reading"; return s; }
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
inline cublasStatus_t split_run(int site, int on, const GemmView& g, F gemm) {
  if (!g.streamKnown) return CUBLAS_STATUS_INTERNAL_ERROR;  // nothing to join the gather on
  cudaStream_t st = g.stream;
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
  CUCO_TX_TRACE("split(%d): GEMM per source rank, %ld of its output %s each\n", site, sh.span,
                sh.operand == 1 ? "columns" : "rows");
  size_t colBytes = sh.operand == 1 ? (size_t)g.ldb * g.esB : (size_t)g.lda * g.esA;
  for (int k = 0; k < r->nranks; k++) {
    int p = (r->rank + k) % r->nranks;
    int parts = k == 0 ? 1 : std::min<int>(split_chunks(), (int)sh.span);
    const char* block = k == 0 ? static_cast<const char*>(r->send) : r->recv + (size_t)p * r->bytes;
    for (int j = 0; j < parts; j++) {
      long lo = sh.span * j / parts, hi = sh.span * (j + 1) / parts;
      if (k > 0 &&  // wait for the piece holding this part's last column
          cudaStreamWaitEvent(st, part_event(*r, p, parts, (size_t)hi * colBytes - 1), 0) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
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
inline cublasStatus_t produce_run(int site, int on, const GemmView& g, F gemm) {
  ProduceRec* r = on ? produce_rec(site) : nullptr;
  if (r) r->fresh = false;
  if (produce_at_one_rank(r, site, "GEMM")) return gemm(g);
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
  cudaStream_t st = g.stream;
  if (produce_events(r) != ncclSuccess) {
    if (!r->warned) fprintf(stderr, "cuco_tx: producer split(%d): the GEMM runs whole (no events)\n", site);
    r->warned = true;
    return gemm(g);  // r->fresh stays false: the all-reduce runs whole too
  }
  int pieces = std::min(produce_pieces((size_t)g.n * g.ldc * g.esC), g.n);
  if (pieces < 2) {  // too small to gain from ranges; r->fresh stays false: the all-reduce runs whole
    CUCO_TX_TRACE("producer split(%d): the GEMM runs whole (its output is small)\n", site);
    return gemm(g);
  }
  CUCO_TX_TRACE("producer split(%d): GEMM in %d ranges of output columns\n", site, pieces);
  size_t colB = g.tb == CUBLAS_OP_N ? (size_t)g.ldb * g.esB : g.esB;
  for (int j = 0; j < pieces; j++) {
    long long lo, hi;
    produce_range(r, g.n, pieces, j, &lo, &hi);
    GemmView v = g;
    v.n = (int)(hi - lo);
    v.B = g.B + (size_t)lo * colB;
    v.C = g.C + (size_t)lo * g.ldc * g.esC;
    cublasStatus_t rc = gemm(v);
    if (rc != CUBLAS_STATUS_SUCCESS) return rc;
    if (cudaEventRecord(r->made[j], st) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    r->begin[j] = (size_t)lo * g.ldc * g.esC;
    r->end[j] = (size_t)hi * g.ldc * g.esC;
  }
  r->out = g.C;
  r->inputs[0] = g.A;
  r->inputs[1] = g.B;
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
  cublasStatus_t operator()(int site, int on, const GemmView& g, F gemm) const {
    return split_run(site, on, g, gemm);
  }
};
struct ProduceRunner {
  template <class F>
  cublasStatus_t operator()(int site, int on, const GemmView& g, F gemm) const {
    return produce_run(site, on, g, gemm);
  }
};
// send_as_produced: the GEMM whole, then (knob on) the range of C it wrote
// recorded with an event on its stream; a batch of several is not recorded.
struct RecordRunner {
  template <class F>
  cublasStatus_t operator()(int site, int on, const GemmView& g, F gemm) const {
    cublasStatus_t rc = gemm(g);
    if (rc != CUBLAS_STATUS_SUCCESS || !on || g.whole || g.m <= 0 || g.n <= 0 || !g.esC || g.ldc < g.m) return rc;
    size_t bytes = ((size_t)(g.n - 1) * (size_t)g.ldc + (size_t)g.m) * g.esC;
    return made_record(site, g.C, bytes, g.stream) == ncclSuccess ? rc : CUBLAS_STATUS_EXECUTION_FAILED;
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
  return run(site, on, on_handle_stream(g, h), [&](const GemmView& v) {
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
  return run(site, on, on_handle_stream(g, h), [&](const GemmView& v) {
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
  return run(site, on, on_handle_stream(g, h), [&](const GemmView& v) {
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
  return run(site, on, on_handle_stream(g, h), [&](const GemmView& v) {
    return cublasHgemm(h, ta, tb, v.m, v.n, k, alpha, reinterpret_cast<const __half*>(v.A), lda,
                       reinterpret_cast<const __half*>(v.B), ldb, beta, reinterpret_cast<__half*>(v.C), ldc);
  });
}

// The names the transform writes: <call>_split, <call>_produce and
// <call>_record, each (site, knob, <the call's arguments>), over <call>_via.
#define CUCO_TX_GEMM_NAMES(call)                                                                          \
  template <class... A>                                                                                   \
  inline cublasStatus_t call##_split(A... a) { return call##_via(SplitRunner{}, a...); }                 \
  template <class... A>                                                                                   \
  inline cublasStatus_t call##_produce(A... a) { return call##_via(ProduceRunner{}, a...); }             \
  template <class... A>                                                                                   \
  inline cublasStatus_t call##_record(A... a) { return call##_via(RecordRunner{}, a...); }
CUCO_TX_GEMM_NAMES(gemm_ex)
CUCO_TX_GEMM_NAMES(gemm_strided_batched_ex)
CUCO_TX_GEMM_NAMES(sgemm)
CUCO_TX_GEMM_NAMES(hgemm)

#if defined(CUCO_TX_GEMM_LT)
// cublasLtMatmul (the transform sets CUCO_TX_GEMM_LT where one goes through
// a schedule): its shape comes from the layouts and the operation
// descriptor. It splits where it reads like a plain GEMM: column-major
// layouts of one matrix each, the default epilogue, and C the same matrix as
// D; otherwise it runs whole (g.whole says why). A piece is a new layout of
// each operand over the piece's rows or columns, with cuBLASLt's own
// heuristic choosing its algorithm (the call's algorithm was chosen for the
// whole shape).
struct LtLayout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t order = CUBLASLT_ORDER_COL, batch = 1;
};

inline bool lt_read(cublasLtMatrixLayout_t l, LtLayout* o) {
  size_t w = 0;
  int32_t type = 0;
  bool ok = cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, &w) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &o->rows, sizeof o->rows, &w) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &o->cols, sizeof o->cols, &w) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &o->ld, sizeof o->ld, &w) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &o->order, sizeof o->order, &w) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &o->batch, sizeof o->batch, &w) == CUBLAS_STATUS_SUCCESS;
  o->type = static_cast<cudaDataType>(type);
  return ok;
}

// Why the operation's descriptor keeps the call whole, or nullptr: alpha and
// beta given per output row (a piece would read the wrong rows), an amax of
// D (each piece would overwrite it), or scales per block of a matrix (not
// offset per piece).
inline const char* lt_per_call_only(cublasLtMatmulDesc_t desc) {
  size_t w = 0;
  int32_t mode = CUBLASLT_POINTER_MODE_HOST;
  void* amax = nullptr;
  if (cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode, &w) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof amax, &w) != CUBLAS_STATUS_SUCCESS)
    return "its descriptors could not be read";
  if (mode != CUBLASLT_POINTER_MODE_HOST && mode != CUBLASLT_POINTER_MODE_DEVICE)
    return "its alpha and beta are given per row";
  if (amax) return "it computes the amax of D";
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 8)
  const cublasLtMatmulDescAttributes_t scales[] = {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                   CUBLASLT_MATMUL_DESC_C_SCALE_MODE, CUBLASLT_MATMUL_DESC_D_SCALE_MODE};
  for (cublasLtMatmulDescAttributes_t a : scales) {
    int32_t sm = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if (cublasLtMatmulDescGetAttribute(desc, a, &sm, sizeof sm, &w) != CUBLAS_STATUS_SUCCESS)
      return "its descriptors could not be read";
    if (sm != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return "its scales are per block of a matrix";
  }
#endif
  return nullptr;
}

// Why an Lt call cannot split, or nullptr; fills g's shape.
inline const char* lt_view(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Ad, cublasLtMatrixLayout_t Bd,
                           cublasLtMatrixLayout_t Cd, cublasLtMatrixLayout_t Dd, const void* C, const void* D,
                           GemmView& g, LtLayout* a, LtLayout* b, LtLayout* d) {
  size_t w = 0;
  int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  LtLayout c;
  if (cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &w) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb, &w) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, &w) != CUBLAS_STATUS_SUCCESS ||
      !lt_read(Ad, a) || !lt_read(Bd, b) || !lt_read(Cd, &c) || !lt_read(Dd, d))
    return "its descriptors could not be read";
  if (a->order != CUBLASLT_ORDER_COL || b->order != CUBLASLT_ORDER_COL || d->order != CUBLASLT_ORDER_COL)
    return "a layout is not column-major";
  if (a->batch != 1 || b->batch != 1 || d->batch != 1) return "a batch of several GEMMs is not split";
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) return "its epilogue is not the default one";
  if (const char* why = lt_per_call_only(desc)) return why;
  if (C != D || c.ld != d->ld || c.type != d->type) return "its C and D are not the same matrix";
  if (d->rows > INT32_MAX || d->cols > INT32_MAX || a->ld > INT32_MAX || b->ld > INT32_MAX || d->ld > INT32_MAX)
    return "it is larger than a split handles";
  g.ta = static_cast<cublasOperation_t>(ta);
  g.tb = static_cast<cublasOperation_t>(tb);
  g.m = (int)d->rows;
  g.n = (int)d->cols;
  g.lda = (int)a->ld;
  g.ldb = (int)b->ld;
  g.ldc = (int)d->ld;
  g.esA = cuda_type_size(a->type);
  g.esB = cuda_type_size(b->type);
  g.esC = cuda_type_size(d->type);
  return nullptr;
}

// The largest power of two, at most 256, that divides p's address.
inline uint32_t lt_alignment(const void* p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al) al /= 2;
  return al;
}

// An algorithm for a piece: cuBLASLt's heuristic asked with the piece's own
// pointer alignments (its defaults assume 256 bytes, which a piece's offset
// need not keep) and the call's workspace; remembered per operation, shape
// and alignments (a descriptor freed and made again at the same address
// with other transposes or types is another key). False when cuBLASLt has
// none.
struct LtAlgoKey {
  cublasLtMatmulDesc_t desc;
  int ta, tb, m, n;
  size_t es[3];
  uint32_t align[3];
  size_t ws;
  bool operator==(const LtAlgoKey& o) const { return !memcmp(this, &o, sizeof o); }
};
inline bool lt_piece_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                          cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, const GemmView& v, size_t wsSize,
                          cublasLtMatmulAlgo_t* algo) {
  static std::vector<std::pair<LtAlgoKey, cublasLtMatmulAlgo_t>> known;
  LtAlgoKey key;
  memset(&key, 0, sizeof key);  // padding too: keys compare as bytes
  key.desc = desc;
  key.ta = v.ta;
  key.tb = v.tb;
  key.m = v.m;
  key.n = v.n;
  key.es[0] = v.esA;
  key.es[1] = v.esB;
  key.es[2] = v.esC;
  key.align[0] = lt_alignment(v.A);
  key.align[1] = lt_alignment(v.B);
  key.align[2] = lt_alignment(v.C);
  key.ws = wsSize;
  for (const auto& k : known)
    if (k.first == key) { *algo = k.second; return true; }
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return false;
  uint64_t ws = wsSize;
  uint32_t* al = key.align;
  cublasLtMatmulHeuristicResult_t found;
  int count = 0;
  bool ok = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], sizeof al[2]) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &found, &count) == CUBLAS_STATUS_SUCCESS &&
            count > 0;
  cublasLtMatmulPreferenceDestroy(pref);
  if (!ok) return false;
  *algo = found.algo;
  known.push_back({key, found.algo});
  return true;
}

// One piece v of the call whose whole view is g: layouts over v's rows (A's
// output rows) and columns (B's and D's), an algorithm for them
// (lt_piece_algo), then the matmul; the layouts are destroyed once it is
// issued.
inline cublasStatus_t lt_piece(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, const void* alpha, const void* beta,
                               const GemmView& v, const LtLayout& a, const LtLayout& b, const LtLayout& d,
                               void* ws, size_t wsSize) {
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  bool aN = v.ta == CUBLAS_OP_N, bN = v.tb == CUBLAS_OP_N;
  cublasStatus_t rc = cublasLtMatrixLayoutCreate(&la, a.type, aN ? v.m : a.rows, aN ? a.cols : v.m, a.ld);
  if (rc == CUBLAS_STATUS_SUCCESS) rc = cublasLtMatrixLayoutCreate(&lb, b.type, bN ? b.rows : v.n, bN ? v.n : b.cols, b.ld);
  if (rc == CUBLAS_STATUS_SUCCESS) rc = cublasLtMatrixLayoutCreate(&ld, d.type, v.m, v.n, d.ld);
  cublasLtMatmulAlgo_t algo;
  if (rc == CUBLAS_STATUS_SUCCESS && !lt_piece_algo(lt, desc, la, lb, ld, v, wsSize, &algo)) {
    fprintf(stderr, "cuco_tx: split: cuBLASLt has no algorithm for a %d x %d piece at its alignment\n", v.m, v.n);
    rc = CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = cublasLtMatmul(lt, desc, alpha, v.A, la, v.B, lb, beta, v.C, ld, v.C, ld, &algo, ws, wsSize, v.stream);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  return rc;
}

template <class R>
inline cublasStatus_t lt_matmul_via(R run, int site, int on, cublasLtHandle_t lt, cublasLtMatmulDesc_t desc,
                                    const void* alpha, const void* A, cublasLtMatrixLayout_t Ad, const void* B,
                                    cublasLtMatrixLayout_t Bd, const void* beta, const void* C,
                                    cublasLtMatrixLayout_t Cd, void* D, cublasLtMatrixLayout_t Dd,
                                    const cublasLtMatmulAlgo_t* algo, void* ws, size_t wsSize, cudaStream_t stream) {
  GemmView g{CUBLAS_OP_N, CUBLAS_OP_N, 0, 0, static_cast<const char*>(A), static_cast<const char*>(B),
             static_cast<char*>(D), 0, 0, 0, 0, 0, 0};
  g.stream = stream;
  LtLayout a, b, d;
  // the descriptors are read only where the schedule may split the call
  g.whole = on ? lt_view(desc, Ad, Bd, Cd, Dd, C, D, g, &a, &b, &d) : "its schedule is off";
  return run(site, on, g, [&](const GemmView& v) {
    if (g.whole || (v.A == g.A && v.B == g.B && v.C == g.C && v.m == g.m && v.n == g.n))
      return cublasLtMatmul(lt, desc, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wsSize, stream);
    return lt_piece(lt, desc, alpha, beta, v, a, b, d, ws, wsSize);
  });
}

CUCO_TX_GEMM_NAMES(lt_matmul)
#endif  // CUCO_TX_GEMM_LT
#undef CUCO_TX_GEMM_NAMES
}  // namespace cuco_tx
#endif  // CUCO_TX_GEMM_SPLIT
// cuco_tx: end of the glue
