#!/bin/bash
# GPU run of the device library (device/): builds its correctness test and
# the collectives benchmark against NCCL 2.28.9, runs the test (full sizes,
# one thread per GPU), the benchmark, and the test under compute-sanitizer
# memcheck and racecheck (tiny sizes, one process per rank). Writes at most
# eight files under $OUT/device-lib/ (summary.txt, build.log, test.log,
# bench.log, sanitizer.log, and the JSON results).
#   MODE=default  benchmark with the library defaults (bench_default.json)
#   MODE=sweep    parameter sweeps: CTAs x threads x unroll, and chunk size
# Runs from the repository root on the GPU machine; stays under 3 minutes.
set -u
MODE=${MODE:-default}
OUT=${OUT:-/tmp/out}
O="$OUT/device-lib"
mkdir -p "$O"
NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
export LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
B=$(mktemp -d /tmp/devlib-XXXXXX)
FLAGS=(-std=c++17 -arch=sm_90 -O3 -lineinfo -I"$NCCL_HOME/include" -Idevice)
LIBS=(-L"$NCCL_HOME/lib" -l:libnccl.so.2 -lpthread)
start=$(date +%s)
# seconds after start by which everything must be done (lead batches: < 3 min)
if [ "$MODE" = sweep ]; then DEADLINE=${DEADLINE:-225}; else DEADLINE=${DEADLINE:-170}; fi
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$O/summary.txt"; }
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
lim() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

{ nvidia-smi -L; nvidia-smi topo -m; } > "$O/build.log" 2>&1
nvcc "${FLAGS[@]}" -o "$B/device_lib_test" tests/gpu/device_lib_test.cu "${LIBS[@]}" > "$B/bt.log" 2>&1 &
p1=$!
nvcc "${FLAGS[@]}" -o "$B/collectives_bench" bench/collectives/collectives_bench.cu "${LIBS[@]}" > "$B/bb.log" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
cat "$B/bt.log" "$B/bb.log" >> "$O/build.log"
log "build test rc=$r1 bench rc=$r2"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -40 "$O/build.log"; exit 1; }

rc=0
timeout "$(lim 75)" "$B/device_lib_test" > "$O/test.log" 2>&1; t=$?
log "device_lib_test full rc=$t ($(grep -c '^ok' "$O/test.log") ok lines, $(grep -c '^FAIL' "$O/test.log") FAIL lines; $(tail -1 "$O/test.log"))"
[ $t -eq 0 ] || rc=1

bench() {  # bench SECONDS NAME ARGS...
  local s=$1 name=$2; shift 2
  echo "== $name: $*" >> "$O/bench.log"
  timeout "$(lim "$s")" "$B/collectives_bench" --out "$O/$name.json" "$@" >> "$O/bench.log" 2>&1; local t=$?
  log "bench $name rc=$t"
  [ $t -eq 0 ] || rc=1
}
if [ "$MODE" = sweep ]; then
  bench 55 sweep_coll --ops ag,rs,ar --min 4096 --max $((1<<30)) \
    --ctas 4,8,16,32,64,96,128 --threads 256,512,1024 --unroll 2,4,8 --iters 10 --warmup 2
  bench 25 sweep_a2a_put --ops a2a,put --max $((1<<30)) \
    --ctas 16,32,64,96,128 --threads 256,512,1024 --unroll 2,4,8 --iters 10 --warmup 2
  bench 15 sweep_chunk --ops ag,rs,ar --min $((16<<20)) --max $((1<<28)) \
    --ctas 64,128 --threads 512 --unroll 4 --chunk 0,65536,1048576 --iters 10 --warmup 2
else
  bench 50 bench_default
fi
grep -v '^progress' "$O/bench.log" | tail -60

CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  l=$(lim 30)
  [ "$l" -gt 5 ] || { log "compute-sanitizer $tool skipped: no time left"; continue; }
  echo "== $tool" >> "$O/sanitizer.log"
  timeout "$l" "$CS" --tool $tool --error-exitcode 9 --report-api-errors no --target-processes all \
    "$B/device_lib_test" --tiny --procs >> "$O/sanitizer.log" 2>&1; t=$?
  log "compute-sanitizer $tool (tiny, one process per rank) rc=$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Verification' "$O/sanitizer.log" | tail -3 | tr '\n' ' ')"
done

rm -rf "$B"
log "done rc=$rc"
exit $rc
