#!/usr/bin/env bash
# scripts/device.d/22-send-predict.sh: the one-GPU prediction of
# kv_transfer's send_as_produced at 2 ranks (bench/predict/send_predict.cu,
# kv_transfer's bench shapes) at three link rates (the device path's, NCCL's
# and the copy engine's measured 1 GiB rates on 2xH200, bench/README.md),
# each with both stand-ins for the peer's traffic (a
# paced local copy, and the stream held until the bytes arrive); one JSON
# line a run in $OUT/send-predict.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -o "$B/send_predict" bench/predict/send_predict.cu -lcublas || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
for rate in 275 344 397; do
  for stand in copy timed; do
    "$B/send_predict" --out "$B/one.json" --stand-in $stand --rate-gbps "$rate" --iters 15 && cat "$B/one.json" >> "$OUT/send-predict.jsonl" || status=1
  done
done
rm -rf "$B"
exit $status
