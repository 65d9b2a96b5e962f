#!/usr/bin/env bash
# scripts/device.d/46-glue-nets.sh: the glue's fallbacks to NCCL's own call
# (on_host_comm: a call on a communicator other than the windows' one;
# outside_windows: a collective whose buffer lies in no window), on and off,
# and the window indices handed out again (many_buffers: 300 tensors
# allocated and freed in turn, then 300 alive at once, past the 240 live
# windows). Each program NETS_PROGRAMS names in tests/data/transform
# (default: mesh_axes managed_path many_buffers) is transformed ('cuco transform --no-verify');
# its gen_0 and a copy whose two tests always answer "no" (what the glue did
# before them) are built as the test manifests build them and run directly
# by mpirun at RANKS ranks and at 1 rank with the manifest's verify
# arguments. Each run's verdict and the glue's stderr lines are kept.
# Results: $OUT/glue-nets.jsonl (one line a run) and $OUT/glue-nets.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-nets glue-nets
SUM=$OUT/glue-nets.txt
: > "$SUM"
for p in ${NETS_PROGRAMS:-mesh_axes managed_path many_buffers}; do
  d=tests/data/transform/$p
  f=$(sed -n 's/^evolve_file: *//p' "$d/workload.yaml")
  "$CUCO" transform "$d" --ranks "$RANKS" --workspace "$T/ws-$p" --no-verify > "$T/$p.tx.log" 2>&1
  g=$T/ws-$p/gen_0/$f
  [ -s "$g" ] || { echo "$p: no gen_0" | tee -a "$SUM"; status=1; continue; }
  sed -e 's/^  ncclComm_t owner = window_comm();$/  return false; ncclComm_t owner = window_comm();/' \
      -e 's/^  if (!p || buf_find(p, 1)) return false;$/  return false;/' "$g" > "$T/$p-nonets.cu"
  cmp -s "$g" "$T/$p-nonets.cu" && { echo "$p: the glue's tests were not found" | tee -a "$SUM"; status=1; }
  build_program "$g" "$T/$p-gen0" & build_program "$T/$p-nonets.cu" "$T/$p-nonets" & wait
  args=$(verify_args "$d/workload.yaml")
  for r in $RANKS 1; do
    for v in gen0 nonets; do
      out=$(timeout -k 5 120 mpirun -np "$r" --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        "$T/$p-$v" $args 2>&1)
      rc=$?
      verdict=$(echo "$out" | grep -o "Verification: [A-Z]*" | head -1)
      glue=$(echo "$out" | grep "^cuco_tx" | sort | uniq -c | head -4 | tr '\n' ';' | tr -d '"\\')
      echo "{\"program\":\"$p\",\"variant\":\"$v\",\"ranks\":$r,\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"glue\":\"$glue\"}" >> "$LOG"
      echo "$p $v ranks=$r rc=$rc ${verdict:-no verdict} | $glue" | tee -a "$SUM"
    done
  done
done
exit $status
