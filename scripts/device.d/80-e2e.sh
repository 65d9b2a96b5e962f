#!/usr/bin/env bash
# scripts/device.d/80-e2e.sh: the fast path and the search on the GPU
# workloads, measured side by side.
#   prep  (parallel) 'cuco transform' on the workloads and on the point-to-
#         point test programs of tests/data/transform: build, run, verify.
#         Builds land in a shared build cache, so later steps do not rebuild.
#   time  (one at a time) 'cuco eval --repeats R' of each seed and of its
#         transformed gen_0: the figures to compare.
#   run   (one at a time) 'cuco run' on the workloads in E2E_RUN with the
#         offline mutator and E2E_EVALS evaluations; its confirm step times
#         the seed, gen_0 and the best side by side in E2E_REPEATS rounds
#         ($OUT/e2e/confirm-NAME.json).
# Environment: E2E_PHASES (default "prep time run"), E2E_WORKLOADS (default
# the four), E2E_RUN (default the four), E2E_EVALS (default 12),
# E2E_REPEATS (default 3; E2E_SEARCH_REPEATS, default 1, inside the search),
# E2E_RUN_TIME (seconds: a wall-clock budget for each search, beside
# E2E_EVALS), E2E_DATA (the test programs to transform; default ten of
# tests/data/transform), E2E_WS (workspaces; default $OUT/e2e/ws, so the
# databases come back with the results), E2E_RANKS (default: the manifests';
# with N, every cuco command gets --ranks N: E2E_RANKS=1 checks the whole
# pipeline on a 1-GPU machine).
# Writes $OUT/e2e/summary.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/e2e
mkdir -p "$DEST"
PHASES=${E2E_PHASES:-prep time run}
WORKLOADS=${E2E_WORKLOADS:-kv_transfer gemm_allgather moe_dispatch_combine flash_attn_cp}
RUN=${E2E_RUN:-kv_transfer gemm_allgather moe_dispatch_combine flash_attn_cp}
EVALS=${E2E_EVALS:-12}
REPEATS=${E2E_REPEATS:-3}
SEARCH_REPEATS=${E2E_SEARCH_REPEATS:-1}  # per candidate in the search; the final timings use REPEATS
WS=${E2E_WS:-$DEST/ws}
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$WS" "$CUCO_BUILD_CACHE"
RANKS=${E2E_RANKS:-}
DATA=${E2E_DATA-sendrecv_pair alltoall_group broadcast allgather allreduce_loop async_alloc tp_mlp_allreduce pipeline_stages ring_pass reduce_scatter_grad}
LOG=$DEST/steps.txt
note() { echo "$(date -u +%T) $*" | tee -a "$LOG"; }
has() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }

if ! command -v cuco >/dev/null; then
  note "cuco not on PATH: nothing run"
  exit 1
fi

# --ranks for every cuco command when E2E_RANKS is set
RANKS_OPT=(${RANKS:+--ranks "$RANKS"})
[ -n "$RANKS" ] && note "every program at $RANKS rank(s) (cuco --ranks $RANKS)"

program_of() { # program_of WORKSPACE -> gen_0 program path when it verified
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("program") or "" if str(j.get("verification","")).startswith("built, ran and verified") else "")' \
    "$1/gen_0/transform_report.json" 2>/dev/null
}

if has prep; then
  note "prep: transforms in parallel"
  pids=()
  for w in $WORKLOADS; do
    timeout 300 cuco transform "workloads/$w" "${RANKS_OPT[@]}" --workspace "$WS/$w" --quiet > "$DEST/transform-$w.txt" 2>&1 &
    pids+=($!)
  done
  for t in $DATA; do
    timeout 300 cuco transform "tests/data/transform/$t" "${RANKS_OPT[@]}" --workspace "$WS/data-$t" --quiet \
      > "$DEST/transform-data-$t.txt" 2>&1 &
    pids+=($!)
  done
  if [ -f .devcarry/flash_attn_cp.orig.cu ]; then
    timeout 300 cuco eval workloads/flash_attn_cp "${RANKS_OPT[@]}" .devcarry/flash_attn_cp.orig.cu --level 2 --json \
      > "$DEST/eval-flash_attn_cp-orig-l2.json" 2> "$DEST/eval-flash_attn_cp-orig-l2.err" &
    pids+=($!)
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  for f in "$DEST"/transform-*.txt; do note "$(basename "$f" .txt): $(grep -m1 -E ': (transformed|NOT transformed)' "$f")"; done
fi

if has time; then
  for w in $WORKLOADS; do
    note "time: $w seed"
    timeout 240 cuco eval "workloads/$w" "${RANKS_OPT[@]}" --json --repeats "$REPEATS" > "$DEST/eval-$w-seed.json" 2> "$DEST/eval-$w-seed.err"
    prog=$(program_of "$WS/$w")
    if [ -n "$prog" ] && [ -f "$prog" ]; then
      note "time: $w gen_0"
      timeout 240 cuco eval "workloads/$w" "${RANKS_OPT[@]}" "$prog" --json --repeats "$REPEATS" > "$DEST/eval-$w-gen0.json" 2> "$DEST/eval-$w-gen0.err"
    fi
  done
  if [ -f .devcarry/flash_attn_cp.orig.cu ]; then
    note "time: flash_attn_cp previous kernel"
    timeout 240 cuco eval workloads/flash_attn_cp "${RANKS_OPT[@]}" .devcarry/flash_attn_cp.orig.cu --json --repeats "$REPEATS" \
      > "$DEST/eval-flash_attn_cp-orig.json" 2> "$DEST/eval-flash_attn_cp-orig.err"
  fi
fi

if has run; then
  for w in $RUN; do
    note "run: $w ($EVALS evaluations, then $REPEATS side-by-side rounds)"
    start=$(date +%s)
    from=()
    [ -n "$(program_of "$WS/$w")" ] || { from=(--from-seed); note "run: $w: gen_0 did not verify: searching from the seed"; }
    # cuco run ends with its confirm step: seed, gen_0 and best timed side by
    # side in REPEATS interleaved rounds (WORKSPACE/confirm.json)
    timeout "${E2E_RUN_TIMEOUT:-200}" cuco run "workloads/$w" "${RANKS_OPT[@]}" --workspace "$WS/$w" --skip-bound \
      --confirm-rounds "$REPEATS" "${from[@]}" ${E2E_RUN_TIME:+--time "$E2E_RUN_TIME"} -- --slots auto \
      --evaluations "$EVALS" --repeats "$SEARCH_REPEATS" > "$DEST/run-$w.txt" 2>&1
    note "run: $w exit $? in $(( $(date +%s) - start )) s"
    # the database comes back beside the logs (the workspace may be too deep)
    [ -f "$WS/$w/runs.db" ] && python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))' \
      "$WS/$w/runs.db" "$DEST/runs-$w.db"
    if [ -f "$WS/$w/confirm.json" ]; then
      cp "$WS/$w/confirm.json" "$DEST/confirm-$w.json"
      note "run: $w: $(grep -E '^  (seed|gen_0|best|bound) ' "$DEST/run-$w.txt" | tr -s ' ' | paste -sd ';' -)"
    fi
  done
fi

# one summary: every side-by-side comparison, and every eval JSON's status,
# median time and metrics
python3 - "$DEST" > "$DEST/summary.json" <<'EOF'
import glob, json, os, sys
d = sys.argv[1]

def confirm(j):
    return {"rounds": j.get("rounds"), "speedups": j.get("speedups"), "bound": j.get("bound"),
            "programs": [{k: p.get(k) for k in ("label", "status", "median_ms", "min_ms", "max_ms", "times_ms")}
                         for p in j.get("programs", [])]}

def evaluation(j):
    return {k: j.get(k) for k in ("status", "level", "time_ms", "time_ms_min", "spread", "times_ms", "metrics",
                                  "excerpt", "compile_s")}

out = {}
for pattern, pick in (("confirm-*.json", confirm), ("eval-*.json", evaluation)):
    for f in sorted(glob.glob(os.path.join(d, pattern))):
        try:
            out[os.path.basename(f)] = pick(json.load(open(f)))
        except Exception as e:
            out[os.path.basename(f)] = {"error": str(e)}
json.dump(out, sys.stdout, indent=1)
EOF
note "summary written"
exit 0
