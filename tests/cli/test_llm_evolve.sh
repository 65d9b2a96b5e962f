#!/usr/bin/env bash
# test_llm_evolve.sh: the whole LLM loop of `cuco evolve --mutator llm` on
# workloads/cpu_demo against the replay server (tests/replay/), with no real
# model: prompts are built as specified (checked in the server's request log),
# answers are applied, costs add up exactly, the budget stops the run before
# the call that could exceed it, and every kind of error (429 with
# retry-after, 500, truncated JSON, a slow answer past the timeout, a diff that
# does not apply, an edit outside the EVOLVE-BLOCK) leaves the run going.
#
# Replay script: tests/data/llm/evolve_cpu_demo.json. Prices: the model
# "replay-model" costs $1 / $10 per million input / output tokens, so each
# answered call (10000 in, 1000 out) costs exactly $0.02.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
command -v sqlite3 >/dev/null || { echo "skip: sqlite3 not found"; exit 77; }
command -v mpicc >/dev/null || { echo "skip: mpicc not found (cpu_demo needs MPI)"; exit 77; }
[ -d "$CUCO_SRC/workloads/cpu_demo" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }
if ! "$CUCO_BIN" evolve --help 2>&1 | grep -q -- '--model'; then
    echo "skip: this cuco evolve has no LLM mutator (--model) yet"
    exit 77
fi

T="$CUCO_TEST_TMP/llm_evolve.$$"
rm -rf "$T" && mkdir -p "$T"
python3 "$CUCO_SRC/tests/replay/replay_server.py" "$CUCO_TEST_DATA/llm/evolve_cpu_demo.json" \
    "$T/port" "$T/requests.jsonl" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || fail "replay server did not start"
port=$(cat "$T/port")

export ANTHROPIC_API_KEY="sk-replay-SECRET-42"
export CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$port"
export CUCO_LLM_PRICES="replay-model=1,10"
export CUCO_LLM_TIMEOUT_S=1
export CUCO_LLM_RETRIES=1
export CUCO_LLM_BACKOFF_S=0.05
export CUCO_LLM_PARALLEL=1

# Budget: each call is admitted against (estimated prompt tokens x $1 +
# max_tokens 8192 x $10) / 1e6 >= $0.08192. Answered calls cost $0.02; four
# are billed (good diff, diff that does not apply, edit outside the block,
# second good diff), so $0.06 is spent before the last good diff and $0.08
# after it: with a $0.161 limit that diff is admitted (prompts stay under
# 19,000 estimated tokens) and the next call is refused (0.08 + 0.08192 > 0.161).
# One bench repeat per evaluation keeps the test fast; timings do not matter.
"$CUCO_BIN" evolve "$CUCO_SRC/workloads/cpu_demo" --mutator llm \
    --model anthropic:replay-model --budget-usd 0.161 --slots 1 --generations 50 \
    --seed 1 --repeats 1 --workspace "$T/ws" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 0 ] || { cat "$T/err.txt" >&2; fail "cuco evolve exited $rc"; }

log="$T/requests.jsonl"
db="$T/ws/runs.db"
[ -f "$db" ] || fail "no database at $db"

# 9 requests: 429 + retry, 500 + truncated JSON, slow + slow retry, bad diff,
# outside edit, good diff. The 10th answer in the script is never asked for.
n=$(wc -l <"$log")
[ "$n" -eq 9 ] || fail "expected 9 requests to the server, got $n"
grep -q "must never be requested" "$log" && fail "the budget did not stop the run"

# Prompts: system prompt with the workload, API notes and strategies; the
# parent's code in the user prompt; later prompts show earlier failures.
python3 - "$log" <<'EOF' || fail "prompt content"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
for r in reqs:
    assert r["path"] == "/v1/messages", r["path"]
    assert r["headers"]["x-api-key"] == "sk-replay-SECRET-42"
    assert r["headers"]["anthropic-version"] == "2023-06-01"
    b = r["body"]
    assert b["model"] == "replay-model", b["model"]
    b["system"] = b["system"][0]["text"]  # one text block marked for the prompt cache
    assert "Workload: cpu_demo" in b["system"]
    assert "ncclGetLsaPointer" in b["system"] and "Fused push" in b["system"]
    user = b["messages"][0]["content"]
    assert "EVOLVE-BLOCK-START" in user and "cuco_compute_rows" in user
    assert "<<<<<<< SEARCH" in user or "EVOLVE-BLOCK-END" in user
last = reqs[-1]["body"]["messages"][0]["content"]
assert "Recent failed attempts" in last, "failures not fed back"
assert "for (int q = 0; q < n; q++)" in last or "not found" in last, "patch failure not shown"
EOF

# The key is never stored or printed.
grep -rq "sk-replay-SECRET-42" "$T/ws" "$T/out.txt" "$T/err.txt" && fail "API key leaked"

# Costs add up exactly: four billed calls of $0.02.
total=$(sqlite3 "$db" "SELECT printf('%.6f', SUM(cost_usd)) FROM llm_calls")
[ "$total" = "0.080000" ] || fail "llm_calls total $total, expected 0.080000"
ok_calls=$(sqlite3 "$db" "SELECT COUNT(*) FROM llm_calls WHERE status = 'ok'")
[ "$ok_calls" -eq 4 ] || fail "expected 4 answered calls, got $ok_calls"
grep -q "0.08" "$T/out.txt" "$T/err.txt" || fail "no spend summary printed"
grep -qi "budget" "$T/out.txt" "$T/err.txt" || fail "the stop was not explained"

# The run went on through every error: two children evaluated ok, the others
# recorded as failed with their reasons.
ok=$(sqlite3 "$db" "SELECT COUNT(*) FROM programs WHERE mutator LIKE 'llm%' AND status = 'ok'")
[ "$ok" -eq 2 ] || fail "expected 2 ok LLM children, got $ok"
sqlite3 "$db" "SELECT code FROM programs WHERE status = 'ok'" | grep -q "CUCO_BLOCK 32" ||
    fail "the good diff was not applied"
sqlite3 "$db" "SELECT status || ' ' || COALESCE(error, '') FROM programs" >"$T/programs.txt"
grep -qi "frozen\|outside" "$T/programs.txt" || fail "edit outside the block not rejected"
grep -qi "not found\|does not apply\|no match" "$T/programs.txt" || fail "bad diff not recorded"

# Failed calls (500 then truncated JSON; two timeouts) are infrastructure
# failures, not bad programs: infra_error with the call's error, no code;
# the unusable answers (a diff that does not apply, an edit outside the
# block) stay patch_failed.
infra=$(sqlite3 "$db" "SELECT COUNT(*) FROM programs WHERE status = 'infra_error'
    AND error LIKE '%LLM call failed%' AND code IS NULL")
[ "$infra" -eq 2 ] || fail "expected 2 infra_error children of failed calls, got $infra"
grep -q "^infra_error .*timeout" "$T/programs.txt" || fail "the timeout is not the stored error"
grep -q "^patch_failed .*LLM call failed" "$T/programs.txt" && fail "a failed call stored as patch_failed"
bad=$(sqlite3 "$db" "SELECT COUNT(*) FROM programs WHERE status = 'patch_failed'")
[ "$bad" -eq 2 ] || fail "expected 2 patch_failed children (bad diff, outside edit), got $bad"

# Every mutation call is linked to the child it produced (failed ones too).
calls=$(sqlite3 "$db" "SELECT COUNT(*) FROM llm_calls WHERE purpose IN ('diff','full','cross')")
[ "$calls" -eq 7 ] || fail "expected 7 mutation calls recorded, got $calls"
unlinked=$(sqlite3 "$db" "SELECT COUNT(*) FROM llm_calls c WHERE c.purpose IN ('diff','full','cross')
    AND c.status <> 'budget'
    AND NOT EXISTS (SELECT 1 FROM programs p WHERE p.id = c.program_id AND p.run_id = c.run_id
                    AND p.mutator LIKE 'llm%')")
[ "$unlinked" -eq 0 ] || fail "$unlinked mutation calls are not linked to their child"
linked=$(sqlite3 "$db" "SELECT COUNT(DISTINCT program_id) FROM llm_calls WHERE program_id IS NOT NULL")
[ "$linked" -eq 6 ] || fail "expected calls linked to 6 distinct children, got $linked"
echo "ok"
