#!/usr/bin/env bash
# test_ranks_override.sh: --ranks N runs a workload at N ranks instead of its
# manifest's (cuco eval, evolve, run), as a separate workload NAME@N in the
# database; and 'cuco run' on a GPU workload with fewer GPUs than ranks stops
# before anything runs and says what to do (a fake nvidia-smi shows 1 GPU).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo is an MPI program)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/ranks-override.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
WL="$CUCO_SRC/workloads/cpu_demo"

for cmd in eval evolve run transform bound; do
    "$CUCO_BIN" $cmd "$WL" --ranks x >"$TMP/bad" 2>&1
    check "$cmd --ranks x: exit 2" test $? -eq 2
done
for cmd in eval evolve run transform bound; do
    "$CUCO_BIN" $cmd --help 2>&1 | grep -q -- "--ranks" || { echo "FAIL $cmd --help: --ranks"; fail=1; }
done

"$CUCO_BIN" eval "$WL" --ranks 1 --repeats 1 --json >"$TMP/eval1.json" 2>/dev/null
check "eval --ranks 1: ok" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$TMP/eval1.json")" = ok
check "eval --ranks 1: the program ran on 1 rank" test \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["ranks"])' "$TMP/eval1.json")" = 1

"$CUCO_BIN" evolve "$WL" --ranks 1 --evaluations 1 --workspace "$TMP/ws" --quiet >"$TMP/evolve" 2>&1
check "evolve --ranks 1: exit 0" test $? -eq 0
check "evolve --ranks 1: a separate workload in the database" test \
    "$(sqlite3 "$TMP/ws/runs.db" "SELECT workload FROM runs" 2>/dev/null || python3 -c '
import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT workload FROM runs").fetchone()[0])' "$TMP/ws/runs.db")" = "cpu_demo@1"

# A GPU workload of 2 ranks where one GPU is visible.
mkdir -p "$TMP/bin"
cat >"$TMP/bin/nvidia-smi" <<'SMI'
#!/bin/sh
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
SMI
chmod +x "$TMP/bin/nvidia-smi"
PATH="$TMP/bin:$PATH" env -u CUDA_VISIBLE_DEVICES "$CUCO_BIN" run "$CUCO_SRC/workloads/kv_transfer" \
    --workspace "$TMP/ws2" >"$TMP/run2" 2>&1
rc=$?
check "2 ranks, 1 GPU: exit 1" test $rc -eq 1
check "2 ranks, 1 GPU: says why" grep -q "runs 2 ranks, one GPU each, and 1 GPU is visible" "$TMP/run2"
check "2 ranks, 1 GPU: suggests --ranks 1" grep -q -- "--ranks 1" "$TMP/run2"
check "2 ranks, 1 GPU: nothing ran" bash -c "! grep -q '== cuco run: \(bound\|transform\|evolve\)' '$TMP/run2'"
# Two GPUs on the host, one of them visible to this process.
mkdir -p "$TMP/bin2"
cat >"$TMP/bin2/nvidia-smi" <<'SMI'
#!/bin/sh
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)"
SMI
chmod +x "$TMP/bin2/nvidia-smi"
PATH="$TMP/bin2:$PATH" CUDA_VISIBLE_DEVICES=1 "$CUCO_BIN" run "$CUCO_SRC/workloads/kv_transfer" \
    --workspace "$TMP/ws3" >"$TMP/run3" 2>&1
check "2 GPUs, CUDA_VISIBLE_DEVICES=1: exit 1" test $? -eq 1
check "2 GPUs, CUDA_VISIBLE_DEVICES=1: counts the visible one" \
    grep -q "runs 2 ranks, one GPU each, and 1 GPU is visible" "$TMP/run3"
[ $fail = 0 ] || { cat "$TMP/evolve" "$TMP/run2" "$TMP/run3"; }
exit $fail
