#!/usr/bin/env bash
# scripts/device.d/22-split-predict.sh: the one-GPU prediction of
# gemm_allgather's consumer split at 2 ranks (bench/predict/split_predict.cu)
# at three NVLink pull rates; one JSON per rate in $OUT/split-RATE.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -o "$B/split_predict" bench/predict/split_predict.cu -lcublas || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
for rate in 250 335 450; do
  "$B/split_predict" --out "$OUT/split-$rate.json" --rate-gbps "$rate" --iters 30 || status=1
done
rm -rf "$B"
exit $status
