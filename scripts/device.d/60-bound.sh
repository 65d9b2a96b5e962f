#!/usr/bin/env bash
# scripts/device.d/60-bound.sh: on the 2-GPU machine, 'cuco bound' on each
# GPU workload and on tests/data/bound/hollow_allreduce.cu (whose
# verification is hollow on purpose: its dynamic-audit warning must fire).
# Builds the CUPTI timeline library (tools/cupti) with gcc first. Needs the
# cuco binary on PATH (scripts/gpu-session puts .devcarry/bin there), nvcc,
# MPI and NCCL 2.28.9 (NCCL_HOME). Each report is saved as
# $OUT/bound-<name>.json with its text in $OUT/bound-<name>.txt; a summary in
# $OUT/bound-summary.txt. New workloads are not started after BUDGET_S
# seconds so the step ends within 3 minutes. BOUND_ONLY="a b" limits the
# list (e.g. to run the rest in a second session).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
: "${NCCL_HOME:=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}"
export NCCL_HOME CUCO_REPO=${CUCO_REPO:-$PWD}
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
SUMMARY=$OUT/bound-summary.txt
START=$(date +%s)
BUDGET_S=${BUDGET_S:-120}
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

command -v cuco >/dev/null || { note "cuco not on PATH: nothing to run"; exit 1; }

# The injection library.
LIBDIR=$(mktemp -d /tmp/cuco-bound.XXXXXX)
CUPTI_INC=
for d in /usr/local/cuda/extras/CUPTI/include /usr/local/cuda/include; do
  [ -f "$d/cupti.h" ] && { CUPTI_INC=$d; break; }
done
CUPTI_LIB=
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do
  ls "$d"/libcupti.so* >/dev/null 2>&1 && { CUPTI_LIB=$d; break; }
done
if [ -n "$CUPTI_INC" ] && [ -n "$CUPTI_LIB" ]; then
  gcc -std=c11 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -fPIC -shared -fvisibility=hidden \
    -I"$CUPTI_INC" -o "$LIBDIR/libcuco_timeline.so" tools/cupti/cuco_timeline.c \
    -L"$CUPTI_LIB" -Wl,-rpath,"$CUPTI_LIB" -lcupti > "$OUT/bound-cupti-build.log" 2>&1
  note "build libcuco_timeline.so (CUPTI $CUPTI_INC, $CUPTI_LIB): rc=$?"
else
  note "no CUPTI headers/library found: running without a timeline"
fi
export CUCO_TIMELINE_LIB=$LIBDIR/libcuco_timeline.so
nvidia-smi --query-gpu=index,name --format=csv,noheader >> "$SUMMARY" 2>&1

LIST=${BOUND_ONLY:-"hollow_allreduce gemm_allgather kv_transfer flash_attn_cp moe_dispatch_combine"}
status=0
for name in $LIST; do
  if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
    note "$name: not started (time budget spent; run again with BOUND_ONLY=\"$name ...\")"
    continue
  fi
  if [ "$name" = hollow_allreduce ]; then
    target=tests/data/bound/hollow_allreduce.cu
    extra=(--ranks 2 -- --n 16777216 --iters 20)
  else
    target=workloads/$name
    extra=()
    [ -f "$target/workload.yaml" ] || { note "$name: no such workload"; continue; }
  fi
  t0=$(date +%s)
  cuco bound "$target" --json --workspace "$OUT/bound-ws/$name" "${extra[@]}" \
    > "$OUT/bound-$name.json" 2> "$OUT/bound-$name.log"
  rc=$?
  cp "$OUT/bound-ws/$name/bound.json" "$OUT/bound-$name.json" 2>/dev/null
  python3 - "$OUT/bound-$name.json" "$name" "$rc" "$(( $(date +%s) - t0 ))" >> "$SUMMARY" 2>&1 <<'PY' || note "$name: rc=$rc, no readable report (see bound-$name.log)"
import json, sys
j = json.load(open(sys.argv[1]))
name, rc, secs = sys.argv[2], sys.argv[3], sys.argv[4]
v = j["verification_audit"]
def t(x):
    return "-" if x.get("time_ms") is None else "%.3f ms (%s)" % (x["time_ms"], x["verification"])
print("%s: rc=%s in %s s" % (name, rc, secs))
print("  program %s, comm removed %s, compute removed %s" % (t(j["program"]), t(j["comm_removed"]), t(j["compute_removed"])))
print("  bound: %s" % json.dumps(j["bound"]))
tl = j["timeline"]
if tl["available"]:
    c = tl["ranks"][tl["critical"]]
    print("  critical rank %d: compute %.3f comm %.3f overlap %.3f ceiling %.3f wait %.3f span %.3f" % (
        c["rank"], c["compute_ms"], c["comm_ms"], c["overlap_ms"], c["ceiling"], c["wait_ms"], c["span_ms"]))
else:
    print("  timeline: %s" % tl["error"])
print("  audit: warning=%s static=%s dynamic=%s" % (v["warning"], v["static"]["finding"], v["dynamic"]["result"]))
if name == "hollow_allreduce":
    print("  EXPECTED dynamic finding: %s" % ("yes" if v["dynamic"]["finding"] else "NO (check)"))
print("  advice: %s" % j.get("advice"))
PY
done
rm -rf "$LIBDIR"
exit $status
