#!/usr/bin/env bash
# scripts/device.d/71-slots-cpu.sh: evaluation throughput of 'cuco evolve' on
# the CPU demo (2 MPI ranks per candidate) with 1, 2 and 4 local slots, on a
# machine with enough cores for them (the lent GPU machines have 16; with 2
# cores, 2 slots of a 2-rank job cannot run at once). Each mode runs the same
# budget (SLOTS_EVALS evaluations, default 12) in a fresh workspace, rounds
# interleaved so that no mode always runs first. Modes: --slots 1, --slots 2,
# --slots 4 (benchmarks exclusive, the default: a benchmark waits for the
# host to empty and holds off other runs), --slots 4 --shared-bench.
# Writes $OUT/slots-cpu.json and $OUT/slots-cpu-summary.txt; SLOTS_ROUNDS
# (default 2) rounds; each evolve is cut at SLOTS_RUN_S seconds (default 90).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT"
export PATH=$PWD/.devcarry/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/slots-cpu-summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
CUCO=$(command -v cuco || echo "$PWD/build-release/cuco")
[ -x "$CUCO" ] || { note "skip: no cuco binary"; exit 0; }
command -v mpicc >/dev/null || { note "skip: no mpicc"; exit 0; }
EVALS=${SLOTS_EVALS:-12}
ROUNDS=${SLOTS_ROUNDS:-2}
RUN_S=${SLOTS_RUN_S:-90}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
note "cores: $(nproc); $(date -u +%FT%TZ); $EVALS evaluations per run, $ROUNDS rounds"
TMP=$(mktemp -d /tmp/cuco-slots-cpu.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
MODES=("slots1:--slots 1" "slots2:--slots 2" "slots4:--slots 4" "slots4-shared:--slots 4 --shared-bench")
RESULTS=$TMP/results.txt
: > "$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
  n=${#MODES[@]}
  for k in $(seq 0 $(( n - 1 ))); do
    entry=${MODES[$(( (k + round - 1) % n ))]}
    mode=${entry%%:*}
    read -r -a flags <<< "${entry#*:}"
    ws=$TMP/ws-$mode-$round
    t0=$(date +%s.%N)
    timeout -k 5 "$RUN_S" "$CUCO" evolve workloads/cpu_demo --workspace "$ws" "${flags[@]}" \
      --evaluations "$EVALS" --fresh --json > "$OUT/slots-cpu-$mode-$round.jsonl" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    # evaluations and seconds: at the end, or (a run cut by the time limit) at
    # its last finished generation
    read -r done_evals done_s < <(python3 -c '
import json, sys
n, s = None, None
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except Exception:
        continue
    if j.get("event") == "generation":
        n, s = j.get("evaluations"), j.get("elapsed_s")
    if j.get("event") == "done":
        n = j.get("evaluations")
print(n if n is not None else "null", s if s is not None else "null")' "$OUT/slots-cpu-$mode-$round.jsonl")
    echo "$mode $round $rc $t0 $t1 $done_evals $done_s ${entry#*:}" >> "$RESULTS"
    note "$mode round $round: rc=$rc, $(python3 -c "print(round($t1 - $t0, 1))") s, $done_evals evaluations ($done_s s at the last generation)"
  done
done
python3 - "$RESULTS" "$OUT/slots-cpu.json" "$EVALS" <<'PY'
import json, statistics, sys, os
rows = [l.split(None, 7) for l in open(sys.argv[1]) if l.strip()]
runs = []
for mode, rnd, rc, t0, t1, n, gen_s, flags in rows:
    wall = float(t1) - float(t0)
    n = None if n == "null" else int(n)
    gen_s = None if gen_s == "null" else float(gen_s)
    rc = int(rc)
    # a finished run: its evaluations over its wall time; a run cut by the
    # limit: the evaluations of its finished generations over their time
    if rc == 0 and n:
        rate, basis = 60.0 * n / wall, "whole run"
    elif n and gen_s:
        rate, basis = 60.0 * n / gen_s, "finished generations of a run cut by the time limit"
    else:
        rate, basis = None, "no generation finished"
    runs.append({"mode": mode, "round": int(rnd), "rc": rc, "wall_s": round(wall, 2),
                 "evaluations": n, "generations_s": gen_s, "flags": flags.strip(),
                 "evaluations_per_min": round(rate, 2) if rate else None, "basis": basis})
modes = {}
for r in runs:
    if r["evaluations_per_min"] is not None:
        modes.setdefault(r["mode"], []).append(r["evaluations_per_min"])
base = statistics.median(modes["slots1"]) if modes.get("slots1") else None
summary = {m: {"median_evaluations_per_min": statistics.median(v), "runs": len(v),
               "speedup_over_1_slot": round(statistics.median(v) / base, 3) if base else None}
           for m, v in modes.items()}
out = {"what": "cuco evolve throughput on cpu_demo (2 ranks per candidate) with 1, 2, 4 local slots",
       "cores": os.cpu_count(), "evaluations_per_run": int(sys.argv[3]), "runs": runs,
       "summary": summary}
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
exit 0
