#!/usr/bin/env bash
# test_eval_direct.sh: the cascade without MPI, on a workload made here with
# launcher 'direct' and a C compiler: placeholder expansion in build.command,
# args and run.env; --level; --keep-build; the median/min/max of bench repeats
# (the program reports a different time on each run); a missing compiler
# (infra_error) and a compile timeout.
set -u
: "${CUCO_BIN:?}" "${CUCO_SRC:?}" "${CUCO_TEST_TMP:?}"
CC=$(command -v cc || command -v gcc || true)
if [ -z "$CC" ]; then
    echo "skip: no C compiler (cc) found"
    exit 77
fi
mkdir -p "$CUCO_TEST_TMP"
TMP=$(mktemp -d "$CUCO_TEST_TMP/eval-direct.XXXXXX")
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
json_get() {
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

WL="$TMP/wl"
mkdir -p "$WL/inc"
cat >"$WL/inc/times.h" <<'H'
/* times.h: the times the program reports, one per run. */
static const double run_times[] = {30.0, 50.0, 10.0, 20.0};
H
cat >"$WL/prog.c" <<'C'
/* prog.c: checks the environment cuco passes (--wd DIR must equal $DEMO_DIR,
 * NVLS off, MPI allowed as root) and prints a different time_ms on each run
 * (a counter file in the current folder). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "times.h"
// EVOLVE-BLOCK-START
#define SCALE 1 // cuco:knob 1 2
// EVOLVE-BLOCK-END
int main(int argc, char **argv)
{
    int run = 0;
    FILE *f = fopen("counter", "r");
    if (f) { if (fscanf(f, "%d", &run) != 1) run = 0; fclose(f); }
    f = fopen("counter", "w");
    fprintf(f, "%d\n", run + 1);
    fclose(f);
    const char *dir = getenv("DEMO_DIR"), *nvls = getenv("NCCL_NVLS_ENABLE"),
               *root = getenv("OMPI_ALLOW_RUN_AS_ROOT");
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--wd") && (!dir || strcmp(dir, argv[i + 1]))) {
            printf("Verification: FAIL DEMO_DIR=%s, --wd %s\n", dir ? dir : "(unset)", argv[i + 1]);
            return 0;
        }
    if (!nvls || strcmp(nvls, "0") || !root || strcmp(root, "1")) {
        printf("Verification: FAIL NCCL_NVLS_ENABLE=%s OMPI_ALLOW_RUN_AS_ROOT=%s\n",
               nvls ? nvls : "(unset)", root ? root : "(unset)");
        return 0;
    }
    printf("Verification: PASS\n");
    printf("CUCO_RESULT {\"time_ms\": %g, \"iters\": 1, \"run\": %d}\n", SCALE * run_times[run % 4], run);
    return 0;
}
C
cat >"$WL/workload.yaml" <<Y
name: direct_demo
ranks: 3
gpu: false
sources: [prog.c, inc/times.h]
evolve_file: prog.c
build:
  command: ["$CC", -O0, "-I{src_dir}/inc", -o, "{out}", "{evolve_file}"]
  output: prog
  timeout_s: 60
run:
  launcher: direct
  env: {DEMO_DIR: "{workload_dir}"}
verify:
  args: [--ranks, "{ranks}", "--repo={repo}", --wd, "{workload_dir}"]
  timeout_s: 20
bench:
  args: []
  timeout_s: 20
  repeats: 3
Y

# The verify run reports 30; the 3 bench runs 50, 10, 20 -> median 20.
"$CUCO_BIN" eval "$WL" --json --keep-build --work-dir "$TMP/work" >"$TMP/r.json" 2>"$TMP/r.err"
check "direct: exit 0" test $? -eq 0
check "direct: status ok, level 3" test "$(json_get "$TMP/r.json" 'j["status"] + str(j["level"])')" = ok3
check "direct: times in run order" test "$(json_get "$TMP/r.json" 'j["times_ms"]')" = "[50.0, 10.0, 20.0]"
check "direct: median 20" test "$(json_get "$TMP/r.json" 'j["time_ms"]')" = 20.0
check "direct: min 10 max 50" test "$(json_get "$TMP/r.json" '(j["time_ms_min"], j["time_ms_max"])')" = "(10.0, 50.0)"
check "direct: spread (50-10)/20" test "$(json_get "$TMP/r.json" 'abs(j["spread"] - 2.0) < 1e-9')" = True
check "direct: metrics from the median run" test "$(json_get "$TMP/r.json" 'j["metrics"]["run"]')" = 3
BUILD=$(json_get "$TMP/r.json" 'j["build_dir"]')
check "direct: --keep-build keeps the folder" test -x "$BUILD/prog" -a -f "$BUILD/inc/times.h"
check "direct: progress shows {ranks} and {repo} expanded" \
    grep -q -- "--ranks 3 --repo=$CUCO_SRC" "$TMP/r.err"
# Run the kept binary's output through a verify-only eval to see args and env.
"$CUCO_BIN" eval "$WL" --level 2 --keep-build --work-dir "$TMP/work2" --quiet >"$TMP/l2.txt" 2>&1
check "direct: --level 2 exits 0" test $? -eq 0
check "direct: --level 2 reports level 2" grep -q "^level *2" "$TMP/l2.txt"
check "direct: --level 2 ran no bench" test "$(cat "$TMP"/work2/cand-*/counter)" = 1

# run.env placeholders and the fixed variables reach the program.
cp "$WL/prog.c" "$TMP/cand.c"
"$CUCO_BIN" eval "$WL" "$TMP/cand.c" --level 1 --json --quiet --work-dir "$TMP/work3" >"$TMP/l1.json"
check "direct: --level 1 exits 0 at level 1" test "$(json_get "$TMP/l1.json" 'j["level"]')" = 1
check "direct: --level 1 removes the build folder" test -z "$(ls -A "$TMP/work3")"

# A program whose frozen text differs is not built.
sed 's/int run = 0;/int run = 1;/' "$WL/prog.c" >"$TMP/frozen.c"
frozen_line=$(grep -n "int run = 0;" "$WL/prog.c" | cut -d: -f1)
"$CUCO_BIN" eval "$WL" "$TMP/frozen.c" --json --quiet --work-dir "$TMP/work4" >"$TMP/f.json"
check "direct: frozen edit -> exit 1" test $? -eq 1
check "direct: frozen_violation names the line" \
    test "$(json_get "$TMP/f.json" 'j["status"] == "frozen_violation" and "line '"$frozen_line"' " in j["excerpt"]')" = True
check "direct: frozen edit made no build folder" test ! -e "$TMP/work4" -o -z "$(ls -A "$TMP/work4" 2>/dev/null)"

# The environment reaches the run: the program fails verification otherwise;
# and it does fail when the variable is wrong (so the check can fail).
"$CUCO_BIN" eval "$WL" --level 2 --json --quiet --work-dir "$TMP/work5" >"$TMP/env.json"
check "direct: run.env expanded and fixed variables set" test "$(json_get "$TMP/env.json" 'j["status"]')" = ok
sed 's|DEMO_DIR: "{workload_dir}"|DEMO_DIR: "{src_dir}"|' "$WL/workload.yaml" >"$WL/badenv.yaml"
"$CUCO_BIN" eval "$WL/badenv.yaml" --level 2 --json --quiet --work-dir "$TMP/work5" >"$TMP/badenv.json"
check "direct: wrong env -> wrong_answer naming it" \
    test "$(json_get "$TMP/badenv.json" 'j["status"] == "wrong_answer" and "DEMO_DIR=" in j["excerpt"]')" = True

# Missing compiler: infra_error, not a candidate failure.
sed "s|\"$CC\"|/nonexistent/cc|" "$WL/workload.yaml" >"$WL/nocc.yaml"
"$CUCO_BIN" eval "$WL/nocc.yaml" --json --quiet --work-dir "$TMP/work6" >"$TMP/nocc.json"
check "direct: missing compiler -> exit 1" test $? -eq 1
check "direct: missing compiler -> infra_error" test "$(json_get "$TMP/nocc.json" 'j["status"]')" = infra_error
check "direct: missing compiler is named" grep -q "nonexistent/cc" "$TMP/nocc.json"

# A build that outlives build.timeout_s: timeout.
cat >"$WL/slow.yaml" <<Y
name: direct_slow
ranks: 1
sources: [prog.c, inc/times.h]
evolve_file: prog.c
build:
  command: [sleep, "30"]
  output: prog
  timeout_s: 1
run:
  launcher: direct
Y
start=$(date +%s)
"$CUCO_BIN" eval "$WL/slow.yaml" --json --quiet --work-dir "$TMP/work7" >"$TMP/slow.json"
took=$(( $(date +%s) - start ))
check "direct: slow build -> timeout" test "$(json_get "$TMP/slow.json" 'j["status"]')" = timeout
check "direct: slow build killed in time ($took s)" test "$took" -lt 10
check "direct: no sleep left" bash -c '! pgrep -f "^sleep 30$" >/dev/null'

exit $fail
