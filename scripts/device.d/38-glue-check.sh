#!/usr/bin/env bash
# scripts/device.d/38-glue-check.sh: a regression check of the glue on the
# programs of tests/data/transform whose schedules it serves (GLUE_PROGRAMS
# names others): each gen_0 made by 'cuco transform --no-verify', built by a
# confined 'cuco eval --level 1' (all in parallel), then verified by 'cuco
# eval --level 2' at RANKS ranks and at 1 rank, one after another.
# Results: $OUT/glue-check.txt (one line a program and rank count).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
step_start cuco-glue glue-check
PROGRAMS=${GLUE_PROGRAMS:-stage_handoff seqpar_norm seqpar_act seqpar_mlp cp_attention cp_causal rowpar_kernel
  seqpar_rs layer_send sendrecv_pair ring_pass pipeline_stages alltoall_group jacobi_halo tp_mlp_allreduce lt_tp_mlp}
SUM=$OUT/glue-check.txt
# the program gen_0 holds: the manifest's evolve_file
gen0_of() { echo "$T/ws-$1/gen_0/$(sed -n 's/^evolve_file: *//p' "tests/data/transform/$1/workload.yaml")"; }
: > "$SUM"
for p in $PROGRAMS; do
  ( "$CUCO" transform "tests/data/transform/$p" --ranks "$RANKS" --workspace "$T/ws-$p" --no-verify > "$T/$p.tx.log" 2>&1
    g=$(gen0_of "$p")
    [ -s "$g" ] && timeout -k 5 280 "$CUCO" eval "tests/data/transform/$p" "$g" --frozen-ref "$g" --ranks "$RANKS" \
      --level 1 --json > "$T/$p.l1.json" 2> "$T/$p.l1.err" ) &
done
wait
for p in $PROGRAMS; do
  g=$(gen0_of "$p")
  if [ ! -s "$g" ]; then echo "$p: no gen_0 ($(tail -1 "$T/$p.tx.log"))" | tee -a "$SUM"; status=1; continue; fi
  for r in "$RANKS" 1; do
    timeout -k 5 120 "$CUCO" eval "tests/data/transform/$p" "$g" --frozen-ref "$g" --ranks "$r" --level 2 --json \
      > "$T/$p.r$r.json" 2> "$T/$p.r$r.err"
    rc=$?
    line=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("status"), (d.get("excerpt") or "")[:160].replace("\n"," | "))' "$T/$p.r$r.json" 2>/dev/null || echo "no JSON: $(tail -2 "$T/$p.r$r.err" | tr '\n' ' ')")
    echo "$p ranks=$r rc=$rc: $line" | tee -a "$SUM"
    [ $rc = 0 ] || status=1
  done
done
exit $status
