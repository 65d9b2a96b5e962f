#!/usr/bin/env bash
# scripts/device.d/35-ar-ce.sh: the copy-engine all-reduce (cuco::all_reduce_ce,
# glue knob CUCO_AR_CE_FROM) alone and under schedule producer_split, at 2
# ranks (1 where the machine has one GPU: it then checks only that nothing
# breaks, since one rank moves nothing).
# - tests/gpu/device_lib_test --small: all_reduce_ce in place, every dtype,
#   sizes from 2 elements up, an odd offset (the kernel's one-element path).
# - tests/data/transform/rowpar_kernel (a row-parallel kernel, then an
#   in-place ncclAllReduce of 128 MiB, two layers a step; gen_0 has the
#   kernel's producer split on, 4 ranges reduced by the copy engines) and
#   rowpar_linear (cublasSgemm, then an in-place all-reduce of 32 MiB; its
#   GEMM's split off in gen_0): the seed, gen_0 and variants (split off;
#   copy engine without the split; the split's ranges by the SM all-reduce;
#   2 and 8 ranges), each built, verified and timed by a confined cuco eval
#   --level 3 (3 repeats) at bench size; the builds first, in parallel.
# - rowpar_kernel's gen_0 built by hand, run once at its verify size with
#   CUCO_TX_TRACE=1 (the split ran).
# - cuco bound on rowpar_kernel's seed (the gap).
# - rowpar_kernel's seed, gen_0 and gen_0 with the split off at 1 rank too
#   (gen_0 runs the kernel whole there after its first all-reduce).
# AR_CE_QUICK=1: rowpar_kernel only (no device_lib_test, rowpar_linear or
# bound); 2: of rowpar_kernel only the seed, gen_0 and 4 ranges.
# Results: $OUT/ar-ce.jsonl (cuco eval JSON per line, named),
# $OUT/ar-ce-devlib.txt, $OUT/ar-ce-trace.txt, $OUT/ar-ce-bound.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
source scripts/device-eval.sh
step_start cuco-arce ar-ce

nvcc -std=c++17 -arch=sm_90 -O3 -I"$NCCL_HOME/include" -Idevice -o "$T/device_lib_test" tests/gpu/device_lib_test.cu \
  -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lpthread > "$T/devlib.build.log" 2>&1 &
devlib_build=$!

evaluate() { eval_named "$1" "$2" "$3" "$RANKS" 150 ar-ce "${@:4}"; } # WORKLOAD NAME LEVEL [PROGRAM FROZEN]

# NAME:KNOBS for each program (gen_0 itself has no knobs set)
QUICK=${AR_CE_QUICK:-0}
rk_variants=("split0:CUCO_PSPLIT_0=0" "ce-whole:CUCO_PSPLIT_0=0,CUCO_AR_CE_FROM=1048576"
             "psplit4-sm:CUCO_PSPLIT_CE=0" "psplit2:CUCO_PSPLIT_PIECES=2" "psplit8:CUCO_PSPLIT_PIECES=8")
[ "$QUICK" = 2 ] && rk_variants=("psplit4:CUCO_PSPLIT_PIECES=4")
rl_variants=("ce-whole:CUCO_AR_CE_FROM=1048576" "psplit4:CUCO_PSPLIT_0=1")
declare -A programs=([rk]=rowpar_kernel [rl]=rowpar_linear)
keys="rk rl"
[ "$QUICK" != 0 ] && keys=rk
for key in $keys; do
  name=${programs[$key]}
  "$CUCO" transform "tests/data/transform/$name" --ranks "$RANKS" --workspace "$T/ws-$name" --no-verify \
    > "$OUT/ar-ce-transform-$name.log" 2>&1
  [ -s "$T/ws-$name/gen_0/$name.cu" ] || { echo "no gen_0 for $name"; status=1; continue; }
  eval 'vs=("${'"$key"'_variants[@]}")'
  for v in "${vs[@]}"; do
    knob_variant "$T/ws-$name/gen_0/$name.cu" "$T/$key-${v%%:*}.cu" "${v#*:}" || status=1
  done
done
# every build at once (level 1 fills the build cache), then the timed runs one by one
for key in $keys; do
  name=${programs[$key]} g=$T/ws-${programs[$key]}/gen_0/${programs[$key]}.cu
  [ -s "$g" ] || continue
  evaluate "tests/data/transform/$name" "$key-gen0" 1 "$g" "$g" &
  eval 'vs=("${'"$key"'_variants[@]}")'
  for v in "${vs[@]}"; do evaluate "tests/data/transform/$name" "$key-${v%%:*}" 1 "$T/$key-${v%%:*}.cu" "$g" & done
done
wait

wait $devlib_build 2>/dev/null
if [ "$QUICK" != 0 ]; then
  echo "device_lib_test not run (AR_CE_QUICK=$QUICK)" > "$OUT/ar-ce-devlib.txt"
elif [ -x "$T/device_lib_test" ]; then
  timeout -k 5 150 "$T/device_lib_test" --small > "$T/devlib.log" 2>&1
  echo "device_lib_test --small rc=$? at $(nvidia-smi -L | wc -l) GPUs" > "$OUT/ar-ce-devlib.txt"
  grep -E "all_reduce_ce|^FAIL|Verification" "$T/devlib.log" >> "$OUT/ar-ce-devlib.txt"
  grep -q "Verification: PASS" "$T/devlib.log" || status=1
else
  tail -20 "$T/devlib.build.log" > "$OUT/ar-ce-devlib.txt"
  status=1
fi

for key in $keys; do
  name=${programs[$key]} g=$T/ws-${programs[$key]}/gen_0/${programs[$key]}.cu
  [ -s "$g" ] || continue
  evaluate "tests/data/transform/$name" "$key-seed" 3
  evaluate "tests/data/transform/$name" "$key-gen0" 3 "$g" "$g"
  eval 'vs=("${'"$key"'_variants[@]}")'
  for v in "${vs[@]}"; do evaluate "tests/data/transform/$name" "$key-${v%%:*}" 3 "$T/$key-${v%%:*}.cu" "$g"; done
done

: > "$OUT/ar-ce-trace.txt"
if [ -s "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu" ]; then
  nvcc -std=c++17 -arch=sm_90 -O1 -DCUCO_PSPLIT_MIN_BYTES=0 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) -o "$T/traced" \
    "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu" -L"$NCCL_HOME/lib" -l:libnccl.so.2 $(mpicxx --showme:link) > "$T/traced.build.log" 2>&1 \
    && timeout -k 5 60 mpirun -np "$RANKS" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
      "$T/traced" --rows 100 --din 48 --dout 96 --iters 1 > "$T/traced.log" 2>&1
  echo "== rowpar_kernel gen_0 (rc=$?)" >> "$OUT/ar-ce-trace.txt"
  grep -E "split|Verification|CUCO_RESULT|error|fail" "$T/traced.log" | sort | uniq -c >> "$OUT/ar-ce-trace.txt"
fi
if [ "$RANKS" -gt 1 ] && [ -s "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu" ]; then
  RANKS=1
  evaluate tests/data/transform/rowpar_kernel rk-seed-1rank 3
  evaluate tests/data/transform/rowpar_kernel rk-gen0-1rank 3 "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu" "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu"
  [ -s "$T/rk-split0.cu" ] && evaluate tests/data/transform/rowpar_kernel rk-split0-1rank 3 "$T/rk-split0.cu" "$T/ws-rowpar_kernel/gen_0/rowpar_kernel.cu"
  RANKS=2
fi
[ "$QUICK" != 0 ] || timeout -k 5 150 "$CUCO" bound tests/data/transform/rowpar_kernel --ranks "$RANKS" --workspace "$T/bound" --json \
  > "$OUT/ar-ce-bound.json" 2> "$OUT/ar-ce-bound.err" || status=1
cat "$OUT/ar-ce-devlib.txt" "$OUT/ar-ce-trace.txt"
grep -c '"status": *"ok"' "$LOG"
exit $status
