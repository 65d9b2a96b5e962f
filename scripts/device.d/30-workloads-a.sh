#!/usr/bin/env bash
# scripts/device.d/30-workloads-a.sh: on the 2-GPU machine, build and run the
# gemm_allgather and kv_transfer workloads: the plain seed and the expert
# program (expert.cu: the hand-written host pipeline) at verify and bench
# size, and a negative
# control of each (communication removed) that must fail verification.
# Needs only nvcc, MPI and NCCL 2.28.9 (NCCL_HOME); logs go to $OUT/, with a
# summary of the Verification and CUCO_RESULT lines in
# $OUT/workloads-a-summary.txt. Runs from the repository root.
set -uo pipefail
cd "$(dirname "$0")/../.."
WL_TAG=workloads-a BUDGET_S=160 RUN_TIMEOUT_S=45
source scripts/device-workloads.sh

GA=workloads/gemm_allgather/gemm_allgather.cu
KV=workloads/kv_transfer/kv_transfer.cu
GA_VERIFY=(--m 512 --k 1024 --n 1024 --warmup 1 --iters 3)
GA_BENCH=(--m 8192 --k 28672 --n 8192 --warmup 5 --iters 20)
KV_VERIFY=(--seq 1000 --layers 8 --warmup 1 --iters 3)
KV_BENCH=(--seq 8192 --layers 32 --warmup 3 --iters 10)

note "date: $(date -u +%FT%TZ) NCCL_HOME=$NCCL_HOME"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# builds in parallel: they are independent and the machine has 16 cores
build gemm_allgather "$GA" &
build kv_transfer "$KV" &
build gemm_allgather_expert workloads/gemm_allgather/expert.cu &
build kv_transfer_expert workloads/kv_transfer/expert.cu &
# negative controls: the collectives never run, so verification must fail
variant gemm_allgather_nocomm "$GA" 's/if (parts & PART_COMM) {$/if (false) {/' &
variant kv_transfer_nocomm "$KV" 's/if (parts & PART_TRANSFER)$/if (false)/' &
wait
note "builds done in $(( $(date +%s) - START )) s"

run gemm_allgather verify "${GA_VERIFY[@]}"
run kv_transfer verify "${KV_VERIFY[@]}"
run gemm_allgather bench "${GA_BENCH[@]}"
run kv_transfer bench "${KV_BENCH[@]}"
run gemm_allgather_expert verify "${GA_VERIFY[@]}"
run kv_transfer_expert verify "${KV_VERIFY[@]}"
run gemm_allgather_expert bench "${GA_BENCH[@]}"
run kv_transfer_expert bench "${KV_BENCH[@]}"
run gemm_allgather_nocomm verify "${GA_VERIFY[@]}"
run kv_transfer_nocomm verify "${KV_VERIFY[@]}"

note "total $(( $(date +%s) - START )) s"
rm -rf "$BUILD"
# success means: the seeds and the expert programs verified, the controls did not
status=0
for n in gemm_allgather-verify kv_transfer-verify gemm_allgather-bench kv_transfer-bench \
         gemm_allgather_expert-verify kv_transfer_expert-verify; do
  grep -q '^Verification: PASS' "$OUT/$n.log" 2>/dev/null || { note "expected PASS: $n"; status=1; }
done
for n in gemm_allgather_nocomm-verify kv_transfer_nocomm-verify; do
  grep -q '^Verification: FAIL' "$OUT/$n.log" 2>/dev/null || { note "expected FAIL: $n"; status=1; }
done
exit $status
