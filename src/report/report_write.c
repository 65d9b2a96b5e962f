/* report_write.c: 'cuco report': report.md and a self-contained report.html
 * (inline CSS and SVG, nothing fetched from elsewhere) with the baseline, the
 * fast-path result, the best program and its speedup, the overlap bound and
 * the share of the gap closed, warnings left by other tools, the search
 * curve and the lineage, failures, LLM spend and the diff from the baseline
 * to the best; and the best program exported as best.<ext>. */
#include "cuco/report.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/db.h"
#include "cuco/diff.h"
#include "cuco/doe.h"
#include "cuco/fs.h"

void report_result_free(cuco_report_result *r)
{
    free(r->md_path);
    free(r->html_path);
    free(r->best_path);
    memset(r, 0, sizeof *r);
}

static void html_escape(cuco_buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            cuco_buf_puts(b, "&lt;");
            break;
        case '>':
            cuco_buf_puts(b, "&gt;");
            break;
        case '&':
            cuco_buf_puts(b, "&amp;");
            break;
        case '"':
            cuco_buf_puts(b, "&quot;");
            break;
        default:
            cuco_buf_putc(b, *s);
        }
    }
}

/* Markdown table cells: no newlines, escaped pipes. */
static void md_cell(cuco_buf *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            cuco_buf_puts(b, "\\|");
        else if (*s == '\n' || *s == '\r')
            cuco_buf_putc(b, ' ');
        else
            cuco_buf_putc(b, *s);
    }
}

static const char *jstr(json_t *o, const char *k, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : dflt;
}

static double jnum(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* A program's speedup over the baseline as text ("1.250x", or "-" when the
 * baseline was not measured); returned by value, so two fit in one printf. */
typedef struct speedup_str {
    char s[48];
} speedup_str;
static speedup_str speedup_text_of(json_t *program, const char *times)
{
    speedup_str t;
    double x = jnum(program, "speedup", -1);
    if (x > 0)
        snprintf(t.s, sizeof t.s, "%.3f%s", x, times);
    else
        snprintf(t.s, sizeof t.s, "-");
    return t;
}
#define speedup_text(p, times) (speedup_text_of((p), (times)).s)

/* One program's code and mutator; strings malloc'd (caller frees). */
static int program_code(sqlite3 *h, int64_t id, char **code, cuco_err *e)
{
    sqlite3_stmt *st;
    *code = NULL;
    if (sqlite3_prepare_v2(h, "SELECT code FROM programs WHERE id=?", -1, &st, NULL) != SQLITE_OK)
        return cuco_err_set(e, CUCO_EDB, "database: %s", sqlite3_errmsg(h));
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        *code = cuco_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return 0;
}

/* best.<ext>: from the run config's evolve_file when it names one; else .cu
 * for CUDA code, .c otherwise. Caller frees. */
static char *best_extension(json_t *summary, const char *code)
{
    json_t *cfg = json_object_get(json_object_get(summary, "run"), "config");
    const char *ef = json_string_value(json_object_get(cfg, "evolve_file"));
    if (ef) {
        const char *slash = strrchr(ef, '/');
        const char *dot = strrchr(slash ? slash : ef, '.');
        if (dot && dot[1] &&
            strspn(dot + 1, "abcdefghijklmnopqrstuvwxyz+0123456789") == strlen(dot + 1))
            return cuco_strdup(dot + 1);
    }
    if (code && (strstr(code, "__global__") || strstr(code, "<<<") || strstr(code, "cuda")))
        return cuco_strdup("cu");
    return cuco_strdup("c");
}

static void spend_rows(sqlite3 *h, int64_t run_id, cuco_buf *md, cuco_buf *html)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h,
                           "SELECT model, count(*), coalesce(sum(input_tokens),0),"
                           " coalesce(sum(output_tokens),0), coalesce(sum(cost_usd),0)"
                           " FROM llm_calls WHERE run_id=? GROUP BY model ORDER BY 5 DESC, model",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, run_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *model = (const char *)sqlite3_column_text(st, 0);
        cuco_buf_puts(md, "| ");
        md_cell(md, model ? model : "?");
        cuco_buf_printf(md, " | %lld | %lld | %lld | %.4f |\n",
                        (long long)sqlite3_column_int64(st, 1),
                        (long long)sqlite3_column_int64(st, 2),
                        (long long)sqlite3_column_int64(st, 3), sqlite3_column_double(st, 4));
        cuco_buf_puts(html, "<tr><td>");
        html_escape(html, model ? model : "?");
        cuco_buf_printf(html, "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%.4f</td></tr>\n",
                        (long long)sqlite3_column_int64(st, 1),
                        (long long)sqlite3_column_int64(st, 2),
                        (long long)sqlite3_column_int64(st, 3), sqlite3_column_double(st, 4));
    }
    sqlite3_finalize(st);
}

static const char html_style[] =
    "body{font:14px/1.45 system-ui,sans-serif;color:#1d2430;max-width:1100px;margin:1.5em auto;"
    "padding:0 1em}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid "
    "#d8dde5}table{border-collapse:collapse}th,td{text-align:left;padding:.25em .7em;border-bottom:"
    "1px solid "
    "#d8dde5}td.num{text-align:right;font-variant-numeric:tabular-nums}.warning{background:"
    "#fff4d6;border:2px solid #e0a800;border-radius:6px;padding:.6em "
    ".9em;font-weight:600;margin:.6em"
    " 0}pre{background:#f6f7f9;padding:.6em;overflow-x:auto;font-size:12px}.add{background:#e6ffec;"
    "color:#116329;display:block}.del{background:#ffebe9;color:#82071e;display:block}.hunk{color:"
    "#2f6fde;display:block}.muted{color:#6b7280}figure{margin:1em 0}figcaption{color:#6b7280}"
    "svg{max-width:100%;height:auto}";

/* The side-by-side times of 'cuco run' (confirm.json) as a markdown table
 * and an HTML table; nothing when the summary has none. */
/* The confirm step's bound paragraph: the bound from the first program's
 * own breakdown, its ceiling (or why none applies), and each program's
 * share of the gap (or why the bound does not apply to it). */
static void confirm_bound_text(json_t *b, const char *first_label, cuco_buf *md, cuco_buf *html)
{
    json_t *ceiling = json_object_get(b, "ceiling");
    char *head = cuco_sprintf("Overlap bound from the %s's own breakdown in these runs: compute "
                              "%.4f ms, communication %.4f ms, bound %.4f ms",
                              first_label, jnum(b, "compute_ms", 0), jnum(b, "comm_ms", 0),
                              jnum(b, "bound_ms", 0));
    char *tail = json_is_number(ceiling)
                     ? cuco_sprintf(", ceiling %.3fx.", json_number_value(ceiling))
                     : cuco_sprintf(": %s.", jstr(b, "note", "no bound applies"));
    cuco_buf_printf(md, "\n%s%s", head, tail);
    cuco_buf_puts(html, "<p>");
    html_escape(html, head);
    html_escape(html, tail);
    free(head);
    free(tail);
    const char *label;
    json_t *g;
    json_object_foreach(json_object_get(b, "gap_closed"), label, g)
    {
        char *line =
            json_is_number(g)
                ? cuco_sprintf(" Gap closed by %s: %.1f%%.", label, 100 * json_number_value(g))
                : cuco_sprintf(" %s is faster than the computation alone: the "
                               "computation changed, the bound does not apply.",
                               label);
        cuco_buf_puts(md, line);
        html_escape(html, line);
        free(line);
    }
    cuco_buf_puts(md, "\n");
    cuco_buf_puts(html, "</p>\n");
}

static void side_by_side_write(json_t *s, cuco_buf *md, cuco_buf *html)
{
    json_t *c = json_object_get(s, "side_by_side");
    if (!json_is_object(c))
        return;
    json_t *progs = json_object_get(c, "programs");
    double ref = -1;
    json_t *first = json_array_get(progs, 0);
    if (first && !strcmp(jstr(first, "status", ""), "ok"))
        ref = jnum(first, "median_ms", -1);
    long long rounds = (long long)json_integer_value(json_object_get(c, "rounds"));
    cuco_buf_printf(md,
                    "\n## Side by side\n\nThe programs timed again together (confirm.json):"
                    " %lld interleaved rounds, each program verified and benchmarked every"
                    " round; median (min .. max) of its rounds. These are the speedups to"
                    " quote: the ones above come from the search's own timings, taken at"
                    " different moments.\n\n| program | median (ms) | min .. max | vs %s |\n"
                    "|---|---:|---:|---:|\n",
                    rounds, first ? jstr(first, "label", "first") : "first");
    cuco_buf_printf(html,
                    "<h2>Side by side</h2>\n<p>The programs timed again together (confirm.json):"
                    " %lld interleaved rounds, each program verified and benchmarked every round;"
                    " median (min .. max). These are the speedups to quote: the ones above come"
                    " from the search's own timings, taken at different moments.</p>\n<table "
                    "id=\"side-by-side\">"
                    "<tr><th>program</th><th>median (ms)</th><th>min .. max</th><th>vs ",
                    rounds);
    html_escape(html, first ? jstr(first, "label", "first") : "first");
    cuco_buf_puts(html, "</th></tr>\n");
    size_t i;
    json_t *p;
    json_array_foreach(progs, i, p)
    {
        const char *label = jstr(p, "label", "?");
        const char *status = jstr(p, "status", "?");
        double med = jnum(p, "median_ms", -1);
        cuco_buf_puts(md, "| ");
        md_cell(md, label);
        cuco_buf_puts(html, "<tr><td>");
        html_escape(html, label);
        if (strcmp(status, "ok") || med <= 0) {
            cuco_buf_printf(md, " | %s | - | - |\n", status);
            cuco_buf_printf(html, "</td><td colspan=\"3\">%s</td></tr>\n", status);
            continue;
        }
        cuco_buf_printf(md, " | %.4f | %.4f .. %.4f | ", med, jnum(p, "min_ms", 0),
                        jnum(p, "max_ms", 0));
        if (ref > 0)
            cuco_buf_printf(md, "%.3fx |\n", ref / med);
        else
            cuco_buf_puts(md, "- |\n");
        cuco_buf_printf(html, "</td><td class=\"num\">%.4f</td><td class=\"num\">%.4f .. %.4f</td>",
                        med, jnum(p, "min_ms", 0), jnum(p, "max_ms", 0));
        if (ref > 0)
            cuco_buf_printf(html, "<td class=\"num\">%.3f&times;</td></tr>\n", ref / med);
        else
            cuco_buf_puts(html, "<td>-</td></tr>\n");
    }
    cuco_buf_puts(html, "</table>\n");
    json_t *b = json_object_get(c, "bound");
    if (json_is_object(b))
        confirm_bound_text(b, first ? jstr(first, "label", "first") : "first", md, html);
    if (json_is_true(json_object_get(c, "stale"))) {
        const char *note = "The search's best program is none of these: the search went on"
                           " after they were timed (run 'cuco run' again to time it).";
        cuco_buf_printf(md, "\n%s\n", note);
        cuco_buf_puts(html, "<p class=\"muted\">");
        html_escape(html, note);
        cuco_buf_puts(html, "</p>\n");
    }
}

/* "95% of the best's gain ... after N evaluations and S s" (caller frees),
 * NULL when the summary has no such figure. */
static char *to_95_text(json_t *s)
{
    json_t *t = json_object_get(s, "to_95pct");
    if (!json_is_object(t))
        return NULL;
    double secs = jnum(t, "seconds", -1);
    char *when = secs >= 0 ? cuco_sprintf(" and %.0f s", secs) : cuco_strdup("");
    char *text = cuco_sprintf("95%% of the best program's gain over the start (score %.3f) was "
                              "first reached by program #%lld, after %lld evaluations%s.",
                              jnum(t, "threshold_score", 0),
                              (long long)json_integer_value(json_object_get(t, "program_id")),
                              (long long)json_integer_value(json_object_get(t, "evaluations")),
                              when ? when : "");
    free(when);
    return text;
}

/* What the re-timing of apparent improvements found (caller frees), NULL
 * when the summary has none. */
static char *retiming_text(json_t *s)
{
    json_t *r = json_object_get(s, "retiming");
    if (!json_is_object(r))
        return NULL;
    long long n = (long long)json_integer_value(json_object_get(r, "retimings"));
    json_t *rounds =
        json_object_get(json_object_get(json_object_get(s, "run"), "config"), "retime_rounds");
    if (n == 0 && !(json_is_integer(rounds) && json_integer_value(rounds) > 0))
        return cuco_strdup("Re-timing of apparent improvements was off: every time above is a"
                           " single measurement.");
    if (n == 0)
        return cuco_strdup("No candidate's single measurement beat the best's, so nothing was"
                           " re-timed.");
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b,
                    "%lld apparent improvement%s re-timed beside the run's best (%lld runs,"
                    " each verified again): %lld held. Times above are medians of all of a"
                    " program's timings.",
                    n, n == 1 ? " was" : "s were",
                    (long long)json_integer_value(json_object_get(r, "runs")),
                    (long long)json_integer_value(json_object_get(r, "held")));
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(r, "not_held"), i, x)
    {
        const char *note = jstr(x, "note", NULL);
        double re = jnum(x, "retimed_ms", -1);
        cuco_buf_printf(&b, "%s #%lld: measured %.4f ms once, ", i ? ";" : " Did not hold:",
                        (long long)json_integer_value(json_object_get(x, "program_id")),
                        jnum(x, "claimed_ms", 0));
        if (re > 0)
            cuco_buf_printf(&b, "%.4f ms re-timed (best #%lld: %.4f ms)", re,
                            (long long)json_integer_value(json_object_get(x, "best_id")),
                            jnum(x, "best_ms", 0));
        else
            cuco_buf_printf(&b, "%s", note ? note : "failed when re-timed");
    }
    if (json_array_size(json_object_get(r, "not_held")))
        cuco_buf_puts(&b, ".");
    return cuco_buf_detach(&b);
}

/* <p id="ID">TEXT</p>, escaped; nothing when text is NULL. */
static void html_paragraph(cuco_buf *html, const char *id, const char *text)
{
    if (!text)
        return;
    cuco_buf_printf(html, "<p id=\"%s\">", id);
    html_escape(html, text);
    cuco_buf_puts(html, "</p>\n");
}

/* The run's knob effects table (cuco/doe.h) as "- " lines under a sentence;
 * NULL when the run has no knobs or too few measured programs. Caller frees. */
static char *effects_text(const char *db_path, int64_t run_id)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_buf lines = CUCO_BUF_INIT, b = CUCO_BUF_INIT;
    size_t n_obs = 0;
    if (cuco_effects_lines_of_run(db_path, run_id, "- ", 4, &lines, &n_obs, &e) == 0 && lines.len)
        cuco_buf_printf(&b,
                        "Knob effects, from %zu measured programs (least squares of log time):"
                        " the change of time when a knob takes a value alone, and with another"
                        " knob's value, ± one standard error:\n\n%s",
                        n_obs, cuco_buf_str(&lines));
    cuco_buf_free(&lines);
    cuco_err_clear(&e);
    return b.len ? cuco_buf_detach(&b) : NULL;
}

static void html_diff(cuco_buf *html, const char *diff)
{
    const char *p = diff;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *line = cuco_strndup(p, n);
        const char *cls = NULL;
        if (!strncmp(line, "@@", 2))
            cls = "hunk";
        else if (line[0] == '+' && strncmp(line, "+++", 3))
            cls = "add";
        else if (line[0] == '-' && strncmp(line, "---", 3))
            cls = "del";
        if (cls)
            cuco_buf_printf(html, "<span class=\"%s\">", cls);
        html_escape(html, line);
        cuco_buf_puts(html, cls ? "</span>" : "\n");
        free(line);
        p += n + (nl ? 1 : 0);
    }
}

/* A report being written: report.md and report.html grow side by side,
 * section by section, from the run's summary. */
typedef struct report_doc {
    cuco_buf md, html;
    json_t *s; /* the summary (report_summary) */
    int64_t run_id, root_id, best_id;
    double baseline;
} report_doc;

/* The run's state in plain text (no markup: it goes in both files). */
static void run_state_text(json_t *s, cuco_buf *state)
{
    json_t *run = json_object_get(s, "run"), *programs = json_object_get(s, "programs");
    const char *run_status = jstr(run, "status", "?");
    cuco_buf_printf(state, "Run status: %s. Programs: %lld", run_status,
                    (long long)json_integer_value(json_object_get(programs, "total")));
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(programs, "by_status"), key, val)
        cuco_buf_printf(state, ", %s %lld", key, (long long)json_integer_value(val));
    cuco_buf_puts(state, ".");
    if (!strcmp(run_status, "running"))
        cuco_buf_puts(state, " The run is still going: this report is a snapshot; run cuco report"
                             " again when it has ended.");
}

/* Title, the run's state, and the banners: why a failed run failed, then
 * the warnings. */
static void write_head(report_doc *d)
{
    const char *workload =
        json_string_value(json_object_get(json_object_get(d->s, "run"), "workload"));
    cuco_buf state = CUCO_BUF_INIT;
    run_state_text(d->s, &state);
    cuco_buf_printf(&d->md, "# cuco report: %s (run %lld)\n\n%s\n\n## Result\n\n",
                    workload ? workload : "?", (long long)d->run_id, cuco_buf_str(&state));
    cuco_buf_puts(
        &d->html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>cuco report: ");
    html_escape(&d->html, workload);
    cuco_buf_printf(&d->html,
                    "</title>\n<style>%s</style></head><body>\n<h1>cuco report: ", html_style);
    html_escape(&d->html, workload);
    cuco_buf_printf(&d->html, " <span class=\"muted\">(run %lld)</span></h1>\n<p id=\"run-state\">",
                    (long long)d->run_id);
    html_escape(&d->html, cuco_buf_str(&state));
    cuco_buf_puts(&d->html, "</p>\n<h2>Result</h2>\n");
    cuco_buf_free(&state);
    const char *failed = json_string_value(json_object_get(d->s, "failed"));
    if (failed) {
        cuco_buf_printf(&d->md, "> **RUN FAILED:** %s\n>\n", failed);
        cuco_buf_puts(&d->html, "<div class=\"warning\" id=\"run-failed\">&#9888; RUN FAILED: ");
        html_escape(&d->html, failed);
        cuco_buf_puts(&d->html, "</div>\n");
    }
    json_t *warnings = json_object_get(d->s, "warnings"), *val;
    size_t i;
    json_array_foreach(warnings, i, val)
    {
        cuco_buf_printf(&d->md, "> **WARNING:** %s\n>\n", json_string_value(val));
        cuco_buf_puts(&d->html, "<div class=\"warning\">&#9888; WARNING: ");
        html_escape(&d->html, json_string_value(val));
        cuco_buf_puts(&d->html, "</div>\n");
    }
    if (failed || json_array_size(warnings))
        cuco_buf_puts(&d->md, "\n");
}

/* Why there is no fast-path result (caller frees). */
static char *fast_path_absent_text(json_t *s)
{
    json_t *start = json_object_get(s, "start");
    if (!json_is_object(start))
        return cuco_strdup("none: the run has no program yet");
    if (!strcmp(jstr(start, "mutator", ""), "seed"))
        return cuco_strdup("none: the search started from the workload's own program");
    return cuco_sprintf("none: the search's start (#%lld, given with --init) did not pass (%s)",
                        (long long)json_integer_value(json_object_get(start, "id")),
                        jstr(start, "status", "?"));
}

/* The result table: baseline, fast path, best. */
static void write_result_table(report_doc *d)
{
    json_t *fast = json_object_get(d->s, "fast_path"), *best = json_object_get(d->s, "best");
    const char *status = jstr(json_object_get(d->s, "run"), "status", "?");
    const char *no_best =
        !strcmp(status, "running") ? "no correct program yet" : "no correct program";
    cuco_buf_puts(&d->md, "| program | time (ms) | speedup |\n|---|---:|---:|\n");
    cuco_buf_puts(
        &d->html,
        "<table id=\"result\"><tr><th>program</th><th>time (ms)</th><th>speedup</th></tr>\n");
    if (d->baseline > 0) {
        cuco_buf_printf(&d->md, "| baseline | %.3f | 1.000x |\n", d->baseline);
        cuco_buf_printf(&d->html,
                        "<tr><td>baseline</td><td class=\"num\">%.3f</td><td "
                        "class=\"num\">1.000&times;</td></tr>\n",
                        d->baseline);
    } else {
        cuco_buf_puts(&d->md, "| baseline | not measured | - |\n");
        cuco_buf_puts(&d->html, "<tr><td>baseline</td><td>not measured</td><td>-</td></tr>\n");
    }
    if (json_is_object(fast)) {
        long long id = (long long)json_integer_value(json_object_get(fast, "id"));
        cuco_buf_printf(&d->md, "| fast path (#%lld, generation 0) | %.3f | %s |\n", id,
                        jnum(fast, "time_ms", 0), speedup_text(fast, "x"));
        cuco_buf_printf(&d->html,
                        "<tr><td>fast path (#%lld, generation 0)</td><td class=\"num\">%.3f</td>"
                        "<td class=\"num\">%s</td></tr>\n",
                        id, jnum(fast, "time_ms", 0), speedup_text(fast, "&times;"));
    } else {
        char *why = fast_path_absent_text(d->s);
        cuco_buf_printf(&d->md, "| fast path | %s | - |\n", why ? why : "none");
        cuco_buf_puts(&d->html, "<tr><td>fast path</td><td colspan=\"2\">");
        html_escape(&d->html, why ? why : "none");
        cuco_buf_puts(&d->html, "</td></tr>\n");
        free(why);
    }
    if (json_is_object(best)) {
        long long gen = (long long)json_integer_value(json_object_get(best, "generation"));
        long long isl = (long long)json_integer_value(json_object_get(best, "island"));
        cuco_buf_printf(&d->md,
                        "| **best** (#%lld, generation %lld, island %lld, %s) | %.3f | **%s** |\n",
                        (long long)d->best_id, gen, isl, jstr(best, "mutator", "?"),
                        jnum(best, "time_ms", 0), speedup_text(best, "x"));
        cuco_buf_printf(&d->html, "<tr><td><b>best</b> (#%lld, generation %lld, island %lld, ",
                        (long long)d->best_id, gen, isl);
        html_escape(&d->html, json_string_value(json_object_get(best, "mutator")));
        cuco_buf_printf(&d->html,
                        ")</td><td class=\"num\">%.3f</td><td class=\"num\"><b>%s</b></td></tr>\n",
                        jnum(best, "time_ms", 0), speedup_text(best, "&times;"));
    } else {
        cuco_buf_printf(&d->md, "| best | %s | - |\n", no_best);
        cuco_buf_printf(&d->html, "<tr><td>best</td><td colspan=\"2\">%s</td></tr>\n", no_best);
    }
    cuco_buf_puts(&d->html, "</table>\n");
    if (d->baseline > 0) {
        cuco_buf_printf(&d->md, "\nBaseline: %s. Speedup = baseline time / program time.\n",
                        jstr(d->s, "baseline_source", "?"));
        cuco_buf_puts(&d->html, "<p class=\"muted\">Baseline: ");
        html_escape(&d->html, jstr(d->s, "baseline_source", "?"));
        cuco_buf_puts(&d->html, ". Speedup = baseline time / program time.</p>\n");
    }
}

/* The overlap bound of the baseline, its ceiling and the gap closed, or why
 * they do not apply (cuco/run_view.h). The side-by-side times of 'cuco run'
 * carry their own bound: when they do, that one is shown and this section
 * only points to it, so a report shows one bound. */
static void write_bound(report_doc *d)
{
    json_t *bound = json_object_get(d->s, "bound");
    json_t *sbs_bound = json_object_get(json_object_get(d->s, "side_by_side"), "bound");
    cuco_buf_puts(&d->md, "\n## Overlap bound\n\n");
    cuco_buf_puts(&d->html, "<h2>Overlap bound</h2>\n");
    if (json_is_object(sbs_bound)) {
        const char *t = "See the side-by-side times above: the bound from the seed's own"
                        " breakdown in those runs.";
        cuco_buf_printf(&d->md, "%s\n", t);
        cuco_buf_printf(&d->html, "<p>%s</p>\n", t);
        return;
    }
    if (!json_is_object(bound)) {
        cuco_buf_puts(&d->md, "Not known: neither bound.json nor the baseline program's metrics"
                              " give compute_ms and comm_ms.\n");
        cuco_buf_puts(&d->html, "<p class=\"muted\">Not known (no bound.json, no compute_ms/"
                                "comm_ms in the baseline's metrics).</p>\n");
        return;
    }
    const char *source = jstr(bound, "source", "?"), *note = jstr(bound, "note", NULL);
    cuco_buf_printf(&d->md,
                    "From %s: compute alone %.3f ms, communication alone %.3f ms, so the ideal"
                    " overlap takes max = **%.3f ms**.\n\n",
                    source, jnum(bound, "compute_ms", 0), jnum(bound, "comm_ms", 0),
                    jnum(bound, "bound_ms", 0));
    cuco_buf_puts(&d->html, "<p>From ");
    html_escape(&d->html, source);
    cuco_buf_printf(&d->html, ": compute %.3f ms, communication %.3f ms, bound <b>%.3f ms</b>",
                    jnum(bound, "compute_ms", 0), jnum(bound, "comm_ms", 0),
                    jnum(bound, "bound_ms", 0));
    if (json_is_number(json_object_get(bound, "ceiling"))) {
        cuco_buf_printf(&d->md, "- ceiling (baseline / bound): %.3fx\n", jnum(bound, "ceiling", 0));
        cuco_buf_printf(&d->html, "; ceiling %.3f&times;", jnum(bound, "ceiling", 0));
    }
    if (json_is_number(json_object_get(bound, "gap_closed"))) {
        cuco_buf_printf(&d->md,
                        "- gap closed by the best ((baseline - best) / (baseline - bound)):"
                        " %.1f%%\n",
                        100 * jnum(bound, "gap_closed", 0));
        cuco_buf_printf(&d->html, "; gap closed by the best: <b>%.1f%%</b>",
                        100 * jnum(bound, "gap_closed", 0));
    } else if (note) {
        cuco_buf_printf(&d->md, "- %s\n", note);
        cuco_buf_puts(&d->html, "; ");
        html_escape(&d->html, note);
    } else
        cuco_buf_puts(&d->md, "- gap closed: not computable (no best, or no baseline)\n");
    cuco_buf_puts(&d->html, ".</p>\n");
}

/* The search: the plots, the time to 95% of the gain, the re-timings, the
 * knob effects. */
static void write_search(report_doc *d, const char *db_path, const cuco_buf *curve,
                         const cuco_buf *lineage, int used_gnuplot)
{
    const char *maker = used_gnuplot ? "gnuplot" : "the built-in SVG writer";
    cuco_buf_printf(&d->md,
                    "\n## Search\n\nThe search curve and the lineage are SVG plots in report.html"
                    " (made with %s).\n\n",
                    maker);
    cuco_buf_printf(
        &d->html,
        "<h2>Search</h2>\n<p class=\"muted\">Plots made with %s.</p>\n"
        "<figure id=\"curve\"><figcaption>Best score so far over evaluations (points: each"
        " correct program; hollow: re-timed beside the best and did not hold, so not counted"
        " in the line)</figcaption>\n%s</figure>\n"
        "<figure id=\"lineage\"><figcaption>Lineage: programs by generation, islands as"
        " bands, an edge from each parent</figcaption>\n%s</figure>\n",
        maker, cuco_buf_str(curve), cuco_buf_str(lineage));
    char *t95 = to_95_text(d->s), *retimed = retiming_text(d->s);
    char *effects = effects_text(db_path, d->run_id);
    if (t95)
        cuco_buf_printf(&d->md, "%s\n\n", t95);
    if (retimed)
        cuco_buf_printf(&d->md, "%s\n\n", retimed);
    if (effects)
        cuco_buf_printf(&d->md, "%s\n", effects);
    html_paragraph(&d->html, "to-95", t95);
    html_paragraph(&d->html, "retiming", retimed);
    if (effects) {
        cuco_buf_puts(&d->html, "<pre id=\"effects\">");
        html_escape(&d->html, effects);
        cuco_buf_puts(&d->html, "</pre>\n");
    }
    free(t95);
    free(retimed);
    free(effects);
}

/* Failures grouped by reason. */
static void write_failures(report_doc *d)
{
    json_t *failures = json_object_get(d->s, "failures"), *val;
    size_t i;
    cuco_buf_puts(&d->md, "## Failures by reason\n\n");
    cuco_buf_puts(&d->html, "<h2>Failures by reason</h2>\n");
    if (!json_array_size(failures)) {
        cuco_buf_puts(&d->md, "None.\n");
        cuco_buf_puts(&d->html, "<p>None.</p>\n");
        return;
    }
    cuco_buf_puts(&d->md, "| status | reason | count | example |\n|---|---|---:|---|\n");
    cuco_buf_puts(&d->html,
                  "<table><tr><th>status</th><th>reason</th><th>count</th><th>example</th></tr>\n");
    json_array_foreach(failures, i, val)
    {
        long long count = (long long)json_integer_value(json_object_get(val, "count"));
        long long example = (long long)json_integer_value(json_object_get(val, "example_id"));
        cuco_buf_printf(&d->md, "| %s | ", json_string_value(json_object_get(val, "status")));
        md_cell(&d->md, json_string_value(json_object_get(val, "reason")));
        cuco_buf_printf(&d->md, " | %lld | #%lld |\n", count, example);
        cuco_buf_puts(&d->html, "<tr><td>");
        html_escape(&d->html, json_string_value(json_object_get(val, "status")));
        cuco_buf_puts(&d->html, "</td><td>");
        html_escape(&d->html, json_string_value(json_object_get(val, "reason")));
        cuco_buf_printf(&d->html, "</td><td class=\"num\">%lld</td><td>#%lld</td></tr>\n", count,
                        example);
    }
    cuco_buf_puts(&d->html, "</table>\n");
}

/* LLM spend, in total and by model. */
static void write_spend(report_doc *d, sqlite3 *h)
{
    double usd = jnum(d->s, "spend_usd", 0);
    long long calls = (long long)json_integer_value(json_object_get(d->s, "llm_calls"));
    cuco_buf spend_md = CUCO_BUF_INIT, spend_html = CUCO_BUF_INIT;
    spend_rows(h, d->run_id, &spend_md, &spend_html);
    cuco_buf_printf(&d->md, "\n## LLM spend\n\nTotal: $%.4f over %lld calls.\n\n", usd, calls);
    if (spend_md.len)
        cuco_buf_printf(&d->md,
                        "| model | calls | input tokens | output tokens | cost ($) |\n"
                        "|---|---:|---:|---:|---:|\n%s\n",
                        cuco_buf_str(&spend_md));
    cuco_buf_printf(&d->html, "<h2>LLM spend</h2>\n<p>Total: $%.4f over %lld calls.</p>\n", usd,
                    calls);
    if (spend_html.len)
        cuco_buf_printf(&d->html,
                        "<table><tr><th>model</th><th>calls</th><th>input tokens</th>"
                        "<th>output tokens</th><th>cost ($)</th></tr>\n%s</table>\n",
                        cuco_buf_str(&spend_html));
    cuco_buf_free(&spend_md);
    cuco_buf_free(&spend_html);
}

/* The diff from the start of the search to the best. */
static int write_diff(report_doc *d, const char *root_code, const char *best_code, cuco_err *e)
{
    if (d->best_id && d->best_id == d->root_id) {
        cuco_buf_puts(&d->md, "## Diff\n\nThe best program is the baseline program itself.\n\n");
        cuco_buf_puts(&d->html,
                      "<h2>Diff</h2><p>The best program is the baseline program itself.</p>\n");
        return 0;
    }
    if (!root_code || !best_code)
        return 0;
    cuco_buf diff = CUCO_BUF_INIT;
    char *an = cuco_sprintf("program %lld (start of the search)", (long long)d->root_id);
    char *bn = cuco_sprintf("program %lld (best)", (long long)d->best_id);
    int rc = cuco_diff_lines(root_code, best_code, an, bn, 3, &diff, NULL, NULL, e);
    free(an);
    free(bn);
    if (rc == 0 && diff.len) {
        cuco_buf_printf(&d->md,
                        "## Diff from the start of the search (#%lld) to the best "
                        "(#%lld)\n\n```diff\n%s```\n\n",
                        (long long)d->root_id, (long long)d->best_id, cuco_buf_str(&diff));
        cuco_buf_printf(&d->html,
                        "<h2>Diff from the start of the search (#%lld) to the best (#%lld)</h2>\n"
                        "<pre id=\"diff\">",
                        (long long)d->root_id, (long long)d->best_id);
        html_diff(&d->html, cuco_buf_str(&diff));
        cuco_buf_puts(&d->html, "</pre>\n");
    }
    cuco_buf_free(&diff);
    return rc;
}

/* best.<ext> in out_dir, and the section that names it. */
static int write_best_export(report_doc *d, const char *best_code, const char *out_dir,
                             cuco_report_result *res, cuco_err *e)
{
    char *ext = best_extension(d->s, best_code);
    char *name = ext ? cuco_sprintf("best.%s", ext) : NULL;
    free(ext);
    res->best_path = name ? cuco_path_join(out_dir, name) : NULL;
    if (!res->best_path) {
        free(name);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int rc = cuco_fs_write(res->best_path, best_code, strlen(best_code), e);
    if (rc == 0) {
        cuco_buf_printf(&d->md, "## Best program\n\nProgram #%lld, exported to `%s`.\n",
                        (long long)d->best_id, name);
        cuco_buf_printf(
            &d->html,
            "<h2>Best program</h2>\n<p>Program #%lld, exported to %s.</p>\n<pre id=\"best-code\">",
            (long long)d->best_id, name);
        html_escape(&d->html, best_code);
        cuco_buf_puts(&d->html, "</pre>\n");
    }
    free(name);
    return rc;
}

/* report.md and report.html into out_dir. */
static int write_files(report_doc *d, const char *out_dir, cuco_report_result *res, cuco_err *e)
{
    res->md_path = cuco_path_join(out_dir, "report.md");
    res->html_path = cuco_path_join(out_dir, "report.html");
    if (!res->md_path || !res->html_path || !d->md.data || !d->html.data)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = cuco_fs_write(res->md_path, d->md.data, d->md.len, e);
    return rc < 0 ? rc : cuco_fs_write(res->html_path, d->html.data, d->html.len, e);
}

int report_write(const cuco_report_opts *opts, cuco_report_result *res, cuco_err *e)
{
    memset(res, 0, sizeof *res);
    sqlite3 *h = NULL;
    report_doc d = {CUCO_BUF_INIT, CUCO_BUF_INIT, NULL, opts->run_id, 0, 0, -1};
    cuco_buf curve = CUCO_BUF_INIT, lineage = CUCO_BUF_INIT, sbs_html = CUCO_BUF_INIT;
    char *root_code = NULL, *best_code = NULL;
    const char *out_dir = opts->out_dir ? opts->out_dir : opts->workspace;
    int rc, gp_curve = 0, gp_lineage = 0;
    char *db_path =
        opts->db_path ? cuco_strdup(opts->db_path) : cuco_path_join(opts->workspace, "runs.db");
    if (!db_path || !out_dir) {
        rc = cuco_err_set(e, CUCO_EINVAL, "report: no workspace or output folder");
        goto out;
    }
    if ((rc = report_db_open(db_path, &h, e)) < 0 ||
        (rc = report_run_resolve(h, &d.run_id, e)) < 0 ||
        (rc = report_summary(h, d.run_id, opts->workspace, &d.s, e)) < 0 ||
        (rc = report_plot_curve(h, d.run_id, !opts->no_gnuplot, &curve, &gp_curve, e)) < 0 ||
        (rc = report_plot_lineage(h, d.run_id, !opts->no_gnuplot, &lineage, &gp_lineage, e)) < 0 ||
        (rc = cuco_fs_mkdirs(out_dir, e)) < 0)
        goto out;
    res->used_gnuplot = gp_curve && gp_lineage;
    d.baseline = jnum(d.s, "baseline_ms", -1);
    d.root_id = (int64_t)json_integer_value(json_object_get(d.s, "root_id"));
    d.best_id = (int64_t)json_integer_value(json_object_get(json_object_get(d.s, "best"), "id"));
    if ((d.root_id && (rc = program_code(h, d.root_id, &root_code, e)) < 0) ||
        (d.best_id && (rc = program_code(h, d.best_id, &best_code, e)) < 0))
        goto out;
    write_head(&d);
    write_result_table(&d);
    side_by_side_write(d.s, &d.md, &sbs_html);
    cuco_buf_puts(&d.html, cuco_buf_str(&sbs_html));
    write_bound(&d);
    write_search(&d, db_path, &curve, &lineage, res->used_gnuplot);
    write_failures(&d);
    write_spend(&d, h);
    if ((rc = write_diff(&d, root_code, best_code, e)) < 0 ||
        (best_code && (rc = write_best_export(&d, best_code, out_dir, res, e)) < 0))
        goto out;
    cuco_buf_puts(&d.html, "</body></html>\n");
    rc = write_files(&d, out_dir, res, e);
out:
    if (rc < 0)
        report_result_free(res);
    json_decref(d.s);
    report_db_close(h);
    cuco_buf_free(&d.md);
    cuco_buf_free(&d.html);
    cuco_buf_free(&curve);
    cuco_buf_free(&lineage);
    cuco_buf_free(&sbs_html);
    free(db_path);
    free(root_code);
    free(best_code);
    return rc;
}
