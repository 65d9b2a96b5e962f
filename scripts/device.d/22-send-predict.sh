#!/usr/bin/env bash
# scripts/device.d/22-send-predict.sh: the one-GPU prediction of
# kv_transfer's send_as_produced at 2 ranks (bench/predict/send_predict.cu,
# kv_transfer's bench shapes) at three link rates: the device path's, NCCL's
# and the copy engine's measured 1 GiB rates on 2xH200 (bench/README.md);
# one JSON per rate in $OUT/send-RATE.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -o "$B/send_predict" bench/predict/send_predict.cu -lcublas || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
for rate in 275 344 397; do
  "$B/send_predict" --out "$OUT/send-$rate.json" --rate-gbps "$rate" --iters 15 || status=1
done
rm -rf "$B"
exit $status
