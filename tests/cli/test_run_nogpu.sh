#!/usr/bin/env bash
# test_run_nogpu.sh: 'cuco run' on a GPU workload where no GPU is visible stops
# before the search with a clear message (exit 1), instead of failing every
# candidate; a CPU workload is not affected (covered by the other tests).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if [ -e /dev/nvidia0 ] || command -v nvidia-smi >/dev/null; then
    echo "skip: a GPU is visible here; this test is for machines without one"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/run-nogpu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
"$CUCO_BIN" run "$CUCO_SRC/workloads/kv_transfer" --workspace "$TMP/ws" --from-seed \
    >"$TMP/out" 2>&1
rc=$?
check "exit 1" test "$rc" -eq 1
check "says a GPU is needed" grep -q "kv_transfer needs a GPU and none is visible here" "$TMP/out"
check "no search was started" bash -c "! grep -q '== cuco run: evolve' '$TMP/out'"
check "no database of failed candidates" test ! -e "$TMP/ws/runs.db"
[ $fail = 0 ] || cat "$TMP/out"
exit $fail
