#!/usr/bin/env bash
# The four GPU workloads' seeds through 'cuco eval' (compile, verify, bench
# with 3 repeats), as cuco itself measures them: one JSON per workload in
# $OUT/eval-NAME.json, plus the GPU and NCCL facts of the run.
set -u
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT"
status=0
for w in gemm_allgather kv_transfer moe_dispatch_combine flash_attn_cp; do
    start=$(date +%s)
    cuco eval "workloads/$w" --json --repeats 3 --work-dir "/tmp/cuco-eval-$w" > "$OUT/eval-$w.json" 2> "$OUT/eval-$w.err"
    rc=$?
    echo "eval $w: rc=$rc in $(( $(date +%s) - start )) s: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["status"], j.get("time_ms"), j.get("spread"))' "$OUT/eval-$w.json" 2>&1)"
    [ $rc = 0 ] || status=1
done
exit $status
