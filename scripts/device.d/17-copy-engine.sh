#!/usr/bin/env bash
# scripts/device.d/17-copy-engine.sh: the copy-engine all-gather
# (device/ce.cuh, knob CUCO_COPY_ENGINE of transformed programs) on the GPUs
# at hand, one rank per GPU (CE_RANKS, default: every GPU).
#  1. bench/overlap/overlap_bench: cuBLAS GEMM beside an all-gather moved by
#     SMs or by the copy engines; the gemm_allgather shape, and the same with
#     4x the gather bytes (at one rank the gather is a local copy, which is
#     faster than NVLink: the larger copy lasts about as long as the 2-rank
#     gather over NVLink).
#  2. 'cuco transform' of gemm_allgather, flash_attn_cp and plugin_allgather;
#     each gen_0 with CUCO_COPY_ENGINE 1 verified with 'cuco eval --level 2'
#     (gemm_allgather's expert program, expert.cu, beside them), then the
#     seed, the expert, gen_0 and the variants timed, CE_ROUNDS interleaved
#     rounds of 'cuco eval --repeats 2'.
# CE_CTAS="8 16 32" adds overlap_bench runs with the SM gather on that many
# CTAs (held to fewer SMs, the copy also runs nearer NVLink's rate).
# Writes $OUT/ce/: overlap-*.json, steps.txt, summary.json, logs.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/ce
mkdir -p "$DEST"
NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
export LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
NGPU=$(nvidia-smi -L | grep -c '^GPU')
RANKS=${CE_RANKS:-$NGPU}
ROUNDS=${CE_ROUNDS:-2}
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$CUCO_BUILD_CACHE"
LOG=$DEST/steps.txt
START=$(date +%s)
note() { echo "$(date -u +%T) [$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
note "GPUs: $NGPU, ranks: $RANKS, NCCL_HOME=$NCCL_HOME"

# 1. the overlap microbenchmark
B=$(mktemp -d /tmp/ce-bench.XXXXXX)
nvcc -std=c++17 -arch=sm_90 -O3 -I"$NCCL_HOME/include" -Idevice -o "$B/overlap_bench" \
  bench/overlap/overlap_bench.cu -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas -lpthread > "$DEST/build.log" 2>&1
note "overlap_bench build rc=$?"
GB=$((4096 * 28672 * 2))
timeout 120 "$B/overlap_bench" --ranks "$RANKS" --out "$DEST/overlap-default.json" >> "$DEST/overlap.log" 2>&1
note "overlap_bench default rc=$?: $(grep -E 'hidden|Verification' "$DEST/overlap.log" | tail -2 | tr '\n' ' ')"
timeout 120 "$B/overlap_bench" --ranks "$RANKS" --gather-bytes $((4 * GB)) --out "$DEST/overlap-4x.json" \
  >> "$DEST/overlap.log" 2>&1
note "overlap_bench 4x gather rc=$?: $(grep -E 'hidden|Verification' "$DEST/overlap.log" | tail -2 | tr '\n' ' ')"
for c in ${CE_CTAS:-}; do  # the SM gather held to C CTAs (the rest of the SMs left to the GEMM)
  timeout 120 "$B/overlap_bench" --ranks "$RANKS" --ctas "$c" --out "$DEST/overlap-ctas$c.json" \
    >> "$DEST/overlap.log" 2>&1
  note "overlap_bench SM gather on $c CTAs rc=$?: $(grep -E 'hidden|Verification' "$DEST/overlap.log" | tail -2 | tr '\n' ' ')"
done
rm -rf "$B"

# 2. transformed programs with the knob on
WS=/tmp/ce-ws
rm -rf "$WS"
mkdir -p "$WS"
transform() {  # transform NAME DIR
  timeout 300 cuco transform "$2" --ranks "$RANKS" --workspace "$WS/$1" --quiet > "$DEST/transform-$1.txt" 2>&1
  note "transform $1: rc=$?"
}
transform gemm_allgather workloads/gemm_allgather &
transform flash_attn_cp workloads/flash_attn_cp &
transform plugin_allgather tests/data/transform/plugin_allgather &
wait

source scripts/knob-variant.sh
# "NAME WORKLOAD-DIR LABEL PATH" (PATH -: the seed); transformed programs are
# checked against their gen_0's frozen text (a foreign seed marks none)
declare -a JOBS
add() {  # add NAME DIR LABEL [SETTINGS]
  local g
  g=$(ls "$WS/$1"/gen_0/*.cu 2>/dev/null | head -1)
  [ -n "$g" ] || { note "$1: no gen_0 program"; return; }
  if [ -z "${4:-}" ]; then JOBS+=("$1 $2 $3 $g"); return; fi
  knob_variant "$g" "$WS/$1/$3.cu" "$4" && JOBS+=("$1 $2 $3 $WS/$1/$3.cu")
}
evalargs() {  # evalargs NAME PATH: the program and its frozen reference
  [ "$2" = - ] && return
  case "$2" in */expert.cu) echo "$2"; return ;; esac  # the seed's frozen text
  printf '%s\n' "$2" --frozen-ref "$(ls "$WS/$1"/gen_0/*.cu | head -1)"
}
GA=workloads/gemm_allgather FA=workloads/flash_attn_cp PA=tests/data/transform/plugin_allgather
JOBS+=("gemm_allgather $GA seed -" "flash_attn_cp $FA seed -")
add gemm_allgather $GA gen_0
add gemm_allgather $GA ce CUCO_COPY_ENGINE=1
JOBS+=("gemm_allgather $GA expert $GA/expert.cu")
add flash_attn_cp $FA gen_0
add flash_attn_cp $FA ce CUCO_COPY_ENGINE=1
add plugin_allgather $PA ce CUCO_COPY_ENGINE=1

note "verifying ${#JOBS[@]} programs"
for j in "${JOBS[@]}"; do
  read -r name dir label path <<< "$j"
  mapfile -t prog < <(evalargs "$name" "$path")
  timeout 200 cuco eval "$dir" "${prog[@]}" --ranks "$RANKS" --level 2 --json \
    > "$DEST/$name-$label-verify.json" 2> "$DEST/$name-$label-verify.err"
  note "verify $name $label: exit $? $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("status"), (j.get("excerpt") or "")[:200].replace("\n"," "))' "$DEST/$name-$label-verify.json" 2>&1)"
done

for r in $(seq 1 "$ROUNDS"); do  # CE_ROUNDS=0: verification only
  for j in "${JOBS[@]}"; do
    read -r name dir label path <<< "$j"
    [ "$name" = plugin_allgather ] && continue
    mapfile -t prog < <(evalargs "$name" "$path")
    timeout 200 cuco eval "$dir" "${prog[@]}" --ranks "$RANKS" --repeats 2 --json \
      > "$DEST/$name-$label-r$r.json" 2> "$DEST/$name-$label-r$r.err"
    note "round $r $name $label: exit $? $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("status"), j.get("time_ms"))' "$DEST/$name-$label-r$r.json" 2>&1)"
  done
done

scripts/eval-summary.py "$DEST" > "$DEST/summary.json"
note "summary written"
exit 0
