#!/usr/bin/env bash
# scripts/device.d/70-slots.sh: on the 2-GPU machine, measures how many
# candidate evaluations per minute `cuco evolve` does with 1 and with 2 local
# slots. Every shipped GPU workload has 2 ranks, which on 2 GPUs leaves one
# slot, so this uses a small 1-rank GPU workload generated here (a CUDA
# program with an EVOLVE-BLOCK knob, launched directly on its slot's GPU).
# Three runs: --slots 1, --slots 2 (benchmarks still exclusive), --slots 2
# --shared-bench (benchmarks share the host too).
# Needs nvcc and the cuco binary (.devcarry/bin/cuco from scripts/device-bundle,
# or cuco in PATH). Results in $OUT/slots-summary.txt, logs in $OUT/.
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
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
note "GPUs: $GPUS; cores: $(nproc)"
WL=$(mktemp -d /tmp/cuco-slots.XXXXXX)
cat > "$WL/workload.yaml" <<'EOF'
name: slot_probe
description: "1-rank GPU probe for slot throughput"
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
  args: ["20"]
  timeout_s: 60
bench:
  args: ["200"]
  timeout_s: 120
  repeats: 1
EOF
cat > "$WL/probe.cu" <<'EOF'
// probe.cu: a few hundred milliseconds of FMA work on one GPU; prints the
// PCI bus id of the GPU it ran on, checks its result, reports the time.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
// EVOLVE-BLOCK-START
#define CUCO_THREADS 256  // cuco:knob 128 256 512 1024
#define CUCO_STEP 1  // cuco:knob 1 2 4
// EVOLVE-BLOCK-END
__global__ void work(float *x, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  for (int k = 0; k < iters; k += CUCO_STEP)
#pragma unroll
    for (int s = 0; s < CUCO_STEP; s++) v = v * 0.999999f + 0.000001f;
  x[i] = v;
}
int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20, n = 132 * 2048;
  float *x; cudaMalloc(&x, n * sizeof(float)); cudaMemset(x, 0, n * sizeof(float));
  char bus[32]; int dev; cudaGetDevice(&dev); cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int r = 0; r < reps; r++) work<<<n / CUCO_THREADS, CUCO_THREADS>>>(x, 20000);
  cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  float h; cudaMemcpy(&h, x, sizeof h, cudaMemcpyDeviceToHost);
  int ok = cudaGetLastError() == cudaSuccess && h > 0.0f && h < 1.0f;
  printf("gpu %s CUDA_VISIBLE_DEVICES=%s\n", bus, getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
  printf(ok ? "Verification: PASS\n" : "Verification: FAIL value %f\n", h);
  printf("CUCO_RESULT {\"time_ms\": %.4f, \"iters\": %d}\n", ms / reps, reps);
  return ok ? 0 : 1;
}
EOF
START=$(date +%s)
EVALS=6
for mode in "1" "2" "2 --shared-bench"; do
  if [ $(( $(date +%s) - START )) -gt 110 ]; then note "stopping early: time budget"; break; fi
  set -- $mode
  tag="slots$1${2:+-shared}"
  t0=$(date +%s.%N)
  timeout 50 cuco evolve "$WL" --workspace "$WL/ws-$tag" --slots $mode --evaluations $EVALS \
    --fresh --json > "$OUT/slots-$tag.log" 2> "$OUT/slots-$tag.err"
  rc=$?
  t1=$(date +%s.%N)
  evals=$(grep -o '"evaluations":[0-9]*' "$OUT/slots-$tag.log" | tail -1 | cut -d: -f2)
  note "$tag: rc=$rc evaluations=${evals:-?}" \
       "$(awk -v a="$t0" -v b="$t1" -v n="${evals:-0}" 'BEGIN {printf "wall_s=%.1f per_min=%.1f", b - a, n * 60 / (b - a)}')"
  head -1 "$OUT/slots-$tag.err" >> "$SUMMARY"
done
rm -rf "$WL"
