#!/usr/bin/env bash
# scripts/device.d/50-transform.sh: on the 2-GPU machine, run the fast path
# ('cuco transform', rule route) on each GPU workload: rules, static check,
# build, run + verify, and the time against the seed. gen_0/ of each
# (program, diff, transform_report.md/.json) and the logs go to $OUT/transform/.
# Needs the cuco binary on PATH (scripts/gpu-session), nvcc, MPI and NCCL
# 2.28.9 at NCCL_HOME. Workloads run one after another (they share both GPUs);
# the ones that do not fit the time budget (TRANSFORM_BUDGET_S, default 165 s)
# are listed as skipped.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
: "${NCCL_HOME:=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}"
export NCCL_HOME CUCO_NCCL_HOME=${CUCO_NCCL_HOME:-$NCCL_HOME}
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
DEST=$OUT/transform
mkdir -p "$DEST"
SUMMARY=$DEST/summary.txt
: > "$SUMMARY"
START=$(date +%s)
BUDGET_S=${TRANSFORM_BUDGET_S:-165}
WS=$(mktemp -d /tmp/cuco-transform.XXXXXX)
note() { echo "$*" | tee -a "$SUMMARY"; }

if ! command -v cuco >/dev/null; then
  note "cuco not on PATH: nothing run"
  exit 1
fi
nvidia-smi -L >> "$SUMMARY" 2>&1

# the cheapest first, so that a short budget still covers most of them
for name in kv_transfer gemm_allgather flash_attn_cp moe_dispatch_combine; do
  [ -f "workloads/$name/workload.yaml" ] || { note "$name: no such workload"; continue; }
  left=$(( BUDGET_S - ($(date +%s) - START) ))
  if [ "$left" -lt 40 ]; then
    note "$name: skipped (time budget)"
    continue
  fi
  t0=$(date +%s)
  timeout "$left" cuco transform "workloads/$name" --workspace "$WS/$name" > "$DEST/$name.log" 2>&1
  rc=$?
  note "$name: exit $rc in $(( $(date +%s) - t0 )) s ($(grep -m1 "^$name: " "$DEST/$name.log"))"
  grep -E "speedup" "$DEST/$name.log" >> "$SUMMARY"
  mkdir -p "$DEST/$name"
  cp -r "$WS/$name/gen_0/." "$DEST/$name/" 2>/dev/null
done
rm -rf "$WS"
exit 0
