#!/usr/bin/env bash
# scripts/device.d/19-harness-hostile.sh: the frozen harness at one rank on
# one GPU. Each GPU workload's plain seed and its expert program verify
# (PASS) and vouch for their result (a CUCO_VOUCH line with the nonce given
# in CUCO_NONCE, the FNV-1a hash of the CUCO_RESULT json and the verdict);
# the hostile copies of gemm_allgather under tests/data/hostile/gpu/ (work
# done once, a stream the timed stream never waits for, a host thread left
# running) fail verification. kv_transfer needs a prefill/decode pair (2
# ranks): built here, run by 30-workloads-a.sh on two GPUs.
# Summary in $OUT/hostile-summary.txt, every log in $OUT/hostile-logs.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
WL_TAG=hostile BUDGET_S=${BUDGET_S:-420} RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-120} WL_RANKS=1
source scripts/device-workloads.sh
NONCE=0123456789abcdef0123456789abcdef
export CUCO_NONCE=$NONCE
fail=0

# vouched NAME LEVEL WANT(PASS|FAIL) NONCE: the run's Verification verdict is
# WANT and its CUCO_VOUCH line carries NONCE, the hash of its CUCO_RESULT
# json and the same verdict.
vouched() {
  local log="$OUT/$1-$2.log"
  python3 - "$log" "$3" "$4" <<'EOF' | tee -a "$SUMMARY"
import sys
log, want, nonce = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    lines = open(log, errors="replace").read().splitlines()
except OSError:
    print(f"FAIL {log}: no log"); sys.exit(1)
ver = [l for l in lines if l.startswith("Verification: ")]
res = [l[len("CUCO_RESULT "):] for l in lines if l.startswith("CUCO_RESULT ")]
vou = [l.split() for l in lines if l.startswith("CUCO_VOUCH ")]
def fnv(t):
    h = 0xcbf29ce484222325
    for b in t.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"
verdict = ver[0].split()[1] if len(ver) == 1 else None
problems = []
if verdict != want:
    problems.append(f"verdict {verdict!r} ({len(ver)} lines), want {want}")
if want == "FAIL" and not vou and verdict == "FAIL":
    pass  # a hostile program may crash after its verdict (host_thread.cu)
elif len(vou) != 1:
    problems.append(f"{len(vou)} CUCO_VOUCH lines")
else:
    v = vou[0]
    h = fnv(res[0]) if len(res) == 1 else fnv("")
    if v[1:] != [nonce, h, want]:
        problems.append(f"vouch {' '.join(v[1:])}, want {nonce} {h} {want}")
name = log.rsplit("/", 1)[-1]
reason = ver[0] if ver else "(no verdict)"
print(("ok   " if not problems else "FAIL ") + name + ": " + ("; ".join(problems) or reason))
sys.exit(1 if problems else 0)
EOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
}

note "date: $(date -u +%FT%TZ) NCCL_HOME=$NCCL_HOME ranks=$WL_RANKS"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

WLS=(gemm_allgather moe_dispatch_combine flash_attn_cp kv_transfer)
HOSTILE=(once_only side_stream host_thread)
for w in "${WLS[@]}"; do
  build "$w" "workloads/$w/$w.cu" &
  build "${w}_expert" "workloads/$w/expert.cu" &
done
for h in "${HOSTILE[@]}"; do
  build "hostile_$h" "tests/data/hostile/gpu/$h.cu" &
done
wait
note "builds done in $(( $(date +%s) - START )) s"

# verify-size arguments from each manifest
verify_args() {
  python3 - "workloads/$1/workload.yaml" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^verify:\n  args: \[(.*)\]", text, re.M)
print(" ".join(a.strip().strip('"') for a in m.group(1).split(",")))
EOF
}

for w in gemm_allgather moe_dispatch_combine flash_attn_cp; do
  read -r -a ARGS <<< "$(verify_args "$w")"
  run "$w" verify "${ARGS[@]}"; vouched "$w" verify PASS "$NONCE"
  run "${w}_expert" verify "${ARGS[@]}"; vouched "${w}_expert" verify PASS "$NONCE"
done
read -r -a GA_VERIFY <<< "$(verify_args gemm_allgather)"
for h in "${HOSTILE[@]}"; do
  run "hostile_$h" verify "${GA_VERIFY[@]}"; vouched "hostile_$h" verify FAIL "$NONCE"
done
# without a nonce the vouch says "none"
unset CUCO_NONCE
run gemm_allgather nononce "${GA_VERIFY[@]}"; vouched gemm_allgather nononce PASS none
export CUCO_NONCE=$NONCE
# bench size: what the timed-step checks cost beside the step
GA_BENCH=(--m 8192 --k 28672 --n 8192 --warmup 5 --iters 20)
run gemm_allgather bench "${GA_BENCH[@]}"; vouched gemm_allgather bench PASS "$NONCE"
run gemm_allgather_expert bench "${GA_BENCH[@]}"; vouched gemm_allgather_expert bench PASS "$NONCE"
run hostile_side_stream bench "${GA_BENCH[@]}"; vouched hostile_side_stream bench FAIL "$NONCE"
run hostile_host_thread bench "${GA_BENCH[@]}"; vouched hostile_host_thread bench FAIL "$NONCE"
MOE_BENCH=(--tokens 4096 --experts 256 --warmup 3 --iters 10)
FA_BENCH=(--seq 8192 --heads 32 --kv_heads 32 --causal 1 --warmup 3 --iters 10)
for v in moe_dispatch_combine moe_dispatch_combine_expert; do
  run "$v" bench "${MOE_BENCH[@]}"; vouched "$v" bench PASS "$NONCE"
done
for v in flash_attn_cp flash_attn_cp_expert; do
  run "$v" bench "${FA_BENCH[@]}"; vouched "$v" bench PASS "$NONCE"
done

note "total $(( $(date +%s) - START )) s; fail=$fail"
tar -czf "$OUT/hostile-logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls *.log) 2>/dev/null
rm -f "$OUT"/*.log
rm -rf "$BUILD"
exit $fail
