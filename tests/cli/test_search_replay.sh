#!/usr/bin/env bash
# test_search_replay.sh: the structured knob search (issue #24) on measured
# GPU landscapes: bench/search/replay.sh turns a sweep of every cell of a
# transformed program's knob space (bench/results/sweeps/, timed on 2 GPUs)
# into a CPU workload with the sweep's times and noise, and runs `cuco
# evolve --evaluations 30` on it. Checks:
#  - space.py counts the same cells in the replay program as the sweep did
#    (the knobs' conditions read the same way on both sides);
#  - on gemm_allgather's sweep (a 5.5% best gain, noise 0.2%), every one of
#    5 seeds ends on the best cell;
#  - on kv_transfer's (2.9% gain, two cells 0.03% apart at the top), no seed
#    keeps less than 95% of the best cell's gain.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
command -v cc >/dev/null || { echo "skip: no C compiler (cc)"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/search_replay.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
sweeps=$CUCO_SRC/bench/results/sweeps
space=$CUCO_SRC/bench/search/space.py
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

for w in gemm_allgather kv_transfer; do
    table=$(ls "$sweeps"/*-"$w"-*.json | tail -1)
    "$space" replay "$table" "$T/$w-workload" || { echo "FAIL space.py replay $w"; exit 1; }
    n=$("$space" cells "$T/$w-workload/replay.c" | wc -l)
    check "$w: the replay program has the sweep's $(field "$table" cells_in_space) cells ($n)" \
        [ "$n" = "$(field "$table" cells_in_space)" ]
    CUCO_BIN="$CUCO_BIN" REPLAY_WORK="$T/$w-work" "$CUCO_SRC/bench/search/replay.sh" "$table" 5 30 \
        "$T/$w.json" >"$T/$w.out" 2>&1 || { cat "$T/$w.out"; echo "FAIL replay.sh $w"; exit 1; }
done
check "gemm_allgather: every seed ends on the best cell ($(field "$T/gemm_allgather.json" found_best) of 5)" \
    [ "$(field "$T/gemm_allgather.json" found_best)" = 5 ]
worst=$(field "$T/kv_transfer.json" worst_share)
check "kv_transfer: the worst seed keeps >= 95% of the best cell's gain ($worst)" \
    python3 -c "import sys; sys.exit(0 if $worst >= 0.95 else 1)"
exit $fail
