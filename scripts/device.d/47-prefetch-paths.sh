#!/usr/bin/env bash
# scripts/device.d/47-prefetch-paths.sh: prefetch_next's paths on the GPU.
# Each program PREF_PROGRAMS names in tests/data/transform (default:
# zero3_backward, whose backward layer loop runs from the last layer to the
# first with a reduce-scatter beside the prefetch; fsdp_layers, whose gather
# sits in a per-layer function its loop calls) is transformed ('cuco
# transform --no-verify'), built as its manifest builds it and run directly
# by mpirun at RANKS ranks and at 1 rank with the manifest's verify
# arguments and CUCO_TX_TRACE=1: with the copy-engine rendezvous (the
# default) the trace must show the prefetch running beside the body at
# RANKS ranks; with CUCO_CE_SYNC=0 it must not (the prefetch takes no
# barrier of the communicator); every run must verify.
# Results: $OUT/prefetch-paths.jsonl (one line a run) and
# $OUT/prefetch-paths.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-prefetch prefetch-paths
SUM=$OUT/prefetch-paths.txt
: > "$SUM"
if [ "$RANKS" -lt 2 ]; then
  echo "skip: one GPU here; a prefetch needs 2 ranks, so no run could show one" | tee -a "$SUM"
  exit 0
fi
for p in ${PREF_PROGRAMS:-zero3_backward fsdp_layers}; do
  d=tests/data/transform/$p
  f=$(sed -n 's/^evolve_file: *//p' "$d/workload.yaml")
  "$CUCO" transform "$d" --ranks "$RANKS" --workspace "$T/ws-$p" --no-verify > "$T/$p.tx.log" 2>&1
  g=$T/ws-$p/gen_0/$f
  [ -s "$g" ] || { echo "$p: no gen_0" | tee -a "$SUM"; status=1; continue; }
  grep -q "prefetch_next:" "$T/ws-$p/gen_0/transform_report.md" ||
    { echo "$p: no prefetch_next in its report" | tee -a "$SUM"; status=1; }
  build_program "$g" "$T/$p-gen0" || { echo "$p: build failed" | tee -a "$SUM"; status=1; continue; }
  args=$(verify_args "$d/workload.yaml")
  for r in $RANKS 1; do
    for sync in 1 0; do
      out=$(env CUCO_CE_SYNC=$sync CUCO_TX_TRACE=1 timeout -k 5 120 mpirun -np "$r" --bind-to none \
        -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUCO_CE_SYNC -x CUCO_TX_TRACE "$T/$p-gen0" $args 2>&1)
      rc=$?
      verdict=$(echo "$out" | grep -o "Verification: [A-Z]*" | head -1)
      beside=$(echo "$out" | grep -c "runs beside this one's work")
      want=0
      [ "$r" -gt 1 ] && [ "$sync" = 1 ] && want=1
      ok=1
      [ "$verdict" = "Verification: PASS" ] && [ "$rc" = 0 ] || ok=0
      { [ "$want" = 1 ] && [ "$beside" -gt 0 ]; } || { [ "$want" = 0 ] && [ "$beside" = 0 ]; } || ok=0
      [ "$ok" = 1 ] || status=1
      echo "{\"program\":\"$p\",\"ranks\":$r,\"ce_sync\":$sync,\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"prefetch_trace_lines\":$beside,\"expected_prefetch\":$want,\"ok\":$ok}" >> "$LOG"
      echo "$p ranks=$r CUCO_CE_SYNC=$sync rc=$rc ${verdict:-no verdict} prefetch-lines=$beside (want $( [ $want = 1 ] && echo some || echo none)) $( [ $ok = 1 ] && echo ok || echo FAIL)" | tee -a "$SUM"
    done
  done
done
exit $status
