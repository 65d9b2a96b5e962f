#!/usr/bin/env bash
# scripts/device.d/15-one-gpu.sh: what a 1-GPU machine can check of
# gemm_allgather's plain seed and its expert program (expert.cu: own rows
# first, 4 chunks), at one rank: both verify, a negative control
# (communication removed) fails, both are timed at bench size, and 'cuco
# transform' takes the expert program to a verified device-initiated gen_0
# (the all-gather to self is a local copy there). Whether an overlap pays is
# a 2-rank question (30-workloads-a, 80-e2e); at one rank the pipeline only
# shows its cost.
# Logs and $OUT/one-gpu-summary.txt as scripts/device-workloads.sh writes
# them; the transform report in $OUT/one-gpu-transform/.
set -uo pipefail
cd "$(dirname "$0")/../.."
WL_TAG=one-gpu BUDGET_S=${BUDGET_S:-200} RUN_TIMEOUT_S=60 WL_RANKS=1
source scripts/device-workloads.sh

GA=workloads/gemm_allgather/gemm_allgather.cu
GA_VERIFY=(--m 512 --k 1024 --n 1024 --warmup 1 --iters 3)
GA_BENCH=(--m 8192 --k 28672 --n 8192 --warmup 5 --iters 20)
EXPERT=workloads/gemm_allgather/expert.cu

note "date: $(date -u +%FT%TZ) NCCL_HOME=$NCCL_HOME ranks=$WL_RANKS"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

build gemm_allgather "$GA" &
build gemm_allgather_expert "$EXPERT" &
variant gemm_allgather_nocomm "$GA" 's/if (parts & PART_COMM) {$/if (false) {/' &
wait
note "builds done in $(( $(date +%s) - START )) s"

# the control first: nothing before it has left gathered rows in GPU memory
for v in gemm_allgather_nocomm gemm_allgather gemm_allgather_expert; do
  run "$v" verify "${GA_VERIFY[@]}"
done
run gemm_allgather bench "${GA_BENCH[@]}"
run gemm_allgather_expert bench "${GA_BENCH[@]}"

# The rule transform of the expert program, verified at one rank.
T=$(mktemp -d /tmp/cuco-one-gpu-tx.XXXXXX)
cp -r workloads/gemm_allgather "$T/gemm_allgather"
cp "$EXPERT" "$T/gemm_allgather/gemm_allgather.cu"
CUCO=$(command -v cuco || echo "$PWD/build-release/cuco")
t0=$(date +%s)
timeout -k 5 150 "$CUCO" transform "$T/gemm_allgather" --ranks "$WL_RANKS" --workspace "$T/ws" \
  > "$OUT/one-gpu-transform.log" 2>&1
rc=$?
note "transform gemm_allgather's expert program ($WL_RANKS rank): rc=$rc in $(( $(date +%s) - t0 )) s"
mkdir -p "$OUT/one-gpu-transform"
cp "$T"/ws/gen_0/transform_report.* "$T"/ws/gen_0/*.diff "$OUT/one-gpu-transform/" 2>/dev/null
tail -5 "$OUT/one-gpu-transform.log" | sed 's/^/  /' | tee -a "$SUMMARY"
rm -rf "$T" "$BUILD"

note "total $(( $(date +%s) - START )) s"
status=$rc
for n in gemm_allgather-verify gemm_allgather_expert-verify gemm_allgather-bench \
         gemm_allgather_expert-bench; do
  grep -q '^Verification: PASS' "$OUT/$n.log" 2>/dev/null || { note "expected PASS: $n"; status=1; }
done
grep -q '^Verification: FAIL' "$OUT/gemm_allgather_nocomm-verify.log" 2>/dev/null ||
  { note "expected FAIL: gemm_allgather_nocomm-verify"; status=1; }
exit $status
