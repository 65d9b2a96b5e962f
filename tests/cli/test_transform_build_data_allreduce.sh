#!/usr/bin/env bash
# test_transform_build_data_allreduce.sh: the all-reduce programs of
# tests/data/transform (allreduce_loop, rowpar_linear with its
# producer_split schedule at both knob values, lt_tp_mlp with both splits on
# cublasLtMatmul, rowpar_kernel with the producer split of a kernel declared
# rows_independent, grouped_kept with collectives kept host NCCL inside an
# NCCL group, decode_allreduce with small all-reduces, devices_per_thread
# with its communicators made in an NCCL group, split_nocolor with a
# subgroup some ranks are left out of, typed_reduce whose data types come
# from a traits template): 'cuco transform' (no --no-verify)
# builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
for name in allreduce_loop rowpar_linear lt_tp_mlp rowpar_kernel seqpar_rs grouped_kept decode_allreduce \
    devices_per_thread split_nocolor typed_reduce; do
    transform_bg "$CUCO_TEST_DATA/transform/$name"
    built "$name"
done
# grouped_kept: the max and the min stay host NCCL inside the group, through
# cuco_tx::kept_in_group; the bucket sums go to the device
gk=$TMP/grouped_kept/gen_0/grouped_kept.cu
check "grouped_kept: the max is kept inside the group" \
    grep -q "/\* cuco:kept \*/ cuco_tx::kept_in_group(ncclAllReduce, o.found_inf, o.found_inf, 1, ncclFloat32, ncclMax" "$gk"
check "grouped_kept: the bucket sums go to the device" \
    grep -q "cuco_tx::all_reduce(o.bucket\[b\], o.bucket\[b\]" "$gk"
# devices_per_thread: the group that makes the communicators stays NCCL's
# own, and the guard counts inside the init loop
dp=$TMP/devices_per_thread/gen_0/devices_per_thread.cu
check "devices_per_thread: the init group stays NCCL's" \
    bash -c "grep -q '^    NCCLCHECK(ncclGroupStart());' '$dp' && grep -q 'cuco_tx_comms_made' '$dp'"
# rowpar_linear's GEMM feeds its all-reduce: both go through the producer
# split's glue (knob CUCO_PSPLIT_0, off in gen_0); on, it builds too
check "rowpar_linear: the GEMM goes through the produce glue" \
    grep -q "cuco_tx::sgemm_produce(0, CUCO_PSPLIT_0" "$TMP/rowpar_linear/gen_0/rowpar_linear.cu"
check "rowpar_linear: the all-reduce takes its ranges from it" \
    grep -q "cuco_tx::all_reduce(cuco_tx::produce_site(0, CUCO_PSPLIT_0), y, y" \
    "$TMP/rowpar_linear/gen_0/rowpar_linear.cu"
check "rowpar_linear: builds with CUCO_PSPLIT_0=1" knob_built rowpar_linear CUCO_PSPLIT_0 1
check "rowpar_linear: the report names the schedule" \
    grep -q "producer_split: cublasSgemm at line" "$TMP/rowpar_linear/gen_0/transform_report.md"
# lt_tp_mlp: the same two schedules on cublasLtMatmul (descriptors and a
# heuristic's algorithm); the program links cuBLASLt only, so the glue may
# not need cuBLAS itself
lt=$TMP/lt_tp_mlp/gen_0/lt_tp_mlp.cu
check "lt_tp_mlp: the up projection goes through the split glue" \
    grep -q "LT_OK(cuco_tx::lt_matmul_split(0, CUCO_SPLIT_0, lt_, up_.op" "$lt"
check "lt_tp_mlp: the down projection goes through the produce glue" \
    grep -q "LT_OK(cuco_tx::lt_matmul_produce(1, CUCO_PSPLIT_1, lt_, down_.op" "$lt"
check "lt_tp_mlp: the glue's cublasLtMatmul part is on" grep -q "^#define CUCO_TX_GEMM_LT 1" "$lt"
check "lt_tp_mlp: builds with CUCO_PSPLIT_1=1" knob_built lt_tp_mlp CUCO_PSPLIT_1 1
check "lt_tp_mlp: builds with CUCO_SPLIT_0=0" knob_built lt_tp_mlp CUCO_SPLIT_0 0
# rowpar_kernel: its kernel, declared rows_independent with x:din and
# y:dout, feeds the in-place all-reduce through the producer split
rk=$TMP/rowpar_kernel/gen_0/rowpar_kernel.cu
check "rowpar_kernel: the launch goes through the producer split" \
    grep -q "cuco_tx::kernel_produce(0, CUCO_PSPLIT_0, cuco_tx::RowSpec{3, 0x5UL, 1, {5, 0, 6}}, 2," "$rk"
# (the producer split of a kernel is on in gen_0, its ranges reduced by the
# copy engines: the other values build too)
check "rowpar_kernel: the split is on in gen_0" grep -q "^#define CUCO_PSPLIT_0 1 " "$rk"
check "rowpar_kernel: builds with CUCO_PSPLIT_0=0" knob_built rowpar_kernel CUCO_PSPLIT_0 0
# ... and, each layer's all-reduce ending its loop's body, the next layers
# run beside it: the wait goes after the loop, inside the loop's block
check "rowpar_kernel: the all-reduce waits after its loop" \
    grep -q "ncclAllReduce at line 73 issued on a side stream beside the later iterations of its loop" \
    "$TMP/rowpar_kernel/gen_0/transform_report.md"
check "rowpar_kernel: builds with CUCO_PSPLIT_CE=0" knob_built rowpar_kernel CUCO_PSPLIT_CE 0
# seqpar_rs: a GEMM and (with -k) a kernel declared rows_independent make
# the input of a reduce-scatter into a separate shard; the kernel's reduced
# argument is the one spelled as the reduce-scatter's input (part, not x: both
# are members of one struct), and its count is the per-rank count times the
# communicator's size
rs=$TMP/seqpar_rs/gen_0/seqpar_rs.cu
check "seqpar_rs: the kernel's launch goes through the producer split, reducing part" \
    grep -q "cuco_tx::kernel_produce(0, CUCO_PSPLIT_0, cuco_tx::RowSpec{3, 0x6UL, 1, {0, 5, 6}}, 2, (size_t)((size_t)L->out \* per) \* cuco_tx::comm_size(L->comm), ncclFloat32" "$rs"
check "seqpar_rs: the GEMM goes through the produce glue" \
    grep -q "cuco_tx::gemm_ex_produce(1, CUCO_PSPLIT_1, L->blas" "$rs"
check "seqpar_rs: the reduce-scatter takes its ranges from it" \
    grep -q "cuco_tx::reduce_scatter(cuco_tx::produce_site(1, CUCO_PSPLIT_1), L->part, L->shard" "$rs"
check "seqpar_rs: the report names the schedule for the reduce-scatter" \
    grep -q "producer_split: cublasGemmEx at line [0-9]* makes the input of ncclReduceScatter" \
    "$TMP/seqpar_rs/gen_0/transform_report.md"
check "seqpar_rs: builds with CUCO_PSPLIT_1=1" knob_built seqpar_rs CUCO_PSPLIT_1 1
check "seqpar_rs: builds with CUCO_PSPLIT_CE=0" knob_built seqpar_rs CUCO_PSPLIT_CE 0
# typed_reduce: its data types are not literals; the report says that a
# type the device does not reduce goes through NCCL at run time
check "typed_reduce: the report says how an unknown data type is reduced" \
    grep -q "data type 'nccl_type<T>::value' is not a literal, macro or constant" \
    "$TMP/typed_reduce/gen_0/transform_report.md"
exit $fail
