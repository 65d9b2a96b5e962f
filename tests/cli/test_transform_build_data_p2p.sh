#!/usr/bin/env bash
# test_transform_build_data_p2p.sh: the send/recv and all-to-all programs of tests/data/transform: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
for name in sendrecv_pair alltoall_group broadcast; do
    transform_bg "$CUCO_TEST_DATA/transform/$name"
    built "$name"
done
exit $fail
