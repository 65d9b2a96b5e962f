#!/usr/bin/env bash
# test_run_knobs.sh: run knobs ("// cuco:knob run ...") need no rebuild. A copy
# of cpu_demo with CUCO_CHUNK_ROWS marked run, whose block stops the program
# when the chunk is 8: with the value 256 the evaluation builds and passes;
# with 64 it reuses that build (cache hit) and passes; with 8 it reuses the
# build too and fails at run time, so the value reached the running program.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/runknobs.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
cp -r "$CUCO_SRC/workloads/cpu_demo" "$TMP/wl"
sed -i -E 's|^(#define CUCO_CHUNK_ROWS 256 // cuco:knob) |\1 run |' "$TMP/wl/main.c"
sed -i -E 's|^(    const int n = d->n, chunk = CUCO_CHUNK_ROWS;)$|\1\n    if (chunk == 8)\n        exit(3);|' \
    "$TMP/wl/main.c"
check "the copy marks the knob run" grep -q 'CUCO_CHUNK_ROWS 256 // cuco:knob run' "$TMP/wl/main.c"
check "the copy stops on chunk 8" grep -q 'if (chunk == 8)' "$TMP/wl/main.c"
export CUCO_BUILD_CACHE="$TMP/cache"
evaluate() { # evaluate NAME VALUE
    sed -E "s|^#define CUCO_CHUNK_ROWS [0-9]+ |#define CUCO_CHUNK_ROWS $2 |" "$TMP/wl/main.c" > "$TMP/$1.c"
    "$CUCO_BIN" eval "$TMP/wl" "$TMP/$1.c" --frozen-ref "$TMP/wl/main.c" --repeats 1 --json \
        --work-dir "$TMP/work" > "$TMP/$1.json" 2> "$TMP/$1.err"
}
evaluate v256 256
check "256: ok" test "$(json_get "$TMP/v256.json" 'j["status"]')" = ok
check "256: the run knob is passed at run time" grep -q '1 run knob passed at run time' "$TMP/v256.err"
check "256: built" grep -q 'build cached as' "$TMP/v256.err"
evaluate v64 64
check "64: ok" test "$(json_get "$TMP/v64.json" 'j["status"]')" = ok
check "64: no rebuild (cached build)" grep -q 'L1 ok (cached build' "$TMP/v64.err"
evaluate v8 8
check "8: no rebuild (cached build)" grep -q 'L1 ok (cached build' "$TMP/v8.err"
check "8: the running program saw 8 and failed" test "$(json_get "$TMP/v8.json" 'j["status"]')" = run_error
exit $fail
