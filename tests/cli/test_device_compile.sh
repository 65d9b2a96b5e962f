#!/bin/bash
# Compiles every header of the device library (device/*.cuh, each on its own)
# and the GPU test and benchmark programs with nvcc -arch=sm_90 against the
# local NCCL headers; fails on any error or warning. Needs no GPU; skips only
# when nvcc is absent.
set -u
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -z "$NVCC" ]; then echo "SKIP: nvcc not found"; exit 77; fi
SRC=${CUCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
INC=""
for d in ${NCCL_HOME:+$NCCL_HOME/include} /usr/local/cuda/include; do
  if [ -f "$d/nccl_device.h" ]; then INC=$d; break; fi
done
if [ -z "$INC" ]; then echo "FAIL: no nccl_device.h in \$NCCL_HOME/include or /usr/local/cuda/include"; exit 1; fi
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/devcompile.XXXXXX")
trap 'rm -rf "$T"' EXIT
# -Xptxas -O0: the check is about the source; device optimization only costs time.
FLAGS=(-std=c++17 -arch=sm_90 -isystem "$INC" -I"$SRC/device" -Werror all-warnings
       -Xcompiler -Wall,-Wextra,-Werror -Xptxas -O0)

jobs_=()
names=()
compile() {  # compile NAME FILE: in the background (2 at a time), log to $T/NAME.log
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 0.2; done
  "$NVCC" "${FLAGS[@]}" -c "$2" -o "$T/$1.o" > "$T/$1.log" 2>&1 &
  jobs_+=($!); names+=("$1")
}
for h in "$SRC"/device/*.cuh; do
  b=$(basename "$h" .cuh)
  printf '#include "%s"\n#include "%s"\n' "$b.cuh" "$b.cuh" > "$T/hdr_$b.cu"  # twice: include guards
  compile "hdr_$b" "$T/hdr_$b.cu"
done
compile device_lib_test "$SRC/tests/gpu/device_lib_test.cu"
compile collectives_bench "$SRC/bench/collectives/collectives_bench.cu"
compile overlap_bench "$SRC/bench/overlap/overlap_bench.cu"
compile window_read "$SRC/bench/overlap/window_read.cu"
compile write_then_read "$SRC/bench/overlap/write_then_read.cu"
compile ce_sync_test "$SRC/tests/gpu/ce_sync_test.cu"

# An illegal design-space combination must be rejected at compile time.
cat > "$T/illegal.cu" <<'CU'
#include "policy.cuh"
cuco::Policy<ncclCoopThread, cuco::Sync::Lsa> p;
CU
while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 0.2; done
"$NVCC" "${FLAGS[@]}" -c "$T/illegal.cu" -o "$T/illegal.o" > "$T/illegal.log" 2>&1
illegal_rc=$?

fail=0
if [ $illegal_rc -eq 0 ] || ! grep -q "an LSA barrier per thread is not supported" "$T/illegal.log"; then
  echo "FAIL: Policy<ncclCoopThread, Sync::Lsa> compiled or failed for another reason"; cat "$T/illegal.log"; fail=1
else
  echo "ok   illegal policy rejected"
fi
for i in "${!jobs_[@]}"; do
  if ! wait "${jobs_[$i]}"; then echo "FAIL: ${names[$i]}"; cat "$T/${names[$i]}.log"; fail=1
  elif [ -s "$T/${names[$i]}.log" ]; then echo "FAIL (output): ${names[$i]}"; cat "$T/${names[$i]}.log"; fail=1
  else echo "ok   ${names[$i]}"; fi
done
exit $fail
