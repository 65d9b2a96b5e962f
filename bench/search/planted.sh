#!/usr/bin/env bash
# planted.sh: the search benchmark of issue #24 on tests/data/search_planted
# (knobs with a planted two-knob interaction, +-2% noise per run, no real
# work). Runs `cuco evolve --evaluations EVALS` for seeds 1..SEEDS, scores
# each run's best program by its exact (noise-free) time, and prints one
# JSON object: the seeds that found the best cell of the space (found by an
# exhaustive sweep of the exact times) and each seed's share of the best
# cell's gain (gain = default time / time - 1).
#
# usage: bench/search/planted.sh [SEEDS=20] [EVALS=30] [OUT.json]
#   env: CUCO_BIN (default build-doe-rel/cuco, else build/cuco),
#        PLANTED_EVOLVE_ARGS (extra `cuco evolve` options), PLANTED_WORK
#        (a folder to keep the workspaces in, ws1 ... wsN), TMPDIR
set -euo pipefail
seeds=${1:-20}
evals=${2:-30}
out=${3:-}
source "$(dirname "$0")/common.sh"
search_setup planted.sh "${PLANTED_WORK:-}" # PLANTED_WORK keeps the workspaces (ws1, ws2, ...)
wl="$repo/tests/data/search_planted"

# exact time of a program file (compiled as the manifest does, run --exact)
exact_ms() {
    cc -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -o "$work/exact" "$1" -lm
    "$work/exact" --exact | sed -n 's/^CUCO_RESULT {"time_ms":\([0-9.]*\).*/\1/p'
}

# the exhaustive sweep: the exact time of every setting of the four knobs
# the model reads (planted.c --exact-setting; the fifth is never read)
exact_ms "$wl/planted.c" >/dev/null
cp "$work/exact" "$work/model"
best_ms=$(python3 - "$wl/planted.c" "$work/model" <<'PY'
import itertools, re, subprocess, sys
src = open(sys.argv[1]).read()
knobs = re.findall(r'^#define (\w+) (\S+)\s*// cuco:knob (.*)$', src, re.M)
read = [k[2].split() for k in knobs if k[0] != "CUCO_PL_TRACE"]
best = None
for vals in itertools.product(*read):
    out = subprocess.run([sys.argv[2], "--exact-setting", *vals], capture_output=True, text=True,
                         check=True).stdout
    t = float(re.search(r'"time_ms":([0-9.]+)', out).group(1))
    best = t if best is None or t < best else best
print("%.6f" % best)
PY
)
default_ms=$(exact_ms "$wl/planted.c")

best_of() { exact_ms "$1/best.c"; }
search_seeds "$wl" "$seeds" "$evals" best_of "${PLANTED_EVOLVE_ARGS:-}"

"$repo/bench/search/summary.py" search_planted "bench/search/planted.sh $seeds $evals" \
    "$default_ms" "$best_ms" "$seeds" "$evals" "$wall_s" "$out" "${rows[@]}"
