#!/usr/bin/env bash
# test_transform_build_moe_dispatch_combine.sh: the moe_dispatch_combine workload: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
transform_bg "$CUCO_SRC/workloads/moe_dispatch_combine"
built moe_dispatch_combine
exit $fail
