#!/usr/bin/env bash
# scripts/device.d/38-glue-check.sh: a regression check of the glue on the
# programs of tests/data/transform whose schedules it serves (GLUE_PROGRAMS
# names others, or workload folders such as workloads/flash_attn_cp): each gen_0 made by 'cuco transform --no-verify', built by a
# confined 'cuco eval --level 1' (all in parallel), then verified by 'cuco
# eval --level 2' at RANKS ranks and at 1 rank (GLUE_RANKS lists other
# rank counts), one after another.
# Results: $OUT/glue-check.txt (one line a program and rank count).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-glue glue-check
PROGRAMS=${GLUE_PROGRAMS:-stage_handoff seqpar_norm seqpar_act seqpar_mlp cp_attention cp_causal rowpar_kernel
  seqpar_rs layer_send sendrecv_pair ring_pass pipeline_stages alltoall_group jacobi_halo tp_mlp_allreduce lt_tp_mlp}
SUM=$OUT/glue-check.txt
# a program's folder, its workspace's name, and the program its gen_0 holds
# (the manifest's evolve_file)
dir_of() { if [ -d "$1" ]; then echo "$1"; else echo "tests/data/transform/$1"; fi; }
ws_of() { echo "$T/ws-$(basename "$1")"; }
gen0_of() { echo "$(ws_of "$1")/gen_0/$(sed -n 's/^evolve_file: *//p' "$(dir_of "$1")/workload.yaml")"; }
: > "$SUM"
for p in $PROGRAMS; do
  ( n=$(basename "$p")
    "$CUCO" transform "$(dir_of "$p")" --ranks "$RANKS" --workspace "$(ws_of "$p")" --no-verify > "$T/$n.tx.log" 2>&1
    g=$(gen0_of "$p")
    [ -s "$g" ] && timeout -k 5 280 "$CUCO" eval "$(dir_of "$p")" "$g" --frozen-ref "$g" --ranks "$RANKS" \
      --level 1 --json > "$T/$n.l1.json" 2> "$T/$n.l1.err" ) &
done
wait
for p in $PROGRAMS; do
  g=$(gen0_of "$p")
  n=$(basename "$p")
  if [ ! -s "$g" ]; then echo "$p: no gen_0 ($(tail -1 "$T/$n.tx.log"))" | tee -a "$SUM"; status=1; continue; fi
  for r in ${GLUE_RANKS:-$RANKS 1}; do
    timeout -k 5 120 "$CUCO" eval "$(dir_of "$p")" "$g" --frozen-ref "$g" --ranks "$r" --level 2 --json \
      > "$T/$n.r$r.json" 2> "$T/$n.r$r.err"
    rc=$?
    line=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("status"), (d.get("excerpt") or "")[:160].replace("\n"," | "))' "$T/$n.r$r.json" 2>/dev/null || echo "no JSON: $(tail -2 "$T/$n.r$r.err" | tr '\n' ' ')")
    echo "$p ranks=$r rc=$rc: $line" | tee -a "$SUM"
    [ $rc = 0 ] || status=1
  done
done
exit $status
