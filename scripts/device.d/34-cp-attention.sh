#!/usr/bin/env bash
# scripts/device.d/34-cp-attention.sh: the attention split on
# tests/data/transform/cp_attention (a class-owned communicator, one
# all-gather of packed K|V rows, an attention kernel with no mask that
# writes its log-sum-exp, which the program checks): gen_0 built by hand
# and run with CUCO_TX_TRACE=1 at 1 and 2 ranks (1 where the machine has one
# GPU), with each peer's keys in 1, 2 and 4 parts, and with the split off,
# at the verify size and at a size where the key count is not a multiple of
# the parts (the split must still verify); the glue's trace says whether
# the split ran. Results: $OUT/cp-attention.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
CUCO=$(command -v cuco)
T=$(mktemp -d /tmp/cuco-cpa.XXXXXX)
trap 'rm -rf "$T"' EXIT
RANKS=1
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && RANKS=2
WL=tests/data/transform/cp_attention
R=$OUT/cp-attention.txt
: > "$R"
status=0
"$CUCO" transform "$WL" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$T/transform.log" 2>&1
g=$T/ws/gen_0/cp_attention.cu
[ -s "$g" ] || { tail -20 "$T/transform.log"; exit 1; }
grep -E "schedule" "$T/transform.log" >> "$R"
for v in "parts1:CUCO_ATTN_CHUNKS=1" "parts2:CUCO_ATTN_CHUNKS=2" "parts4:CUCO_ATTN_CHUNKS=4" "off:CUCO_SPLIT_0=0"; do
  knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" || status=1
  nvcc -std=c++17 -arch=sm_90 -O2 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) -o "$T/${v%%:*}" \
    "$T/${v%%:*}.cu" -L"$NCCL_HOME/lib" -l:libnccl.so.2 $(mpicxx --showme:link) > "$T/build.log" 2>&1 \
    || { tail -10 "$T/build.log"; status=1; continue; }
  for r in 1 "$RANKS"; do
    for size in "--tokens 96 --heads 2 --d 32" "--tokens 75 --heads 3 --d 24"; do
      timeout -k 5 60 mpirun -np "$r" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        "$T/${v%%:*}" $size --iters 2 > "$T/run.log" 2>&1
      rc=$?
      echo "== ${v%%:*} ranks=$r $size rc=$rc" >> "$R"
      grep -E "attention|Verification|CUCO_RESULT" "$T/run.log" | sort | uniq -c >> "$R"
      grep -q "Verification: PASS" "$T/run.log" || status=1
    done
  done
done
cat "$R"
exit $status
