#!/usr/bin/env bash
# scripts/device.d/24-throughput.sh: timed programs per minute of the search
# on gemm_allgather at 1 rank, today's cuco (.devcarry/old: the previous
# commit, every knob built in, with only the block guard's fix that lets
# 'evolve --init gen_0' in) against this one (run knobs passed at run
# time, one build for many), side by side on the same GPU: each transforms
# the workload, then 'cuco evolve --init gen_0 --time $BUDGET_S' with the
# offline knob search. Counted from each workspace's runs.db: programs
# evaluated (not cache hits), ok, benchmark timings (re-timings included) and
# builds (binaries in the build cache). Also runs tests/gpu/test_ce_sync.sh first (the zero-SM probe).
# Results: $OUT/throughput.json, $OUT/ce-sync.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${TP_BUDGET_S:-180}
if [ -z "${TP_QUICK:-}" ]; then
bash tests/gpu/test_ce_sync.sh > "$OUT/ce-sync.log" 2>&1
grep -E "^(order|no SM|all_|Verification)" "$OUT/ce-sync.log"
fi
T=$(mktemp -d /tmp/cuco-throughput.XXXXXX)
# Where one evaluation's run time goes: the gen_0 binary run by hand.
probe() { # NAME CMD...: wall seconds of CMD
  local s=$(date +%s.%N)
  "${@:2}" > "$T/probe-$1.log" 2>&1
  echo "probe $1 rc=$? $(python3 -c "import time;print(round(time.time()-$s,2))") s" | tee -a "$OUT/throughput-probe.txt"
}
"$(command -v cuco)" transform workloads/gemm_allgather --ranks 1 --workspace "$T/wsp" --no-verify > /dev/null 2>&1
gp=$T/wsp/gen_0/gemm_allgather.cu
"$(command -v cuco)" eval workloads/gemm_allgather "$gp" --frozen-ref "$gp" --ranks 1 --level 1 --keep-build \
  --work-dir "$T/kb" > /dev/null 2>&1
BIN=$(find "$T/kb" -type f -name gemm_allgather -perm -u+x | head -1)
if [ -n "$BIN" ] && [ -z "${TP_QUICK:-}" ]; then
  VA=(--m 512 --k 1024 --n 1024 --warmup 1 --iters 3)
  BA=(--m 8192 --k 28672 --n 8192 --warmup 5 --iters 20)
  export LD_LIBRARY_PATH=$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}
  probe verify_mpirun mpirun -np 1 "$BIN" "${VA[@]}"
  probe verify_direct "$BIN" "${VA[@]}"
  probe bench_mpirun mpirun -np 1 "$BIN" "${BA[@]}"
  probe bench_mpirun_nowarm env CUCO_MIN_WARMUP_MS=0 mpirun -np 1 -x CUCO_MIN_WARMUP_MS "$BIN" "${BA[@]}"
  probe true_mpirun mpirun -np 1 true
fi
for which in old new; do
  if [ $which = old ]; then CUCO=$PWD/.devcarry/old/cuco; else CUCO=$(command -v cuco); fi
  ws=$T/ws-$which
  "$CUCO" transform workloads/gemm_allgather --ranks 1 --workspace "$ws" --no-verify > "$OUT/tp-transform-$which.log" 2>&1
  start=$(date +%s.%N)
  timeout -k 10 $((BUDGET_S + 120)) "$CUCO" evolve workloads/gemm_allgather --ranks 1 --workspace "$ws" \
    --init "$ws/gen_0/gemm_allgather.cu" --time "$BUDGET_S" --seed 1 --evaluations 200 \
    > "$OUT/tp-evolve-$which.log" 2>&1
  echo "$which rc=$? wall=$(python3 -c "import time;print(round(time.time()-$start,1))")" | tee -a "$T/walls"
  find "$ws/build-cache" -type f 2>/dev/null | wc -l > "$T/builds-$which"
done
python3 - "$T" "$OUT/throughput.json" "$BUDGET_S" <<'PY'
import json, sqlite3, sys, os, subprocess
t, out, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
walls = dict(l.split()[0:1] + [float(l.split("wall=")[1])] for l in open(os.path.join(t, "walls")))
res = {"what": "timed programs per minute of cuco evolve on gemm_allgather at 1 rank (offline knob search from gen_0), the previous commit's cuco against this one, one after the other on the same GPU",
       "budget_s": budget, "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(),
       "runs": {}}
for which in ("old", "new"):
    db = sqlite3.connect(os.path.join(t, "ws-" + which, "runs.db"))
    q = lambda s: db.execute(s).fetchone()[0]
    r = {"wall_s": walls.get(which),
         "programs": q("select count(*) from programs where parent_id is not null"),
         "evaluated": q("select count(*) from programs where parent_id is not null and cached = 0"),
         "ok": q("select count(*) from programs where parent_id is not null and status = 'ok' and cached = 0"),
         "timings": q("select count(*) from timings"),
         "retimings": q("select count(*) from timings where retiming_id is not null"),
         "builds": int(open(os.path.join(t, "builds-" + which)).read().strip() or 0)}
    r["timed_per_min"] = round(r["timings"] / (r["wall_s"] / 60.0), 2) if r["wall_s"] else None
    r["evaluated_per_min"] = round(r["evaluated"] / (r["wall_s"] / 60.0), 2) if r["wall_s"] else None
    res["runs"][which] = r
o, n = res["runs"]["old"], res["runs"]["new"]
if o.get("timed_per_min"):
    res["ratio_timed_per_min"] = round(n["timed_per_min"] / o["timed_per_min"], 2)
if o.get("evaluated_per_min"):
    res["ratio_evaluated_per_min"] = round(n["evaluated_per_min"] / o["evaluated_per_min"], 2)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
PY
rm -rf "$T"
