// cuco_tx glue, part 5 of 7: work moved between ranks for the attention
// split (cuco_tx_attention.cuh), when the manifest declares the kernel's
// queries (queries=, first_query=, query_args=, query_width=, query_grid=,
// causal=).
//
// Under a causal mask the ranks of a context-parallel attention see
// different numbers of keys (contiguous shards: the last rank's queries see
// every key, the first rank's only its own), so one rank computes while
// another waits. At each split launch the ranks tell each other their
// launch (Info: first query, queries, keys, mask, shapes) through a small
// window of their own, and each works out the same deals (plan): the
// busiest rank lends the last of its queries over one source's keys to the
// least busy one, as many as even out their visible (query, key) pairs.
// The lender pushes those queries to the helper by the copy engine; the
// helper attends them over that source's keys (which it holds after the
// all-gather) and writes their output and log-sum-exps straight into the
// lender's temporaries (a window too), where the lender's merge folds them
// in with its own parts. Rendezvous on the lend stream (stream memory
// operations, no SM) order the pushes and the writes. CUCO_ATTN_LEND 0
// keeps every rank's work on that rank.
namespace cuco_tx {

// attention's query terms (queriesPos -1: not declared, nothing moves).
struct LendSpec {
  int queriesPos = -1, firstQueryPos = -1;
  int causalPos = -1;  // its parameter; -1: no mask; -2: always causal
  int grid = -1;       // the grid dimension over the queries (0 x, 1 y, 2 z)
  unsigned long mask = 0;  // the parameters indexed by query
};

#ifndef CUCO_ATTN_LEND
#define CUCO_ATTN_LEND 1
#endif

namespace lend {
// One rank's split launch as the ranks tell each other (one slot each).
struct Info {
  long long q0, nq;       // global index of the first query, queries
  long long k0, per;      // first key's global index, keys per source rank
  long long rpq, outRows;  // output rows per query, in all
  long long outRowBytes, qRowBytes;  // an output row; a query in each query argument
  int causal, able, chunks, nqargs;
  long long gridQ;        // blocks of the launch's query dimension
};
constexpr size_t kInfoBytes = 128;
static_assert(sizeof(Info) <= kInfoBytes, "an Info must fit its slot");

// The helper attends the lender's last m queries over source's keys.
struct Deal {
  int lender = -1, helper = -1, source = -1;
  long long m = 0;
};

// Pairs (query i, key j) with j <= i among the keys [ka, ka + nk) and the
// queries before x.
inline double pairs_before(long long x, long long ka, long long nk) {
  double t = (double)(x - ka);
  if (t <= 0) return 0.0;
  if (t <= (double)nk) return t * (t + 1) / 2;
  return (double)nk * ((double)nk + 1) / 2 + (t - (double)nk) * (double)nk;
}
// Visible pairs of queries [qa, qa + nq) over source s's keys.
inline double visible(const Info& r, long long qa, long long nq, int s) {
  long long ka = r.k0 + s * r.per;
  if (!r.causal) return (double)nq * (double)r.per;
  return pairs_before(qa + nq, ka, r.per) - pairs_before(qa, ka, r.per);
}
inline double cost(const Info& r, int n) {
  double c = 0;
  for (int s = 0; s < n; s++) c += visible(r, r.q0, r.nq, s);
  return c;
}

// The lender's queries to lend over source s so that about x pairs move:
// the fewest whole query tiles (of the launch's query dimension) whose
// visible pairs reach x, at most every query.
inline long long queries_for(const Info& b, int s, double x) {
  long long gran = std::max(1LL, (b.nq + b.gridQ - 1) / b.gridQ);
  long long lo = 0, hi = (b.nq + gran - 1) / gran;  // in tiles
  while (lo < hi) {
    long long mid = (lo + hi) / 2, m = std::min(b.nq, mid * gran);
    if (visible(b, b.q0 + b.nq - m, m, s) >= x) hi = mid;
    else lo = mid + 1;
  }
  return std::min(b.nq, lo * gran);
}

// The deals of n ranks, the same on every rank (it reads only `in`): the
// ranks ordered by cost, the i-th busiest lends to the i-th least busy
// half the difference when it is over 1/16 of its cost, over the source
// whose keys it sees most (the helper's own first). 0 deals when a rank
// cannot take part.
inline int plan(const Info* in, int n, Deal* deals) {
  int order[kMaxRanks];
  double c[kMaxRanks];
  for (int r = 0; r < n; r++) {
    if (!in[r].able) return 0;
    order[r] = r;
    c[r] = cost(in[r], n);
  }
  std::stable_sort(order, order + n, [&](int a, int b) { return c[a] < c[b]; });
  int nd = 0;
  for (int i = 0; i < n / 2; i++) {
    int h = order[i], b = order[n - 1 - i];
    double x = (c[b] - c[h]) / 2;
    if (c[b] - c[h] <= c[b] / 16) continue;
    int s = h;
    for (int p = 0; p < n; p++)
      if (p != b && visible(in[b], in[b].q0, in[b].nq, p) > visible(in[b], in[b].q0, in[b].nq, s)) s = p;
    if (s == b || visible(in[b], in[b].q0, in[b].nq, s) <= 0) continue;
    long long m = queries_for(in[b], s, x);
    if (m <= 0) continue;
    deals[nd++] = Deal{b, h, s, m};
  }
  return nd;
}

inline const Deal* as_lender(const Deal* d, int nd, int r) {
  for (int i = 0; i < nd; i++)
    if (d[i].lender == r) return &d[i];
  return nullptr;
}
inline const Deal* as_helper(const Deal* d, int nd, int r) {
  for (int i = 0; i < nd; i++)
    if (d[i].helper == r) return &d[i];
  return nullptr;
}
// Parts rank r attends source p's keys in (a lent source in one).
inline int chunks_of(const Info* in, const Deal* d, int nd, int r, int p) {
  const Deal* l = as_lender(d, nd, r);
  return l && l->source == p ? 1 : in[r].chunks;
}
// Rank r's merge slot of source p's first part (its own keys: slot 0).
inline int slot_of(const Info* in, const Deal* d, int nd, int n, int r, int p) {
  int k = 1;
  for (int j = 1; j < n; j++) {
    int q = (r + j) % n;
    if (q == p) return k;
    k += chunks_of(in, d, nd, r, q);
  }
  return 0;
}
inline int parts_of(const Info* in, const Deal* d, int nd, int n, int r) {
  int k = 1;
  for (int j = 1; j < n; j++) k += chunks_of(in, d, nd, r, (r + j) % n);
  return k;
}

// Where the lend window holds the pushed queries (one region per query
// argument), the merge's temporaries and their log-sum-exps; the same on
// every rank.
struct Layout {
  size_t qOff = 0, qArgBytes = 0, outOff = 0, lseOff = 0, bytes = 0;
};
inline Layout layout(const Info* in, int n, const Deal* d, int nd) {
  Layout y;
  size_t q = 0, tmp = 0, lse = 0;
  for (int i = 0; i < nd; i++) {
    const Info& b = in[d[i].lender];
    q = std::max(q, (size_t)b.nqargs * (size_t)d[i].m * (size_t)b.qRowBytes);
  }
  for (int r = 0; r < n; r++) {
    size_t parts = (size_t)parts_of(in, d, nd, n, r);
    tmp = std::max(tmp, (parts - 1) * (size_t)in[r].outRows * (size_t)in[r].outRowBytes);
    lse = std::max(lse, parts * (size_t)in[r].outRows * sizeof(float));
  }
  size_t maxArgs = 1;
  for (int r = 0; r < n; r++) maxArgs = std::max(maxArgs, (size_t)in[r].nqargs);
  y.qArgBytes = cuco::round_up(q / maxArgs + 1, 256);
  y.outOff = y.qOff + maxArgs * y.qArgBytes;
  y.lseOff = y.outOff + cuco::round_up(tmp + 1, 256);
  y.bytes = y.lseOff + cuco::round_up(lse + 1, 256);
  return y;
}

// A site's windows and streams: `info` holds two sets of slots (the
// parity of the call) and a staging slot; `data` the layout above.
struct Site {
  Buf* info = nullptr;
  Buf* data = nullptr;
  cudaStream_t xs = nullptr, ls = nullptr;  // the exchange's, the deals'
  cudaEvent_t done = nullptr;
  Info* host = nullptr;  // pinned: [0] this rank's, [1..] everyone's
  unsigned long long calls = 0;
};
inline Site* site_of(int site) {
  static std::vector<Site> v;
  return site_rec(v, site);
}

// A window of `bytes` on comm (collective: every rank in the same order).
inline Buf* window_new(size_t bytes, ncclComm_t comm) {
  void* p = nullptr;
  Buf* b = nullptr;
  if (symm_malloc(&p, bytes) != cudaSuccess || window_of(p, bytes, comm, &b) != ncclSuccess) return nullptr;
  return cuco::lsa_peer_bases(b->symm) == 0 ? b : nullptr;
}

inline const char* setup(Site* s, ncclComm_t comm) {
  if (s->info) return nullptr;
  if (priority_stream_create(&s->xs, true) != cudaSuccess || priority_stream_create(&s->ls, false) != cudaSuccess ||
      cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming) != cudaSuccess ||
      cudaMallocHost(&s->host, (kMaxRanks + 1) * sizeof(Info)) != cudaSuccess)
    return "cannot create its streams";
  if (!(s->info = window_new((2 * kMaxRanks + 1) * kInfoBytes, comm))) return "cannot register its window";
  return nullptr;
}

// Every rank's Info into all[0..n) (collective; blocks the host until
// every rank has told its own).
inline const char* exchange(Site* s, const Info& own, int rank, int n, Info* all) {
  cuco::Symm& y = s->info->symm;
  size_t slots = (size_t)(s->calls++ & 1) * kMaxRanks * kInfoBytes;
  char* stage = static_cast<char*>(y.base) + 2 * kMaxRanks * kInfoBytes;
  s->host[0] = own;
  if (cudaMemcpyAsync(stage, s->host, sizeof(Info), cudaMemcpyHostToDevice, s->xs) != cudaSuccess)
    return "cannot stage its launch";
  for (int p = 0; p < n; p++)
    if (cuco::ce_copy(static_cast<char*>(y.lsaBase[p]) + slots + (size_t)rank * kInfoBytes, stage, sizeof(Info),
                      s->xs) != 0)
      return "cannot tell a peer its launch";
  if (cuco::ce_rendezvous(y, s->xs) != 0) return "its rendezvous failed";
  for (int p = 0; p < n; p++)
    if (cudaMemcpyAsync(s->host + 1 + p, static_cast<char*>(y.base) + slots + (size_t)p * kInfoBytes, sizeof(Info),
                        cudaMemcpyDeviceToHost, s->xs) != cudaSuccess)
      return "cannot read the peers' launches";
  if (cudaStreamSynchronize(s->xs) != cudaSuccess) return "cannot read the peers' launches";
  for (int p = 0; p < n; p++) all[p] = s->host[1 + p];
  return nullptr;
}

// The data window, at least `bytes` (collective: the same on every rank,
// since every rank sizes it from the same Infos). A larger one replaces
// it; the old one stays registered (its rendezvous count is its own).
inline const char* data_window(Site* s, size_t bytes, ncclComm_t comm) {
  if (s->data && s->data->bytes >= bytes) return nullptr;
  if (s->data && cudaStreamSynchronize(s->ls) != cudaSuccess) return "cannot finish its last deals";
  return (s->data = window_new(bytes, comm)) ? nullptr : "cannot register its window";
}
}  // namespace lend
}  // namespace cuco_tx
