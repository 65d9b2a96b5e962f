#!/usr/bin/env bash
# scripts/device.d/27-diagnose.sh: why a workload's gen_0 fails at the
# machine's rank count. 'cuco transform' of DIAG_WORKLOAD (a workload folder
# name), then its gen_0 verified by 'cuco eval --level 2' with the run knob
# DIAG_KNOB set to each of DIAG_VALUES (the rest as the transform left them),
# so that the failing transport shows. Writes $OUT/diag/: the transform's
# output and report, one eval JSON per value (its excerpt holds the
# program's own error lines).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}" "${DIAG_WORKLOAD:?}" "${DIAG_KNOB:?}" "${DIAG_VALUES:?}"
DEST=$OUT/diag
mkdir -p "$DEST"
W=workloads/$DIAG_WORKLOAD
WS=$(mktemp -d /tmp/cuco-diag.XXXXXX)
timeout 300 cuco transform "$W" --workspace "$WS/ws" > "$DEST/transform.txt" 2>&1
echo "transform rc=$?"
cp "$WS/ws/gen_0/transform_report.md" "$DEST/" 2>/dev/null
G=$WS/ws/gen_0/$DIAG_WORKLOAD.cu
for v in $DIAG_VALUES; do
  sed "s|^#define $DIAG_KNOB [0-9]* |#define $DIAG_KNOB $v |" "$G" > "$WS/v$v.cu"
  timeout 200 cuco eval "$W" "$WS/v$v.cu" --frozen-ref "$G" --level 2 --json --work-dir "$WS/e$v" \
    > "$DEST/eval-$DIAG_KNOB-$v.json" 2>&1
  echo "$DIAG_KNOB=$v rc=$?: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("status"), (j.get("excerpt") or "")[-600:])' "$DEST/eval-$DIAG_KNOB-$v.json" 2>&1)"
done
rm -rf "$WS"
