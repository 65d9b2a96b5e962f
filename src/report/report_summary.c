/* report_summary.c: reads a run from its database (read-only, safe while the
 * run writes) and sums it up: baseline, fast-path result, best program,
 * overlap bound and the share of the gap closed, failures grouped by reason,
 * LLM spend, and warnings other tools left in the workspace. */
#include "cuco/report.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/db.h"
#include "cuco/fs.h"
#include "cuco/run_view.h"

int report_db_open(const char *db_path, sqlite3 **out, cuco_err *e)
{
    sqlite3 *h = NULL;
    *out = NULL;
    if (!cuco_fs_exists(db_path))
        return cuco_err_set(e, CUCO_ENOTFOUND, "no database at %s", db_path);
    if (sqlite3_open_v2(db_path, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK) {
        cuco_err_set(e, CUCO_EDB, "cannot open database %s: %s", db_path,
                     h ? sqlite3_errmsg(h) : "out of memory");
        sqlite3_close_v2(h);
        return CUCO_EDB;
    }
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt *st = NULL;
    int version = 0;
    if (sqlite3_prepare_v2(h, "SELECT max(version) FROM schema_version", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 1 || version > CUCO_DB_SCHEMA_VERSION) {
        cuco_err_set(e, CUCO_EDB, "%s is not a cuco run database this build reads (schema %d)",
                     db_path, version);
        sqlite3_close_v2(h);
        return CUCO_EDB;
    }
    *out = h;
    return 0;
}

void report_db_close(sqlite3 *h)
{
    if (h)
        sqlite3_close_v2(h);
}

static int dberr(sqlite3 *h, cuco_err *e, const char *what)
{
    return cuco_err_set(e, CUCO_EDB, "database: %s: %s", what, sqlite3_errmsg(h));
}

int report_run_resolve(sqlite3 *h, int64_t *run_id, cuco_err *e)
{
    sqlite3_stmt *st;
    const char *sql = *run_id > 0 ? "SELECT id FROM runs WHERE id=?"
                                  : "SELECT id FROM runs ORDER BY id DESC LIMIT 1";
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return dberr(h, e, "finding run");
    if (*run_id > 0)
        sqlite3_bind_int64(st, 1, *run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *run_id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return 0;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return dberr(h, e, "finding run");
    if (*run_id > 0)
        return cuco_err_set(e, CUCO_ENOTFOUND, "no run %lld", (long long)*run_id);
    return cuco_err_set(e, CUCO_ENOTFOUND, "the database holds no run yet");
}

static json_t *col_json_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                     : json_real(sqlite3_column_double(st, i));
}

static json_t *col_json_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? json_string((const char *)t) : json_null();
}

/* First non-empty line of an error text, at most 160 bytes; caller frees. */
static char *error_reason(const char *err)
{
    if (!err)
        return cuco_strdup("(no error text)");
    const char *p = err;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\r' || p[n - 1] == '\t'))
            n--;
        if (n > 0) {
            if (n > 160)
                n = 160;
            /* do not cut a UTF-8 sequence in two */
            while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80)
                n--;
            return cuco_strndup(p, n);
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return cuco_strdup("(no error text)");
}

/* Runs sql (one int64 parameter: run id) expecting one row; calls fill. */
static int query_one(sqlite3 *h, const char *sql, int64_t run_id, sqlite3_stmt **st, int *found,
                     cuco_err *e)
{
    *found = 0;
    if (sqlite3_prepare_v2(h, sql, -1, st, NULL) != SQLITE_OK)
        return dberr(h, e, "summary query");
    sqlite3_bind_int64(*st, 1, run_id);
    int rc = sqlite3_step(*st);
    if (rc == SQLITE_ROW)
        *found = 1;
    else if (rc != SQLITE_DONE) {
        dberr(h, e, "summary query");
        sqlite3_finalize(*st);
        *st = NULL;
        return CUCO_EDB;
    }
    return 0;
}

static json_t *program_brief(sqlite3_stmt *st)
{
    /* columns: id, time_ms, score, island, generation, mutator */
    return json_pack("{s:I, s:o, s:o, s:i, s:i, s:o}", "id",
                     (json_int_t)sqlite3_column_int64(st, 0), "time_ms", col_json_real(st, 1),
                     "score", col_json_real(st, 2), "island", sqlite3_column_int(st, 3),
                     "generation", sqlite3_column_int(st, 4), "mutator", col_json_text(st, 5));
}

static double metric(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* compute-only and communication-only times from a bound.json written by
 * 'cuco bound' (docs/bound.md): the timeline's critical rank when there is
 * one, else the program's own breakdown, else the two variants (collectives
 * removed: compute alone; compute removed: communication alone), else
 * top-level compute_ms/comm_ms. Returns the source's name, NULL if none. */
/* Per-step computation and communication from a bound.json, on the same
 * footing as the baseline's time (one step): the timeline's per-step figures,
 * else the program's own breakdown, else the two variants' times. The
 * timeline's whole-run totals are not per step and are not used. */
/* Appends text to the warnings unless the same text is there already. */
static void add_warning(json_t *warnings, const char *text)
{
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i,
                       w) if (json_is_string(w) && !strcmp(json_string_value(w), text)) return;
    json_array_append_new(warnings, json_string(text));
}

static const char *bound_from_file(json_t *b, double *compute, double *comm)
{
    json_t *bd = json_object_get(b, "bound");
    if (json_is_true(json_object_get(bd, "per_step"))) {
        *compute = metric(bd, "compute_ms");
        *comm = metric(bd, "comm_ms");
        if (*compute > 0 && *comm > 0)
            return "bound.json (timeline, per step)";
    }
    json_t *prog = json_object_get(b, "program");
    *compute = metric(prog, "compute_ms");
    *comm = metric(prog, "comm_ms");
    if (*compute > 0 && *comm > 0)
        return "bound.json (program breakdown)";
    json_t *no_comm = json_object_get(b, "comm_removed"),
           *no_compute = json_object_get(b, "compute_removed");
    if (json_is_true(json_object_get(no_comm, "ran")) &&
        json_is_true(json_object_get(no_compute, "ran"))) {
        *compute = metric(no_comm, "time_ms");
        *comm = metric(no_compute, "time_ms");
        if (*compute > 0 && *comm > 0)
            return "bound.json (variants)";
    }
    *compute = metric(b, "compute_ms");
    *comm = metric(b, "comm_ms");
    if (*compute > 0 && *comm > 0)
        return "bound.json";
    return NULL;
}

/* WORKSPACE/confirm.json ('cuco run' step 5: seed, gen_0 and best timed side
 * by side), with "stale": true when the run's best program is none of the
 * programs it timed (the search went on after it). NULL when there is none;
 * an unreadable file becomes a warning. */
static json_t *side_by_side(sqlite3 *h, int64_t best_id, const char *workspace, json_t *warnings)
{
    char *path = workspace ? cuco_path_join(workspace, "confirm.json") : NULL;
    if (!path || !cuco_fs_exists(path)) {
        free(path);
        return NULL;
    }
    json_error_t jerr;
    json_t *c = json_load_file(path, 0, &jerr);
    if (!c || !json_is_array(json_object_get(c, "programs"))) {
        char *w = cuco_sprintf("%s:%d: cannot read confirm.json: %s", path, jerr.line,
                               c ? "no programs" : jerr.text);
        if (w)
            json_array_append_new(warnings, json_string(w));
        free(w);
        json_decref(c);
        free(path);
        return NULL;
    }
    free(path);
    char *best_hash = NULL;
    sqlite3_stmt *st = NULL;
    if (best_id > 0 && sqlite3_prepare_v2(h, "SELECT code_hash FROM programs WHERE id=?", -1, &st,
                                          NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, best_id);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            best_hash = cuco_strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    int timed = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(c, "programs"), i, p)
    {
        const char *h2 = json_string_value(json_object_get(p, "program_hash"));
        if (best_hash && h2 && !strcmp(best_hash, h2))
            timed = 1;
    }
    json_object_set_new(c, "stale", json_boolean(best_hash && !timed));
    free(best_hash);
    return c;
}

/* How long the search took to get most of the way: the first program (in
 * the order results came in) whose gain over the start reached 95% of the
 * best's, (score - 1) >= 0.95 (best - 1); the real evaluations (not cached,
 * as the budget counts them) up to and including it, and the seconds from
 * the run's start to its result (databases before schema 4 have no result
 * times: null). Programs that were re-timed beside the run's best and did
 * not hold do not count. NULL when the best gained nothing. */
static json_t *time_to_95(sqlite3 *h, int64_t run_id, double best_score, double started_at)
{
    if (!(best_score > 1))
        return NULL;
    double threshold = 1 + 0.95 * (best_score - 1);
    const char *filter = " FROM programs WHERE run_id=? AND code IS NOT NULL"
                         " AND status NOT IN ('pending','rejected_duplicate','rejected_novelty',"
                         "'patch_failed') AND coalesce(mutator,'') NOT IN ('copy','migration')";
    char *q[2] = {
        cuco_sprintf("SELECT id, status, score, cached, evaluated_at%s"
                     " ORDER BY coalesce(evaluated_at, created_at), id",
                     filter),
        cuco_sprintf("SELECT id, status, score, cached, NULL%s ORDER BY created_at, id", filter),
    };
    sqlite3_stmt *st = NULL;
    int prepared = 0;
    for (int i = 0; i < 2 && !prepared; i++)
        prepared = q[i] && sqlite3_prepare_v2(h, q[i], -1, &st, NULL) == SQLITE_OK;
    for (int i = 0; i < 2; i++)
        free(q[i]);
    /* a program re-timed beside the best that did not hold has not reached
     * anything (cuco/run_view.h) */
    run_view_program *view = NULL;
    size_t nview = 0;
    cuco_err ve = CUCO_ERR_INIT;
    if (!prepared || run_view_programs(h, run_id, &view, &nview, &ve) < 0) {
        cuco_err_clear(&ve);
        sqlite3_finalize(st);
        return NULL;
    }
    sqlite3_bind_int64(st, 1, run_id);
    json_t *r = NULL;
    long evaluations = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!sqlite3_column_int(st, 3))
            evaluations++;
        const char *status = (const char *)sqlite3_column_text(st, 1);
        const run_view_program *v = run_view_find(view, nview, sqlite3_column_int64(st, 0));
        if (!status || strcmp(status, "ok") || sqlite3_column_type(st, 2) == SQLITE_NULL ||
            sqlite3_column_double(st, 2) < threshold || (v && v->held_back))
            continue;
        double at = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 4);
        r = json_pack("{s:I, s:I, s:f}", "program_id", (json_int_t)sqlite3_column_int64(st, 0),
                      "evaluations", (json_int_t)evaluations, "threshold_score", threshold);
        json_object_set_new(r, "seconds",
                            at > 0 && started_at > 0 ? json_real(at - started_at) : json_null());
        break;
    }
    sqlite3_finalize(st);
    run_view_programs_free(view, nview);
    return r;
}

/* The re-timings of apparent improvements (schema >= 5): counts, and the
 * ones that did not hold (at most 10, in order). NULL without the table. */
static json_t *retiming_summary(sqlite3 *h, int64_t run_id)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h,
                           "SELECT count(*), coalesce(sum(held),0), coalesce(sum(runs),0)"
                           " FROM retimings WHERE run_id=?",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_int64(st, 1, run_id);
    json_t *r = NULL;
    if (sqlite3_step(st) == SQLITE_ROW)
        r = json_pack("{s:I, s:I, s:I}", "retimings", (json_int_t)sqlite3_column_int64(st, 0),
                      "held", (json_int_t)sqlite3_column_int64(st, 1), "runs",
                      (json_int_t)sqlite3_column_int64(st, 2));
    sqlite3_finalize(st);
    if (!r)
        return NULL;
    json_t *not_held = json_array();
    json_object_set_new(r, "not_held", not_held);
    if (sqlite3_prepare_v2(h,
                           "SELECT challenger_id, claimed_ms, challenger_ms, champion_id,"
                           " champion_ms, note FROM retimings WHERE run_id=? AND held=0"
                           " ORDER BY id LIMIT 10",
                           -1, &st, NULL) != SQLITE_OK)
        return r;
    sqlite3_bind_int64(st, 1, run_id);
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(
            not_held, json_pack("{s:I, s:o, s:o, s:I, s:o, s:o}", "program_id",
                                (json_int_t)sqlite3_column_int64(st, 0), "claimed_ms",
                                col_json_real(st, 1), "retimed_ms", col_json_real(st, 2), "best_id",
                                (json_int_t)sqlite3_column_int64(st, 3), "best_ms",
                                col_json_real(st, 4), "note", col_json_text(st, 5)));
    sqlite3_finalize(st);
    return r;
}

/* What report_summary gathers as it goes, step by step. */
typedef struct summary {
    sqlite3 *h;
    int64_t run_id;
    const char *workspace;
    json_t *s, *warnings;
    json_t *config;      /* borrowed from s.run */
    double run_baseline; /* runs.baseline_ms; < 0 when not measured */
    double best_ms;      /* < 0 without a best */
    int64_t root_id;     /* 0 without programs */
    int root_is_seed;
    json_t *root_metrics; /* owned; NULL when none */
    json_t *bound_file;   /* owned; NULL when none */
} summary;

/* s.run and the run's own warning (schema >= 3). */
static int summary_run(summary *c, cuco_err *e)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    int rc = query_one(c->h,
                       "SELECT id, workload, status, seed, started_at, ended_at, config,"
                       " baseline_ms FROM runs WHERE id=?",
                       c->run_id, &st, &found, e);
    if (rc < 0)
        return rc;
    if (!found) {
        sqlite3_finalize(st);
        return cuco_err_set(e, CUCO_ENOTFOUND, "no run %lld", (long long)c->run_id);
    }
    const unsigned char *cfg = sqlite3_column_text(st, 6);
    c->config = cfg ? json_loads((const char *)cfg, 0, NULL) : NULL;
    json_object_set_new(
        c->s, "run",
        json_pack("{s:I, s:o, s:o, s:I, s:o, s:o, s:o}", "id", (json_int_t)c->run_id, "workload",
                  col_json_text(st, 1), "status", col_json_text(st, 2), "seed",
                  (json_int_t)sqlite3_column_int64(st, 3), "started_at", col_json_real(st, 4),
                  "ended_at", col_json_real(st, 5), "config", c->config ? c->config : json_null()));
    c->run_baseline = sqlite3_column_type(st, 7) != SQLITE_NULL ? sqlite3_column_double(st, 7) : -1;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(c->h, "SELECT warning FROM runs WHERE id=?", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(st, 1, c->run_id);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            add_warning(c->warnings, (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    return 0;
}

/* s.programs: how many, by status. */
static int summary_counts(summary *c, cuco_err *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c->h,
                           "SELECT status, count(*) FROM programs WHERE run_id=?"
                           " GROUP BY status ORDER BY status",
                           -1, &st, NULL) != SQLITE_OK)
        return dberr(c->h, e, "counting programs");
    json_t *by_status = json_object();
    json_int_t total = 0;
    sqlite3_bind_int64(st, 1, c->run_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(st, 0);
        json_int_t n = sqlite3_column_int64(st, 1);
        json_object_set_new(by_status, name ? (const char *)name : "(none)", json_integer(n));
        total += n;
    }
    sqlite3_finalize(st);
    json_object_set_new(c->s, "programs",
                        json_pack("{s:I, s:o}", "total", total, "by_status", by_status));
    return 0;
}

#define BRIEF_COLS "SELECT id, time_ms, score, island, generation, mutator"

/* s.best: the run's best as every view names it (cuco/run_view.h). */
static int summary_best(summary *c, cuco_err *e)
{
    run_view_best best;
    sqlite3_stmt *st = NULL;
    int found = 0;
    int rc = run_view_best_get(c->h, c->run_id, &best, e);
    if (rc == 0 && best.id > 0)
        rc = query_one(c->h, BRIEF_COLS " FROM programs WHERE id=?", best.id, &st, &found, e);
    if (rc < 0)
        return rc;
    c->best_ms = found ? best.time_ms : -1;
    json_object_set_new(c->s, "best", found ? program_brief(st) : json_null());
    sqlite3_finalize(st);
    return 0;
}

/* s.root_id, s.start, s.fast_path: the program the search started from.
 * Its metrics carry the compute-only and communication-only times when the
 * workload reports them. When it is the workload's own program ('seed') it
 * is the host-driven baseline; any other (given with --init, as 'cuco run'
 * gives the fast path's gen_0) is the fast-path result. */
static int summary_start(summary *c, cuco_err *e)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    json_t *fast = NULL, *start = NULL;
    int rc = query_one(c->h,
                       BRIEF_COLS ", metrics, status, error FROM programs WHERE run_id=?"
                                  " AND parent_id IS NULL ORDER BY id LIMIT 1",
                       c->run_id, &st, &found, e);
    if (rc < 0)
        return rc;
    if (found) {
        c->root_id = sqlite3_column_int64(st, 0);
        const char *mut = (const char *)sqlite3_column_text(st, 5);
        const char *status = (const char *)sqlite3_column_text(st, 7);
        c->root_is_seed = mut && !strcmp(mut, "seed");
        start = program_brief(st);
        json_object_set_new(start, "status", col_json_text(st, 7));
        if (!status || strcmp(status, "ok")) {
            char *line = error_reason((const char *)sqlite3_column_text(st, 8));
            json_object_set_new(start, "error_line", line ? json_string(line) : json_null());
            free(line);
        }
        if (!c->root_is_seed && status && !strcmp(status, "ok"))
            fast = program_brief(st);
        if (sqlite3_column_text(st, 6))
            c->root_metrics = json_loads((const char *)sqlite3_column_text(st, 6), 0, NULL);
    }
    sqlite3_finalize(st);
    json_object_set_new(c->s, "root_id", found ? json_integer(c->root_id) : json_null());
    json_object_set_new(c->s, "start", start ? start : json_null());
    json_object_set_new(c->s, "fast_path", fast ? fast : json_null());
    return 0;
}

/* s.failed: why a failed run failed (its start did not pass, or it
 * stopped on an error), for the banner of the report and the web view;
 * null unless the run's status is 'failed'. */
static void summary_failed(summary *c)
{
    json_t *run = json_object_get(c->s, "run"), *start = json_object_get(c->s, "start");
    const char *status = json_string_value(json_object_get(run, "status"));
    char *why = NULL;
    if (status && !strcmp(status, "failed")) {
        const char *start_status = json_string_value(json_object_get(start, "status"));
        if (json_is_object(start) && start_status && strcmp(start_status, "ok"))
            why = cuco_sprintf("the program the search started from (#%lld, %s) did not pass: "
                               "%s: %s",
                               (long long)c->root_id,
                               c->root_is_seed ? "the workload's program" : "given with --init",
                               start_status,
                               json_string_value(json_object_get(start, "error_line"))
                                   ? json_string_value(json_object_get(start, "error_line"))
                                   : "(no error text)");
        else if (!json_is_object(start))
            why = cuco_strdup("the run failed before its first program was stored");
        else
            why = cuco_strdup("the run stopped on an error (see the log of cuco evolve)");
    }
    json_object_set_new(c->s, "failed", why ? json_string(why) : json_null());
    free(why);
}

/* WORKSPACE/bound.json ('cuco bound') when there is one, and the warnings
 * it carries (the verification audit's finding, its "warnings"). */
static void summary_bound_file(summary *c)
{
    if (!c->workspace)
        return;
    char *bpath = cuco_path_join(c->workspace, "bound.json");
    if (bpath && cuco_fs_exists(bpath)) {
        json_error_t jerr;
        c->bound_file = json_load_file(bpath, 0, &jerr);
        if (!c->bound_file) {
            char *w =
                cuco_sprintf("%s:%d: cannot read bound.json: %s", bpath, jerr.line, jerr.text);
            if (w)
                json_array_append_new(c->warnings, json_string(w));
            free(w);
        }
    }
    free(bpath);
    if (!c->bound_file)
        return;
    json_t *audit = json_object_get(c->bound_file, "verification_audit");
    if (json_is_object(audit) && json_is_true(json_object_get(audit, "warning"))) {
        const char *msg = json_string_value(json_object_get(audit, "message"));
        add_warning(c->warnings, msg && *msg ? msg
                                             : "the verification audit (bound.json) found that"
                                               " verification may not check the results");
    }
    size_t i;
    json_t *w;
    json_t *ws = json_object_get(c->bound_file, "warnings");
    if (json_is_array(ws))
        json_array_foreach(ws, i, w) if (json_is_string(w))
            add_warning(c->warnings, json_string_value(w));
}

/* s.baseline_ms, s.baseline_source and each program's speedup over it
 * ('score' stays the search's own: over the run's baseline, the time of its
 * first program). Returns the baseline (< 0: none). */
static double summary_baseline(summary *c)
{
    double host_ms = -1;
    json_t *prog = json_object_get(c->bound_file, "program");
    if (json_is_true(json_object_get(prog, "ran")))
        host_ms = metric(prog, "time_ms");
    run_view_baseline_source source;
    double baseline =
        c->root_id ? run_view_baseline(c->root_is_seed, c->run_baseline, host_ms, &source) : -1;
    char *text = NULL;
    if (baseline > 0 && source == RUN_VIEW_BASELINE_BOUND)
        text = cuco_strdup("host-driven program, measured by cuco bound (bound.json)");
    else if (baseline > 0 && source == RUN_VIEW_BASELINE_SEARCH)
        text = cuco_sprintf("host-driven program #%lld, measured by the search",
                            (long long)c->root_id);
    else if (baseline > 0)
        text = cuco_sprintf("program #%lld, the search's start: the host-driven program was not"
                            " measured (cuco bound writes it to bound.json)",
                            (long long)c->root_id);
    json_object_set_new(c->s, "baseline_ms", baseline > 0 ? json_real(baseline) : json_null());
    json_object_set_new(c->s, "baseline_source", text ? json_string(text) : json_null());
    free(text);
    json_t *ranked[] = {json_object_get(c->s, "fast_path"), json_object_get(c->s, "best"),
                        json_object_get(c->s, "start")};
    for (size_t k = 0; k < sizeof ranked / sizeof ranked[0]; k++) {
        double t = metric(ranked[k], "time_ms");
        if (json_is_object(ranked[k]))
            json_object_set_new(ranked[k], "speedup",
                                baseline > 0 && t > 0 ? json_real(baseline / t) : json_null());
    }
    return baseline;
}

/* s.bound: the overlap bound of the baseline, its ceiling and the share of
 * the gap the best closed (cuco/run_view.h), or why they do not apply. */
static void summary_bound(summary *c, double baseline)
{
    double compute = -1, comm = -1;
    const char *source = c->bound_file ? bound_from_file(c->bound_file, &compute, &comm) : NULL;
    if (!source && c->root_metrics) {
        compute = metric(c->root_metrics, "compute_ms");
        comm = metric(c->root_metrics, "comm_ms");
        if (compute > 0 && comm > 0)
            source = "root program metrics";
    }
    if (!source) {
        json_object_set_new(c->s, "bound", json_null());
        return;
    }
    run_view_bound vb;
    run_view_bound_of(baseline, compute, comm, c->best_ms, &vb);
    json_t *b = json_pack("{s:f, s:f, s:f, s:s}", "compute_ms", compute, "comm_ms", comm,
                          "bound_ms", vb.bound_ms, "source", source);
    json_object_set_new(b, "ceiling", vb.has_ceiling ? json_real(vb.ceiling) : json_null());
    json_object_set_new(b, "gap_closed", vb.has_gap ? json_real(vb.gap_closed) : json_null());
    json_object_set_new(b, "note", vb.note && baseline > 0 ? json_string(vb.note) : json_null());
    json_object_set_new(c->s, "bound", b);
}

/* Adds one failure (status, first line of its error) to its group. */
static void failure_add(json_t *failures, int64_t id, const char *status, char *reason)
{
    size_t i;
    json_t *f;
    json_array_foreach(failures, i, f)
    {
        if (!strcmp(json_string_value(json_object_get(f, "status")), status ? status : "") &&
            !strcmp(json_string_value(json_object_get(f, "reason")), reason)) {
            json_object_set_new(f, "count",
                                json_integer(json_integer_value(json_object_get(f, "count")) + 1));
            return;
        }
    }
    json_array_append_new(failures,
                          json_pack("{s:s, s:s, s:i, s:I}", "status", status ? status : "",
                                    "reason", reason, "count", 1, "example_id", (json_int_t)id));
}

/* Most frequent first (stable for equal counts: insertion sort). */
static void failures_sort(json_t *failures)
{
    size_t nf = json_array_size(failures);
    for (size_t i = 1; i < nf; i++)
        for (size_t j = i; j > 0; j--) {
            json_t *x = json_array_get(failures, j - 1), *y = json_array_get(failures, j);
            if (json_integer_value(json_object_get(x, "count")) >=
                json_integer_value(json_object_get(y, "count")))
                break;
            json_incref(x);
            json_array_set(failures, j - 1, y);
            json_array_set_new(failures, j, x);
        }
}

/* s.failures: grouped by status and the first line of the error. */
static int summary_failures(summary *c, cuco_err *e)
{
    json_t *failures = json_array();
    json_object_set_new(c->s, "failures", failures);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c->h,
                           "SELECT id, status, error FROM programs WHERE run_id=? AND"
                           " status NOT IN ('ok','pending') ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return dberr(c->h, e, "reading failures");
    sqlite3_bind_int64(st, 1, c->run_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char *reason = error_reason((const char *)sqlite3_column_text(st, 2));
        if (!reason)
            continue;
        failure_add(failures, sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
                    reason);
        free(reason);
    }
    sqlite3_finalize(st);
    failures_sort(failures);
    return 0;
}

/* s.to_95pct, s.retiming, s.side_by_side, s.llm_calls and s.spend_usd. */
static int summary_search(summary *c, cuco_err *e)
{
    json_t *best_obj = json_object_get(c->s, "best");
    json_t *t95 = time_to_95(c->h, c->run_id, metric(best_obj, "score"),
                             metric(json_object_get(c->s, "run"), "started_at"));
    json_object_set_new(c->s, "to_95pct", t95 ? t95 : json_null());
    json_t *rt = retiming_summary(c->h, c->run_id);
    json_object_set_new(c->s, "retiming", rt ? rt : json_null());
    json_t *sbs = side_by_side(c->h, (int64_t)json_integer_value(json_object_get(best_obj, "id")),
                               c->workspace, c->warnings);
    json_object_set_new(c->s, "side_by_side", sbs ? sbs : json_null());
    sqlite3_stmt *st = NULL;
    int found = 0;
    int rc =
        query_one(c->h, "SELECT count(*), coalesce(sum(cost_usd),0) FROM llm_calls WHERE run_id=?",
                  c->run_id, &st, &found, e);
    if (rc < 0)
        return rc;
    json_object_set_new(c->s, "llm_calls", json_integer(found ? sqlite3_column_int64(st, 0) : 0));
    json_object_set_new(c->s, "spend_usd", json_real(found ? sqlite3_column_double(st, 1) : 0.0));
    sqlite3_finalize(st);
    return 0;
}

int report_summary(sqlite3 *h, int64_t run_id, const char *workspace, json_t **out, cuco_err *e)
{
    summary c = {h, run_id, workspace, json_object(), json_array(), NULL, -1, -1, 0, 0, NULL, NULL};
    int rc = 0;
    *out = NULL;
    if (!c.s || !c.warnings) {
        json_decref(c.warnings);
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    json_object_set_new(c.s, "warnings", c.warnings);
    if ((rc = summary_run(&c, e)) < 0 || (rc = summary_counts(&c, e)) < 0 ||
        (rc = summary_best(&c, e)) < 0 || (rc = summary_start(&c, e)) < 0)
        goto out;
    summary_failed(&c);
    summary_bound_file(&c);
    summary_bound(&c, summary_baseline(&c));
    if ((rc = summary_failures(&c, e)) < 0 || (rc = summary_search(&c, e)) < 0)
        goto out;
    *out = c.s;
    c.s = NULL;
out:
    json_decref(c.root_metrics);
    json_decref(c.bound_file);
    json_decref(c.s);
    return rc;
}

int report_workspace_find(const char *arg, char **workspace, char **db_path, cuco_err *e)
{
    *workspace = *db_path = NULL;
    if (arg) {
        if (cuco_fs_is_dir(arg)) {
            char *db = cuco_path_join(arg, "runs.db");
            if (!db)
                return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            if (!cuco_fs_exists(db)) {
                free(db);
                return cuco_err_set(e, CUCO_ENOTFOUND,
                                    "%s has no runs.db (is it a workspace of 'cuco evolve'?)", arg);
            }
            *workspace = cuco_strdup(arg);
            *db_path = db;
        } else if (cuco_fs_exists(arg)) {
            *workspace = cuco_path_dirname(arg);
            *db_path = cuco_strdup(arg);
        } else
            return cuco_err_set(e, CUCO_ENOTFOUND, "no workspace or database at %s", arg);
        if (!*workspace || !*db_path) {
            free(*workspace);
            free(*db_path);
            *workspace = *db_path = NULL;
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        return 0;
    }
    if (cuco_fs_exists("runs.db"))
        return report_workspace_find(".", workspace, db_path, e);
    DIR *d = opendir("cuco-out");
    char *found = NULL;
    int count = 0;
    if (d) {
        struct dirent *ent;
        while ((ent = readdir(d)) != NULL) {
            if (ent->d_name[0] == '.')
                continue;
            char *dir = cuco_path_join("cuco-out", ent->d_name);
            char *db = dir ? cuco_path_join(dir, "runs.db") : NULL;
            if (db && cuco_fs_exists(db)) {
                count++;
                free(found);
                found = dir;
                dir = NULL;
            }
            free(dir);
            free(db);
        }
        closedir(d);
    }
    if (count == 1) {
        int rc = report_workspace_find(found, workspace, db_path, e);
        free(found);
        return rc;
    }
    free(found);
    if (count > 1)
        return cuco_err_set(e, CUCO_EINVAL,
                            "several workspaces under ./cuco-out: name the one to use");
    return cuco_err_set(e, CUCO_ENOTFOUND,
                        "no runs.db here nor under ./cuco-out/*/: name a workspace");
}
