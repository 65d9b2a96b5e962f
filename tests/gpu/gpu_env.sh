# gpu_env.sh: sourced by the GPU tests (tests/gpu/test_*.sh). Skips (exit
# 77) without a GPU or nvcc; otherwise sets NVCC, SRC (the source tree), INC
# and LIB (NCCL's device-API headers and library: $NCCL_HOME, else the CUDA
# toolkit's), puts NCCL's library on LD_LIBRARY_PATH and keeps NVLink
# multicast off. Fails (exit 1) when no NCCL device headers are found.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU found by nvidia-smi"; exit 77
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || { echo "SKIP: nvcc not found"; exit 77; }
SRC=${CUCO_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
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
