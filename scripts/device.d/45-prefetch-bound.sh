#!/usr/bin/env bash
# scripts/device.d/45-prefetch-bound.sh: 'cuco bound' at RANKS ranks on the
# seeds of the programs PREFETCH_PROGRAMS names in tests/data/transform
# (default: fsdp_prefetch), at their bench size: the computation and the
# communication of a step apart, from which the gap that schedule
# prefetch_next closes is read (seed - max(compute, comm)). The CUPTI
# timeline library is the one beside cuco (scripts/device-bundle) unless
# CUCO_TIMELINE_LIB names another.
# Results: $OUT/prefetch-bound-NAME.json (bound.json) and .txt (the report).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-pbound prefetch-bound
[ -n "${CUCO_TIMELINE_LIB:-}" ] || export CUCO_TIMELINE_LIB=$(dirname "$CUCO")/libcuco_timeline.so
for p in ${PREFETCH_PROGRAMS:-fsdp_prefetch}; do
  timeout -k 5 300 "$CUCO" bound "tests/data/transform/$p" --ranks "$RANKS" --workspace "$T/$p" \
    > "$OUT/prefetch-bound-$p.txt" 2>&1 || status=1
  cp "$T/$p/bound.json" "$OUT/prefetch-bound-$p.json" 2>/dev/null || status=1
  grep -E "bound|compute|comm" "$OUT/prefetch-bound-$p.txt" | head -12
done
exit $status
