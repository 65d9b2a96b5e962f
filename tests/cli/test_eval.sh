#!/usr/bin/env bash
# test_eval.sh: 'cuco eval' on the real cpu_demo workload (needs mpicc and
# mpirun): the seed passes all three levels, and each broken program of
# tests/data/cpu_demo_broken gets its status, a useful excerpt, and leaves no
# process behind. Also bad usage and a bad manifest (exit 2).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/eval.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
WL="$CUCO_SRC/workloads/cpu_demo"
BROKEN="$CUCO_TEST_DATA/cpu_demo_broken"
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
no_leftovers() { # no process runs a binary from the work dir
    sleep 0.2
    ! pgrep -f "$TMP/work" >/dev/null
}

# --help lists every option.
"$CUCO_BIN" eval --help >"$TMP/help" 2>&1
check "--help exits 0" test $? -eq 0
for opt in --json --level --repeats --verify-timeout --work-dir --keep-build --quiet --frozen-ref; do
    check "--help mentions $opt" grep -q -- "$opt" "$TMP/help"
done

# Bad usage and a bad manifest: exit 2 with a message.
"$CUCO_BIN" eval >/dev/null 2>&1
check "no workload: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$WL" --level 7 >/dev/null 2>"$TMP/err"
check "--level 7: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$WL" --bogus >/dev/null 2>"$TMP/err"
check "unknown option: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$CUCO_TEST_DATA/manifests/unknown_key.yaml" >/dev/null 2>"$TMP/err"
check "bad manifest: exit 2" test $? -eq 2
check "bad manifest: path:line in the message" grep -q "unknown_key.yaml:[0-9]*: unknown key" "$TMP/err"
"$CUCO_BIN" eval "$WL" "$TMP/does-not-exist.c" >/dev/null 2>"$TMP/err"
check "missing program file: exit 2" test $? -eq 2

# The seed passes all three levels.
"$CUCO_BIN" eval "$WL" --json --repeats 2 --quiet --work-dir "$TMP/work" >"$TMP/ok.json" 2>"$TMP/ok.err"
rc=$?
check "seed: exit 0" test $rc -eq 0
check "seed: one JSON object" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/ok.json"
check "seed: status ok" test "$(json_get "$TMP/ok.json" 'j["status"]')" = ok
check "seed: level 3" test "$(json_get "$TMP/ok.json" 'j["level"]')" = 3
check "seed: time_ms > 0" test "$(json_get "$TMP/ok.json" 'j["time_ms"] > 0')" = True
check "seed: 2 repeats" test "$(json_get "$TMP/ok.json" 'len(j["times_ms"])')" = 2
check "seed: min <= median <= max" test "$(json_get "$TMP/ok.json" 'j["time_ms_min"] <= j["time_ms"] <= j["time_ms_max"]')" = True
check "seed: metrics have compute_ms and comm_ms" \
    test "$(json_get "$TMP/ok.json" 'j["metrics"]["compute_ms"] > 0 and j["metrics"]["comm_ms"] > 0')" = True
check "seed: build folder removed" test -z "$(ls -A "$TMP/work")"
check "seed: no process left" no_leftovers

# The human summary shows the bound when compute_ms/comm_ms are there.
"$CUCO_BIN" eval "$WL" --level 2 --quiet --work-dir "$TMP/work" >"$TMP/human" 2>&1
check "level 2: exit 0" test $? -eq 0
check "level 2: summary says level 2" grep -q "^level *2" "$TMP/human"

# {mpi_compile_flags}/{mpi_link_flags} expand to several arguments: plain cc
# builds the MPI program with them.
if command -v cc >/dev/null; then
    mkdir -p "$TMP/mpiwl"
    cp "$WL/main.c" "$TMP/mpiwl/main.c"
    sed -e 's|command: \[mpicc, |command: [cc, "{mpi_compile_flags}", |' \
        -e 's|-lm\]|"{mpi_link_flags}", -lm]|' "$WL/workload.yaml" >"$TMP/mpiwl/workload.yaml"
    check "mpi flags manifest uses the placeholders" grep -q '{mpi_link_flags}' "$TMP/mpiwl/workload.yaml"
    "$CUCO_BIN" eval "$TMP/mpiwl" --level 2 --json --work-dir "$TMP/work" >"$TMP/mpi.json" 2>"$TMP/mpi.err"
    check "mpi flags: status ok at level 2" test "$(json_get "$TMP/mpi.json" 'j["status"] + str(j["level"])')" = ok2
    check "mpi flags: expanded in the compile line" grep -Eq "L1 compile: cc -I[^ ]+ .* -L[^ ]+ -lmpi" "$TMP/mpi.err"
fi

# Each broken program: status and a useful excerpt.
run_broken() { # run_broken FILE EXPECTED_STATUS EXCERPT_REGEX
    local file=$1 want=$2 pattern=$3 out="$TMP/$(basename "$1" .c).json"
    "$CUCO_BIN" eval "$WL" "$BROKEN/$file" --json --level 2 --verify-timeout 3 --quiet \
        --work-dir "$TMP/work" >"$out" 2>"$out.err"
    local rc=$?
    check "$file: exit 1" test $rc -eq 1
    check "$file: status $want" test "$(json_get "$out" 'j["status"]')" = "$want"
    check "$file: excerpt matches /$pattern/" grep -Eq -- "$pattern" <(json_get "$out" 'j["excerpt"]')
    check "$file: excerpt capped" test "$(json_get "$out" 'len(j["excerpt"]) <= 4096')" = True
    check "$file: no process left" no_leftovers
}
run_broken compile_error.c compile_error "error: .b_row. undeclared"
run_broken segfault.c run_error "Segmentation fault|SIGSEGV|signal 11"
run_broken hang.c timeout "timed out after 3"
run_broken wrong_answer.c wrong_answer "Verification: FAIL C\[[0-9]+\]\[[0-9]+\]"
run_broken missing_result.c bad_output "no 'Verification: PASS\|FAIL' line"
run_broken frozen_edit.c frozen_violation "line [0-9]+ of the candidate differs"
check "frozen_edit: not built" test "$(json_get "$TMP/frozen_edit.json" 'j["level"] == 0 and j["compile_s"] == 0')" = True
check "compile_error: excerpt is not the whole log" \
    test "$(json_get "$TMP/compile_error.json" 'j["excerpt"].count("\n") < 45')" = True
check "failed builds are kept and named" \
    test "$(json_get "$TMP/segfault.json" 'j["build_dir"] is not None and "/work/cand-" in j["build_dir"]')" = True
check "segfault: kept build folder exists" test -d "$(json_get "$TMP/segfault.json" 'j["build_dir"]')"

# A seed that marks no EVOLVE-BLOCK (a foreign program): its transformed
# program carries markers, so it differs from the seed; --frozen-ref names
# the text to compare with instead (the transform's gen_0).
NM="$TMP/nomarks"
mkdir -p "$NM"
cp "$WL/workload.yaml" "$NM/"
grep -v 'EVOLVE-BLOCK-' "$WL/main.c" > "$NM/main.c"
"$CUCO_BIN" eval "$NM" "$WL/main.c" --json --level 1 --quiet --work-dir "$TMP/work" >"$TMP/nm1.json" 2>&1
check "seed without markers: a marked program is a frozen violation" \
    test "$(json_get "$TMP/nm1.json" 'j["status"]')" = frozen_violation
check "seed without markers: the excerpt names --frozen-ref" \
    grep -q -- "--frozen-ref" <(json_get "$TMP/nm1.json" 'j["excerpt"]')
"$CUCO_BIN" eval "$NM" "$WL/main.c" --frozen-ref "$WL/main.c" --json --level 1 --quiet \
    --work-dir "$TMP/work" >"$TMP/nm2.json" 2>&1
check "--frozen-ref: the same program against itself builds" \
    test "$(json_get "$TMP/nm2.json" 'j["status"] + str(j["level"])')" = ok1
"$CUCO_BIN" eval "$NM" "$BROKEN/frozen_edit.c" --frozen-ref "$WL/main.c" --json --level 1 --quiet \
    --work-dir "$TMP/work" >"$TMP/nm3.json" 2>&1
check "--frozen-ref: a frozen edit against it is still refused" \
    test "$(json_get "$TMP/nm3.json" 'j["status"]')" = frozen_violation
"$CUCO_BIN" eval "$NM" "$WL/main.c" --frozen-ref "$TMP/none.c" >/dev/null 2>"$TMP/nm4.err"
check "--frozen-ref of a missing file: exit 2" test $? -eq 2
check "--frozen-ref of a missing file: the path in the message" grep -q "$TMP/none.c" "$TMP/nm4.err"

# the build cache: a second evaluation of the same program reuses the binary;
# a different program is built; a failed build is not cached
BC="$TMP/bc"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" --level 2 >"$TMP/bc1.out" 2>"$TMP/bc1.err"
check "build cache: first run builds" grep -q "build cached as $BC/" "$TMP/bc1.err"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" --level 2 >"$TMP/bc2.out" 2>"$TMP/bc2.err"
check "build cache: second run reuses the binary" grep -q "L1 ok (cached build $BC/" "$TMP/bc2.err"
check "build cache: and still verifies" grep -q '^status *ok' "$TMP/bc2.out"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" "$CUCO_TEST_DATA/cpu_demo_broken/wrong_answer.c" --level 2 \
    >"$TMP/bc3.out" 2>"$TMP/bc3.err"
check "build cache: another program is built" bash -c "! grep -q 'cached build' '$TMP/bc3.err'"
check "build cache: two binaries" test "$(ls "$BC" | wc -l)" -eq 2
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" "$CUCO_TEST_DATA/cpu_demo_broken/compile_error.c" --level 1 \
    >/dev/null 2>&1
check "build cache: a failed build is not cached" test "$(ls "$BC" | wc -l)" -eq 2

# a header the program includes (from an -I folder, as the workloads include
# their harness) is part of the key: changing it makes a new build
HW="$TMP/hdrwl"
mkdir -p "$HW/inc"
cp "$WL/workload.yaml" "$HW/"
sed -i "s|command: \[mpicc, |command: [mpicc, \"-I$HW/inc\", |" "$HW/workload.yaml"
{ echo '#include "extra.h"'; cat "$WL/main.c"; } > "$HW/main.c"
printf '#include "nested.h"\n' > "$HW/inc/extra.h"
printf '#define CUCO_TEST_EXTRA 1\n' > "$HW/inc/nested.h"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh1.err"
check "build cache with a header: first run builds" grep -q "build cached as $BC/" "$TMP/bh1.err"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh2.err"
check "build cache with a header: unchanged header, cached build" grep -q "L1 ok (cached build" "$TMP/bh2.err"
printf '#define CUCO_TEST_EXTRA 2\n' > "$HW/inc/nested.h"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh3.err"
check "build cache with a header: a changed nested header rebuilds" grep -q "build cached as $BC/" "$TMP/bh3.err"

exit $fail
