#!/usr/bin/env bash
# test_doctor.sh: 'cuco doctor' here (no GPU: it must say so plainly) and on
# stand-in machines made of a fake nvidia-smi and fake NCCL trees put on PATH
# and NCCL_HOME: the text and the JSON report the same facts, the JSON
# parses, the exit code is 0, and the values of API keys never appear.
set -euo pipefail
: "${CUCO_BIN:?CUCO_BIN not set}"
command -v python3 >/dev/null || { echo "skip: python3 is needed to check the JSON"; exit 77; }

tmp=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/doctor-XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "'$2' not in $1"; }; }
hasnt() { if grep -qF -- "$2" "$1"; then echo "--- $1:" >&2; cat "$1" >&2; fail "'$2' in $1"; fi; }
# jq-like check: python3 expression over the parsed JSON 'd' must be true
json_check() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" \
        || { echo "--- $1:" >&2; cat "$1" >&2; fail "JSON check failed: $2"; }
}

# --- usage ---
"$CUCO_BIN" doctor --help >"$tmp/help.txt"
has "$tmp/help.txt" "--json"
rc=0; "$CUCO_BIN" doctor --bogus >/dev/null 2>"$tmp/bad.txt" || rc=$?
[ "$rc" -eq 2 ] || fail "unknown argument: exit $rc, want 2"

# --- this machine, as it is ---
"$CUCO_BIN" doctor >"$tmp/here.txt" || fail "doctor exited $?"
"$CUCO_BIN" doctor --json >"$tmp/here.json" || fail "doctor --json exited $?"
json_check "$tmp/here.json" 'isinstance(d["gpus"]["count"], int) and isinstance(d["will_not_work"], list)'
has "$tmp/here.txt" "What will not work here:"
if ! command -v nvidia-smi >/dev/null; then
    has "$tmp/here.txt" "no GPU: cuco can build GPU workloads but cannot run them"
    json_check "$tmp/here.json" 'd["gpus"]["count"] == 0 and any(w.startswith("no GPU") for w in d["will_not_work"])'
fi

# --- a machine whose driver is broken: nvidia-smi exists but fails ---
mkdir -p "$tmp/broken"
cat >"$tmp/broken/nvidia-smi" <<'SH'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
SH
chmod +x "$tmp/broken/nvidia-smi"
PATH="$tmp/broken:$PATH" "$CUCO_BIN" doctor >"$tmp/broken.txt"
has "$tmp/broken.txt" "no GPU: cuco can build GPU workloads but cannot run them"
has "$tmp/broken.txt" "couldn't communicate with the NVIDIA driver"

# --- a fake 2-GPU machine: NVLink (NV18), or PCIe only when FAKE_TOPO=pcie ---
mkdir -p "$tmp/gpus"
cat >"$tmp/gpus/nvidia-smi" <<'SH'
#!/bin/sh
link=NV18; p2p=OK
if [ "${FAKE_TOPO:-}" = pcie ]; then link=SYS; p2p=NS; fi
case "$*" in
*--query-gpu=index,name,memory.total*)
    printf '0, NVIDIA H200, 143771 MiB\n1, NVIDIA H200, 143771 MiB\n' ;;
*--query-gpu=index,compute_cap*)
    printf '0, 9.0\n1, 9.0\n' ;;
"topo -m")
    printf '\t\033[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n'
    printf 'GPU0\t X \t%s\tSYS\t0-63\t0\t\tN/A\n' "$link"
    printf 'GPU1\t%s\t X \tSYS\t0-63\t0\t\tN/A\n' "$link"
    printf 'NIC0\tSYS\tSYS\t X \n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n  NIC0: mlx5_0\n' ;;
"topo -p2p r")
    printf ' \tGPU0\tGPU1\t\nGPU0\tX\t%s\t\nGPU1\t%s\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n' "$p2p" "$p2p" ;;
*) echo "unexpected arguments: $*" >&2; exit 1 ;;
esac
SH
chmod +x "$tmp/gpus/nvidia-smi"
PATH="$tmp/gpus:$PATH" "$CUCO_BIN" doctor >"$tmp/gpus.txt"
PATH="$tmp/gpus:$PATH" "$CUCO_BIN" doctor --json >"$tmp/gpus.json"
has "$tmp/gpus.txt" "2 GPUs"
has "$tmp/gpus.txt" "GPU1  NVIDIA H200, 143771 MiB, compute capability 9.0, 132 SMs"
has "$tmp/gpus.txt" "GPU0-GPU1  NV18 (NVLink, 18 links), P2P OK"
hasnt "$tmp/gpus.txt" "no GPU"
hasnt "$tmp/gpus.txt" "not linked by NVLink"
json_check "$tmp/gpus.json" 'd["gpus"]["count"] == 2 and d["gpus"]["devices"][1]["name"] == "NVIDIA H200"'
json_check "$tmp/gpus.json" 'd["gpus"]["devices"][0]["memory_mib"] == 143771 and d["gpus"]["devices"][0]["sm_count"] == 132'
json_check "$tmp/gpus.json" 'd["gpus"]["links"] == [{"a": 0, "b": 1, "link": "NV18", "meaning": "NVLink", "nvlinks": 18, "p2p": "OK"}]'

FAKE_TOPO=pcie PATH="$tmp/gpus:$PATH" "$CUCO_BIN" doctor >"$tmp/pcie.txt"
has "$tmp/pcie.txt" "GPU0-GPU1  SYS (PCIe across NUMA nodes), P2P NS"
has "$tmp/pcie.txt" "GPU0-GPU1 are not linked by NVLink (SYS)"
has "$tmp/pcie.txt" "GPU0-GPU1: no peer-to-peer access (NS)"

# --- NCCL found through NCCL_HOME: a usable device API, then a mixed install ---
mkdir -p "$tmp/nccl/include/nccl_device" "$tmp/nccl/lib"
printf '#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n' >"$tmp/nccl/include/nccl.h"
touch "$tmp/nccl/include/nccl_device.h" "$tmp/nccl/include/nccl_device/gin.h"
printf 'ELF...NCCL version 2.28.9+cuda13.0\0...' >"$tmp/nccl/lib/libnccl.so.2"
NCCL_HOME="$tmp/nccl" "$CUCO_BIN" doctor --json >"$tmp/nccl.json"
json_check "$tmp/nccl.json" 'd["nccl"]["source"] == "NCCL_HOME" and d["nccl"]["version"] == "2.28.9"'
json_check "$tmp/nccl.json" 'd["nccl"]["device_api_usable"] and d["nccl"]["gin_headers"] and d["nccl"]["lib_version"] == "2.28.9"'
json_check "$tmp/nccl.json" 'not any("mixed" in w or "device API" in w for w in d["will_not_work"])'
printf 'ELF...NCCL version 2.28.3+cuda12.9\0...' >"$tmp/nccl/lib/libnccl.so.2"
NCCL_HOME="$tmp/nccl" "$CUCO_BIN" doctor >"$tmp/mixed.txt"
has "$tmp/mixed.txt" "nccl.h is 2.28.9 but $tmp/nccl/lib/libnccl.so.2 is 2.28.3: headers and library must not be mixed"

# --- API keys: names only, never values ---
anthropic_value="sk-ant-doctor-test-$$-$RANDOM"
openai_value="sk-openai-doctor-test-$$-$RANDOM"
base_value="http://127.0.0.1:9/doctor-test-$$-$RANDOM"
ANTHROPIC_API_KEY="$anthropic_value" OPENAI_API_KEY="$openai_value" CUCO_OPENAI_BASE_URL="$base_value" \
    "$CUCO_BIN" doctor >"$tmp/keys.txt" 2>&1
ANTHROPIC_API_KEY="$anthropic_value" OPENAI_API_KEY="$openai_value" CUCO_OPENAI_BASE_URL="$base_value" \
    "$CUCO_BIN" doctor --json >"$tmp/keys.json" 2>"$tmp/keys.err"
for f in "$tmp/keys.txt" "$tmp/keys.json" "$tmp/keys.err"; do
    hasnt "$f" "$anthropic_value"
    hasnt "$f" "$openai_value"
    hasnt "$f" "$base_value"
done
has "$tmp/keys.txt" "ANTHROPIC_API_KEY   set"
hasnt "$tmp/keys.txt" "no LLM key"
json_check "$tmp/keys.json" 'd["llm_keys"] == {"ANTHROPIC_API_KEY": True, "OPENAI_API_KEY": True, "CUCO_OPENAI_BASE_URL": True, "CUCO_ANTHROPIC_BASE_URL": False}'
# a local OpenAI-compatible server alone (vLLM, no key) is enough for the LLM mutators
env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY CUCO_OPENAI_BASE_URL=http://127.0.0.1:8000 "$CUCO_BIN" doctor >"$tmp/server.txt"
hasnt "$tmp/server.txt" "no LLM key or server"
env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u CUCO_OPENAI_BASE_URL -u CUCO_ANTHROPIC_BASE_URL "$CUCO_BIN" doctor --json >"$tmp/nokeys.json"
json_check "$tmp/nokeys.json" 'not any(d["llm_keys"].values()) and any(w.startswith("no LLM key") for w in d["will_not_work"])'

# --- confinement: which is in force, off, or unavailable (and why) ---
has "$tmp/here.txt" "Confinement of builds and runs"
json_check "$tmp/here.json" 'd["confinement"]["mode"] in ("namespaces", "unavailable") and d["confinement"]["in_force"] == (d["confinement"]["mode"] == "namespaces")'
CUCO_CONFINE=0 "$CUCO_BIN" doctor --json >"$tmp/off.json"
json_check "$tmp/off.json" 'd["confinement"]["mode"] == "off" and not d["confinement"]["in_force"]'
if [ -x "${CUCO_TEST_HELPERS:-}/no_unshare" ]; then
    "$CUCO_TEST_HELPERS/no_unshare" "$CUCO_BIN" doctor --json >"$tmp/nons.json"
    json_check "$tmp/nons.json" 'd["confinement"]["mode"] == "unavailable" and "unshare(" in d["confinement"]["detail"] and any(w.startswith("confinement unavailable") for w in d["will_not_work"])'
fi

echo "doctor: all checks passed"
