#!/usr/bin/env bash
# scripts/device.d/23-zero-sm.sh: the zero-SM copy-engine transport and the
# chunked consumer split on one GPU.
#  1. tests/gpu/test_ce_sync.sh: the stream-memory-operation rendezvous orders
#     two simulated ranks, completes while a kernel holds every SM (a one-block
#     kernel does not: the control), and the copy-engine all-gather and
#     all-to-all are right at 1 rank.
#  2. bench/predict/split_predict.cu: the schedule run whole from one start
#     with the peer's block consumed in 1, 2 and 4 pieces, at two NVLink rates.
#  3. confined cuco eval at 1 rank (verification, then the benchmark): the
#     seeds and the rule transforms of gemm_allgather (split pieces 1, 2, 4;
#     copy engine on), moe_dispatch_combine and flash_attn_cp (copy engine on
#     and off), so every path the transport choice touches is built and
#     verified on a GPU.
# Results: $OUT/ce-sync.log, $OUT/split-sched-RATE.json,
# $OUT/zero-sm-1gpu.jsonl (one cuco eval JSON per line).
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
CUCO=$(command -v cuco)
bash tests/gpu/test_ce_sync.sh > "$OUT/ce-sync.log" 2>&1 || status=1
tail -8 "$OUT/ce-sync.log"

B=$(mktemp -d /tmp/cuco-predict.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -o "$B/split_predict" bench/predict/split_predict.cu -lcublas || status=1
for rate in 250 335; do
  "$B/split_predict" --out "$OUT/split-sched-$rate.json" --rate-gbps "$rate" --iters 20 || status=1
done

T=$(mktemp -d /tmp/cuco-zerosm.XXXXXX)
export CUCO_BUILD_CACHE=$T/cache
LOG=$OUT/zero-sm-1gpu.jsonl
: > "$LOG"
variant() { # SRC DST NAME=VALUE...: a copy of SRC with each #define NAME set to VALUE
  local src=$1 dst=$2
  shift 2
  cp "$src" "$dst"
  for kv in "$@"; do
    sed -i -E "s/^(#define ${kv%%=*}) [0-9]+/\\1 ${kv#*=}/" "$dst"
  done
}
jobs_list=()
for wl in gemm_allgather moe_dispatch_combine flash_attn_cp; do
  "$CUCO" transform "workloads/$wl" --ranks 1 --workspace "$T/ws-$wl" --no-verify > "$OUT/zero-sm-transform-$wl.log" 2>&1
  g=$(ls "$T/ws-$wl"/gen_0/*.cu | head -1)
  cp "$g" "$OUT/zero-sm-gen0-$wl.cu"
  variant "$g" "$T/$wl-ce.cu" CUCO_COPY_ENGINE=1
  jobs_list+=("${wl}_seed workloads/$wl -" "${wl}_gen0 workloads/$wl $g" "${wl}_gen0_ce workloads/$wl $T/$wl-ce.cu")
done
g=$(ls "$T/ws-gemm_allgather"/gen_0/*.cu | head -1)
for c in 2 4; do
  variant "$g" "$T/gemm-split$c.cu" CUCO_SPLIT_CHUNKS=$c
  jobs_list+=("gemm_allgather_gen0_pieces$c workloads/gemm_allgather $T/gemm-split$c.cu")
done
evaluate() { # NAME WL PROG LEVEL
  local args=("$2")
  [ "$3" = - ] || args+=("$3" --frozen-ref "$(ls "$T/ws-$(basename "$2")"/gen_0/*.cu | head -1)")
  timeout -k 5 300 "$CUCO" eval "${args[@]}" --ranks 1 --level "$4" --repeats 1 --json \
    > "$T/$1.json" 2> "$OUT/zero-sm-$1.err"
}
for j in "${jobs_list[@]}"; do
  read -r name wl prog <<< "$j"
  evaluate "$name" "$wl" "$prog" 1 &
done
wait
for j in "${jobs_list[@]}"; do
  read -r name wl prog <<< "$j"
  evaluate "$name" "$wl" "$prog" 3
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; print(json.dumps(d))' \
    "$T/$name.json" "$name" >> "$LOG" 2>/dev/null || { echo "{\"name\":\"$name\",\"status\":\"no JSON\"}" >> "$LOG"; status=1; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["name"], d.get("status"), d.get("time_ms"))' "$(tail -1 "$LOG")"
done
rm -rf "$B" "$T"
exit $status
