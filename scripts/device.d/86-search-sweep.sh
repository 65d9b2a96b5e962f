#!/usr/bin/env bash
# scripts/device.d/86-search-sweep.sh: the search against an exhaustive sweep
# of the same space (issue #24), on the GPU workloads at 2 ranks. For each
# workload of SS_WORKLOADS:
#  1. 'cuco transform' gives gen_0; bench/search/space.py trim gives it a
#     space small enough to sweep (the levels below; build knobs fixed), the
#     program both the sweep and the search start from;
#  2. 'cuco eval --level 2 --keep-build' builds it once and verifies it in
#     cuco's box (its run knobs are read at run time);
#  3. the sweep (space.py sweep) runs the build at the bench arguments once
#     per cell of the space (conditions honoured: cells that differ only in
#     moot knobs are one), SWEEP_ROUNDS rounds in fresh random orders, on the
#     GPUs of SS_SWEEP_GPUS; every run's timed steps are verified steps;
#  4. beside it, on the GPUs of SS_SEARCH_GPUS (empty: after the sweep, on
#     the same GPUs), 'cuco evolve --init PROGRAM --evaluations SS_EVALS';
#  5. space.py table, and space.py score: the table's median for the cell of
#     the search's best program.
# SS_SEARCH=0 leaves out the search; SWEEP_CELLS (a file of cells, JSON
# lines) times only those cells (e.g. a table's top cells, again).
# Writes $OUT/sweep/<workload>/{space.cu,runs.jsonl,table.json,search.json,
# score.json} and $OUT/sweep/steps.txt. The tables feed bench/search/replay.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/sweep
mkdir -p "$DEST"
WORKLOADS=${SS_WORKLOADS:-gemm_allgather flash_attn_cp}
SWEEP_GPUS=${SS_SWEEP_GPUS:-0,1}
# the search on GPUs 2,3 where there are four, else after the sweep
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 4 ]; then SEARCH_GPUS=${SS_SEARCH_GPUS-2,3}; else SEARCH_GPUS=${SS_SEARCH_GPUS-}; fi
EVALS=${SS_EVALS:-30}
RANKS=${SS_RANKS:-2}
export SWEEP_ROUNDS=${SWEEP_ROUNDS:-2}
export CUCO_BREAKDOWN=quick NCCL_NVLS_ENABLE=0
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$CUCO_BUILD_CACHE"
SPACE=bench/search/space.py
LOG=$DEST/steps.txt
note() { echo "$(date -u +%T) $*" | tee -a "$LOG"; }
source scripts/workload-args.sh

# the space of each workload: space.py trim options
space_of() {
  case "$1" in
    gemm_allgather)
      echo --fix CUCO_COMM_UNROLL=4 --levels CUCO_COMM_CTAS=0,16,64 \
        --levels CUCO_COMM_THREADS=512,1024 --levels CUCO_CHUNK_BYTES=0,1048576 ;;
    flash_attn_cp)
      echo --fix CUCO_COMM_UNROLL=4 --levels CUCO_COMM_CTAS=0,16,64 \
        --levels CUCO_COMM_THREADS=256,512,1024 --levels CUCO_CHUNK_BYTES=0,262144,4194304 ;;
    moe_dispatch_combine)
      echo --fix CUCO_COMM_UNROLL=4 --fix CUCO_COMM_THREADS=512 --levels CUCO_P2P_CTAS=2,8,32 \
        --levels CUCO_P2P_NCCL_FROM=0,1048576,67108864 ;;
    kv_transfer)
      echo --fix CUCO_COMM_UNROLL=4 --fix CUCO_DECODE_SPLIT=256 --fix CUCO_COMM_THREADS=512 \
        --fix CUCO_P2P_CTAS=8 --levels CUCO_P2P_PIECES=1,8,16 \
        --levels CUCO_P2P_NCCL_FROM=1048576,67108864 ;;
  esac
}

prepare() { # $1 workload: gen_0, its trimmed space, one verified build
  local w=$1 d=$DEST/$1
  mkdir -p "$d"
  timeout 300 cuco transform "workloads/$w" --workspace "$d/ws" --quiet > "$d/transform.txt" 2>&1
  local g
  g=$(ls "$d"/ws/gen_0/*.cu 2>/dev/null | head -1)
  [ -n "$g" ] || { note "$w: transform gave no program"; return 1; }
  # shellcheck disable=SC2046
  python3 $SPACE trim "$g" "$d/space.cu" $(space_of "$w") || { note "$w: trim failed"; return 1; }
  CUDA_VISIBLE_DEVICES=$SWEEP_GPUS timeout 300 cuco eval "workloads/$w" "$d/space.cu" --level 2 \
    --keep-build --work-dir "$d/build" --frozen-ref "$g" --json > "$d/build.json" 2> "$d/build.err"
  note "$w: build + verify exit $? ($(python3 $SPACE cells "$d/space.cu" | wc -l) cells)"
}

search() { # $1 workload, $2 GPUs
  local w=$1 d=$DEST/$1
  CUDA_VISIBLE_DEVICES=$2 timeout 400 cuco evolve "workloads/$w" --init "$d/space.cu" \
    --evaluations "$EVALS" --seed 1 --workspace "$d/search" --json > "$d/search.jsonl" 2> "$d/search.err"
  note "$w: search exit $?"
  grep '"event":"done"' "$d/search.jsonl" | tail -1 > "$d/search.json"
}

sweep() { # $1 workload
  local w=$1 d=$DEST/$1 dir bin out
  dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["build_dir"] or "")' "$d/build.json" 2>/dev/null)
  out=$(awk '/^  output:/ {print $2; exit}' "workloads/$w/workload.yaml")
  bin=$dir/$out
  [ -x "$bin" ] || { note "$w: no build at $bin"; return 1; }
  read -ra bargs <<< "$(args_of "workloads/$w" bench)"
  local pass=(-x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUCO_BREAKDOWN) k
  for k in $(python3 -c 'import json,sys; print(" ".join(k["name"] for k in json.load(sys.stdin)))' \
    < <(python3 $SPACE knobs "$d/space.cu")); do pass+=(-x "CUCO_KNOB_$k"); done
  CUDA_VISIBLE_DEVICES=$SWEEP_GPUS python3 $SPACE sweep "$d/space.cu" "$d/runs.jsonl" -- \
    mpirun -np "$RANKS" --bind-to none --oversubscribe "${pass[@]}" "$bin" "${bargs[@]}" 2> "$d/sweep.err"
  note "$w: sweep exit $? ($(wc -l < "$d/runs.jsonl") runs)"
  python3 $SPACE table "$d/space.cu" "$d/runs.jsonl" "$w" "$d/table.json"
}

for w in $WORKLOADS; do prepare "$w" & done
wait
for w in $WORKLOADS; do
  [ -f "$DEST/$w/space.cu" ] || continue
  spid=
  if [ "${SS_SEARCH:-1}" = 1 ] && [ -n "$SEARCH_GPUS" ]; then search "$w" "$SEARCH_GPUS" & spid=$!; fi
  sweep "$w"
  if [ -n "$spid" ]; then wait "$spid"; elif [ "${SS_SEARCH:-1}" = 1 ]; then search "$w" "$SWEEP_GPUS"; fi
  rm -f "$DEST/$w/score.json"
  best=$(ls "$DEST/$w"/search/best.* 2>/dev/null | head -1)
  [ -n "$best" ] && [ -f "$DEST/$w/table.json" ] &&
    python3 $SPACE score "$DEST/$w/table.json" "$best" > "$DEST/$w/score.json"
  note "$w: score $(cat "$DEST/$w/score.json" 2>/dev/null)"
done
