#!/usr/bin/env bash
# scripts/device.d/60-bound.sh: on the 2-GPU machine, 'cuco bound' on the four
# GPU workloads (gemm_allgather, kv_transfer, moe_dispatch_combine,
# flash_attn_cp) and on two bare MPI + NCCL programs whose verification is
# hollow on purpose (tests/data/bound/hollow_allreduce.cu: static and
# dynamic warnings must fire; hollow_readback.cu: only the dynamic one can).
# For each workload the timeline's per-step computation and communication
# are compared with the compute_ms / comm_ms the workload prints itself
# (agreement within 10% expected).
#
# Needs: the cuco binary (on PATH as scripts/gpu-session sets it up from
# .devcarry/, else build-release/cuco), nvcc, mpicc/mpirun, NCCL 2.28.9 at
# NCCL_HOME, CUPTI in /usr/local/cuda (the timeline library is built here
# with gcc from tools/cupti). Finishes within BUDGET_S seconds (default 225,
# under gpu-session's 240 s step cap): all builds first, in parallel, then
# the measurements one after another (they share both GPUs); a target that
# does not fit is listed as skipped. Every step has its own timeout; a
# failure is logged and the script goes on.
#
# Results: $OUT/bound_summary.json (rewritten after every target, so a kill
# still leaves one), and under $OUT/bound/: NAME.json (bound.json), NAME.txt
# (the text report), NAME.log (progress and errors), build-*.log, steps.log.
# BOUND_ONLY="a b" limits the targets (names as above, hollow_allreduce and
# hollow_readback for the hollow programs); BUILD_JOBS (default: the cores)
# caps the builds running at once. BOUND_RANKS=N runs every target at N
# ranks ('cuco bound --ranks N'; on a 1-GPU machine, BOUND_RANKS=1);
# default: the manifests' ranks, 2 for the hollow programs.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=/tmp/cuco-gpu-out}"
: "${NCCL_HOME:=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}"
export NCCL_HOME CUCO_NCCL_HOME=${CUCO_NCCL_HOME:-$NCCL_HOME} CUCO_REPO=${CUCO_REPO:-$PWD}
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$NCCL_HOME/lib:$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-225}
BUILD_TIMEOUT_S=${BUILD_TIMEOUT_S:-120}
BUILD_JOBS=${BUILD_JOBS:-$(nproc 2>/dev/null || echo 8)}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-100}
DEST=$OUT/bound
WS=$(mktemp -d /tmp/cuco-bound.XXXXXX)
mkdir -p "$DEST"
STEPS=$DEST/steps.log
: > "$STEPS"
note() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$STEPS"; }
elapsed() { echo $(( $(date +%s) - START )); }

CUCO=$(command -v cuco || true)
[ -n "$CUCO" ] || { [ -x build-release/cuco ] && CUCO=$PWD/build-release/cuco; }
[ -n "$CUCO" ] || { [ -x .devcarry/bin/cuco ] && CUCO=$PWD/.devcarry/bin/cuco; }
if [ -z "$CUCO" ]; then
  note "no cuco binary (PATH, build-release/cuco, .devcarry/bin/cuco): nothing to run"
  echo '{"error": "no cuco binary"}' > "$OUT/bound_summary.json"
  exit 1
fi
note "cuco: $CUCO ($("$CUCO" --version 2>&1 | head -1))"
nvidia-smi --query-gpu=index,name --format=csv,noheader >> "$STEPS" 2>&1

# 1. The CUPTI timeline library, built against this machine's CUPTI.
CUPTI_INC=; CUPTI_LIB=
for d in /usr/local/cuda/extras/CUPTI/include /usr/local/cuda/include; do
  [ -f "$d/cupti.h" ] && { CUPTI_INC=$d; break; }
done
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  ls "$d"/libcupti.so* >/dev/null 2>&1 && { CUPTI_LIB=$d; break; }
done
LIB=$DEST/lib/libcuco_timeline.so
mkdir -p "$DEST/lib"
if [ -n "$CUPTI_INC" ] && [ -n "$CUPTI_LIB" ]; then
  timeout -k 5 60 gcc -std=c11 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -fPIC -shared -pthread \
    -fvisibility=hidden -I"$CUPTI_INC" -I/usr/local/cuda/include -o "$LIB" \
    tools/cupti/cuco_timeline.c -L"$CUPTI_LIB" -Wl,-rpath,"$CUPTI_LIB" -lcupti \
    > "$DEST/build-cupti.log" 2>&1
  note "libcuco_timeline.so (CUPTI $CUPTI_INC, $CUPTI_LIB): gcc rc=$?"
else
  note "no CUPTI headers/library under /usr/local/cuda"
fi
if [ ! -f "$LIB" ]; then
  for cand in "${CUCO_TIMELINE_LIB:-}" "$(dirname "$CUCO")/libcuco_timeline.so" \
              "$PWD/.devcarry/lib/libcuco_timeline.so" "$PWD/build-release/libcuco_timeline.so"; do
    [ -n "$cand" ] && [ -f "$cand" ] && { LIB=$cand; break; }
  done
fi
if [ -f "$LIB" ]; then
  export CUCO_TIMELINE_LIB=$LIB
  note "timeline library: $LIB"
else
  note "no timeline library: bound figures will come from the programs' own breakdowns"
fi

# The targets, in order of priority (what does not fit the budget is skipped):
# the first hollow program, the four workloads, the second hollow program.
ALL="hollow_allreduce kv_transfer gemm_allgather flash_attn_cp moe_dispatch_combine hollow_readback"
LIST=${BOUND_ONLY:-$ALL}
BOUND_RANKS=${BOUND_RANKS:-}
run_bound() { # run_bound NAME TIMEOUT OPTIONS... (stdout, stderr go where the caller says)
  local name=$1 t=$2
  shift 2
  if [ "${name#hollow_}" != "$name" ]; then
    timeout -k 10 "$t" "$CUCO" bound "tests/data/bound/$name.cu" --ranks "${BOUND_RANKS:-2}" \
      --workspace "$WS/$name" "$@" -- --n 16777216 --iters 20
  else
    [ -f "workloads/$name/workload.yaml" ] || { echo "no workload $name"; return 2; }
    timeout -k 10 "$t" "$CUCO" bound "workloads/$name" ${BOUND_RANKS:+--ranks "$BOUND_RANKS"} \
      --workspace "$WS/$name" "$@"
  fi
}

note "ranks: ${BOUND_RANKS:-as the manifests say, 2 for the hollow programs}"

# 2. Every build at once (program and both variants of each target): the
# measurement below reuses them (prebuilt.json in each workspace).
note "building: $LIST (x3 parts, $BUILD_JOBS at a time, ${BUILD_TIMEOUT_S}s cap each)"
pids=()
for name in $LIST; do
  for part in program comm_removed compute_removed; do
    while [ "$(jobs -rp | wc -l)" -ge "$BUILD_JOBS" ]; do sleep 0.5; done
    run_bound "$name" "$BUILD_TIMEOUT_S" --build-only --part "$part" --quiet \
      > "$DEST/build-$name-$part.log" 2>&1 &
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait "$p"; done
for name in $LIST; do
  for part in program comm_removed compute_removed; do
    note "build $name/$part: $(tail -1 "$DEST/build-$name-$part.log" 2>/dev/null | cut -c1-200)"
  done
done

# 3. The summary, rewritten after every target.
summarize() {
  python3 - "$DEST" "$OUT/bound_summary.json" "$LIST" "$(elapsed)" <<'PY' || note "summary failed (python3?)"
import json, os, sys
dest, out, names, secs = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4])

def pct(x, ref):
    if x is None or ref is None or ref <= 0:
        return None
    return round(100.0 * (x - ref) / ref, 2)

def one(name):
    s = {"name": name}
    status_path = os.path.join(dest, name + ".status")
    if os.path.exists(status_path):
        s["status"] = open(status_path).read().strip()
    path = os.path.join(dest, name + ".json")
    if not os.path.exists(path):
        s.setdefault("status", "not run")
        return s
    try:
        j = json.load(open(path))
    except Exception as e:
        s["error"] = "unreadable bound.json: %s" % e
        return s
    prog, nc, ncomp = j.get("program", {}), j.get("comm_removed", {}), j.get("compute_removed", {})
    va = j.get("verification_audit", {})
    st = va.get("static", {})
    def cut(x):
        return x[:400] if isinstance(x, str) else x
    s["program"] = {k: cut(prog.get(k)) for k in ("built", "ran", "verification", "time_ms", "error")}
    own = {"time_ms": prog.get("time_ms"), "compute_ms": prog.get("compute_ms"),
           "comm_ms": prog.get("comm_ms")}
    s["own"] = own
    tl = j.get("timeline", {})
    crit = tl.get("critical")
    t = {"available": tl.get("available"), "error": tl.get("error"), "dropped": tl.get("dropped")}
    agree = {"basis": None, "compute_pct": None, "comm_pct": None, "within_10pct": None}
    if tl.get("available") and crit is not None:
        c = tl["ranks"][crit]
        t.update({"critical_rank": c.get("rank"), "run_compute_ms": c.get("compute_ms"),
                  "run_comm_ms": c.get("comm_ms"), "run_overlap_ms": c.get("overlap_ms"),
                  "run_ceiling": c.get("ceiling"), "wait_ms": c.get("wait_ms"),
                  "top_kernels": [(k["name"][:80], round(k["share"], 4)) for k in c.get("top_kernels", [])[:3]]})
        timed = c.get("timed", {})
        t["timed"] = timed
        full, co, mo = timed.get("full", {}), timed.get("compute_only", {}), timed.get("comm_only", {})
        # Like for like: the program's compute-only and comm-only steps when it
        # has them (that is how the workloads measure compute_ms / comm_ms),
        # else its full steps.
        if co.get("n") and mo.get("n"):
            agree["basis"] = "compute-only and comm-only steps timed by the program"
            tc, tm = co.get("compute_ms"), mo.get("comm_ms")
        elif full.get("n"):
            agree["basis"] = "full steps timed by the program"
            tc, tm = full.get("compute_ms"), full.get("comm_ms")
        elif co.get("n"):
            # at one rank NCCL copies with the copy engine: no communication
            # kernel, so every timed step looks like computation only
            agree["basis"] = "compute-only steps only (no communication kernel timed)"
            tc, tm = co.get("compute_ms"), None
        else:
            agree["basis"] = "none: no timed intervals in the timeline"
            tc = tm = None
        t["step_compute_ms"], t["step_comm_ms"] = tc, tm
        agree["compute_pct"] = pct(tc, own["compute_ms"])
        agree["comm_pct"] = pct(tm, own["comm_ms"])
        if agree["compute_pct"] is not None and agree["comm_pct"] is not None:
            agree["within_10pct"] = abs(agree["compute_pct"]) <= 10 and abs(agree["comm_pct"]) <= 10
        elif agree["compute_pct"] is not None:
            agree["compute_within_10pct"] = abs(agree["compute_pct"]) <= 10
        if full.get("n"):
            agree["full_step_compute_pct"] = pct(full.get("compute_ms"), own["compute_ms"])
            agree["full_step_comm_pct"] = pct(full.get("comm_ms"), own["comm_ms"])
        if co.get("n"):
            agree["compute_only_span_pct"] = pct(co.get("span_ms"), own["compute_ms"])
        if mo.get("n"):
            agree["comm_only_span_pct"] = pct(mo.get("span_ms"), own["comm_ms"])
        # Per rank, against what the program itself timed on that rank (its
        # events around the compute-only and comm-only steps): a program may
        # report compute_ms across ranks (kv_transfer: prefill on one rank
        # plus decode on the other), which no single rank's timeline matches.
        per_rank = []
        for r in tl.get("ranks", []):
            rt = r.get("timed", {})
            rco, rmo = rt.get("compute_only", {}), rt.get("comm_only", {})
            per_rank.append({"rank": r.get("rank"),
                             "compute_pct": pct(rco.get("compute_ms"), rco.get("event_ms")) if rco.get("n") else None,
                             "comm_pct": pct(rmo.get("comm_ms"), rmo.get("event_ms")) if rmo.get("n") else None})
        agree["per_rank"] = per_rank
        vals = [abs(x[k]) for x in per_rank for k in ("compute_pct", "comm_pct") if x.get(k) is not None]
        agree["per_rank_within_10pct"] = (max(vals) <= 10) if vals else None
    s["timeline"] = t
    s["agreement"] = agree
    s["variants"] = {
        "comm_removed": {k: cut(nc.get(k)) for k in ("built", "ran", "calls_removed", "verification", "time_ms", "error")},
        "compute_removed": {k: cut(ncomp.get(k)) for k in ("built", "ran", "calls_removed", "verification", "time_ms", "error")},
        "comm_removed_vs_own_compute_pct": pct(nc.get("time_ms"), own["compute_ms"]),
        "compute_removed_vs_own_comm_pct": pct(ncomp.get("time_ms"), own["comm_ms"]),
    }
    s["bound"] = j.get("bound")
    s["ceiling"] = (j.get("bound") or {}).get("ceiling")
    s["advice"] = j.get("advice")
    s["audit"] = {"warning": va.get("warning"), "message": va.get("message"),
                  "static_finding": st.get("finding"), "static_summary": st.get("summary"),
                  "comm_finding": st.get("comm_finding"),
                  "sites": [(x.get("line"), x.get("verdict")) for x in st.get("sites", [])],
                  "dynamic": (va.get("dynamic") or {}).get("result"),
                  "dynamic_finding": (va.get("dynamic") or {}).get("finding")}
    return s

res = {"seconds": secs, "targets": [one(n) for n in names]}
work = [x for x in res["targets"] if not x["name"].startswith("hollow_")]
res["workloads_measured"] = sum(1 for x in work if x.get("program", {}).get("ran"))
res["workloads_agree_within_10pct"] = [x["name"] for x in work if (x.get("agreement") or {}).get("within_10pct")]
# The hollow programs: hollow_allreduce never reads what the all-reduce
# wrote (static and dynamic findings expected); hollow_readback reads it but
# never compares it (only the dynamic finding can see it).
expect = {"hollow_allreduce": (True, True), "hollow_readback": (False, True)}
for x in res["targets"]:
    if x["name"] in expect:
        a = x.get("audit") or {}
        want_static, want_dynamic = expect[x["name"]]
        res[x["name"]] = {"warning": a.get("warning"), "static_finding": a.get("static_finding"),
                          "static_comm_finding": a.get("comm_finding"), "dynamic": a.get("dynamic"),
                          "dynamic_finding": a.get("dynamic_finding"),
                          "expected": {"warning": True, "static_finding": want_static,
                                       "dynamic_finding": want_dynamic},
                          "as_expected": bool(a.get("warning")) and
                                         bool(a.get("static_finding")) == want_static and
                                         bool(a.get("dynamic_finding")) == want_dynamic}
tmp = out + ".tmp"
json.dump(res, open(tmp, "w"), indent=1)
os.replace(tmp, out)
PY
}

# 4. The measurements, one after another.
for name in $LIST; do
  left=$(( BUDGET_S - $(elapsed) ))
  if [ "$left" -lt 25 ]; then
    note "$name: skipped ($left s left of the budget; run again with BOUND_ONLY=\"$name\")"
    echo "skipped: time budget" > "$DEST/$name.status"
    continue
  fi
  t=$RUN_TIMEOUT_S
  [ "$t" -gt "$left" ] && t=$left
  t0=$(date +%s)
  # each of the three runs gets at most a third of it, so a hanging variant
  # still leaves a report
  run_bound "$name" "$t" --single-run --timeout $(( t / 3 > 10 ? t / 3 : 10 )) \
    > "$DEST/$name.txt" 2> "$DEST/$name.log"
  rc=$?
  cp "$WS/$name/bound.json" "$DEST/$name.json" 2>/dev/null
  echo "exit $rc in $(( $(date +%s) - t0 )) s$([ $rc = 124 ] || [ $rc = 137 ] && echo ' (timeout)')" > "$DEST/$name.status"
  note "$name: $(cat "$DEST/$name.status"); $(grep -m1 '^advice:' "$DEST/$name.txt" | cut -c1-160)"
  grep '^WARNING' "$DEST/$name.txt" | cut -c1-200 | while read -r l; do note "  $l"; done
  summarize
done
summarize
note "summary: $OUT/bound_summary.json"
rm -rf "$WS"
exit 0
