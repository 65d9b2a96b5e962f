#!/usr/bin/env bash
# replay.sh: the search benchmark of issue #24 on a measured knob sweep. A
# sweep's table (scripts/device.d/86-search-sweep.sh: every cell of a
# program's knob space timed on the GPU, each cell's median and every run's
# deviation from it) becomes a CPU workload whose time is the table's, with
# the sweep's own noise (bench/search/space.py replay). Runs `cuco evolve
# --evaluations EVALS` on it for seeds 1..SEEDS from the swept program's
# setting, scores each run's best program by its cell's median, and prints
# one JSON object (bench/search/summary.py): the seeds that found the best
# cell, and each seed's share of the best cell's gain.
#
# usage: bench/search/replay.sh TABLE.json [SEEDS=20] [EVALS=30] [OUT.json]
#   env: CUCO_BIN (default build-doe-rel/cuco, else build/cuco),
#        REPLAY_EVOLVE_ARGS (extra `cuco evolve` options), REPLAY_WORK (a
#        folder to keep the workspaces in), TMPDIR
set -euo pipefail
table=${1:?usage: replay.sh TABLE.json [SEEDS] [EVALS] [OUT.json]}
seeds=${2:-20}
evals=${3:-30}
out=${4:-}
source "$(dirname "$0")/common.sh"
search_setup replay.sh "${REPLAY_WORK:-}"
space="$repo/bench/search/space.py"

"$space" replay "$table" "$work/workload"
read -r default_ms best_ms name < <(python3 - "$table" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print(t["program_cell"]["ms"], t["best"]["ms"], t["workload"])
PY
)

best_of() { "$space" score "$table" "$1/best.c" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ms"])'; }
search_seeds "$work/workload" "$seeds" "$evals" best_of "${REPLAY_EVOLVE_ARGS:-}"

"$repo/bench/search/summary.py" "search_replay_$name" \
    "bench/search/replay.sh $(basename "$table") $seeds $evals" \
    "$default_ms" "$best_ms" "$seeds" "$evals" "$wall_s" "$out" "${rows[@]}"
