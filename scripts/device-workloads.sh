# scripts/device-workloads.sh: what scripts/device.d/30-workloads-a.sh and
# 31-workloads-b.sh share (sourced, not run): environment, build of a
# workload source or a sed-edited variant of it, and a timed 2-rank run with
# the Verification and CUCO_RESULT lines collected in $SUMMARY.
# The caller sets WL_TAG (names the build folder and the summary file),
# BUDGET_S (no run starts after it) and RUN_TIMEOUT_S (cap of each run);
# WL_RANKS (default 2) is the rank count of every run.
set -uo pipefail
: "${OUT:=/tmp/cuco-gpu-out}"
: "${NCCL_HOME:=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}"
mkdir -p "$OUT"
WL_RANKS=${WL_RANKS:-2}
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0
BUILD=$(mktemp -d "/tmp/cuco-$WL_TAG.XXXXXX")
SUMMARY=$OUT/$WL_TAG-summary.txt
START=$(date +%s)
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

# run NAME LEVEL ARGS...: mpirun on WL_RANKS ranks, full output in $OUT/NAME-LEVEL.log
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
  timeout -k 5 "$RUN_TIMEOUT_S" mpirun -np "${WL_RANKS:-2}" --allow-run-as-root --bind-to none \
    -x LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}" -x NCCL_NVLS_ENABLE=0 \
    "$BUILD/$name" "$@" > "$OUT/$name-$level.log" 2>&1
  local rc=$?
  note "run $name $level: rc=$rc in $(( $(date +%s) - t0 )) s $*"
  grep -E '^(Verification|CUCO_RESULT)' "$OUT/$name-$level.log" | sed 's/^/  /' | tee -a "$SUMMARY"
}

