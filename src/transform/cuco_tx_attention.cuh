// cuco_tx glue, part 7 of 8: consumer_split_by_source for a kernel the
// manifest declares attention (keys=, args=, first_key=, out=, lse=,
// out_rows=, out_width=).
//
// attention_split(site, on, spec, outRows, outWidth, kernel, grid, block,
// smem, stream, args...) launches the kernel once per source rank's keys:
// its own keys first (as soon as their local copy has landed), then each
// peer's in CUCO_ATTN_CHUNKS parts (on a stream of their own, so that their
// blocks fill the SMs the own part's last blocks leave idle), each after
// the pieces of every key
// argument's all-gather it reads have arrived. A part has its key pointers
// moved to its first key, its key count set to its keys and first_key= to
// their global index; part 0 writes the launch's own output, the others
// temporaries, each its log-sum-exp; lse_merge then folds the parts into the
// output (weights exp(lse_i - max)) and writes the merged log-sum-exp where
// the launch asked for one. Every key argument must be the start of a
// buffer gathered by a split all-gather (split_site) since its last use;
// anything else (knob 0, no fresh gather, a parameter other than a key
// argument pointing into a gathered buffer, key count or widths that do
// not fit, an output type other than float, double, __half or
// __nv_bfloat16, temporaries that cannot be allocated) launches the kernel
// whole after every pending early-started call, saying why once on stderr.
namespace cuco_tx {

// CUCO_ATTN_CHUNKS: the parts each peer's keys are attended in (each part
// one more output to write and to merge).
#ifndef CUCO_ATTN_CHUNKS
#define CUCO_ATTN_CHUNKS 1
#endif
inline int attn_chunks() { return clamp_count(CUCO_ATTN_CHUNKS, kMaxSplitChunks); }

struct AttnSpec {
  RowSpec rows;  // keys= (its rowsPos), args= (mask and widths); gridRows unused
  int firstPos, outPos, lsePos;
  LendSpec lend;  // the queries (cuco_tx_lend.cuh)
};

namespace attn {
template <class T> struct Mergeable : std::false_type {};
template <> struct Mergeable<float> : std::true_type {};
template <> struct Mergeable<double> : std::true_type {};
template <> struct Mergeable<__half> : std::true_type {};
template <> struct Mergeable<__nv_bfloat16> : std::true_type {};
template <class P>
using OutOf = typename std::remove_cv<typename std::remove_pointer<P>::type>::type;

// Part 0 is out itself (merged in place), part i > 0 lies at tmp + (i - 1)
// rows * width; part i's log-sum-exps at lse + i * rows. One thread a
// vector of V elements (V * sizeof(T) = 16 bytes when the rows allow, else
// 1), so that every lane loads and stores whatever the row width; each
// thread reads its row's n log-sum-exps (cached: the row's other vectors
// read the same) and the row's first vector writes the merged one.
template <class T, int V>
__global__ void lse_merge(T* out, const T* tmp, const float* lse, float* lseOut, int n, size_t rows,
                          size_t width) {
  struct alignas(V * sizeof(T)) Vec { T v[V]; };
  size_t perRow = width / V, total = rows * perRow;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
    size_t r = e / perRow;
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, __ldg(lse + (size_t)i * rows + r));
    if (mx != -INFINITY)
      for (int i = 0; i < n; i++) sum += __expf(__ldg(lse + (size_t)i * rows + r) - mx);
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float acc[V];
    Vec o = reinterpret_cast<const Vec*>(out)[e];
    float w0 = sum > 0.0f ? __expf(__ldg(lse + r) - mx) * inv : 0.0f;
    for (int x = 0; x < V; x++) acc[x] = w0 * static_cast<float>(o.v[x]);
    for (int i = 1; i < n && sum > 0.0f; i++) {
      float wi = __expf(__ldg(lse + (size_t)i * rows + r) - mx) * inv;
      Vec t = reinterpret_cast<const Vec*>(tmp + (size_t)(i - 1) * rows * width)[e];
      for (int x = 0; x < V; x++) acc[x] += wi * static_cast<float>(t.v[x]);
    }
    for (int x = 0; x < V; x++) o.v[x] = static_cast<T>(acc[x]);
    reinterpret_cast<Vec*>(out)[e] = o;
    if (lseOut && e % perRow == 0) lseOut[r] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
  }
}

template <class T>
inline cudaError_t merge_typed(std::true_type, uintptr_t out, const void* tmp, const float* lse, float* lseOut, int n,
                               size_t rows, size_t width, cudaStream_t st) {
  constexpr int V = sizeof(T) <= 16 && 16 % sizeof(T) == 0 ? (int)(16 / sizeof(T)) : 1;
  bool wide = width % V == 0 && out % 16 == 0 && reinterpret_cast<uintptr_t>(tmp) % 16 == 0;
  size_t vectors = rows * (wide ? width / V : width);
  int blocks = (int)std::max<size_t>(1, std::min<size_t>((vectors + 255) / 256, 65535));
  if (wide)
    lse_merge<T, V><<<blocks, 256, 0, st>>>(reinterpret_cast<T*>(out), static_cast<const T*>(tmp), lse, lseOut, n,
                                             rows, width);
  else
    lse_merge<T, 1><<<blocks, 256, 0, st>>>(reinterpret_cast<T*>(out), static_cast<const T*>(tmp), lse, lseOut, n,
                                             rows, width);
  return cudaGetLastError();
}
template <class T>
inline cudaError_t merge_typed(std::false_type, uintptr_t, const void*, const float*, float*, int, size_t, size_t,
                               cudaStream_t) {
  return cudaErrorInvalidValue;
}

// The merge for the output parameter at pos (its type chosen among the
// launch's parameter types); whether that type can be merged.
template <class Tup, size_t... I>
inline cudaError_t merge_at(int pos, uintptr_t out, const void* tmp, const float* lse, float* lseOut, int n,
                            size_t rows, size_t width, cudaStream_t st, std::index_sequence<I...>) {
  cudaError_t rc = cudaErrorInvalidValue;
  int each[] = {0, ((int)I == pos ? (rc = merge_typed<OutOf<typename std::tuple_element<I, Tup>::type>>(
                                         Mergeable<OutOf<typename std::tuple_element<I, Tup>::type>>{}, out, tmp,
                                         lse, lseOut, n, rows, width, st),
                                     0)
                                  : 0)...};
  (void)each;
  return rc;
}
template <class Tup, size_t... I>
inline bool mergeable_at(int pos, std::index_sequence<I...>) {
  bool ok = false;
  int each[] = {0, ((int)I == pos && std::is_pointer<typename std::tuple_element<I, Tup>::type>::value &&
                            Mergeable<OutOf<typename std::tuple_element<I, Tup>::type>>::value
                        ? (ok = true, 0)
                        : 0)...};
  (void)each;
  return ok;
}

// The parts' outputs (all but the first) and log-sum-exps of one site,
// kept between calls and grown when a call needs more.
struct Temp {
  void* out = nullptr;
  float* lse = nullptr;
  float* lse0 = nullptr;  // the own part's, when it runs before the deals are known
  size_t outBytes = 0, lseBytes = 0, lse0Bytes = 0;
  cudaStream_t peers = nullptr;  // the peers' parts (the device's least priority)
  cudaEvent_t start = nullptr, done = nullptr;
};
inline cudaError_t peers_stream(Temp* t) {
  if (t->peers) return cudaSuccess;
  cudaError_t rc = priority_stream_create(&t->peers, false);
  if (rc == cudaSuccess) rc = cudaEventCreateWithFlags(&t->start, cudaEventDisableTiming);
  if (rc == cudaSuccess) rc = cudaEventCreateWithFlags(&t->done, cudaEventDisableTiming);
  return rc;
}
inline Temp* temp_of(int site) {
  static std::vector<Temp> v;
  return site_rec(v, site);
}
inline cudaError_t grow(void** p, size_t* have, size_t need) {
  if (*have >= need) return cudaSuccess;
  if (*p) cudaFree(*p);
  *p = nullptr;
  *have = 0;
  cudaError_t rc = cudaMalloc(p, need);
  if (rc == cudaSuccess) *have = need;
  return rc;
}

// The fresh gathered buffer that starts at addr (nullptr: none).
inline SplitRec* gathered_at(uintptr_t addr) {
  for (SplitRec& r : split_recs())
    if (r.fresh && reinterpret_cast<uintptr_t>(r.recv) == addr) return &r;
  return nullptr;
}

// What the split reads: each key argument's gathered buffer, the ranks.
struct Plan {
  SplitRec* rec[64];
  int rank, nranks;
  long long perRank;  // keys per rank
};

// Why the launch cannot split (nullptr: it can); fills ap and each key
// argument's elements per key.
inline const char* plan_keys(const ksplit::Params& pa, const AttnSpec& w, Plan* ap) {
  const RowSpec& rs = w.rows;
  ap->nranks = 0;
  for (int i = 0; i < pa.n && i < 64; i++) {
    ap->rec[i] = nullptr;
    if (!((rs.mask >> i) & 1UL)) continue;
    if (!pa.es[i]) return "a key argument of its declaration is not a pointer";
    SplitRec* r = gathered_at(pa.addr[i]);
    if (!r) return "a key argument is not the start of a buffer a split all-gather just gathered";
    if (ap->nranks && (r->nranks != ap->nranks || r->rank != ap->rank))
      return "its key arguments were gathered over different communicators";
    ap->rec[i] = r;
    ap->rank = r->rank;
    ap->nranks = r->nranks;
  }
  if (!ap->nranks) return "no key argument";
  for (int i = 0; i < pa.n && i < 64; i++) {
    if (((rs.mask >> i) & 1UL) || !pa.es[i]) continue;
    for (int k = 0; k < pa.n && k < 64; k++)
      if (SplitRec* r = ap->rec[k]) {
        uintptr_t lo = reinterpret_cast<uintptr_t>(r->recv), hi = lo + r->bytes * (size_t)r->nranks;
        if (pa.addr[i] >= lo && pa.addr[i] < hi)
          return "a parameter that is not a key argument points into a gathered buffer";
      }
  }
  long long keys = rs.rowsPos < pa.n ? pa.ints[rs.rowsPos] : -1;
  if (keys <= 0 || keys % ap->nranks) return "its key count is not a positive multiple of the rank count";
  ap->perRank = keys / ap->nranks;
  for (int i = 0; i < pa.n && i < 64; i++) {
    SplitRec* r = ap->rec[i];
    if (!r) continue;
    if (r->bytes % (size_t)ap->perRank || (r->bytes / (size_t)ap->perRank) % pa.es[i])
      return "a rank's block is not a whole number of keys";
    long long ref = (long long)(r->bytes / (size_t)ap->perRank / pa.es[i]);
    int from = rs.widthFrom[i] - 1;
    if (from >= 0 && (from >= pa.n || pa.ints[from] != ref))
      return "a key argument's declared width is not its gathered keys' width";
    pa.elems[i] = ref;
  }
  return nullptr;
}

inline const char* plan_out(const ksplit::Params& pa, const AttnSpec& w, size_t outRows, size_t outWidth,
                            bool mergeable) {
  if (w.outPos < 0 || w.outPos >= pa.n || !pa.es[w.outPos] || pa.cst[w.outPos]) return "out= is not a pointer it writes";
  if (!mergeable) return "out= is not a float, double, __half or __nv_bfloat16 pointer";
  if (w.lsePos < 0 || w.lsePos >= pa.n || pa.es[w.lsePos] != sizeof(float) || pa.cst[w.lsePos])
    return "lse= is not a float pointer it writes";
  if (!outRows || !outWidth) return "out_rows= or out_width= is 0 at this launch";
  return nullptr;
}

// Every pending early-started call joined into `stream` (the whole
// launch's fallback: whatever it reads is then in place).
inline void join_pending(cudaStream_t stream) {
  for (EarlySite& e : early_sites())
    if (e.pending && e.side != stream &&
        (cudaEventRecord(e.done, e.side) != cudaSuccess || cudaStreamWaitEvent(stream, e.done, 0) != cudaSuccess)) {
      fprintf(stderr, "cuco_tx: attention split: event record/wait failed; synchronising the device\n");
      cudaDeviceSynchronize();
      return;
    }
}
}  // namespace attn

// Waits on `stream` for the keys [.., hi) of source rank p (its own: the
// local copy) of every key argument, consumed in `parts` parts.
inline cudaError_t attn_wait(const attn::Plan& ap, int n, int p, int parts, long long hi, cudaStream_t stream) {
  for (int i = 0; i < n && i < 64; i++) {
    const SplitRec* r = ap.rec[i];
    if (!r) continue;
    size_t keyBytes = r->bytes / (size_t)ap.perRank;
    cudaEvent_t ev = p == ap.rank ? r->arrived[p] : part_event(*r, p, parts, (size_t)hi * keyBytes - 1);
    cudaError_t rc = cudaStreamWaitEvent(stream, ev, 0);
    if (rc != cudaSuccess) return rc;
  }
  return cudaSuccess;
}

namespace attn {
// This rank's launch as lend::exchange tells it (able 0: it cannot split,
// or its queries are not declared usably, so nothing moves anywhere).
inline lend::Info lend_info(const ksplit::Params& pa, const AttnSpec& w, const Plan& ap, dim3 grid, size_t outRows,
                            size_t outWidth, size_t qWidth, int chunks, bool able) {
  lend::Info me{};
  const LendSpec& q = w.lend;
  long long nq = able && q.queriesPos < pa.n ? pa.ints[q.queriesPos] : 0;
  me.gridQ = q.grid == 0 ? grid.x : q.grid == 1 ? grid.y : grid.z;
  able = able && nq > 0 && q.firstQueryPos >= 0 && q.firstQueryPos < pa.n && pa.ints[q.firstQueryPos] >= 0 &&
         qWidth > 0 && outRows % (size_t)nq == 0 && me.gridQ > 0;
  for (int i = 0; able && i < pa.n && i < 64; i++)
    if ((q.mask >> i) & 1UL) {
      able = pa.es[i] > 0;
      me.nqargs++;
      me.qRowBytes = std::max(me.qRowBytes, (long long)(qWidth * pa.es[i]));
    }
  me.able = able && me.nqargs > 0;
  if (!me.able) return me;
  me.q0 = pa.ints[q.firstQueryPos];
  me.nq = nq;
  me.k0 = w.firstPos >= 0 ? pa.ints[w.firstPos] : 0;
  me.per = ap.perRank;
  me.rpq = (long long)outRows / nq;
  me.outRows = (long long)outRows;
  me.outRowBytes = (long long)(outWidth * pa.es[w.outPos]);
  me.causal = q.causalPos == -2 || (q.causalPos >= 0 && q.causalPos < pa.n && pa.ints[q.causalPos] > 0);
  me.chunks = chunks;
  return me;
}

// The blocks of the query dimension for n of b's queries.
inline unsigned query_blocks(const lend::Info& b, long long n) {
  return (unsigned)((b.gridQ * n + b.nq - 1) / b.nq);
}

// What the ranks agreed on at one launch: the deals and this rank's part in
// them, the lend window's layout.
struct Deals {
  lend::Info all[kMaxRanks];
  lend::Deal d[kMaxRanks];
  int n = 0;
  const lend::Deal *lent = nullptr, *helped = nullptr;
  lend::Layout layout;
};

// Where each query argument's lent rows lie in this rank's lend window
// (qAt, by position); the lender pushes its rows into the helper's by the
// copy engine, on `st`.
template <class... P>
inline cudaError_t push_queries(cuco::Symm& win, ksplit::Launch<P...>& L, const AttnSpec& w, const Deals& dl,
                                size_t qWidth, uintptr_t* qAt, cudaStream_t st) {
  cudaError_t rc = cudaSuccess;
  int a = 0;
  for (int i = 0; i < (int)L.n && i < 64; i++) {
    if (!((w.lend.mask >> i) & 1UL)) continue;
    size_t off = dl.layout.qOff + (size_t)a++ * dl.layout.qArgBytes;
    qAt[i] = reinterpret_cast<uintptr_t>(win.local<char>(off));
    const lend::Deal* l = dl.lent;
    if (!l || rc != cudaSuccess) continue;
    size_t row = qWidth * L.es[i];
    const char* from = reinterpret_cast<const char*>(L.addr[i]) + (size_t)(dl.all[l->lender].nq - l->m) * row;
    if (cuco::ce_copy(win.peer<char>(l->helper, off), from, (size_t)l->m * row, st) != 0)
      rc = cudaErrorUnknown;
  }
  return rc;
}

// The helper's part: the lender's lent queries (at qAt) over the source's
// keys, its output and log-sum-exps into the lender's merge temporaries at
// the lent rows of that source's slot.
inline ksplit::Part helper_part(ksplit::Part h, const AttnSpec& w, const Plan& ap, const Deals& dl,
                                const cuco::Symm& win, const uintptr_t* qAt) {
  const lend::Deal& g = *dl.helped;
  const lend::Info& b = dl.all[g.lender];
  int slot = lend::slot_of(dl.all, dl.d, dl.n, ap.nranks, g.lender, g.source);
  char* peer = win.peer<char>(g.lender, 0);
  size_t first = (size_t)(b.nq - g.m) * (size_t)b.rpq;
  h.own = qAt;
  h.rowOff = (long long)g.source * ap.perRank;
  h.rows = ap.perRank;
  h.queriesPos = w.lend.queriesPos;
  h.queries = g.m;
  h.firstQueryPos = w.lend.firstQueryPos;
  h.firstQuery = b.q0 + b.nq - g.m;
  h.gridDim = w.lend.grid;
  h.gridBlocks = query_blocks(b, g.m);
  h.outAt = reinterpret_cast<uintptr_t>(peer + dl.layout.outOff + (size_t)(slot - 1) * (size_t)(b.outRows * b.outRowBytes) +
                                        first * (size_t)b.outRowBytes);
  h.lseAt = reinterpret_cast<uintptr_t>(peer + dl.layout.lseOff + ((size_t)slot * (size_t)b.outRows + first) * sizeof(float));
  return h;
}

// The lend stream's share of the deals, after `start`: a rendezvous (every
// rank is done with its window from the last call, whatever its layout
// was), the lender's push, a rendezvous (the queries have landed), the
// helper's part, a rendezvous (its writes have landed); s->done after it.
// Every rendezvous is issued whatever failed before it (the peers count
// them), so a failure here is this rank's error, never a peer's hang.
template <class... P>
inline cudaError_t lend_run(lend::Site* s, ksplit::Launch<P...>& L, const AttnSpec& w, const Plan& ap,
                            const Deals& dl, size_t qWidth, const ksplit::Part& base, cudaEvent_t start) {
  cuco::Symm& win = s->data->symm;
  cudaError_t rc = cudaStreamWaitEvent(s->ls, start, 0);
  bool met = cuco::ce_rendezvous(win, s->ls) == 0;
  uintptr_t qAt[64] = {};
  cudaError_t pushed = push_queries(win, L, w, dl, qWidth, qAt, s->ls);
  if (rc == cudaSuccess) rc = met ? pushed : cudaErrorUnknown;
  met = cuco::ce_rendezvous(win, s->ls) == 0 && met;
  if (dl.helped && rc == cudaSuccess && met) {
    const lend::Deal& g = *dl.helped;
    CUCO_TX_TRACE("split: rank %d attends rank %d's last %lld queries over rank %d's keys\n", ap.rank, g.lender, g.m,
                  g.source);
    ksplit::Part h = helper_part(base, w, ap, dl, win, qAt);
    rc = attn_wait(ap, (int)L.n, g.source, 1, ap.perRank, s->ls);
    if (rc == cudaSuccess) rc = L.run(&h, s->ls);
  }
  met = cuco::ce_rendezvous(win, s->ls) == 0 && met;
  if (rc == cudaSuccess && !met) rc = cudaErrorUnknown;
  cudaError_t recorded = cudaEventRecord(s->done, s->ls);
  return rc != cudaSuccess ? rc : recorded;
}
}  // namespace attn

// The deals of this launch (dl->n 0: none), after telling the peers about
// it; every rank of a split gather's communicator comes here at the same
// launch. Why it failed, or nullptr.
inline const char* attn_deal(int site, const SplitRec& gather, const lend::Info& me, attn::Deals* dl) {
  lend::Site* s = lend::site_of(site);
  // a site whose windows belong to another live communicator lends nothing
  // on this one (every rank of it sees the same)
  if (s->comm && s->comm != gather.comm) return nullptr;
  const char* e = lend::setup(s, gather.comm);
  if (!e) e = lend::exchange(s, me, gather.rank, gather.nranks, dl->all);
  if (e) return e;
  dl->n = lend::plan(dl->all, gather.nranks, dl->d);
  if (!dl->n) return nullptr;
  dl->lent = lend::as_lender(dl->d, dl->n, gather.rank);
  dl->helped = lend::as_helper(dl->d, dl->n, gather.rank);
  dl->layout = lend::layout(dl->all, gather.nranks, dl->d, dl->n);
  return lend::data_window(s, dl->layout.bytes, gather.comm);
}

namespace attn {
// Every part's common changes: key arguments and count, first key, output
// and log-sum-exp. Where the kernel only reads its key arguments, *fromSend
// and own[] (by position) say that part 0 may read its keys from the
// all-gathers' send buffers (no wait for their local copies).
template <class... P>
inline ksplit::Part base_part(ksplit::Launch<P...>& L, const AttnSpec& w, const Plan& ap, dim3 grid, uintptr_t* own,
                              bool* fromSend) {
  *fromSend = true;
  for (int i = 0; i < (int)L.n && i < 64; i++)
    if (ap.rec[i]) {
      own[i] = reinterpret_cast<uintptr_t>(ap.rec[i]->send);
      *fromSend = *fromSend && L.cst[i];
    }
  ksplit::Part q = part_of(L.params(), w.rows, grid.x, ap.perRank * ap.nranks);
  q.gridRows = false;
  q.firstPos = w.firstPos;
  q.firstBase = w.firstPos >= 0 ? L.ints[w.firstPos] : 0;
  q.outPos = w.outPos;
  q.lsePos = w.lsePos;
  return q;
}

// The attention over this rank's own keys, into the launch's output and
// the log-sum-exp at lseAt, on the launch's stream; reading them at own[]
// (base_part) when it is not null, else once their local copies landed.
template <class... P>
inline cudaError_t own_part(ksplit::Launch<P...>& L, const AttnSpec& w, const Plan& ap, ksplit::Part q,
                            const uintptr_t* own, float* lseAt) {
  q.own = own;
  if (!own && attn_wait(ap, (int)L.n, ap.rank, 1, ap.perRank, L.stream) != cudaSuccess) return cudaErrorUnknown;
  q.rowOff = ap.rank * ap.perRank;
  q.rows = ap.perRank;
  q.outAt = L.addr[w.outPos];
  q.lseAt = reinterpret_cast<uintptr_t>(lseAt);
  return L.run(&q, L.stream);
}
}  // namespace attn

namespace attn {
// Each peer's keys in its parts, on `on` once they have landed, part k's
// output and log-sum-exp into slot k of the temporaries (tOut, tLse); the
// source this rank lends only for the queries it keeps.
template <class... P>
inline cudaError_t peer_parts(ksplit::Launch<P...>& L, const AttnSpec& w, const Plan& ap, const Deals& dl,
                              const ksplit::Part& base, int chunks, void* tOut, float* tLse, size_t outRows,
                              size_t outBytes, cudaStream_t on) {
  const long long per = ap.perRank;
  const lend::Deal* lent = dl.lent;
  int k = 1;
  for (int j = 1; j < ap.nranks; j++) {
    int p = (ap.rank + j) % ap.nranks;
    int n = dl.n ? lend::chunks_of(dl.all, dl.d, dl.n, ap.rank, p) : chunks;
    for (int part = 0; part < n; part++, k++) {
      long long lo = per * part / n, hi = per * (part + 1) / n;
      ksplit::Part r = base;
      r.rowOff = p * per + lo;
      r.rows = hi - lo;
      r.outAt = reinterpret_cast<uintptr_t>(tOut) + (size_t)(k - 1) * outBytes;
      r.lseAt = reinterpret_cast<uintptr_t>(tLse + (size_t)k * outRows);
      if (lent && lent->source == p) {  // the first queries only: the helper attends the rest
        const lend::Info& me = dl.all[ap.rank];
        r.queriesPos = w.lend.queriesPos;
        r.queries = me.nq - lent->m;
        r.gridDim = w.lend.grid;
        r.gridBlocks = query_blocks(me, r.queries);
        if (!r.queries) continue;
      }
      cudaError_t rc = attn_wait(ap, (int)L.n, p, n, hi, on);
      if (rc == cudaSuccess) rc = L.run(&r, on);
      if (rc != cudaSuccess) return rc;
    }
  }
  return cudaSuccess;
}
}  // namespace attn

template <class... P, class... A>
inline cudaError_t attention_split(int site, int on, const AttnSpec& w, size_t outRows, size_t outWidth,
                                   size_t qWidth, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                   cudaStream_t stream, A&&... a) {
  using Tup = std::tuple<P...>;
  ksplit::Launch<P...> L(kernel, grid, block, smem, stream, std::forward<A>(a)...);
  attn::Plan ap{};
  SplitRec* gather = on ? split_rec(site) : nullptr;
  bool fresh = gather && gather->fresh;
  const char* why = !on ? "knob 0" : attn::plan_keys(L.params(), w, &ap);
  if (!why)
    why = attn::plan_out(L.params(), w, outRows, outWidth,
                         attn::mergeable_at<Tup>(w.outPos, std::index_sequence_for<P...>{}));
  long long per = ap.perRank;
  int chunks = why ? 1 : (int)std::min<long long>(attn_chunks(), per);
  attn::Temp* t = attn::temp_of(site);
  if (!why && (!t || attn::peers_stream(t) != cudaSuccess)) why = "its stream could not be made";
  for (int i = 0; i < (int)L.n && i < 64; i++)
    if (ap.rec[i]) ap.rec[i]->fresh = false;
  if (gather) gather->fresh = false;
  uintptr_t sendAt[64] = {};
  bool fromSend = false;
  ksplit::Part q = why ? ksplit::Part{} : attn::base_part(L, w, ap, grid, sendAt, &fromSend);
  const uintptr_t* ownAt = fromSend ? sendAt : nullptr;
  // work moved between ranks: every rank of the gather takes part in the
  // exchange, whether or not its own launch can split (only where a mask is
  // declared: without one every rank's queries see every key); the own part
  // (never lent) runs while the ranks exchange their launches
  // (the rendezvous of stream memory operations only: the one-CTA barrier
  // they fall back to is shared by every stream of the communicator)
  bool lending = fresh && w.lend.queriesPos >= 0 && w.lend.causalPos != -1 && gather->nranks > 1 && CUCO_ATTN_LEND &&
                 cuco::ce_sync_zero_sm();
  bool ownEarly = lending && !why && ap.nranks > 1;
  cudaError_t early = cudaSuccess;
  if (ownEarly && (attn::grow(reinterpret_cast<void**>(&t->lse0), &t->lse0Bytes, outRows * sizeof(float)) != cudaSuccess ||
                   cudaEventRecord(t->start, stream) != cudaSuccess ||
                   attn::own_part(L, w, ap, q, ownAt, t->lse0) != cudaSuccess))
    early = cudaErrorUnknown;  // told to the peers (this rank cannot take part), then returned
  attn::Deals dl;
  if (lending) {
    lend::Info me = attn::lend_info(L.params(), w, ap, grid, outRows, outWidth, qWidth, chunks, !why && !early);
    const char* e = attn_deal(site, *gather, me, &dl);
    if (e) {
      fprintf(stderr, "cuco_tx: split(%d): moving attention between ranks: %s\n", site, e);
      return cudaErrorUnknown;
    }
  }
  if (early != cudaSuccess) return early;
  int parts = why ? 1 : dl.n ? lend::parts_of(dl.all, dl.d, dl.n, ap.nranks, ap.rank) : 1 + (ap.nranks - 1) * chunks;
  size_t outBytes = outRows * outWidth * (why ? 0 : L.es[w.outPos]);
  if (!why && parts > 1 && !dl.n &&
      (attn::grow(&t->out, &t->outBytes, (size_t)(parts - 1) * outBytes) != cudaSuccess ||
       attn::grow(reinterpret_cast<void**>(&t->lse), &t->lseBytes, (size_t)parts * outRows * sizeof(float)) !=
           cudaSuccess)) {
    if (ownEarly) return cudaErrorMemoryAllocation;  // its output is half made
    why = "its temporaries could not be made";
  }
  if (why || parts == 1) {
    if (why && fresh && !gather->warned) {
      fprintf(stderr, "cuco_tx: split(%d): the attention kernel runs whole after the gathers: %s\n", site, why);
      gather->warned = true;
    }
    if (!why && attn_wait(ap, (int)L.n, ap.rank, 1, per, stream) != cudaSuccess) return cudaErrorUnknown;
    if (why) attn::join_pending(stream);
    return L.run(nullptr);
  }
  char* win = dl.n ? static_cast<char*>(lend::site_of(site)->data->base) : nullptr;
  void* tOut = dl.n ? win + dl.layout.outOff : t->out;
  float* tLse = dl.n ? reinterpret_cast<float*>(win + dl.layout.lseOff) : t->lse;
  CUCO_TX_TRACE("split(%d): attention per source rank, %lld keys each, peers' in %d parts, %d merged\n", site, per,
                chunks, parts);
  cudaError_t rc = ownEarly ? cudaMemcpyAsync(tLse, t->lse0, outRows * sizeof(float), cudaMemcpyDeviceToDevice, stream)
                            : cudaEventRecord(t->start, stream);
  if (rc == cudaSuccess) rc = cudaStreamWaitEvent(t->peers, t->start, 0);
  if (dl.n) {  // whatever failed before: the peers count its rendezvous
    cudaError_t lent = attn::lend_run(lend::site_of(site), L, w, ap, dl, qWidth, q, t->start);
    if (rc == cudaSuccess) rc = lent;
  }
  if (rc == cudaSuccess && !ownEarly) rc = attn::own_part(L, w, ap, q, ownAt, tLse);
  if (rc == cudaSuccess) rc = attn::peer_parts(L, w, ap, dl, q, chunks, tOut, tLse, outRows, outBytes, t->peers);
  // the merge after every part (also after a failed one: nothing left unjoined)
  cudaError_t joined = cudaEventRecord(t->done, t->peers);
  if (joined == cudaSuccess) joined = cudaStreamWaitEvent(stream, t->done, 0);
  if (joined == cudaSuccess && dl.n) joined = cudaStreamWaitEvent(stream, lend::site_of(site)->done, 0);
  if (rc != cudaSuccess || joined != cudaSuccess) return rc != cudaSuccess ? rc : joined;
  return attn::merge_at<Tup>(w.outPos, L.addr[w.outPos], tOut, tLse, reinterpret_cast<float*>(L.addr[w.lsePos]),
                             parts, outRows, outWidth, stream, std::index_sequence_for<P...>{});
}

}  // namespace cuco_tx
