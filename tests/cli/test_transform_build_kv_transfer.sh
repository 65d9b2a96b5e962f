#!/usr/bin/env bash
# test_transform_build_kv_transfer.sh: the kv_transfer workload: 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok). Its
# gen_0 takes schedule send_as_produced.
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
transform_bg "$CUCO_SRC/workloads/kv_transfer"
built kv_transfer
# the built gen_0 carries schedule send_as_produced: the cache's send goes
# piece by piece as the prefill's GEMMs (in a helper of the same caller) make it
check "kv_transfer: send_as_produced planned for the cache's send" \
    grep -q "schedule: send_as_produced: ncclSend at line 272 sends a buffer that 1 cuBLAS GEMM call (line 260) makes in step_run" \
    "$TMP/kv_transfer.out"
check "kv_transfer: the GEMM records and the send takes its made_site in gen_0" \
    bash -c "grep -q 'cuco_tx::gemm_ex_record(0, CUCO_SENDP_0, s.blas,' '$TMP/kv_transfer/gen_0/kv_transfer.cu' &&
             grep -q 'cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), p.cache, count' '$TMP/kv_transfer/gen_0/kv_transfer.cu'"
# and its pieces go by the copy engine (what the 2-GPU measurements ran)
check "kv_transfer: gen_0 sends by the copy engine" \
    grep -q '^#define CUCO_P2P_CE 1 // cuco:knob run 0 1' "$TMP/kv_transfer/gen_0/kv_transfer.cu"
exit $fail
