#!/usr/bin/env bash
# scripts/device.d/32-kernel-split.sh: the schedules of a kernel the manifest
# declares rows_independent, at 2 ranks (1 where the machine has one GPU).
# - tests/data/transform/seqpar_norm (ncclAllGather of token rows, then a
#   one-block-per-row RMSNorm): consumer_split_by_source. The seed, gen_0
#   (split on, CUCO_SPLIT_CHUNKS=4) and variants (split off; chunks 1 and 2;
#   early start and split both off) are built, verified and timed by a
#   confined cuco eval (--level 3) at the bench size (8192 rows of 4096 per
#   rank): a row normalized twice, left out or read before it landed fails
#   the program's own check.
# - tests/data/transform/rowpar_kernel (a hand-written row-parallel linear
#   kernel, then an in-place ncclAllReduce): producer_split. The seed, gen_0
#   (split off) and CUCO_PSPLIT_0=1 at 2, 4 and 8 ranges, the same way; and
#   CUCO_PSPLIT_0=1 at 1 rank. Both seeds and gen_0s are timed at 1 rank
#   too (gen_0 must not be slower than the seed there either).
# - cuco bound on both seeds (compute and communication of a step: the gap).
# - each split program built by hand and run once with CUCO_TX_TRACE=1: the
#   glue's trace says the split ran (not the whole-kernel fallback).
# Results: $OUT/kernel-split.jsonl (cuco eval JSON per line, named),
# $OUT/kernel-split-bound-NAME.json, $OUT/kernel-split-trace.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
source scripts/device-eval.sh
step_start cuco-ksplit kernel-split
evaluate() { eval_named "$1" "$2" "$3" "$4" 120 kernel-split "${@:5}"; } # WORKLOAD NAME LEVEL RANKS [PROGRAM FROZEN]
transform() { # WORKLOAD NAME
  "$CUCO" transform "$1" --ranks "$RANKS" --workspace "$T/ws-$2" --no-verify > "$OUT/kernel-split-transform-$2.log" 2>&1
  [ -s "$T/ws-$2/gen_0/$2.cu" ] || { echo "no gen_0 for $2"; tail -20 "$OUT/kernel-split-transform-$2.log"; return 1; }
  cp "$T/ws-$2/gen_0/transform_report.md" "$OUT/kernel-split-report-$2.md"
}
traced() { # NAME PROGRAM ARGS...: built by hand, run once with the glue's trace
  local name=$1 prog=$2
  shift 2
  nvcc -std=c++17 -arch=sm_90 -O1 -DCUCO_PSPLIT_MIN_BYTES=0 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) -o "$T/$name" "$prog" \
    -L"$NCCL_HOME/lib" -l:libnccl.so.2 $(mpicxx --showme:link) > "$T/$name.build.log" 2>&1 || { tail -5 "$T/$name.build.log"; return 1; }
  mpirun -np "$RANKS" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    "$T/$name" "$@" > "$T/$name.run.log" 2>&1
  echo "== $name (rc=$?)" >> "$OUT/kernel-split-trace.txt"
  grep -E "split|Verification|CUCO_RESULT" "$T/$name.run.log" | sort | uniq -c >> "$OUT/kernel-split-trace.txt"
}
: > "$OUT/kernel-split-trace.txt"

WL=tests/data/transform/seqpar_norm
if transform "$WL" seqpar_norm; then
  g=$T/ws-seqpar_norm/gen_0/seqpar_norm.cu
  evaluate "$WL" seed "3" "$RANKS"
  evaluate "$WL" gen0 3 "$RANKS" "$g" "$g"
  for v in "split0:CUCO_SPLIT_0=0" "chunks1:CUCO_SPLIT_CHUNKS=1" "chunks2:CUCO_SPLIT_CHUNKS=2" \
           "plain:CUCO_SPLIT_0=0,CUCO_EARLY_0=0"; do
    knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" || status=1
    evaluate "$WL" "${v%%:*}" 3 "$RANKS" "$T/${v%%:*}.cu" "$g"
  done
  if [ "$RANKS" -gt 1 ]; then  # gen_0 against the seed at one rank too
    evaluate "$WL" seed-1rank 3 1
    evaluate "$WL" gen0-1rank 3 1 "$g" "$g"
  fi
  traced seqpar_norm-gen0 "$g" --tokens 96 --dim 200 --iters 1 || status=1
else
  status=1
fi

WL=tests/data/transform/rowpar_kernel
if transform "$WL" rowpar_kernel; then
  g=$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu
  evaluate "$WL" rk-seed 3 "$RANKS"
  evaluate "$WL" rk-gen0 3 "$RANKS" "$g" "$g"
  for p in 2 4 8; do
    knob_variant "$g" "$T/rk-p$p.cu" "CUCO_PSPLIT_0=1,CUCO_PSPLIT_PIECES=$p" || status=1
    evaluate "$WL" "rk-psplit$p" 3 "$RANKS" "$T/rk-p$p.cu" "$g"
  done
  if [ "$RANKS" -gt 1 ]; then
    evaluate "$WL" rk-seed-1rank 3 1
    evaluate "$WL" rk-gen0-1rank 3 1 "$g" "$g"
  fi
  evaluate "$WL" rk-psplit4-1rank 3 1 "$T/rk-p4.cu" "$g"
  traced rowpar_kernel-psplit4 "$T/rk-p4.cu" --rows 100 --din 48 --dout 96 --iters 1 || status=1
else
  status=1
fi

for name in seqpar_norm rowpar_kernel; do
  timeout -k 5 120 "$CUCO" bound "tests/data/transform/$name" --ranks "$RANKS" --workspace "$T/bound-$name" --json \
    > "$OUT/kernel-split-bound-$name.json" 2> "$OUT/kernel-split-bound-$name.err" || status=1
done
cat "$OUT/kernel-split-trace.txt"
grep -c '"status": *"ok"' "$LOG"
exit $status
