#!/usr/bin/env bash
# test_transform_build_gemm_allgather.sh: the gemm_allgather workload: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
transform_bg "$CUCO_SRC/workloads/gemm_allgather"
built gemm_allgather
# the all-gather's launch knobs are moot while its split pulls by the copy
# engine: the search holds them (docs/evolve.md)
check "gemm_allgather: the CTAs matter only without the copy engine and the split" \
    grep -Eq '^#define CUCO_COMM_CTAS [0-9]+ +// cuco:knob run [0-9 ]+ when CUCO_COPY_ENGINE=0 CUCO_SPLIT_0=0$' \
    "$TMP/gemm_allgather/gen_0/gemm_allgather.cu"
exit $fail
