#!/usr/bin/env bash
# scripts/device.d/39-foreign-timing.sh: is a gen_0 ever slower than its
# seed? Each program of tests/data/transform named in FOREIGN_PROGRAMS is
# transformed ('cuco transform --no-verify'); its seed and gen_0 are built
# and verified side by side (a confined 'cuco eval --level 1', every program
# at once), then timed one after another ('cuco eval --level 3', 3 repeats,
# the manifest's bench size) at RANKS ranks, seed then gen_0, until
# FOREIGN_BUDGET_S seconds (default 400) have passed since the step began,
# each eval within FOREIGN_EVAL_S seconds (default 90); the programs left are
# listed as not timed. Put the programs of long bench runs last.
# Results: $OUT/foreign-timing.jsonl (one line an eval, named PROGRAM-seed
# and PROGRAM-gen0) and $OUT/foreign-timing.txt (a line a program: seed ms,
# gen_0 ms, seed / gen_0).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT"
source scripts/device-eval.sh
step_start cuco-foreign foreign-timing
began=$(date +%s)
PROGRAMS=${FOREIGN_PROGRAMS:-alltoall_pack alltoall_group jacobi_halo sendrecv_pair ring_pass pipeline_stages
  tp_mlp_allreduce ddp_buckets reduce_scatter_grad allgather allreduce_loop layer_send broadcast}
gen0_of() { echo "$T/ws-$1/gen_0/$(sed -n 's/^evolve_file: *//p' "tests/data/transform/$1/workload.yaml")"; }

for p in $PROGRAMS; do
  ( "$CUCO" transform "tests/data/transform/$p" --ranks "$RANKS" --workspace "$T/ws-$p" --no-verify \
      > "$T/$p.tx.log" 2>&1
    g=$(gen0_of "$p")
    [ -s "$g" ] || exit 0
    eval_named "tests/data/transform/$p" "$p-seed" 1 "$RANKS" 200 foreign &
    eval_named "tests/data/transform/$p" "$p-gen0" 1 "$RANKS" 200 foreign "$g" "$g" &
    wait ) &
done
wait

left=()
for p in $PROGRAMS; do
  g=$(gen0_of "$p")
  if [ ! -s "$g" ]; then echo "$p: no gen_0 ($(tail -1 "$T/$p.tx.log"))"; status=1; continue; fi
  if [ $(( $(date +%s) - began )) -ge "${FOREIGN_BUDGET_S:-400}" ]; then left+=("$p"); continue; fi
  eval_named "tests/data/transform/$p" "$p-seed" 3 "$RANKS" "${FOREIGN_EVAL_S:-90}" foreign
  eval_named "tests/data/transform/$p" "$p-gen0" 3 "$RANKS" "${FOREIGN_EVAL_S:-90}" foreign "$g" "$g"
done

python3 - "$LOG" "$RANKS" "${left[*]:-}" > "$OUT/foreign-timing.txt" <<'EOF'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    prog, _, which = d["name"].rpartition("-")
    runs.setdefault(prog, {})[which] = d
for prog, r in runs.items():
    s, g = r.get("seed", {}), r.get("gen0", {})
    ok = s.get("status") == "ok" and g.get("status") == "ok"
    ratio = "%.3f" % (s["time_ms"] / g["time_ms"]) if ok and g.get("time_ms") else "-"
    print("%s ranks=%s seed %s %s gen_0 %s %s seed/gen_0 %s" % (prog, sys.argv[2], s.get("status"), s.get("time_ms"),
                                                                 g.get("status"), g.get("time_ms"), ratio))
if sys.argv[3]:
    print("not timed (budget): " + sys.argv[3])
EOF
cat "$OUT/foreign-timing.txt"
exit $status
