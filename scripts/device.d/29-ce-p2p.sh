#!/usr/bin/env bash
# scripts/device.d/29-ce-p2p.sh: point-to-point by the copy engine
# (CUCO_P2P_CE) against the other transports, at CE_RANKS ranks (default 2).
# For each workload of CE_WORKLOADS (folder names under workloads/, or paths
# to workload folders): 'cuco transform --no-verify', then the seed, the
# expert program (when there is one) and gen_0 with each value of CE_KNOB in
# CE_VALUES (default CUCO_P2P_CE, "0 1"; CE_FIXED: further KNOB=VALUE
# settings of every variant; CE_BASELINES=0 leaves out the seed and the
# expert) are built with nvcc, run once at the
# manifest's verification arguments (rc and the program's verdict), gen_0
# once more with CUCO_TX_TRACE=1 (how many sends the copy engine carried), then
# timed at its bench arguments in CE_ROUNDS interleaved rounds (default 3).
# Writes $OUT/ce/<workload>.txt: lines "verify NAME RC VERDICT", "ce_sends
# NAME N", "time ROUND NAME MS VERDICT" and "result ROUND NAME JSON".
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
RANKS=${CE_RANKS:-2}
ROUNDS=${CE_ROUNDS:-3}
KNOB=${CE_KNOB:-CUCO_P2P_CE}
VALUES=${CE_VALUES:-0 1}
DEST=$OUT/ce
mkdir -p "$DEST"
NCCL_HOME=${NCCL_HOME:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
WS=$(mktemp -d /tmp/cuco-ce.XXXXXX)
source scripts/knob-variant.sh
source scripts/workload-args.sh

build() { # $1 source, $2 binary
  nvcc -std=c++17 -arch=sm_90 -O3 -Iworkloads/common -Idevice -I"$NCCL_HOME/include" \
    $(mpicxx --showme:compile) -o "$2" "$1" -L"$NCCL_HOME/lib" -l:libnccl.so.2 -lcublas -lcublasLt \
    $(mpicxx --showme:link) > "$2.build.log" 2>&1
}
run() { # $1 binary, then its arguments; stdout and stderr of every rank
  local bin=$1
  shift
  timeout -k 5 ${CE_RUN_TIMEOUT:-100} mpirun -np "$RANKS" -x CUCO_TX_TRACE -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH \
    "$bin" "$@" 2>&1
}
verdict() { # the program's verdict from its output on stdin
  grep -oE '"verified": *(true|false)|Verification: (PASS|FAIL)' | head -1 | tr -d ' "'
}

for spec in ${CE_WORKLOADS:-kv_transfer}; do
  W=workloads/$spec
  case "$spec" in */*) W=$spec ;; esac
  name=$(basename "$W")
  report=$DEST/$name.txt
  : > "$report"
  timeout 120 cuco transform "$W" --workspace "$WS/$name" --no-verify > "$DEST/$name-transform.txt" 2>&1
  gen=$(ls "$WS/$name"/gen_0/"$name".c* 2>/dev/null | head -1)
  [ -n "$gen" ] || { echo "$name: no gen_0" | tee -a "$report"; continue; }
  src=$(ls "$W/$name".c* | head -1)
  wanted=()
  if [ "${CE_BASELINES:-1}" != 0 ]; then
    cp "$src" "$WS/$name-seed.cu"
    wanted+=(seed)
    [ -f "$W/expert.cu" ] && cp "$W/expert.cu" "$WS/$name-expert.cu" && wanted+=(expert)
  fi
  fixed=$(echo ${CE_FIXED:-} | tr ' ' ,)  # KNOB=VALUE settings every gen_0 variant gets
  for v in $VALUES; do
    knob_variant "$gen" "$WS/$name-gen_0-$v.cu" "${fixed:+$fixed,}$KNOB=$v" 2>> "$report" &&
      wanted+=("gen_0-$v")
  done
  for p in "${wanted[@]}"; do build "$WS/$name-$p.cu" "$WS/$name-$p" & done
  wait
  progs=()
  for p in "${wanted[@]}"; do
    [ -x "$WS/$name-$p" ] && progs+=("$p") ||
      { echo "$name: $p build failed" >> "$report"; tail -5 "$WS/$name-$p.build.log" >> "$report"; }
  done
  read -ra vargs <<< "$(args_of "$W" verify)"
  read -ra bargs <<< "$(args_of "$W" bench)"
  for p in "${progs[@]}"; do
    out=$(CUCO_TX_TRACE=0 run "$WS/$name-$p" "${vargs[@]}")
    rc=$?
    echo "verify $p $rc $(echo "$out" | verdict)" >> "$report"
    [ $rc = 0 ] || echo "$out" | tail -8 > "$DEST/$name-$p-verify.log"
    case "$p" in gen_0*)
      n=$(CUCO_TX_TRACE=1 run "$WS/$name-$p" "${vargs[@]}" | grep -c "by the copy engine")
      echo "ce_sends $p $n" >> "$report" ;;
    esac
  done
  for r in $(seq "$ROUNDS"); do
    for p in "${progs[@]}"; do
      out=$(CUCO_TX_TRACE=0 run "$WS/$name-$p" "${bargs[@]}")
      res=$(echo "$out" | grep -m1 '^CUCO_RESULT')
      ms=$(echo "$res" | grep -oE '"time_ms": *[0-9.]+' | grep -oE '[0-9.]+$')
      echo "time $r $p ${ms:-none} $(echo "$out" | verdict)" >> "$report"
      echo "result $r $p ${res#CUCO_RESULT }" >> "$report"
    done
  done
  cat "$report"
done
rm -rf "$WS"
