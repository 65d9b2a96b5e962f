#!/usr/bin/env bash
# test_device_eval.sh: eval_named (scripts/device-eval.sh), the evaluation
# helper of the GPU step scripts, against a stub cuco: the arguments it
# passes, the JSON line it appends with name and ranks, nothing logged below
# level 3, and a missing JSON recorded as such with status=1; step_start's
# temporary folder, log and rank count; variants_build's knob variants and
# level-1 builds, variants_time's level-3 runs in order.
set -u
SRC=${CUCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/deveval.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
cat > "$T/cuco" <<'STUB'
#!/usr/bin/env bash
echo "$*" >> "$STUB_ARGS"
case " $* " in *" bad "*) exit 1 ;; esac
echo '{"status": "ok", "time_ms": 1.25}'
STUB
chmod +x "$T/cuco"
export STUB_ARGS=$T/args
CUCO=$T/cuco OUT=$T LOG=$T/log.jsonl status=0
: > "$LOG"
source "$SRC/scripts/device-eval.sh"
printed=$(eval_named wl gen0 3 2 30 pre prog.cu frozen.cu)
check "the arguments: program, frozen reference, ranks, level, repeats, JSON" \
  '[ "$(tail -1 "$STUB_ARGS")" = "eval wl prog.cu --frozen-ref frozen.cu --ranks 2 --level 3 --repeats 3 --json" ]'
check "one JSON line with name and ranks" \
  'python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert d[\"name\"]==\"gen0\" and d[\"ranks\"]==2 and d[\"time_ms\"]==1.25" "$LOG"'
check "prints name, status and time" '[ "$printed" = "gen0 ok 1.25" ]'
eval_named wl built 1 2 30 pre
check "below level 3 nothing is logged" '[ "$(wc -l < "$LOG")" = 1 ] && [ -s "$T/built.l1.json" ]'
eval_named bad seed 3 1 30 pre > /dev/null
check "no JSON: recorded, status 1" \
  '[ "$status" = 1 ] && tail -1 "$LOG" | grep -q "\"name\":\"seed\",\"status\":\"no JSON\""'
source "$SRC/scripts/knob-variant.sh"
printf '#define CUCO_A 1 // cuco:knob run 0 1\n#define CUCO_B 4\nint main() {}\n' > "$T/gen0.cu"
: > "$STUB_ARGS"
: > "$LOG"
status=0 RANKS=2
variants_build wl pre "$T/gen0.cu" "off:CUCO_A=0" "b2:CUCO_A=0,CUCO_B=2"
check "variants_build: each variant written with its knobs" \
  'grep -q "^#define CUCO_A 0 //" "$T/off.cu" && grep -q "^#define CUCO_B 4" "$T/off.cu" &&
   grep -q "^#define CUCO_B 2" "$T/b2.cu" && [ "$status" = 0 ]'
check "variants_build: seed, gen0 and each variant built at level 1, nothing logged" \
  '[ "$(grep -c -- "--level 1 " "$STUB_ARGS")" = 4 ] && grep -q "^eval wl --ranks 2 --level 1" "$STUB_ARGS" &&
   grep -q "^eval wl $T/b2.cu --frozen-ref $T/gen0.cu --ranks 2 --level 1" "$STUB_ARGS" && [ ! -s "$LOG" ]'
variants_time wl pre "$T/gen0.cu" "off:CUCO_A=0" "b2:CUCO_A=0,CUCO_B=2" > /dev/null
check "variants_time: seed, gen0, then the variants, timed and logged in that order" \
  '[ "$(python3 -c "import json,sys; print(\" \".join(json.loads(l)[\"name\"] for l in open(sys.argv[1])))" "$LOG")" = "seed gen0 off b2" ]'
variants_build wl pre "$T/gen0.cu" "bad:CUCO_C=1"
check "variants_build: a knob the program lacks sets status 1" '[ "$status" = 1 ]'
printf '#!/bin/sh\necho "GPU 0"\necho "GPU 1"\n' > "$T/nvidia-smi"
chmod +x "$T/nvidia-smi"
(
  PATH=$T:/usr/bin:/bin OUT=$T
  echo 'stale' > "$T/step.jsonl"
  step_start cuco-test step
  [ -d "$T" ] && [ -d "$(dirname "$CUCO_BUILD_CACHE")" ] && [ "$CUCO" = "$OUT/cuco" ] && [ ! -s "$LOG" ] &&
    [ "$LOG" = "$OUT/step.jsonl" ] && [ "$status" = 0 ] && [ "$RANKS" = 2 ] && [ "${T#/tmp/cuco-test.}" != "$T" ]
) && echo "ok   step_start: temporary folder, emptied log, the cuco on PATH, 2 ranks on two GPUs" ||
  { echo "FAIL step_start"; fail=1; }
exit $fail
