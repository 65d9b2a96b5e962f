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
source "$CUCO_SRC/tests/cli/transform_build.sh"
for name in allgather allreduce_loop async_alloc; do
    transform_bg "$CUCO_TEST_DATA/transform/$name"
    built "$name"
done
exit $fail
