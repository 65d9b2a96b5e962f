#!/usr/bin/env bash
# scripts/device.d/25-generality-1gpu.sh: cuco bound on the programs of
# issue 25's classes that bound touches (launch wrappers in another file,
# a reference solver beside the distributed one, a GPU-count guard in the
# verification) at 1 rank on one GPU: the timeline, the variants (with the
# kernels removed the wrapper's kernels must be gone) and the audit.
# Results: $OUT/generality-bound.jsonl (one bound.json per line, named).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
CUCO=$(command -v cuco)
T=$(mktemp -d /tmp/cuco-gen.XXXXXX)
trap 'rm -rf "$T"' EXIT
LOG=$OUT/generality-bound.jsonl
: > "$LOG"
status=0
for name in wrapper_launch ref_solver_scopes zero_header; do
  timeout -k 5 100 "$CUCO" bound "tests/data/transform/$name" --ranks 1 --workspace "$T/$name" --json \
    > "$T/$name.json" 2> "$OUT/generality-bound-$name.err"
  rc=$?
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; d["rc"]=int(sys.argv[3]); print(json.dumps(d))' \
    "$T/$name.json" "$name" "$rc" >> "$LOG" 2>/dev/null || { echo "{\"name\":\"$name\",\"rc\":$rc,\"status\":\"no JSON\"}" >> "$LOG"; status=1; }
  echo "$name: rc=$rc"
  [ $rc = 0 ] || status=1
done
exit $status
