#!/usr/bin/env bash
# test_browser.sh: the web UI in headless Chromium on a recorded run
# (tests/data/web/run.sql): after the page's JavaScript has run, the dumped
# DOM must hold both score plots with their points, the lineage tree with a
# node per program and its edges, the sortable table, the failures and the
# spend; the fragment #program=7 must open the side panel exactly as a click
# on node 7 does (diff against its parent, code, metrics). Then, driven over
# the DevTools protocol (cdp_live_click.py), a real click on node 7 must open
# that panel, and a program written to the database after the page loaded
# must appear on it without a reload. Screenshots web_ui.png (#program=7)
# and web_ui_click.png (after the click) are saved under
# $CUCO_TEST_ARTIFACTS (the build folder's test-artifacts/).
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! "$CUCO_SRC/scripts/optional-deps" chromium; then
  echo "SKIP: Chromium is not installed and could not be installed (scripts/optional-deps chromium)"
  exit 77
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser) || {
  echo "SKIP: no chromium binary on PATH after installation"; exit 77; }

work="$CUCO_TEST_TMP/web_browser.$$"
art="${CUCO_TEST_ARTIFACTS:-$CUCO_TEST_TMP/artifacts}"
rm -rf "$work"; mkdir -p "$work/ws" "$art"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

sqlite3 "$work/ws/runs.db" < "$CUCO_TEST_DATA/web/run.sql" || fail "loading run.sql"
"$CUCO_BIN" serve "$work/ws" --port 0 > "$work/serve.out" 2> "$work/serve.err" &
server=$!
port=""
for _ in $(seq 1 100); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" 2>/dev/null | sed 's/.*://')
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "cuco serve printed no URL: $(cat "$work/serve.err")"
url="http://127.0.0.1:$port/"

chrome() {
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$work/profile" --virtual-time-budget=5000 "$@" 2>>"$work/chrome.err"
}

# 1. the linked program: run 1's page with program 7's panel open
chrome --dump-dom "${url}#program=7" > "$work/dom.html" || fail "chromium --dump-dom failed: $(tail -5 "$work/chrome.err")"
dom="$work/dom.html"
count() { grep -o "$1" "$dom" | wc -l; }
section() { # the text between the element with id $1 and the next </div>
  python3 - "$dom" "$1" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'id="%s"' % re.escape(sys.argv[2]), html)
print(html[m.start():m.start() + 20000] if m else "")
PY
}

grep -q 'cpu_demo (run 1, done)' "$dom" || fail "the page did not switch to program 7's run"
evals=$(section plot-evals | python3 -c 'import sys; s=sys.stdin.read(); s=s[:s.find("</svg>")]; print(s.count("class=\"pt\""))')
[ "$evals" = 4 ] || fail "score plot: expected 4 scored points (programs 1 2 4 7), found $evals"
section plot-evals | grep -q 'class="line"' || fail "score plot: no best-so-far line"
gens=$(section plot-gens | python3 -c 'import sys; s=sys.stdin.read(); s=s[:s.find("</svg>")]; print(s.count("class=\"pt\""))')
[ "$gens" = 4 ] || fail "generation plot: expected 4 points (island 0: gen 0 1 2, island 1: gen 3), found $gens"
nodes=$(count 'class="node[ "]')
[ "$nodes" = 9 ] || fail "lineage: expected 9 nodes, found $nodes"
edges=$(count 'class="edge"')
[ "$edges" = 9 ] || fail "lineage: expected 9 edges (8 parents + 1 second parent), found $edges"
grep -q 'class="node selected" data-id="7"' "$dom" || fail "lineage: node 7 not selected"
rows=$(section programs | python3 -c 'import sys; s=sys.stdin.read(); s=s[:s.find("</table>")]; print(s.count("<tr class=\"clickable\""))')
[ "$rows" = 9 ] || fail "table: expected 9 program rows, found $rows"

# the side panel: as a click on node 7 fills it
grep -q 'id="panel" data-program-id="7"' "$dom" || grep -q 'data-program-id="7"' "$dom" || fail "panel not opened for program 7"
grep -q 'program #7: ok' "$dom" || fail "panel title missing"
panel=$(section panel-diff)
echo "$panel" | grep -q -- '--- program 4' || fail "diff header missing"
echo "$panel" | grep -q '<span class="del">-#define CUCO_CHUNK_BYTES 262144' || fail "diff: removed knob line missing"
echo "$panel" | grep -q '<span class="add">+#define CUCO_CHUNK_BYTES 65536' || fail "diff: added knob line missing"
echo "$panel" | grep -q 'fused with the put' || fail "diff: added code line missing"
section panel-code | grep -q 'x\[i\] = x\[i\] \* 2.0f' || fail "panel code missing"
grep -q 'identifier &quot;foo&quot; is undefined\|identifier "foo" is undefined' "$dom" || fail "failure reasons missing"
grep -q 'claude-test' "$dom" || fail "spend per model missing"
grep -q '90.9%' "$dom" || fail "gap closed (90.9%) missing"
# the y axes: ticks at round steps (1, 2, 2.5 or 5 times a power of ten),
# evenly spaced
python3 - "$dom" <<'PY' || fail "plot axes: y ticks not at round, even steps"
import math, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
groups = re.findall(r'<g class="ticks"[^>]*>(.*?)</g>', html, re.S)
assert groups, "no tick group"
for g in groups:
    ys = [float(v) for v in re.findall(r'<text[^>]*text-anchor="end"[^>]*>\s*([-0-9.]+)\s*</text>', g)]
    assert len(ys) >= 3, ys
    diffs = [b - a for a, b in zip(ys, ys[1:])]
    step = diffs[0]
    assert step > 0 and all(abs(d - step) < 1e-6 * max(1, step) for d in diffs), ys
    mant = step / 10 ** math.floor(math.log10(step) + 1e-12)
    assert any(abs(mant - m) < 1e-6 for m in (1, 2, 2.5, 5)), (step, ys)
print("y axes:", len(groups), "plots, ticks at round even steps")
PY

# 2. a failed program via the fragment: its error excerpt in the panel
chrome --dump-dom "${url}#program=3" > "$work/dom3.html" || fail "chromium --dump-dom (program 3) failed"
dom="$work/dom3.html"
section panel-error | grep -q '1 error detected in the compilation' || fail "program 3: error excerpt not shown"

# 3. the screenshot artifact
chrome --hide-scrollbars --window-size=1400,1600 --screenshot="$art/web_ui.png" "${url}#program=7" >/dev/null \
  || fail "chromium --screenshot failed"
[ -s "$art/web_ui.png" ] || fail "no screenshot written"
head -c 8 "$art/web_ui.png" | od -An -c | grep -q 'P   N   G' || fail "screenshot is not a PNG"
echo "screenshot: $art/web_ui.png"

# 4. over the DevTools protocol: a real mouse click on node 7 opens its panel
# with the diff, and the open page shows a program written after it loaded
# (live, no reload); its screenshot (panel open after the click) is saved too
CDP_LOG="$work/cdp-chrome.log" timeout 120 python3 "$CUCO_SRC/tests/web/cdp_live_click.py" \
  "$CHROMIUM" "$url" "$work/ws/runs.db" 7 "$art/web_ui_click.png" > "$work/cdp.out" 2>&1
rc=$?
cat "$work/cdp.out"
[ "$rc" = 0 ] || fail "click/live check failed (exit $rc): $(tail -3 "$work/cdp-chrome.log" 2>/dev/null)"
head -c 8 "$art/web_ui_click.png" | od -An -c | grep -q 'P   N   G' || fail "click screenshot is not a PNG"

# 5. Ctrl-C stops the server cleanly
kill -INT "$server"
for _ in $(seq 1 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server" 2>/dev/null && fail "cuco serve did not stop on SIGINT"
wait "$server"; rc=$?
server=""
[ "$rc" = 0 ] || fail "cuco serve exited $rc after SIGINT"
echo "PASS"
