#!/usr/bin/env bash
# test_bad_usage.sh: bad usage exits 2 with a message, before any work:
#  - an unknown option or a bad value of every command (an unknown mutator
#    and a price that does not parse included, which used to fail later with
#    exit 1, and cuco run passing evolve's 2 on), given apart or joined with
#    '=', and one message for an unknown option in every command (the rest
#    of the option table's behaviour: test_cli_options.sh);
#  - a manifest with an unknown ('{nope}') or unclosed ('{out') placeholder
#    is "workload.yaml:LINE: ..." with exit 2 in eval, evolve and run, and
#    nothing is built;
#  - cuco serve answers any bytes in the path and the query (not UTF-8, NUL,
#    control bytes) with a 4xx and a JSON body.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/bad_usage.XXXXXX")
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
usage2() { # usage2 ARGS...: cuco ARGS exits 2 with a message on stderr
    timeout 60 "$CUCO_BIN" "$@" >/dev/null 2>"$T/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ -s "$T/err" ]; then
        echo "ok   exit 2: cuco $*"
    else
        echo "FAIL exit $rc (want 2): cuco $* ($(head -c 200 "$T/err"))"
        fail=1
    fi
}

WL="$CUCO_SRC/workloads/cpu_demo"
WS="$T/ws"
usage2 bogus
usage2 evolve "$WL" --workspace "$WS" --mutator bogus
usage2 evolve "$WL" --workspace "$WS" --price junk
usage2 evolve "$WL" --workspace "$WS" --price "m=nan,1"
usage2 evolve "$WL" --workspace "$WS" --slots 0
usage2 evolve "$WL" --workspace "$WS" --bogus
usage2 evolve "$WL" --workspace "$WS" --launcher bogus
usage2 eval "$WL" --level 9
usage2 eval "$WL" --bogus
usage2 run "$WL" --workspace "$WS" --mutator bogus
usage2 run "$WL" --ranks x
usage2 run "$WL" --bogus
usage2 transform "$WL" --price junk
usage2 transform "$WL" --route bogus
usage2 bound "$WL" --part bogus
usage2 report --run x "$WS"
usage2 serve --host bogus "$WS"
usage2 serve --port 99999 "$WS"
usage2 serve --bogus
usage2 analyze --bogus
usage2 doctor --bogus
# the same values joined with '=', and the hidden confine-exec
usage2 eval "$WL" --level=9
usage2 evolve "$WL" --workspace="$WS" --slots=0
usage2 run "$WL" --ranks=x
usage2 report --run=0 "$WS"
usage2 confine-exec --bogus -- true
usage2 confine-exec --net
# one message for an unknown option, whatever the command
for cmd in analyze bound transform eval evolve report serve run doctor confine-exec; do
    timeout 60 "$CUCO_BIN" $cmd --bogus >/dev/null 2>"$T/err"
    check "cuco $cmd --bogus: the one message" grep -qx "cuco $cmd: unknown option '--bogus'" "$T/err"
done
check "no run was started by the bad usages" [ ! -e "$WS/runs.db" ]

# manifests with bad placeholders: file:line, exit 2, nothing built
bad_manifest() { # bad_manifest NAME ARG WANT
    local dir="$T/$1"
    mkdir -p "$dir"
    cp "$WL/main.c" "$dir/main.c"
    cat >"$dir/workload.yaml" <<YAML
name: $1
ranks: 2
gpu: false
sources: [main.c]
evolve_file: main.c
build:
  command: [mpicc, -O2, -std=c11,
    -o, "$2", "{evolve_file}", -lm]
  output: cpu_demo
run:
  launcher: mpirun
YAML
    for cmd in eval evolve run; do
        local ws=(--workspace "$T/ws_$1")
        [ $cmd = eval ] && ws=(--work-dir "$T/ws_$1")
        timeout 60 "$CUCO_BIN" $cmd "$dir" "${ws[@]}" >/dev/null 2>"$T/err"
        local rc=$?
        check "$1: cuco $cmd exits 2" [ $rc -eq 2 ]
        check "$1: cuco $cmd names workload.yaml:8 and $3" grep -q "workload.yaml:8: .*$3" "$T/err"
    done
    check "$1: nothing named '$2' was built" [ -z "$(find "$T" -name "$2" 2>/dev/null)" ]
}
bad_manifest unknown_placeholder "{nope}" "unknown placeholder '{nope}'"
bad_manifest unclosed_placeholder "{out" "unclosed placeholder '{out'"

# the web UI: any bytes get a 4xx with JSON
if command -v curl >/dev/null && command -v python3 >/dev/null; then
    mkdir -p "$T/web"
    python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("create table t(x)")' \
        "$T/web/runs.db"
    "$CUCO_BIN" serve "$T/web" --port 0 >"$T/serve.out" 2>"$T/serve.err" &
    server=$!
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$T/serve.out")
        [ -n "$port" ] && break
        sleep 0.1
    done
    check "cuco serve started" [ -n "$port" ]
    for path in "/api/%ff%fe" "/api/programs?run=%ff" "/api/programs?%c3%28=1" \
        "/api/programs?run=1%00x" "/%ed%a0%80" "/api/runs?x=%01%7f" \
        "/api/$(printf '\xff\xfe')?run=$(printf '\xc3')"; do
        code=$(curl -s --path-as-is -o "$T/body" -w '%{http_code}' "http://127.0.0.1:$port$path")
        check "GET $(printf '%q' "$path") -> 4xx ($code)" [ "${code:0:1}" = 4 ]
        check "GET $(printf '%q' "$path") -> JSON" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body"
    done
    kill $server 2>/dev/null
    wait $server 2>/dev/null
    server=
else
    echo "skip the web checks: curl or python3 not found"
fi
exit $fail
