#!/usr/bin/env bash
# scripts/device.d/41-transport-probe.sh: where does a test program's gen_0
# lose time against its seed? PROBE_PROGRAMS names programs of
# tests/data/transform, or program folders such as bench/probe/ps_spin
# (default: alltoall_pack jacobi_halo). Each is
# transformed ('cuco transform --no-verify'); its seed, gen_0 and the
# variants below are built with nvcc as the manifest builds them, then run
# directly by mpirun at RANKS ranks with the manifest's bench arguments (or
# PROBE_ARGS_<program> in their place, e.g. more iterations; several sets
# separated by ';' are run one after another, each named PROGRAM[ARGS]),
# PROBE_ROUNDS rounds (default 5), the variants interleaved within each
# round; each run's CUCO_RESULT line and whether it printed a PASS line are
# kept (the summary counts the runs that did: "verified").
# Variants: seed; gen0; gen0 with NCCL_LOCAL_REGISTER=1 (the glue sets it to
# 0 unless the job sets it); gen0 with CUCO_P2P_NCCL_FROM=0 (every send and
# receive on the device); gen0 with CUCO_COPY_ENGINE=1; the seed with
# NCCL_LOCAL_REGISTER=0 (is the setting itself the cost?) (PROBE_BASIC=0:
# only seed and gen0 of these); and gen0 with the
# knobs of each PROBE_VARIANTS entry set ("NAME:K=V[,K=V...]", space
# separated, e.g. "nosplit:CUCO_SPLIT_0=0").
# One run of gen0 with CUCO_TX_TRACE=1 shows the paths taken.
# Results: $OUT/transport-probe.jsonl (one line a run) and
# $OUT/transport-probe.txt (median ms a variant, min, max).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
source scripts/device-eval.sh
source scripts/knob-variant.sh
step_start cuco-probe transport-probe
run_one() { # PROGRAM VARIANT BINARY ENV...
  local p=$1 v=$2 bin=$3
  shift 3
  local out
  out=$(env "$@" timeout -k 5 120 mpirun -np "$RANKS" --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    $(for e in "$@"; do printf -- '-x %s ' "${e%%=*}"; done) "$bin" $ARGS 2>&1)
  local ms ok result
  ms=$(echo "$out" | sed -n 's/.*CUCO_RESULT {"time_ms": *\([0-9.e+-]*\).*/\1/p' | head -1)
  result=$(echo "$out" | sed -n 's/.*CUCO_RESULT \({.*}\).*/\1/p' | tail -1)
  ok=$(echo "$out" | grep -c "PASS")
  echo "{\"program\":\"$p\",\"variant\":\"$v\",\"time_ms\":${ms:-null},\"pass_lines\":$ok,\"result\":${result:-null}}" >> "$LOG"
  [ -n "$ms" ] || echo "$p $v: no time: $(echo "$out" | tail -3 | tr '\n' ' ')"
}
for p in ${PROBE_PROGRAMS:-alltoall_pack jacobi_halo}; do
  if [ -d "$p" ]; then d=$p; p=$(basename "$p"); else d=tests/data/transform/$p; fi
  f=$(sed -n 's/^evolve_file: *//p' "$d/workload.yaml")
  "$CUCO" transform "$d" --ranks "$RANKS" --workspace "$T/ws-$p" --no-verify > "$T/$p.tx.log" 2>&1
  g=$T/ws-$p/gen_0/$f
  [ -s "$g" ] || { echo "$p: no gen_0"; status=1; continue; }
  extra=PROBE_ARGS_$p
  ARGS=${!extra:-$(bench_args "$d/workload.yaml")}
  echo "$p: args $ARGS"
  knob_variant "$g" "$T/$p-dev.cu" CUCO_P2P_NCCL_FROM=0 || true
  knob_variant "$g" "$T/$p-ce.cu" CUCO_COPY_ENGINE=1 || true
  build_program "$d/$f" "$T/$p-seed" &
  build_program "$g" "$T/$p-gen0" &
  [ -s "$T/$p-dev.cu" ] && build_program "$T/$p-dev.cu" "$T/$p-dev" &
  [ -s "$T/$p-ce.cu" ] && build_program "$T/$p-ce.cu" "$T/$p-ce" &
  for pv in ${PROBE_VARIANTS:-}; do
    knob_variant "$g" "$T/$p-${pv%%:*}.cu" "${pv#*:}" && build_program "$T/$p-${pv%%:*}.cu" "$T/$p-${pv%%:*}" &
  done
  wait
  env CUCO_TX_TRACE=1 timeout -k 5 120 mpirun -np "$RANKS" --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    -x CUCO_TX_TRACE "$T/$p-gen0" ${ARGS%%;*} > "$OUT/probe-$p-trace.txt" 2>&1
  IFS=';' read -ra arg_sets <<< "$ARGS"
  for round in $(seq "${PROBE_ROUNDS:-5}"); do
    for ARGS in "${arg_sets[@]}"; do
      ARGS=$(echo $ARGS)
      n=$p; [ ${#arg_sets[@]} -gt 1 ] && n="$p[$ARGS]"
      run_one "$n" seed "$T/$p-seed"
      run_one "$n" gen0 "$T/$p-gen0"
      if [ "${PROBE_BASIC:-1}" != 0 ]; then
        run_one "$n" gen0_localreg1 "$T/$p-gen0" NCCL_LOCAL_REGISTER=1
        [ -x "$T/$p-dev" ] && run_one "$n" gen0_p2p_device "$T/$p-dev"
        [ -x "$T/$p-ce" ] && run_one "$n" gen0_copy_engine "$T/$p-ce"
        run_one "$n" seed_localreg0 "$T/$p-seed" NCCL_LOCAL_REGISTER=0
      fi
      for pv in ${PROBE_VARIANTS:-}; do
        [ -x "$T/$p-${pv%%:*}" ] && run_one "$n" "gen0_${pv%%:*}" "$T/$p-${pv%%:*}"
      done
    done
  done
done
python3 - "$LOG" > "$OUT/transport-probe.txt" <<'EOF'
import json, statistics, sys
runs, passed, extra = {}, {}, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["time_ms"] is not None:
        k = (d["program"], d["variant"])
        runs.setdefault(k, []).append(d["time_ms"])
        passed[k] = passed.get(k, 0) + (d["pass_lines"] > 0)
        for name, v in (d.get("result") or {}).items():
            if name not in ("time_ms", "iters") and isinstance(v, (int, float)):
                extra.setdefault(k, {}).setdefault(name, []).append(v)
for (p, v), t in runs.items():
    more = "".join(" %s %.4g" % (n, statistics.median(x)) for n, x in extra.get((p, v), {}).items())
    print("%s %-18s median %.4f min %.4f max %.4f n %d verified %d%s" % (p, v, statistics.median(t), min(t), max(t),
                                                                       len(t), passed[(p, v)], more))
EOF
cat "$OUT/transport-probe.txt"
exit $status
