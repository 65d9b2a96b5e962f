#!/usr/bin/env bash
# scripts/device.d/33-attention-split.sh: consumer_split_by_source for a
# kernel the manifest declares attention, on workloads/flash_attn_cp (K and
# V gathered by two ncclAllGather in one group, then the flash-attention
# kernel), at 2 ranks (1 where the machine has one GPU).
# - The seed, its expert program, gen_0 (split on, each peer's keys in one
#   part) and variants (split off; 2 and 4 parts a peer; the pull in one
#   piece; split and early start off) are
#   built, verified and timed by a confined cuco eval (--level 3, bench size,
#   3 repeats): a part attended twice, left out, read before it landed or
#   merged wrongly fails the frozen verification.
# - The seed and gen_0 at 1 rank too.
# - cuco bound on the seed (compute and communication: the gap).
# ATTN_QUICK=1: only gen_0 and its variants at 2 ranks (no expert, 1 rank or
# bound); ATTN_QUICK=2: only the seed, gen_0 and gen_0 with nothing lent.
# ATTN_RANKS: the rank count (default 2 where the machine has two GPUs).
# - gen_0 built by hand and run once at the verify size with
#   CUCO_TX_TRACE=1: the glue's trace says the split ran.
# - cuco bound on gen_0 itself: its kernel timeline (the merge's share).
# Results: $OUT/attention-split.jsonl (cuco eval JSON per line, named),
# $OUT/attention-split-bound.json, $OUT/attention-split-gen0-bound.json, $OUT/attention-split-trace.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
source scripts/device-eval.sh
step_start cuco-attn attention-split
RANKS=${ATTN_RANKS:-$RANKS}
WL=workloads/flash_attn_cp
SEED=$WL/flash_attn_cp.cu
evaluate() { eval_named "$WL" "$1" 3 "$2" 200 attention-split "${@:3}"; } # NAME RANKS [PROGRAM FROZEN]
"$CUCO" transform "$WL" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$OUT/attention-split-transform.log" 2>&1
g=$T/ws/gen_0/flash_attn_cp.cu
[ -s "$g" ] || { echo "no gen_0"; tail -20 "$OUT/attention-split-transform.log"; exit 1; }
cp "$T/ws/gen_0/transform_report.md" "$OUT/attention-split-report.md"
cp "$g" "$OUT/attention-split-gen0.cu"

# the trace first: a hang or a crash shows here before the timed runs
nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
  -o "$T/traced" "$g" -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas $(mpicxx --showme:link) > "$T/traced.build.log" 2>&1 \
  || { tail -20 "$T/traced.build.log"; exit 1; }
for r in 1 "$RANKS"; do
  timeout -k 5 120 mpirun -np "$r" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    "$T/traced" --seq 1024 --heads 8 --kv_heads 2 --causal 1 --warmup 1 --iters 2 > "$T/traced-$r.log" 2>&1
  echo "== $r ranks (rc=$?)" >> "$OUT/attention-split-trace.txt"
  grep -E "split|Verification|CUCO_RESULT|error|fail" "$T/traced-$r.log" | sort | uniq -c >> "$OUT/attention-split-trace.txt"
done
cat "$OUT/attention-split-trace.txt"

QUICK=${ATTN_QUICK:-0}
evaluate seed "$RANKS"
[ "$QUICK" = 0 ] && evaluate expert "$RANKS" "$WL/expert.cu" "$SEED"
evaluate gen0 "$RANKS" "$g" "$g"
variants=("split0:CUCO_SPLIT_0=0,CUCO_SPLIT_1=0" "attn2:CUCO_ATTN_CHUNKS=2" "attn4:CUCO_ATTN_CHUNKS=4" "nolend:CUCO_ATTN_LEND=0"
          "pull1:CUCO_SPLIT_CHUNKS=1" "plain:CUCO_SPLIT_0=0,CUCO_SPLIT_1=0,CUCO_EARLY_0=0,CUCO_EARLY_1=0")
[ "$QUICK" = 2 ] && variants=("nolend:CUCO_ATTN_LEND=0")
for v in "${variants[@]}"; do
  knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" || status=1
  evaluate "${v%%:*}" "$RANKS" "$T/${v%%:*}.cu" "$g"
done
if [ "$QUICK" = 2 ]; then
  grep -c '"status": *"ok"' "$LOG"
  exit $status
fi
# gen_0's own kernel timeline (the merge's time per step among them)
timeout -k 5 200 "$CUCO" bound "$g" --ranks "$RANKS" --workspace "$T/gen0-bound" --json \
  --nvcc-flags "-I$PWD/workloads/common -I$PWD/device" -- \
  --seq 8192 --heads 32 --kv_heads 32 --causal 1 --warmup 3 --iters 10 \
  > "$OUT/attention-split-gen0-bound.json" 2> "$OUT/attention-split-gen0-bound.err" || status=1
if [ "$QUICK" = 1 ]; then
  grep -c '"status": *"ok"' "$LOG"
  exit $status
fi
if [ "$RANKS" -gt 1 ]; then
  evaluate seed-1rank 1
  evaluate gen0-1rank 1 "$g" "$g"
fi
timeout -k 5 200 "$CUCO" bound "$WL" --ranks "$RANKS" --workspace "$T/bound" --json \
  > "$OUT/attention-split-bound.json" 2> "$OUT/attention-split-bound.err" || status=1

grep -c '"status": *"ok"' "$LOG"
exit $status
