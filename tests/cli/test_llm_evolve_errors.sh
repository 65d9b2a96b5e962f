#!/usr/bin/env bash
# test_llm_evolve_errors.sh: `cuco evolve --mutator llm` when the LLM calls
# cannot work. A missing key is a usage error before any run (exit 2, naming
# the variable); a key the server refuses (HTTP 401, replay script
# tests/data/llm/evolve_bad_key.json) and a server that cannot be reached
# each stop the LLM mutators after the first failed call with a clear error
# (exit 1, no crash), that call recorded in llm_calls and its candidate
# stored as infra_error ("LLM call failed"), never as a wrong answer.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
command -v sqlite3 >/dev/null || { echo "skip: sqlite3 not found"; exit 77; }
command -v mpicc >/dev/null || { echo "skip: mpicc not found (cpu_demo needs MPI)"; exit 77; }
[ -d "$CUCO_SRC/workloads/cpu_demo" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }

T="$CUCO_TEST_TMP/llm_evolve_errors.$$"
rm -rf "$T" && mkdir -p "$T"
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
export CUCO_LLM_TIMEOUT_S=2 CUCO_LLM_RETRIES=1 CUCO_LLM_BACKOFF_S=0.05 CUCO_LLM_PARALLEL=1
evolve() { # evolve WORKSPACE [more args]
    local ws=$1
    shift
    "$CUCO_BIN" evolve "$CUCO_SRC/workloads/cpu_demo" --mutator llm_diff \
        --model anthropic:replay-model --price "replay-model=1,10" --slots 1 \
        --generations 3 --seed 1 --repeats 1 --workspace "$ws" "$@"
}

# 1. no key: refused before anything runs
unset ANTHROPIC_API_KEY
evolve "$T/nokey" >"$T/nokey.out" 2>"$T/nokey.err"
rc=$?
[ "$rc" -eq 2 ] || { cat "$T/nokey.err" >&2; fail "no key: exit $rc, expected 2"; }
grep -q "ANTHROPIC_API_KEY is not set" "$T/nokey.err" || fail "no key: the variable is not named"
if [ -f "$T/nokey/runs.db" ]; then
    [ "$(sqlite3 "$T/nokey/runs.db" "SELECT COUNT(*) FROM runs")" -eq 0 ] || fail "no key: a run was started"
fi

# 2. a key the server refuses
python3 "$CUCO_SRC/tests/replay/replay_server.py" "$CUCO_TEST_DATA/llm/evolve_bad_key.json" \
    "$T/port" "$T/requests.jsonl" &
server=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || fail "replay server did not start"
export ANTHROPIC_API_KEY="sk-replay-WRONG-7"
CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$T/port")" evolve "$T/badkey" \
    >"$T/badkey.out" 2>"$T/badkey.err"
rc=$?
cat "$T/badkey.err"
[ "$rc" -eq 1 ] || fail "bad key: exit $rc, expected 1"
grep -q "LLM calls cannot work.*HTTP 401.*invalid x-api-key.*check ANTHROPIC_API_KEY" "$T/badkey.err" ||
    fail "bad key: no clear error"
[ "$(wc -l <"$T/requests.jsonl")" -eq 1 ] || fail "bad key: calls went on after the 401"
db="$T/badkey/runs.db"
[ "$(sqlite3 "$db" "SELECT status FROM llm_calls")" = "http_error" ] || fail "bad key: call not recorded"
sqlite3 "$db" "SELECT status || ' ' || error FROM programs WHERE mutator = 'llm_diff'" >"$T/badkey.programs"
[ "$(wc -l <"$T/badkey.programs")" -eq 1 ] || fail "bad key: expected one failed candidate"
# a refused call is not the candidate's fault: infra_error, not patch_failed
grep -q "^infra_error .*LLM call failed.*401" "$T/badkey.programs" ||
    fail "bad key: candidate not stored as infra_error"
[ "$(sqlite3 "$db" "SELECT program_id = (SELECT id FROM programs WHERE mutator = 'llm_diff') FROM llm_calls")" = "1" ] ||
    fail "bad key: the call is not linked to its candidate"
[ "$(sqlite3 "$db" "SELECT status FROM programs WHERE generation = 0 AND island = 0")" = "ok" ] ||
    fail "bad key: the baseline was not kept"
grep -rq "sk-replay-WRONG-7" "$T/badkey" "$T/badkey.out" "$T/badkey.err" && fail "bad key: key leaked"
kill $server 2>/dev/null
wait $server 2>/dev/null
server=

# 3. nothing listens at the base URL (a port just closed)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$port" evolve "$T/down" >"$T/down.out" 2>"$T/down.err"
rc=$?
cat "$T/down.err"
[ "$rc" -eq 1 ] || fail "unreachable: exit $rc, expected 1"
grep -q "LLM calls cannot work.*connection failed.*CUCO_ANTHROPIC_BASE_URL" "$T/down.err" ||
    fail "unreachable: no clear error"
db="$T/down/runs.db"
[ "$(sqlite3 "$db" "SELECT status FROM llm_calls")" = "retries_exhausted" ] || fail "unreachable: call not recorded"
grep -q "stopped: the LLM calls cannot work" "$T/down.out" || fail "unreachable: stop not explained"
echo "ok"
