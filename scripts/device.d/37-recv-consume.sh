#!/usr/bin/env bash
# scripts/device.d/37-recv-consume.sh: schedule consume_as_received (a
# receive consumed piece by piece by the declared kernel that reads it) with
# send_as_produced on the sending side, on tests/data/transform/stage_handoff
# (rank 0: one cublasGemmEx per layer slab into one buffer, then ncclSend;
# rank 1: ncclRecv, then a row-wise RMSNorm + GELU kernel declared
# rows_independent).
# - seed, gen_0 (both schedules on) and variants: the receive's split off,
#   the send's pieces off, both off with early start off, 4 and 16 pieces,
#   the pieces by NCCL (noce) or the SM kernel (smk) instead of the copy
#   engine; each built, verified
#   and timed by a confined cuco eval --level 3 (3 repeats) at bench size,
#   the builds first, in parallel.
# - gen_0 at 1 and RANKS ranks at the verify size under CUCO_TX_TRACE=1 (the
#   pieces consumed as they landed, and the result verified).
# - cuco bound on the seed (compute against communication; RC_BOUND=0 skips).
# Results: $OUT/recv-consume.jsonl, $OUT/recv-trace.txt, $OUT/recv-bound.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
source scripts/device-eval.sh
step_start cuco-recv recv-consume
WL=tests/data/transform/stage_handoff

"$CUCO" transform "$WL" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$OUT/recv-transform.log" 2>&1
g=$T/ws/gen_0/stage_handoff.cu
[ -s "$g" ] || { tail -20 "$OUT/recv-transform.log"; exit 1; }
variants=("nosplit:CUCO_SPLIT_1=0" "nosend:CUCO_SENDP_0=0" "none:CUCO_SPLIT_1=0,CUCO_SENDP_0=0,CUCO_EARLY_1=0"
          "p4:CUCO_P2P_PIECES=4" "p16:CUCO_P2P_PIECES=16" "noce:CUCO_P2P_CE=0"
          "smk:CUCO_P2P_CE=0,CUCO_P2P_NCCL_FROM=0")
variants_build "$WL" recv "$g" "${variants[@]}"
variants_time "$WL" recv "$g" "${variants[@]}"
eval_named "$WL" seed-again 3 "$RANKS" 200 recv

: > "$OUT/recv-trace.txt"
if nvcc -std=c++17 -arch=sm_90 -O2 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
     -o "$T/traced" "$g" -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas $(mpicxx --showme:link) > "$T/traced.build.log" 2>&1; then
  for r in 1 "$RANKS"; do
    timeout -k 5 60 mpirun -np "$r" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
      "$T/traced" -l 4 -t 512 -d 1024 -k 128 -s 3 > "$T/traced.log" 2>&1
    echo "== ranks=$r (rc=$?)" >> "$OUT/recv-trace.txt"
    grep -E "split|pieces|Verification|CUCO_RESULT|error|fail|want" "$T/traced.log" | sort | uniq -c >> "$OUT/recv-trace.txt"
    grep -q "Verification: PASS" "$T/traced.log" || status=1
  done
else
  tail -20 "$T/traced.build.log" >> "$OUT/recv-trace.txt"
  status=1
fi
[ "${RC_BOUND:-1}" = 0 ] || timeout -k 5 150 "$CUCO" bound "$WL" --ranks "$RANKS" --workspace "$T/bound" --json \
  > "$OUT/recv-bound.json" 2> "$OUT/recv-bound.err" || status=1
cat "$OUT/recv-trace.txt"
grep -c '"status": *"ok"' "$LOG"
exit $status
