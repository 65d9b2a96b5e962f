#!/usr/bin/env bash
# test_bound_timeline.sh: the whole 'cuco bound' measurement of a bare
# program, without a GPU: tests/data/bound/fake_timeline.cu writes the
# timeline file the CUPTI library would write (kernels and the program's own
# timed intervals). Checks the per-step figures, the headline bound from
# them, the advice, the communication-removed variant of a program without
# EVOLVE-BLOCKs (built and run: it still passes, the dynamic audit's
# finding), --single-run, --build-only reuse, and the summary that
# scripts/device.d/60-bound.sh writes from such a report.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "skip: no MPI"; exit 77; }
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "skip: no nvcc"; exit 77; }
[ -f /usr/local/cuda/include/nccl.h ] || [ -n "${NCCL_HOME:-}" ] || { echo "skip: no NCCL headers"; exit 77; }
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/bound-tl.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PROG="$CUCO_TEST_DATA/bound/fake_timeline.cu"
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
val() { # val FILE EXPR
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
near() { # near FILE EXPR WANT
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); sys.exit(0 if v is not None and abs(v-float(sys.argv[3]))<1e-6 else 1)' "$1" "$2" "$3"
}
: > "$TMP/fake_inject.so" # no CUDA driver here: nothing loads it

# Build first, in two processes, as 60-bound.sh does; the run reuses the builds.
"$CUCO_BIN" bound "$PROG" --ranks 2 --workspace "$TMP/ws" --build-only --part program --quiet >"$TMP/b1" 2>&1 &
"$CUCO_BIN" bound "$PROG" --ranks 2 --workspace "$TMP/ws" --build-only --part comm_removed \
    --part compute_removed --quiet >"$TMP/b2" 2>&1
rc2=$?
wait $!
rc1=$?
check "--build-only program: exit 0" test $rc1 -eq 0
check "--build-only variants: exit 0" test $rc2 -eq 0
check "--build-only: nothing to remove for compute_removed" grep -q "^compute_removed: no call to remove" "$TMP/b2"
check "--build-only: comm_removed built" grep -q "^comm_removed: built in" "$TMP/b2"

"$CUCO_BIN" bound "$PROG" --ranks 2 --injection "$TMP/fake_inject.so" --workspace "$TMP/ws" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
B="$TMP/ws/bound.json"
check "exit 1 (a warning)" test $rc -eq 1
check "builds reused" test "$(grep -c 'reusing the build' "$TMP/err")" -eq 2
check "timeline available" test "$(val "$B" "j['timeline']['available']")" = True
check "rank 0 is critical" test "$(val "$B" "j['timeline']['ranks'][j['timeline']['critical']]['rank']")" = 0
check "whole run: compute 100 ms" near "$B" "j['timeline']['ranks'][0]['compute_ms']" 100
check "timed intervals: 9" test "$(val "$B" "j['timeline']['ranks'][0]['timed']['intervals']")" = 9
check "full step: compute 10 ms" near "$B" "j['timeline']['ranks'][0]['timed']['full']['compute_ms']" 10
check "full step: comm 3 ms" near "$B" "j['timeline']['ranks'][0]['timed']['full']['comm_ms']" 3
check "compute-only step: 10 ms" near "$B" "j['timeline']['ranks'][0]['timed']['compute_only']['compute_ms']" 10
check "comm-only step: 3 ms" near "$B" "j['timeline']['ranks'][0]['timed']['comm_only']['comm_ms']" 3
check "rank 1: compute-only step 9 ms" near "$B" "j['timeline']['ranks'][1]['timed']['compute_only']['compute_ms']" 9
check "headline from the timed parts" test "$(val "$B" "j['bound']['source']")" = timeline_parts
check "headline per step" test "$(val "$B" "j['bound']['per_step']")" = True
check "ceiling 13/10" near "$B" "j['bound']['ceiling']" 1.3
check "comm share 3/13" near "$B" "j['bound']['comm_share']" "$(python3 -c 'print(3/13)')"
check "bound time 13/1.3" near "$B" "j['bound']['bound_time_ms']" 10
check "advice" grep -q "^advice: Communication is 23.1% of the critical rank's time; ceiling 1.300x: worth searching." "$TMP/out"
check "program's own figures" near "$B" "j['program']['compute_ms']" 10
check "comm_removed built without EVOLVE-BLOCKs" test "$(val "$B" "j['comm_removed']['built']")" = True
check "comm_removed still passes" test "$(val "$B" "j['comm_removed']['verification']")" = pass
check "dynamic finding" test "$(val "$B" "j['verification_audit']['dynamic']['result']")" = passes_without_communication
check "WARNING printed" grep -q "^WARNING: verification audit (dynamic)" "$TMP/out"
check "static audit clean" test "$(val "$B" "j['verification_audit']['static']['finding']")" = False
check "two runs by default" test "$(val "$B" "j['single_run']")" = False

"$CUCO_BIN" bound "$PROG" --ranks 2 --injection "$TMP/fake_inject.so" --workspace "$TMP/ws" \
    --single-run --no-variants --quiet >"$TMP/out2" 2>&1
check "--single-run recorded" test "$(val "$B" "j['single_run']")" = True
check "--single-run: own time from the timeline run" near "$B" "j['program']['time_ms_with_timeline']" 13
check "--single-run: timeline still there" test "$(val "$B" "j['timeline']['ranks'][0]['timed']['intervals']")" = 9

# The device script's summary, from this report standing in for a workload's.
SUM="$TMP/sum"
mkdir -p "$SUM"
cp "$B" "$SUM/gemm_allgather.json"
awk "/<<'PY'/{on=1; next} /^PY\$/{on=0} on" "$CUCO_SRC/scripts/device.d/60-bound.sh" >"$TMP/summary.py"
python3 "$TMP/summary.py" "$SUM" "$SUM/summary.json" "gemm_allgather hollow_allreduce" 7 >"$TMP/sum.log" 2>&1
check "device summary written" test -f "$SUM/summary.json"
check "device summary: like-for-like basis" bash -c "grep -q 'compute-only and comm-only steps' '$SUM/summary.json'"
check "device summary: agreement 0%" near "$SUM/summary.json" "j['targets'][0]['agreement']['compute_pct']" 0
check "device summary: within 10%" test "$(val "$SUM/summary.json" "j['workloads_agree_within_10pct']")" = "['gemm_allgather']"
check "device summary: missing target listed" test "$(val "$SUM/summary.json" "j['targets'][1]['status']")" = "not run"
exit $fail
