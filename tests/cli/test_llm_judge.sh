#!/usr/bin/env bash
# test_llm_judge.sh: the optional LLM novelty judge of `cuco evolve` on
# workloads/cpu_demo against the replay server (script
# tests/data/llm/judge_cpu_demo.json). With novelty_judge on and a band that
# covers every code edit below the threshold, each llm_diff child is shown
# with its nearest program to the model: the first is judged DUPLICATE (stored
# as rejected_novelty with the judge's reason, never evaluated), the second
# NOVEL (evaluated), the third gets an unusable verdict (evaluated, the reason
# recorded with the call). Every judge call is billed like a mutation call and
# linked to the child it judged. With the judge off, no judge call is made.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
command -v sqlite3 >/dev/null || { echo "skip: sqlite3 not found"; exit 77; }
command -v mpicc >/dev/null || { echo "skip: mpicc not found (cpu_demo needs MPI)"; exit 77; }
[ -d "$CUCO_SRC/workloads/cpu_demo" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }

"$CUCO_BIN" evolve --help >"$CUCO_TEST_TMP/judge_help.$$" 2>&1
grep -q "novelty_judge:" "$CUCO_TEST_TMP/judge_help.$$" || fail "--help does not document novelty_judge"
grep -q "novelty_judge_band:" "$CUCO_TEST_TMP/judge_help.$$" || fail "--help does not document novelty_judge_band"
rm -f "$CUCO_TEST_TMP/judge_help.$$"

T="$CUCO_TEST_TMP/llm_judge.$$"
rm -rf "$T" && mkdir -p "$T"
server=
start_server() {
    rm -f "$T/port" "$T/requests.jsonl"
    python3 "$CUCO_SRC/tests/replay/replay_server.py" "$1" "$T/port" "$T/requests.jsonl" &
    server=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    [ -s "$T/port" ] || fail "replay server did not start"
    export CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$T/port")"
}
stop_server() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    server=
}
trap stop_server EXIT

export ANTHROPIC_API_KEY="sk-replay-judge"
export CUCO_LLM_PRICES="replay-model=1,10"
export CUCO_LLM_TIMEOUT_S=5
export CUCO_LLM_RETRIES=0

# One child per generation on one island. The three edits are 0.95 to 0.98
# similar to their nearest programs: below the threshold 0.99, inside the
# judge's band [0.94, 0.99).
cat >"$T/judge.yaml" <<'EOF'
islands: 1
children_per_island: 1
meta_interval: 0
novelty_threshold: 0.99
novelty_judge: true
novelty_judge_band: 0.05
budget:
  generations: 3
  evaluations: 0
EOF

start_server "$CUCO_TEST_DATA/llm/judge_cpu_demo.json"
"$CUCO_BIN" evolve "$CUCO_SRC/workloads/cpu_demo" --config "$T/judge.yaml" --mutator llm_diff \
    --model anthropic:replay-model --budget-usd 1 --seed 1 --repeats 1 \
    --workspace "$T/ws" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
stop_server
[ "$rc" -eq 0 ] || { cat "$T/err.txt" >&2; fail "cuco evolve exited $rc"; }
db="$T/ws/runs.db"
[ -f "$db" ] || fail "no database at $db"

# Six requests: three mutations, each followed by its judge call.
n=$(wc -l <"$T/requests.jsonl")
[ "$n" -eq 6 ] || fail "expected 6 requests, got $n"
python3 - "$T/requests.jsonl" <<'EOF' || fail "judge prompts"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
for i, r in enumerate(reqs):
    user = r["body"]["messages"][0]["content"]
    judge = "NOVEL or DUPLICATE" in user
    assert judge == (i % 2 == 1), (i, user[:200])
    if judge:
        # the diff from the nearest program to the candidate, with the
        # lines the mutation just changed
        assert "--- existing" in user and "+++ candidate" in user, user
        assert "@@" in user
        assert "EVOLVE-BLOCK-START" in user
first, third = reqs[1]["body"]["messages"][0]["content"], reqs[5]["body"]["messages"][0]["content"]
assert "+                        const double a_ik = a[k];" in first, first
assert "-                        const double aik = a[k];" in first, first
assert "+        MPI_Test(&reqs[c], &newest_done, MPI_STATUS_IGNORE);" in third, third
EOF

q() { sqlite3 "$db" "$1"; }
# The DUPLICATE child: rejected like a near-duplicate, with the judge's
# reason, never evaluated.
[ "$(q "SELECT COUNT(*) FROM programs WHERE generation > 0")" -eq 3 ] || fail "expected 3 children"
dup=$(q "SELECT id FROM programs WHERE status = 'rejected_novelty'")
[ -n "$dup" ] || fail "the DUPLICATE child is not rejected_novelty"
[ "$(q "SELECT COUNT(*) FROM programs WHERE status = 'rejected_novelty'")" -eq 1 ] ||
    fail "expected one rejected child"
[ "$(q "SELECT error FROM programs WHERE id = $dup")" = "judge: Only renames two variables and unrolls a loop the compiler already unrolls." ] ||
    fail "the judge's reason is not stored: $(q "SELECT error FROM programs WHERE id = $dup")"
q "SELECT code FROM programs WHERE id = $dup" | grep -q "a_ik" || fail "wrong child rejected"
[ "$(q "SELECT novelty < 0.99 AND novelty >= 0.94 FROM programs WHERE id = $dup")" = "1" ] ||
    fail "the rejected child's similarity is not in the band"
[ "$(q "SELECT time_ms IS NULL AND cached = 0 FROM programs WHERE id = $dup")" = "1" ] ||
    fail "the DUPLICATE child was evaluated"
[ "$(q "SELECT COUNT(*) FROM evaluations e JOIN programs p ON p.code_hash = e.code_hash WHERE p.id = $dup")" -eq 0 ] ||
    fail "the DUPLICATE child is in the evaluation cache"

# The NOVEL child and the one with an unusable verdict were evaluated.
[ "$(q "SELECT COUNT(*) FROM programs WHERE generation > 0 AND status = 'ok'")" -eq 2 ] ||
    fail "expected 2 evaluated children: $(q "SELECT status, error FROM programs")"
q "SELECT code FROM programs WHERE generation > 0 AND status = 'ok'" | grep -q "j + 3 < j_end" ||
    fail "the NOVEL child was not evaluated"
q "SELECT code FROM programs WHERE generation > 0 AND status = 'ok'" | grep -q "newest_done" ||
    fail "the child with an unusable verdict was not evaluated"

# Accounting: six billed calls of $0.02, three of them the judge's, each
# linked to the child it judged (the same child as the mutation before it).
[ "$(q "SELECT printf('%.6f', SUM(cost_usd)) FROM llm_calls")" = "0.120000" ] ||
    fail "llm_calls total $(q "SELECT SUM(cost_usd) FROM llm_calls"), expected 0.12"
[ "$(q "SELECT COUNT(*) FROM llm_calls WHERE purpose = 'novelty' AND status = 'ok'")" -eq 3 ] ||
    fail "expected 3 judge calls: $(q "SELECT purpose, status FROM llm_calls")"
[ "$(q "SELECT printf('%.6f', SUM(cost_usd)) FROM llm_calls WHERE purpose = 'novelty'")" = "0.060000" ] ||
    fail "judge calls not billed"
grep -q "0.12" "$T/out.txt" "$T/err.txt" || fail "the spend summary does not count the judge's calls"
[ "$(q "SELECT COUNT(*) FROM llm_calls c WHERE NOT EXISTS (SELECT 1 FROM programs p
        WHERE p.id = c.program_id AND p.generation > 0)")" -eq 0 ] || fail "a call is not linked to its child"
[ "$(q "SELECT COUNT(*) FROM (SELECT program_id FROM llm_calls GROUP BY program_id
        HAVING COUNT(*) = 2 AND SUM(purpose = 'novelty') = 1 AND SUM(purpose = 'diff') = 1)")" -eq 3 ] ||
    fail "each child should have one mutation and one judge call"
[ "$(q "SELECT program_id FROM llm_calls WHERE purpose = 'novelty' ORDER BY id LIMIT 1")" = "$dup" ] ||
    fail "the first judge call is not linked to the rejected child"

# The unusable verdict: treated as NOVEL, and why is recorded with its call.
why=$(q "SELECT error FROM llm_calls WHERE purpose = 'novelty' ORDER BY id DESC LIMIT 1")
echo "$why" | grep -q "unusable verdict, treated as NOVEL" || fail "unusable verdict not recorded: '$why'"
echo "$why" | grep -q "Hard to say" || fail "the unusable answer is not quoted: '$why'"
[ "$(q "SELECT COUNT(*) FROM llm_calls WHERE purpose = 'novelty' AND error IS NOT NULL")" -eq 1 ] ||
    fail "only the unusable verdict should carry an error"

[ "$(q "SELECT COUNT(*) FROM programs WHERE generation > 0 AND (novelty < 0.94 OR novelty >= 0.99)")" -eq 0 ] ||
    fail "a child outside the band"

# With the judge off (the default) the same run asks no judge: 3 requests.
sed 's/^novelty_judge: true/novelty_judge: false/' "$T/judge.yaml" >"$T/nojudge.yaml"
start_server "$CUCO_TEST_DATA/llm/judge_cpu_demo.json"
"$CUCO_BIN" evolve "$CUCO_SRC/workloads/cpu_demo" --config "$T/nojudge.yaml" --mutator llm_diff \
    --model anthropic:replay-model --budget-usd 1 --seed 1 --repeats 1 --generations 1 \
    --workspace "$T/ws2" >"$T/out2.txt" 2>"$T/err2.txt"
rc=$?
stop_server
[ "$rc" -eq 0 ] || { cat "$T/err2.txt" >&2; fail "cuco evolve without the judge exited $rc"; }
[ "$(wc -l <"$T/requests.jsonl")" -eq 1 ] || fail "a judge was asked with novelty_judge: false"
[ "$(sqlite3 "$T/ws2/runs.db" "SELECT COUNT(*) FROM llm_calls WHERE purpose = 'novelty'")" -eq 0 ] ||
    fail "judge call recorded with novelty_judge: false"
echo "ok"
