# transform_build.sh: sourced by the test_transform_build_*.sh scripts
# (CUCO_SRC, CUCO_BIN, CUCO_TEST_DATA and CUCO_TEST_TMP set). Gives:
#   setup PREFIX [nvcc]              checks that environment, makes TMP (a
#                                    scratch folder removed at exit) and
#                                    fail=0; with nvcc, skips the test
#                                    (exit 77) where nvcc or mpicxx is missing
#   check DESCRIPTION CONDITION...   prints ok/FAIL, sets fail=1 on FAIL
#   gpu                              1 when this host has an NVIDIA GPU
#   transform_bg DIR                 full 'cuco transform' of DIR into
#                                    $TMP/NAME; output in $TMP/NAME.out,
#                                    exit status in $TMP/NAME.rc
#   built NAME                       after transform_bg: prints the output
#                                    and checks the outcome: with a GPU it
#                                    must build, run and verify (exit 0,
#                                    registered); without, exit 3 ("built,
#                                    not verified: no GPU"), eval level 1 in
#                                    the JSON report, nothing registered;
#                                    either way 'cuco evolve --init' takes
#                                    its gen_0 (the seed's frozen text, a
#                                    block the block guard lets in)
#   built_in_pairs DIR NAME...       transform_bg and built for each
#                                    DIR/NAME, two at a time without a GPU
#                                    (nothing runs; the builds share the
#                                    cores), one at a time with one (their
#                                    runs must not share the GPUs)
#   knob_built NAME KNOB VALUE       after built NAME: its gen_0 program with
#                                    KNOB set to VALUE compiles (cuco eval
#                                    --level 1 against the gen_0 frozen text;
#                                    a run knob's variant is gen_0's build,
#                                    from the transform's build cache)
#   symmetric NAME LINE...           rules-only transform of
#                                    $CUCO_TEST_DATA/transform/NAME: exactly
#                                    these cudaMalloc lines become symm_malloc
setup() {
    : "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
    if [ "${2:-}" = nvcc ] && { ! command -v nvcc >/dev/null || ! command -v mpicxx >/dev/null; }; then
        echo "skip: nvcc or mpicxx not found (the transformed program is CUDA C++ with MPI)"
        exit 77
    fi
    mkdir -p "$CUCO_TEST_TMP"
    TMP=$(mktemp -d "$CUCO_TEST_TMP/$1.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
    fail=0
}

check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

gpu=0
{ [ -e /dev/nvidia0 ] || command -v nvidia-smi >/dev/null; } && gpu=1

transform_bg() {
    local name
    name=$(basename "$1")
    "$CUCO_BIN" transform "$1" --workspace "$TMP/$name" --quiet >"$TMP/$name.out" 2>&1
    echo $? >"$TMP/$name.rc"
    echo "$1" >"$TMP/$name.dir"
}

built_in_pairs() {
    local dir=$1 pair name
    shift
    while [ $# -gt 0 ]; do
        pair=$1
        shift
        if [ $# -gt 0 ]; then
            pair="$pair $1"
            shift
        fi
        for name in $pair; do
            if [ $gpu = 1 ]; then transform_bg "$dir/$name"; else transform_bg "$dir/$name" & fi
        done
        wait
        for name in $pair; do built "$name"; done
    done
}

# init_taken NAME: 'cuco evolve --init' of NAME's gen_0 gets past its checks
# of the program (exit 2 and the message name a refused --init); without a
# GPU the evaluation then stops at verification, which is fine here. It
# shares the transform's build cache: gen_0 was built there already.
init_taken() {
    local name=$1 prog rc
    prog=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["program"])' \
        "$TMP/$name/gen_0/transform_report.json") || return 1
    CUCO_BUILD_CACHE="$TMP/$name/build-cache" \
        "$CUCO_BIN" evolve "$(cat "$TMP/$name.dir")" --workspace "$TMP/$name.init" --init "$prog" \
        --evaluations 1 --quiet >"$TMP/$name.init.out" 2>&1
    rc=$?
    [ "$rc" -ne 2 ] && ! grep -q -- "--init" "$TMP/$name.init.out" || {
        cat "$TMP/$name.init.out"
        return 1
    }
}

built() {
    local name=$1 ws="$TMP/$1" rc
    rc=$(cat "$TMP/$name.rc")
    cat "$TMP/$name.out"
    if [ $gpu = 1 ]; then
        check "$name: built, ran and verified on this GPU (exit 0)" test "$rc" -eq 0
        check "$name: registered" test -s "$ws/runs.db"
    else
        check "$name: built, not verified: no GPU (exit 3)" test "$rc" -eq 3
        check "$name: report says so" grep -q "verification: built, not verified: no GPU" "$ws/gen_0/transform_report.md"
        check "$name: eval level 1 in the json report" python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["eval"]["level"] == 1 and j["eval"]["status"] == "ok"))' "$ws/gen_0/transform_report.json"
        check "$name: not registered before verification" test ! -e "$ws/runs.db"
    fi
    check "$name: gen_0 taken by 'cuco evolve --init'" init_taken "$name"
}

symmetric() {
    local name=$1 ws="$TMP/$1.nv"
    shift
    "$CUCO_BIN" transform "$CUCO_TEST_DATA/transform/$name" --workspace "$ws" --no-verify --quiet \
        >"$TMP/$name.nv.out" 2>&1 || {
        cat "$TMP/$name.nv.out"
        return 1
    }
    local want got
    want=$(printf '%s\n' "$@" | sort -n | tr '\n' ' ')
    got=$(python3 -c 'import json,sys; print(" ".join(str(n["line"]) for n in sorted(json.load(open(sys.argv[1]))["notes"], key=lambda n: n["line"]) if n["kind"] == "symmetric") + " ")' "$ws/gen_0/transform_report.json")
    [ "$want" = "$got" ] || { echo "symmetric lines: want '$want' got '$got'"; return 1; }
}

knob_built() {
    local name=$1 knob=$2 value=$3 ws="$TMP/$1" prog variant
    prog="$ws/gen_0/$name.cu"
    variant="$TMP/$name.$knob-$value.cu"
    grep -q "^#define $knob [0-9]* *// cuco:knob" "$prog" || { echo "no knob $knob in $prog"; return 1; }
    sed "s|^#define $knob [0-9]* *// cuco:knob|#define $knob $value // cuco:knob|" "$prog" >"$variant"
    mkdir -p "$TMP/work"
    # the transform's build cache: a run knob's value is passed at run time,
    # so its variants are gen_0's own build; a build knob's are built anew
    CUCO_BUILD_CACHE="$ws/build-cache" "$CUCO_BIN" eval "$CUCO_TEST_DATA/transform/$name" "$variant" \
        --level 1 --json --quiet --frozen-ref "$prog" --work-dir "$TMP/work" \
        >"$TMP/$name.$knob-$value.json" 2>&1
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j["status"] != "ok")' \
        "$TMP/$name.$knob-$value.json" || { cat "$TMP/$name.$knob-$value.json"; return 1; }
}
