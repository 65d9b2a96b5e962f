#!/usr/bin/env bash
# test_llm_transform.sh: the LLM route of `cuco transform` against the replay
# server (tests/replay/), on tests/data/llm/transform_max (an ncclAllReduce
# with ncclMax, which the rules refuse). Replay script
# tests/data/llm/transform_max_repair.json: stage A's edit builds; stage B's
# first edit does not compile, the compiler error goes back to the model and
# its second edit repairs it; the judge passes it. Without a GPU the outcome
# is "built, not verified: no GPU" (exit 3) and nothing is registered. Also:
# the prompts carry the analysis, the rules' refusal, the API notes and the
# device library notes; a budget too small for one call stops the route
# before any request; bad usage exits 2.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
if ! command -v nvcc >/dev/null || ! command -v mpicxx >/dev/null; then
    echo "skip: nvcc or mpicxx not found (the LLM route builds every edit with the manifest's nvcc command)"
    exit 77
fi
if [ -e /dev/nvidia0 ] || command -v nvidia-smi >/dev/null; then
    echo "skip: a GPU is present; this test checks the build-repair loop without one (the replayed edits would be run and verified here)"
    exit 77
fi

T="$CUCO_TEST_TMP/llm_transform.$$"
rm -rf "$T" && mkdir -p "$T"
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
WL="$CUCO_TEST_DATA/llm/transform_max"

# bad usage
"$CUCO_BIN" transform "$WL" --route llm --workspace "$T/u1" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--route llm without --model: not exit 2"
"$CUCO_BIN" transform "$WL" --route sideways --model x --workspace "$T/u2" >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad --route: not exit 2"
"$CUCO_BIN" transform --help | grep -q -- "--model SPEC" || fail "--help does not document --model"

python3 "$CUCO_SRC/tests/replay/replay_server.py" "$CUCO_TEST_DATA/llm/transform_max_repair.json" \
    "$T/port" "$T/requests.jsonl" &
server=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || fail "replay server did not start"
export ANTHROPIC_API_KEY="sk-replay-SECRET-42"
export CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$T/port")"
export CUCO_LLM_PRICES="replay-model=1,10"
export CUCO_LLM_RETRIES=1 CUCO_LLM_BACKOFF_S=0.05

# a budget below one call's estimate: refused before anything is sent
"$CUCO_BIN" transform "$WL" --model anthropic:replay-model --budget-usd 0.01 \
    --workspace "$T/poor" >"$T/poor.out" 2>"$T/poor.err"
rc=$?
cat "$T/poor.out"
[ "$rc" -eq 1 ] || fail "budget: exit $rc, expected 1"
grep -q "stopped: budget" "$T/poor.out" || fail "budget: the stop is not explained"
[ ! -s "$T/requests.jsonl" ] || fail "budget: a request was sent"

# answers without an edit: stage A gives up after --max-attempts, each
# failure fed back, nothing built (replay script transform_max_no_edit.json)
python3 "$CUCO_SRC/tests/replay/replay_server.py" "$CUCO_TEST_DATA/llm/transform_max_no_edit.json" \
    "$T/port2" "$T/requests2.jsonl" &
server2=$!
for _ in $(seq 100); do [ -s "$T/port2" ] && break; sleep 0.05; done
CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$T/port2")" "$CUCO_BIN" transform "$WL" \
    --route llm --max-attempts 2 --model anthropic:replay-model --workspace "$T/noedit" \
    >"$T/noedit.out" 2>"$T/noedit.err"
rc=$?
kill $server2 2>/dev/null
wait $server2 2>/dev/null
cat "$T/noedit.out"
[ "$rc" -eq 1 ] || fail "no edit: exit $rc, expected 1"
grep -q "stage A did not succeed in 2 attempts" "$T/noedit.out" || fail "no edit: not explained"
grep -q "applying the transform rules" "$T/noedit.err" && fail "--route llm ran the rules route"
[ "$(wc -l <"$T/requests2.jsonl")" -eq 2 ] || fail "no edit: expected 2 requests"
tail -1 "$T/requests2.jsonl" | grep -q "Your edit did not apply: no SEARCH/REPLACE block" ||
    fail "no edit: the failure was not fed back"
[ ! -e "$T/noedit/gen_0/allreduce_max.cu" ] || fail "no edit: a program was written"
[ ! -d "$T/noedit/eval" ] || [ -z "$(ls "$T/noedit/eval")" ] || fail "no edit: something was built"

# the staged route with a repair
"$CUCO_BIN" transform "$WL" --model anthropic:replay-model --workspace "$T/ws" \
    >"$T/out.txt" 2>"$T/err.txt"
rc=$?
cat "$T/out.txt" "$T/err.txt"
[ "$rc" -eq 3 ] || fail "expected exit 3 (built, not verified: no GPU), got $rc"
grep -q "transform_max: transformed; static check: static check passed; verification: built, not verified: no GPU" \
    "$T/out.txt" || fail "summary line"
grep -q "the rules did not transform it: LLM route" "$T/err.txt" || fail "the rules were not tried first"

g="$T/ws/gen_0"
python3 - "$g/transform_report.json" <<'PYEOF' || fail "report"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["route"] == "llm" and j["transformed"] is True, j
assert j["verification"] == "built, not verified: no GPU", j["verification"]
assert j["static_check"] == "static check passed"
assert j["stages"] == {"A": {"attempts": 1, "done": True}, "B": {"attempts": 2, "done": True}}, j["stages"]
steps = [(s["stage"], s["attempt"], s["result"]) for s in j["steps"]]
assert steps == [("A", 1, "built"), ("B", 1, "compile_error"), ("B", 2, "built")], steps
assert 'has no member "count"' in j["steps"][1]["detail"]
assert j["judge"]["verdict"] == "PASS"
calls = j["llm"]["calls"]
assert [c["purpose"] for c in calls] == ["transform_a", "transform_b", "transform_b", "transform_judge"], calls
assert all(c["status"] == "ok" for c in calls)
# three edits of 20000 in / 2000 out and a judge of 20000 / 500 at $1 / $10
assert abs(j["llm"]["usd"] - 0.145) < 1e-9, j["llm"]["usd"]
assert j["registered"] is None
assert any(n["kind"] == "note" and "the rules left host NCCL" in n["text"] and "ncclMax" in n["text"] and n["line"] == 43
           for n in j["notes"]), j["notes"]
PYEOF
grep -q "^- verification: built, not verified: no GPU" "$g/transform_report.md" || fail "markdown report"
prog="$g/allreduce_max.cu"
[ -s "$prog" ] || fail "no program in gen_0"
grep -q "cuco::all_gather(ex->symm, ex->x, 0, ex->n, stream)" "$prog" || fail "the repair is not in the program"
grep -q "symm_create" "$prog" || fail "stage A's infrastructure is not in the program"
grep -Eq '\bncclAllReduce\(' "$prog" && fail "a host all-reduce is left"
grep -q "^+++ b/allreduce_max.cu" "$g/program.diff" || fail "no diff"
[ "$(ls "$g/llm" | wc -l)" -eq 9 ] || fail "expected the system prompt, 4 prompts and 4 answers under gen_0/llm"
grep -q "ncclMax" "$g/llm/00-system.prompt.md" || fail "system prompt transcript"
[ ! -e "$T/ws/runs.db" ] || fail "registered before verification"

log="$T/requests.jsonl"
[ "$(wc -l <"$log")" -eq 4 ] || fail "expected 4 requests, got $(wc -l <"$log")"
python3 - "$log" <<'PYEOF' || fail "prompt content"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
for r in reqs:
    s = r["body"]["system"][0]["text"]
    assert "Workload: transform_max" in s
    assert "ncclAllReduce (all_reduce) in exchange_run" in s, "analysis summary missing"
    assert "reduction 'ncclMax' is not the literal ncclSum" in s, "the rules' refusal missing"
    assert "ncclGetLsaPointer" in s, "API notes missing"
    assert "symm_create" in s and "all_gather" in s, "device library notes missing"
    assert "EVOLVE-BLOCK" in s
users = [r["body"]["messages"][0]["content"] for r in reqs]
assert "# Stage A (attempt 1 of 4)" in users[0] and "ncclMax, ex->comm" in users[0]
assert "# Stage B (attempt 1 of 4)" in users[1] and "symm_create" in users[1]
assert "# Stage B (attempt 2 of 4)" in users[2]
assert 'has no member "count"' in users[2], "the compiler error was not fed back"
assert "ex->count" in users[2], "the repair prompt does not show the failed edit"
assert "Original host-driven program" in users[3] and "max_of_ranks" in users[3]
assert "must never be requested" not in json.dumps(reqs)
PYEOF
grep -rq "sk-replay-SECRET-42" "$T/ws" "$T/out.txt" "$T/err.txt" && fail "API key leaked"
echo "ok"
