#!/usr/bin/env bash
# test_transform_mangled.sh: broken programs never crash cuco. Each case
# takes a program of tests/data/transform or a GPU workload, edits its
# evolve file at random but reproducibly (tests/cli/mangle_program.py: lines
# deleted, duplicated or swapped, the text cut short, a brace, quote or
# comment opener inserted, a name replaced), and runs 'cuco transform
# --no-verify' and 'cuco analyze' on it. Each must exit 0, 1 or 2 (a
# nonzero exit with a message on stderr), within 60 s, without a sanitizer
# report. MANGLED_CASES (default 32) sets how many cases; MANGLED_SEED
# (default 1) the first seed. A case that fails keeps its program in
# $CUCO_TEST_TMP/mangled-failures/. Then the same on the broken programs of
# tests/data/mangled, each of which once crashed or leaked.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
mkdir -p "$CUCO_TEST_TMP"
T=$(mktemp -d "$CUCO_TEST_TMP/mangled.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
programs=("$CUCO_TEST_DATA"/transform/*/ "$CUCO_SRC"/workloads/{flash_attn_cp,gemm_allgather,kv_transfer,moe_dispatch_combine}/)
cases=${MANGLED_CASES:-32}
seed0=${MANGLED_SEED:-1}

# runs cuco ARGS; 0 when it exited 0, or 1 or 2 with a message, in time,
# with no sanitizer report
sane() {
    timeout 60 "$CUCO_BIN" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if grep -qE "runtime error|Sanitizer|LeakSanitizer" "$T/err"; then
        echo "  sanitizer report: $(grep -m1 -E "runtime error|Sanitizer" "$T/err")"
        return 1
    fi
    case $rc in
    0) return 0 ;;
    1 | 2) [ -s "$T/err" ] || [ -s "$T/out" ] || { echo "  exit $rc without a message"; return 1; } ;;
    *) echo "  exit $rc: $(tail -3 "$T/err")"; return 1 ;;
    esac
}

for ((k = 0; k < cases; k++)); do
    seed=$((seed0 + k))
    dir=${programs[$((seed * 7919 % ${#programs[@]}))]%/}
    name=$(basename "$dir")
    file=$(sed -n 's/^evolve_file: *//p' "$dir/workload.yaml")
    rm -rf "$T/prog" "$T/ws"
    cp -r "$dir" "$T/prog"
    python3 "$CUCO_SRC/tests/cli/mangle_program.py" "$dir/$file" "$T/prog/$file" "$seed"
    ok=1
    sane transform "$T/prog" --workspace "$T/ws" --no-verify -q || ok=0
    sane analyze "$T/prog/$file" -o "$T/analysis.json" || ok=0
    if [ $ok = 1 ]; then
        echo "ok   seed $seed: $name"
    else
        echo "FAIL seed $seed: $name"
        mkdir -p "$CUCO_TEST_TMP/mangled-failures"
        cp "$T/prog/$file" "$CUCO_TEST_TMP/mangled-failures/seed$seed-$file"
        fail=1
    fi
done

# the broken programs that once crashed or leaked (tests/data/mangled)
for dir in "$CUCO_TEST_DATA"/mangled/*/; do
    dir=${dir%/}
    file=$(sed -n 's/^evolve_file: *//p' "$dir/workload.yaml")
    rm -rf "$T/ws"
    if sane transform "$dir" --workspace "$T/ws" --no-verify -q &&
        sane analyze "$dir/$file" -o "$T/analysis.json"; then
        echo "ok   tests/data/mangled/$(basename "$dir")"
    else
        echo "FAIL tests/data/mangled/$(basename "$dir")"
        fail=1
    fi
done
exit $fail
