#!/usr/bin/env bash
# test_ranks.sh: nothing in cuco's CPU path assumes two ranks. The cpu_demo
# workload at 4 and 8 ranks (a copy of its folder with `ranks:` changed):
# cuco eval verifies it (directly and through the local launcher, which
# oversubscribes the cores), and cuco evolve --slots auto derives its run
# slots from cores / ranks.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/ranks.XXXXXX")
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
for r in 4 8; do
    wl="$TMP/cpu_demo_$r"
    mkdir -p "$wl"
    cp "$CUCO_SRC/workloads/cpu_demo/main.c" "$wl/"
    sed "s/^ranks: .*/ranks: $r/; s/^name: .*/name: cpu_demo_$r/" \
        "$CUCO_SRC/workloads/cpu_demo/workload.yaml" >"$wl/workload.yaml"
    "$CUCO_BIN" eval "$wl" --level 2 >"$TMP/eval$r.out" 2>"$TMP/eval$r.err"
    check "$r ranks: cuco eval verifies" grep -q '^status *ok' "$TMP/eval$r.out"
    "$CUCO_BIN" eval "$wl" --level 2 --launcher local >"$TMP/evall$r.out" 2>"$TMP/evall$r.err"
    check "$r ranks: cuco eval --launcher local verifies" grep -q '^status *ok' "$TMP/evall$r.out"
    printf 'islands: 1\nchildren_per_island: 1\nretime_rounds: 0\n' >"$TMP/evolve.yaml"
    "$CUCO_BIN" evolve "$wl" --config "$TMP/evolve.yaml" --workspace "$TMP/ws$r" --slots auto \
        --generations 1 --repeats 1 >"$TMP/evolve$r.out" 2>"$TMP/evolve$r.err"
    check "$r ranks: cuco evolve exits 0" [ $? = 0 ]
    want=$(($(nproc) / r))
    [ $want -ge 1 ] || want=1
    check "$r ranks: --slots auto gives cores/ranks = $want run slot(s)" \
        grep -Eq "launcher local, $want run slots?," "$TMP/evolve$r.err"
done
[ $fail = 0 ] || tail -n 20 "$TMP"/*.err
exit $fail
