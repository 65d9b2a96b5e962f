#!/bin/bash
# 'cuco analyze' end to end: the summary, the JSON file, --json, folders,
# and exit status 2 with file:line on an unreadable input.
set -u
BIN=${CUCO_BIN:?}
DATA=${CUCO_TEST_DATA:?}/analyze
mkdir -p "${CUCO_TEST_TMP:-/tmp}"
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/analyze.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$BIN" analyze "$DATA/p2p_groups.cu" -o "$T/a.json") || fail "analyze exited $?"
grep -q "collectives: 4" <<<"$out" || fail "summary counts: $out"
grep -q "p2p_groups.cu:8 ncclSend (all_to_all)" <<<"$out" || fail "summary collective line: $out"
grep -q "p2p_groups.cu:14 ncclSend (point_to_point)" <<<"$out" || fail "summary p2p line: $out"
[ -s "$T/a.json" ] || fail "no analysis.json written"
python3 - "$T/a.json" <<'PY' || fail "analysis.json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1
assert [g["classification"] for g in d["groups"]] == ["all_to_all", "point_to_point"], d["groups"]
assert d["collectives"][0]["fields"]["sendbuff"]["base"] == "sendb"
PY

# default output name, in the current folder
(cd "$T" && "$BIN" analyze "$DATA/no_nccl.cu" >/dev/null) || fail "default -o"
[ -s "$T/analysis.json" ] || fail "analysis.json not in the current folder"

# --json prints the document
"$BIN" analyze --json "$DATA/macros_comments.cu" -o "$T/b.json" > "$T/stdout.json" || fail "--json exit"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['collectives'])==1" "$T/stdout.json" \
  || fail "--json output is not the analysis"
[ -s "$T/b.json" ] || fail "--json -o FILE did not write FILE"

# --json without -o writes no file (it must not overwrite ./analysis.json)
mkdir -p "$T/keep" && echo "mine" > "$T/keep/analysis.json"
(cd "$T/keep" && "$BIN" analyze --json "$DATA/no_nccl.cu" >/dev/null) || fail "--json alone exit"
[ "$(cat "$T/keep/analysis.json")" = "mine" ] || fail "--json alone overwrote ./analysis.json"

# a folder: every source in it, includes followed
out=$("$BIN" analyze "$DATA/folder" -o "$T/c.json") || fail "folder exit"
grep -q "files: 2" <<<"$out" || fail "folder files: $out"
grep -q "ncclReduceScatter" <<<"$out" || fail "folder collective: $out"

# stream capture into a CUDA graph is noted at its line, with the graph calls
cat > "$T/graph.cu" <<'CU'
#include <nccl.h>
void f(ncclComm_t c, cudaStream_t s, cudaGraph_t *g, cudaGraphExec_t ge) {
  float *x; cudaMalloc(&x, 64);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, s);
  cudaStreamEndCapture(s, g);
  cudaGraphLaunch(ge, s);
}
CU
"$BIN" analyze "$T/graph.cu" -o "$T/g.json" >/dev/null || fail "graph exit"
python3 - "$T/g.json" <<'PY' || fail "graph capture not noted"
import json, sys
d = json.load(open(sys.argv[1]))
assert any(n["line"] == 4 and "CUDA graph" in n["message"] for n in d["notes"]), d["notes"]
assert [s["kind"] for s in d["syncs"]] == ["capture_begin", "capture_end", "graph_launch"], d["syncs"]
PY

# a stray closer as the first token before a call (damaged input): the
# statement still ends after the call, and nothing is read out of bounds
printf ')ncclAllReduce(a, a, 1, ncclFloat, ncclSum, c, s);\n' > "$T/stray.cu"
"$BIN" analyze "$T/stray.cu" -o "$T/stray.json" >/dev/null || fail "stray closer exit"
python3 - "$T/stray.json" <<'PY2' || fail "stray closer: statement span"
import json, sys
c = json.load(open(sys.argv[1]))["collectives"][0]
assert c["statement"]["end"] >= c["span"]["end"] > c["span"]["start"], c
PY2

# writing to /dev/null leaves it a device
"$BIN" analyze "$DATA/no_nccl.cu" -o /dev/null >/dev/null || fail "-o /dev/null exit"
[ -c /dev/null ] || fail "-o /dev/null replaced /dev/null"

# errors
"$BIN" analyze "$T/missing.cu" -o "$T/d.json" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] || fail "missing file exit $rc"
grep -q "missing.cu" "$T/err" || fail "error names the file: $(cat "$T/err")"
"$BIN" analyze 2>/dev/null; [ $? -eq 2 ] || fail "no arguments should exit 2"
"$BIN" analyze --help | grep -q -- "--json" || fail "--help"
echo "ok"
