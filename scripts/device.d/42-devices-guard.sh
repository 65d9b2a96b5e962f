#!/usr/bin/env bash
# scripts/device.d/42-devices-guard.sh: a program whose process drives
# several GPUs (tests/data/transform/devices_per_thread: an ncclCommInitRank
# per device in a loop inside one NCCL group) must stop with the guard's
# message, not hang. Its gen_0 (made at 1 rank) is built with nvcc and run
# by one process with one device (must verify) and with two (needs two
# GPUs: must exit non-zero within 60 s, printing the guard's message).
# Results: $OUT/devices-guard.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-guard devices-guard
SUM=$OUT/devices-guard.txt
d=tests/data/transform/devices_per_thread
"$CUCO" transform "$d" --ranks 1 --workspace "$T/ws" --no-verify > "$T/tx.log" 2>&1
g=$T/ws/gen_0/devices_per_thread.cu
[ -s "$g" ] || { echo "no gen_0: $(tail -3 "$T/tx.log")" | tee "$SUM"; exit 1; }
build_program "$g" "$T/prog" | tee "$SUM"
[ -x "$T/prog" ] || exit 1
run() { # DEVICES
  timeout -k 5 60 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "$T/prog" 4099 2 "$1" 2>&1
}
out=$(run 1); rc=$?
echo "one device: rc=$rc $(echo "$out" | grep -m1 Verification)" | tee "$SUM"
echo "$out" | grep -q "Verification: PASS" || status=1
ngpu=$(nvidia-smi -L | wc -l)
if [ "$ngpu" -ge 2 ]; then
  out=$(run 2); rc=$?
  msg=$(echo "$out" | grep -m1 "makes a second communicator")
  echo "two devices: rc=$rc (124: timed out) ${msg:-no guard message: $(echo "$out" | tail -2 | tr '\n' ' ')}" | tee -a "$SUM"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ -n "$msg" ] || status=1
else
  echo "two devices: not run (one GPU)" | tee -a "$SUM"
fi
exit $status
