#!/usr/bin/env bash
# test_transform_build_data_collectives.sh: the all-gather programs of
# tests/data/transform (allgather, async_alloc, overlap_alias with its
# early_start_late_wait schedule at both knob values, seqpar_mlp with its
# consumer_split_by_source schedule at both, seqpar_norm and seqpar_act with
# the split of a kernel declared rows_independent, seqpar_act's inside a host
# helper), an all-to-all whose GEMM is split the same way (a2a_expert) and
# a program in the NCCL user guide's style (guide_allreduce), and a C++
# library's tensor-parallel layers whose buffers are class members used
# without this-> (class_layers), a sequence-parallel MLP on
# std::unique_ptr buffers from a factory (uptr_mlp), and an FSDP-style layer
# loop whose all-gather takes schedule prefetch_next (fsdp_prefetch):
# 'cuco transform' (no --no-verify) builds the transformed program
# with the manifest's nvcc command. Without a GPU the outcome is exit 3,
# "built, not verified: no GPU", nothing registered; with one it must build,
# run and verify (exit 0, registered with status ok). The all-reduce
# programs are in test_transform_build_data_allreduce.sh.
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
for name in allgather async_alloc overlap_alias seqpar_mlp seqpar_norm seqpar_act a2a_expert guide_allreduce \
    class_layers uptr_mlp fsdp_prefetch; do
    transform_bg "$CUCO_TEST_DATA/transform/$name"
    built "$name"
done
check "guide_allreduce: the all-reduce's output is symmetric, not its input" symmetric guide_allreduce 97
# overlap_alias's gen_0 has the early_start_late_wait schedule on (knob 1);
# the other value builds too
check "overlap_alias: builds with CUCO_EARLY_0=0" knob_built overlap_alias CUCO_EARLY_0 0
# seqpar_mlp's gen_0 splits its up projection by source rank (CUCO_SPLIT_0 1)
check "seqpar_mlp: the GEMM goes through the split glue" \
    grep -q "cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0" "$TMP/seqpar_mlp/gen_0/seqpar_mlp.cu"
check "seqpar_mlp: builds with CUCO_SPLIT_0=0" knob_built seqpar_mlp CUCO_SPLIT_0 0
check "seqpar_mlp: builds with CUCO_EARLY_0=0" knob_built seqpar_mlp CUCO_EARLY_0 0
# seqpar_norm: its kernel, declared rows_independent, goes through the
# kernel split (row count at parameter 3, rows of x and y)
sn=$TMP/seqpar_norm/gen_0/seqpar_norm.cu
check "seqpar_norm: the launch goes through the kernel split" \
    grep -q "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{3, 0x5UL, 1}, rmsnorm_rows<__half>, rows, 256, 0, g_stream," "$sn"
check "seqpar_norm: no cuBLAS glue" bash -c "! grep -q '^#define CUCO_TX_GEMM_SPLIT' '$sn'"
check "seqpar_norm: builds with CUCO_SPLIT_0=0" knob_built seqpar_norm CUCO_SPLIT_0 0
# seqpar_act: the launch inside the helper goes through the kernel split
check "seqpar_act: the helper's launch goes through the kernel split" \
    grep -q "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{2, 0x3UL, 0, {0, 4}}, swiglu, blocks," \
    "$TMP/seqpar_act/gen_0/seqpar_act.cu"
# a2a_expert: the all-to-all takes the split's site, the GEMM the split glue
check "a2a_expert: the all-to-all and its GEMM go through the split" \
    bash -c "grep -q 'cuco_tx::all_to_all(cuco_tx::split_site(0, CUCO_SPLIT_0)' '$TMP/a2a_expert/gen_0/a2a_expert.cu' &&
             grep -q 'cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0' '$TMP/a2a_expert/gen_0/a2a_expert.cu'"
check "a2a_expert: builds with CUCO_SPLIT_0=0" knob_built a2a_expert CUCO_SPLIT_0 0
# class_layers: members that stay in place (no getter returns them) are no
# pointer parameter's buffer, so both collectives overlap the launch on the
# parameters
for at in "178:180" "227:229"; do
    check "class_layers: the collective at line ${at%%:*} overlaps the launch on the parameters" \
        grep -q "at line ${at%%:*} issued on a side stream, wait moved before the statement at line ${at#*:} (1 independent" \
        "$TMP/class_layers/gen_0/transform_report.md"
done
# uptr_mlp: the factory's cudaMalloc becomes the windows' allocation, and
# both collectives overlap the launches on the workspace's other members
check "uptr_mlp: the factory allocates symmetric windows" \
    grep -q "cudaMalloc -> cuco_tx::symm_malloc (symmetric window) for 'ws.x_full.get()'" \
    "$TMP/uptr_mlp/gen_0/transform_report.md"
for at in "221:228 (3" "230:232 (1"; do
    check "uptr_mlp: the collective at line ${at%%:*} overlaps launches on other members" \
        grep -q "at line ${at%%:*} issued on a side stream, wait moved before the statement at line ${at#*:} independent" \
        "$TMP/uptr_mlp/gen_0/transform_report.md"
done
# its up projection consumes the gathered rows per source rank (o.hidden,
# an int of the options struct, is not the workspace's hidden buffer)
check "uptr_mlp: the up projection is split per source rank" \
    grep -q "cublasSgemm at line 224 consumes ncclAllGather at line 221 per source rank" \
    "$TMP/uptr_mlp/gen_0/transform_report.md"
# fsdp_prefetch: layer l + 1's weight is gathered beside layer l's work
# (layers[l].bias, a member that keeps its own allocation, is another
# element's too: not the next weight); both knob values build
fp=$TMP/fsdp_prefetch/gen_0
check "fsdp_prefetch: the layer loop's all-gather takes prefetch_next" \
    grep -q "prefetch_next: ncclAllGather at line 110 gathers the next iteration's input (layers\[(l + 1)\].shard)" \
    "$fp/transform_report.md"
check "fsdp_prefetch: the call gets the next iteration's arguments" \
    grep -qF "cuco_tx::prefetch_site(0, CUCO_PREF_0, ((l + 1) < (int)layers.size()) ? (const void *)(layers[(l + 1)].shard) : nullptr" \
    "$fp/fsdp_prefetch.cu"
check "fsdp_prefetch: the GEMM reads the gathered weight in place, through prefetched()" \
    bash -c "grep -qF ': 0, CUCO_PREF_0 > 1), layers[l].shard, full, shard_elems' '$fp/fsdp_prefetch.cu' &&
             grep -qF 'n.dim, &one, cuco_tx::prefetched(0, full),' '$fp/fsdp_prefetch.cu' &&
             grep -q 'reads in place (cuco_tx::prefetched;' '$fp/transform_report.md' &&
             grep -q '^#define CUCO_PREF_0 2 // cuco:knob run 0 1 2' '$fp/fsdp_prefetch.cu'"
check "fsdp_prefetch: builds with CUCO_PREF_0=0" knob_built fsdp_prefetch CUCO_PREF_0 0
check "fsdp_prefetch: builds with CUCO_PREF_0=1 (the window copied)" knob_built fsdp_prefetch CUCO_PREF_0 1
exit $fail
