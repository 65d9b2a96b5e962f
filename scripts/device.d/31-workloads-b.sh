#!/usr/bin/env bash
# scripts/device.d/31-workloads-b.sh: on the 2-GPU machine, build and run the
# flash_attn_cp and moe_dispatch_combine workloads: the seed at verify and
# bench size (attention also non-causal), the expert program of each
# (expert.cu: the hand-written host pipeline), and a negative control of each (communication removed) that must fail
# verification. Needs only nvcc, MPI and NCCL 2.28.9 (NCCL_HOME); logs go to
# $OUT/, with a summary of the Verification and CUCO_RESULT lines in
# $OUT/workloads-b-summary.txt. Runs from the repository root.
set -uo pipefail
cd "$(dirname "$0")/../.."
WL_TAG=workloads-b BUDGET_S=140 RUN_TIMEOUT_S=60
source scripts/device-workloads.sh

FA=workloads/flash_attn_cp/flash_attn_cp.cu
MOE=workloads/moe_dispatch_combine/moe_dispatch_combine.cu
FA_VERIFY=(--seq 1024 --heads 8 --kv_heads 2 --causal 1 --warmup 1 --iters 3)
FA_VERIFY_NC=(--seq 1024 --heads 8 --kv_heads 2 --causal 0 --warmup 1 --iters 3)
FA_BENCH=(--seq 8192 --heads 32 --kv_heads 32 --causal 1 --warmup 3 --iters 10)
FA_BENCH_NC=(--seq 8192 --heads 32 --kv_heads 32 --causal 0 --warmup 3 --iters 10)
MOE_VERIFY=(--tokens 256 --experts 16 --warmup 1 --iters 3)
MOE_BENCH=(--tokens 4096 --experts 256 --warmup 3 --iters 10)

note "date: $(date -u +%FT%TZ) NCCL_HOME=$NCCL_HOME"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# builds in parallel: they are independent and the machine has 16 cores
build flash_attn_cp "$FA" &
build moe_dispatch_combine "$MOE" &
build flash_attn_cp_expert workloads/flash_attn_cp/expert.cu &
build moe_dispatch_combine_expert workloads/moe_dispatch_combine/expert.cu &
# negative controls: the collectives never run, so verification must fail
variant flash_attn_cp_nocomm "$FA" 's/if (parts & PART_COMM) {$/if (false) {/' &
variant moe_dispatch_combine_nocomm "$MOE" 's/if (parts & PART_COMM)$/if (false)/' &
wait
note "builds done in $(( $(date +%s) - START )) s"

run flash_attn_cp verify "${FA_VERIFY[@]}"
run moe_dispatch_combine verify "${MOE_VERIFY[@]}"
run flash_attn_cp bench "${FA_BENCH[@]}"
run moe_dispatch_combine bench "${MOE_BENCH[@]}"
run flash_attn_cp verify_nc "${FA_VERIFY_NC[@]}"
run flash_attn_cp_expert verify "${FA_VERIFY[@]}"
run flash_attn_cp_expert verify_nc "${FA_VERIFY_NC[@]}"
run moe_dispatch_combine_expert verify "${MOE_VERIFY[@]}"
run flash_attn_cp_nocomm verify "${FA_VERIFY[@]}"
run moe_dispatch_combine_nocomm verify "${MOE_VERIFY[@]}"
run flash_attn_cp_expert bench "${FA_BENCH[@]}"
run moe_dispatch_combine_expert bench "${MOE_BENCH[@]}"
run flash_attn_cp bench_nc "${FA_BENCH_NC[@]}"

note "total $(( $(date +%s) - START )) s"
rm -rf "$BUILD"
# success means: the seeds and the expert programs verified, the controls did not
status=0
for n in flash_attn_cp-verify moe_dispatch_combine-verify flash_attn_cp-bench \
         moe_dispatch_combine-bench flash_attn_cp-verify_nc flash_attn_cp_expert-verify \
         flash_attn_cp_expert-verify_nc moe_dispatch_combine_expert-verify; do
  grep -q '^Verification: PASS' "$OUT/$n.log" 2>/dev/null || { note "expected PASS: $n"; status=1; }
done
for n in flash_attn_cp_nocomm-verify moe_dispatch_combine_nocomm-verify; do
  grep -q '^Verification: FAIL' "$OUT/$n.log" 2>/dev/null || { note "expected FAIL: $n"; status=1; }
done
exit $status
