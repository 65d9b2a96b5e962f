#!/bin/bash
# GPU test of the copy-engine rendezvous (device/ce.cuh): builds
# tests/gpu/ce_sync_test.cu against NCCL and runs it on one GPU: ordering
# between two simulated ranks, completion while a kernel holds every SM, and
# the copy-engine all-gather / all-to-all at 1 rank. Skips (77) without a GPU.
set -u
source "$(dirname "$0")/gpu_env.sh"
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/cesync.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$NVCC" -std=c++17 -arch=sm_90 -O2 -I"$INC" -I"$SRC/device" -o "$T/ce_sync_test" \
  "$SRC/tests/gpu/ce_sync_test.cu" "${LIB[@]}" || { echo "FAIL: build"; exit 1; }
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout 120 "$T/ce_sync_test"
