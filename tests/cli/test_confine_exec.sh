#!/usr/bin/env bash
# test_confine_exec.sh: the hidden 'cuco confine-exec' (what the Slurm
# launcher's batch scripts run): the program's exit code and signal come
# through, only --write folders are writable, --net keeps the host's network,
# it works for a user who is not root (a user namespace), it is not listed in
# 'cuco --help', and a host that forbids namespaces gets a clear error and
# exit 127 instead of an unconfined run.
set -u
: "${CUCO_BIN:?}" "${CUCO_TEST_TMP:?}"
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/confine-exec.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
if ! "$CUCO_BIN" confine-exec -- true 2>"$TMP/probe.err"; then
    echo "skip: confinement unavailable here: $(cat "$TMP/probe.err")"
    exit 77
fi
mkdir -p "$TMP/w"

"$CUCO_BIN" confine-exec --write "$TMP/w" -- sh -c 'exit 7'
check "exit code comes through" test $? -eq 7
"$CUCO_BIN" confine-exec -- sh -c 'kill -TERM $$'
check "signal comes through (143)" test $? -eq 143
"$CUCO_BIN" confine-exec --write "$TMP/w" -- sh -c "echo in > '$TMP/w/f'; echo out > '$TMP/f' 2>/dev/null; echo \$\$" >"$TMP/pid.out"
check "PID 2 inside (init is 1)" test "$(cat "$TMP/pid.out")" = 2
check "--write folder writable" test -s "$TMP/w/f"
check "outside read-only" test ! -e "$TMP/f"
# /proc/net is the namespace's own (/sys still shows the host's)
interfaces='tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\n" " "'
"$CUCO_BIN" confine-exec -- sh -c "$interfaces" >"$TMP/net.out"
check "no network interface but lo" test "$(cat "$TMP/net.out")" = "lo "
"$CUCO_BIN" confine-exec --net -- sh -c "$interfaces" >"$TMP/net2.out"
check "--net keeps the host's interfaces" test "$(cat "$TMP/net2.out")" = "$(sh -c "$interfaces")"
"$CUCO_BIN" confine-exec --bogus -- true 2>/dev/null
check "unknown option: exit 2" test $? -eq 2
check "not listed in cuco --help" bash -c "! '$CUCO_BIN' --help | grep -q confine-exec"

# Not root: a user namespace maps the user's own uid.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 \
    --clear-groups test -x "$CUCO_BIN" 2>/dev/null; then
    setpriv --reuid=65534 --regid=65534 --clear-groups "$CUCO_BIN" confine-exec -- \
        sh -c 'id -u; echo $$; touch /var/tmp/cuco-confine-nobody 2>/dev/null || echo refused' >"$TMP/nobody.out" 2>"$TMP/nobody.err"
    check "not root: runs in a user namespace as itself" test "$(head -1 "$TMP/nobody.out")" = 65534
    check "not root: PID 2 inside" test "$(sed -n 2p "$TMP/nobody.out")" = 2
    check "not root: /var/tmp read-only" test "$(sed -n 3p "$TMP/nobody.out")" = refused
fi

# A host that forbids namespaces (unshare fails with EPERM).
if [ -x "${CUCO_TEST_HELPERS:-}/no_unshare" ]; then
    "$CUCO_TEST_HELPERS/no_unshare" "$CUCO_BIN" confine-exec -- sh -c 'echo ran' >"$TMP/nons.out" 2>"$TMP/nons.err"
    check "no namespaces: exit 127" test $? -eq 127
    check "no namespaces: the program did not run" test ! -s "$TMP/nons.out"
    check "no namespaces: the message names the step" grep -q \
        "confinement unavailable: unshare(CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET): Operation not permitted" "$TMP/nons.err"
fi
exit $fail
