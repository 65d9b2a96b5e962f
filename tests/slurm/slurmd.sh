#!/usr/bin/env bash
# slurmd.sh start|kill DIR: starts the node daemon of the cluster made by
# start.sh, or kills the node as a crash would: SIGKILL to slurmd, to the
# slurmstepd daemons it started and to their jobs' process groups (the pids
# come from DIR's pid file and the process tree under it, never from a
# name pattern alone).
set -u
ACTION=${1:?usage: slurmd.sh start|kill DIR}
DIR=${2:?usage: slurmd.sh start|kill DIR}
export SLURM_CONF="$DIR/slurm.conf"

case "$ACTION" in
start)
    if ! slurmd -N localhost >>"$DIR/log/slurmd.out" 2>&1; then
        echo "slurm: slurmd did not start:" >&2
        tail -20 "$DIR/log/slurmd.out" "$DIR/log/slurmd.log" >&2 2>/dev/null
        exit 1
    fi
    for _ in $(seq 1 50); do
        [ -s "$DIR/slurmd.pid" ] && kill -0 "$(cat "$DIR/slurmd.pid")" 2>/dev/null && exit 0
        sleep 0.1
    done
    echo "slurm: slurmd wrote no pid file" >&2
    exit 1
    ;;
kill)
    pids=""
    [ -s "$DIR/slurmd.pid" ] && pids=$(cat "$DIR/slurmd.pid")
    # slurmstepd daemons of this cluster: their command line names the spool
    # folder's job, and their parent chain is not ours, so find them by the
    # config they were started with (SLURM_CONF in their environment).
    for p in $(pgrep -x slurmstepd); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$DIR/slurm.conf" ||
            grep -q "$DIR" "/proc/$p/cmdline" 2>/dev/null; then
            pids="$pids $p"
        fi
    done
    # The jobs' process groups (the batch script and what it started).
    groups=""
    for p in $(pgrep -x slurmstepd); do
        for c in $(pgrep -P "$p"); do
            groups="$groups $(ps -o pgid= -p "$c" | tr -d ' ')"
        done
    done
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    for g in $groups; do kill -9 -- "-$g" 2>/dev/null; done
    rm -f "$DIR/slurmd.pid"
    exit 0
    ;;
*)
    echo "usage: slurmd.sh start|kill DIR" >&2
    exit 2
    ;;
esac
