#!/usr/bin/env bash
# planted.sh: the search benchmark of issue #24 on tests/data/search_planted
# (knobs with a planted two-knob interaction, +-2% noise per run, no real
# work). Runs `cuco evolve --evaluations EVALS` for seeds 1..SEEDS, scores
# each run's best program by its exact (noise-free) time, and prints one
# JSON object: the seeds that found the best cell of the space (found by an
# exhaustive sweep of the exact times) and each seed's share of the best
# cell's gain (gain = default time / time - 1).
#
# usage: bench/search/planted.sh [SEEDS=20] [EVALS=30] [OUT.json]
#   env: CUCO_BIN (default build-doe-rel/cuco, else build/cuco),
#        PLANTED_EVOLVE_ARGS (extra `cuco evolve` options), PLANTED_WORK
#        (a folder to keep the workspaces in, ws1 ... wsN), TMPDIR
set -euo pipefail
seeds=${1:-20}
evals=${2:-30}
out=${3:-}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${CUCO_BIN:-}
if [ -z "$bin" ]; then
    for b in "$repo/build-doe-rel/cuco" "$repo/build/cuco"; do
        [ -x "$b" ] && { bin=$b; break; }
    done
fi
[ -x "$bin" ] || { echo "planted.sh: no cuco binary (set CUCO_BIN)" >&2; exit 2; }
wl="$repo/tests/data/search_planted"
if [ -n "${PLANTED_WORK:-}" ]; then # keep the workspaces (ws1, ws2, ...) there
    work=$PLANTED_WORK
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/planted.XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi

# exact time of a program file (compiled as the manifest does, run --exact)
exact_ms() {
    cc -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -o "$work/exact" "$1" -lm
    "$work/exact" --exact | sed -n 's/^CUCO_RESULT {"time_ms":\([0-9.]*\).*/\1/p'
}

# the exhaustive sweep: the exact time of every setting of the four knobs
# the model reads (planted.c --exact-setting; the fifth is never read)
exact_ms "$wl/planted.c" >/dev/null
cp "$work/exact" "$work/model"
best_ms=$(python3 - "$wl/planted.c" "$work/model" <<'PY'
import itertools, re, subprocess, sys
src = open(sys.argv[1]).read()
knobs = re.findall(r'^#define (\w+) (\S+)\s*// cuco:knob (.*)$', src, re.M)
read = [k[2].split() for k in knobs if k[0] != "CUCO_PL_TRACE"]
best = None
for vals in itertools.product(*read):
    out = subprocess.run([sys.argv[2], "--exact-setting", *vals], capture_output=True, text=True,
                         check=True).stdout
    t = float(re.search(r'"time_ms":([0-9.]+)', out).group(1))
    best = t if best is None or t < best else best
print("%.6f" % best)
PY
)
default_ms=$(exact_ms "$wl/planted.c")

rows=()
t0=$(date +%s)
for seed in $(seq 1 "$seeds"); do
    ws="$work/ws$seed"
    # shellcheck disable=SC2086
    "$bin" evolve "$wl" --workspace "$ws" --evaluations "$evals" --seed "$seed" --json \
        ${PLANTED_EVOLVE_ARGS:-} >"$work/log$seed" 2>&1 ||
        { echo "planted.sh: seed $seed failed:" >&2; tail -5 "$work/log$seed" >&2; exit 1; }
    t=$(exact_ms "$ws/best.c")
    done_line=$(grep '"event":"done"' "$work/log$seed" | tail -1)
    rows+=("$seed:$t:$done_line")
done
t1=$(date +%s)

python3 - "$default_ms" "$best_ms" "$seeds" "$evals" "$((t1 - t0))" "$bin" "$out" "${rows[@]}" <<'PY'
import json, platform, socket, subprocess, sys, time
default, best, seeds, evals, wall, binary, out = sys.argv[1:8]
default, best = float(default), float(best)
gain_best = default / best - 1
runs = []
for r in sys.argv[8:]:
    seed, t, done = r.split(":", 2)
    t = float(t)
    done = json.loads(done) if done else {}
    runs.append({"seed": int(seed), "exact_ms": t, "found_best": abs(t - best) < 1e-9,
                 "share_of_best_gain": round((default / t - 1) / gain_best, 4),
                 "evaluations": done.get("evaluations"), "stop": done.get("stop"),
                 "retimings": done.get("retimings"), "knobs": done.get("knobs")})
cpu = ""
try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
res = {
    "benchmark": "search_planted",
    "command": "bench/search/planted.sh %s %s" % (seeds, evals),
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"host": socket.gethostname(), "cpu": cpu, "platform": platform.platform()},
    "evaluations": int(evals), "seeds": int(seeds), "wall_s": int(wall),
    "default_ms": default, "best_cell_ms": best, "best_gain": round(gain_best, 4),
    "found_best": sum(r["found_best"] for r in runs),
    "mean_share": round(sum(r["share_of_best_gain"] for r in runs) / len(runs), 4),
    "worst_share": min(r["share_of_best_gain"] for r in runs),
    "target": "found_best >= 19 of 20, worst_share >= 0.95",
    "runs": runs,
}
text = json.dumps(res, indent=1)
print(text)
if out:
    open(out, "w").write(text + "\n")
PY
