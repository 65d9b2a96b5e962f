#!/bin/bash
# GPU correctness test of the device library: builds tests/gpu/device_lib_test.cu
# against NCCL and runs it on all visible GPUs (one thread per GPU). Sizes
# up to 1 MiB by default; CUCO_DEVICE_FULL=1 runs the full sizes (to 1 GiB).
# Skips (77) when nvidia-smi finds no GPU, or with fewer than 2 GPUs.
set -u
source "$(dirname "$0")/gpu_env.sh"
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
