#!/usr/bin/env bash
# test_run_confirm.sh: 'cuco run' ends with the confirm step: the seed and the
# best program timed side by side in interleaved rounds (confirm.json, a table
# on stdout, a section of the report); --confirm-rounds 0 skips it and a bad
# value is a usage error. The run ends with a summary line and where the time
# went on stdout (progress on stderr); --json makes stdout one JSON object,
# and 'cuco report --json' prints the run's summary. On cpu_demo (needs MPI
# only).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo is an MPI program)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/run-confirm.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

"$CUCO_BIN" run "$CUCO_SRC/workloads/cpu_demo" --confirm-rounds x >"$TMP/bad" 2>&1
check "--confirm-rounds x: exit 2" test $? -eq 2
check "--confirm-rounds x: says why" grep -q -- "--confirm-rounds needs a whole number" "$TMP/bad"
"$CUCO_BIN" run --help >"$TMP/help" 2>&1
check "--help documents the confirm step" grep -q "confirm-rounds" "$TMP/help"

"$CUCO_BIN" run "$CUCO_SRC/workloads/cpu_demo" --workspace "$TMP/ws" --evaluations 3 \
    --confirm-rounds 2 --retime-rounds 0 >"$TMP/stdout" 2>"$TMP/stderr"
rc=$?
cat "$TMP/stdout" "$TMP/stderr" >"$TMP/out"
check "run: exit 0" test $rc -eq 0
check "confirm step ran" grep -q "== cuco run: confirm" "$TMP/out"
if cmp -s "$TMP/ws/best.c" "$CUCO_SRC/workloads/cpu_demo/main.c"; then
    # the search kept the seed: nothing to compare, said so
    check "best is the seed: said so" grep -q "the best program is the seed itself" "$TMP/out"
    check "best is the seed: no confirm.json" test ! -e "$TMP/ws/confirm.json"
else
    check "confirm.json written" test -f "$TMP/ws/confirm.json"
    check "seed first" test "$(json_get "$TMP/ws/confirm.json" "j['programs'][0]['label']")" = seed
    check "best second" test "$(json_get "$TMP/ws/confirm.json" "j['programs'][1]['label']")" = best
    check "2 rounds each" test \
        "$(json_get "$TMP/ws/confirm.json" "[len(p['times_ms']) for p in j['programs']]")" = "[2, 2]"
    check "medians within min..max" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
for p in j["programs"]:
    assert p["status"] == "ok", p
    assert p["min_ms"] <= p["median_ms"] <= p["max_ms"], p
s = j["speedups"]["best_vs_seed"]
assert abs(s - j["programs"][0]["median_ms"] / j["programs"][1]["median_ms"]) < 1e-9
' "$TMP/ws/confirm.json"
    check "the bound from the seed's own breakdown" python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["bound"]
assert b["bound_ms"] == max(b["compute_ms"], b["comm_ms"]), b
' "$TMP/ws/confirm.json"
    check "table printed" grep -Eq "^  best +[0-9.]+ ms .*over the seed" "$TMP/out"
    # nccl-tests' figures: cpu_demo reports the bytes each rank receives
    check "table: bytes, algbw, busbw, #wrong" grep -Eq \
        "^  seed .* bytes [0-9.]+M  algbw [0-9.e+-]+  busbw [0-9.e+-]+ GB/s  #wrong 0$" "$TMP/out"
    check "confirm.json: bytes, algbw, busbw, wrong" python3 -c '
import json, sys
for p in json.load(open(sys.argv[1]))["programs"]:
    assert p["bytes"] == p["metrics"]["bytes"] > 0 and p["wrong"] == 0, p
    assert abs(p["algbw_gbps"] - p["bytes"] / (p["median_ms"] * 1e6)) < 1e-9, p
    assert abs(p["busbw_gbps"] - p["bytes"] / (p["metrics"]["comm_ms"] * 1e6)) < 1e-9, p
' "$TMP/ws/confirm.json"
    check "report has the section" grep -q "^## Side by side" "$TMP/ws/report.md"
    check "report: fresh" bash -c "! grep -q 'the search went on' '$TMP/ws/report.md'"
    # the order of the runs rotates: round 2 starts with the best
    check "rounds interleaved, order rotated" bash -c \
        "grep -A1 'round 2/2: best' '$TMP/out' | grep -q 'round 2/2: seed'"
fi

# the final summary: the speedup (ms -> ms), programs, failures, wall time,
# and where the time went; results on stdout, progress on stderr
check "summary line on stdout" grep -Eq \
    "^cuco run: cpu_demo: [0-9.]+x \([0-9.]+ ms -> [0-9.]+ ms, .*\); .*[0-9]+ programs, [0-9]+ failed; " \
    "$TMP/stdout"
check "where the time went on stdout" grep -Eq "^cuco run: time: .*evolve [0-9.]+s .*report" \
    "$TMP/stdout"
check "progress on stderr only" bash -c "! grep -q '== cuco run' '$TMP/stdout' &&
    grep -q '== cuco run: evolve' '$TMP/stderr'"
"$CUCO_BIN" report "$TMP/ws" --json >"$TMP/report.json" 2>"$TMP/report.err"
check "report --json: exit 0" test $? -eq 0
check "report --json: one JSON object with the summary" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["html"].endswith("report.html") and j["md"].endswith("report.md"), j
assert j["summary"]["best"]["id"] >= 1 and j["summary"]["baseline_ms"] > 0, j
' "$TMP/report.json"

"$CUCO_BIN" run "$CUCO_SRC/workloads/cpu_demo" --workspace "$TMP/ws0" --evaluations 1 \
    --confirm-rounds 0 --retime-rounds 0 --json >"$TMP/out0" 2>"$TMP/err0"
check "--confirm-rounds 0: exit 0" test $? -eq 0
check "--confirm-rounds 0: no confirm step" bash -c "! grep -q '== cuco run: confirm' '$TMP/err0'"
check "--confirm-rounds 0: no confirm.json" test ! -e "$TMP/ws0/confirm.json"
check "--json: stdout is one JSON object with the result" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["workload"] == "cpu_demo" and j["exit_status"] == 0, j
assert j["result"]["speedup"] > 0 and j["result"]["programs"] >= 1, j
assert "evolve" in j["steps"] and "confirm" not in j["steps"], j
assert j["summary"]["best"]["id"] >= 1, j
' "$TMP/out0"
[ $fail = 0 ] || cat "$TMP/out"
exit $fail
