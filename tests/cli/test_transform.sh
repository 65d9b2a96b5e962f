#!/usr/bin/env bash
# test_transform.sh: 'cuco transform --no-verify' (rules + static check, no
# build) on every GPU workload under workloads/ and on the small programs of
# tests/data/transform: gen_0/ holds the program, a diff and both reports,
# the program is registered as generation 0 of a new run; a program whose
# only call stays host NCCL (ncclReduce, "kept") and a
# collective in frozen code are refused with their line, no program and no
# rewrite listed; bad usage exits 2.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/transform.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
db_get() { # db_get DB SQL
    python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone())' "$1" "$2"
}

transformed_ok() { # transformed_ok WORKLOAD_DIR NAME EVOLVE_FILE
    local dir=$1 name=$2 file=$3 ws="$TMP/$2"
    "$CUCO_BIN" transform "$dir" --workspace "$ws" --no-verify --json >"$TMP/$name.json" 2>"$TMP/$name.err"
    local rc=$?
    check "$name: exit 0 (transformed, statically checked)" test "$rc" -eq 0
    check "$name: program written" test -s "$ws/gen_0/$file"
    check "$name: diff against the seed" grep -q "^+++ b/$file" "$ws/gen_0/program.diff"
    check "$name: no host collective left (the glue's NCCL fallbacks are ::nccl*)" bash -c "! grep -Eq '(^|[^:])\\bnccl(AllGather|ReduceScatter|AllReduce|Send|Recv)\\(' '$ws/gen_0/$file'"
    check "$name: device library included" grep -q '#include "cuco_device.cuh"' "$ws/gen_0/$file"
    check "$name: a transport knob declared" grep -Eq '^#define CUCO_(COMM|P2P)_[A-Z_]+ [0-9]+ +// cuco:knob' "$ws/gen_0/$file"
    check "$name: json report says transformed" test "$(json_get "$ws/gen_0/transform_report.json" 'j["transformed"]')" = True
    check "$name: markdown report" grep -q "static check: static check passed" "$ws/gen_0/transform_report.md"
    check "$name: --json on stdout equals the report" cmp -s <(python3 -m json.tool "$TMP/$name.json") <(python3 -m json.tool "$ws/gen_0/transform_report.json")
    check "$name: registered as generation 0, pending" test "$(db_get "$ws/runs.db" "select generation, status, mutator from programs")" = "(0, 'pending', 'transform_rules')"
    check "$name: stored code is the program" test "$(db_get "$ws/runs.db" "select code from programs" | wc -c)" -gt 1000
}

# the GPU workloads: each is transformed or refused with a reason and a line
for m in "$CUCO_SRC"/workloads/*/workload.yaml; do
    dir=$(dirname "$m")
    name=$(basename "$dir")
    grep -q '^gpu: *false' "$m" && continue
    ws="$TMP/wl-$name"
    "$CUCO_BIN" transform "$dir" --workspace "$ws" --no-verify --quiet >"$TMP/wl-$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        file=$(json_get "$ws/gen_0/transform_report.json" 'j["evolve_file"]')
        transformed_ok "$dir" "wl-$name" "$file"
    else
        check "$name: refused with exit 1" test "$rc" -eq 1
        check "$name: refusal names a line" grep -Eq "\.cu:[0-9]+: refused: " "$TMP/wl-$name.out"
    fi
done
# the two seed workloads of this tree are transformable
for name in gemm_allgather kv_transfer; do
    check "$name is transformed" test -s "$TMP/wl-$name/gen_0/$name.cu"
done
# declared semantics are reported with their manifest line and what they admit
check "flash_attn_cp: the attention declaration is in the report" \
    grep -q "^## Declared semantics" "$TMP/wl-flash_attn_cp/gen_0/transform_report.md"
check "flash_attn_cp: the declaration says what it admits and who uses it" \
    grep -Eq "workload.yaml:[0-9]+: kernel flash_attn_fwd is attention \(over=keys, merge=log_sum_exp, keys=kv_len, .*admits: .*log-sum-exp.*schedule consumer_split_by_source splits" \
    "$TMP/wl-flash_attn_cp/gen_0/transform_report.md"
# ... and the schedule uses it: both grouped all-gathers feed one attention split
check "flash_attn_cp: the attention kernel is split by source" \
    grep -Eq "consumer_split_by_source: kernel flash_attn_fwd at line [0-9]+ consumes ncclAllGather at line [0-9]+ per source rank \(own keys first, the parts merged by log-sum-exp; declared attention" \
    "$TMP/wl-flash_attn_cp/gen_0/transform_report.md"
check "flash_attn_cp: the V all-gather joins the split" \
    grep -q "consumer_split_by_source: joins the attention split of the kernel" \
    "$TMP/wl-flash_attn_cp/gen_0/transform_report.md"
check "flash_attn_cp: one attention_split launch, both gathers split" \
    test "$(grep -c 'cuco_tx::attention_split(0, CUCO_SPLIT_0, cuco_tx::AttnSpec{' "$TMP/wl-flash_attn_cp/gen_0/flash_attn_cp.cu")" -eq 1 -a \
    "$(grep -c 'cuco_tx::all_gather(cuco_tx::split_site(' "$TMP/wl-flash_attn_cp/gen_0/flash_attn_cp.cu")" -eq 2
check "flash_attn_cp: its declared queries go with the split (count, first, causal, grid y, q), lending on" \
    grep -q "AttnSpec{cuco_tx::RowSpec{6, 0x6UL, 0}, 8, 10, 11, {5, 7, 9, 1, 0x1UL}}.*(size_t)((p.heads) \* HEAD_DIM), flash_attn_fwd" \
    "$TMP/wl-flash_attn_cp/gen_0/flash_attn_cp.cu"
check "flash_attn_cp: the lending knob" grep -q "^#define CUCO_ATTN_LEND 1 // cuco:knob run 0 1" \
    "$TMP/wl-flash_attn_cp/gen_0/flash_attn_cp.cu"
check "moe_dispatch_combine: the routing declaration is in the report" \
    grep -q "call ncclSend is routing_permutation (dedup=true)" \
    "$TMP/wl-moe_dispatch_combine/gen_0/transform_report.md"

D="$CUCO_TEST_DATA/transform"
for name in allgather allreduce_loop sendrecv_pair alltoall_group broadcast async_alloc; do
    transformed_ok "$D/$name" "$name" "$name.cu"
done
# a program without blocks gets them; one with blocks keeps its frozen text
check "allgather: blocks added" test "$(grep -c 'EVOLVE-BLOCK-START' "$TMP/allgather/gen_0/allgather.cu")" -ge 2
check "allreduce_loop: one block kept" test "$(grep -c 'EVOLVE-BLOCK-START' "$TMP/allreduce_loop/gen_0/allreduce_loop.cu")" -eq 1
check "allreduce_loop: only the block changed" bash -c "diff <(sed '/EVOLVE-BLOCK-START/,/EVOLVE-BLOCK-END/d' '$D/allreduce_loop/allreduce_loop.cu') <(sed '/EVOLVE-BLOCK-START/,/EVOLVE-BLOCK-END/d' '$TMP/allreduce_loop/gen_0/allreduce_loop.cu')"
check "alltoall_group: sends keep their arguments" grep -q 'cuco_tx::send(sendbuf + peer \* n, n, ncclFloat32, peer, comm, st)' "$TMP/alltoall_group/gen_0/alltoall_group.cu"
check "alltoall_group: the receive buffer is symmetric" grep -q 'cuco_tx::symm_malloc(&recvbuf' "$TMP/alltoall_group/gen_0/alltoall_group.cu"
check "async_alloc: cudaMallocAsync of the gathered buffer made symmetric" grep -q 'cuco_tx::symm_malloc(&gathered, n \* nranks \* sizeof(float), as)' "$TMP/async_alloc/gen_0/async_alloc.cu"
check "async_alloc: cudaFreeAsync goes through the runtime" grep -q 'cuco_tx::symm_free_async(gathered, as)' "$TMP/async_alloc/gen_0/async_alloc.cu"
check "broadcast: rewritten onto point-to-point" grep -q 'cuco_tx::broadcast(buf, buf, n, ncclFloat32, root, comm, 0)' "$TMP/broadcast/gen_0/broadcast.cu"
check "sendrecv_pair: device communicator set up after ncclCommInitRank" grep -q 'cuco_tx::comm_setup(\*(&comm));' "$TMP/sendrecv_pair/gen_0/sendrecv_pair.cu"
check "sendrecv_pair: teardown before ncclCommDestroy" grep -q 'cuco_tx::comm_teardown(comm); NK(ncclCommDestroy(comm));' "$TMP/sendrecv_pair/gen_0/sendrecv_pair.cu"

refused() { # refused NAME LINE NEEDLE
    local name=$1 line=$2 needle=$3 ws="$TMP/$1"
    "$CUCO_BIN" transform "$D/$name" --workspace "$ws" --no-verify --quiet >"$TMP/$name.out" 2>&1
    local rc=$?
    check "$name: exit 1" test "$rc" -eq 1
    check "$name: reported at $name.cu:$line" grep -q "$name.cu:$line: refused: .*$needle" "$TMP/$name.out"
    check "$name: no program claimed" test ! -e "$ws/gen_0/$name.cu"
    check "$name: report written" grep -q "Not transformed" "$ws/gen_0/transform_report.md"
    check "$name: not registered" test ! -e "$ws/runs.db"
    check "$name: no rewrite listed (nothing was rewritten)" \
        bash -c "! grep -q ': rewrite: ' '$TMP/$name.out' && ! grep -q 'Rewritten calls' '$ws/gen_0/transform_report.md'"
}
# ncclReduce has no device form: it stays host NCCL ("kept"), and with no
# other NCCL call there is nothing to transform
"$CUCO_BIN" transform "$D/reduce_root" --workspace "$TMP/reduce_root" --no-verify --quiet >"$TMP/reduce_root.out" 2>&1
check "reduce_root: exit 1" test $? -eq 1
check "reduce_root: ncclReduce kept at its line" grep -q "reduce_root.cu:55: kept: ncclReduce: device/ has no device-side ncclReduce; it stays host NCCL" "$TMP/reduce_root.out"
check "reduce_root: refused, saying why" grep -q "refused: every NCCL call stays host NCCL" "$TMP/reduce_root.out"
check "reduce_root: no program claimed" test ! -e "$TMP/reduce_root/gen_0/reduce_root.cu"
check "reduce_root: report lists the kept call" grep -q "## Left host NCCL" "$TMP/reduce_root/gen_0/transform_report.md"
refused frozen_collective 58 "outside the EVOLVE-BLOCKs"

# a bare program (no manifest) is a workload of its own
"$CUCO_BIN" transform "$D/allgather/allgather.cu" --workspace "$TMP/bare" --no-verify --quiet \
    >"$TMP/bare.out" 2>&1
check "bare program: exit 0" test $? -eq 0
check "bare program: gen_0 written" test -s "$TMP/bare/gen_0/allgather.cu"
"$CUCO_BIN" eval "$D/allgather/allgather.cu" >"$TMP/bare-eval.out" 2>&1
check "a program where a workload is expected: exit 2" test $? -eq 2
check "a program where a workload is expected: says so" grep -q "is a program, not a workload" "$TMP/bare-eval.out"

# schedule early_start_late_wait: the report names, per rewritten call, whether
# it fires (independent work between the call and its first consumer) or why
# not; it fires where the analysis finds independent work and nowhere else
schedule() { # schedule NAME LINE TEXT
    local name=$1 line=$2 text=$3 ws="$TMP/$1.sched"
    "$CUCO_BIN" transform "$D/$name" --workspace "$ws" --no-verify --quiet >"$TMP/$name.sched.out" 2>&1 ||
        { cat "$TMP/$name.sched.out"; return 1; }
    grep -qF "$name.cu:$line: schedule: $text" "$TMP/$name.sched.out" ||
        { grep schedule "$TMP/$name.sched.out"; return 1; }
    grep -qF "$text" "$ws/gen_0/transform_report.md" || { echo "not in the report"; return 1; }
}
check "overlap_alias: the all-gather overlaps the three launches, waited before the aliased read" \
    schedule overlap_alias 49 "early_start_late_wait: ncclAllGather at line 49 issued on a side stream, wait moved before the statement at line 54 (3 independent launches in between, 2 on its stream)"
grep -q '^#define CUCO_EARLY_0 1 // cuco:knob run 0 1' "$TMP/overlap_alias.sched/gen_0/overlap_alias.cu"
check "overlap_alias: knob CUCO_EARLY_0 defaults to 1" test $? -eq 0
python3 - "$TMP/overlap_alias.sched/gen_0/overlap_alias.cu" <<'PY'
import sys
t = open(sys.argv[1]).read()
w = t.index("cuco_tx::early_wait(0, CUCO_EARLY_0);")
assert t.index("hidden_c<<<") < w < t.index("consume<<<"), "wait not right before the aliased read"
assert "cuco_tx::early_start(0, CUCO_EARLY_0, st)" in t
PY
check "overlap_alias: the wait sits between the last independent launch and the aliased read" test $? -eq 0
check "tp_mlp_allreduce: not applied, the all-reduce ends its helper" \
    schedule tp_mlp_allreduce 131 "early_start_late_wait does not apply to ncclAllReduce: no independent work between the call and the end of its block (line 132)"
check "pipeline_stages: not applied, nothing follows the send (the body of an if without braces) in its block" \
    schedule pipeline_stages 77 "early_start_late_wait does not apply to ncclSend: no independent work between the call and the end of its block"
check "jacobi_halo: not applied to the grouped halo receives" \
    schedule jacobi_halo 112 "early_start_late_wait does not apply to ncclRecv: inside ncclGroupStart/ncclGroupEnd"
check "plugin_allgather: not applied, the next statement reads the gathered rows" \
    schedule plugin_allgather 103 "early_start_late_wait does not apply to ncclAllGather: no independent work between the call and its first consumer (line 104)"

# a macro of the program's own header that launches on the gathered buffer
# reads it: the wait stays before the macro's use
mkdir -p "$TMP/hdr"
cat >"$TMP/hdr/launch_rows.h" <<'EOF'
#pragma once
#define SCALE_GATHERED() scale<<<64, 256, 0, st>>>(all, n * size)
EOF
cat >"$TMP/hdr/hdr_macro.cu" <<'EOF'
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include "launch_rows.h"
__global__ void scale(float *x, size_t n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
__global__ void other(float *x, size_t n) { if (threadIdx.x < n) x[threadIdx.x] += 1.0f; }
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    ncclCommInitRank(&comm, size, id, rank);
    size_t n = 1024;
    float *mine, *all, *side;
    cudaMalloc(&mine, n * sizeof(float));
    cudaMalloc(&all, n * size * sizeof(float));
    cudaMalloc(&side, n * sizeof(float));
    cudaStream_t st;
    cudaStreamCreate(&st);
    ncclAllGather(mine, all, n, ncclFloat, comm, st);
    other<<<4, 256, 0, st>>>(side, n);
    SCALE_GATHERED();
    other<<<4, 256, 0, st>>>(side, n);
    cudaStreamSynchronize(st);
    printf("Verification: PASS\n");
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
}
EOF
"$CUCO_BIN" transform "$TMP/hdr/hdr_macro.cu" --workspace "$TMP/hdr.ws" --no-verify --quiet \
    >"$TMP/hdr.out" 2>&1
check "a header's launch macro reads the gathered buffer: the wait stays before its use" \
    grep -qF "hdr_macro.cu:25: schedule: early_start_late_wait: ncclAllGather at line 25 issued on a side stream, wait moved before the statement at line 27 (1 independent" "$TMP/hdr.out"
# the same header in a folder the manifest's build command names with -I
mkdir -p "$TMP/hdrI/inc"
cp "$TMP/hdr/hdr_macro.cu" "$TMP/hdrI/"
cp "$TMP/hdr/launch_rows.h" "$TMP/hdrI/inc/"
cat >"$TMP/hdrI/workload.yaml" <<'EOF'
name: hdrI
ranks: 2
gpu: true
sources: [hdr_macro.cu]
evolve_file: hdr_macro.cu
build:
  command: [nvcc, -std=c++17, -arch=sm_90, "-I{workload_dir}/inc", "-I{repo}/device", "-I{nccl_include}",
            "{mpi_compile_flags}", -o, "{out}", "{evolve_file}", "-L{nccl_lib}", "-l:libnccl.so.2",
            "{mpi_link_flags}"]
  output: prog
  timeout_s: 300
run:
  launcher: mpirun
verify:
  args: []
  timeout_s: 60
bench:
  args: []
EOF
"$CUCO_BIN" transform "$TMP/hdrI" --workspace "$TMP/hdrI.ws" --no-verify --quiet >"$TMP/hdrI.out" 2>&1
check "a header found through the build's -I folder is read too" \
    grep -qF "hdr_macro.cu:25: schedule: early_start_late_wait: ncclAllGather at line 25 issued on a side stream, wait moved before the statement at line 27 (1 independent" "$TMP/hdrI.out"

"$CUCO_BIN" transform >/dev/null 2>&1
check "no workload: exit 2" test $? -eq 2
"$CUCO_BIN" transform "$D/allgather" --bogus >/dev/null 2>&1
check "unknown option: exit 2" test $? -eq 2
"$CUCO_BIN" transform "$TMP/nowhere" >/dev/null 2>&1
check "missing workload: exit 2" test $? -eq 2
"$CUCO_BIN" transform --help | grep -q -- "--no-verify"
check "--help documents --no-verify" test $? -eq 0
exit $fail
