#!/usr/bin/env bash
# scripts/device.d/85-llm-transform.sh: the LLM route of 'cuco transform' on
# the GPUs, with the replay server standing in for the model (no network).
# tests/data/llm/transform_max (ncclAllReduce with ncclMax, refused by the
# rules) goes through stage A (symmetric window + device communicator), stage
# B (a first edit that does not compile, then its repair: the device
# library's LSA all-gather and a local max kernel) and the judge; here every
# edit is also run and verified (cascade level 2), then the result is
# benchmarked against the seed and registered in runs.db with its LLM calls.
# Expected: exit 0, "built, ran and verified". Writes $OUT/llm-transform/.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
DEST=$OUT/llm-transform
mkdir -p "$DEST"
if ! command -v cuco >/dev/null || ! command -v python3 >/dev/null; then
  echo "cuco or python3 not on PATH: nothing run" | tee "$DEST/summary.txt"
  exit 1
fi
python3 tests/replay/replay_server.py tests/data/llm/transform_max_repair.json \
  "$DEST/port" "$DEST/requests.jsonl" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$DEST/port" ] && break; sleep 0.05; done
export ANTHROPIC_API_KEY=sk-replay-device
export CUCO_ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$DEST/port")"
export CUCO_LLM_PRICES="replay-model=1,10"
timeout 170 cuco transform tests/data/llm/transform_max --model anthropic:replay-model \
  --workspace "$DEST/ws" >"$DEST/out.txt" 2>"$DEST/err.txt"
rc=$?
cp "$DEST/ws/gen_0/transform_report.json" "$DEST/report.json" 2>/dev/null
python3 - "$DEST/ws/runs.db" >"$DEST/db.txt" 2>&1 <<'PYEOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("select id, generation, status, mutator, score, time_ms from programs").fetchall())
print(db.execute("select model, status, input_tokens, output_tokens, cost_usd from llm_calls").fetchall())
PYEOF
{ echo "exit $rc (expected 0)"; cat "$DEST/out.txt"; } | tee "$DEST/summary.txt"
[ "$rc" -eq 0 ]
