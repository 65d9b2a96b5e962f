/* cli_summary.c: the final result of a run for the command line (see
 * cli_summary.h). The figures come from the report's summary of the run, so
 * the line after 'cuco run' says what report.md says. */
#include "cli_summary.h"

#include "cuco/report.h"

#include <sqlite3.h>
#include <string.h>

json_t *cli_summary_load(const char *workspace, const char *db_path, long long run_id, cuco_err *e)
{
    sqlite3 *h = NULL;
    json_t *s = NULL;
    int64_t id = run_id;
    if (report_db_open(db_path, &h, e) < 0)
        return NULL;
    if (report_run_resolve(h, &id, e) == 0 && report_summary(h, id, workspace, &s, e) < 0)
        s = NULL;
    report_db_close(h);
    return s;
}

static double number(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* The median of the program labelled label in confirm.json, or -1. */
static double confirm_median(const json_t *confirm, const char *label)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(confirm, "programs"), i, p)
    {
        const char *l = json_string_value(json_object_get(p, "label"));
        if (l && !strcmp(l, label))
            return number(p, "median_ms");
    }
    return -1;
}

json_t *cli_summary_result(const json_t *summary)
{
    const json_t *best = json_object_get(summary, "best");
    const json_t *bound = json_object_get(summary, "bound");
    const json_t *confirm = json_object_get(summary, "side_by_side");
    const json_t *programs = json_object_get(summary, "programs");
    double speedup = number(best, "score"), best_ms = number(best, "time_ms");
    double seed_ms = number(summary, "baseline_ms");
    const char *source = "search";
    double ceiling = number(bound, "ceiling");
    int changed = 0; /* the best changed the computation: the bound does not apply */
    if (json_is_object(confirm) && !json_is_true(json_object_get(confirm, "stale"))) {
        const char *label = confirm_median(confirm, "best") > 0 ? "best" : "gen_0";
        double s = confirm_median(confirm, "seed"), b = confirm_median(confirm, label);
        if (s > 0 && b > 0) {
            seed_ms = s;
            best_ms = b;
            speedup = s / b;
            source = "side by side";
            /* the ceiling of the table printed above it */
            const json_t *cb = json_object_get(confirm, "bound");
            ceiling = json_is_object(cb) ? number(cb, "ceiling") : -1;
            size_t k;
            json_t *l;
            json_array_foreach(json_object_get(cb, "bound_does_not_apply"), k, l) changed |=
                !strcmp(json_string_value(l) ? json_string_value(l) : "", label);
        }
    }
    long total = (long)json_integer_value(json_object_get(programs, "total"));
    long ok =
        (long)json_integer_value(json_object_get(json_object_get(programs, "by_status"), "ok"));
    long failed = 0;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(summary, "failures"), i, f) failed +=
        (long)json_integer_value(json_object_get(f, "count"));
    json_t *r = json_object();
    json_object_set_new(r, "speedup", speedup > 0 ? json_real(speedup) : json_null());
    json_object_set_new(r, "baseline_ms", seed_ms > 0 ? json_real(seed_ms) : json_null());
    json_object_set_new(r, "best_ms", best_ms > 0 ? json_real(best_ms) : json_null());
    json_object_set_new(r, "timed", json_string(source));
    /* a ceiling under 1 (the timed parts took longer than the whole step)
     * is no ceiling */
    json_object_set_new(r, "ceiling", ceiling >= 1 ? json_real(ceiling) : json_null());
    json_object_set_new(r, "no_ceiling", json_boolean(json_is_object(bound) && ceiling < 1));
    json_object_set_new(r, "bound_applies", json_boolean(!changed));
    json_object_set_new(r, "best_id", json_incref(json_object_get(best, "id")));
    json_object_set_new(r, "programs", json_integer(total));
    json_object_set_new(r, "programs_ok", json_integer(ok));
    json_object_set_new(r, "failures", json_integer(failed));
    const json_t *rt = json_object_get(summary, "retiming");
    json_object_set_new(r, "retimings",
                        json_integer(json_integer_value(json_object_get(rt, "retimings"))));
    json_object_set_new(r, "retiming_runs",
                        json_integer(json_integer_value(json_object_get(rt, "runs"))));
    return r;
}

static void print_duration(FILE *out, double s)
{
    if (s >= 3600)
        fprintf(out, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60)
        fprintf(out, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        fprintf(out, "%.1fs", s);
}

void cli_summary_print(FILE *out, const char *workload, const json_t *result, double wall_s)
{
    double speedup = number(result, "speedup"), seed = number(result, "baseline_ms");
    double best = number(result, "best_ms"), ceiling = number(result, "ceiling");
    fprintf(out, "cuco run: %s: ", workload);
    if (speedup > 0 && seed > 0 && best > 0)
        fprintf(out, "%.3fx (%.4f ms -> %.4f ms, %s)", speedup, seed, best,
                json_string_value(json_object_get(result, "timed")));
    else
        fprintf(out, "no scored program");
    if (ceiling >= 1)
        fprintf(out, "; ceiling %.2fx%s", ceiling,
                json_is_false(json_object_get(result, "bound_applies"))
                    ? " (the bound does not apply: the computation changed)"
                    : "");
    else if (json_is_true(json_object_get(result, "no_ceiling")))
        fprintf(out, "; no ceiling (the program's parts timed alone took longer than its step: "
                     "clock and power differ between them)");
    fprintf(out, "; %lld programs, %lld failed; ",
            (long long)json_integer_value(json_object_get(result, "programs")),
            (long long)json_integer_value(json_object_get(result, "failures")));
    print_duration(out, wall_s);
    fputc('\n', out);
}
