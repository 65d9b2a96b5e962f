# shellcheck shell=bash
# bench/search/common.sh: sourced by the search benchmarks (planted.sh,
# replay.sh).
#
# search_setup NAME KEEP: sets repo, bin ($CUCO_BIN, else build-doe-rel/cuco
# or build/cuco of the checkout) and work (the folder KEEP when given, else a
# temporary one removed at exit).
#
# search_seeds WORKLOAD SEEDS EVALS SCORE EXTRA: `cuco evolve WORKLOAD
# --evaluations EVALS --seed S` for S in 1..SEEDS into $work/wsS (EXTRA: more
# options, split on spaces), then `SCORE $work/wsS` prints the exact time of
# that run's best program; fills rows with "S:MS:<the run's done line>" and
# wall_s with the seconds the runs took.
search_setup() {
    local name=$1 keep=$2 b
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    bin=${CUCO_BIN:-}
    if [ -z "$bin" ]; then
        for b in "$repo/build-doe-rel/cuco" "$repo/build/cuco"; do
            [ -x "$b" ] && { bin=$b; break; }
        done
    fi
    [ -x "$bin" ] || { echo "$name: no cuco binary (set CUCO_BIN)" >&2; exit 2; }
    if [ -n "$keep" ]; then
        work=$keep
        mkdir -p "$work"
    else
        work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
        # shellcheck disable=SC2064
        trap "rm -rf '$work'" EXIT
    fi
}

search_seeds() {
    local wl=$1 seeds=$2 evals=$3 score=$4 extra=$5 seed ws t done_line t0
    rows=()
    t0=$(date +%s)
    for seed in $(seq 1 "$seeds"); do
        ws="$work/ws$seed"
        # shellcheck disable=SC2086
        "$bin" evolve "$wl" --workspace "$ws" --evaluations "$evals" --seed "$seed" --json \
            $extra >"$work/log$seed" 2>&1 ||
            { echo "seed $seed failed:" >&2; tail -5 "$work/log$seed" >&2; exit 1; }
        t=$("$score" "$ws") || { echo "seed $seed: its best program could not be scored" >&2; exit 1; }
        done_line=$(grep '"event":"done"' "$work/log$seed" | tail -1)
        rows+=("$seed:$t:$done_line")
    done
    wall_s=$(($(date +%s) - t0))
}
