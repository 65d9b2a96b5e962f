#!/usr/bin/env bash
# stop.sh DIR: tears down the cluster start.sh made in DIR: the node (slurmd,
# its slurmstepd daemons and their jobs), slurmctld and munged, by the pids
# they recorded in DIR; waits until they are gone (SIGKILL after 5 s).
# Exit 0 when nothing of the cluster is left running.
set -u
DIR=${1:?usage: stop.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -d "$DIR" ] || exit 0
# A dead daemon whose parent does not reap it stays a zombie: that is gone.
running() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

"$HERE/slurmd.sh" kill "$DIR"
pids=""
for f in "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    [ -s "$f" ] && pids="$pids $(cat "$f")"
done
for p in $pids; do kill -TERM "$p" 2>/dev/null; done
for _ in $(seq 1 50); do
    alive=""
    for p in $pids; do running "$p" && alive="$alive $p"; done
    [ -z "$alive" ] && break
    sleep 0.1
done
for p in $alive; do kill -9 "$p" 2>/dev/null; done
sleep 0.2
left=""
for p in $pids; do running "$p" && left="$left $p"; done
if [ -n "$left" ]; then
    echo "slurm: still running after stop:$left" >&2
    exit 1
fi
exit 0
