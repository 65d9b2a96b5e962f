/* compare.c: several programs of one workload timed side by side in
 * interleaved rounds (see cuco/compare.h). */
#include "cuco/compare.h"
#include "cuco/buf.h"
#include "cuco/run_view.h"
#include "cuco/stats.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void entry_reset(cuco_compare_entry *c)
{
    free(c->times_ms);
    free(c->metrics_json);
    free(c->excerpt);
    c->times_ms = NULL;
    c->metrics_json = NULL;
    c->excerpt = NULL;
    c->n_times = 0;
    c->status = CUCO_EVAL_OK;
    c->program_hash[0] = '\0';
    c->median_ms = c->min_ms = c->max_ms = -1;
    c->spread = 0;
}

void cuco_compare_entries_clear(cuco_compare_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        entry_reset(&entries[i]);
}

/* Median, min, max and spread of c->times_ms. */
static int entry_stats(cuco_compare_entry *c)
{
    if (c->n_times == 0)
        return 0;
    double *sorted = malloc((size_t)c->n_times * sizeof *sorted);
    if (!sorted)
        return CUCO_ENOMEM;
    memcpy(sorted, c->times_ms, (size_t)c->n_times * sizeof *sorted);
    int n = c->n_times;
    c->median_ms = cuco_median(sorted, (size_t)n);
    c->min_ms = sorted[0];
    c->max_ms = sorted[n - 1];
    c->spread = n > 1 && c->median_ms > 0 ? (c->max_ms - c->min_ms) / c->median_ms : 0;
    free(sorted);
    return 0;
}

static void progress_line(cuco_compare_progress progress, void *ctx, int round, int rounds,
                          const cuco_compare_entry *c, const cuco_eval_result *r)
{
    if (!progress)
        return;
    char *line = r->status == CUCO_EVAL_OK
                     ? cuco_sprintf("round %d/%d: %s %.4f ms", round, rounds, c->label, r->time_ms)
                     : cuco_sprintf("round %d/%d: %s %s", round, rounds, c->label,
                                    cuco_eval_status_name(r->status));
    if (line)
        progress(ctx, line);
    free(line);
}

int cuco_compare_programs(const cuco_workload *w, cuco_compare_entry *entries, size_t n, int rounds,
                          const cuco_eval_opts *o, cuco_compare_progress progress,
                          void *progress_ctx, cuco_err *e)
{
    for (size_t i = 0; i < n; i++)
        entry_reset(&entries[i]);
    if (rounds < 1 || n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        entries[i].times_ms = calloc((size_t)rounds, sizeof *entries[i].times_ms);
        if (!entries[i].times_ms)
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int round = 0; round < rounds && rc == 0; round++) {
        for (size_t k = 0; k < n && rc == 0; k++) {
            /* the order rotates, so that no program always runs first */
            cuco_compare_entry *c = &entries[(k + (size_t)round) % n];
            if (c->status != CUCO_EVAL_OK)
                continue;
            cuco_eval_opts eo = *o;
            eo.max_level = 3;
            eo.repeats = 1;
            if (c->frozen_ref)
                eo.frozen_ref = c->frozen_ref;
            cuco_eval_result r;
            memset(&r, 0, sizeof r);
            if ((rc = cuco_eval_program(w, c->program_text, &eo, &r, e)) < 0)
                break;
            memcpy(c->program_hash, r.program_hash, sizeof c->program_hash);
            progress_line(progress, progress_ctx, round + 1, rounds, c, &r);
            if (r.status != CUCO_EVAL_OK) {
                c->status = r.status;
                c->excerpt = r.excerpt;
                r.excerpt = NULL;
            } else {
                c->times_ms[c->n_times++] = r.time_ms;
                free(c->metrics_json);
                c->metrics_json = r.metrics_json;
                r.metrics_json = NULL;
            }
            cuco_eval_result_free(&r);
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = entry_stats(&entries[i]);
    if (rc == CUCO_ENOMEM)
        return cuco_err_set(e, rc, "out of memory");
    return rc;
}

static json_t *num_or_null(double v)
{
    return v >= 0 ? json_real(v) : json_null();
}

/* The ceiling and the share of the gap each program closed, or why they do
 * not apply: a seed whose timed parts took longer than its whole step
 * (clocks and power differ between them) has no gap to close, and a program
 * faster than the seed's computation alone changed that computation, so
 * the bound says nothing about it (its gap is null, its label in
 * "bound_does_not_apply"). */
static void bound_figures(json_t *b, json_t *gap, double ref_ms, double bound,
                          const cuco_compare_entry *entries, size_t n)
{
    run_view_bound vb;
    run_view_bound_of(ref_ms, bound, bound, -1, &vb); /* cuco/run_view.h: one rule */
    if (!vb.has_ceiling) {
        json_object_set_new(b, "ceiling", json_null());
        json_object_set_new(b, "note",
                            json_string("the seed's timed parts took longer than its whole step "
                                        "(clock and power differ between them): no bound applies"));
        return;
    }
    json_object_set_new(b, "ceiling", json_real(vb.ceiling));
    json_t *changed = json_array();
    for (size_t i = 1; i < n; i++) {
        if (entries[i].median_ms <= 0)
            continue;
        run_view_bound_of(ref_ms, bound, bound, entries[i].median_ms, &vb);
        if (!vb.has_gap) {
            json_object_set_new(gap, entries[i].label, json_null());
            json_array_append_new(changed, json_string(entries[i].label));
        } else {
            json_object_set_new(gap, entries[i].label, json_real(vb.gap_closed));
        }
    }
    json_object_set_new(b, "bound_does_not_apply", changed);
}

void cuco_compare_rates_of(const cuco_compare_entry *c, cuco_compare_rates *r)
{
    static const char *const keys[] = {"bytes", "bytes_recv_per_rank", "bytes_sent_per_rank_max",
                                       "cache_bytes_per_pair"};
    r->bytes = r->algbw_gbps = r->busbw_gbps = -1;
    r->wrong = c->status == CUCO_EVAL_WRONG_ANSWER;
    json_t *m = c->metrics_json ? json_loads(c->metrics_json, 0, NULL) : NULL;
    for (size_t k = 0; m && k < sizeof keys / sizeof keys[0] && r->bytes < 0; k++) {
        json_t *v = json_object_get(m, keys[k]);
        if (json_is_number(v))
            r->bytes = json_number_value(v);
    }
    json_t *comm = json_object_get(m, "comm_ms");
    if (r->bytes >= 0 && c->median_ms > 0)
        r->algbw_gbps = r->bytes / (c->median_ms * 1e6);
    if (r->bytes >= 0 && json_is_number(comm) && json_number_value(comm) > 0)
        r->busbw_gbps = r->bytes / (json_number_value(comm) * 1e6);
    json_decref(m);
}

char *cuco_compare_json(const cuco_workload *w, const cuco_compare_entry *entries, size_t n,
                        int rounds)
{
    json_t *root = json_object(), *progs = json_array(), *speed = json_object();
    if (!root || !progs || !speed) {
        json_decref(root);
        json_decref(progs);
        json_decref(speed);
        return NULL;
    }
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "workload", json_string(w->name));
    json_object_set_new(root, "ranks", json_integer(w->ranks));
    json_object_set_new(root, "rounds", json_integer(rounds));
    for (size_t i = 0; i < n; i++) {
        const cuco_compare_entry *c = &entries[i];
        json_t *p = json_object(), *t = json_array();
        for (int k = 0; k < c->n_times; k++)
            json_array_append_new(t, json_real(c->times_ms[k]));
        json_t *metrics = c->metrics_json ? json_loads(c->metrics_json, 0, NULL) : NULL;
        json_object_set_new(p, "label", json_string(c->label));
        json_object_set_new(p, "status", json_string(cuco_eval_status_name(c->status)));
        json_object_set_new(p, "program_hash", json_string(c->program_hash));
        json_object_set_new(p, "times_ms", t);
        json_object_set_new(p, "median_ms", num_or_null(c->median_ms));
        json_object_set_new(p, "min_ms", num_or_null(c->min_ms));
        json_object_set_new(p, "max_ms", num_or_null(c->max_ms));
        json_object_set_new(p, "spread", json_real(c->spread));
        json_object_set_new(p, "metrics", metrics ? metrics : json_null());
        cuco_compare_rates rt;
        cuco_compare_rates_of(c, &rt);
        json_object_set_new(p, "bytes", num_or_null(rt.bytes));
        json_object_set_new(p, "algbw_gbps", num_or_null(rt.algbw_gbps));
        json_object_set_new(p, "busbw_gbps", num_or_null(rt.busbw_gbps));
        json_object_set_new(p, "wrong", json_integer(rt.wrong));
        json_object_set_new(p, "excerpt", c->excerpt ? json_string(c->excerpt) : json_null());
        json_array_append_new(progs, p);
    }
    json_object_set_new(root, "programs", progs);
    /* each against the first (the reference), and the last against the second */
    const cuco_compare_entry *ref = n ? &entries[0] : NULL;
    for (size_t i = 1; ref && ref->median_ms > 0 && i < n; i++) {
        if (entries[i].median_ms <= 0)
            continue;
        char *key = cuco_sprintf("%s_vs_%s", entries[i].label, ref->label);
        if (key)
            json_object_set_new(speed, key, json_real(ref->median_ms / entries[i].median_ms));
        free(key);
    }
    if (n >= 3 && entries[1].median_ms > 0 && entries[n - 1].median_ms > 0) {
        char *key = cuco_sprintf("%s_vs_%s", entries[n - 1].label, entries[1].label);
        if (key)
            json_object_set_new(speed, key,
                                json_real(entries[1].median_ms / entries[n - 1].median_ms));
        free(key);
    }
    json_object_set_new(root, "speedups", speed);
    /* the overlap bound from the reference's own breakdown (its compute_ms and
     * comm_ms, printed in the same run as its time), and the share of the
     * gap to it that each other program closed */
    json_t *rm = ref && ref->metrics_json ? json_loads(ref->metrics_json, 0, NULL) : NULL;
    json_t *jc = json_object_get(rm, "compute_ms"), *jm = json_object_get(rm, "comm_ms");
    if (ref && ref->median_ms > 0 && json_is_number(jc) && json_is_number(jm) &&
        json_number_value(jc) > 0 && json_number_value(jm) >= 0) {
        double compute = json_number_value(jc), comm = json_number_value(jm);
        double bound = compute > comm ? compute : comm;
        json_t *b = json_object(), *gap = json_object();
        json_object_set_new(b, "compute_ms", json_real(compute));
        json_object_set_new(b, "comm_ms", json_real(comm));
        json_object_set_new(b, "bound_ms", json_real(bound));
        bound_figures(b, gap, ref->median_ms, bound, entries, n);
        json_object_set_new(b, "gap_closed", gap);
        json_object_set_new(root, "bound", b);
    } else
        json_object_set_new(root, "bound", json_null());
    json_decref(rm);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}
