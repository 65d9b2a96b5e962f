/* run_view.c: the one definition of a run's best, held back programs,
 * baseline, bound and gap (see cuco/run_view.h). Reads only; every reader
 * (engine, report, web API, plotters) goes through it. */
#include "cuco/run_view.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/grow.h"
#include "db_internal.h"

/* 1 when the latest re-timing of program p (or of its code) in its run did
 * not hold (t.runs > 0: it was run at all). A copy shares its original's
 * code, so it shares its mark. Needs table retimings (schema 5). */
#define HELD_BACK(p)                                                                               \
    "coalesce((SELECT t.held = 0 AND t.runs > 0 FROM retimings t JOIN programs q"                  \
    " ON q.id = t.challenger_id WHERE t.run_id = " p ".run_id AND (q.id = " p ".id"                \
    " OR q.code_hash = " p ".code_hash) ORDER BY t.id DESC LIMIT 1), 0)"

static int view_error(struct sqlite3 *h, cuco_err *e, const char *what)
{
    return cuco_err_set(e, CUCO_EDB, "database: %s: %s", what, sqlite3_errmsg(h));
}

/* Prepares sql, or older_sql (a database of an older schema) when sql
 * does not prepare; binds run_id to ?1. */
static int prepare_run(struct sqlite3 *h, const char *sql, const char *older_sql, int64_t run_id,
                       sqlite3_stmt **st, const char *what, cuco_err *e)
{
    if (sqlite3_prepare_v2(h, sql, -1, st, NULL) != SQLITE_OK &&
        (!older_sql || sqlite3_prepare_v2(h, older_sql, -1, st, NULL) != SQLITE_OK))
        return view_error(h, e, what);
    sqlite3_bind_int64(*st, 1, run_id);
    return 0;
}

static double col_real_opt(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_double(st, i);
}

static char *col_text_copy(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? cuco_strdup((const char *)t) : NULL;
}

#define PROGRAM_COLS                                                                               \
    "SELECT p.id, coalesce(p.parent_id,0), coalesce(p.second_parent_id,0), p.island,"              \
    " p.generation, p.status, p.mutator, p.score, p.time_ms, p.created_at,"                        \
    " p.status='ok' AND p.score IS NOT NULL, "

static void fill_program(sqlite3_stmt *st, run_view_program *p)
{
    memset(p, 0, sizeof *p);
    p->id = sqlite3_column_int64(st, 0);
    p->parent_id = sqlite3_column_int64(st, 1);
    p->second_parent_id = sqlite3_column_int64(st, 2);
    p->island = sqlite3_column_int(st, 3);
    p->generation = sqlite3_column_int(st, 4);
    p->status = col_text_copy(st, 5);
    p->mutator = col_text_copy(st, 6);
    p->score = col_real_opt(st, 7);
    p->time_ms = col_real_opt(st, 8);
    p->created_at = col_real_opt(st, 9);
    p->ok = sqlite3_column_int(st, 10);
    p->held_back = p->ok && sqlite3_column_int(st, 11); /* a failed program counts for nothing */
}

void run_view_programs_free(run_view_program *ps, size_t n)
{
    for (size_t i = 0; ps && i < n; i++) {
        free(ps[i].status);
        free(ps[i].mutator);
    }
    free(ps);
}

int run_view_programs(struct sqlite3 *h, int64_t run_id, run_view_program **out, size_t *n,
                      cuco_err *e)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    int rc = prepare_run(h,
                         PROGRAM_COLS HELD_BACK("p") " FROM programs p"
                                                     " WHERE p.run_id=?1 AND p.status<>'pending'"
                                                     " ORDER BY p.id",
                         PROGRAM_COLS "0 FROM programs p WHERE p.run_id=?1 AND"
                                      " p.status<>'pending' ORDER BY p.id",
                         run_id, &st, "reading the run's programs", e);
    if (rc < 0)
        return rc;
    size_t cap = 0;
    double best = -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cuco_grow(out, &cap, *n + 1, sizeof **out, 64) < 0) {
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            goto fail;
        }
        run_view_program *p = &(*out)[(*n)++];
        fill_program(st, p);
        if (p->ok && !p->held_back && p->score > best)
            best = p->score;
        p->best_so_far = best;
    }
    if (rc != SQLITE_DONE) {
        rc = view_error(h, e, "reading the run's programs");
        goto fail;
    }
    sqlite3_finalize(st);
    return 0;
fail:
    sqlite3_finalize(st);
    run_view_programs_free(*out, *n);
    *out = NULL;
    *n = 0;
    return rc;
}

const run_view_program *run_view_find(const run_view_program *ps, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ps[mid].id == id)
            return &ps[mid];
        if (ps[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* 1 when the run searches with re-timing and the database has the view of
 * its champion (schema 6). */
static int run_retimes(struct sqlite3 *h, int64_t run_id)
{
    sqlite3_stmt *st = NULL;
    int retimes = 0;
    if (sqlite3_prepare_v2(h, "SELECT 1 FROM run_champions LIMIT 1", -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return 0;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(h, "SELECT config FROM runs WHERE id=?", -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
        json_t *config = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
        json_t *rounds = json_object_get(config, "retime_rounds");
        retimes = json_is_integer(rounds) && json_integer_value(rounds) > 0;
        json_decref(config);
    }
    sqlite3_finalize(st);
    return retimes;
}

/* Runs sql (?1 run id, ?2 program id when program_id > 0) expecting at
 * most one row of (id, score, time_ms), which fills best. */
static int best_query(struct sqlite3 *h, const char *sql, const char *older_sql, int64_t run_id,
                      int64_t program_id, run_view_best *best, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = prepare_run(h, sql, older_sql, run_id, &st, "reading the run's best", e);
    if (rc < 0)
        return rc;
    if (program_id > 0)
        sqlite3_bind_int64(st, 2, program_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        best->id = sqlite3_column_int64(st, 0);
        best->score = col_real_opt(st, 1);
        best->time_ms = col_real_opt(st, 2);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : view_error(h, e, "reading the run's best");
}

int run_view_best_get(struct sqlite3 *h, int64_t run_id, run_view_best *best, cuco_err *e)
{
    memset(best, 0, sizeof *best);
    best->score = best->time_ms = -1;
    if (run_retimes(h, run_id))
        return best_query(h,
                          "SELECT p.id, p.score, p.time_ms FROM run_champions c JOIN programs p"
                          " ON p.id = coalesce(c.challenger_id, c.root_id) WHERE c.run_id=?1"
                          " AND p.status='ok' AND p.score IS NOT NULL",
                          NULL, run_id, 0, best, e);
    int rc = best_query(h,
                        "SELECT p.id, p.score, p.time_ms FROM programs p WHERE p.run_id=?1"
                        " AND p.status='ok' AND p.score IS NOT NULL"
                        " AND NOT " HELD_BACK("p") " ORDER BY p.score DESC, p.id LIMIT 1",
                        "SELECT p.id, p.score, p.time_ms FROM programs p WHERE p.run_id=?1"
                        " AND p.status='ok' AND p.score IS NOT NULL"
                        " ORDER BY p.score DESC, p.id LIMIT 1",
                        run_id, 0, best, e);
    if (rc < 0 || best->id == 0)
        return rc;
    /* the original before its copies (they share its code) */
    return best_query(
        h,
        "SELECT o.id, o.score, o.time_ms FROM programs p JOIN programs o"
        " ON o.run_id = p.run_id AND o.code_hash = p.code_hash AND o.status = 'ok'"
        " AND o.score IS NOT NULL WHERE p.run_id=?1 AND p.id=?2 ORDER BY o.id LIMIT 1",
        NULL, run_id, best->id, best, e);
}

int db_run_best(cuco_db *db, int64_t run_id, run_view_best *best, cuco_err *e)
{
    return run_view_best_get(db->h, run_id, best, e);
}

int db_program_held_back(cuco_db *db, int64_t id, int *held_back, cuco_err *e)
{
    sqlite3_stmt *st;
    *held_back = 0;
    int rc = prepare_run(
        db->h, "SELECT p.status='ok' AND " HELD_BACK("p") " FROM programs p WHERE p.id=?1",
        "SELECT 0", id, &st, "reading a program's re-timing", e);
    if (rc < 0)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *held_back = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE
               ? 0
               : view_error(db->h, e, "reading a program's re-timing");
}

double run_view_baseline(int root_is_seed, double run_baseline_ms, double host_ms,
                         run_view_baseline_source *source)
{
    if (!root_is_seed && host_ms > 0) {
        *source = RUN_VIEW_BASELINE_BOUND;
        return host_ms;
    }
    if (run_baseline_ms > 0) {
        *source = root_is_seed ? RUN_VIEW_BASELINE_SEARCH : RUN_VIEW_BASELINE_START;
        return run_baseline_ms;
    }
    *source = RUN_VIEW_BASELINE_NONE;
    return -1;
}

void run_view_bound_of(double baseline_ms, double compute_ms, double comm_ms, double best_ms,
                       run_view_bound *b)
{
    memset(b, 0, sizeof *b);
    b->bound_ms = compute_ms > comm_ms ? compute_ms : comm_ms;
    if (!(baseline_ms > 0) || baseline_ms < b->bound_ms) {
        b->note = "the baseline's timed parts took longer than its whole step (clock and power"
                  " differ between them): no bound applies";
        return;
    }
    b->has_ceiling = 1;
    b->ceiling = b->bound_ms > 0 ? baseline_ms / b->bound_ms : 1.0;
    if (best_ms <= 0 || !(baseline_ms > b->bound_ms)) /* no gap to close */
        return;
    if (best_ms < b->bound_ms) {
        b->note = "bound does not apply: computation changed (the best program is faster than"
                  " the computation alone)";
        return;
    }
    b->has_gap = 1;
    b->gap_closed = (baseline_ms - best_ms) / (baseline_ms - b->bound_ms);
}
