#!/usr/bin/env bash
# test_workloads_compile.sh: every GPU workload under workloads/ builds with
# its own manifest's build command (cuco eval --level 1), so CI catches a
# seed that no longer compiles; so do its expert program (the manifest's
# `expert`, which must keep the seed's frozen text) and the hostile copies of
# gemm_allgather under tests/data/hostile/gpu/ (run on a GPU only by
# scripts/device.d/19-harness-hostile.sh). Needs nvcc, NCCL headers and MPI;
# no GPU.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "skip: nvcc not found (GPU workloads cannot be compiled here)"
    exit 77
fi
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/wlc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
n=0
# builds NAME DIR [PROGRAM]: cuco eval --level 1 of PROGRAM (default the seed)
builds() {
    local name=$1 dir=$2
    shift 2
    "$CUCO_BIN" eval "$dir" "$@" --level 1 --json --work-dir "$TMP/$name" >"$TMP/$name.json" 2>"$TMP/$name.err"
    local status
    status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$TMP/$name.json" 2>/dev/null)
    if [ "$status" = ok ]; then
        echo "ok   $name builds"
    else
        echo "FAIL $name: status '${status:-none}'"
        cat "$TMP/$name.json" "$TMP/$name.err" | head -40
        fail=1
    fi
}
for manifest in "$CUCO_SRC"/workloads/*/workload.yaml; do
    dir=$(dirname "$manifest")
    name=$(basename "$dir")
    grep -qE '^gpu:[[:space:]]*false' "$manifest" && continue
    n=$((n + 1))
    builds "$name" "$dir"
    expert=$(sed -n 's/^expert:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$manifest")
    if [ -z "$expert" ]; then
        echo "FAIL $name: the manifest names no expert program"
        fail=1
    else
        builds "$name-expert" "$dir" "$dir/$expert"
    fi
done
for hostile in "$CUCO_SRC"/tests/data/hostile/gpu/*.cu; do
    builds "hostile-$(basename "$hostile" .cu)" "$CUCO_SRC/workloads/gemm_allgather" "$hostile"
done
if [ $n -lt 4 ]; then
    echo "FAIL expected at least 4 GPU workloads, found $n"
    fail=1
fi
exit $fail
