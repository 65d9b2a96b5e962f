#!/usr/bin/env bash
# scripts/device.d/21-confined-1gpu.sh: the trust machinery on one GPU, at
# one rank, through 'cuco eval' as a search runs it (confined: namespaces,
# read-only root, no network, scrubbed environment; ranks started through
# cuco-vouch-exec; the vouch checked). Each GPU workload's plain seed and its
# expert program are evaluated to the benchmark; the hostile copies of
# gemm_allgather (tests/data/hostile/gpu/) must not come out ok; and the rule
# transform of gemm_allgather (schedules: early start / late wait, consumer
# split by source) is evaluated with its split knob on and off.
# kv_transfer needs a prefill/decode pair (2 ranks) and is left out.
# Every result JSON in $OUT/confined-1gpu.jsonl, a summary in
# $OUT/confined-1gpu-summary.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
CUCO=$(command -v cuco)
T=$(mktemp -d /tmp/cuco-confined.XXXXXX)
export CUCO_BUILD_CACHE=$T/cache
LOG=$OUT/confined-1gpu.jsonl
: > "$LOG"
START=$(date +%s)
"$CUCO" doctor --json > "$OUT/confined-doctor.json" 2>&1

# The transformed gemm_allgather (no build here: the evaluations build it).
"$CUCO" transform workloads/gemm_allgather --ranks 1 --workspace "$T/ws" --no-verify \
  > "$OUT/confined-transform.log" 2>&1
GEN0=$T/ws/gen_0/gemm_allgather.cu
cp "$GEN0" "$OUT/confined-gen0.cu" 2>/dev/null
sed -E 's/^(#define CUCO_SPLIT_[0-9]+) 1/\1 0/' "$GEN0" > "$T/gen0_nosplit.cu"

# NAME WORKLOAD PROGRAM LEVEL [cuco eval options...]
jobs_list=(
  "gemm_seed workloads/gemm_allgather - 3"
  "gemm_expert workloads/gemm_allgather workloads/gemm_allgather/expert.cu 3"
  "gemm_gen0 workloads/gemm_allgather $GEN0 3 --frozen-ref $GEN0"
  "gemm_gen0_nosplit workloads/gemm_allgather $T/gen0_nosplit.cu 3 --frozen-ref $GEN0"
  "moe_seed workloads/moe_dispatch_combine - 3"
  "moe_expert workloads/moe_dispatch_combine workloads/moe_dispatch_combine/expert.cu 3"
  "flash_seed workloads/flash_attn_cp - 3"
  "flash_expert workloads/flash_attn_cp workloads/flash_attn_cp/expert.cu 3"
  "hostile_once_only workloads/gemm_allgather tests/data/hostile/gpu/once_only.cu 2"
  "hostile_side_stream workloads/gemm_allgather tests/data/hostile/gpu/side_stream.cu 2"
  "hostile_host_thread workloads/gemm_allgather tests/data/hostile/gpu/host_thread.cu 2"
)

evaluate() { # NAME WL PROG LEVEL [opts]: one cuco eval, its JSON into $T/NAME.json
  local name=$1 wl=$2 prog=$3 level=$4
  shift 4
  local args=("$wl")
  [ "$prog" = - ] || args+=("$prog")
  timeout -k 5 400 "$CUCO" eval "${args[@]}" --ranks 1 --level "$level" --repeats 1 --json \
    "$@" > "$T/$name.json" 2> "$OUT/confined-$name.err"
}

# Builds first, all at once (level 1 fills the build cache), then the runs
# one after another so that each benchmark has the GPU to itself.
for j in "${jobs_list[@]}"; do
  read -r name wl prog level opts <<< "$j"
  evaluate "$name" "$wl" "$prog" 1 $opts &
done
wait
echo "builds done in $(( $(date +%s) - START )) s"
for j in "${jobs_list[@]}"; do
  read -r name wl prog level opts <<< "$j"
  evaluate "$name" "$wl" "$prog" "$level" $opts
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; print(json.dumps(d))' \
    "$T/$name.json" "$name" >> "$LOG" 2>/dev/null || echo "{\"name\":\"$name\",\"status\":\"no JSON\"}" >> "$LOG"
  echo "$name: $(tail -1 "$LOG" | cut -c1-160)"
done
python3 - "$LOG" "$OUT/confined-1gpu-summary.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = []
for r in rows:
    out.append({k: r.get(k) for k in ("name", "status", "level", "time_ms", "verify_s",
                                      "bench_s", "compile_s", "warning")} |
               {"excerpt_head": (r.get("excerpt") or "")[:300]})
bad = [r["name"] for r in out
       if (r["name"].startswith("hostile") and r["status"] == "ok")
       or (not r["name"].startswith("hostile") and r["status"] != "ok")]
json.dump({"rows": out, "unexpected": bad}, open(sys.argv[2], "w"), indent=1)
print("unexpected:", bad)
sys.exit(1 if bad else 0)
PY
rc=$?
echo "total $(( $(date +%s) - START )) s"
rm -rf "$T"
exit $rc
