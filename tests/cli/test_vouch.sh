#!/usr/bin/env bash
# test_vouch.sh: the frozen code vouches for each run (issue #23), checked
# through 'cuco eval --json' on a copy of cpu_demo with small sizes and
# result.vouch on (needs mpicc and mpirun). Each candidate edits only the
# EVOLVE-BLOCK and gets a non-ok status with its reason:
#   early exit with faked Verification/CUCO_RESULT lines   -> bad_output (no CUCO_VOUCH)
#   the same with a CUCO_VOUCH line, its nonce looked for in every readable
#   /proc/PID/environ (none found: cuco-vouch-exec hands it to rank 0 from
#   a file, so mpirun's environment never holds it)        -> bad_output
#   #define fabs(x) 0.0 (blinds the frozen check)         -> frozen_violation
#   #define MPI_Wtime to a fake clock                      -> frozen_violation
#   a second CUCO_RESULT line from an atexit handler       -> bad_output (not the one)
#   exit status 3 from an atexit handler, after the vouch  -> bad_output
# A program that does not vouch, with vouch on, is bad_output; with vouch off
# it is ok with the "unvouched" warning. The unmodified seed is ok, with no
# warning. 'cuco evolve --init' refuses a program whose frozen verifier was
# changed or whose block redefines a frozen name (exit 2, before any run).
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_DATA:?}" "${CUCO_TEST_TMP:?}"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: mpicc/mpirun not found (cpu_demo needs an MPI C toolchain)"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/vouch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SEED="$CUCO_SRC/workloads/cpu_demo/main.c"
fail=0
check() { # check DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() { # json_get FILE EXPR (python3 expression over the object j)
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# make_workload DIR VOUCH [MAIN]: a cpu_demo copy with small sizes.
make_workload() {
    mkdir -p "$1"
    cp "${3:-$SEED}" "$1/main.c"
    cat >"$1/workload.yaml" <<EOF
name: vouch_cpu
ranks: 2
gpu: false
sources: [main.c]
evolve_file: main.c
build:
  command: [mpicc, -O2, -std=c11, -o, "{out}", "{evolve_file}", -lm]
  output: cpu_demo
  timeout_s: 60
run:
  launcher: mpirun
verify:
  args: [--n, "64", --iters, "2", --warmup, "1"]
  timeout_s: 30
bench:
  args: [--n, "64", --iters, "2", --warmup, "1"]
  timeout_s: 30
  repeats: 1
result:
  vouch: $2
EOF
}

# candidate NAME PYTHON: writes $TMP/NAME.c, the seed edited by a python
# expression over its text s (it must change something).
candidate() {
    python3 - "$SEED" "$TMP/$1.c" "$2" <<'EOF'
import sys
s = open(sys.argv[1]).read()
t = eval(sys.argv[3])
assert t != s, "the edit changed nothing"
open(sys.argv[2], "w").write(t)
EOF
}

BLOCK_START='// EVOLVE-BLOCK-START\n'
STEP='static void cuco_step(demo *d)\n{\n'

candidate early_exit "s.replace('$STEP', '''$STEP    if (d->rank == 0) {
        printf(\"Verification: PASS\\\\n\");
        printf(\"CUCO_RESULT {\\\\\"time_ms\\\\\":0.001,\\\\\"iters\\\\\":2}\\\\n\");
        fflush(stdout);
    }
    MPI_Finalize();
    exit(0);
''')"
candidate define_fabs "s.replace('$BLOCK_START', '$BLOCK_START#define fabs(x) 0.0\n')"
candidate define_wtime "s.replace('$BLOCK_START', '''$BLOCK_START
static double cuco_fake_clock(void)
{
    static double t;
    return t += 1e-9;
}
#define MPI_Wtime cuco_fake_clock
''')"
candidate atexit_result "s.replace('$STEP', '''static void cuco_late_result(void)
{
    printf(\"CUCO_RESULT {\\\\\"time_ms\\\\\":0.001,\\\\\"iters\\\\\":2}\\\\n\");
}

$STEP    static int registered;
    if (!registered++)
        atexit(cuco_late_result);
''')"
candidate atexit_status "s.replace('$STEP', '''static void cuco_late_exit(void)
{
    fflush(stdout);
    _Exit(3);
}

$STEP    static int registered; /* rank 0 only: it exits after its vouch */
    if (!registered++ && d->rank == 0)
        atexit(cuco_late_exit);
''')"

# The same early exit with a forged CUCO_VOUCH line: the nonce is looked for
# in every readable /proc/PID/environ (its own, mpirun's and its daemons',
# cuco's); the variable's name is put together at run time.
cat >"$TMP/forged_step.c" <<'C'
static char cuco_found[64] = "none";

static void cuco_look(const char *path)
{
    static char env[1 << 16];
    char key[16];
    snprintf(key, sizeof key, "%s%s", "CUCO_", "NONCE=");
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t len = fread(env, 1, sizeof env - 1, f), klen = strlen(key);
    fclose(f);
    env[len] = 0;
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (!strncmp(env + i, key, klen) && env[i + klen])
            snprintf(cuco_found, sizeof cuco_found, "%s", env + i + klen);
}

static void cuco_step(demo *d)
{
    if (d->rank == 0) {
        char path[64];
        cuco_look("/proc/self/environ");
        for (int pid = 1; pid < 200000 && !strcmp(cuco_found, "none"); pid++) {
            snprintf(path, sizeof path, "/proc/%d/environ", pid);
            cuco_look(path);
        }
        const char *json = "{\"time_ms\":0.001,\"iters\":2}";
        unsigned long long h = 0xcbf29ce484222325ull;
        for (const char *p = json; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
        printf("forged: %s\n", cuco_found);
        printf("Verification: PASS\nCUCO_RESULT %s\n", json);
        printf("CUCO_VOUCH %s %016llx PASS\n", cuco_found, h);
        fflush(stdout);
    }
    MPI_Finalize();
    exit(0);
C
candidate forged_vouch "s.replace('$STEP', open('$TMP/forged_step.c').read() + '\n', 1)"

WL="$TMP/wl"
make_workload "$WL" true
# eval_case NAME PROGRAM STATUS EXCERPT: cuco eval --json gives STATUS (exit
# 0 for ok, 1 otherwise) and an excerpt that contains EXCERPT.
eval_case() {
    local name=$1 program=$2 status=$3 excerpt=$4
    "$CUCO_BIN" eval "$WL" "$program" --json --quiet --work-dir "$TMP/work" \
        >"$TMP/$name.json" 2>"$TMP/$name.err"
    local rc=$? want=1
    [ "$status" = ok ] && want=0
    check "$name: exit $want" test $rc -eq $want
    check "$name: status $status" test "$(json_get "$TMP/$name.json" 'j["status"]')" = "$status"
    check "$name: excerpt says '$excerpt'" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if sys.argv[2] in (j["excerpt"] or "") else 1)' "$TMP/$name.json" "$excerpt"
}

eval_case seed "$SEED" ok ""
check "seed: no unvouched warning" test "$(json_get "$TMP/seed.json" 'j["warning"]')" = None
check "seed: benchmarked" test "$(json_get "$TMP/seed.json" 'j["level"]')" = 3
eval_case early_exit "$TMP/early_exit.c" bad_output \
    "the frozen code did not vouch for this run: no CUCO_VOUCH line"
eval_case forged_vouch "$TMP/forged_vouch.c" bad_output "no CUCO_VOUCH line"
check "forged_vouch: found no nonce" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if "forged: none" in (j["excerpt"] or "") else 1)' "$TMP/forged_vouch.json"
eval_case define_fabs "$TMP/define_fabs.c" frozen_violation "#define fabs"
eval_case define_wtime "$TMP/define_wtime.c" frozen_violation "#define MPI_Wtime"
eval_case atexit_result "$TMP/atexit_result.c" bad_output \
    "the result line was not the one the frozen code printed"
eval_case atexit_status "$TMP/atexit_status.c" bad_output "exited with status 3 after vouching"

# A program without the vouch: bad_output when the manifest asks for it, ok
# with a warning when it does not.
python3 - "$SEED" "$TMP/novouch.c" <<'EOF'
import re, sys
s = open(sys.argv[1]).read()
t = re.sub(r'\n    if \(d\.rank == 0 && nonce_len\) \{\n.*?printf\("CUCO_VOUCH.*?\n    \}\n',
           '\n', s, flags=re.S)
assert t != s and "CUCO_VOUCH %s" not in t
open(sys.argv[2], "w").write(t)
EOF
make_workload "$TMP/wl_novouch" true "$TMP/novouch.c"
WL="$TMP/wl_novouch"
eval_case novouch_required "$WL/main.c" bad_output "no CUCO_VOUCH line"
make_workload "$TMP/wl_off" false "$TMP/novouch.c"
WL="$TMP/wl_off"
eval_case novouch_off "$WL/main.c" ok ""
check "vouch off: the unvouched warning" \
    test "$(json_get "$TMP/novouch_off.json" '"unvouched" in (j["warning"] or "")')" = True

# cuco evolve --init is held to the seed's frozen text and the block guard.
WL="$TMP/wl"
for init in "$CUCO_TEST_DATA/cpu_demo_broken/frozen_edit.c" "$TMP/define_fabs.c"; do
    name=$(basename "$init" .c)
    "$CUCO_BIN" evolve "$WL" --init "$init" --workspace "$TMP/ws_$name" --generations 1 \
        --evaluations 2 --quiet >"$TMP/init_$name.out" 2>"$TMP/init_$name.err"
    check "evolve --init $name: exit 2" test $? -eq 2
    check "evolve --init $name: says why" \
        grep -q -e "edit outside the EVOLVE-BLOCKs" -e "#define fabs" "$TMP/init_$name.err"
    check "evolve --init $name: nothing evaluated" test ! -e "$TMP/ws_$name/runs.db"
done

exit $fail
