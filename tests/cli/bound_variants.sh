#!/usr/bin/env bash
# bound_variants.sh WORKLOAD: shared by test_bound_variants_*.sh. Writes the
# communication-removed and computation-removed variants of a GPU workload
# with 'cuco bound --emit-variants' and compiles each through the workload's
# manifest ('cuco eval W PROGRAM --level 1'). Skips (77) without nvcc or NCCL
# 2.28+ device headers, or when the workload is not in this tree.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
NAME=$1
WL="$CUCO_SRC/workloads/$NAME"
[ -f "$WL/workload.yaml" ] || { echo "skip: workload $NAME not in this tree"; exit 77; }
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "skip: no nvcc"; exit 77; }
command -v mpicc >/dev/null || { echo "skip: no mpicc"; exit 77; }
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/bound-var.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
"$CUCO_BIN" bound "$WL" --emit-variants "$TMP/var" || exit 1
for v in "$TMP"/var/*; do
    n=$(grep -c . "$v")
    if cmp -s "$v" "$WL/$(sed -n 's/^evolve_file: *//p' "$WL/workload.yaml")"; then
        echo "FAIL $(basename "$v"): nothing was removed"
        fail=1
        continue
    fi
    "$CUCO_BIN" eval "$WL" "$v" --level 1 --json --quiet --work-dir "$TMP/work" >"$TMP/res.json" 2>"$TMP/err"
    status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$TMP/res.json" 2>/dev/null)
    if [ "$status" = ok ]; then
        echo "ok   $(basename "$v") compiles ($n lines)"
    else
        echo "FAIL $(basename "$v") does not compile: $status"
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("excerpt") or "")' "$TMP/res.json" 2>/dev/null | head -20
        cat "$TMP/err" | head -5
        fail=1
    fi
done
exit $fail
