#!/usr/bin/env bash
# scripts/device.d/28-hang.sh: where a workload's gen_0 stops at the
# machine's rank count. 'cuco transform --no-verify' of HANG_WORKLOAD (a
# workload folder name, or a path to one), gen_0 built with nvcc, then run under mpirun at
# HANG_RANKS ranks (default 2) with the verification arguments of its
# manifest and CUCO_TX_TRACE=1 (the glue prints each rank's communicator
# setup, window registrations and point-to-point calls), once per value of
# HANG_KNOB in HANG_VALUES (default: as the transform left it). A run still
# going after HANG_AFTER_S seconds (default 45) gets each rank's host stack
# from gdb (when installed) and is stopped. HANG_ENVS: further runs of the
# transform's own values, one per ';'-separated list of VAR=VALUE settings
# exported to the ranks (e.g. "NCCL_RUNTIME_CONNECT=0;NCCL_LOCAL_REGISTER=0").
# HANG_ARGS: the program's arguments instead of the verification ones.
# Writes $OUT/hang/.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}" "${HANG_WORKLOAD:?}"
RANKS=${HANG_RANKS:-2}
AFTER=${HANG_AFTER_S:-45}
DEST=$OUT/hang
mkdir -p "$DEST"
NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
# a workload folder name, or a path to a workload folder
W=workloads/$HANG_WORKLOAD
case "$HANG_WORKLOAD" in */*) W=$HANG_WORKLOAD; HANG_WORKLOAD=$(basename "$W") ;; esac
WS=$(mktemp -d /tmp/cuco-hang.XXXXXX)
timeout 120 cuco transform "$W" --workspace "$WS/ws" --no-verify > "$DEST/transform.txt" 2>&1
G=$(ls "$WS"/ws/gen_0/"$HANG_WORKLOAD".c* 2>/dev/null | head -1)
[ -n "$G" ] || { echo "no gen_0"; cat "$DEST/transform.txt"; exit 1; }
# the manifest's verify: args: [A, "B", ...] (one line)
ARGS=${HANG_ARGS:-}
[ -n "$ARGS" ] || ARGS=$(awk '/^verify:/ {v = 1; next} v && /^  args:/ {print; exit}' "$W/workload.yaml" |
  sed 's/^  args: *\[//; s/\].*//; s/[",]/ /g')
build() { # $1 source, $2 binary
  nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -Idevice -I"$NCCL_HOME/include" \
    $(mpicxx --showme:compile) -o "$2" "$1" -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas -lcublasLt \
    $(mpicxx --showme:link) > "$2.build.log" 2>&1
}
# run_one NAME BINARY [VAR=VALUE ...]: one run, stopped when it hangs
run_one() {
  local name=$1 bin=$2 log=$DEST/run-$1.log xs=() kv
  shift 2
  for kv in "$@"; do export "${kv?}"; xs+=(-x "${kv%%=*}"); done
  CUCO_TX_TRACE=1 NCCL_DEBUG=WARN timeout -k 5 $((AFTER + 30)) mpirun -np "$RANKS" \
    -x CUCO_TX_TRACE -x NCCL_DEBUG -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH "${xs[@]}" "$bin" $ARGS > "$log" 2>&1 &
  local run=$!
  for _ in $(seq "$AFTER"); do kill -0 $run 2>/dev/null || break; sleep 1; done
  if kill -0 $run 2>/dev/null; then
    echo "$name: still running after $AFTER s" | tee -a "$log"
    for pid in $(pgrep -f "$bin"); do
      [ "$(cat /proc/$pid/comm)" = "$(basename "$bin")" ] || continue
      echo "--- host stack of pid $pid" >> "$log"
      if command -v gdb > /dev/null; then
        timeout 20 gdb -p "$pid" -batch -ex "thread apply all bt 12" >> "$log" 2>&1
      else
        cat /proc/$pid/wchan >> "$log" 2>&1; echo >> "$log"
      fi
    done
    pkill -f "$bin"
  fi
  wait $run
  echo "$name: rc=$?"
  grep -v "^\s*$" "$log" | tail -${HANG_TAIL:-40}
  for kv in "$@"; do unset "${kv%%=*}"; done
}
VALUES=${HANG_VALUES:-default}
for v in $VALUES; do
  SRC=$G
  if [ "$v" != default ]; then
    SRC=$WS/v$v.cu
    sed "s|^#define ${HANG_KNOB:?} [0-9]* |#define $HANG_KNOB $v |" "$G" > "$SRC"
  fi
  B=$WS/bin-$v
  if ! build "$SRC" "$B"; then echo "value $v: build failed"; tail -20 "$B.build.log"; continue; fi
  run_one "value-$v" "$B"
done
if [ -n "${HANG_ENVS:-}" ]; then
  B=$WS/bin-default
  [ -x "$B" ] || build "$G" "$B" || { echo "build failed"; tail -20 "$B.build.log"; exit 1; }
  IFS=';' read -ra sets <<< "$HANG_ENVS"
  for set in "${sets[@]}"; do
    read -ra kvs <<< "$set"
    run_one "env-$(echo "$set" | tr ' =' '_-')" "$B" "${kvs[@]}"
  done
fi
rm -rf "$WS"
