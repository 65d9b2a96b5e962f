#!/usr/bin/env bash
# test_evolve.sh: 'cuco evolve' on a small copy of workloads/cpu_demo (8 knob
# settings, small sizes, 1 bench repeat), for real:
#  - an exhaustive sweep (the search run to "space exhausted"), whose
#    apparent improvements are re-timed and whose best held its re-timing,
#    and a search over the same single measurements (the evaluation cache)
#    that finds the sweep's best setting with fewer programs than the sweep;
#  - a changed manifest is a new scope for the cache (evaluated anew);
#  - a second concurrent evolve on the same workspace is refused (exit 4: the workspace is in use);
#  - kill -9 mid-run, then resume: the same run finishes, nothing pending,
#    the evaluation budget counted once;
#  - the test-only mutators (garbage answer, edit outside the blocks) are
#    recorded as patch_failed and the run goes on;
#  - --help documents the options and config keys; a bad config is file:line, exit 2.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
[ -f "$CUCO_SRC/workloads/cpu_demo/main.c" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/evolve.XXXXXX")
bg=
trap '[ -n "$bg" ] && kill -9 $bg 2>/dev/null; rm -rf "$T"' EXIT
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
jfield() { # jfield FILE KEY: KEY of the last JSON line holding "event":"done"
    python3 -c 'import json,sys
d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
d=[x for x in d if x.get("event")=="done"]
v=d[-1][sys.argv[2]] if d else ""
print(json.dumps(v,sort_keys=True) if isinstance(v,dict) else v)' "$1" "$2"
}

# the small workload: 4 x 2 knob settings
WL="$T/wl"
mkdir -p "$WL"
sed -e 's|^#define CUCO_BLOCK 8 .*|#define CUCO_BLOCK 8        // cuco:knob 8 16 32 64|' \
    -e 's|^#define CUCO_CHUNK_ROWS 256 .*|#define CUCO_CHUNK_ROWS 256 // cuco:knob 64 256|' \
    "$CUCO_SRC/workloads/cpu_demo/main.c" >"$WL/main.c"
grep -q 'cuco:knob 8 16 32 64$' "$WL/main.c" && grep -q 'cuco:knob 64 256$' "$WL/main.c" ||
    { echo "FAIL the knob lines of cpu_demo/main.c changed; update this test"; exit 1; }
cat >"$WL/workload.yaml" <<'YAML'
name: evolve_small
ranks: 2
gpu: false
sources: [main.c]
evolve_file: main.c
build:
  command: [mpicc, -O2, -std=c11, -o, "{out}", "{evolve_file}", -lm]
  output: cpu_demo
  timeout_s: 60
run:
  launcher: mpirun
verify:
  args: [--n, "64", --iters, "1", --warmup, "0"]
  timeout_s: 30
bench:
  args: [--n, "384", --iters, "3", --warmup, "1"]
  timeout_s: 60
  repeats: 1
YAML

# usage and config errors
"$CUCO_BIN" evolve --help >"$T/help" 2>&1
check "--help lists options and config keys" grep -q -- '--budget-usd' "$T/help"
check "--help documents novelty_threshold" grep -q 'novelty_threshold' "$T/help"
printf 'islands: 2\nselection: sideways\n' >"$T/bad.yaml"
"$CUCO_BIN" evolve "$WL" --config "$T/bad.yaml" --workspace "$T/bad" >/dev/null 2>"$T/err"
check "bad config exits 2" [ $? -eq 2 ]
check "bad config names file:line" grep -q "bad.yaml:2:" "$T/err"

# exhaustive sweep: run until the space is exhausted
WS="$T/ws"
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --islands 1 --evaluations 100 --generations 100 \
    --json >"$T/sweep.json" 2>"$T/sweep.err"
check "sweep exits 0" [ $? -eq 0 ]
check "sweep stops with space exhausted" [ "$(jfield "$T/sweep.json" stop)" = "space exhausted" ]
check "sweep evaluated all 8 settings" [ "$(jfield "$T/sweep.json" evaluations)" = 8 ]
# the run's first program is timed with the whole breakdown (the bound comes
# from it); each candidate with the quick one (one step each)
check "the seed's breakdown is whole" [ "$(sql "$WS/runs.db" "select count(*) from evaluations e join programs p on p.code_hash=e.code_hash where p.run_id=1 and p.generation=0 and e.status='ok' and e.metrics like '%compute_ms%' and e.metrics not like '%quick%'")" = 1 ]
check "each candidate's breakdown is quick" [ "$(sql "$WS/runs.db" "select count(*) from evaluations e join programs p on p.code_hash=e.code_hash where p.run_id=1 and p.generation>0 and e.status='ok' and e.metrics not like '%\"breakdown\":\"quick\"%'")" = 0 ]
# re-timing (default 2 rounds): apparent improvements were timed again beside
# the best, and the best named is the seed or a program that held. A program
# measured faster than the seed is an apparent improvement (over the seed, or
# over a champion that itself came through a re-timing); when none was, no
# re-timing is due.
seed_ms=$(sql "$WS/runs.db" "select e.time_ms from evaluations e join programs p on p.code_hash=e.code_hash where p.run_id=1 and p.generation=0 and e.status='ok' limit 1")
faster=$(sql "$WS/runs.db" "select count(*) from evaluations e join programs p on p.code_hash=e.code_hash where p.run_id=1 and p.generation>0 and e.status='ok' and e.time_ms < $seed_ms")
retimings=$(jfield "$T/sweep.json" retimings)
echo "sweep: seed $seed_ms ms, $faster programs measured faster, $retimings re-timings"
if [ "$faster" -gt 0 ]; then
    check "sweep re-timed apparent improvements" [ "$retimings" -ge 1 ]
else
    check "sweep: nothing beat the seed, nothing re-timed" [ "$retimings" -eq 0 ]
fi
best_id=$(jfield "$T/sweep.json" best_id)
check "sweep's best is the seed or held its re-timing" [ "$(sql "$WS/runs.db" "select count(*) from programs p where p.id=$best_id and (p.generation=0 or exists (select 1 from retimings r where r.run_id=1 and r.held=1 and r.challenger_id=p.id))")" = 1 ]
# the evaluation cache keeps each program's first, single measurement
sweep_best=$(sql "$WS/runs.db" "select p.knobs from evaluations e join programs p on p.code_hash=e.code_hash where e.status='ok' and p.run_id=1 order by e.time_ms, p.id limit 1")
sweep_ms=$(sql "$WS/runs.db" "select min(time_ms) from evaluations where status='ok'")
echo "sweep best single measurement: $sweep_best, $sweep_ms ms"
check "best.c written" grep -q 'EVOLVE-BLOCK-START' "$WS/best.c"
check "progress lines are JSON" grep -q '"event":"generation"' "$T/sweep.json"

# search over the same single measurements (all from the cache, no
# re-timing), fewer programs
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --fresh --islands 1 --generations 3 --seed 3 \
    --retime-rounds 0 --json >"$T/search.json" 2>"$T/search.err"
check "search exits 0" [ $? -eq 0 ]
search_best=$(jfield "$T/search.json" knobs)
n_search=$(sql "$WS/runs.db" "select count(distinct code_hash) from programs where run_id=2 and status='ok'")
echo "search best: $search_best with $n_search programs"
# cpu_demo's settings lie within a few percent of each other at this size, so
# which one is fastest is noise; the search must name the fastest of what it
# evaluated, and no more of the sweep's settings can beat it than the search
# left out
search_ms=$(jfield "$T/search.json" time_ms)
search_min=$(sql "$WS/runs.db" "select min(e.time_ms) from evaluations e where e.status='ok' and e.code_hash in (select code_hash from programs where run_id=2 and status='ok')")
rank=$(sql "$WS/runs.db" "select count(*) from evaluations where status='ok' and time_ms < $search_ms - 1e-5")
echo "sweep best ${sweep_ms} ms, search best ${search_ms} ms (rank $((rank + 1)) of the sweep)"
check "search names the fastest program it evaluated" \
    python3 -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-5 else 1)' "$search_ms" "$search_min"
check "search's best is beaten by no more settings than it left out" [ "$rank" -le $((8 - n_search)) ]
check "search used fewer programs than the sweep" [ "$n_search" -lt 8 ]
check "search ran nothing again (cache)" [ "$(jfield "$T/search.json" evaluations)" = 0 ]

# the cache holds for the same manifest and headers only: with another bench
# timeout in the manifest, nothing is taken from it
sed -i 's/^  timeout_s: \([0-9]*\)$/  timeout_s: 1\1/' "$WL/workload.yaml"
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --fresh --islands 1 --retime-rounds 0 --evaluations 2 --seed 3 \
    --json >"$T/changed.json" 2>"$T/changed.err"
check "changed manifest: run exits 0" [ $? -eq 0 ]
check "changed manifest: nothing from the cache" [ "$(jfield "$T/changed.json" cached)" = 0 ]
check "changed manifest: evaluated anew" [ "$(jfield "$T/changed.json" evaluations)" -ge 2 ]

# test-only mutators: recorded as patch_failed, the run goes on
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --fresh --mutator test_garbage --generations 2 \
    --quiet >/dev/null 2>"$T/garbage.err"
check "garbage mutator run exits 0" [ $? -eq 0 ]
check "garbage children recorded as patch_failed" [ "$(sql "$WS/runs.db" "select count(*) from programs where run_id=4 and mutator='test_garbage' and status='patch_failed' and error like '%SEARCH/REPLACE%'")" -ge 2 ]
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --fresh --mutator test_outside --generations 2 \
    --quiet >/dev/null 2>"$T/outside.err"
check "outside-edit mutator run exits 0" [ $? -eq 0 ]
check "outside edits recorded as patch_failed" [ "$(sql "$WS/runs.db" "select count(*) from programs where run_id=5 and status='patch_failed' and error like '%outside the EVOLVE-BLOCKs%'")" -ge 2 ]

# concurrency refusal and kill -9 then resume, on a workspace without cache
WS2="$T/ws2"
"$CUCO_BIN" evolve "$WL" --workspace "$WS2" --islands 1 --retime-rounds 0 --evaluations 6 --quiet >/dev/null 2>&1 &
bg=$!
for _ in $(seq 1 300); do
    [ -f "$WS2/runs.db" ] && [ "$(sql "$WS2/runs.db" "select count(*) from programs where status='pending' and generation>0" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
    sleep 0.1
done
"$CUCO_BIN" evolve "$WL" --workspace "$WS2" --evaluations 6 >/dev/null 2>"$T/second.err"
check "a second evolve on the same workspace is refused (exit 4)" [ $? -eq 4 ]
check "the refusal says the workspace is in use" grep -q 'in use' "$T/second.err"
kill -9 $bg 2>/dev/null
wait $bg 2>/dev/null
bg=
check "the kill left a pending candidate" [ "$(sql "$WS2/runs.db" "select count(*) from programs where status='pending'")" -ge 1 ]
"$CUCO_BIN" evolve "$WL" --workspace "$WS2" --islands 1 --retime-rounds 0 --evaluations 6 --json >"$T/resume.json" 2>"$T/resume.err"
check "resume exits 0" [ $? -eq 0 ]
check "resume continued the same run" [ "$(sql "$WS2/runs.db" "select count(*) from runs")" = 1 ]
check "nothing pending after resume" [ "$(sql "$WS2/runs.db" "select count(*) from programs where status='pending'")" = 0 ]
check "run marked done" [ "$(sql "$WS2/runs.db" "select status from runs")" = done ]
check "evaluation budget counted once" [ "$(jfield "$T/resume.json" evaluations)" = 6 ]
check "each program hash evaluated once" [ "$(sql "$WS2/runs.db" "select count(*) from (select code_hash from programs where mutator not in ('copy','migration') and status not in ('rejected_duplicate','patch_failed') group by code_hash having count(*)>1)")" = 0 ]

if [ $fail -ne 0 ]; then
    for f in "$T"/*.err; do echo "--- $f"; tail -5 "$f"; done
fi
exit $fail
