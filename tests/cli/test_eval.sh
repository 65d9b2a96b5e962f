#!/usr/bin/env bash
# test_eval.sh: 'cuco eval' on the real cpu_demo workload (needs mpicc and
# mpirun): the seed passes all three levels, and each broken program of
# tests/data/cpu_demo_broken gets its status, a useful excerpt, and leaves no
# process behind. Also bad usage and a bad manifest (exit 2).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/eval.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
WL="$CUCO_SRC/workloads/cpu_demo"
BROKEN="$CUCO_TEST_DATA/cpu_demo_broken"
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
no_leftovers() { # no process runs a binary from the work dir
    sleep 0.2
    ! pgrep -f "$TMP/work" >/dev/null
}

# --help lists every option.
"$CUCO_BIN" eval --help >"$TMP/help" 2>&1
check "--help exits 0" test $? -eq 0
for opt in --json --level --repeats --verify-timeout --work-dir --keep-build --quiet --frozen-ref; do
    check "--help mentions $opt" grep -q -- "$opt" "$TMP/help"
done

# Bad usage and a bad manifest: exit 2 with a message.
"$CUCO_BIN" eval >/dev/null 2>&1
check "no workload: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$WL" --level 7 >/dev/null 2>"$TMP/err"
check "--level 7: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$WL" --bogus >/dev/null 2>"$TMP/err"
check "unknown option: exit 2" test $? -eq 2
"$CUCO_BIN" eval "$CUCO_TEST_DATA/manifests/unknown_key.yaml" >/dev/null 2>"$TMP/err"
check "bad manifest: exit 2" test $? -eq 2
check "bad manifest: path:line in the message" grep -q "unknown_key.yaml:[0-9]*: unknown key" "$TMP/err"
"$CUCO_BIN" eval "$WL" "$TMP/does-not-exist.c" >/dev/null 2>"$TMP/err"
check "missing program file: exit 2" test $? -eq 2

# The seed passes all three levels.
"$CUCO_BIN" eval "$WL" --json --repeats 2 --quiet --work-dir "$TMP/work" >"$TMP/ok.json" 2>"$TMP/ok.err"
rc=$?
check "seed: exit 0" test $rc -eq 0
check "seed: one JSON object" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/ok.json"
check "seed: status ok" test "$(json_get "$TMP/ok.json" 'j["status"]')" = ok
check "seed: level 3" test "$(json_get "$TMP/ok.json" 'j["level"]')" = 3
check "seed: time_ms > 0" test "$(json_get "$TMP/ok.json" 'j["time_ms"] > 0')" = True
check "seed: 2 repeats" test "$(json_get "$TMP/ok.json" 'len(j["times_ms"])')" = 2
check "seed: min <= median <= max" test "$(json_get "$TMP/ok.json" 'j["time_ms_min"] <= j["time_ms"] <= j["time_ms_max"]')" = True
check "seed: metrics have compute_ms and comm_ms" \
    test "$(json_get "$TMP/ok.json" 'j["metrics"]["compute_ms"] > 0 and j["metrics"]["comm_ms"] > 0')" = True
check "seed: build folder removed" test -z "$(ls -A "$TMP/work")"
check "seed: no process left" no_leftovers

# The human summary shows the bound when compute_ms/comm_ms are there.
"$CUCO_BIN" eval "$WL" --level 2 --quiet --work-dir "$TMP/work" >"$TMP/human" 2>&1
check "level 2: exit 0" test $? -eq 0
check "level 2: summary says level 2" grep -q "^level *2" "$TMP/human"

# {mpi_compile_flags}/{mpi_link_flags} expand to several arguments: plain cc
# builds the MPI program with them.
if command -v cc >/dev/null; then
    mkdir -p "$TMP/mpiwl"
    cp "$WL/main.c" "$TMP/mpiwl/main.c"
    sed -e 's|command: \[mpicc, |command: [cc, "{mpi_compile_flags}", |' \
        -e 's|-lm\]|"{mpi_link_flags}", -lm]|' "$WL/workload.yaml" >"$TMP/mpiwl/workload.yaml"
    check "mpi flags manifest uses the placeholders" grep -q '{mpi_link_flags}' "$TMP/mpiwl/workload.yaml"
    "$CUCO_BIN" eval "$TMP/mpiwl" --level 2 --json --work-dir "$TMP/work" >"$TMP/mpi.json" 2>"$TMP/mpi.err"
    check "mpi flags: status ok at level 2" test "$(json_get "$TMP/mpi.json" 'j["status"] + str(j["level"])')" = ok2
    check "mpi flags: expanded in the compile line" grep -Eq "L1 compile: cc -I[^ ]+ .* -L[^ ]+ -lmpi" "$TMP/mpi.err"
fi

# Each broken program: status and a useful excerpt.
run_broken() { # run_broken FILE EXPECTED_STATUS EXCERPT_REGEX
    local file=$1 want=$2 pattern=$3 out="$TMP/$(basename "$1" .c).json"
    "$CUCO_BIN" eval "$WL" "$BROKEN/$file" --json --level 2 --verify-timeout 3 --quiet \
        --work-dir "$TMP/work" >"$out" 2>"$out.err"
    local rc=$?
    check "$file: exit 1" test $rc -eq 1
    check "$file: status $want" test "$(json_get "$out" 'j["status"]')" = "$want"
    check "$file: excerpt matches /$pattern/" grep -Eq -- "$pattern" <(json_get "$out" 'j["excerpt"]')
    check "$file: excerpt capped" test "$(json_get "$out" 'len(j["excerpt"]) <= 4096')" = True
    check "$file: no process left" no_leftovers
}
run_broken compile_error.c compile_error "error: .b_row. undeclared"
run_broken segfault.c run_error "Segmentation fault|SIGSEGV|signal 11"
run_broken hang.c timeout "timed out after 3"
run_broken wrong_answer.c wrong_answer "Verification: FAIL (timed step [0-9]+: )?C\[[0-9]+\]\[[0-9]+\]"
run_broken missing_result.c bad_output "no 'Verification: PASS\|FAIL' line"
run_broken frozen_edit.c frozen_violation "line [0-9]+ of the candidate differs"
check "frozen_edit: not built" test "$(json_get "$TMP/frozen_edit.json" 'j["level"] == 0 and j["compile_s"] == 0')" = True
check "compile_error: excerpt is not the whole log" \
    test "$(json_get "$TMP/compile_error.json" 'j["excerpt"].count("\n") < 45')" = True
check "failed builds are kept and named" \
    test "$(json_get "$TMP/segfault.json" 'j["build_dir"] is not None and "/work/cand-" in j["build_dir"]')" = True
check "segfault: kept build folder exists" test -d "$(json_get "$TMP/segfault.json" 'j["build_dir"]')"

# A seed that marks no EVOLVE-BLOCK (a foreign program): its transformed
# program carries markers, so it differs from the seed; --frozen-ref names
# the text to compare with instead (the transform's gen_0).
NM="$TMP/nomarks"
mkdir -p "$NM"
cp "$WL/workload.yaml" "$NM/"
grep -v 'EVOLVE-BLOCK-' "$WL/main.c" > "$NM/main.c"
"$CUCO_BIN" eval "$NM" "$WL/main.c" --json --level 1 --quiet --work-dir "$TMP/work" >"$TMP/nm1.json" 2>&1
check "seed without markers: a marked program is a frozen violation" \
    test "$(json_get "$TMP/nm1.json" 'j["status"]')" = frozen_violation
check "seed without markers: the excerpt names --frozen-ref" \
    grep -q -- "--frozen-ref" <(json_get "$TMP/nm1.json" 'j["excerpt"]')
"$CUCO_BIN" eval "$NM" "$WL/main.c" --frozen-ref "$WL/main.c" --json --level 1 --quiet \
    --work-dir "$TMP/work" >"$TMP/nm2.json" 2>&1
check "--frozen-ref: the same program against itself builds" \
    test "$(json_get "$TMP/nm2.json" 'j["status"] + str(j["level"])')" = ok1
"$CUCO_BIN" eval "$NM" "$BROKEN/frozen_edit.c" --frozen-ref "$WL/main.c" --json --level 1 --quiet \
    --work-dir "$TMP/work" >"$TMP/nm3.json" 2>&1
check "--frozen-ref: a frozen edit against it is still refused" \
    test "$(json_get "$TMP/nm3.json" 'j["status"]')" = frozen_violation
"$CUCO_BIN" eval "$NM" "$WL/main.c" --frozen-ref "$TMP/none.c" >/dev/null 2>"$TMP/nm4.err"
check "--frozen-ref of a missing file: exit 2" test $? -eq 2
check "--frozen-ref of a missing file: the path in the message" grep -q "$TMP/none.c" "$TMP/nm4.err"

# the build cache: a second evaluation of the same program reuses the binary;
# a different program is built; a failed build is not cached
BC="$TMP/bc"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" --level 2 >"$TMP/bc1.out" 2>"$TMP/bc1.err"
check "build cache: first run builds" grep -q "build cached as $BC/" "$TMP/bc1.err"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" --level 2 >"$TMP/bc2.out" 2>"$TMP/bc2.err"
check "build cache: second run reuses the binary" grep -q "L1 ok (cached build $BC/" "$TMP/bc2.err"
check "build cache: and still verifies" grep -q '^status *ok' "$TMP/bc2.out"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" "$CUCO_TEST_DATA/cpu_demo_broken/wrong_answer.c" --level 2 \
    >"$TMP/bc3.out" 2>"$TMP/bc3.err"
check "build cache: another program is built" bash -c "! grep -q 'cached build' '$TMP/bc3.err'"
check "build cache: two binaries" test "$(ls "$BC" | wc -l)" -eq 2
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$WL" "$CUCO_TEST_DATA/cpu_demo_broken/compile_error.c" --level 1 \
    >/dev/null 2>&1
check "build cache: a failed build is not cached" test "$(ls "$BC" | wc -l)" -eq 2

# a header the program includes (from an -I folder, as the workloads include
# their harness) is part of the key: changing it makes a new build
HW="$TMP/hdrwl"
mkdir -p "$HW/inc"
cp "$WL/workload.yaml" "$HW/"
sed -i "s|command: \[mpicc, |command: [mpicc, \"-I$HW/inc\", |" "$HW/workload.yaml"
{ echo '#include "extra.h"'; cat "$WL/main.c"; } > "$HW/main.c"
printf '#include "nested.h"\n' > "$HW/inc/extra.h"
printf '#define CUCO_TEST_EXTRA 1\n' > "$HW/inc/nested.h"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh1.err"
check "build cache with a header: first run builds" grep -q "build cached as $BC/" "$TMP/bh1.err"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh2.err"
check "build cache with a header: unchanged header, cached build" grep -q "L1 ok (cached build" "$TMP/bh2.err"
printf '#define CUCO_TEST_EXTRA 2\n' > "$HW/inc/nested.h"
CUCO_BUILD_CACHE="$BC" "$CUCO_BIN" eval "$HW" --level 1 >/dev/null 2>"$TMP/bh3.err"
check "build cache with a header: a changed nested header rebuilds" grep -q "build cached as $BC/" "$TMP/bh3.err"


# Confinement (docs/launch.md). The runs above were confined (the default):
# mpirun ran in a network namespace with only its loopback. A candidate that
# writes outside its build folder, reads the environment and leaves
# background children (one in a new session, one ignoring SIGTERM) still
# passes, but its writes fail, the secret is not in its environment and
# nothing it started is left; with --no-confine, the same write lands.
hostile() { # hostile OUT_FILE SHELL_COMMAND: cpu_demo whose compute runs the command once
    python3 - "$WL/main.c" "$1" "$2" <<'PY'
import sys
src, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
anchor = "    const int n = d->n, bs = CUCO_BLOCK, row_end = row0 + nrows;\n"
text = open(src).read()
assert anchor in text
esc = cmd.replace("\\", "\\\\").replace('"', '\\"')
hook = ("    static int hostile_done;\n    if (!hostile_done) {\n        hostile_done = 1;\n"
        '        int hostile_rc = system("%s");\n        (void)hostile_rc;\n    }\n' % esc)
open(out, "w").write(text.replace(anchor, anchor + hook, 1))
PY
}
MARK="9999.$$$RANDOM"
# (The children let go of the output here; ones that keep it are below.)
hostile "$TMP/hostile.c" "echo x > $TMP/outside-confined; env > env.txt; (setsid sleep $MARK </dev/null >/dev/null 2>&1 &); (sh -c \"trap '' TERM; sleep $MARK\" </dev/null >/dev/null 2>&1 &); true"
OPENAI_API_KEY=sk-cuco-confine-test "$CUCO_BIN" eval "$WL" "$TMP/hostile.c" --json --level 2 --quiet \
    --keep-build --verify-timeout 20 --work-dir "$TMP/work" >"$TMP/hostile.json" 2>"$TMP/hostile.err"
# it leaves two sleepers behind: ended, and the run fails for it
check "confined hostile candidate: status run_error" test "$(json_get "$TMP/hostile.json" 'j["status"]')" = run_error
check "confined hostile candidate: the reason says processes were left running" \
    grep -Eq "left processes running \(cuco: ended [0-9]+ processes" <(json_get "$TMP/hostile.json" 'j["excerpt"]')
check "confined hostile candidate: verify not held up by its children" \
    test "$(json_get "$TMP/hostile.json" 'j["verify_s"] < 15')" = True
check "confined hostile candidate: write outside the build folder failed" test ! -e "$TMP/outside-confined"
HB=$(json_get "$TMP/hostile.json" 'j["build_dir"]')
check "confined hostile candidate: wrote in its build folder" test -s "$HB/env.txt"
check "confined hostile candidate: no API key in its environment" bash -c "! grep -q sk-cuco-confine-test '$HB/env.txt'"
check "confined hostile candidate: no process left" bash -c "sleep 0.3; ! pgrep -f 'sleep [9]${MARK#9}' >/dev/null"
hostile "$TMP/holder.c" "(setsid sleep $MARK &); true"
"$CUCO_BIN" eval "$WL" "$TMP/holder.c" --json --level 2 --quiet --verify-timeout 20 \
    --work-dir "$TMP/work" >"$TMP/holder.json" 2>"$TMP/holder.err"
# each rank starts through cuco-vouch-exec, which ends what the rank left
# behind when it exits, so mpirun is not kept waiting on the output
check "children holding the output: status run_error" test "$(json_get "$TMP/holder.json" 'j["status"]')" = run_error
check "children holding the output: not held up to the timeout" \
    test "$(json_get "$TMP/holder.json" 'j["verify_s"] < 15')" = True
check "children holding the output: the reason says what was ended" \
    grep -q "cuco: ended [0-9]* process.* the program left running" <(json_get "$TMP/holder.json" 'j["excerpt"]')
check "children holding the output: and so does the warning" \
    grep -q "cuco: ended [0-9]* process" <(json_get "$TMP/holder.json" 'j["warning"]')
check "children holding the output: no process left" bash -c "sleep 0.3; ! pgrep -f 'sleep [9]${MARK#9}' >/dev/null"
"$CUCO_BIN" eval "$WL" --json --level 2 --quiet --no-confine --work-dir "$TMP/work" >"$TMP/nc.json" 2>"$TMP/nc.err"
check "--no-confine: seed status ok" test "$(json_get "$TMP/nc.json" 'j["status"]')" = ok
check "--no-confine: one warning line" test "$(grep -c '^warning: candidates run unconfined (--no-confine)$' "$TMP/nc.err")" -eq 1
check "--help mentions --no-confine" grep -q -- "--no-confine" "$TMP/help"
hostile "$TMP/writer.c" "echo x > $TMP/outside-unconfined"
"$CUCO_BIN" eval "$WL" "$TMP/writer.c" --json --level 2 --quiet --no-confine --work-dir "$TMP/work" \
    >"$TMP/nc2.json" 2>/dev/null
check "--no-confine: the same write lands outside" test -e "$TMP/outside-unconfined"
# A host that forbids namespaces: the evaluation fails as infra_error and
# says so; it never runs the candidate unconfined behind the user's back.
if [ -x "${CUCO_TEST_HELPERS:-}/no_unshare" ]; then
    "$CUCO_TEST_HELPERS/no_unshare" "$CUCO_BIN" eval "$WL" --json --level 2 --quiet \
        --work-dir "$TMP/work" >"$TMP/nons.json" 2>/dev/null
    check "no namespaces: status infra_error" test "$(json_get "$TMP/nons.json" 'j["status"]')" = infra_error
    check "no namespaces: the excerpt names the step and --no-confine" grep -q \
        "confinement unavailable: unshare(CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET): Operation not permitted; run with --no-confine" \
        <(json_get "$TMP/nons.json" 'j["excerpt"]')
    "$CUCO_TEST_HELPERS/no_unshare" "$CUCO_BIN" eval "$WL" --json --level 2 --quiet --no-confine \
        --work-dir "$TMP/work" >"$TMP/nons2.json" 2>/dev/null
    check "no namespaces, --no-confine: status ok" test "$(json_get "$TMP/nons2.json" 'j["status"]')" = ok
fi

# A GPU workload where no GPU is visible: built, then stopped with a plain
# reason instead of MPI's and CUDA's errors (cpu_demo marked gpu: true
# stands in; where a GPU is visible the check does not apply).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    GW="$TMP/gpuwl"
    mkdir -p "$GW"
    cp "$WL/main.c" "$GW/"
    sed 's/^gpu: false/gpu: true/' "$WL/workload.yaml" >"$GW/workload.yaml"
    "$CUCO_BIN" eval "$GW" --json --level 2 --quiet --work-dir "$TMP/work" >"$TMP/nogpu.json" 2>/dev/null
    check "no GPU: status infra_error" test "$(json_get "$TMP/nogpu.json" 'j["status"]')" = infra_error
    check "no GPU: built first" test "$(json_get "$TMP/nogpu.json" 'j["level"]')" = 1
    check "no GPU: the excerpt says so" grep -q "no GPU visible here" <(json_get "$TMP/nogpu.json" 'j["excerpt"]')
fi

exit $fail
