#!/usr/bin/env bash
# scripts/device.d/84-knob-sweep.sh: what the knobs of the transformed
# programs reach, measured directly rather than through a search, beside the
# workload's expert program (expert.cu, the hand-written host pipeline; the
# seeds are plain and carry no overlap knobs). For each
# workload in SWEEP_WORKLOADS, takes its transformed program (gen_0) from
# SWEEP_GEN0_DIR/NAME.cu (default .devcarry/gen0, copied there from an
# earlier session's workspace) or, when absent, from a fresh 'cuco
# transform', writes one variant per setting listed below, builds every
# variant in parallel ('cuco eval --level 1', shared build cache), then times
# the seed, the expert program, gen_0 and every variant with 'cuco eval --repeats SWEEP_REPEATS'
# one after the other, in SWEEP_ROUNDS interleaved rounds.
# Writes $OUT/sweep/NAME-LABEL-rR.json and $OUT/sweep/summary.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/sweep
mkdir -p "$DEST"
WORKLOADS=${SWEEP_WORKLOADS:-gemm_allgather kv_transfer moe_dispatch_combine flash_attn_cp}
GEN0_DIR=${SWEEP_GEN0_DIR:-.devcarry/gen0}
REPEATS=${SWEEP_REPEATS:-3}
ROUNDS=${SWEEP_ROUNDS:-1}
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$CUCO_BUILD_CACHE"
LOG=$DEST/steps.txt
note() { echo "$(date -u +%T) $*" | tee -a "$LOG"; }

# settings per workload: "LABEL KNOB=VALUE[,KNOB=VALUE...]"; SWEEP_SETTINGS
# ("LABEL KNOB=V[,...];LABEL ...") replaces them for every workload
settings() {
  if [ -n "${SWEEP_SETTINGS:-}" ]; then
    tr ';' '\n' <<< "$SWEEP_SETTINGS"
    return
  fi
  case "$1" in
    gemm_allgather | flash_attn_cp) printf '%s\n' "ce CUCO_COPY_ENGINE=1" ;;
    kv_transfer) printf '%s\n' "p16 CUCO_P2P_CTAS=16" ;;
  esac
}

source scripts/knob-variant.sh

WORK=$DEST/programs
mkdir -p "$WORK"
declare -a JOBS # "NAME LABEL PATH" (PATH empty: the seed)
for w in $WORKLOADS; do
  g=$GEN0_DIR/$w.cu
  if [ ! -f "$g" ]; then
    note "$w: no $g; transforming"
    timeout 300 cuco transform "workloads/$w" --workspace "$DEST/ws-$w" --quiet > "$DEST/transform-$w.txt" 2>&1
    g=$(ls "$DEST/ws-$w"/gen_0/*.cu 2>/dev/null | head -1)
    [ -n "$g" ] || { note "$w: transform gave no program"; continue; }
  fi
  mkdir -p "$WORK/$w"
  cp "$g" "$WORK/$w/gen_0.cu"
  JOBS+=("$w seed -" "$w expert workloads/$w/expert.cu" "$w gen_0 $WORK/$w/gen_0.cu")
  while read -r label sets; do
    [ -n "$label" ] || continue
    knob_variant "$g" "$WORK/$w/$label.cu" "$sets" && JOBS+=("$w $label $WORK/$w/$label.cu")
  done < <(settings "$w")
done

note "building ${#JOBS[@]} programs in parallel"
pids=()
for j in "${JOBS[@]}"; do
  read -r w label path <<< "$j"
  prog=(); [ "$path" = - ] || prog=("$path")
  timeout 300 cuco eval "workloads/$w" "${prog[@]}" --level 1 --json > "$DEST/$w-$label-build.json" 2> "$DEST/$w-$label-build.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
note "builds done"

for r in $(seq 1 "$ROUNDS"); do
  for j in "${JOBS[@]}"; do
    read -r w label path <<< "$j"
    prog=(); [ "$path" = - ] || prog=("$path")
    timeout 240 cuco eval "workloads/$w" "${prog[@]}" --json --repeats "$REPEATS" \
      > "$DEST/$w-$label-r$r.json" 2> "$DEST/$w-$label-r$r.err"
    note "round $r $w $label: exit $?"
  done
done

scripts/eval-summary.py "$DEST" > "$DEST/summary.json"
note "summary written"
exit 0
