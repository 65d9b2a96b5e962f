#!/usr/bin/env bash
# scripts/device.d/70-slots.sh: on the 2-GPU machine, measures how many
# candidate evaluations per minute `cuco evolve` does with 1 and with 2 local
# slots, and checks from the runs themselves that the slots used disjoint
# GPUs and that benchmarks (L3) had the host to themselves.
#
# Every shipped GPU workload has 2 ranks, which on 2 GPUs leaves one slot, so
# this uses a 1-rank GPU workload generated here: a CUDA program with
# EVOLVE-BLOCK knobs that keeps its GPU busy for a fixed time (a spin kernel:
# 0.4 s at the verify size, 1.2 s at the bench size), so that the run phase,
# which slots parallelize, dominates as it does for real candidates. Each
# run appends "start_ns end_ns pci_bus_id CUDA_VISIBLE_DEVICES level" to
# $PROBE_LOG. Three runs of the same budget (9 evaluations: generation 0 and
# two generations of 4 children on one island; re-timing off, so that every
# run does the same work), each in a fresh workspace:
#   --slots 1, --slots 2 (benchmarks exclusive, the default),
#   --slots 2 --shared-bench (benchmarks share the host too).
# Needs nvcc and the cuco binary (.devcarry/bin/cuco from scripts/device-bundle,
# or cuco in PATH). Writes $OUT/slots-summary.txt, $OUT/slots.json and logs.
# Takes about 2 minutes; each evolve is cut at 50 s.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PWD/.devcarry/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/slots-summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
if ! command -v cuco >/dev/null; then
  note "skip: no cuco binary (run scripts/device-bundle on the build machine first)"
  exit 0
fi
if ! command -v nvcc >/dev/null; then
  note "skip: no nvcc"
  exit 0
fi
unset CUDA_VISIBLE_DEVICES # the slots hand out all GPUs of the machine
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
note "GPUs: $GPUS; cores: $(nproc); $(date -u +%FT%TZ)"
[ "$GPUS" -ge 2 ] || note "warning: fewer than 2 GPUs: --slots 2 is capped at $GPUS slot(s)"
WL=$(mktemp -d /tmp/cuco-slots.XXXXXX)
trap 'rm -rf "$WL"' EXIT
cat > "$WL/workload.yaml" <<'EOF'
name: slot_probe
description: "1-rank GPU probe for slot throughput: a spin kernel of fixed length"
ranks: 1
gpu: true
sources: [probe.cu]
evolve_file: probe.cu
build:
  command: [nvcc, -std=c++17, -arch=sm_90, -O3, -o, "{out}", "{evolve_file}"]
  output: probe
  timeout_s: 120
run:
  launcher: direct
verify:
  args: ["400", "L2"]
  timeout_s: 30
bench:
  args: ["1200", "L3"]
  timeout_s: 40
  repeats: 1
EOF
cat > "$WL/probe.cu" <<'EOF'
// probe.cu: keeps one GPU busy for about MS milliseconds (one spin kernel per
// millisecond, on every SM), checks that the kernels ran, reports the time,
// and logs when and on which GPU it ran to $PROBE_LOG.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>
// EVOLVE-BLOCK-START
#define CUCO_THREADS 256 // cuco:knob 64 128 256 512 1024
#define CUCO_BLOCKS_PER_SM 1 // cuco:knob 1 2 4
#define CUCO_TAG 0 // cuco:knob 0 1 2 3 4 5 6 7
// EVOLVE-BLOCK-END
__global__ void spin(long long cycles, int *done) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 0) atomicAdd(done, 1);
}
static long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv) {
  long long t_start = now_ns();
  int ms = argc > 1 ? atoi(argv[1]) : 100;
  const char *level = argc > 2 ? argv[2] : "?";
  int dev = 0, sms = 0, khz = 0;
  char bus[32] = "?";
  if (cudaGetDevice(&dev) != cudaSuccess) { printf("Verification: FAIL no GPU\n"); return 1; }
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
  cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
  int *done;
  cudaMalloc(&done, sizeof(int));
  cudaMemset(done, 0, sizeof(int));
  int blocks = sms * CUCO_BLOCKS_PER_SM;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < ms; i++) spin<<<blocks, CUCO_THREADS>>>((long long)khz, done);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float elapsed;
  cudaEventElapsedTime(&elapsed, a, b);
  int h = 0;
  cudaMemcpy(&h, done, sizeof h, cudaMemcpyDeviceToHost);
  int ok = cudaGetLastError() == cudaSuccess && h == ms * blocks;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  const char *log = getenv("PROBE_LOG");
  FILE *f = log ? fopen(log, "a") : NULL;
  if (f) {
    fprintf(f, "%lld %lld %s %s %s\n", t_start, now_ns(), bus, cvd ? cvd : "-", level);
    fclose(f);
  }
  if (ok) printf("Verification: PASS\n");
  else printf("Verification: FAIL %d of %d blocks ran\n", h, ms * blocks);
  printf("CUCO_RESULT {\"time_ms\": %.4f, \"iters\": %d}\n", elapsed + 0.001 * CUCO_TAG, ms);
  return ok ? 0 : 1;
}
EOF
cat > "$WL/evolve.yaml" <<'EOF'
islands: 1
children_per_island: 4
EOF
# Overlaps in a probe log: pairs of runs at the same time on distinct GPUs,
# on the same GPU (must be 0), and benchmark runs overlapping anything.
overlaps() {
  python3 - "$1" <<'PY'
import sys
runs = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 5]
runs = [(int(a), int(b), bus, cvd, lvl) for a, b, bus, cvd, lvl in runs]
distinct = same = l3 = 0
for i in range(len(runs)):
    for j in range(i + 1, len(runs)):
        x, y = runs[i], runs[j]
        if x[0] < y[1] and y[0] < x[1]:
            if x[2] == y[2]:
                same += 1
            else:
                distinct += 1
            if "L3" in (x[4], y[4]):
                l3 += 1
gpus = sorted(set(r[2] for r in runs))
print('"runs": %d, "gpus_used": %d, "overlap_pairs_distinct_gpus": %d, '
      '"overlap_pairs_same_gpu": %d, "overlap_pairs_with_l3": %d'
      % (len(runs), len(gpus), distinct, same, l3))
PY
}
START=$(date +%s)
EVALS=9
JSON_RUNS=""
for mode in "1" "2" "2 --shared-bench"; do
  if [ $(( $(date +%s) - START )) -gt 115 ]; then note "stopping early: time budget"; break; fi
  set -- $mode
  tag="slots$1${2:+-shared}"
  export PROBE_LOG=$OUT/probe-$tag.log
  : > "$PROBE_LOG"
  t0=$(date +%s.%N)
  timeout 50 cuco evolve "$WL" --config "$WL/evolve.yaml" --workspace "$WL/ws-$tag" \
    --slots $mode --evaluations $EVALS --retime-rounds 0 --fresh --json > "$OUT/slots-$tag.log" 2> "$OUT/slots-$tag.err"
  rc=$?
  t1=$(date +%s.%N)
  evals=$(grep '"event":"done"' "$OUT/slots-$tag.log" | grep -o '"evaluations":[0-9]*' | cut -d: -f2)
  [ -n "$evals" ] || evals=$(grep -o '"evaluations":[0-9]*' "$OUT/slots-$tag.log" | tail -1 | cut -d: -f2)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  per_min=$(awk -v w="$wall" -v n="${evals:-0}" 'BEGIN {printf "%.2f", n * 60 / w}')
  ov=$(overlaps "$PROBE_LOG")
  note "$tag: rc=$rc evaluations=${evals:-?} wall_s=$wall per_min=$per_min; $ov"
  head -1 "$OUT/slots-$tag.err" >> "$SUMMARY"
  JSON_RUNS="$JSON_RUNS${JSON_RUNS:+,}
  {\"mode\": \"--slots $mode\", \"rc\": $rc, \"evaluations\": ${evals:-null}, \"wall_s\": $wall, \"evaluations_per_min\": $per_min, $ov}"
done
cat > "$OUT/slots.json" <<EOF
{"what": "cuco evolve evaluations per minute with 1 and 2 local slots (scripts/device.d/70-slots.sh)",
 "workload": "slot_probe (1 rank, GPU spin kernel: verify 0.4 s, bench 1.2 s)",
 "budget": "--evaluations $EVALS, islands 1, children_per_island 4",
 "date": "$(date -u +%FT%TZ)", "gpus": $GPUS, "nproc": $(nproc),
 "gpu_model": "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)",
 "runs": [$JSON_RUNS
 ]}
EOF
note "wrote $OUT/slots.json"
