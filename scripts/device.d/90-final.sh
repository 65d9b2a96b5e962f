#!/usr/bin/env bash
# scripts/device.d/90-final.sh: the shortest 2-GPU session that covers the
# fast path, the bound and the search: 80-e2e's prep and time phases (every
# transform built, run and verified on 2 GPUs; seeds and gen_0 timed side by
# side), 60-bound on the workloads in FINAL_BOUND, then 80-e2e's run phase on
# FINAL_RUN. Each part has its own time cap; results under $OUT/e2e and
# $OUT/bound.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT"
E2E_PHASES="prep time" E2E_REPEATS=${FINAL_REPEATS:-3} timeout -k 5 "${FINAL_E2E_S:-200}" \
  bash scripts/device.d/80-e2e.sh > "$OUT/final-e2e.log" 2>&1
echo "e2e prep+time: rc=$?"
BOUND_ONLY=${FINAL_BOUND:-"hollow_allreduce kv_transfer gemm_allgather"} BUDGET_S=${FINAL_BOUND_S:-110} \
  timeout -k 5 $(( ${FINAL_BOUND_S:-110} + 20 )) bash scripts/device.d/60-bound.sh > "$OUT/final-bound.log" 2>&1
echo "bound: rc=$?"
E2E_PHASES=run E2E_RUN=${FINAL_RUN:-kv_transfer} E2E_EVALS=${FINAL_EVALS:-8} E2E_RUN_TIMEOUT=${FINAL_RUN_S:-150} \
  E2E_REPEATS=${FINAL_REPEATS:-3} timeout -k 5 $(( ${FINAL_RUN_S:-150} + 60 )) \
  bash scripts/device.d/80-e2e.sh > "$OUT/final-run.log" 2>&1
echo "run: rc=$?"
exit 0
