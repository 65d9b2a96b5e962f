// Queries lent between the ranks of a context-parallel attention: the
// plan, pure host C++ (no CUDA) so that it is tested on its own
// (tests/cli/test_lend_plan.sh). The transform's glue
// (src/transform/cuco_tx_lend.cuh) exchanges each rank's Info, calls plan()
// on every rank with the same Infos, and lays its window out by layout().
#pragma once
#include <algorithm>
#include <cstddef>

namespace cuco {
namespace lend {
constexpr int kMaxLendRanks = 64;
inline size_t aligned(size_t x, size_t a) { return (x + a - 1) / a * a; }

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
  int order[kMaxLendRanks];
  double c[kMaxLendRanks];
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
    double most = visible(in[b], in[b].q0, in[b].nq, h);
    for (int p = 0; p < n; p++) {
      double v = p == b ? 0.0 : visible(in[b], in[b].q0, in[b].nq, p);
      if (v > most) s = p, most = v;
    }
    if (most <= 0) continue;
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
  size_t qArg = 0, tmp = 0, lse = 0, maxArgs = 1;
  for (int i = 0; i < nd; i++) {
    const Info& b = in[d[i].lender];
    qArg = std::max(qArg, (size_t)d[i].m * (size_t)b.qRowBytes);
  }
  for (int r = 0; r < n; r++) {
    size_t parts = (size_t)parts_of(in, d, nd, n, r);
    tmp = std::max(tmp, (parts - 1) * (size_t)in[r].outRows * (size_t)in[r].outRowBytes);
    lse = std::max(lse, parts * (size_t)in[r].outRows * sizeof(float));
    maxArgs = std::max(maxArgs, (size_t)in[r].nqargs);
  }
  y.qArgBytes = aligned(qArg + 1, 256);
  y.outOff = y.qOff + maxArgs * y.qArgBytes;
  y.lseOff = y.outOff + aligned(tmp + 1, 256);
  y.bytes = y.lseOff + aligned(lse + 1, 256);
  return y;
}

}  // namespace lend
}  // namespace cuco
