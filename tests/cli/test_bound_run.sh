#!/usr/bin/env bash
# test_bound_run.sh: 'cuco run' reads the bound.json that 'cuco bound' left in
# the workspace: it prints the advice paragraph and the verification warning
# before any other step, and with a ceiling under 1.05x it stops before an
# LLM mutator spends anything unless --force is given; the offline knob
# mutator is never stopped. Uses cpu_demo (no GPU: the bound step itself is
# skipped, the file is written here).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/bound-run.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
WL="$CUCO_SRC/workloads/cpu_demo"
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
bound_json() { # bound_json DIR CEILING WARNING(true|false)
    mkdir -p "$1"
    cat >"$1/bound.json" <<JSON
{"version": 1, "workload": "cpu_demo", "ranks": 2,
 "verification_audit": {"warning": $3,
   "static": {"finding": false, "summary": "1 success line, decided by a comparison of results", "sites": []},
   "dynamic": {"result": "passes_without_communication", "finding": $3}, "message": ""},
 "bound": {"source": "timeline", "comm_share": 0.007, "ceiling": $2},
 "advice": "Communication is 0.7% of the critical rank's GPU time; the most any overlap can gain is ${2}x. ADVICE-MARK"}
JSON
}

"$CUCO_BIN" run --help >"$TMP/help"
check "--help explains --force" grep -q -- "--force" "$TMP/help"
check "--help names the LLM mutators gate" grep -q "llm_diff" "$TMP/help"

# Low ceiling + LLM mutator: stops before analyze, advice and warning first.
bound_json "$TMP/ws1" 1.007 true
"$CUCO_BIN" run "$WL" --workspace "$TMP/ws1" --mutator llm --model m >"$TMP/out1" 2>"$TMP/err1"
rc=$?
check "low ceiling + llm: exit 1" test $rc -eq 1
check "low ceiling + llm: asks for --force" grep -q -- "--force" "$TMP/err1"
check "low ceiling + llm: ceiling named" grep -q "1.007x" "$TMP/err1"
check "advice printed (stderr: progress)" grep -q "ADVICE-MARK" "$TMP/err1"
check "warning printed" grep -q "^WARNING: verification may not check the results" "$TMP/err1"
check "nothing after the gate ran (no analyze)" bash -c "! grep -q '== cuco run: analyze' '$TMP/out1' '$TMP/err1'"
check "no analysis.json written" test ! -f "$TMP/ws1/analysis.json"
first=$(grep -n "ADVICE-MARK" "$TMP/err1" | head -1 | cut -d: -f1)
check "advice comes before any step" test -n "$first"

# The same through a mutator passed on to evolve after '--'.
"$CUCO_BIN" run "$WL" --workspace "$TMP/ws1" -- --mutator llm_diff --model m >"$TMP/out2" 2>"$TMP/err2"
check "llm_diff after '--': stopped too" test $? -eq 1
check "llm_diff after '--': named" grep -q "llm_diff" "$TMP/err2"

# --force lets it go on (analyze runs; evolve then needs a real model and fails).
"$CUCO_BIN" run "$WL" --workspace "$TMP/ws1" --mutator llm --model m --force --generations 1 \
    --evaluations 1 >"$TMP/out3" 2>"$TMP/err3"
check "--force: goes past the gate" grep -q "searching anyway (--force)" "$TMP/err3"
check "--force: analyze ran" grep -q "== cuco run: analyze" "$TMP/err3"
check "--force: the warning is repeated after the speedups" test \
    "$(grep -c '^WARNING: verification may not check the results' "$TMP/err3")" -ge 2

# A high ceiling does not stop an LLM search (analyze runs).
bound_json "$TMP/ws2" 1.6 false
"$CUCO_BIN" run "$WL" --workspace "$TMP/ws2" --mutator llm --model m --generations 1 \
    --evaluations 1 >"$TMP/out4" 2>"$TMP/err4"
check "high ceiling: not stopped" bash -c "! grep -q 'Nothing was spent' '$TMP/err4'"
check "high ceiling: analyze ran" grep -q "== cuco run: analyze" "$TMP/err4"
check "no warning when the audit found none" bash -c "! grep -q '^WARNING' '$TMP/out4' '$TMP/err4'"
exit $fail
