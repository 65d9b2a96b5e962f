#!/usr/bin/env bash
# test_evolve_kill.sh: each evaluation of 'cuco evolve' is recorded when it
# finishes, not when its generation ends. On a copy of workloads/cpu_demo
# with 6 children a generation and 2 run slots:
#  - while a generation is being evaluated, the database already holds some
#    of its children finished and others still pending (the old engine wrote
#    a whole generation at once: this state never showed);
#  - kill -9 then: the finished children keep their status, time and cache
#    entry; only the ones in flight are pending;
#  - the resumed run finishes the same run, nothing pending, and evaluates
#    none of the finished children again (one 'eval' timing each, unchanged
#    status and time).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
[ -f "$CUCO_SRC/workloads/cpu_demo/main.c" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/evolve_kill.XXXXXX")
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
c.execute("pragma busy_timeout=5000")
for r in c.execute(sys.argv[2]): print("|".join("" if v is None else str(v) for v in r))' "$1" "$2"
}

WL="$T/wl"
mkdir -p "$WL"
cp "$CUCO_SRC/workloads/cpu_demo/main.c" "$WL/main.c"
cat >"$WL/workload.yaml" <<'YAML'
name: evolve_kill
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
  args: [--n, "256", --iters, "3", --warmup, "1"]
  timeout_s: 60
  repeats: 1
YAML
cat >"$T/config.yaml" <<'YAML'
islands: 1
children_per_island: 6
retime_rounds: 0
YAML

# a generation >= 1 with some children finished and some pending
partial_generation() {
    sql "$WS/runs.db" "select generation from programs where generation>=1 group by generation
        having sum(status='pending')>=1 and sum(status not in ('pending','rejected_duplicate',
        'rejected_novelty','patch_failed'))>=1 limit 1" 2>/dev/null
}

WS="$T/ws"
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --config "$T/config.yaml" --slots 2 \
    --generations 3 --quiet >"$T/first.out" 2>"$T/first.err" &
bg=$!
gen=
for _ in $(seq 1 1200); do
    [ -f "$WS/runs.db" ] && gen=$(partial_generation) && [ -n "$gen" ] && break
    kill -0 $bg 2>/dev/null || break
    sleep 0.05
done
kill -9 $bg 2>/dev/null
wait $bg 2>/dev/null
bg=
check "a generation was seen part-recorded while it ran" [ -n "$gen" ]
[ -n "$gen" ] || gen=1
# what the kill left: the finished children of that generation
done_q="select id, status, time_ms, code_hash from programs where generation=$gen and status
    not in ('pending','rejected_duplicate','rejected_novelty','patch_failed') order by id"
sql "$WS/runs.db" "$done_q" >"$T/done.before"
n_done=$(wc -l <"$T/done.before")
n_pending=$(sql "$WS/runs.db" "select count(*) from programs where generation=$gen and status='pending'")
echo "generation $gen at the kill: $n_done finished, $n_pending pending"
check "finished children of the generation are in the database" [ "$n_done" -ge 1 ]
check "children in flight are left pending" [ "$n_pending" -ge 1 ]
check "each finished child has its cache entry" [ "$(sql "$WS/runs.db" "select count(*) from programs p
    where p.generation=$gen and p.status not in ('pending','rejected_duplicate','rejected_novelty',
    'patch_failed','infra_error') and not exists (select 1 from evaluations e where
    e.code_hash=p.code_hash)")" = 0 ]
sql "$WS/runs.db" "select p.id, count(t.id) from programs p left join timings t on
    t.code_hash=p.code_hash and t.source='eval' where p.generation=$gen and p.status='ok'
    group by p.id order by p.id" >"$T/timings.before"

# orphaned ranks of the killed run end on their own; let them
sleep 2
"$CUCO_BIN" evolve "$WL" --workspace "$WS" --config "$T/config.yaml" --slots 2 \
    --generations 3 --quiet >"$T/resume.out" 2>"$T/resume.err"
check "resume exits 0" [ $? -eq 0 ]
check "resume continued the same run" [ "$(sql "$WS/runs.db" "select count(*) from runs")" = 1 ]
check "run marked done" [ "$(sql "$WS/runs.db" "select status from runs")" = done ]
check "nothing pending after resume" [ "$(sql "$WS/runs.db" "select count(*) from programs where status='pending'")" = 0 ]
check "the generation's pending children were evaluated on resume" [ "$(sql "$WS/runs.db" "select count(*) from programs where generation=$gen and status not in ('pending','rejected_duplicate','rejected_novelty','patch_failed')")" -eq $((n_done + n_pending)) ]
ids=$(cut -d'|' -f1 "$T/done.before" | paste -sd, -)
[ -n "$ids" ] || ids=0
sql "$WS/runs.db" "select id, status, time_ms, code_hash from programs where id in ($ids)
    order by id" >"$T/done.after"
check "finished children unchanged by the resume" cmp -s "$T/done.before" "$T/done.after"
sql "$WS/runs.db" "select p.id, count(t.id) from programs p left join timings t on
    t.code_hash=p.code_hash and t.source='eval' where p.generation=$gen and p.status='ok'
    and p.id in ($ids) group by p.id order by p.id" \
    >"$T/timings.after"
check "finished children not evaluated again" cmp -s "$T/timings.before" "$T/timings.after"

if [ $fail -ne 0 ]; then
    for f in "$T"/*.err; do echo "--- $f"; tail -5 "$f"; done
    for f in "$T"/*.before "$T"/*.after; do echo "--- $f"; cat "$f"; done
fi
exit $fail
