#!/usr/bin/env bash
# scripts/device.d/30-workloads-a.sh: on the 2-GPU machine, build and run the
# gemm_allgather and kv_transfer workloads: the seed at verify and bench size,
# one pipelined knob setting of each at verify and bench size, and a negative
# control of each (communication removed) that must fail verification.
# Needs only nvcc, MPI and NCCL 2.28.9 (NCCL_HOME); logs go to $OUT/, with a
# summary of the Verification and CUCO_RESULT lines in
# $OUT/workloads-a-summary.txt. Runs from the repository root.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
: "${NCCL_HOME:=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}"
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0
BUILD=$(mktemp -d /tmp/cuco-wla.XXXXXX)
SUMMARY=$OUT/workloads-a-summary.txt
START=$(date +%s)
BUDGET_S=130
: > "$SUMMARY"

MPICC=mpicc
command -v mpicc >/dev/null 2>&1 || MPICC=mpicxx
read -r -a MPI_COMPILE <<< "$($MPICC --showme:compile)"
read -r -a MPI_LINK <<< "$($MPICC --showme:link)"

note() { echo "$*" | tee -a "$SUMMARY"; }

# build NAME SOURCE: compile SOURCE into $BUILD/NAME, log in $OUT/NAME-build.log
build() {
  local name=$1 src=$2
  nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -Idevice -I"$NCCL_HOME/include" \
    "${MPI_COMPILE[@]}" -o "$BUILD/$name" "$src" -L"$NCCL_HOME/lib" -l:libnccl.so.2 \
    -lcublas -lcublasLt "${MPI_LINK[@]}" > "$OUT/$name-build.log" 2>&1
  local rc=$?
  note "build $name: rc=$rc"
  return $rc
}

# variant NAME SOURCE SED-EXPR: a copy of SOURCE edited by sed, in $BUILD
variant() {
  local name=$1 src=$2 expr=$3
  sed -e "$expr" "$src" > "$BUILD/$name.cu"
  if cmp -s "$src" "$BUILD/$name.cu"; then
    note "variant $name: the edit did not apply"
    return 1
  fi
  build "$name" "$BUILD/$name.cu"
}

# run NAME LEVEL ARGS...: mpirun on 2 ranks, full output in $OUT/NAME-LEVEL.log
run() {
  local name=$1 level=$2
  shift 2
  if [ $(( $(date +%s) - START )) -gt $BUDGET_S ]; then
    note "run $name $level: skipped (time budget spent)"
    return 0
  fi
  if [ ! -x "$BUILD/$name" ]; then
    note "run $name $level: skipped (no binary)"
    return 0
  fi
  local t0=$(date +%s)
  timeout -k 5 45 mpirun -np 2 --allow-run-as-root --bind-to none \
    -x LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}" -x NCCL_NVLS_ENABLE=0 \
    "$BUILD/$name" "$@" > "$OUT/$name-$level.log" 2>&1
  local rc=$?
  note "run $name $level: rc=$rc in $(( $(date +%s) - t0 )) s $*"
  grep -E '^(Verification|CUCO_RESULT)' "$OUT/$name-$level.log" | sed 's/^/  /' | tee -a "$SUMMARY"
}

GA=workloads/gemm_allgather/gemm_allgather.cu
KV=workloads/kv_transfer/kv_transfer.cu
GA_VERIFY=(--m 512 --k 1024 --n 1024 --warmup 1 --iters 3)
GA_BENCH=(--m 8192 --k 28672 --n 8192 --warmup 5 --iters 20)
KV_VERIFY=(--seq 1000 --layers 8 --warmup 1 --iters 3)
KV_BENCH=(--seq 8192 --layers 32 --warmup 3 --iters 10)

note "date: $(date -u +%FT%TZ) NCCL_HOME=$NCCL_HOME"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# builds in parallel: they are independent and the machine has 16 cores
build gemm_allgather "$GA" &
build kv_transfer "$KV" &
variant gemm_allgather_chunks4 "$GA" 's/^#define CUCO_AG_CHUNKS 1 /#define CUCO_AG_CHUNKS 4 /' &
variant kv_transfer_every4 "$KV" 's/^#define CUCO_SEND_EVERY_LAYERS 0 /#define CUCO_SEND_EVERY_LAYERS 4 /' &
# negative controls: the collectives never run, so verification must fail
variant gemm_allgather_nocomm "$GA" 's/if (parts & PART_COMM)$/if (false)/' &
variant kv_transfer_nocomm "$KV" 's/if (parts & PART_TRANSFER)$/if (false)/' &
wait
note "builds done in $(( $(date +%s) - START )) s"

run gemm_allgather verify "${GA_VERIFY[@]}"
run kv_transfer verify "${KV_VERIFY[@]}"
run gemm_allgather bench "${GA_BENCH[@]}"
run kv_transfer bench "${KV_BENCH[@]}"
run gemm_allgather_chunks4 verify "${GA_VERIFY[@]}"
run kv_transfer_every4 verify "${KV_VERIFY[@]}"
run gemm_allgather_chunks4 bench "${GA_BENCH[@]}"
run kv_transfer_every4 bench "${KV_BENCH[@]}"
run gemm_allgather_nocomm verify "${GA_VERIFY[@]}"
run kv_transfer_nocomm verify "${KV_VERIFY[@]}"

note "total $(( $(date +%s) - START )) s"
rm -rf "$BUILD"
# success means: the seeds and knob variants verified, the controls did not
status=0
for n in gemm_allgather-verify kv_transfer-verify gemm_allgather-bench kv_transfer-bench \
         gemm_allgather_chunks4-verify kv_transfer_every4-verify; do
  grep -q '^Verification: PASS' "$OUT/$n.log" 2>/dev/null || { note "expected PASS: $n"; status=1; }
done
for n in gemm_allgather_nocomm-verify kv_transfer_nocomm-verify; do
  grep -q '^Verification: FAIL' "$OUT/$n.log" 2>/dev/null || { note "expected FAIL: $n"; status=1; }
done
exit $status
