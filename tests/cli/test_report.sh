#!/usr/bin/env bash
# test_report.sh: 'cuco report' on a recorded run (tests/data/web/run.sql):
# the files are written, the numbers in report.md are the database's, the
# verification warning from bound.json is shown next to the speedups,
# report.html is self-contained with its SVG plots (gnuplot and built-in),
# and best.<ext> is the best program's code.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
work="$CUCO_TEST_TMP/report.$$"
rm -rf "$work"; mkdir -p "$work/ws"
trap 'rm -rf "$work"' EXIT
db="$work/ws/runs.db"
sqlite3 "$db" < "$CUCO_TEST_DATA/web/run.sql" || fail "loading run.sql"
q() { sqlite3 "$db" "$1"; }

# a bound.json as 'cuco bound' writes it, with a verification audit finding
cat > "$work/ws/bound.json" <<'JSON'
{"version": 1, "workload": "cpu_demo", "ranks": 2,
 "verification_audit": {"warning": true, "message": "verification does not depend on the results: PASS is printed unconditionally"},
 "program": {"ran": true, "time_ms": 10.0, "compute_ms": 6.0, "comm_ms": 3.0},
 "bound": {"source": "program_breakdown", "ceiling": 1.5}}
JSON

# gnuplot first (installed on demand): the first report must find it there
have_gnuplot=0
"$CUCO_SRC/scripts/optional-deps" gnuplot-nox && have_gnuplot=1

"$CUCO_BIN" report "$work/ws" --run 1 --out "$work/out" > "$work/stdout" 2> "$work/stderr" \
  || fail "cuco report failed: $(cat "$work/stderr")"
for f in report.md report.html best.cu; do [ -s "$work/out/$f" ] || fail "$f not written"; done
md="$work/out/report.md"; html="$work/out/report.html"

# numbers from the database
baseline=$(printf '%.3f' "$(q 'SELECT baseline_ms FROM runs WHERE id=1')")
best_id=$(q "SELECT id FROM programs WHERE run_id=1 AND status='ok' ORDER BY score DESC LIMIT 1")
best_ms=$(printf '%.3f' "$(q "SELECT time_ms FROM programs WHERE id=$best_id")")
best_x=$(printf '%.3f' "$(q "SELECT score FROM programs WHERE id=$best_id")")
fast_id=$(q "SELECT id FROM programs WHERE run_id=1 AND generation=0 AND status='ok' ORDER BY id LIMIT 1")
fast_x=$(printf '%.3f' "$(q "SELECT score FROM programs WHERE id=$fast_id")")
spend=$(printf '%.4f' "$(q 'SELECT sum(cost_usd) FROM llm_calls WHERE run_id=1')")
ncompile=$(q "SELECT count(*) FROM programs WHERE run_id=1 AND status='compile_error'")
grep -qF "| baseline | $baseline | 1.000x |" "$md" || fail "baseline $baseline not in report.md"
grep -qF "Baseline: host-driven program, measured by cuco bound (bound.json)." "$md" || fail "baseline source not named"
grep -qF "| fast path (#$fast_id, generation 0) | " "$md" || fail "fast path #$fast_id not in report.md"
grep -qF "| ${fast_x}x |" "$md" || fail "fast path speedup $fast_x not in report.md"
grep -qF "| **best** (#$best_id, generation" "$md" || fail "best #$best_id not in report.md"
grep -qF "| $best_ms | **${best_x}x** |" "$md" || fail "best time/speedup $best_ms/$best_x not in report.md"
grep -qF "Total: \$$spend over 3 calls" "$md" || fail "spend $spend not in report.md"
grep -qE "^\| compile_error \| .* \| $ncompile \| #" "$md" || fail "compile_error count $ncompile not in report.md"
# bound from bound.json: max(6, 3) = 6; ceiling 10/6; the best (5 ms) is
# faster than the bound: the search changed the computation, so no gap
# figure (it would read 125%), and the report says why
bound=$(python3 -c "print('%.3f' % max(6.0, 3.0))")
ceiling=$(python3 -c "print('%.3f' % ($baseline / 6.0))")
gap=$(python3 -c "print('%.1f' % (100 * ($baseline - $best_ms) / ($baseline - 6.0)))")
grep -qF "max = **$bound ms**" "$md" || fail "bound $bound not in report.md"
grep -qF "ceiling (baseline / bound): ${ceiling}x" "$md" || fail "ceiling $ceiling not in report.md"
grep -qF "$gap%" "$md" && fail "gap closed $gap% printed though the bound does not apply"
grep -qF "bound.json (program breakdown)" "$md" || fail "bound source not named"
grep -qF "bound does not apply: computation changed" "$md" || fail "bound-does-not-apply note missing"
# the warning sits in the Result section, before the speedup table
awk '/^## Result/{r=1} r && /WARNING:.*PASS is printed unconditionally/{w=1} r && /^\| program/{exit !w}' "$md" \
  || fail "verification warning not shown next to the speedups in report.md"
grep -q 'class="warning">&#9888; WARNING: verification does not depend' "$html" || fail "warning not in report.html"

# the diff from the baseline program to the best, and the export
grep -qF -- "--- program $fast_id (start of the search)" "$md" || fail "diff header missing"
grep -qF -- "+  x[i] = x[i] * 2.0f; // fused with the put" "$md" || fail "diff line missing"
q "SELECT code FROM programs WHERE id=$best_id" > "$work/best.expected"
# sqlite3 prints the text plus a newline; the code itself ends with one already
diff <(cat "$work/out/best.cu"; echo) "$work/best.expected" >/dev/null || fail "best.cu is not program $best_id's code"

# self-contained HTML with two SVG plots
[ "$(grep -c '<svg' "$html")" -ge 2 ] || fail "report.html lacks its two SVG plots"
grep -qiE '<(script|link|img|iframe)[ >]|(src|href)="|url\(' "$html" && fail "report.html references external resources"
grep -oE 'https?://[^" ]*' "$html" | grep -vE '^http://www\.w3\.org/(2000/svg|1999/xlink)$' && fail "report.html has URLs"

# plots: gnuplot when it can be installed, the built-in writer when asked
if [ "$have_gnuplot" = 1 ]; then
  grep -q "plots: gnuplot" "$work/stdout" || fail "gnuplot installed but not used: $(cat "$work/stdout")"
  grep -qF "(made with gnuplot)" "$md" || fail "report.md does not say gnuplot made the plots"
else
  echo "note: gnuplot could not be installed; only the built-in plots are checked"
fi
"$CUCO_BIN" report "$db" --run 1 --out "$work/out2" --no-gnuplot > "$work/stdout2" || fail "--no-gnuplot run failed"
grep -q "plots: built-in SVG" "$work/stdout2" || fail "--no-gnuplot did not use the built-in plots"
html2="$work/out2/report.html"
pts=$(sed -n '/<figure id="curve">/,/<\/figure>/p' "$html2" | grep -c 'class="pt"')
nok=$(q "SELECT count(*) FROM programs WHERE run_id=1 AND status='ok'")
[ "$pts" = "$nok" ] || fail "built-in curve: $pts points for $nok correct programs"
nodes=$(sed -n '/<figure id="lineage">/,/<\/figure>/p' "$html2" | grep -c 'class="node"')
nev=$(q "SELECT count(*) FROM programs WHERE run_id=1 AND status<>'pending'")
[ "$nodes" = "$nev" ] || fail "built-in lineage: $nodes nodes for $nev evaluated programs"
# without bound.json (given the database file, its folder is still the
# workspace: use a copy elsewhere) the bound comes from the root's metrics
mkdir -p "$work/nobound" && cp "$db" "$work/nobound/runs.db"
"$CUCO_BIN" report "$work/nobound" --run 1 > /dev/null || fail "report without bound.json failed"
grep -qF "From root program metrics" "$work/nobound/report.md" || fail "bound not taken from the root program"
grep -q "WARNING" "$work/nobound/report.md" && fail "a warning appeared without bound.json"

# a warning recorded with the run (runs.warning, written by cuco evolve from
# bound.json) is shown even when bound.json is gone
mkdir -p "$work/recorded" && cp "$db" "$work/recorded/runs.db"
sqlite3 "$work/recorded/runs.db" "ALTER TABLE runs ADD COLUMN warning TEXT;" 2>/dev/null
sqlite3 "$work/recorded/runs.db" "UPDATE runs SET warning='the communication-removed program still passes verification' WHERE id=1;" \
  || fail "recording a warning"
"$CUCO_BIN" report "$work/recorded" --run 1 > /dev/null || fail "report with a recorded warning failed"
grep -q "WARNING:.*communication-removed program still passes" "$work/recorded/report.md" \
  || fail "the run's recorded warning is not shown"

# re-timings recorded with the run (schema 5): the count and the improvement
# that did not hold, with its single and its re-timed time
mkdir -p "$work/retimed" && cp "$db" "$work/retimed/runs.db"
sqlite3 "$work/retimed/runs.db" "CREATE TABLE retimings(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, generation INTEGER, challenger_id INTEGER, champion_id INTEGER, claimed_ms REAL, challenger_ms REAL, champion_ms REAL, rounds INTEGER, runs INTEGER, held INTEGER, note TEXT, created_at REAL);
INSERT INTO retimings VALUES(1,1,1,5,1,3.25,9.5,8.0,2,4,0,NULL,0);
INSERT INTO retimings VALUES(2,1,2,6,1,7.0,7.5,8.0,2,4,1,NULL,0);" || fail "recording re-timings"
"$CUCO_BIN" report "$work/retimed" --run 1 > /dev/null || fail "report with re-timings failed"
grep -qF "2 apparent improvements were re-timed beside the run's best (8 runs, each verified again): 1 held." "$work/retimed/report.md" \
  || fail "re-timing counts not in report.md"
grep -qF "Did not hold: #5: measured 3.2500 ms once, 9.5000 ms re-timed (best #1: 8.0000 ms)." "$work/retimed/report.md" \
  || fail "the improvement that did not hold is not named"
grep -q 'id="retiming"' "$work/retimed/report.html" || fail "re-timing paragraph not in report.html"
grep -qi "re-tim" "$work/out/report.md" && fail "a database without re-timings mentions them"

# a failed run that started from --init: a banner with the reason, the
# fast path named as that start, no "yet" for a run that has ended
mkdir -p "$work/failed" && cp "$db" "$work/failed/runs.db"
sqlite3 "$work/failed/runs.db" "UPDATE runs SET status='failed' WHERE id=1;
UPDATE programs SET status='compile_error', mutator='init', error='prog.cu:3: error: expected ;',
  score=NULL, time_ms=NULL WHERE run_id=1 AND generation=0;
DELETE FROM programs WHERE run_id=1 AND generation>0;" || fail "recording a failed run"
"$CUCO_BIN" report "$work/failed" --run 1 > /dev/null || fail "report of a failed run failed"
grep -qF "**RUN FAILED:** the program the search started from (#1, given with --init) did not pass: compile_error: prog.cu:3: error: expected ;" \
  "$work/failed/report.md" || fail "a failed run has no banner with its reason"
grep -q 'id="run-failed"' "$work/failed/report.html" || fail "no failed-run banner in report.html"
grep -qF "none: the search's start (#1, given with --init) did not pass (compile_error)" \
  "$work/failed/report.md" || fail "the fast path line does not name the --init start"
grep -q "started from the workload's program\|yet" "$work/failed/report.md" \
  && fail "a finished run from --init is described as running or as started from the workload"

# default run: the latest; errors
"$CUCO_BIN" report "$work/ws" --out "$work/out3" > /dev/null || fail "default run failed"
grep -q "^# cuco report: other_demo (run 2)" "$work/out3/report.md" || fail "default run is not the latest"
"$CUCO_BIN" report "$work/missing" > /dev/null 2>&1; [ $? = 2 ] || fail "missing workspace: expected exit 2"
"$CUCO_BIN" report "$work/ws" --run 99 > /dev/null 2>"$work/err99"; [ $? = 2 ] || fail "unknown run: expected exit 2"
grep -q "no run 99" "$work/err99" || fail "unknown run: no clear message"
echo PASS
