// lend_plan_test.cc: the plan of queries lent between ranks
// (device/lend_plan.cuh) on synthetic launches, host only. Built and run by
// test_lend_plan.sh; prints one "ok"/"FAIL" line a check, exits 1 on any
// failure.
#include "lend_plan.cuh"

#include <cmath>
#include <cstdio>
#include <utility>

using namespace cuco::lend;

static int failed = 0;
static void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failed += !ok;
}

// n ranks of a causal attention with contiguous shards of `per` queries and
// keys each, the query grid in tiles of `tile` queries.
static void contiguous(Info* in, int n, long long per, long long tile, int causal) {
  for (int r = 0; r < n; r++) {
    Info& x = in[r];
    x = Info{};
    x.q0 = r * per;
    x.nq = per;
    x.k0 = 0;
    x.per = per;
    x.rpq = 32;
    x.outRows = per * 32;
    x.outRowBytes = 256;
    x.qRowBytes = 8192;
    x.causal = causal;
    x.able = 1;
    x.chunks = 1;
    x.nqargs = 1;
    x.gridQ = (per + tile - 1) / tile;
  }
}

// Each rank's visible pairs once the deals are carried out.
static void after(const Info* in, int n, const Deal* d, int nd, double* c) {
  for (int r = 0; r < n; r++) c[r] = cost(in[r], n);
  for (int i = 0; i < nd; i++) {
    const Info& b = in[d[i].lender];
    double moved = visible(b, b.q0 + b.nq - d[i].m, d[i].m, d[i].source);
    c[d[i].lender] -= moved;
    c[d[i].helper] += moved;
  }
}

static double spread(const double* c, int n) {
  double lo = c[0], hi = c[0];
  for (int r = 1; r < n; r++) lo = std::fmin(lo, c[r]), hi = std::fmax(hi, c[r]);
  return hi - lo;
}

// A small deterministic generator (the test must not depend on the libc's).
static unsigned long long rng = 88172645463325252ULL;
static long long draw(long long n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (long long)(rng % (unsigned long long)n);
}

// Random launches (ranks, queries, tiles, shard order, mask, chunks): every
// rank lends or helps at most once, never over its own keys, at least one
// and at most all of its queries; slots stay inside the parts; the
// helper's writes (the lent rows of the lender's slot) and the pushed
// queries stay inside the window's regions.
static bool random_launches() {
  Info in[kMaxLendRanks];
  Deal d[kMaxLendRanks];
  for (int t = 0; t < 20000; t++) {
    int n = 2 + (int)draw(7);
    long long per = 1 + draw(5000), tile = 1 + draw(128);
    contiguous(in, n, per, tile, (int)(draw(4) != 0));
    int order[kMaxLendRanks];
    for (int r = 0; r < n; r++) order[r] = r;
    for (int r = n - 1; r > 0; r--) std::swap(order[r], order[draw(r + 1)]);
    for (int r = 0; r < n; r++) {
      in[r].q0 = order[r] * per;  // a shuffled layout of the shards
      in[r].chunks = 1 + (int)draw(4);
    }
    int nd = plan(in, n, d);
    int seen[kMaxLendRanks] = {};
    for (int i = 0; i < nd; i++) {
      const Deal& x = d[i];
      if (x.lender == x.helper || x.source == x.lender || x.m < 1 || x.m > in[x.lender].nq) return false;
      if (seen[x.lender]++ || seen[x.helper]++) return false;
    }
    Layout y = layout(in, n, d, nd);
    for (int r = 0; r < n; r++) {
      int parts = parts_of(in, d, nd, n, r);
      for (int p = 0; p < n; p++)
        if (slot_of(in, d, nd, n, r, p) >= parts) return false;
    }
    for (int i = 0; i < nd; i++) {
      const Info& b = in[d[i].lender];
      size_t slot = (size_t)slot_of(in, d, nd, n, d[i].lender, d[i].source);
      size_t outEnd = y.outOff + slot * (size_t)(b.outRows * b.outRowBytes);  // end of the slot
      size_t lseEnd = y.lseOff + (slot + 1) * (size_t)b.outRows * sizeof(float);
      if (slot < 1 || outEnd > y.lseOff || lseEnd > y.bytes) return false;
      if ((size_t)d[i].m * (size_t)b.qRowBytes > y.qArgBytes) return false;
    }
  }
  return true;
}

int main() {
  Info in[kMaxLendRanks];
  Deal d[kMaxLendRanks];
  double c[kMaxLendRanks];

  contiguous(in, 2, 4096, 64, 1);
  int nd = plan(in, 2, d);
  check(nd == 1 && d[0].lender == 1 && d[0].helper == 0 && d[0].source == 0 && d[0].m == 2048,
        "2 ranks: rank 1 lends its last 2048 queries over rank 0's keys to rank 0");
  after(in, 2, d, nd, c);
  check(std::fabs(c[0] - c[1]) <= 64.0 * 4096, "2 ranks: the two ranks' pairs even within a tile");

  contiguous(in, 2, 96, 1, 1);
  nd = plan(in, 2, d);
  check(nd == 1 && d[0].m == 48, "2 ranks, 96 queries, one block a query: 48 lent");
  contiguous(in, 2, 75, 1, 1);
  nd = plan(in, 2, d);
  check(nd == 1 && d[0].m == 38, "2 ranks, 75 queries: 38 lent (the fewest whose pairs reach half)");

  contiguous(in, 4, 2048, 64, 1);
  nd = plan(in, 4, d);
  bool pairs = nd == 2 && d[0].lender == 3 && d[0].helper == 0 && d[1].lender == 2 && d[1].helper == 1;
  check(pairs, "4 ranks: the busiest lends to the least busy, the second to the second");
  check(pairs && d[0].m == 2048 && d[0].source == 0, "4 ranks: rank 3 lends a whole source (capped at its queries)");
  check(pairs && d[1].m == 1024 && d[1].source == 1, "4 ranks: rank 2 lends half of rank 1's keys' part to rank 1");
  double before[kMaxLendRanks];
  for (int r = 0; r < 4; r++) before[r] = cost(in[r], 4);
  after(in, 4, d, nd, c);
  check(spread(c, 4) < spread(before, 4) && c[3] < before[3], "4 ranks: the busiest rank's pairs drop, the spread narrows");

  contiguous(in, 2, 4096, 64, 0);
  check(plan(in, 2, d) == 0, "no mask: every rank sees every key, nothing lent");
  contiguous(in, 2, 4096, 64, 1);
  in[0].able = 0;
  check(plan(in, 2, d) == 0, "a rank that cannot take part: nothing lent anywhere");
  contiguous(in, 2, 4096, 64, 1);
  in[0].q0 = 4096 - 32;  // rank 0's queries end just before rank 1's: nearly even
  check(plan(in, 2, d) == 0, "costs within 1/16: nothing lent");

  // slots and parts with 2 parts a peer: the lent source in one
  contiguous(in, 4, 2048, 64, 1);
  for (int r = 0; r < 4; r++) in[r].chunks = 2;
  nd = plan(in, 4, d);
  const Deal* l3 = as_lender(d, nd, 3);
  check(l3 && chunks_of(in, d, nd, 3, l3->source) == 1 && chunks_of(in, d, nd, 3, (l3->source + 1) % 4) == 2,
        "the lender attends the lent source in one part, the others in their chunks");
  bool slots = true;
  for (int r = 0; r < 4; r++) {
    int k = 1;
    for (int j = 1; j < 4; j++) {
      int p = (r + j) % 4;
      slots = slots && slot_of(in, d, nd, 4, r, p) == k;
      k += chunks_of(in, d, nd, r, p);
    }
    slots = slots && parts_of(in, d, nd, 4, r) == k && slot_of(in, d, nd, 4, r, r) == 0;
  }
  check(slots, "slots follow the part order (own 0, then each peer from the next rank on), parts count them all");
  Layout y = layout(in, 4, d, nd);
  size_t maxParts = 0;
  for (int r = 0; r < 4; r++) maxParts = std::max(maxParts, (size_t)parts_of(in, d, nd, 4, r));
  check(y.qArgBytes >= (size_t)2048 * 8192 && y.outOff >= y.qOff + y.qArgBytes &&
            y.lseOff >= y.outOff + (maxParts - 1) * 2048 * 32 * 256 &&
            y.bytes >= y.lseOff + maxParts * 2048 * 32 * sizeof(float),
        "the window holds the lent queries, every rank's temporaries and log-sum-exps, in that order");
  check(random_launches(), "2 to 8 ranks, 20000 random launches: deals well formed, writes inside the window");
  return failed ? 1 : 0;
}
