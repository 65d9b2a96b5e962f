#!/usr/bin/env bash
# scripts/device.d/34-cp-attention.sh: the attention split on
# tests/data/transform/cp_attention and cp_causal (a class-owned
# communicator, one all-gather of packed K|V rows, an attention kernel with
# no mask, or with a causal mask and its queries declared so that the
# busiest rank lends queries, that writes its log-sum-exp, which the
# program checks): gen_0 built by hand
# and run with CUCO_TX_TRACE=1 at 1 and 2 ranks (1 where the machine has one
# GPU), with each peer's keys in 1, 2 and 4 parts, and with the split off,
# at the verify size and at a size where the key count is not a multiple of
# the parts (the split must still verify); the glue's trace says whether
# the split ran (and, for cp_causal, which queries moved; also with
# CUCO_ATTN_LEND=0). Results: $OUT/cp-attention.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
CUCO=$(command -v cuco)
T=$(mktemp -d /tmp/cuco-cpa.XXXXXX)
trap 'rm -rf "$T"' EXIT
RANKS=1
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$GPUS" -ge 2 ] && RANKS=2
MORE=""   # 4 ranks too where the machine has 4 GPUs
[ "$GPUS" -ge 4 ] && MORE=4
R=$OUT/cp-attention.txt
: > "$R"
status=0
for prog in cp_attention cp_causal; do
WL=tests/data/transform/$prog
"$CUCO" transform "$WL" --ranks "$RANKS" --workspace "$T/ws-$prog" --no-verify > "$T/transform.log" 2>&1
g=$T/ws-$prog/gen_0/$prog.cu
[ -s "$g" ] || { tail -20 "$T/transform.log"; exit 1; }
echo "#### $prog" >> "$R"
grep -E "schedule" "$T/transform.log" >> "$R"
variants=("parts1:CUCO_ATTN_CHUNKS=1" "parts2:CUCO_ATTN_CHUNKS=2" "parts4:CUCO_ATTN_CHUNKS=4" "off:CUCO_SPLIT_0=0")
[ "$prog" = cp_causal ] && variants+=("nolend:CUCO_ATTN_LEND=0")
for v in "${variants[@]}"; do
  knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" || status=1
  nvcc -std=c++17 -arch=sm_90 -O2 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) -o "$T/${v%%:*}" \
    "$T/${v%%:*}.cu" -L"$NCCL_HOME/lib" -l:libnccl.so.2 $(mpicxx --showme:link) > "$T/build.log" 2>&1 \
    || { tail -10 "$T/build.log"; status=1; continue; }
  for r in 1 "$RANKS" $MORE; do
    for size in "--tokens 96 --heads 2 --d 32" "--tokens 75 --heads 3 --d 24"; do
      timeout -k 5 60 mpirun -np "$r" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        "$T/${v%%:*}" $size --iters 2 > "$T/run.log" 2>&1
      rc=$?
      echo "== ${v%%:*} ranks=$r $size rc=$rc" >> "$R"
      grep -E "attention|attends|Verification|CUCO_RESULT" "$T/run.log" | sort | uniq -c >> "$R"
      grep -q "Verification: PASS" "$T/run.log" || status=1
    done
  done
done
done
cat "$R"
exit $status
