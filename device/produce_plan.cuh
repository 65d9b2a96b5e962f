// The producer split's ranges: pure host C++ (no CUDA) so that it is tested
// on its own (tests/cli/test_produce_plan.sh). The transform's glue
// (src/transform/cuco_tx_produce.cuh and cuco_tx_gemm.cuh) cuts a
// producer's output (a GEMM's columns, a kernel's rows) by range(); the
// reduce-scatter it feeds reduces step by step where in_steps() says the
// ranges were made so, whole otherwise.
#pragma once
#include <cstddef>

namespace cuco {
namespace produce {

// Range j of `units` in `pieces` ranges: in order or, for a reduce-scatter
// of `chunks` ranks (0 or 1: none) where units and pieces divide evenly
// among them, step by step over the ranks' parts: range k*chunks + d is
// step k's stretch of part d, the same stretch of every part, so that each
// step holds some of every rank's part and the ranks all reduce at once.
inline void range(int chunks, long long units, int pieces, int j, long long* lo, long long* hi) {
  if (chunks > 1 && pieces % chunks == 0 && units % chunks == 0 && units / chunks >= pieces / chunks) {
    long long per = units / chunks, steps = pieces / chunks, k = j / chunks, d = j % chunks;
    *lo = d * per + per * k / steps;
    *hi = d * per + per * (k + 1) / steps;
    return;
  }
  *lo = units * j / pieces;
  *hi = units * (j + 1) / pieces;
}

// Whether byte ranges [begin[j], end[j]) were made step by step over n
// parts of partBytes: range k*n + d is the same stretch of part d for every
// d, inside the part.
inline bool in_steps(const size_t* begin, const size_t* end, int pieces, int n, size_t partBytes) {
  if (n < 2 || pieces < n || pieces % n) return false;
  for (int j = 0; j < pieces; j++) {
    size_t first = begin[j - j % n], last = end[j - j % n], at = (size_t)(j % n) * partBytes;
    if (first > last || last > partBytes || begin[j] != first + at || end[j] != last + at) return false;
  }
  return true;
}

}  // namespace produce
}  // namespace cuco
