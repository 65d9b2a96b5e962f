#!/usr/bin/env bash
# scripts/device.d/83-noise.sh: how much one program's benchmark time varies
# from process to process, with the manifest's warm-up and with a longer one.
# For each workload in NOISE_WORKLOADS (default gemm_allgather), a copy whose
# bench args say --warmup NOISE_WARMUP (default 50) is made in /tmp; then
# NOISE_ROUNDS rounds (default 3) each run 'cuco eval --repeats 2' of the
# original and of the copy, so drift hits both alike. NOISE_RANKS (default
# the manifest's). Writes $OUT/noise/summary.json: per variant every
# process's time_ms, median, min, max, spread.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/noise
mkdir -p "$DEST"
WORKLOADS=${NOISE_WORKLOADS:-gemm_allgather}
WARM=${NOISE_WARMUP:-50}
ROUNDS=${NOISE_ROUNDS:-3}
RANKS_OPT=(${NOISE_RANKS:+--ranks "$NOISE_RANKS"})
export CUCO_BUILD_CACHE=${CUCO_BUILD_CACHE:-/tmp/cuco-build-cache}
mkdir -p "$CUCO_BUILD_CACHE"
note() { echo "$(date -u +%T) $*" | tee -a "$DEST/steps.txt"; }
command -v cuco >/dev/null || { note "cuco not on PATH: nothing run"; exit 1; }
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$DEST/clocks-before.txt" 2>&1

for w in $WORKLOADS; do
  copy=/tmp/cuco-noise-$w-warm$WARM
  rm -rf "$copy"; cp -r "workloads/$w" "$copy"
  # only the bench line changes: its --warmup value becomes $WARM
  python3 - "$copy/workload.yaml" "$WARM" <<'PY'
import re, sys
path, warm = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
inbench = False
for i, l in enumerate(lines):
    if re.match(r"^\S", l):
        inbench = l.startswith("bench:")
    if inbench and "--warmup" in l:
        lines[i] = re.sub(r'(--warmup,\s*")\d+(")', r"\g<1>" + warm + r"\g<2>", l)
open(path, "w").write("\n".join(lines))
PY
  grep -A1 "^bench:" "$copy/workload.yaml" | tail -1 >> "$DEST/steps.txt"
  for r in $(seq 1 "$ROUNDS"); do
    timeout 200 cuco eval "workloads/$w" "${RANKS_OPT[@]}" --repeats 2 --json > "$DEST/$w-manifest-$r.json" 2> "$DEST/$w-manifest-$r.err"
    note "$w manifest warm-up round $r: exit $?"
    timeout 200 cuco eval "$copy" "${RANKS_OPT[@]}" --repeats 2 --json > "$DEST/$w-warm$WARM-$r.json" 2> "$DEST/$w-warm$WARM-$r.err"
    note "$w warm-up $WARM round $r: exit $?"
  done
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$DEST/clocks-after.txt" 2>&1

python3 - "$DEST" > "$DEST/summary.json" <<'PY'
import glob, json, os, re, statistics, sys
d = sys.argv[1]
out = {}
for f in sorted(glob.glob(os.path.join(d, "*-[0-9]*.json"))):
    key = re.sub(r"-\d+\.json$", "", os.path.basename(f))
    try:
        j = json.load(open(f))
        out.setdefault(key, {"times_ms": [], "statuses": []})
        out[key]["times_ms"] += j.get("times_ms") or []
        out[key]["statuses"].append(j.get("status"))
    except Exception as e:
        out.setdefault(key, {"times_ms": [], "statuses": []})["statuses"].append("error: %s" % e)
for k, v in out.items():
    t = v["times_ms"]
    if t:
        m = statistics.median(t)
        v.update(median_ms=m, min_ms=min(t), max_ms=max(t), spread=(max(t) - min(t)) / m,
                 stdev_pct=100 * statistics.pstdev(t) / m)
json.dump(out, sys.stdout, indent=1)
PY
note "summary written"
exit 0
