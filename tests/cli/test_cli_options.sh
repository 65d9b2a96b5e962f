#!/usr/bin/env bash
# test_cli_options.sh: every command parses its options from one table
# (src/cli/cli_options.c) and so behaves the same way:
#  - --opt=value means --opt value (checked through the value's own check:
#    a bad value joined with '=' is refused with the option's message);
#  - -q/--quiet and -v/--verbose are accepted by every command (--help
#    documents them);
#  - an unknown option is "cuco CMD: unknown option '--X'" and "Try 'cuco
#    CMD --help'." on stderr, exit 2, for every command; a missing value, a
#    value given to a flag and a missing operand are exit 2 too;
#  - -h anywhere before '--' prints the help on stdout, exit 0;
#  - 'cuco --help' documents the exit statuses.
# Needs no GPU and no MPI: nothing here gets as far as building.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/cli_options.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
# run_cuco ARGS...: rc in $rc, stdout in $T/out, stderr in $T/err
run_cuco() {
    timeout 60 "$CUCO_BIN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
WL="$CUCO_SRC/workloads/cpu_demo"
commands=(analyze bound transform eval evolve report serve run doctor)

# A command, an operand that lets it parse, and a valued option with a bad
# value joined by '=' whose refusal names the option.
declare -A operand=(
    [analyze]="$WL/main.c" [bound]="$WL" [transform]="$WL" [eval]="$WL" [evolve]="$WL"
    [report]="$T/none" [serve]="$T/none" [run]="$WL" [doctor]=""
)
declare -A bad_value=(
    [analyze]="" [bound]="--timeout=0" [transform]="--max-attempts=x" [eval]="--level=9"
    [evolve]="--islands=0" [report]="--run=x" [serve]="--port=99999" [run]="--confirm-rounds=x"
    [doctor]=""
)

for cmd in "${commands[@]}"; do
    op=${operand[$cmd]}
    # the help names the common options
    run_cuco "$cmd" --help
    check "$cmd --help: exit 0" [ $rc -eq 0 ]
    check "$cmd --help: on stdout" grep -q "^usage: cuco $cmd" "$T/out"
    for opt in "-q, --quiet" "-v, --verbose" "-h, --help"; do
        check "$cmd --help documents $opt" grep -qF -- "$opt" "$T/out"
    done
    # -h after other options (even bad ones) still prints the help
    run_cuco "$cmd" --no-such-option -h
    check "$cmd --no-such-option -h: help wins (exit 0)" [ $rc -eq 0 ]

    # the one unknown-option message
    run_cuco "$cmd" $op --no-such-option
    check "$cmd --no-such-option: exit 2" [ $rc -eq 2 ]
    check "$cmd --no-such-option: the message" \
        grep -qx "cuco $cmd: unknown option '--no-such-option'" "$T/err"
    check "$cmd --no-such-option: points to --help" grep -qx "Try 'cuco $cmd --help'." "$T/err"
    check "$cmd --no-such-option: nothing on stdout" [ ! -s "$T/out" ]
    run_cuco "$cmd" $op --no-such-option=3
    check "$cmd --no-such-option=3: the same message" \
        grep -qx "cuco $cmd: unknown option '--no-such-option'" "$T/err"
    run_cuco "$cmd" $op -Z
    check "$cmd -Z: exit 2, the same message" \
        bash -c "[ $rc -eq 2 ] && grep -qx \"cuco $cmd: unknown option '-Z'\" '$T/err'"

    # -q and -v are accepted: with an unknown option after them, the error
    # is about that option, not about -q or -v
    for qv in -q -v --quiet --verbose; do
        run_cuco "$cmd" $qv $op --no-such-option
        check "$cmd $qv: accepted" grep -qx "cuco $cmd: unknown option '--no-such-option'" "$T/err"
    done

    # --opt=value reaches the option's own check
    bv=${bad_value[$cmd]}
    if [ -n "$bv" ]; then
        name=${bv%%=*}
        run_cuco "$cmd" $op "$bv"
        check "$cmd $bv: exit 2" [ $rc -eq 2 ]
        check "$cmd $bv: the message names $name" grep -q -- "$name" "$T/err"
        # and the same value apart from its option
        run_cuco "$cmd" $op "$name" "${bv#*=}"
        check "$cmd $name ${bv#*=}: exit 2 as well" [ $rc -eq 2 ]
    fi
done

# a flag given a value, a valued option at the end, a missing operand
run_cuco eval "$WL" --json=yes
check "eval --json=yes: exit 2" [ $rc -eq 2 ]
check "eval --json=yes: takes no value" grep -q "option '--json' takes no value" "$T/err"
run_cuco evolve "$WL" --workspace
check "evolve --workspace (no value): exit 2" [ $rc -eq 2 ]
check "evolve --workspace (no value): says so" grep -q "option '--workspace' needs a value" "$T/err"
for cmd in analyze bound transform eval evolve run; do
    run_cuco "$cmd"
    check "$cmd without its operand: exit 2" [ $rc -eq 2 ]
    check "$cmd without its operand: says so" grep -q "^cuco $cmd: no .* given" "$T/err"
done
run_cuco eval "$WL" "$WL/main.c" extra
check "eval with a third operand: exit 2" [ $rc -eq 2 ]
check "eval with a third operand: names it" grep -q "unexpected argument 'extra'" "$T/err"

# --opt=value works where it is good: analyze -o / --output=FILE
run_cuco analyze "$WL/main.c" --output="$T/a.json"
check "analyze --output=FILE: exit 0" [ $rc -eq 0 ]
check "analyze --output=FILE: written" test -s "$T/a.json"
run_cuco analyze -q "$WL/main.c" -o "$T/b.json"
check "analyze -q -o FILE: exit 0" [ $rc -eq 0 ]
check "analyze -o FILE: the same analysis" cmp -s "$T/a.json" "$T/b.json"
run_cuco analyze -v "$WL/main.c" --json
check "analyze -v --json: exit 0" [ $rc -eq 0 ]
check "analyze -v --json: JSON on stdout" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out"

# the exit statuses, in one place
run_cuco --help
for code in "0  done" "2  bad usage" "3  built but not verified" "4  the workspace is in use"; do
    check "cuco --help documents exit '$code'" grep -q "^  $code" "$T/out"
done
run_cuco no-such-command
check "unknown command: exit 2" [ $rc -eq 2 ]

[ $fail = 0 ] || { echo "--- last stderr:"; cat "$T/err"; }
exit $fail
