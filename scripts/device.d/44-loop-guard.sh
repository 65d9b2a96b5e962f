#!/usr/bin/env bash
# scripts/device.d/44-loop-guard.sh: the loop schedule's run-time guard on
# bench/probe/ddp_flat, whose buckets are views into one flat gradient
# buffer CUCO_PROBE_STRIDE elements apart. Its seed, its gen_0 (each bucket's
# all-reduce waited for after the loop, cuco_tx::loop_guard at the top of
# the body) and gen_0 without the guard's lines are built, then run at RANKS
# ranks with the views apart (stride n) and overlapping (stride n/2), three
# runs each, the variants interleaved. Each run's parameter checksum is
# kept: gen_0 must match its seed's at both strides; without the guard the
# overlapping views are a race (its checksum may differ).
# Results: $OUT/loop-guard.txt (a line a run), $OUT/loop-guard.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-guard loop-guard
d=bench/probe/ddp_flat
N=${GUARD_N:-4194304}
"$CUCO" transform "$d" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$T/tx.log" 2>&1
g=$T/ws/gen_0/ddp_flat.cu
[ -s "$g" ] || { echo "no gen_0: $(tail -2 "$T/tx.log")"; exit 1; }
grep -v "cuco_tx::loop_guard(" "$g" > "$T/noguard.cu"
build_program "$d/ddp_flat.cu" "$T/seed" &
build_program "$g" "$T/gen0" &
build_program "$T/noguard.cu" "$T/noguard" &
wait
SUM=$OUT/loop-guard.txt
: > "$SUM"
for round in 1 2 3; do
  for stride in "$N" $((N / 2)); do
    for v in seed gen0 noguard; do
      [ -x "$T/$v" ] || continue
      out=$(CUCO_PROBE_STRIDE=$stride timeout -k 5 120 mpirun -np "$RANKS" --bind-to none -x LD_LIBRARY_PATH \
        -x NCCL_NVLS_ENABLE -x CUCO_PROBE_STRIDE "$T/$v" --n "$N" --steps 4 --rounds 48 2>&1)
      sum=$(echo "$out" | sed -n 's/^CHECKSUM //p' | head -1)
      ms=$(echo "$out" | sed -n 's/.*CUCO_RESULT {"time_ms": *\([0-9.e+-]*\).*/\1/p' | head -1)
      pass=$(echo "$out" | grep -c "Verification: PASS")
      echo "round $round stride $stride $v checksum ${sum:-none} ms ${ms:-none} pass $pass" | tee -a "$SUM"
      echo "{\"round\":$round,\"stride\":$stride,\"variant\":\"$v\",\"checksum\":\"${sum:-}\",\"time_ms\":${ms:-null},\"pass\":$pass}" >> "$LOG"
      [ -n "$sum" ] || { echo "$v: $(echo "$out" | tail -3 | tr '\n' ' ')"; status=1; }
    done
  done
done
# gen_0 against its seed, stride by stride
python3 - "$LOG" <<'PY' | tee -a "$SUM"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for stride in sorted({r["stride"] for r in runs}):
    seed = {r["checksum"] for r in runs if r["stride"] == stride and r["variant"] == "seed"}
    for v in ("gen0", "noguard"):
        got = [r["checksum"] for r in runs if r["stride"] == stride and r["variant"] == v]
        same = sum(c in seed for c in got)
        print("stride %d %s: %d of %d runs match the seed's checksum %s" % (stride, v, same, len(got), sorted(seed)))
PY
exit $status
