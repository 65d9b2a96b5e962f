// app.js: the cuco web UI: polls the read-only JSON API of 'cuco serve' and
// draws the score plots, the lineage tree (SVG, by this script), the program
// table and the side panel. A URL fragment #program=ID opens a program's
// panel exactly as a click on its lineage node does.
"use strict";

const POLL_MS = 3000;
const SVGNS = "http://www.w3.org/2000/svg";
const ISLAND_COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#1098ad", "#5c940d", "#c2255c"];
const state = { run: null, summary: null, runs: [], programs: [], evaluations: [], sortKey: "id", sortDir: 1, selected: null, timer: null };

function $(id) { return document.getElementById(id); }
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  return e;
}
function fmt(v, digits) { return (v === null || v === undefined) ? "–" : Number(v).toFixed(digits === undefined ? 3 : digits); }
function islandColor(i) { return ISLAND_COLORS[((i % ISLAND_COLORS.length) + ISLAND_COLORS.length) % ISLAND_COLORS.length]; }

async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json().catch(() => ({ error: "bad JSON from " + path }));
  if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
  return body;
}
function runParam() { return state.run ? "?run=" + state.run : ""; }

// ---- plots ----

// Round ticks that cover [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of
// ten, 3 to 6 of them (1.2, 1.4, 1.6 rather than 0.45, 0.91, 1.36).
function niceTicks(lo, hi) {
  if (!(hi > lo)) { lo = Math.max(0, lo - 0.5); hi = lo + 1; }
  const raw = (hi - lo) / 4, p10 = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * p10).find(v => v >= raw);
  const start = Math.floor(lo / step) * step, end = Math.ceil(hi / step) * step;
  const ticks = [];
  for (let v = start; v <= end + step / 1000; v += step) ticks.push(Math.round(v / step) * step);
  return { lo: start, hi: end, ticks, digits: Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (step / p10 === 2.5 ? 1 : 0)) };
}

// A line/scatter plot: series [{name, color, points: [[x, y], ...], line: bool,
// dots: bool, hollow: bool}]; empty: the text shown when no series has a point.
function drawPlot(container, series, xLabel, yLabel, empty) {
  const W = 560, H = 280, L = 52, R = 12, T = 12, B = 40;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const all = series.flatMap(s => s.points);
  container.replaceChildren(svg);
  if (all.length === 0) {
    const t = svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#6b7280" });
    t.textContent = empty || "no scored programs";
    svg.appendChild(t);
    return;
  }
  let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
  const ymin = Math.min(...all.map(p => p[1])), ymax = Math.max(...all.map(p => p[1]));
  const pad = (ymax - ymin) * 0.05;
  const yAxis = niceTicks(Math.max(0, ymin - pad), ymax + pad);
  const y0 = yAxis.lo, y1 = yAxis.hi;
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const axis = svgEl("g", { class: "axes", stroke: "#9aa3af", fill: "none" });
  axis.appendChild(svgEl("path", { d: `M${L},${T} V${H - B} H${W - R}` }));
  svg.appendChild(axis);
  const ticks = svgEl("g", { class: "ticks", fill: "#6b7280", "font-size": "11" });
  for (const y of yAxis.ticks) {
    const t = svgEl("text", { x: L - 6, y: sy(y) + 4, "text-anchor": "end" });
    t.textContent = y.toFixed(yAxis.digits);
    ticks.appendChild(t);
    ticks.appendChild(svgEl("path", { d: `M${L},${sy(y)} H${W - R}`, stroke: "#eef0f3" }));
  }
  const xt = Math.min(8, Math.round(x1 - x0) || 1);
  for (let i = 0; i <= xt; i++) {
    const x = x0 + (x1 - x0) * i / xt;
    const t = svgEl("text", { x: sx(x), y: H - B + 15, "text-anchor": "middle" });
    t.textContent = Number.isInteger(x) ? x : x.toFixed(1);
    ticks.appendChild(t);
  }
  const xl = svgEl("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" });
  xl.textContent = xLabel;
  ticks.appendChild(xl);
  const yl = svgEl("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` });
  yl.textContent = yLabel;
  ticks.appendChild(yl);
  svg.appendChild(ticks);
  series.forEach((s, k) => {
    const g = svgEl("g", { class: "series", "data-name": s.name });
    if (s.line && s.points.length > 0) {
      const d = s.points.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ");
      g.appendChild(svgEl("path", { class: "line", d, fill: "none", stroke: s.color, "stroke-width": 2 }));
    }
    if (s.dots)
      for (const p of s.points) {
        const c = svgEl("circle", { class: "pt" + (s.hollow ? " held-back" : ""), cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 3.5,
          fill: s.hollow ? "none" : s.color, stroke: s.hollow ? s.color : "none" });
        const title = svgEl("title");
        title.textContent = `${s.name}: ${p[0]} → ${fmt(p[1])}`;
        c.appendChild(title);
        g.appendChild(c);
      }
    const lg = svgEl("text", { x: L + 8, y: T + 12 + 14 * k, fill: s.color, "font-size": "11" });
    lg.textContent = s.name;
    g.appendChild(lg);
    svg.appendChild(g);
  });
}

function drawEvalPlot() {
  const ev = state.evaluations;
  const ok = ev.filter(e => e.score !== null && e.status === "ok");
  const scored = ok.filter(e => !e.held_back).map(e => [e.n, e.score]);
  const held = ok.filter(e => e.held_back).map(e => [e.n, e.score]);
  const best = ev.filter(e => e.best !== null).map(e => [e.n, e.best]);
  const series = [
    { name: "best so far", color: "#1d2430", points: best, line: true, dots: false },
    { name: "score", color: "#2f6fde", points: scored, line: false, dots: true },
  ];
  if (held.length) series.push({ name: "did not hold when re-timed", color: "#2f6fde", points: held, line: false, dots: true, hollow: true });
  drawPlot($("plot-evals"), series, "evaluation", "speedup", emptyPlotText());
}

function drawGenerationPlot() {
  const byIsland = new Map();
  for (const p of state.programs) {
    if (p.status !== "ok" || p.score === null || p.held_back) continue;
    if (!byIsland.has(p.island)) byIsland.set(p.island, new Map());
    const g = byIsland.get(p.island);
    g.set(p.generation, Math.max(g.get(p.generation) || 0, p.score));
  }
  const series = [...byIsland.keys()].sort((a, b) => a - b).map(i => ({
    name: "island " + i, color: islandColor(i), line: true, dots: true,
    points: [...byIsland.get(i).entries()].sort((a, b) => a[0] - b[0]),
  }));
  drawPlot($("plot-gens"), series, "generation", "best speedup", emptyPlotText());
}

// ---- lineage tree: x = generation, one lane block per island ----

function drawLineage() {
  const progs = state.programs;
  const box = $("lineage");
  if (progs.length === 0) { box.replaceChildren(el("p", { class: "muted" }, "no programs yet")); return; }
  const maxGen = Math.max(...progs.map(p => p.generation));
  const islands = [...new Set(progs.map(p => p.island))].sort((a, b) => a - b);
  // rows: within an island, programs of one generation stack downwards
  const rowsPerIsland = new Map();
  const pos = new Map();
  let yCursor = 0;
  const DX = 110, DY = 30, X0 = 60, Y0 = 30;
  for (const isl of islands) {
    const counts = new Map();
    const mine = progs.filter(p => p.island === isl);
    for (const p of mine) {
      const k = counts.get(p.generation) || 0;
      counts.set(p.generation, k + 1);
      pos.set(p.id, { x: X0 + p.generation * DX, y: Y0 + (yCursor + k) * DY });
    }
    const rows = Math.max(1, ...counts.values());
    rowsPerIsland.set(isl, { start: yCursor, rows });
    yCursor += rows + 1;
  }
  const W = X0 + maxGen * DX + 80, H = Y0 + yCursor * DY;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  for (const isl of islands) {
    const r = rowsPerIsland.get(isl);
    const t = svgEl("text", { x: 4, y: Y0 + r.start * DY + 4, fill: islandColor(isl), "font-size": "11" });
    t.textContent = "island " + isl;
    svg.appendChild(t);
  }
  for (let g = 0; g <= maxGen; g++) {
    const t = svgEl("text", { x: X0 + g * DX, y: 12, "text-anchor": "middle", fill: "#6b7280", "font-size": "11" });
    t.textContent = "gen " + g;
    svg.appendChild(t);
  }
  const edges = svgEl("g", { class: "edges", fill: "none" });
  for (const p of progs)
    for (const [par, dashed] of [[p.parent_id, false], [p.second_parent_id, true]]) {
      if (!par || !pos.has(par)) continue;
      const a = pos.get(par), b = pos.get(p.id);
      edges.appendChild(svgEl("path", {
        class: "edge", "data-from": par, "data-to": p.id, stroke: dashed ? "#adb5bd" : "#868e96",
        "stroke-dasharray": dashed ? "4 3" : "none",
        d: `M${a.x},${a.y} C${(a.x + b.x) / 2},${a.y} ${(a.x + b.x) / 2},${b.y} ${b.x},${b.y}`,
      }));
    }
  svg.appendChild(edges);
  const best = state.summary && state.summary.best ? state.summary.best.id : null;  // the run's best (run_view)
  for (const p of progs) {
    const c = pos.get(p.id);
    const g = svgEl("g", { class: "node" + (state.selected === p.id ? " selected" : ""), "data-id": p.id, id: "node-" + p.id });
    const ok = p.status === "ok";
    g.appendChild(svgEl("circle", {
      cx: c.x, cy: c.y, r: p.id === best ? 9 : 7,
      fill: ok && !p.held_back ? islandColor(p.island) : (ok || p.status === "pending" ? "#fff" : "#fbe3e1"),
      stroke: ok ? (p.held_back ? islandColor(p.island) : "#1d2430") : "#c0362c", "stroke-width": 1.2,
    }));
    const t = svgEl("text", { x: c.x + 11, y: c.y + 4, "font-size": "10", fill: ok ? "#1d2430" : "#c0362c" });
    t.textContent = "#" + p.id + (ok ? " " + fmt(p.score, 2) + "×" + (p.held_back ? " (did not hold)" : "") : " " + p.status);
    g.appendChild(t);
    const title = svgEl("title");
    title.textContent = `program ${p.id} (${p.mutator || "?"}, gen ${p.generation}, island ${p.island}): ${p.status}`;
    g.appendChild(title);
    g.addEventListener("click", () => selectProgram(p.id));
    svg.appendChild(g);
  }
  box.replaceChildren(svg);
}

// ---- table ----

function drawTable() {
  const key = state.sortKey, dir = state.sortDir;
  const rows = [...state.programs].sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return a.id - b.id;
    if (x === null || x === undefined) return 1;  // missing values last either way
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
  const tbody = $("programs").querySelector("tbody");
  tbody.replaceChildren(...rows.map(p => {
    const tr = el("tr", { class: "clickable", "data-id": p.id });
    tr.appendChild(el("td", {}, p.id));
    tr.appendChild(el("td", {}, p.generation));
    tr.appendChild(el("td", {}, p.island));
    tr.appendChild(el("td", {}, p.mutator || ""));
    tr.appendChild(el("td", { class: p.status === "ok" ? "status-ok" : "status-bad" }, p.status));
    tr.appendChild(el("td", p.held_back ? { class: "held-back", title: "re-timed beside the run's best and did not hold: not counted" } : {},
      p.score === null ? "–" : fmt(p.score) + "×" + (p.held_back ? " (did not hold)" : "")));
    tr.appendChild(el("td", {}, fmt(p.time_ms)));
    tr.appendChild(el("td", { class: "err", title: p.error_line || "" }, p.error_line || ""));
    tr.addEventListener("click", () => selectProgram(p.id));
    return tr;
  }));
  for (const th of $("programs").querySelectorAll("th[data-key]")) {
    th.classList.toggle("sorted-asc", th.dataset.key === key && dir > 0);
    th.classList.toggle("sorted-desc", th.dataset.key === key && dir < 0);
  }
}

// ---- summary, failures, spend ----

function card(label, value, id, title) {
  const d = el("div", { class: "card", id: id || "" });
  if (title) d.setAttribute("title", title);
  d.appendChild(el("div", { class: "v" }, value));
  d.appendChild(el("div", { class: "k" }, label));
  return d;
}

// Why the summary has no fast-path result.
function fastPathAbsent(s) {
  if (!s.start) return "fast path: none (the run has no program yet)";
  if (s.start.mutator === "seed") return "fast path: none (started from the workload's program)";
  return `fast path: none (the start #${s.start.id}, given with --init, did not pass: ${s.start.status})`;
}

// The text of a plot without points: a finished run will get none.
function emptyPlotText() {
  return state.summary && state.summary.run.status === "running" ? "no scored programs yet" : "no scored programs";
}

function drawSummary(s) {
  $("run-title").textContent = `${s.run.workload} (run ${s.run.id}, ${s.run.status})`;
  const cards = [card("baseline (ms)", fmt(s.baseline_ms), "card-baseline", s.baseline_source)];
  const x = v => (v === null || v === undefined) ? "–" : fmt(v) + "×";
  if (s.fast_path) cards.push(card(`fast path #${s.fast_path.id} (${fmt(s.fast_path.time_ms)} ms)`, x(s.fast_path.speedup), "card-fast"));
  else cards.push(card(fastPathAbsent(s), "–", "card-fast"));
  if (s.best) cards.push(card(`best #${s.best.id} (${fmt(s.best.time_ms)} ms)`, x(s.best.speedup), "card-best"));
  if (s.bound) {
    cards.push(card(`overlap bound (ms, ${s.bound.source})`, fmt(s.bound.bound_ms), "card-bound",
      `max(compute ${fmt(s.bound.compute_ms)} ms, communication ${fmt(s.bound.comm_ms)} ms)`));
    if (s.bound.ceiling !== null) cards.push(card("ceiling (baseline / bound)", fmt(s.bound.ceiling) + "×", "card-ceiling"));
    if (s.bound.note) cards.push(card(s.bound.note, "n/a", "card-bound-note"));
    if (s.bound.gap_closed !== null) cards.push(card("gap closed by the best", (100 * s.bound.gap_closed).toFixed(1) + "%", "card-gap",
      "(baseline - best) / (baseline - bound)"));
  }
  const sbs = s.side_by_side;
  if (sbs && sbs.speedups) {
    const best = sbs.speedups.best_vs_seed ?? sbs.speedups.gen_0_vs_seed;
    if (best !== undefined)
      cards.push(card(`side by side, ${sbs.rounds} rounds${sbs.stale ? " (stale)" : ""}`, x(best), "card-confirm",
        "the seed, gen_0 and the best timed again together in interleaved rounds (confirm.json): the speedup to quote"));
  }
  if (s.to_95pct) cards.push(card("evaluations to 95% of the best's gain", s.to_95pct.evaluations, "card-t95",
    s.to_95pct.seconds === null ? `program #${s.to_95pct.program_id}` :
      `program #${s.to_95pct.program_id}, ${fmt(s.to_95pct.seconds)} s`));
  if (s.retiming && s.retiming.retimings > 0)
    cards.push(card("re-timed improvements (held)", `${s.retiming.retimings} (${s.retiming.held})`, "card-retimed",
      `each re-timed beside the run's best before it counted (${s.retiming.runs} runs); ` +
      (s.retiming.not_held.length ? `did not hold: ${s.retiming.not_held.map(r => "#" + r.program_id).join(", ")}` : "all held")));
  cards.push(card("programs", s.programs.total, "card-programs"));
  cards.push(card(`spend (${s.llm_calls} LLM calls)`, "$" + fmt(s.spend_usd, 4), "card-spend"));
  $("cards").replaceChildren(...cards);
  const w = $("warnings");
  const banners = (s.failed ? [el("div", { class: "warning", id: "run-failed" }, "⚠ RUN FAILED: " + s.failed)] : [])
    .concat(s.warnings.map(t => el("div", { class: "warning" }, "⚠ " + t)));
  w.hidden = banners.length === 0;
  w.replaceChildren(...banners);
  if (s.failures.length === 0) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 4, class: "muted" }, "no failed program"));
    $("failures").querySelector("tbody").replaceChildren(tr);
    return;
  }
  $("failures").querySelector("tbody").replaceChildren(...s.failures.map(f => {
    const tr = el("tr", { class: "clickable" });
    tr.appendChild(el("td", { class: "status-bad" }, f.status));
    tr.appendChild(el("td", {}, f.reason));
    tr.appendChild(el("td", {}, f.count));
    tr.appendChild(el("td", {}, "#" + f.example_id));
    tr.addEventListener("click", () => selectProgram(f.example_id));
    return tr;
  }));
}

function drawSpend(llm) {
  if (llm.models.length === 0) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 6, class: "muted" }, "no LLM call (offline mutators only)"));
    $("spend").querySelector("tbody").replaceChildren(tr);
    return;
  }
  $("spend").querySelector("tbody").replaceChildren(...llm.models.map(m => {
    const tr = el("tr");
    for (const v of [m.model, m.calls, m.failed, m.input_tokens, m.output_tokens, fmt(m.cost_usd, 4)]) tr.appendChild(el("td", {}, v));
    return tr;
  }));
}

// Each knob value's effect alone and the strongest two-knob interactions,
// measured over the run's programs (the same lines as cuco report's).
function drawEffects(fx) {
  if (fx.lines.length === 0) { $("effects").replaceChildren(el("p", { class: "muted" }, "too few measured programs yet")); return; }
  $("effects").replaceChildren(
    el("p", { class: "muted" }, `from ${fx.programs} measured programs (least squares of log time, ± one standard error)`),
    el("pre", { id: "effects-lines" }, fx.lines.join("\n")));
}

function drawMeta(meta) {
  if (meta.summaries.length === 0) { $("meta").replaceChildren(el("p", { class: "muted" }, "none yet")); return; }
  $("meta").replaceChildren(...meta.summaries.map(m => {
    const d = el("div", { class: "meta" });
    d.appendChild(el("h3", {}, "generation " + m.generation));
    d.appendChild(el("pre", {}, m.text));
    return d;
  }));
}

// ---- side panel ----

function renderDiff(pre, diff) {
  pre.replaceChildren();
  if (!diff) { pre.textContent = "(no parent: nothing to compare)"; return; }
  for (const line of diff.split("\n")) {
    let cls = "";
    if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+") && !line.startsWith("+++")) cls = "add";
    else if (line.startsWith("-") && !line.startsWith("---")) cls = "del";
    pre.appendChild(el("span", cls ? { class: cls } : {}, line + (cls ? "" : "\n")));
  }
}

async function showProgram(id) {
  state.selected = id;
  for (const n of document.querySelectorAll(".node")) n.classList.toggle("selected", Number(n.dataset.id) === id);
  const panel = $("panel");
  panel.hidden = false;
  panel.dataset.programId = id;
  $("panel-title").textContent = "program #" + id;
  try {
    const p = await api("/api/programs/" + id);
    if (state.selected !== id) return;
    if (p.run_id !== state.run) { state.run = p.run_id; refresh(); }  // a link into another run
    $("panel-title").textContent = `program #${p.id}: ${p.status}${p.score !== null ? " — " + fmt(p.score) + "×" : ""}${p.held_back ? " (did not hold when re-timed)" : ""}`;
    const facts = el("p");
    facts.textContent = `generation ${p.generation}, island ${p.island}, mutator ${p.mutator || "?"}, ` +
      `parent ${p.parent_id ? "#" + p.parent_id : "none"}` + (p.second_parent_id ? ` + #${p.second_parent_id}` : "") +
      `, time ${fmt(p.time_ms)} ms` + (p.description ? ` — ${p.description}` : "");
    $("panel-facts").replaceChildren(facts);
    $("panel-error").textContent = p.error || "(none)";
    renderDiff($("panel-diff"), p.diff);
    $("panel-metrics").textContent = JSON.stringify({ metrics: p.metrics, knobs: p.knobs }, null, 2);
    $("panel-code").textContent = p.code || "";
  } catch (err) {
    $("panel-facts").textContent = "cannot load program " + id + ": " + err.message;
  }
}

// A click sets the fragment; the fragment (also when typed or linked) opens the panel.
function selectProgram(id) {
  const want = "#program=" + id;
  if (location.hash === want) showProgram(id);
  else location.hash = want;
}
function fromFragment() {
  const m = /^#program=(\d+)$/.exec(location.hash);
  if (m) showProgram(Number(m[1]));
}

// ---- polling ----

async function refresh() {
  try {
    const runs = await api("/api/runs");
    state.runs = runs.runs;
    const sel = $("run-select");
    if (state.run === null && runs.runs.length) state.run = runs.runs[runs.runs.length - 1].id;
    if (sel.options.length !== runs.runs.length)
      sel.replaceChildren(...runs.runs.map(r => el("option", { value: r.id }, `${r.id}: ${r.workload}`)));
    sel.value = state.run;
    if (state.run === null) { $("status-line").textContent = "no run in the database yet"; return; }
    const [summary, evals, programs, llm, meta, effects] = await Promise.all([
      api("/api/summary" + runParam()), api("/api/evaluations" + runParam()),
      api("/api/programs" + runParam()), api("/api/llm" + runParam()), api("/api/meta" + runParam()),
      api("/api/effects" + runParam()),
    ]);
    state.evaluations = evals.evaluations;
    state.programs = programs.programs;
    state.summary = summary;
    drawSummary(summary);
    drawEvalPlot();
    drawGenerationPlot();
    drawLineage();
    drawTable();
    drawSpend(llm);
    drawEffects(effects);
    drawMeta(meta);
    const plural = (n, w) => `${n} ${w}${n === 1 ? "" : "s"}`;
    const live = summary.run.status === "running" ? `live, every ${POLL_MS / 1000} s; ` : "";
    $("status-line").textContent = `${plural(programs.count, "program")}, ${evals.count} evaluated — ${live}updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("status-line").textContent = "cannot reach the API: " + err.message;
  }
}

// A linked program shows its own run from the first paint.
async function init() {
  const m = /^#program=(\d+)$/.exec(location.hash);
  if (m) {
    try { state.run = (await api("/api/programs/" + m[1])).run_id; } catch (err) { /* shown by fromFragment */ }
  }
  await refresh();
  fromFragment();
}

function start() {
  for (const th of $("programs").querySelectorAll("th[data-key]"))
    th.addEventListener("click", () => {
      const k = th.dataset.key;
      if (state.sortKey === k) state.sortDir = -state.sortDir;
      else { state.sortKey = k; state.sortDir = (k === "score") ? -1 : 1; }
      drawTable();
    });
  $("run-select").addEventListener("change", e => { state.run = Number(e.target.value); refresh(); });
  $("panel-close").addEventListener("click", () => {
    $("panel").hidden = true;
    state.selected = null;
    history.replaceState(null, "", location.pathname + location.search);
    for (const n of document.querySelectorAll(".node.selected")) n.classList.remove("selected");
  });
  window.addEventListener("hashchange", fromFragment);
  init();
  state.timer = setInterval(refresh, POLL_MS);
}

start();
