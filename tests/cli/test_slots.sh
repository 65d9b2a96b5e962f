#!/usr/bin/env bash
# test_slots.sh: cuco evolve with local slots on the CPU demo: --slots 2 and
# --slots auto (cores / ranks) announce the launcher and its slots and finish
# with every candidate ok; --shared-bench alone uses the launcher too; an
# unknown --launcher is refused (exit 2); cuco eval --launcher local gives the
# same status as without a launcher.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/slots.XXXXXX")
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
# re-timing (tested in test_evolve) would add serial runs to the throughput
cat >"$TMP/evolve.yaml" <<'EOF'
islands: 1
children_per_island: 2
retime_rounds: 0
EOF
WL="$CUCO_SRC/workloads/cpu_demo"

"$CUCO_BIN" evolve "$WL" --config "$TMP/evolve.yaml" --workspace "$TMP/ws2" --slots 2 \
    --generations 1 --repeats 1 --json >"$TMP/s2.out" 2>"$TMP/s2.err"
check "--slots 2: exit 0" [ $? = 0 ]
check "--slots 2: two run slots announced" grep -q 'launcher local, 2 run slots' "$TMP/s2.err"
check "--slots 2: the run finished" grep -q '"event":"done"' "$TMP/s2.out"
check "--slots 2: no candidate failed" bash -c "! grep -q '\"failed\":[1-9]' '$TMP/s2.out'"

cores=$(nproc)
want=$((cores / 2))
[ $want -ge 1 ] || want=1
"$CUCO_BIN" evolve "$WL" --config "$TMP/evolve.yaml" --workspace "$TMP/wsa" --slots auto \
    --generations 1 --repeats 1 --json >"$TMP/sa.out" 2>"$TMP/sa.err"
check "--slots auto: exit 0" [ $? = 0 ]
check "--slots auto: cores/ranks = $want slot(s)" grep -Eq "launcher local, $want run slots?," \
    "$TMP/sa.err"

# --shared-bench (or --gpus) alone also puts the runs through the launcher
"$CUCO_BIN" evolve "$WL" --config "$TMP/evolve.yaml" --workspace "$TMP/wsb" --shared-bench \
    --evaluations 1 --repeats 1 --json >"$TMP/sb.out" 2>"$TMP/sb.err"
check "--shared-bench alone: exit 0" [ $? = 0 ]
check "--shared-bench alone: the local launcher is used" grep -Eq "launcher local, $want run slots?," \
    "$TMP/sb.err"

# 'slots: 2' in the config file goes through the launcher like --slots 2
printf 'islands: 1\nchildren_per_island: 2\nslots: 2\nretime_rounds: 0\n' >"$TMP/evolve-slots.yaml"
"$CUCO_BIN" evolve "$WL" --config "$TMP/evolve-slots.yaml" --workspace "$TMP/wsc" \
    --generations 1 --repeats 1 >"$TMP/sc.out" 2>"$TMP/sc.err"
check "config slots: 2: exit 0" [ $? = 0 ]
check "config slots: 2: two run slots announced" grep -q 'launcher local, 2 run slots' "$TMP/sc.err"

"$CUCO_BIN" evolve "$WL" --workspace "$TMP/wsx" --launcher pbs --generations 1 \
    >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "--launcher pbs: refused" [ $rc != 0 ]
check "--launcher pbs: message names it" grep -q "unknown launcher 'pbs'" "$TMP/bad.err"

"$CUCO_BIN" eval "$WL" --launcher local --level 2 >"$TMP/eval.out" 2>"$TMP/eval.err"
check "cuco eval --launcher local: status ok" grep -q '^status *ok' "$TMP/eval.out"
check "cuco eval --launcher local: run through the launcher" grep -q 'L2 verify \[local, mpirun\]' \
    "$TMP/eval.err"
[ $fail = 0 ] || tail -20 "$TMP"/*.err
exit $fail
