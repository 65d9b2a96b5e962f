#!/usr/bin/env bash
# test_slurm.sh: the Slurm launcher against a real single-host Slurm
# (tests/slurm/start.sh: munged, slurmctld and slurmd on loopback, CPU only).
#   1. cuco eval --launcher slurm runs the cpu_demo seed through sbatch: ok,
#      and the job's script and output files are in the work folder.
#   2. cuco evolve --launcher slurm for a few generations; in the middle of
#      one job the node is killed (slurmd, its slurmstepd and the job's
#      processes, SIGKILL). cuco must record an infrastructure failure, submit
#      the run again, and finish once the test has restarted slurmd; no
#      candidate may be recorded as a failure because of it.
#   3. Teardown leaves no daemon running.
# The job to kill is made long by an mpirun wrapper early in PATH (the jobs
# inherit PATH): the first run after a flag file appears sleeps before it
# starts the real mpirun, and records its process group.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/slurm.XXXXXX")
CLUSTER="$TMP/cluster"
stop_cluster() {
    bash "$CUCO_SRC/tests/slurm/stop.sh" "$CLUSTER"
}
cleanup() {
    stop_cluster >/dev/null 2>&1
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

bash "$CUCO_SRC/tests/slurm/start.sh" "$CLUSTER"
rc=$?
if [ $rc = 77 ]; then
    echo "skip: no Slurm (see the message above)"
    exit 77
fi
if [ $rc != 0 ]; then
    echo "FAIL the Slurm cluster did not start"
    exit 1
fi
# shellcheck disable=SC1091
source "$CLUSTER/env"
export CUCO_SLURM_POLL_MAX_S=2
echo "cluster up: $(sinfo -h -o '%P %a %D %T')"

# 1. one evaluation through sbatch
WORK="$TMP/eval-work"
"$CUCO_BIN" eval "$CUCO_SRC/workloads/cpu_demo" --launcher slurm --level 2 --work-dir "$WORK" \
    --keep-build >"$TMP/eval.out" 2>"$TMP/eval.err"
rc=$?
check "cuco eval --launcher slurm: exit 0" [ $rc = 0 ]
check "cuco eval --launcher slurm: status ok" grep -q '^status *ok' "$TMP/eval.out"
check "the run was a Slurm job" grep -q 'submitted as Slurm job' "$TMP/eval.err"
check "batch script and output in the work folder" \
    bash -c "ls '$WORK'/cand-*/cuco-slurm-*.sh '$WORK'/cand-*/cuco-slurm-*.out >/dev/null"
check "the job's output holds the verification" \
    bash -c "grep -q 'Verification: PASS' '$WORK'/cand-*/cuco-slurm-*.out"
check "the batch script runs the program confined (cuco confine-exec)" \
    bash -c "grep -q \"'confine-exec' '--write' \" '$WORK'/cand-*/cuco-slurm-*.sh"
[ $fail = 0 ] || { cat "$TMP/eval.err"; }

# 2. evolve with a node failure in the middle of a job
mkdir -p "$TMP/bin"
REAL_MPIRUN=$(command -v mpirun)
cat >"$TMP/bin/mpirun" <<EOF
#!/bin/sh
# The first run after $TMP/slow exists is held; it records its process group.
if [ -e "$TMP/slow" ] && mkdir "$TMP/slow.taken" 2>/dev/null; then
    ps -o pgid= -p \$\$ | tr -d ' ' >"$TMP/slow.pgid.tmp"
    mv "$TMP/slow.pgid.tmp" "$TMP/slow.pgid"
    sleep 60
fi
exec "$REAL_MPIRUN" "\$@"
EOF
chmod +x "$TMP/bin/mpirun"
cat >"$TMP/evolve.yaml" <<'EOF'
islands: 1
children_per_island: 2
retime_rounds: 0
EOF
touch "$TMP/slow"
# The stand-in mpirun records its state in $TMP, outside the candidates'
# build folders: confinement would make that read-only, so this part, about
# infrastructure retries, runs unconfined.
CUCO_CONFINE=0 PATH="$TMP/bin:$PATH" "$CUCO_BIN" evolve "$CUCO_SRC/workloads/cpu_demo" --launcher slurm \
    --config "$TMP/evolve.yaml" --workspace "$TMP/ws" --generations 2 --repeats 1 --json \
    >"$TMP/evolve.out" 2>"$TMP/evolve.err" &
EVOLVE_PID=$!
for _ in $(seq 1 600); do
    [ -s "$TMP/slow.pgid" ] && break
    kill -0 $EVOLVE_PID 2>/dev/null || break
    sleep 0.1
done
check "a job reached the held mpirun" [ -s "$TMP/slow.pgid" ]
jobs_running=$(squeue -h -t R -o %i | wc -l)
check "a Slurm job was running when the node was killed" [ "$jobs_running" -ge 1 ]
bash "$CUCO_SRC/tests/slurm/slurmd.sh" kill "$CLUSTER"
[ -s "$TMP/slow.pgid" ] && kill -9 -- "-$(cat "$TMP/slow.pgid")" 2>/dev/null
echo "node killed at $(date +%T)"
seen=0
for _ in $(seq 1 90); do
    if grep -q 'infrastructure failure' "$TMP/evolve.err"; then
        seen=1
        break
    fi
    kill -0 $EVOLVE_PID 2>/dev/null || break
    sleep 1
done
check "cuco saw an infrastructure failure" [ $seen = 1 ]
echo "restarting slurmd at $(date +%T)"
bash "$CUCO_SRC/tests/slurm/slurmd.sh" start "$CLUSTER"
for _ in $(seq 1 150); do
    kill -0 $EVOLVE_PID 2>/dev/null || break
    sleep 1
done
if kill -0 $EVOLVE_PID 2>/dev/null; then
    echo "FAIL cuco evolve did not finish after slurmd came back"
    kill $EVOLVE_PID
    fail=1
fi
wait $EVOLVE_PID
rc=$?
check "cuco evolve --launcher slurm: exit 0" [ $rc = 0 ]
check "the run finished its generations" grep -q '"event":"done".*"generations":2' "$TMP/evolve.out"
check "the lost job was submitted again" grep -q 'submitting again' "$TMP/evolve.err"
check "no candidate failed (the node failure is not the program's)" \
    bash -c "! grep -q '\"failed\":[1-9]' '$TMP/evolve.out'"
check "no candidate lost to the node failure in the database" \
    python3 -c "
import sqlite3, sys
db = sqlite3.connect('$TMP/ws/runs.db')
rows = db.execute('select status, count(*) from programs group by status').fetchall()
print('programs by status:', rows)
lost = ('infra_error', 'timeout', 'run_error', 'wrong_answer', 'bad_output')
bad = [r for r in rows if r[0] in lost]
sys.exit(1 if bad or not rows else 0)"
if [ $fail != 0 ]; then
    echo "--- evolve stdout ---"
    cat "$TMP/evolve.out"
    echo "--- evolve stderr (tail) ---"
    tail -30 "$TMP/evolve.err"
fi

# 3. teardown
stop_cluster
check "teardown: stop.sh reports nothing left" [ $? = 0 ]
left=$(for p in $(pgrep -x slurmstepd) $(pgrep -x slurmd) $(pgrep -x slurmctld); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$CLUSTER/slurm.conf" &&
        awk '$3 != "Z" {print $1}' "/proc/$p/stat"
done)
check "teardown: no daemon of this cluster left" [ -z "$left" ]
exit $fail
