#!/usr/bin/env bash
# test_transform_build_flash_attn_cp.sh: the flash_attn_cp workload: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
transform_bg "$CUCO_SRC/workloads/flash_attn_cp"
built flash_attn_cp
exit $fail
