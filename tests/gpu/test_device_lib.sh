#!/bin/bash
# GPU correctness test of the device library: builds tests/gpu/device_lib_test.cu
# against NCCL and runs it on all visible GPUs (one thread per GPU). Sizes
# up to 1 MiB by default; CUCO_DEVICE_FULL=1 runs the full sizes (to 1 GiB).
# Skips (77) when nvidia-smi finds no GPU, or with fewer than 2 GPUs.
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
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/devlib.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$NVCC" -std=c++17 -arch=sm_90 -O3 -I"$INC" -I"$SRC/device" -o "$T/device_lib_test" \
  "$SRC/tests/gpu/device_lib_test.cu" "${LIB[@]}" -lpthread || { echo "FAIL: build"; exit 1; }
ARGS=(--small)
[ "${CUCO_DEVICE_FULL:-0}" = 1 ] && ARGS=()
timeout 300 "$T/device_lib_test" "${ARGS[@]}"
rc=$?
[ $rc -eq 77 ] && { echo "SKIP: fewer than 2 GPUs"; exit 77; }
exit $rc
