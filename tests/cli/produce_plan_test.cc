// produce_plan_test.cc: the producer split's ranges (device/produce_plan.cuh)
// on synthetic outputs, host only. Built and run by test_produce_plan.sh;
// prints one "ok"/"FAIL" line a check, exits 1 on any failure.
#include "produce_plan.cuh"

#include <cstdio>
#include <random>
#include <vector>

using namespace cuco::produce;

static int failed = 0;
static void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failed += !ok;
}

struct Cut {
  std::vector<size_t> begin, end;  // bytes
};

static Cut cut(int chunks, long long units, int pieces, size_t unitBytes) {
  Cut c;
  for (int j = 0; j < pieces; j++) {
    long long lo, hi;
    range(chunks, units, pieces, j, &lo, &hi);
    c.begin.push_back((size_t)lo * unitBytes);
    c.end.push_back((size_t)hi * unitBytes);
  }
  return c;
}

// The ranges cover [0, units) once each and none is empty where units >= pieces.
static bool partition(const Cut& c, long long units, size_t unitBytes) {
  std::vector<int> seen((size_t)units, 0);
  for (size_t j = 0; j < c.begin.size(); j++) {
    if (c.begin[j] > c.end[j] || c.end[j] > (size_t)units * unitBytes) return false;
    if ((long long)c.begin.size() <= units && c.begin[j] == c.end[j]) return false;
    for (size_t b = c.begin[j]; b < c.end[j]; b += unitBytes) seen[b / unitBytes]++;
  }
  for (int s : seen)
    if (s != 1) return false;
  return true;
}

// In steps over n parts: step k's ranges are the same stretch of every part,
// and each part's stretches follow one another from its start to its end.
static bool steps_hold(const Cut& c, int n, size_t partBytes) {
  int pieces = (int)c.begin.size();
  size_t at = 0;
  for (int k = 0; k < pieces / n; k++) {
    if (c.begin[(size_t)k * n] != at) return false;
    for (int d = 0; d < n; d++)
      if (c.begin[(size_t)k * n + d] != c.begin[(size_t)k * n] + d * partBytes ||
          c.end[(size_t)k * n + d] != c.end[(size_t)k * n] + d * partBytes)
        return false;
    at = c.end[(size_t)k * n];
  }
  return at == partBytes;
}

static void fixed_cases() {
  // 16384 columns of 32 KiB in 8 ranges for a reduce-scatter of 2 ranks: 4 steps
  Cut c = cut(2, 16384, 8, 32768);
  check(partition(c, 16384, 32768), "2 ranks, 8 ranges: every column once");
  check(c.begin[0] == 0 && c.end[0] == 2048u * 32768 && c.begin[1] == 8192u * 32768 && c.end[1] == 10240u * 32768,
        "2 ranks: range 1 is step 0's stretch of part 1");
  check(in_steps(c.begin.data(), c.end.data(), 8, 2, 8192u * 32768), "2 ranks: in steps");
  check(steps_hold(c, 2, 8192u * 32768), "2 ranks: the steps walk each part");
  // an all-reduce (chunks 0): in order, and not in steps over 2 parts
  Cut a = cut(0, 16384, 8, 4);
  check(partition(a, 16384, 4) && a.begin[1] == 2048u * 4, "all-reduce: ranges in order");
  check(!in_steps(a.begin.data(), a.end.data(), 8, 2, 8192u * 4), "all-reduce order: not in steps");
  // pieces not a multiple of the ranks, units not divisible: in order
  Cut b = cut(2, 1001, 8, 4), d = cut(3, 900, 8, 4);
  check(partition(b, 1001, 4) && partition(d, 900, 4), "uneven: every unit once");
  check(!in_steps(b.begin.data(), b.end.data(), 8, 2, 1001 * 2) && !in_steps(d.begin.data(), d.end.data(), 8, 3, 300 * 4),
        "uneven: not in steps");
  // 4 ranks, 8 ranges: 2 steps
  Cut f = cut(4, 4096, 8, 16);
  check(partition(f, 4096, 16) && in_steps(f.begin.data(), f.end.data(), 8, 4, 1024 * 16) && steps_hold(f, 4, 1024 * 16),
        "4 ranks, 8 ranges: 2 steps over the 4 parts");
  // the reduce-scatter's parts are not the producer's (another count): not in steps
  check(!in_steps(f.begin.data(), f.end.data(), 8, 4, 512 * 16), "parts of another size: not in steps");
  check(!in_steps(f.begin.data(), f.end.data(), 8, 1, 4096 * 16), "one rank: never in steps");
}

static void random_cases() {
  std::mt19937_64 g(12345);
  int bad_partition = 0, bad_steps = 0, stepped = 0;
  for (int t = 0; t < 20000; t++) {
    int chunks = (int)(g() % 9), pieces = 1 + (int)(g() % 16);
    long long units = 1 + (long long)(g() % 5000);
    size_t ub = 1 + g() % 64;
    Cut c = cut(chunks, units, pieces, ub);
    bad_partition += !partition(c, units, ub);
    if (chunks > 1 && units % chunks == 0) {
      size_t part = (size_t)(units / chunks) * ub;
      if (in_steps(c.begin.data(), c.end.data(), pieces, chunks, part)) {
        stepped++;
        bad_steps += !steps_hold(c, chunks, part);
      }
    }
  }
  check(bad_partition == 0, "20000 random outputs, 0-8 ranks, 1-16 ranges: every unit in one range");
  check(bad_steps == 0, "... and whenever in steps, each step is the same stretch of every part");
  check(stepped > 100, "... and some of them were in steps");
}

int main() {
  fixed_cases();
  random_cases();
  return failed ? 1 : 0;
}
