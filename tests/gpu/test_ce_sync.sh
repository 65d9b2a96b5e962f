#!/bin/bash
# GPU test of the copy-engine rendezvous (device/ce.cuh): builds
# tests/gpu/ce_sync_test.cu against NCCL and runs it on one GPU: ordering
# between two simulated ranks, completion while a kernel holds every SM, and
# the copy-engine all-gather / all-to-all at 1 rank. Skips (77) without a GPU.
set -u
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU found by nvidia-smi"; exit 77
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || { echo "SKIP: nvcc not found"; exit 77; }
SRC=${CUCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
INC="" LIB=()
if [ -n "${NCCL_HOME:-}" ] && [ -f "$NCCL_HOME/include/nccl_device.h" ]; then
  INC=$NCCL_HOME/include
  LIB=(-L"$NCCL_HOME/lib" -l:libnccl.so.2)
  export LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}"
elif [ -f /usr/local/cuda/include/nccl_device.h ]; then
  INC=/usr/local/cuda/include
  LIB=(-lnccl)
else
  echo "FAIL: NCCL device headers not found (set NCCL_HOME)"; exit 1
fi
export NCCL_NVLS_ENABLE=0
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/cesync.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$NVCC" -std=c++17 -arch=sm_90 -O2 -I"$INC" -I"$SRC/device" -o "$T/ce_sync_test" \
  "$SRC/tests/gpu/ce_sync_test.cu" "${LIB[@]}" || { echo "FAIL: build"; exit 1; }
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout 120 "$T/ce_sync_test"
