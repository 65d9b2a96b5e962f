#!/usr/bin/env bash
# scripts/device.d/22-split-predict.sh: the one-GPU prediction of
# gemm_allgather's consumer split at 2 ranks (bench/predict/split_predict.cu)
# at three link rates, each with both stand-ins for the peer's traffic (a
# paced local copy, and the stream held until the bytes arrive); one JSON
# line a run in $OUT/split-predict.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -o "$B/split_predict" bench/predict/split_predict.cu -lcublas || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
for rate in 250 335 450; do
  for stand in copy timed; do
    "$B/split_predict" --out "$B/one.json" --stand-in $stand --rate-gbps "$rate" --iters 30 && cat "$B/one.json" >> "$OUT/split-predict.jsonl" || status=1
  done
done
rm -rf "$B"
exit $status
