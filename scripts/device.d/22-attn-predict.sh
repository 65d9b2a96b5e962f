#!/usr/bin/env bash
# scripts/device.d/22-attn-predict.sh: the one-GPU prediction of
# flash_attn_cp's attention split and query lending at 2 ranks
# (bench/predict/attn_predict.cu, the workload's kernel at its bench shapes)
# at three link rates, each with both stand-ins for the peer's traffic (a
# paced local copy, and the stream held until the bytes arrive); one JSON
# line a run in $OUT/attn-predict.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
  -o "$B/attn_predict" bench/predict/attn_predict.cu -lcublas -L"$NCCL_HOME/lib" -l:libnccl.so.2 \
  $(mpicxx --showme:link) || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
for rate in 250 335 450; do
  for stand in copy timed; do
    "$B/attn_predict" --out "$B/one.json" --stand-in $stand --rate-gbps "$rate" --iters 15 && cat "$B/one.json" >> "$OUT/attn-predict.jsonl" || status=1
  done
done
rm -rf "$B"
exit $status
