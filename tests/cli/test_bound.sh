#!/usr/bin/env bash
# test_bound.sh: 'cuco bound' without a GPU: --help, bad usage, the static
# verification audit on the small programs of tests/data/bound (warning,
# exit status and bound.json fields; a GPU-count guard and a registration
# that decide and read nothing; a seed with block start markers only),
# --emit-variants, the measurement path
# end to end on cpu_demo (built and timed, no timeline since it uses no
# GPU, no collective to remove), and the CUPTI injection library (built
# where CUPTI exists; exports InitializeInjection).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/bound.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
D="$CUCO_TEST_DATA/bound"
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

"$CUCO_BIN" bound --help >"$TMP/help" 2>&1
check "--help exits 0" test $? -eq 0
for opt in --json --workspace --ranks --args --nvcc-flags --timeout --single-run --build-only --part --static-only \
    --no-variants --emit-variants --injection --quiet; do
    check "--help mentions $opt" grep -q -- "$opt" "$TMP/help"
done
"$CUCO_BIN" bound >/dev/null 2>&1
check "no target: exit 2" test $? -eq 2
"$CUCO_BIN" bound "$TMP/missing.cu" --static-only >/dev/null 2>"$TMP/err"
check "missing program: exit 2" test $? -eq 2
check "missing program named" grep -q "missing.cu" "$TMP/err"
"$CUCO_BIN" bound "$D/audit_compare.cu" --bogus >/dev/null 2>&1
check "unknown option: exit 2" test $? -eq 2

# Static audit: a hollow PASS is a prominent warning, in bound.json too.
"$CUCO_BIN" bound "$D/audit_unconditional.cu" --static-only --quiet --workspace "$TMP/ws1" >"$TMP/out1"
check "unconditional PASS: exit 1" test $? -eq 1
check "unconditional PASS: WARNING printed" grep -q "^WARNING: verification audit (static)" "$TMP/out1"
check "bound.json written" test -f "$TMP/ws1/bound.json"
check "bound.json: warning true" test "$(json_get "$TMP/ws1/bound.json" "j['verification_audit']['warning']")" = True
check "bound.json: verdict unconditional" test \
    "$(json_get "$TMP/ws1/bound.json" "j['verification_audit']['static']['sites'][0]['verdict']")" = unconditional
check "bound.json: line of the PASS" test \
    "$(json_get "$TMP/ws1/bound.json" "j['verification_audit']['static']['sites'][0]['line']")" = 19

"$CUCO_BIN" bound "$D/audit_helper.cu" --static-only --quiet --json --workspace "$TMP/ws2" >"$TMP/out2"
check "checked PASS: exit 0" test $? -eq 0
check "--json prints the report" test "$(json_get "$TMP/out2" "j['verification_audit']['static']['sites'][0]['verdict']")" = checked
check "--json: no warning" test "$(json_get "$TMP/out2" "j['verification_audit']['warning']")" = False

# The hollow all-reduce: its PASS compares data the collective never wrote,
# and nothing reads what the all-reduce received: a static finding in CI.
"$CUCO_BIN" bound "$D/hollow_allreduce.cu" --static-only --quiet --workspace "$TMP/ws5" >"$TMP/out5"
check "hollow program: exit 1" test $? -eq 1
check "hollow program: WARNING printed" grep -q "^WARNING: verification audit (static):.*nothing reads" "$TMP/out5"
check "hollow program: the all-reduce named" grep -q "hollow_allreduce.cu:62 ncclAllReduce into y: received data never read" "$TMP/out5"
check "hollow program: comm_finding in bound.json" test \
    "$(json_get "$TMP/ws5/bound.json" "j['verification_audit']['static']['comm_finding']")" = True
check "hollow program: warning in bound.json" test \
    "$(json_get "$TMP/ws5/bound.json" "j['verification_audit']['warning']")" = True
# Registering the received buffer (ncclCommRegister) is no read of it, and a
# guard on the number of GPUs and ranks is no comparison of results.
"$CUCO_BIN" bound "$D/audit_gpu_guard.cu" --static-only --quiet --workspace "$TMP/ws9" >"$TMP/out9"
check "gpu guard: exit 1 (hollow)" test $? -eq 1
check "gpu guard: the guard decides nothing" \
    grep -q 'audit_gpu_guard.cu:37 "Verification: PASS\\n": unrelated: its conditions (nDev < nranks) do not' "$TMP/out9"
check "gpu guard: ncclCommRegister is not the read of the gathered data" \
    grep -q "audit_gpu_guard.cu:35 ncclAllGather into recvbuf: received data never read" "$TMP/out9"
# A seed laid out with block start markers only (no END): still audited.
"$CUCO_BIN" bound "$CUCO_TEST_DATA/transform/start_markers" --static-only --quiet --json \
    --workspace "$TMP/ws10" >"$TMP/out10" 2>&1
check "start markers only: audited (exit 0)" test $? -eq 0
check "start markers only: its PASS is checked" test \
    "$(json_get "$TMP/out10" "j['verification_audit']['static']['sites'][0]['verdict']")" = checked
"$CUCO_BIN" bound "$CUCO_TEST_DATA/transform/start_markers/start_markers.cu" \
    --emit-variants "$TMP/var10" >"$TMP/out10v" 2>&1
check "start markers only: variants written" test -f "$TMP/var10/start_markers.comm_removed.cu"
"$CUCO_BIN" bound "$CUCO_SRC/workloads/gemm_allgather" --static-only --quiet --json --workspace "$TMP/ws6" >"$TMP/out6"
check "gemm_allgather: no static finding" test $? -eq 0
check "gemm_allgather: its all-gather output is read" test \
    "$(json_get "$TMP/out6" "all(c['read'] for c in j['verification_audit']['static']['communication'])")" = True
"$CUCO_BIN" bound "$CUCO_SRC/workloads/gemm_allgather" --static-only --args "--m 8" >/dev/null 2>"$TMP/err6"
check "--args with a workload: exit 2" test $? -eq 2

# Variants written for inspection.
"$CUCO_BIN" bound "$D/hollow_allreduce.cu" --emit-variants "$TMP/var" >"$TMP/out3" 2>&1
check "--emit-variants: exit 0" test $? -eq 0
check "comm-removed variant written" test -f "$TMP/var/hollow_allreduce.comm_removed.cu"
check "compute-removed variant written" test -f "$TMP/var/hollow_allreduce.compute_removed.cu"
check "all-reduce removed" grep -q "CHECK_NCCL(ncclSuccess)" "$TMP/var/hollow_allreduce.comm_removed.cu"
check "all-reduce outside the variant kept" grep -q "ncclAllReduce" "$CUCO_SRC/tests/data/bound/hollow_allreduce.cu"
check "launch removed" bash -c "! grep -q 'scale<<<' '$TMP/var/hollow_allreduce.compute_removed.cu'"

# The measurement path end to end on the CPU workload (needs MPI only).
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    "$CUCO_BIN" bound "$CUCO_SRC/workloads/cpu_demo" --quiet --workspace "$TMP/ws4" >"$TMP/out4" 2>&1
    rc=$?
    check "cpu_demo: report written" test -f "$TMP/ws4/bound.json"
    check "cpu_demo: exit 0 (no warning, the program passed)" test $rc -eq 0
    check "cpu_demo: program_ok" test "$(json_get "$TMP/ws4/bound.json" "j['program_ok']")" = True
    check "cpu_demo: program ran and passed" test \
        "$(json_get "$TMP/ws4/bound.json" "j['program']['verification']")" = pass
    check "cpu_demo: program time measured" python3 -c \
        'import json,sys; j=json.load(open(sys.argv[1])); assert j["program"]["time_ms"] > 0' "$TMP/ws4/bound.json"
    check "cpu_demo: no timeline without a GPU" test \
        "$(json_get "$TMP/ws4/bound.json" "j['timeline']['available']")" = False
    check "cpu_demo: no collective to remove" test \
        "$(json_get "$TMP/ws4/bound.json" "j['verification_audit']['dynamic']['result']")" = no_collective
    # A run knob (read from the environment by the cascade's build) is run at
    # the value the program is written with, not at its first choice: here
    # only the written value 2 computes the rows (1 leaves them zero).
    mkdir -p "$TMP/runknob"
    cp "$CUCO_SRC/workloads/cpu_demo/workload.yaml" "$TMP/runknob/"
    sed -e 's|^#define CUCO_BLOCK 8 .*|&\n#define CUCO_RUN_SCALE 2 // cuco:knob run 1 2|' \
        -e 's|row_end = row0 + nrows;|row_end = row0 + nrows * (CUCO_RUN_SCALE - 1);|' \
        "$CUCO_SRC/workloads/cpu_demo/main.c" >"$TMP/runknob/main.c"
    check "run knob: the test program has it" grep -q "nrows \* (CUCO_RUN_SCALE - 1)" "$TMP/runknob/main.c"
    "$CUCO_BIN" bound "$TMP/runknob" --quiet --no-variants --workspace "$TMP/ws9" >"$TMP/out9" 2>&1
    check "run knob: measured at its written value (the program passed)" test \
        "$(json_get "$TMP/ws9/bound.json" "j['program']['verification']")" = pass
    # The same workload with a wrong answer: the run failed, so exit 1.
    mkdir -p "$TMP/wrong"
    cp "$CUCO_SRC/workloads/cpu_demo/workload.yaml" "$TMP/wrong/"
    cp "$CUCO_SRC/tests/data/cpu_demo_broken/wrong_answer.c" "$TMP/wrong/main.c"
    "$CUCO_BIN" bound "$TMP/wrong" --quiet --no-variants --workspace "$TMP/ws8" >"$TMP/out8" 2>&1
    check "wrong answer: exit 1" test $? -eq 1
    check "wrong answer: program_ok false" test \
        "$(json_get "$TMP/ws8/bound.json" "j['program_ok']")" = False
    check "wrong answer: verification fail" test \
        "$(json_get "$TMP/ws8/bound.json" "j['program']['verification']")" = fail
else
    echo "skip cpu_demo run: mpicc/mpirun not found"
fi

# A bare program: built with nvcc + MPI + NCCL in one command, unchanged
# (it cannot run here without a GPU; the build is what is checked).
if command -v mpicc >/dev/null && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
    [ -f /usr/local/cuda/include/nccl.h -o -n "${NCCL_HOME:-}" ]; then
    PATH="$PATH:/usr/local/cuda/bin" "$CUCO_BIN" bound "$D/hollow_allreduce.cu" --no-variants --quiet \
        --ranks 2 --args "--n 1024" --workspace "$TMP/ws7" -- --iters 2 >"$TMP/out7" 2>&1
    check "bare program: report written" test -f "$TMP/ws7/bound.json"
    check "bare program: built" test "$(json_get "$TMP/ws7/bound.json" "j['program']['built']")" = True
    check "bare program: 2 ranks" test "$(json_get "$TMP/ws7/bound.json" "j['ranks']")" = 2
    if nvidia-smi -L >/dev/null 2>&1; then
        check "bare program: ran and passed" test \
            "$(json_get "$TMP/ws7/bound.json" "j['program']['verification']")" = pass
    fi
else
    echo "skip bare program build: nvcc, mpicc or NCCL headers not found"
fi

# The injection library, where this build has CUPTI.
LIB="$(dirname "$CUCO_BIN")/libcuco_timeline.so"
if [ -f /usr/local/cuda/include/cupti.h ] || [ -f /usr/local/cuda/extras/CUPTI/include/cupti.h ]; then
    check "libcuco_timeline.so built" test -f "$LIB"
    check "InitializeInjection exported" bash -c "nm -D --defined-only '$LIB' | grep -qw InitializeInjection"
    check "nothing else exported but the entry point" test \
        "$(nm -D --defined-only "$LIB" | awk '$2 == "T"' | wc -l)" -eq 1
else
    echo "skip injection library checks: no CUPTI headers here"
fi
exit $fail
