#!/usr/bin/env bash
# test_transform_build_data_collectives.sh: the all-gather and all-reduce programs of tests/data/transform: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
if ! command -v nvcc >/dev/null || ! command -v mpicxx >/dev/null; then
    echo "skip: nvcc or mpicxx not found (the transformed program is CUDA C++ with MPI)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/transform-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
built() { # built WORKLOAD_DIR
    local dir=$1 name ws rc
    name=$(basename "$dir")
    ws="$TMP/$name"
    "$CUCO_BIN" transform "$dir" --workspace "$ws" --quiet >"$TMP/$name.out" 2>&1
    rc=$?
    cat "$TMP/$name.out"
    if [ -e /dev/nvidia0 ] || command -v nvidia-smi >/dev/null; then
        check "$name: built, ran and verified on this GPU (exit 0)" test "$rc" -eq 0
        check "$name: registered" test -s "$ws/runs.db"
    else
        check "$name: built, not verified: no GPU (exit 3)" test "$rc" -eq 3
        check "$name: report says so" grep -q "verification: built, not verified: no GPU" "$ws/gen_0/transform_report.md"
        check "$name: eval level 1 in the json report" python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["eval"]["level"] == 1 and j["eval"]["status"] == "ok"))' "$ws/gen_0/transform_report.json"
        check "$name: not registered before verification" test ! -e "$ws/runs.db"
    fi
}
built "$CUCO_TEST_DATA/transform/allgather"
built "$CUCO_TEST_DATA/transform/allreduce_loop"
built "$CUCO_TEST_DATA/transform/async_alloc"
exit $fail
