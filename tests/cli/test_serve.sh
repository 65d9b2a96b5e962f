#!/usr/bin/env bash
# test_serve.sh: 'cuco serve' over HTTP on a recorded run: port 0 picks a
# free port and prints the URL, every endpoint answers JSON, bad requests get
# 400/404/405, the page and its files are served, answers keep coming while
# another process writes to the database, and SIGTERM stops it cleanly.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
work="$CUCO_TEST_TMP/serve.$$"
rm -rf "$work"; mkdir -p "$work/ws"
server=""; writer=""
cleanup() {
  [ -n "$writer" ] && kill "$writer" 2>/dev/null
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
db="$work/ws/runs.db"
sqlite3 "$db" < "$CUCO_TEST_DATA/web/run.sql" || fail "loading run.sql"
sqlite3 "$db" "PRAGMA journal_mode=WAL;" >/dev/null

# usage errors
"$CUCO_BIN" serve "$work/ws" --port 70000 2>/dev/null; [ $? = 2 ] || fail "bad port accepted"
"$CUCO_BIN" serve "$work/nothing" --port 0 2>/dev/null; [ $? = 2 ] || fail "missing workspace accepted"
"$CUCO_BIN" serve --help | grep -q -- "--port" || fail "--help lacks --port"

"$CUCO_BIN" serve "$work/ws" --port 0 > "$work/out" 2> "$work/err" &
server=$!
for _ in $(seq 1 100); do grep -q 'http://127.0.0.1:[0-9]' "$work/out" 2>/dev/null && break; sleep 0.1; done
port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/out" | sed 's/.*://')
[ -n "$port" ] && [ "$port" != 0 ] || fail "no URL printed: $(cat "$work/err")"
base="http://127.0.0.1:$port"
status() { curl -s -o "$work/body" -w '%{http_code}' -X "${2:-GET}" "$base$1"; }
expect() { # path method code [grep pattern]
  local code; code=$(status "$1" "$2")
  [ "$code" = "$3" ] || fail "$2 $1: HTTP $code, expected $3: $(head -c 300 "$work/body")"
  [ -z "${4:-}" ] || grep -q -- "$4" "$work/body" || fail "$2 $1: body lacks $4: $(head -c 300 "$work/body")"
}
expect / GET 200 '<script src="app.js">'
expect /app.js GET 200 'program='
expect /style.css GET 200 'body'
expect /api/runs GET 200 '"workload":"cpu_demo"'
expect '/api/programs?run=1&status=ok&order=-score&limit=1' GET 200 '"count":1,"programs":\[{"id":7'
expect '/api/programs?run=1&island=0&generation=1' GET 200 '"count":1'
expect /api/programs/4 GET 200 '"diff":"--- program 2'
expect '/api/evaluations?run=1' GET 200 '"count":8'
expect '/api/llm?run=1' GET 200 '"calls":3'
expect '/api/meta?run=1' GET 200 'Smaller chunks help'
expect '/api/summary?run=1' GET 200 '"gap_closed":0.909'
expect /api/programs/12345 GET 404 '"error"'
expect /api/unknown GET 404 'no such endpoint'
expect /nothing.html GET 404
expect '/api/programs?limit=abc' GET 400 'bad limit'
expect '/api/programs?order=name' GET 400 'bad order'
expect '/api/summary?run=0' GET 400 'bad run'
expect /api/runs POST 405 'read-only'
expect /api/programs/1 DELETE 405
expect /api/programs/1 PUT 405
allow=$(curl -s -D - -o /dev/null -X POST "$base/api/runs" | tr -d '\r' | grep -i '^allow:')
[ "$allow" = "Allow: GET, HEAD" ] || fail "405 without Allow header ($allow)"
[ "$(curl -s -I -o /dev/null -w '%{http_code}' "$base/api/runs")" = 200 ] || fail "HEAD failed"

# a writer inserting programs the whole time the API is asked
python3 - "$db" <<'PY' &
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None)
for i in range(40):
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT INTO programs(run_id, parent_id, island, generation, code, mutator, status, score, time_ms, created_at)"
                " VALUES(1, 7, 0, 5, 'x', 'knob', 'ok', 1.0, 10.0, ?)", (time.time(),))
    time.sleep(0.05)  # hold the write transaction open
    con.execute("COMMIT")
PY
writer=$!
n=0
while kill -0 "$writer" 2>/dev/null; do
  code=$(curl -s -m 5 -o "$work/body" -w '%{http_code}' "$base/api/programs?run=1&limit=1")
  [ "$code" = 200 ] || fail "API answered $code while the database was written"
  n=$((n + 1))
done
wait "$writer" || fail "writer failed"
writer=""
[ "$n" -ge 3 ] || fail "only $n requests made during the writes"
expect '/api/programs?run=1' GET 200 '"count":49'
[ "$(sqlite3 "$db" 'SELECT count(*) FROM programs')" = 50 ] || fail "program count changed by the API"

kill -TERM "$server"
for _ in $(seq 1 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server" 2>/dev/null && fail "cuco serve did not stop on SIGTERM"
wait "$server"; rc=$?; server=""
[ "$rc" = 0 ] || fail "cuco serve exited $rc after SIGTERM: $(cat "$work/err")"
echo "PASS ($n requests during writes)"
