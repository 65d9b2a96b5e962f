#!/usr/bin/env bash
# test_bound_variants_gemm_allgather.sh: the communication-removed and computation-removed
# variants of workloads/gemm_allgather compile through its manifest (see bound_variants.sh).
exec bash "$(dirname "$0")/bound_variants.sh" gemm_allgather
