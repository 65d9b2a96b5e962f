#!/usr/bin/env bash
# test_hostile.sh: the hostile-candidate suite of issue #23. Every case of
# tests/hostile/ (one file each: an edit of cpu_demo's EVOLVE-BLOCK, its
# header says what it attacks and which statuses are right; see
# tests/hostile/README.md) is run
#   - through `cuco eval WORKLOAD CANDIDATE --json`, and
#   - through `cuco evolve --mutator llm_diff` against the replay server,
#     whose first answer is the case's diff and whose second (a diff that
#     does not apply) only makes cuco send a second prompt, the one that
#     shows the case's failure;
# on a copy of workloads/cpu_demo with the limits of
# tests/data/hostile/cpu/workload.yaml (seconds, small sizes, the vouch
# required). After each run, for each case:
#   - the status is one of the case's `expect` (never ok), and the stored
#     failure says (`reason`) or does not say (`output-must-not-match`)
#     what the case's header asks;
#   - no process carrying the case's marker in its argv or environment is
#     left running;
#   - nothing was written outside the build folder (a folder the test owns
#     stays empty, the seed is unchanged, no file named after the marker in
#     the workload folder, the workspace, /tmp or $HOME);
#   - the secrets the test exports (OPENAI_API_KEY, ANTHROPIC_API_KEY, also
#     reversed) and the text of an included outside file are in neither the
#     JSON result, the database (sqlite3 .dump and the raw files) nor any
#     prompt the replay server received;
#   - nothing connected to a port the test listens on;
#   - cuco finished in bounded time and memory.
# The kill -9 of `cuco evolve` in a generation is tests/cli/test_evolve_kill.sh.
#
# Environment: CUCO_BIN, CUCO_SRC, CUCO_TEST_DATA, CUCO_TEST_TMP (set by
# ctest); HOSTILE_CASES="a b" runs only those cases, HOSTILE_ROUTES="eval"
# or "evolve" only one route, HOSTILE_KEEP=1 keeps the temporary folder.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
for tool in mpicc mpirun python3 sqlite3; do
    command -v $tool >/dev/null || { echo "skip: $tool not found"; exit 77; }
done
CASES_DIR="$CUCO_SRC/tests/hostile"
[ -f "$CUCO_SRC/workloads/cpu_demo/main.c" ] || { echo "skip: workloads/cpu_demo missing"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/hostile.XXXXXX")
T=$(cd "$T" && pwd -P)
servers=""
cleanup() {
    for p in $servers; do kill "$p" 2>/dev/null; done
    [ "${HOSTILE_KEEP:-0}" = 1 ] && { echo "kept $T"; return; }
    chmod -R u+w "$T" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
SUITE_START=$(date +%s)
fail=0
failures=()
check() { # check CASE/ROUTE WHAT CONDITION...
    local who=$1 what=$2
    shift 2
    if "$@"; then
        echo "ok   $who: $what"
    else
        echo "FAIL $who: $what"
        fail=1
        failures+=("$who: $what")
    fi
}

RAND=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
export OPENAI_API_KEY="sk-test-SECRET123${RAND}openaiXq7"
export ANTHROPIC_API_KEY="sk-ant-test-SECRET456${RAND}anthropicZk9"
rev_str() { python3 -c 'import sys; print(sys.argv[1][::-1])' "$1"; }
SECRETS=("$OPENAI_API_KEY" "$ANTHROPIC_API_KEY" "$(rev_str "$OPENAI_API_KEY")"
    "$(rev_str "$ANTHROPIC_API_KEY")")
INCLUDE_TEXT="HOSTILE_INCLUDED_TEXT_${RAND} this line is the text of a file outside the candidate"

# The workload: cpu_demo's seed with the short limits.
WL="$T/wl"
mkdir -p "$WL" "$T/outside" "$T/cand" "$T/work" "$T/tmp" "$T/res" "$T/inc"
cp "$CUCO_SRC/workloads/cpu_demo/main.c" "$WL/main.c"
cp "$WL/main.c" "$T/seed.c"
cp "$CUCO_TEST_DATA/hostile/cpu/workload.yaml" "$WL/workload.yaml"
printf '%s\n' "$INCLUDE_TEXT" >"$T/inc/hostile_outside.h"
export TMPDIR="$T/tmp"

# A port that nothing of a candidate may reach: what connects is logged.
python3 - "$T/net.port" "$T/net.log" <<'EOF' &
import os, socket, sys, threading, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % srv.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
while True:
    c, _ = srv.accept()
    c.settimeout(2)
    try:
        data = c.recv(4096)
    except OSError:
        data = b""
    with open(sys.argv[2], "ab") as log:
        log.write(b"connection: " + data + b"\n")
    c.close()
EOF
servers="$servers $!"
: >"$T/net.log"
for _ in $(seq 100); do [ -s "$T/net.port" ] && break; sleep 0.05; done
NETPORT=$(cat "$T/net.port" 2>/dev/null)
[ -n "$NETPORT" ] || { echo "FAIL: the listener did not start"; exit 1; }

# Cases: the files, or the ones named in HOSTILE_CASES.
if [ -n "${HOSTILE_CASES:-}" ]; then
    CASES=($HOSTILE_CASES)
else
    CASES=()
    for f in "$CASES_DIR"/*.diff; do CASES+=("$(basename "$f" .diff)"); done
fi
ROUTES=${HOSTILE_ROUTES:-eval evolve}

# prepare CASE: fills in the placeholders, applies the edit to the seed
# (T/cand/CASE.c), writes the LLM answer (CASE.answer) and the expectations
# (CASE.meta, shell). Fails on a case file that does not apply: a test bug.
prepare() {
    local c=$1
    python3 - "$CASES_DIR/$c.diff" "$T/seed.c" "$T/cand/$c" "cucohostile_${c}_$RAND" \
        "$T/outside" "$WL" "$T/inc/hostile_outside.h" "$NETPORT" "$T" "$RAND" <<'EOF'
import json, re, shlex, sys
path, seed_path, out, marker, outside, wldir, include, port, testdir, rand = sys.argv[1:]
text = open(path).read()
for k, v in (("@MARKER@", marker), ("@OUTSIDE@", outside), ("@WLDIR@", wldir),
             ("@INCLUDE@", include), ("@NETPORT@", port), ("@TESTDIR@", testdir),
             ("@RAND@", rand)):
    text = text.replace(k, v)
head, sep, body = text.partition("<<<<<<< SEARCH\n")
if not sep:
    sys.exit("%s: no SEARCH/REPLACE block" % path)
# The evolve route's novelty filter rejects a child whose code (comments
# stripped) is a near-duplicate of a program of the run, and a case's edit is
# small: a table of distinct numbers at the top of the first REPLACE makes
# every case's code new to it (the config sets novelty_threshold: 1.0).
pad = ("static const int cuco_case_pad[] = {%s};\n\n"
       % ", ".join(str(7919 * i % 100003) for i in range(1, 161)))
body = body.replace("=======\n", "=======\n" + pad, 1)
meta = {}
for line in head.splitlines():
    m = re.match(r"#\s*(expect|expect-evolve|ok-if-time-at-least|reason|output-must-not-match"
                 r"|eval-verify-timeout|eval-level|eval-frozen-ref|routes|max-seconds):\s*(.*)$", line)
    if m:
        meta[m.group(1)] = m.group(2).strip()
if "expect" not in meta:
    sys.exit("%s: no '# expect:' line" % path)
diff = sep + body
code = open(seed_path).read()
blocks = re.findall(r"<<<<<<< SEARCH\n(.*?)\n?=======\n(.*?)\n?>>>>>>> REPLACE", diff, re.S)
if not blocks:
    sys.exit("%s: no SEARCH/REPLACE block" % path)
for search, replace in blocks:
    n = code.count(search)
    if n != 1:
        sys.exit("%s: the SEARCH text occurs %d times in the seed" % (path, n))
    code = code.replace(search, replace)
open(out + ".c", "w").write(code)
name = path.rsplit("/", 1)[-1]
answer = "Hostile case %s.\n\n%s" % (name, diff)
open(out + ".answer", "w").write(answer)
# the replay script of the evolve route: the case, then a diff that does not
# apply (its prompt is the one that shows the case's failure)
follow = ("Another idea.\n\n<<<<<<< SEARCH\nthis line is in no program\n=======\n"
          "nor is this one\n>>>>>>> REPLACE\n")
json.dump({"anthropic": [{"text": answer, "usage": {"input": 1000, "output": 100}},
                         {"text": follow, "usage": {"input": 1000, "output": 100}}]},
          open(out + ".script.json", "w"), indent=1)
with open(out + ".meta", "w") as f:
    f.write("EXPECT=%s\n" % shlex.quote(meta["expect"]))
    f.write("EXPECT_EVOLVE=%s\n" % shlex.quote(meta.get("expect-evolve", meta["expect"])))
    f.write("OK_TIME=%s\n" % shlex.quote(meta.get("ok-if-time-at-least", "")))
    f.write("REASON=%s\n" % shlex.quote(meta.get("reason", "")))
    f.write("NOT_IN_OUTPUT=%s\n" % shlex.quote(meta.get("output-must-not-match", "")))
    f.write("EVAL_VERIFY_TIMEOUT=%s\n" % shlex.quote(meta.get("eval-verify-timeout", "")))
    f.write("MAX_SECONDS=%s\n" % shlex.quote(meta.get("max-seconds", "")))
    f.write("EVAL_LEVEL=%s\n" % shlex.quote(meta.get("eval-level", "")))
    f.write("EVAL_FROZEN_REF=%s\n" % shlex.quote(meta.get("eval-frozen-ref", "")))
    f.write("CASE_ROUTES=%s\n" % shlex.quote(meta.get("routes", "eval evolve")))
EOF
}

# measured RSS_FILE COMMAND...: runs it; its largest process's peak RSS (KiB)
# goes to RSS_FILE (/usr/bin/time's %M, or the same from Python where CI has
# no /usr/bin/time).
measured() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%M' -o "$@"
        return
    fi
    python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc if rc >= 0 else 128 - rc)' "$@"
}
now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }
secs_of() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); } # ms -> "S.s"
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}
in_list() { # in_list WORD LIST
    local w
    for w in $2; do [ "$w" = "$1" ] && return 0; done
    return 1
}
status_right() { # status_right STATUS EXPECTED TIME_MS OK_TIME
    in_list "$1" "$2" && return 0
    [ "$1" = ok ] && [ -n "$4" ] && python3 -c 'import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))' "${3:-0}" "$4" 2>/dev/null
}

# Processes whose argv or environment holds MARKER (waits up to 3 s for them
# to end).
marked_pids() {
    local pids="" try
    # the marker goes to grep in a file: in its argv grep would find itself
    printf '%s\n' "$1" >"$T/marker.txt"
    for try in $(seq 30); do
        pids=$(grep -lsaF -f "$T/marker.txt" /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null |
            cut -d/ -f3 | sort -u | tr '\n' ' ')
        [ -z "$pids" ] && break
        sleep 0.1
    done
    echo $pids
}
no_leftovers() { # no_leftovers WHO MARKER: checks, then ends what the case left
    local pids
    pids=$(marked_pids "$2")
    check "$1" "nothing left running${pids:+ (left: $(for p in $pids; do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null; echo -n "[pid $p] "; done))}" test -z "$pids"
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
}

# Nothing written outside the build folder. WS: the workspace, or "".
nothing_outside() { # nothing_outside WHO MARKER WS
    local who=$1 marker=$2 ws=$3 found
    check "$who" "nothing written in the test's outside folder" test -z "$(ls -A "$T/outside")"
    check "$who" "the seed's main.c unchanged" cmp -s "$WL/main.c" "$T/seed.c"
    cp "$T/seed.c" "$WL/main.c"
    rm -f "$T/outside"/* "$T/outside"/.[!.]* 2>/dev/null
    found=$(find "$WL" /tmp "${HOME:-/root}" ${ws:+"$ws"} -maxdepth 3 -name "*$marker*" \
        -not -path "*/cand-*" 2>/dev/null | head -5)
    check "$who" "no file named after the marker in the workload folder, workspace, /tmp, \$HOME${found:+ (found: $found)}" \
        test -z "$found"
    for f in $found; do rm -f "$f"; done
}

no_text() { # no_text FILE...: none of the secrets nor the include text in the files
    local f s
    for f in "$@"; do
        [ -f "$f" ] || continue
        for s in "${SECRETS[@]}" "HOSTILE_INCLUDED_TEXT_${RAND}"; do
            grep -aqF -- "$s" "$f" && { echo "    found '${s:0:24}...' in $f" >&2; return 1; }
        done
    done
    return 0
}
no_connection() { # no_connection WHO
    check "$1" "nothing connected to the test's port" test ! -s "$T/net.log"
    [ -s "$T/net.log" ] && { sed 's/^/    /' "$T/net.log" | head -3; : >"$T/net.log"; }
}

# The seed must pass with these limits (and with the vouch required).
"$CUCO_BIN" eval "$WL" --json --quiet --work-dir "$T/work" >"$T/res/seed.json" 2>"$T/res/seed.err"
rc=$?
if [ $rc -eq 2 ] && grep -qi "vouch\|result" "$T/res/seed.err"; then
    check seed "the manifest key result.vouch is known" false
    sed -i '/^result:/,$d' "$WL/workload.yaml"
    "$CUCO_BIN" eval "$WL" --json --quiet --work-dir "$T/work" >"$T/res/seed.json" 2>"$T/res/seed.err"
    rc=$?
fi
check seed "the seed passes (exit 0, status ok)" test "$rc:$(json_get "$T/res/seed.json" 'j["status"]')" = "0:ok"
if [ $rc -ne 0 ]; then
    cat "$T/res/seed.err" "$T/res/seed.json" | tail -20
    exit 1
fi
check seed "cpu_demo's frozen code prints a CUCO_VOUCH line" grep -q CUCO_VOUCH "$WL/main.c"

# What the case's stored failure (the excerpt, the stored error) must say
# (REASON) or must not say (NOT_IN_OUTPUT), when the case's header asks.
stored_output_checks() { # stored_output_checks WHO TEXT
    [ -n "$REASON" ] && check "$1" "the stored reason matches /$REASON/" grep -qE -- "$REASON" <<<"$2"
    [ -n "$NOT_IN_OUTPUT" ] && check "$1" "the stored output does not match /$NOT_IN_OUTPUT/" \
        bash -c '! grep -qE -- "$1" <<<"$2"' _ "$NOT_IN_OUTPUT" "$2"
    return 0
}

# ---- route 1: cuco eval ----
run_eval() { # run_eval CASE
    local c=$1 who="$1/eval" marker="cucohostile_${1}_$RAND" out="$T/res/$1.eval.json"
    local t0 rc st tm ms
    t0=$(now_ms)
    measured "$T/res/$c.eval.rss" timeout -s KILL 120 \
        "$CUCO_BIN" eval "$WL" "$T/cand/$c.c" --json --quiet --work-dir "$T/work" \
        ${EVAL_VERIFY_TIMEOUT:+--verify-timeout "$EVAL_VERIFY_TIMEOUT"} ${EVAL_LEVEL:+--level "$EVAL_LEVEL"} \
        ${EVAL_FROZEN_REF:+--frozen-ref "$T/cand/$c.c"} \
        >"$out" 2>"$T/res/$c.eval.err"
    rc=$?
    ms=$(($(now_ms) - t0))
    local rss
    rss=$(tail -1 "$T/res/$c.eval.rss" 2>/dev/null)
    # status, time and the excerpt (to a file) from one JSON read
    IFS=$'\x1f' read -r st tm < <(python3 -c 'import json, sys
try:
    j = json.load(open(sys.argv[1]))
except ValueError:
    j = {}
open(sys.argv[1] + ".excerpt", "w").write(j.get("excerpt") or "")
print("%s\x1f%s" % (j.get("status", ""), j.get("time_ms")))' "$out" 2>/dev/null)
    echo "     $who: exit $rc, status ${st:-?}, time_ms ${tm:-?}, $(secs_of $ms) s, cuco max RSS ${rss:-?} KiB"
    [ "$st" = ok ] || echo "     $who: excerpt: $(head -c 300 "$out.excerpt" | tr '\n' '|')"
    check "$who" "one JSON object on stdout" test -n "$st"
    check "$who" "status '${st:-?}' is one of: $EXPECT${OK_TIME:+ (or ok at >= $OK_TIME ms)}" \
        status_right "$st" "$EXPECT" "$tm" "$OK_TIME"
    check "$who" "bounded: done in $(secs_of $ms) s (< ${MAX_SECONDS:-60} s), cuco under 512 MiB" \
        test "$ms" -lt "$((${MAX_SECONDS:-60} * 1000))" -a "${rss:-0}" -lt 524288
    stored_output_checks "$who" "$(cat "$out.excerpt" 2>/dev/null)"
    no_leftovers "$who" "$marker"
    nothing_outside "$who" "$marker" ""
    check "$who" "no secret nor outside text in the JSON result" no_text "$out"
    no_connection "$who"
}

# ---- route 2: cuco evolve, LLM diff mutator, replay server ----
cat >"$T/evolve.yaml" <<'YAML'
islands: 1
children_per_island: 1
retime_rounds: 0
meta_interval: 0
novelty_threshold: 1.0
YAML
run_evolve() { # run_evolve CASE
    local c=$1 who="$1/evolve" marker="cucohostile_${1}_$RAND" d="$T/ev/$1"
    mkdir -p "$d"
    python3 "$CUCO_SRC/tests/replay/replay_server.py" "$T/cand/$c.script.json" "$d/port" \
        "$d/requests.jsonl" &
    local server=$!
    servers="$servers $server"
    for _ in $(seq 100); do [ -s "$d/port" ] && break; sleep 0.05; done
    local t0 rc ms
    t0=$(now_ms)
    CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$d/port")" CUCO_LLM_PRICES="replay-model=1,10" \
        CUCO_LLM_TIMEOUT_S=30 CUCO_LLM_RETRIES=0 CUCO_LLM_PARALLEL=1 CUCO_BUILD_CACHE="$T/bcache" \
        measured "$d/rss" timeout -s KILL 150 \
        "$CUCO_BIN" evolve "$WL" --mutator llm_diff --model anthropic:replay-model \
        --budget-usd 5 --max-tokens 2048 --config "$T/evolve.yaml" --generations 2 --seed 1 \
        --repeats 1 --workspace "$d/ws" --quiet >"$d/out" 2>"$d/err"
    rc=$?
    ms=$(($(now_ms) - t0))
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    local db="$d/ws/runs.db" row st err tm nreq
    # (fields split at \x1f: a tab would merge an empty time_ms into the error)
    row=$(sqlite3 -separator $'\x1f' "$db" "SELECT status, COALESCE(time_ms, ''), replace(COALESCE(error, ''), char(10), ' ')
        FROM programs WHERE mutator LIKE 'llm%' ORDER BY id LIMIT 1" 2>/dev/null)
    IFS=$'\x1f' read -r st tm err <<<"$row"
    nreq=$(wc -l <"$d/requests.jsonl" 2>/dev/null || echo 0)
    echo "     $who: exit $rc, child status ${st:-?}, time_ms ${tm:-?}, $(secs_of $ms) s, $nreq prompts${err:+, error: ${err:0:300}}"
    check "$who" "cuco evolve exited 0 or 1 (exit $rc)" in_list "$rc" "0 1"
    check "$who" "the case's child is in the database" test -n "$st"
    check "$who" "status '${st:-?}' is one of: $EXPECT_EVOLVE${OK_TIME:+ (or ok at >= $OK_TIME ms)}" \
        status_right "$st" "$EXPECT_EVOLVE" "$tm" "$OK_TIME"
    if [ "$st" = patch_failed ]; then
        check "$who" "patch_failed only for the frozen-text guard" \
            grep -qiE "frozen|guard|EVOLVE-BLOCK|not allowed|forbidden|refus" <<<"$err"
    fi
    check "$who" "the run was not won by the case (best is not its child)" \
        test "$(sqlite3 "$db" "SELECT COUNT(*) FROM programs WHERE mutator LIKE 'llm%' AND status = 'ok'
            AND time_ms < (SELECT MIN(time_ms) FROM programs WHERE mutator NOT LIKE 'llm%' AND status = 'ok') / 2" 2>/dev/null)" = 0 \
        -o -n "$OK_TIME"
    check "$who" "a second prompt was sent (it shows the case's failure)" test "$nreq" -ge 2
    stored_output_checks "$who" "$err"
    check "$who" "bounded: done in $(secs_of $ms) s (< 120 s)" test "$ms" -lt 120000
    no_leftovers "$who" "$marker"
    nothing_outside "$who" "$marker" "$d/ws"
    sqlite3 "$db" .dump >"$d/dump.sql" 2>/dev/null
    check "$who" "no secret nor outside text in the database (.dump)" no_text "$d/dump.sql"
    check "$who" "no secret nor outside text in the database files" no_text "$db" "$db-wal" "$db-journal"
    check "$who" "the database is intact" test "$(sqlite3 "$db" 'pragma integrity_check' 2>&1)" = ok
    check "$who" "nothing appended to the database files" \
        bash -c '! grep -aqF -- "$1" "$2" "$2-wal" 2>/dev/null' _ "cucoappended_$marker" "$db"
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    print(json.dumps(json.loads(l)["body"]))' "$d/requests.jsonl" >"$d/prompts.txt" 2>/dev/null
    check "$who" "no secret nor outside text in any prompt" no_text "$d/prompts.txt"
    check "$who" "no secret in the workspace's files" bash -c '
        for s in "${@:2}"; do grep -raqF -- "$s" "$1" && exit 1; done; exit 0' _ "$d/ws" "${SECRETS[@]}"
    no_connection "$who"
}

for c in "${CASES[@]}"; do
    [ -f "$CASES_DIR/$c.diff" ] || { check "$c" "case file exists" false; continue; }
    if ! prepare "$c"; then
        check "$c" "the case applies to the seed" false
        continue
    fi
    EXPECT="" EXPECT_EVOLVE="" OK_TIME="" REASON="" NOT_IN_OUTPUT="" EVAL_VERIFY_TIMEOUT="" MAX_SECONDS="" EVAL_LEVEL="" EVAL_FROZEN_REF="" CASE_ROUTES=""
    . "$T/cand/$c.meta"
    echo "---- $c (expect: $EXPECT)"
    in_list eval "$ROUTES" && in_list eval "$CASE_ROUTES" && run_eval "$c"
    in_list evolve "$ROUTES" && in_list evolve "$CASE_ROUTES" && run_evolve "$c"
done

echo "---- $(( $(date +%s) - SUITE_START )) s"
if [ $fail -ne 0 ]; then
    echo "failed checks:"
    printf '  %s\n' "${failures[@]}"
fi
exit $fail
