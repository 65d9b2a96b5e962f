#!/usr/bin/env bash
# test_transform_build_data_foreign.sh: the programs of tests/data/transform
# written in other engineers' styles (tp_mlp_allreduce, pipeline_stages,
# ring_pass, reduce_scatter_grad, cp_attention, cp_causal, ddp_overlap,
# hvd_fusion, tp_events, zero2): 'cuco analyze' finds the
# calls and buffers that matter, 'cuco transform' makes the right buffers
# symmetric (both halves of a swapped double buffer, buffers renamed by
# helpers) and builds the result with the manifest's nvcc command;
# cp_attention's kernel, declared attention, takes the attention split (its
# other parts per peer build too), and cp_causal's, its queries declared
# too, the lending between ranks (built with it off too); ddp_overlap's
# bucket all-reduces, each the last statement of its loop's body, wait once
# after the loop. Without a GPU the outcome is
# exit 3, "built, not verified: no GPU", nothing registered; with one it must
# build, run and verify (exit 0, registered).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-foreign
D=$CUCO_TEST_DATA/transform

# --- analysis: the calls, with their buffers, counts, peers and streams
analyzed() { # analyzed NAME PYTHON-ASSERTIONS (on j, the analysis)
    "$CUCO_BIN" analyze "$D/$1/$1.cu" -o "$TMP/$1.analysis.json" >/dev/null
    python3 - "$TMP/$1.analysis.json" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["collectives"]
f = lambda i, k: c[i]["fields"][k]["text"]
b = lambda i, k: c[i]["fields"][k]["base"]
exec(sys.argv[2])
PY
}
check "tp_mlp_allreduce: in-place all-reduce of the helper's buffer, on its stream" analyzed tp_mlp_allreduce '
assert [x["api"] for x in c] == ["ncclAllReduce"]
assert b(0, "sendbuff") == b(0, "recvbuff") == "partial" and f(0, "op") == "ncclSum" and f(0, "datatype") == "ncclFloat"
assert c[0]["stream"] == "stream" and c[0]["function"] == "reduce_from_tp_region"
assert [s["fields"]["flags"]["text"] for s in j["streams"] if s["kind"] == "stream_create"] == ["cudaStreamNonBlocking"]
assert [a["var"] for a in j["allocations"]] == ["l->w", "l->x", "l->out"]
ids = {(x["kind"], x["label"]): x["id"] for x in j["graph"]["nodes"] if x["function"] == "mlp_forward"}
e = [(x["from"], x["to"], x["kind"]) for x in j["graph"]["edges"]]
gemm, ar, relu = ids[("kernel", "gemm_tiled")], ids[("call", "reduce_from_tp_region")], ids[("kernel", "slice_relu")]
assert (gemm, ar, "data") in e and (ar, relu, "data") in e, e'
check "pipeline_stages: ungrouped recv from r-1 and send to r+1" analyzed pipeline_stages '
assert [(x["api"], x["group"], x["classification"]) for x in c] == [("ncclRecv", None, "point_to_point"), ("ncclSend", None, "point_to_point")]
assert f(0, "peer") == "p.stage - 1" and f(1, "peer") == "p.stage + 1" and b(0, "recvbuff") == "in" and b(1, "sendbuff") == "out"
assert c[0]["loop"]["kind"] == "for" and c[0]["stream"] == c[1]["stream"] == "p.stream"'
check "ring_pass: one grouped send/recv pair to two neighbours" analyzed ring_pass '
assert [(x["api"], x["group"]) for x in c] == [("ncclSend", 0), ("ncclRecv", 0)]
assert j["groups"][0]["classification"] == "point_to_point" and f(0, "peer") == "to" and f(1, "peer") == "from"
assert [s["line"] for s in j["functions"][0]["called_from"]] == [97]
# the helper call is a node of ring_pass: it reads cur, writes nxt, on r.stream, and the
# accumulation of the received block depends on it
n = [x for x in j["graph"]["nodes"] if x["kind"] == "call" and x["label"] == "exchange"]
assert len(n) == 1 and n[0]["reads"] == ["cur"] and n[0]["writes"] == ["nxt"] and n[0]["stream"] == "r.stream", n
acc = [x["id"] for x in j["graph"]["nodes"] if x["label"] == "kv_accumulate" and x["line"] == 98][0]
assert {"from": n[0]["id"], "to": acc, "kind": "data", "via": "nxt"} in j["graph"]["edges"]'
check "reduce_scatter_grad: averaging reduce-scatter then in-place all-gather, the SGD kernel between them" analyzed reduce_scatter_grad '
assert [x["api"] for x in c] == ["ncclReduceScatter", "ncclAllGather"]
assert b(0, "sendbuff") == "grads" and b(0, "recvbuff") == "grad_shard" and f(0, "count") == "shard" and f(0, "op") == "ncclAvg"
assert f(1, "sendbuff") == "params + rank * shard" and b(1, "recvbuff") == "params"
e = [(x["from"], x["to"], x["kind"]) for x in j["graph"]["edges"]]
assert (1, 2, "data") in e and (2, 3, "data") in e, e'

# --- transform: which allocations become symmetric
check "tp_mlp_allreduce: the layers' outputs are symmetric (through the helper's parameter)" symmetric tp_mlp_allreduce 118
check "pipeline_stages: both receive buffers, not the send or result buffers" symmetric pipeline_stages 129
check "ring_pass: both halves of the swapped double buffer" symmetric ring_pass 144 145
check "reduce_scatter_grad: the parameters and the gradients, not the shard" symmetric reduce_scatter_grad 110 111

# --- transform and build with nvcc
if ! command -v nvcc >/dev/null || ! command -v mpicxx >/dev/null; then
    echo "skip: nvcc or mpicxx not found (the transformed program is CUDA C++ with MPI)"
    [ $fail = 0 ] && exit 77
    exit $fail
fi
built_in_pairs "$D" tp_mlp_allreduce pipeline_stages ring_pass reduce_scatter_grad cp_attention cp_causal ddp_overlap \
    hvd_fusion tp_events zero2
ca=$TMP/cp_attention/gen_0/cp_attention.cu
check "cp_attention: the launch goes through the attention split" \
    grep -q "cuco_tx::attention_split(0, CUCO_SPLIT_0, cuco_tx::AttnSpec{cuco_tx::RowSpec{5, 0x2UL, 0}, -1, 6, 7, {-1, -1, -1, -1, 0x0UL}}, (size_t)((tokens_) \* (heads_)), (size_t)((d_)), (size_t)(0), attend," "$ca"
check "cp_attention: builds with CUCO_ATTN_CHUNKS=4" knob_built cp_attention CUCO_ATTN_CHUNKS 4
cc=$TMP/cp_causal/gen_0/cp_causal.cu
check "cp_causal: the split carries its queries (count, first, causal, grid x, q) and their width" \
    grep -q "cuco_tx::AttnSpec{cuco_tx::RowSpec{5, 0x2UL, 0}, 7, 9, 10, {2, 6, 8, 0, 0x1UL}}, (size_t)((tokens_) \* (heads_)), (size_t)((d_)), (size_t)((heads_) \* (d_)), attend," "$cc"
check "cp_causal: the lending knob" grep -q "^#define CUCO_ATTN_LEND 1 // cuco:knob run 0 1" "$cc"
check "cp_causal: builds with CUCO_ATTN_LEND=0" knob_built cp_causal CUCO_ATTN_LEND 0
# ddp_overlap: each bucket's all-reduce (an array indexed by the loop's
# counter; a range-for over bucket structs, whose gradients are traced
# through their aggregates) starts as soon as it is made, beside the next
# buckets' backward launches, and is waited for after the loop
dd=$TMP/ddp_overlap/gen_0
for at in "83 issued on a side stream beside the later iterations of its loop (line 81: 1 independent launch each), its wait moved after the loop, before the statement at line 86 (1 independent" \
    "96 issued on a side stream beside the later iterations of its loop (line 94"; do
    check "ddp_overlap: the all-reduce at line ${at%% *} waits after its loop" \
        grep -q "ncclAllReduce at line $at" "$dd/transform_report.md"
done
check "ddp_overlap: the range-for's buckets are traced to their windows" \
    grep -q "ddp_overlap.cu:96\` ncclAllReduce -> cuco_tx::all_reduce" "$dd/transform_report.md"
check "ddp_overlap: the loop guard at the top of the body" \
    grep -q "cuco_tx::loop_guard(1, CUCO_EARLY_1, bk.grad, bk.grad, bk.n, ncclFloat, comm, 0, 0);" \
    "$dd/ddp_overlap.cu"
# hvd_fusion: Horovod's batched copy kernel reads the fusion buffer through
# a device table of pointers: its launch is the sum's consumer
check "hvd_fusion: the table kernel waits for the sum" \
    grep -q "ncclAllReduce at line 113 issued on a side stream, wait moved before the statement at line 115 (" \
    "$TMP/hvd_fusion/gen_0/transform_report.md"
# tp_events: the gather runs on its own stream, joined to the compute stream
# by a helper that records and waits on an event: the wait goes before it
check "tp_events: the wait goes before the helper that joins the streams" \
    grep -q "ncclAllGather at line 101 issued on a side stream, wait moved before the statement at line 103 (" \
    "$TMP/tp_events/gen_0/transform_report.md"
# zero2: the buckets are views of one flat gradient (pushed as aggregates in
# the constructor); each bucket's reduce-scatter waits after its loop, before
# the flat gradient is cleared
check "zero2: the reduce-scatters wait after their loop, before the clear" \
    grep -q "ncclReduceScatter at line 153 issued on a side stream beside the later iterations of its loop (line 150: 1 independent launch each), its wait moved after the loop, before the statement at line 156 (" \
    "$TMP/zero2/gen_0/transform_report.md"
exit $fail
