#!/usr/bin/env bash
# scripts/device.d/26-produce-1gpu.sh: schedule producer_split on one GPU.
# tests/data/transform/rowpar_linear (cuBLAS GEMM -> in-place all-reduce) is
# transformed at 1 rank; its gen_0 (split off) and variants with
# CUCO_PSPLIT_0=1 at 2, 4 and 8 pieces are built, verified and timed by a
# confined cuco eval (--level 3): every range of the GEMM's output goes
# through the all-reduce, so a range left out or reduced twice fails the
# program's own check. At 1 rank the all-reduce moves nothing: the times
# show only what cutting the GEMM into ranges costs.
# Results: $OUT/produce-1gpu.jsonl (one cuco eval JSON per line, named).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
CUCO=$(command -v cuco)
T=$(mktemp -d /tmp/cuco-produce.XXXXXX)
trap 'rm -rf "$T"' EXIT
export CUCO_BUILD_CACHE=$T/cache
WL=tests/data/transform/rowpar_linear
LOG=$OUT/produce-1gpu.jsonl
: > "$LOG"
"$CUCO" transform "$WL" --ranks 1 --workspace "$T/ws" --no-verify > "$OUT/produce-transform.log" 2>&1
g=$T/ws/gen_0/rowpar_linear.cu
[ -s "$g" ] || { echo "no gen_0"; tail -20 "$OUT/produce-transform.log"; exit 1; }
status=0
evaluate() { # NAME PROGRAM
  timeout -k 5 60 "$CUCO" eval "$WL" "$2" --frozen-ref "$g" --ranks 1 --level 3 --repeats 1 --json \
    > "$T/$1.json" 2> "$OUT/produce-$1.err"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; print(json.dumps(d))' \
    "$T/$1.json" "$1" >> "$LOG" 2>/dev/null || { echo "{\"name\":\"$1\",\"status\":\"no JSON\"}" >> "$LOG"; status=1; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["name"], d.get("status"), d.get("time_ms"))' "$(tail -1 "$LOG")"
}
evaluate gen0 "$g"
for p in 2 4 8; do
  knob_variant "$g" "$T/p$p.cu" "CUCO_PSPLIT_0=1,CUCO_PSPLIT_PIECES=$p" || status=1
  evaluate "psplit$p" "$T/p$p.cu"
done
grep -c '"status": *"ok"' "$LOG"
exit $status
