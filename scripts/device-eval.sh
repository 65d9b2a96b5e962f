# scripts/device-eval.sh: sourced by the GPU step scripts (scripts/device.d/).
# step_start TMPNAME NAME: what such a step starts with: CUCO (the cuco on
# PATH), T (a temporary folder under /tmp, removed at exit, holding the
# build cache), RANKS (2 where the machine has two GPUs or more, else 1;
# STEP_RANKS sets it),
# LOG ($OUT/NAME.jsonl, emptied) and status=0.
# eval_named WORKLOAD NAME LEVEL RANKS LIMIT PREFIX [PROGRAM FROZEN]: a
# confined 'cuco eval' of WORKLOAD (of PROGRAM, with FROZEN as its frozen
# reference) at RANKS ranks and --level LEVEL, EVAL_REPEATS repeats (3 when
# unset), within LIMIT
# seconds; its JSON goes to $T/NAME.lLEVEL.json and its stderr to
# $OUT/PREFIX-NAME.err. At level 3 the JSON is appended as one line of $LOG
# with "name" and "ranks" added (a line {"name":NAME,"status":"no JSON"} and
# status=1 when none came) and "NAME STATUS TIME_MS" is printed.
# Needs CUCO, T, OUT and LOG set and a global `status`.
# build_program SRC OUT: nvcc builds SRC (a transformed test program or its
# seed) to OUT as the test manifests do, against $NCCL_HOME, MPI and cuBLAS;
# its log is OUT.build.log; on failure says so and sets status=1.
# bench_args MANIFEST: the manifest's bench arguments, on one line;
# verify_args MANIFEST: its verify arguments.
# variants_build WORKLOAD PREFIX GEN0 VARIANT...: each VARIANT
# ("NAME:K=V[,K=V...]") written from GEN0 to $T/NAME.cu (knob_variant, from
# scripts/knob-variant.sh), then the seed, gen0 (GEN0) and every variant
# built and verified side by side (eval_named, level 1, RANKS ranks, 200 s).
# variants_time WORKLOAD PREFIX GEN0 VARIANT...: the same programs timed one
# after another (level 3), in that order.
eval_named() {
  local wl=$1 name=$2 level=$3 ranks=$4 limit=$5 prefix=$6
  shift 6
  local extra=()
  [ $# -ge 2 ] && extra=("$1" --frozen-ref "$2")
  timeout -k 5 "$limit" "$CUCO" eval "$wl" "${extra[@]}" --ranks "$ranks" --level "$level" --repeats "${EVAL_REPEATS:-3}" --json \
    > "$T/$name.l$level.json" 2> "$OUT/$prefix-$name.err"
  [ "$level" = 3 ] || return 0
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; d["ranks"]=int(sys.argv[3]); print(json.dumps(d))' \
    "$T/$name.l3.json" "$name" "$ranks" >> "$LOG" 2>/dev/null ||
    { echo "{\"name\":\"$name\",\"status\":\"no JSON\"}" >> "$LOG"; status=1; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["name"], d.get("status"), d.get("time_ms"))' "$(tail -1 "$LOG")"
}

build_program() {
  nvcc -std=c++17 -arch=sm_90 -O1 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) -o "$2" "$1" \
    -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas -lcublasLt $(mpicxx --showme:link) > "$2.build.log" 2>&1 ||
    { echo "build of $1 failed: $(tail -3 "$2.build.log")"; status=1; return 1; }
}

# manifest_args SECTION MANIFEST: the args list of the manifest's SECTION
# (verify, bench), on one line.
manifest_args() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
text = open(sys.argv[2]).read()
m = re.search(r'^' + sys.argv[1] + r':\s*\n\s*args:\s*\[(.*?)\]', text, re.M | re.S)
print(" ".join(a.strip().strip('"') for a in m.group(1).split(",")) if m else "")
EOF
}
verify_args() { manifest_args verify "$1"; }
bench_args() { manifest_args bench "$1"; }

step_start() {
  CUCO=$(command -v cuco)
  T=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'rm -rf "$T"' EXIT
  export CUCO_BUILD_CACHE=$T/cache
  RANKS=1
  [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && RANKS=2
  RANKS=${STEP_RANKS:-$RANKS}
  LOG=$OUT/$2.jsonl
  : > "$LOG"
  status=0
}

variants_build() {
  local wl=$1 prefix=$2 g=$3 v pids=()
  shift 3
  for v in "$@"; do knob_variant "$g" "$T/${v%%:*}.cu" "${v#*:}" || status=1; done
  eval_named "$wl" seed 1 "$RANKS" 200 "$prefix" &
  pids+=($!)
  eval_named "$wl" gen0 1 "$RANKS" 200 "$prefix" "$g" "$g" &
  pids+=($!)
  for v in "$@"; do
    eval_named "$wl" "${v%%:*}" 1 "$RANKS" 200 "$prefix" "$T/${v%%:*}.cu" "$g" &
    pids+=($!)
  done
  wait "${pids[@]}"
}

variants_time() {
  local wl=$1 prefix=$2 g=$3 v
  shift 3
  eval_named "$wl" seed 3 "$RANKS" 200 "$prefix"
  eval_named "$wl" gen0 3 "$RANKS" 200 "$prefix" "$g" "$g"
  for v in "$@"; do eval_named "$wl" "${v%%:*}" 3 "$RANKS" 200 "$prefix" "$T/${v%%:*}.cu" "$g"; done
}
