#!/usr/bin/env bash
# scripts/device.d/43-timeline.sh: the kernel and copy timeline of a test
# program's gen_0 (TL_PROGRAM, a folder of tests/data/transform; default
# a2a_expert) and of knob variants of it (TL_VARIANTS, "NAME:K=V[,K=V...]"
# space separated, as scripts/knob-variant.sh takes them), run by mpirun at
# RANKS ranks with TL_ARGS (default: the manifest's bench arguments) under
# cuco's CUPTI timeline library (libcuco_timeline.so beside the cuco binary):
# every kernel, copy and memset with its stream and its start and end. The
# seed runs first, under the same library, for comparison.
# Results: $OUT/tl-<variant>/timeline.<pid>.jsonl, one file a rank, and a
# summary per kernel on stdout (scripts/timeline-summary.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
source scripts/knob-variant.sh
step_start cuco-timeline timeline
p=${TL_PROGRAM:-a2a_expert}
d=tests/data/transform/$p
f=$(sed -n 's/^evolve_file: *//p' "$d/workload.yaml")
lib=$(dirname "$CUCO")/libcuco_timeline.so
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
"$CUCO" transform "$d" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$T/tx.log" 2>&1
g=$T/ws/gen_0/$f
[ -s "$g" ] || { echo "$p: no gen_0: $(tail -2 "$T/tx.log")"; exit 1; }
ARGS=${TL_ARGS:-$(bench_args "$d/workload.yaml")}
cp "$g" "$T/gen0.cu"
cp "$d/$f" "$T/seed.cu"
names=(seed gen0)
for v in ${TL_VARIANTS:-}; do
  knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" && names+=("${v%%:*}")
done
for n in "${names[@]}"; do
  build_program "$T/$n.cu" "$T/$n" &
done
wait
for n in "${names[@]}"; do
  [ -x "$T/$n" ] || { status=1; continue; }
  mkdir -p "$OUT/tl-$n"
  CUDA_INJECTION64_PATH=$lib CUCO_TIMELINE_DIR=$OUT/tl-$n timeout -k 5 120 mpirun -np "$RANKS" --bind-to none \
    -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_INJECTION64_PATH -x CUCO_TIMELINE_DIR "$T/$n" $ARGS 2>&1 | tail -2
done
python3 scripts/timeline-summary.py "${names[@]/#/$OUT/tl-}"
exit $status
