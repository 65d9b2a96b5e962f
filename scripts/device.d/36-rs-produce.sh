#!/usr/bin/env bash
# scripts/device.d/36-rs-produce.sh: schedule producer_split on a
# reduce-scatter (cuco::reduce_scatter_ce over the producer's ranges), on
# tests/data/transform/seqpar_rs (a sequence-parallel row-parallel linear
# layer: cublasGemmEx in bf16, fp32 partials, ncclReduceScatter into a
# separate shard, a residual add; with -k a hand-written kernel declared
# rows_independent makes the partials instead).
# - tests/gpu/device_lib_test --small, DEVLIB_RUNS times (default 3): every
#   collective, rs_ce among them (whole, 3 ranges in place, 5 ranges at an
#   odd offset, every dtype), and the all-to-all whose ranks send different
#   amounts.
# - seqpar_rs: the seed, gen_0 (the GEMM's split off), the GEMM's split on
#   with 8, 4 and 2 ranges, and on with CUCO_PSPLIT_CE=0 (the reduce-scatter
#   then runs whole), each built, verified and timed by a confined cuco eval
#   --level 3 (3 repeats) at bench size; the builds first, in parallel.
# - gen_0 built by hand with -DCUCO_PSPLIT_MIN_BYTES=0 and both splits on,
#   run at 1 and RANKS ranks at the verify size, by cuBLAS and with -k, under
#   CUCO_TX_TRACE=1 (the ranges ran and the result verified).
# - rowpar_kernel's gen_0 (the all-reduce side of the same glue) at the
#   verify size under CUCO_TX_TRACE=1.
# - cuco bound on the seed (the gap; RS_BOUND=0 skips it).
# Results: $OUT/rs-produce.jsonl, $OUT/rs-devlib.txt, $OUT/rs-trace.txt,
# $OUT/rs-bound.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/knob-variant.sh
source scripts/device-eval.sh
step_start cuco-rs rs-produce
WL=tests/data/transform/seqpar_rs

nvcc -std=c++17 -arch=sm_90 -O3 -I"$NCCL_HOME/include" -Idevice -o "$T/device_lib_test" tests/gpu/device_lib_test.cu \
  -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lpthread > "$T/devlib.build.log" 2>&1 &
devlib_build=$!

"$CUCO" transform "$WL" --ranks "$RANKS" --workspace "$T/ws" --no-verify > "$OUT/rs-transform.log" 2>&1
g=$T/ws/gen_0/seqpar_rs.cu
[ -s "$g" ] || { tail -20 "$OUT/rs-transform.log"; exit 1; }
variants=("on8:CUCO_PSPLIT_1=1" "on4:CUCO_PSPLIT_1=1,CUCO_PSPLIT_PIECES=4" "on2:CUCO_PSPLIT_1=1,CUCO_PSPLIT_PIECES=2"
          "on8-noce:CUCO_PSPLIT_1=1,CUCO_PSPLIT_CE=0")
variants_build "$WL" rs "$g" "${variants[@]}"

wait $devlib_build 2>/dev/null
: > "$OUT/rs-devlib.txt"
for i in $(seq "${DEVLIB_RUNS:-3}"); do
  timeout -k 5 120 "$T/device_lib_test" --small > "$T/devlib.log" 2>&1
  echo "device_lib_test --small run $i rc=$? at $(nvidia-smi -L | wc -l) GPUs" >> "$OUT/rs-devlib.txt"
  grep -E "^FAIL|rs_ce|a2a|Verification" "$T/devlib.log" >> "$OUT/rs-devlib.txt"
  grep -q "Verification: PASS" "$T/devlib.log" || status=1
done

variants_time "$WL" rs "$g" "${variants[@]}"

: > "$OUT/rs-trace.txt"
knob_variant "$g" "$T/traced.cu" "CUCO_PSPLIT_0=1,CUCO_PSPLIT_1=1" || status=1
if nvcc -std=c++17 -arch=sm_90 -O1 -DCUCO_PSPLIT_MIN_BYTES=0 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
     -o "$T/traced" "$T/traced.cu" -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas $(mpicxx --showme:link) > "$T/traced.build.log" 2>&1; then
  for r in 1 "$RANKS"; do
    for mode in "" "-k"; do
      timeout -k 5 60 mpirun -np "$r" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        "$T/traced" -t 256 -o 96 -i 64 -n 3 $mode > "$T/traced.log" 2>&1
      echo "== ranks=$r ${mode:-cublas} (rc=$?)" >> "$OUT/rs-trace.txt"
      grep -E "split|Verification|CUCO_RESULT|error|fail|want" "$T/traced.log" | sort | uniq -c >> "$OUT/rs-trace.txt"
      grep -q "Verification: PASS" "$T/traced.log" || status=1
    done
  done
else
  tail -20 "$T/traced.build.log" >> "$OUT/rs-trace.txt"
  status=1
fi
# the all-reduce side of the same glue: rowpar_kernel's gen_0 (its kernel's
# producer split on), built with -DCUCO_PSPLIT_MIN_BYTES=0, at RANKS ranks
"$CUCO" transform tests/data/transform/rowpar_kernel --ranks "$RANKS" --workspace "$T/ws-rk" --no-verify > "$T/rk.log" 2>&1
if nvcc -std=c++17 -arch=sm_90 -O1 -DCUCO_PSPLIT_MIN_BYTES=0 -Idevice -I"$NCCL_HOME/include" $(mpicxx --showme:compile) \
     -o "$T/rk" "$T/ws-rk/gen_0/rowpar_kernel.cu" -L"$NCCL_HOME/lib" -l:libnccl.so.2 $(mpicxx --showme:link) > "$T/rk.build.log" 2>&1; then
  timeout -k 5 60 mpirun -np "$RANKS" --allow-run-as-root -x CUCO_TX_TRACE=1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    "$T/rk" --rows 100 --din 48 --dout 96 --iters 2 > "$T/rk.run.log" 2>&1
  echo "== rowpar_kernel gen_0 ranks=$RANKS (rc=$?)" >> "$OUT/rs-trace.txt"
  grep -E "split|Verification|error|fail" "$T/rk.run.log" | sort | uniq -c >> "$OUT/rs-trace.txt"
  grep -q "Verification: PASS" "$T/rk.run.log" || status=1
else
  tail -20 "$T/rk.build.log" >> "$OUT/rs-trace.txt"
  status=1
fi
[ "${RS_BOUND:-1}" = 0 ] || timeout -k 5 150 "$CUCO" bound "$WL" --ranks "$RANKS" --workspace "$T/bound" --json \
  > "$OUT/rs-bound.json" 2> "$OUT/rs-bound.err" || status=1
cat "$OUT/rs-devlib.txt" "$OUT/rs-trace.txt"
grep -c '"status": *"ok"' "$LOG"
exit $status
