#!/usr/bin/env bash
# scripts/device.d/16-foreign-1gpu.sh: the host-driven programs written in
# other engineers' styles (tests/data/transform: tp_mlp_allreduce,
# pipeline_stages, ring_pass, reduce_scatter_grad) on a 1-GPU machine: for
# each, the seed verified by 'cuco eval --level 2' and 'cuco transform' to a
# verified device-initiated gen_0, at 1 rank (--ranks 1); and again at 2
# ranks when the machine has two GPUs or more. FOREIGN_PROGRAMS names other
# programs of tests/data/transform instead.
# The programs run side by side (four at one rank, two at two ranks: their
# builds dominate), so the times in the reports are not benchmark quality;
# correctness is what this checks.
# Summary in $OUT/foreign-1gpu-summary.txt, each report and log in
# $OUT/foreign-1gpu/.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT/foreign-1gpu"
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0
SUMMARY=$OUT/foreign-1gpu-summary.txt
: > "$SUMMARY"
START=$(date +%s)
BUDGET_S=${BUDGET_S:-200}
CUCO=$(command -v cuco || echo "$PWD/build-release/cuco")
PROGRAMS=${FOREIGN_PROGRAMS:-tp_mlp_allreduce pipeline_stages ring_pass reduce_scatter_grad}
T=$(mktemp -d /tmp/cuco-foreign.XXXXXX)
trap 'rm -rf "$T"' EXIT
note() { echo "$*" | tee -a "$SUMMARY"; }

note "date: $(date -u +%FT%TZ) cuco=$CUCO NCCL_HOME=${NCCL_HOME:-unset}"
[ -x "$CUCO" ] || { note "no cuco binary: neither on PATH nor $CUCO"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
note "gpus: $ngpu"
RANKS="1"
[ "$ngpu" -ge 2 ] && RANKS="1 2"

# one NAME RANKS: seed eval (L2) and the transform, side by side
one() {
  local name=$1 ranks=$2 dir="tests/data/transform/$1" log="$OUT/foreign-1gpu/$1-r$2"
  mkdir -p "$T/r$ranks"
  local left=$(( BUDGET_S - ($(date +%s) - START) - 5 ))
  [ $left -gt 170 ] && left=170
  if [ $left -lt 30 ]; then
    echo "skipped (time budget spent)" > "$log.seed.log"
    echo "skipped (time budget spent)" > "$log.transform.log"
    echo 124 > "$log.seed.rc"; echo 124 > "$log.transform.rc"
    return
  fi
  ( timeout -k 5 "$left" "$CUCO" eval "$dir" --ranks "$ranks" --level 2 --quiet > "$log.seed.log" 2>&1; echo $? > "$log.seed.rc" ) &
  ( timeout -k 5 "$left" "$CUCO" transform "$dir" --ranks "$ranks" --workspace "$T/r$ranks/ws-$name" --quiet \
      > "$log.transform.log" 2>&1; echo $? > "$log.transform.rc"
    cp "$T/r$ranks/ws-$name"/gen_0/transform_report.md "$log.transform_report.md" 2>/dev/null ) &
  wait
}

status=0
for r in $RANKS; do
  t0=$(date +%s)
  # at one rank all four side by side; at two, two at a time (fewer
  # processes spinning on the same two GPUs)
  width=4
  [ "$r" -gt 1 ] && width=2
  running=0
  for name in $PROGRAMS; do
    one "$name" "$r" &
    running=$((running + 1))
    if [ $running -ge $width ]; then wait; running=0; fi
  done
  wait
  note "ranks=$r: done in $(( $(date +%s) - t0 )) s"
  for name in $PROGRAMS; do
    log="$OUT/foreign-1gpu/$name-r$r"
    src=$(cat "$log.seed.rc" 2>/dev/null || echo "?")
    trc=$(cat "$log.transform.rc" 2>/dev/null || echo "?")
    seed_status=$(grep -E '^status' "$log.seed.log" | head -1 | tr -s ' ')
    times=$(grep -E 'time|verification' "$log.transform_report.md" 2>/dev/null | head -4 | tr '\n' ';' | tr -s ' ')
    note "  $name ranks=$r: seed eval --level 2 rc=$src ($seed_status); transform rc=$trc; $times"
    [ "$src" = 0 ] || { status=1; tail -5 "$log.seed.log" | sed 's/^/    seed: /' | tee -a "$SUMMARY"; }
    [ "$trc" = 0 ] || { status=1; tail -8 "$log.transform.log" | sed 's/^/    transform: /' | tee -a "$SUMMARY"; }
  done
done
note "total $(( $(date +%s) - START )) s, status $status"
exit $status
