#!/usr/bin/env bash
# scripts/device.d/82-retime.sh: the re-timing of apparent improvements on a
# GPU. The same search ('cuco run', offline mutator, RETIME_EVALS
# evaluations, one bench repeat each) runs twice from the same transformed
# gen_0: with re-timing (the default, 2 rounds) and with --retime-rounds 0.
# Each ends with cuco run's confirm step (seed, gen_0, best side by side in
# RETIME_CONFIRM rounds), so what each search claimed can be compared with
# what the side-by-side timing found. Environment: RETIME_WORKLOAD (default
# gemm_allgather), RETIME_RANKS (default the manifest's), RETIME_EVALS (10),
# RETIME_CONFIRM (3), RETIME_VARIANTS (default "on off"), RETIME_TIMEOUT_ON
# (300 s) and RETIME_TIMEOUT_OFF (200 s; the off run reuses the on run's
# builds from the build cache, so it compiles little), RETIME_SEARCH_ARGS
# (more 'cuco evolve' options, e.g. "--slots auto" to compile in parallel).
# Writes $OUT/retime/summary.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/retime
mkdir -p "$DEST"
W=${RETIME_WORKLOAD:-gemm_allgather}
EVALS=${RETIME_EVALS:-10}
CONFIRM=${RETIME_CONFIRM:-3}
VARIANTS=${RETIME_VARIANTS:-on off}
RANKS_OPT=(${RETIME_RANKS:+--ranks "$RETIME_RANKS"})
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$CUCO_BUILD_CACHE"
LOG=$DEST/steps.txt
note() { echo "$(date -u +%T) $*" | tee -a "$LOG"; }
command -v cuco >/dev/null || { note "cuco not on PATH: nothing run"; exit 1; }

start=$(date +%s)
timeout 300 cuco transform "workloads/$W" "${RANKS_OPT[@]}" --workspace "$DEST/gen0" --quiet \
  > "$DEST/transform.txt" 2>&1
note "transform: exit $? in $(( $(date +%s) - start )) s: $(grep -m1 -E ': (transformed|NOT transformed)' "$DEST/transform.txt")"
for v in $VARIANTS; do
  ws=$DEST/ws-$v
  rm -rf "$ws"; cp -r "$DEST/gen0" "$ws"
  rounds=2; limit=${RETIME_TIMEOUT_ON:-300}
  [ "$v" = off ] && { rounds=0; limit=${RETIME_TIMEOUT_OFF:-200}; }
  start=$(date +%s)
  timeout "$limit" cuco run "workloads/$W" "${RANKS_OPT[@]}" --workspace "$ws" --skip-bound \
    --confirm-rounds "$CONFIRM" --retime-rounds "$rounds" -- --evaluations "$EVALS" --repeats 1 ${RETIME_SEARCH_ARGS:-} \
    > "$DEST/run-$v.txt" 2>&1
  note "run $v (--retime-rounds $rounds): exit $? in $(( $(date +%s) - start )) s"
done

python3 - "$DEST" "$W" $VARIANTS > "$DEST/summary.json" <<'PY'
import json, os, sqlite3, sys
dest, workload, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {"workload": workload}
for v in variants:
    ws = os.path.join(dest, "ws-" + v)
    r = {}
    try:
        h = sqlite3.connect(os.path.join(ws, "runs.db"))
        run_id, baseline = h.execute("SELECT id, baseline_ms FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        best = h.execute("SELECT id, time_ms, score, knobs FROM programs WHERE run_id=? AND status='ok'"
                         " AND score IS NOT NULL ORDER BY score DESC, id LIMIT 1", (run_id,)).fetchone()
        r["search"] = {"baseline_ms": baseline, "best_id": best[0], "best_ms": best[1], "claimed_speedup": best[2],
                       "best_knobs": best[3],
                       "evaluations": h.execute("SELECT count(*) FROM programs WHERE run_id=? AND code IS NOT NULL"
                                                " AND cached=0 AND coalesce(mutator,'') NOT IN ('copy','migration')"
                                                " AND status NOT IN ('pending','rejected_duplicate','rejected_novelty',"
                                                "'patch_failed')", (run_id,)).fetchone()[0]}
        try:
            rows = h.execute("SELECT challenger_id, champion_id, claimed_ms, challenger_ms, champion_ms, runs, held,"
                             " note FROM retimings WHERE run_id=? ORDER BY id", (run_id,)).fetchall()
            r["retimings"] = [dict(zip(("challenger_id", "champion_id", "claimed_ms", "retimed_ms", "champion_ms",
                                        "runs", "held", "note"), x)) for x in rows]
        except sqlite3.Error as e:
            r["retimings"] = str(e)
    except Exception as e:
        r["search_error"] = str(e)
    try:
        c = json.load(open(os.path.join(ws, "confirm.json")))
        r["confirm"] = {"rounds": c.get("rounds"), "speedups": c.get("speedups"),
                        "programs": [{k: p.get(k) for k in ("label", "status", "median_ms", "min_ms", "max_ms",
                                                           "times_ms")} for p in c.get("programs", [])]}
    except Exception as e:
        r["confirm_error"] = str(e)
    out[v] = r
json.dump(out, sys.stdout, indent=1)
PY
note "summary written"
exit 0
