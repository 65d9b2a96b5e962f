#!/usr/bin/env bash
# test_transform_build_data_rest.sh: the programs of tests/data/transform
# that the other build tests check only as text (a decode step captured
# into a CUDA graph, graph_replay; a halo exchange in groups, jacobi_halo;
# collectives kept host NCCL beside a device one, kept_calls; a GEMM loop's
# send made as produced, layer_send; a world communicator and pairs split
# from it, split_tp_dp; greedy decoding's small all-gather of logits,
# decode_logits; sums read through a lambda, a macro, thrust, an argument
# table, a vector and a __device__ pointer, hidden_consumers; attention
# parameters in one struct filled by a setter taking it by reference,
# params_struct; a decode attention over a packed KV cache gathered across
# ranks, its buffers members of one context struct, packed_kv_decode; a
# C-style FSDP forward whose per-layer weight gather feeds a GEMM inside an
# error check that returns, fsdp_layers; a modern C++ step whose buffers are
# RAII objects reached through data(), raii_buffers; a C-tutorial step on
# global buffers whose launches size their grids with a helper, c_globals;
# a templated step whose phases are the cases of a switch, phase_switch;
# a C step on one struct's members with goto cleanup, goto_cleanup; buffers
# the program allocates with ncclMemAlloc and registers itself, nccl_alloc;
# gradient buckets in a std::array allocated in a range-for, launched
# through a generic lambda, bucket_lambda; a Megatron-style block whose
# collectives sit in wrapper functions, mega_wrappers; a framework's Tensor
# struct with typed accessors and collective wrappers, tensor_struct; a
# ZeRO-3 backward pass in C whose layer loop runs backwards, zero3_backward):
# 'cuco transform' (no --no-verify) builds each
# transformed program with its manifest's nvcc command, two at a time
# without a GPU. Without a GPU the outcome is exit 3, "built, not verified:
# no GPU", nothing registered; with one it must build, run and verify.
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
D=$CUCO_TEST_DATA/transform
built_in_pairs "$D" graph_replay jacobi_halo kept_calls layer_send split_tp_dp decode_logits hidden_consumers \
    params_struct packed_kv_decode fsdp_layers raii_buffers c_globals phase_switch goto_cleanup nccl_alloc \
    bucket_lambda mega_wrappers tensor_struct zero3_backward
check "kept_calls: the kept calls are marked in the built program" \
    grep -q "/\* cuco:kept \*/ ncclReduce(" "$TMP/kept_calls/gen_0/kept_calls.cu"
# decode_logits: its gather of 128 KiB goes through NCCL on the window by
# default (CUCO_AG_NCCL_UPTO), the device kernel when the knob is 0
check "decode_logits: the all-gather's NCCL threshold is declared" \
    grep -q "^#define CUCO_AG_NCCL_UPTO 262144 " "$TMP/decode_logits/gen_0/decode_logits.cu"
# hidden_consumers: each sum's wait sits right before its hidden reader
hc=$TMP/hidden_consumers/gen_0/transform_report.md
for at in "79:81" "84:86" "89:91" "94:96" "99:101" "105:107"; do
    check "hidden_consumers: the sum at line ${at%%:*} is waited for before line ${at#*:}" \
        grep -q "ncclAllReduce at line ${at%%:*} issued on a side stream, wait moved before the statement at line ${at#*:} " "$hc"
done
# params_struct: the gather overlaps the query projection; the attention
# reads the keys through the struct the setter filled, so the wait stays
# before it
check "params_struct: the gather's wait sits before the attention that reads it through the struct" \
    grep -q "ncclAllGather at line 89 issued on a side stream, wait moved before the statement at line 91 (1 independent" \
    "$TMP/params_struct/gen_0/transform_report.md"
# params_struct and packed_kv_decode: their attention's blocks each walk
# the gathered keys, so a read pass goes before it (warm_read, on)
for p in params_struct packed_kv_decode; do
    check "$p: the gathered keys are read once before the attention (warm_read on)" \
        grep -q "^#define CUCO_WARM_0 1 " "$TMP/$p/gen_0/$p.cu"
done
# packed_kv_decode: the projection names only other members of the context
# struct whose members the gather moves, so the gather overlaps it
check "packed_kv_decode: the gather overlaps the projection, a launch on other members of its struct" \
    grep -q "ncclAllGather at line 104 issued on a side stream, wait moved before the statement at line 106 (1 independent" \
    "$TMP/packed_kv_decode/gen_0/transform_report.md"
# fsdp_layers: the gather in the per-layer function takes the next layer's
# shard beside the rest of the layer: the loop's call passes its counter
# through a hint (the model a typedef'd struct whose bias array, allocated
# with a cast calloc and tested for NULL, stays apart from the shards)
check "fsdp_layers: the layer function's gather prefetches the next call's shard" \
    grep -q "ncclAllGather at line 106 gathers the input of its function layer_forward's next call (m->shard\[l\], with l the counter of the loop at line 118 one step on" \
    "$TMP/fsdp_layers/gen_0/transform_report.md"
check "fsdp_layers: the loop's call passes its counter through the hint" \
    grep -q "layer_forward(m, cuco_tx::prefetch_hint(0, CUCO_PREF_0, ((l + 1) < m->layers), (l + 1), l)," \
    "$TMP/fsdp_layers/gen_0/fsdp_layers.cu"
# zero3_backward: the forward loop's gathers and the backward loop's (from
# the last layer to the first, a reduce-scatter of the weight gradient in
# the same body) each take the next iteration's shard
for nx in "115:(l + 1)" "129:(l - 1)"; do
    check "zero3_backward: the gather at line ${nx%%:*} prefetches s->w_shard[${nx#*:}]" \
        grep -qF "ncclAllGather at line ${nx%%:*} gathers the next iteration's input (s->w_shard[${nx#*:}])" \
        "$TMP/zero3_backward/gen_0/transform_report.md"
done
# raii_buffers: the constructor's cudaMalloc is the gradient's window, and
# the forward launch on other objects' data() overlaps the sum
check "raii_buffers: the RAII class allocates symmetric windows" \
    grep -q "cuco_tx::symm_malloc(&ptr_, n \* sizeof(T))" "$TMP/raii_buffers/gen_0/raii_buffers.cu"
check "raii_buffers: the gradient's sum overlaps the forward kernel" \
    grep -q "ncclAllReduce at line 149 issued on a side stream, wait moved before the statement at line 151 (1 independent" \
    "$TMP/raii_buffers/gen_0/transform_report.md"
# c_globals: the grid-size helper touches no memory, so the forward launch
# on other globals overlaps the sum
check "c_globals: the sum overlaps the forward launch sized by a helper" \
    grep -q "ncclAllReduce at line 94 issued on a side stream, wait moved before the statement at line 96 (1 independent" \
    "$TMP/c_globals/gen_0/transform_report.md"
# phase_switch: the sum in the braced training case overlaps the forward
# launch (a scalar member of the state struct names no buffer), its wait
# after the whole #ifdef group of the trace
check "phase_switch: the sum in a case of the switch overlaps the forward launch" \
    grep -q "ncclAllReduce at line 97 issued on a side stream, wait moved before the statement at line 102 (1 independent" \
    "$TMP/phase_switch/gen_0/transform_report.md"
# goto_cleanup: the struct's sizes, casts and helper calls keep its members
# apart, so the reduce-scatter overlaps the next micro-batch's layer norm
# and its wait sits before the check that jumps to the cleanup
check "goto_cleanup: the reduce-scatter overlaps the layer norm, waited before the jumping check" \
    grep -q "ncclReduceScatter at line 140 issued on a side stream, wait moved before the statement at line 142 (1 independent" \
    "$TMP/goto_cleanup/gen_0/transform_report.md"
# nccl_alloc: the program's own ncclMemAlloc buffers become the glue's
# windows, and the sum overlaps the forward launch
check "nccl_alloc: ncclMemAlloc buffers become windows" \
    grep -q "ncclMemAlloc -> cuco_tx::symm_mem_alloc (symmetric window) for 't.grad'" \
    "$TMP/nccl_alloc/gen_0/transform_report.md"
check "nccl_alloc: the sum overlaps the forward launch" \
    grep -q "ncclAllReduce at line 176 issued on a side stream, wait moved before the statement at line 178 (1 independent" \
    "$TMP/nccl_alloc/gen_0/transform_report.md"
# bucket_lambda: the buckets' range-for allocation is found, so the
# all-reduces go to the device
check "bucket_lambda: the buckets allocated in a range-for become windows" \
    grep -q "cudaMalloc -> cuco_tx::symm_malloc (symmetric window) for 'grads\[b\]'" \
    "$TMP/bucket_lambda/gen_0/transform_report.md"
check "bucket_lambda: the split step's sums wait after their loop, its lambda launches work" \
    grep -q "ncclAllReduce at line 143 issued on a side stream beside the later iterations of its loop (line 141: 1 independent launch each), its wait moved after the loop, before the statement at line 146 (1 independent" \
    "$TMP/bucket_lambda/gen_0/transform_report.md"
# mega_wrappers: each collective ends its mappings:: wrapper; it starts
# early there and the wait sits in the caller, before its consumer
for at in 83 89; do
    check "mega_wrappers: the collective at line $at waits in its wrapper's caller" \
        grep -q "at line $at issued on a side stream, its wait moved after each of the 1 call of" \
        "$TMP/mega_wrappers/gen_0/transform_report.md"
done
# tensor_struct: t.ptr<float>() is a getter of the tensor's data (through a
# cast), and the wrappers' collectives wait in the model's step
for at in 95 100; do
    check "tensor_struct: the collective at line $at waits in its wrapper's caller" \
        grep -q "at line $at issued on a side stream, its wait moved after each of the 1 call of" \
        "$TMP/tensor_struct/gen_0/transform_report.md"
done
exit $fail
