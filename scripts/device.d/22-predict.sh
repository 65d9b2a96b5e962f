#!/usr/bin/env bash
# scripts/device.d/22-predict.sh: the one-GPU predictions of the workloads'
# schedules at 2 ranks (bench/predict/*_predict.cu): PREDICT names which
# (default: all three)
#   split  gemm_allgather's consumer split, at three NVLink pull rates;
#   send   kv_transfer's send_as_produced, at the device path's, NCCL's and
#          the copy engine's measured 1 GiB send rates on 2xH200;
#   attn   flash_attn_cp's attention split and query lending (the
#          workload's own kernel), at three pull rates;
# each rate with both stand-ins for the peer's traffic (a paced local copy,
# and the stream held until the bytes arrive). One JSON line a run in
# $OUT/NAME-predict.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
trap 'rm -rf "$B"' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
rates() { case $1 in split | attn) echo 250 335 450 ;; send) echo 275 344 397 ;; esac; }
iters() { case $1 in split) echo 30 ;; *) echo 15 ;; esac; }
status=0
for name in ${PREDICT:-split send attn}; do
  # attn includes the workload's source, which needs MPI and NCCL to link
  nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
    -o "$B/$name" "bench/predict/${name}_predict.cu" -lcublas -L"$NCCL_HOME/lib" -l:libnccl.so.2 \
    $(mpicxx --showme:link) || { status=1; continue; }
  for rate in $(rates "$name"); do
    for stand in copy timed; do
      "$B/$name" --out "$B/one.json" --stand-in $stand --rate-gbps "$rate" --iters "$(iters "$name")" &&
        cat "$B/one.json" >> "$OUT/$name-predict.jsonl" || status=1
    done
  done
done
exit $status
