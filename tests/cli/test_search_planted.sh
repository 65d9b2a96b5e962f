#!/usr/bin/env bash
# test_search_planted.sh: the structured knob search (issue #24) on
# tests/data/search_planted (four reachable knobs of 2-4 levels, a planted
# two-knob interaction, +-2% noise, one knob the program never reads), for
# real through `cuco evolve --evaluations 30` (bench/search/planted.sh, 5
# seeds; the benchmark runs 20):
#  - every seed's best program is the best cell of the space (found by an
#    exhaustive sweep of the noise-free times), so no seed keeps less than
#    95% of the best's gain;
#  - the search screens first (knob:screen children) and never varies the
#    knob the program cannot read;
#  - `cuco report` prints the effects table, with the planted interaction.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
command -v cc >/dev/null || { echo "skip: no C compiler (cc)"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/search_planted.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
sql() { # sql DB QUERY: prints rows, fields separated by '|'
    python3 -c 'import sqlite3,sys
c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro",uri=True)
for r in c.execute(sys.argv[2]): print("|".join("" if v is None else str(v) for v in r))' "$1" "$2"
}

start=$(date +%s)
PLANTED_WORK="$T/work" CUCO_BIN="$CUCO_BIN" "$CUCO_SRC/bench/search/planted.sh" 5 30 \
    "$T/result.json" >"$T/out" 2>&1 || { cat "$T/out"; echo "FAIL planted.sh"; exit 1; }
echo "5 seeds in $(($(date +%s) - start)) s"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/result.json" "$1"; }
check "every seed found the best cell ($(field found_best) of 5)" [ "$(field found_best)" = 5 ]
check "worst seed keeps >= 95% of the best's gain ($(field worst_share))" \
    python3 -c "import sys; sys.exit(0 if $(field worst_share) >= 0.95 else 1)"

screens=0 unread=0 twice=0
for seed in 1 2 3 4 5; do
    db="$T/work/ws$seed/runs.db"
    first=$(sql "$db" "select patch_type from programs where mutator='knob' order by id limit 1")
    [ "$first" = knob:screen ] && screens=$((screens + 1))
    # a failed query counts as a failure (999)
    n=$(sql "$db" "select count(*) from programs where knobs like '%\"CUCO_PL_TRACE\":\"1\"%'")
    unread=$((unread + ${n:-999}))
    n=$(sql "$db" "select count(*) - count(distinct knobs) from programs where mutator='knob'")
    twice=$((twice + ${n:-999}))
done
check "every search screens first ($screens of 5)" [ "$screens" = 5 ]
check "the knob the program never reads is never varied ($unread programs)" [ "$unread" = 0 ]
check "no setting measured twice in a run ($twice repeats)" [ "$twice" = 0 ]

"$CUCO_BIN" report "$T/work/ws1" --out "$T/report" --no-gnuplot >"$T/report.out" 2>&1 ||
    { cat "$T/report.out"; echo "FAIL cuco report"; exit 1; }
check "report.md has the effects table" grep -q '^Knob effects' "$T/report/report.md"
check "report.md shows the planted pair" \
    grep -Eq '^- CUCO_PL_(LOCAL_FIRST=1|CHUNKS=4) alone .*, with CUCO_PL_(CHUNKS=4|LOCAL_FIRST=1) -' \
    "$T/report/report.md"
check "report.html has the effects table" grep -q '<pre id="effects">' "$T/report/report.html"
[ $fail = 0 ] || { grep -A12 '^Knob effects' "$T/report/report.md"; }
exit $fail
