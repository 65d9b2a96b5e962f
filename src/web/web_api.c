/* web_api.c: the web UI's request handling, independent of the HTTP server:
 * a (method, path, query) triple in, an HTTP status and a body out. JSON
 * endpoints read the run database through a read-only connection opened for
 * the request; everything else is one of the embedded static files. */
#include "cuco/web.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/diff.h"
#include "cuco/doe.h"
#include "cuco/embedded.h"
#include "cuco/report.h"
#include "cuco/run_view.h"

#define JSON_TYPE "application/json; charset=utf-8"

void web_response_free(cuco_web_response *r)
{
    if (!r->body_static)
        free(r->body);
    memset(r, 0, sizeof *r);
}

typedef struct request {
    const char *db_path, *workspace;
    const cuco_web_param *params;
    size_t nparams;
    sqlite3 *db;
    cuco_web_response *res;
} request;

/* Length of the well-formed UTF-8 sequence that starts s (n bytes left):
 * 1..4, or 0 where s starts no such sequence (a stray continuation byte, an
 * overlong form, a surrogate, a code point past U+10FFFF, a cut-off tail). */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = 0;
    if (c < 0x80)
        len = 1;
    else if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

static int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0, len; i < n; i += len)
        if ((len = utf8_sequence(p + i, n - i)) == 0)
            return 0;
    return 1;
}

/* A JSON string of s[0..n), every byte that is not well-formed UTF-8
 * replaced by U+FFFD: text in the database (a compiler's or a program's
 * output) and request bytes are not always UTF-8, and JSON must be. */
static json_t *json_text(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    cuco_buf b = CUCO_BUF_INIT;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0) {
            cuco_buf_puts(&b, "\xEF\xBF\xBD");
            i++;
        } else {
            cuco_buf_append(&b, s + i, len);
            i += len;
        }
    }
    v = json_stringn(b.data ? b.data : "", b.len);
    cuco_buf_free(&b);
    return v;
}

static int respond_json(request *rq, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    if (!text)
        return CUCO_ENOMEM;
    rq->res->status = status;
    rq->res->body = text;
    rq->res->len = strlen(text);
    rq->res->content_type = JSON_TYPE;
    return 0;
}

static int respond_error(request *rq, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int respond_error(request *rq, int status, const char *fmt, ...)
{
    cuco_buf msg = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    if (rc < 0)
        return CUCO_ENOMEM;
    json_t *body =
        json_pack("{s:o, s:i}", "error", json_text(cuco_buf_str(&msg), msg.len), "status", status);
    cuco_buf_free(&msg);
    return respond_json(rq, status, body);
}

static const char *param(const request *rq, const char *key)
{
    for (size_t i = 0; i < rq->nparams; i++)
        if (!strcmp(rq->params[i].key, key))
            return rq->params[i].value ? rq->params[i].value : "";
    return NULL;
}

/* 400 for a parameter the endpoint does not take (a typo should not be
 * silently ignored). allowed: NULL-terminated. Returns 1 when answered. */
static int reject_unknown_params(request *rq, const char *const *allowed)
{
    for (size_t i = 0; i < rq->nparams; i++) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(*a, rq->params[i].key);
        if (!ok) {
            respond_error(rq, 400, "unknown parameter '%s'", rq->params[i].key);
            return 1;
        }
    }
    return 0;
}

/* Parses a whole decimal integer in [lo, hi]. */
static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int open_db(request *rq)
{
    cuco_err e = CUCO_ERR_INIT;
    if (report_db_open(rq->db_path, &rq->db, &e) < 0) {
        int rc = respond_error(rq, e.code == CUCO_ENOTFOUND ? 503 : 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return rc < 0 ? rc : 1;
    }
    return 0;
}

/* Resolves ?run= (latest when absent). Returns 1 when an error was answered. */
static int resolve_run(request *rq, int64_t *run_id)
{
    const char *s = param(rq, "run");
    long long v = 0;
    if (s && parse_int(s, 1, INT64_MAX, &v) < 0) {
        respond_error(rq, 400, "bad run '%s': expected a positive integer", s);
        return 1;
    }
    *run_id = v;
    cuco_err e = CUCO_ERR_INIT;
    if (report_run_resolve(rq->db, run_id, &e) < 0) {
        respond_error(rq, e.code == CUCO_ENOTFOUND ? 404 : 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return 1;
    }
    return 0;
}

static json_t *col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                     : json_real(sqlite3_column_double(st, i));
}

static json_t *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? json_text((const char *)t, (size_t)sqlite3_column_bytes(st, i)) : json_null();
}

static json_t *col_id(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                     : json_integer(sqlite3_column_int64(st, i));
}

/* A JSON column parsed (falls back to the raw text when it is not JSON). */
static json_t *col_json(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t)
        return json_null();
    json_t *v = json_loads((const char *)t, JSON_DECODE_ANY, NULL);
    return v ? v : json_text((const char *)t, (size_t)sqlite3_column_bytes(st, i));
}

static int db_fail(request *rq, const char *what)
{
    return respond_error(rq, 500, "database: %s: %s", what, sqlite3_errmsg(rq->db));
}

static int api_runs(request *rq)
{
    static const char *const allowed[] = {NULL};
    if (reject_unknown_params(rq, allowed))
        return 0;
    int rc = open_db(rq);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(rq->db,
                           "SELECT r.id, r.workload, r.status, r.seed, r.baseline_ms,"
                           " r.started_at, r.ended_at,"
                           " (SELECT count(*) FROM programs p WHERE p.run_id=r.id),"
                           " (SELECT coalesce(sum(cost_usd),0) FROM llm_calls c"
                           " WHERE c.run_id=r.id) FROM runs r ORDER BY r.id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(rq, "listing runs");
    json_t *runs = json_array();
    run_view_best best = {0, -1, -1};
    cuco_err e = CUCO_ERR_INIT;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        /* the best as every view names it (cuco/run_view.h) */
        if (run_view_best_get(rq->db, sqlite3_column_int64(st, 0), &best, &e) < 0)
            break;
        json_array_append_new(
            runs,
            json_pack("{s:I, s:o, s:o, s:I, s:o, s:o, s:o, s:I, s:o, s:f}", "id",
                      (json_int_t)sqlite3_column_int64(st, 0), "workload", col_text(st, 1),
                      "status", col_text(st, 2), "seed", (json_int_t)sqlite3_column_int64(st, 3),
                      "baseline_ms", col_real(st, 4), "started_at", col_real(st, 5), "ended_at",
                      col_real(st, 6), "programs", (json_int_t)sqlite3_column_int64(st, 7),
                      "best_score", best.id > 0 ? json_real(best.score) : json_null(), "spend_usd",
                      sqlite3_column_double(st, 8)));
    }
    sqlite3_finalize(st);
    if (e.code) {
        json_decref(runs);
        rc = respond_error(rq, 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return rc;
    }
    if (rc != SQLITE_DONE) {
        json_decref(runs);
        return db_fail(rq, "listing runs");
    }
    return respond_json(rq, 200, json_pack("{s:o}", "runs", runs));
}

#define PROGRAM_COLS                                                                               \
    "id, parent_id, second_parent_id, island, generation, mutator, patch_type, description,"       \
    " status, score, time_ms, novelty, created_at, error"

/* First line of an error text, for lists. */
static json_t *first_line(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    if (!t)
        return json_null();
    while (*t == '\n' || *t == ' ' || *t == '\r')
        t++;
    size_t n = strcspn(t, "\n");
    if (n > 200)
        n = 200;
    while (n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80)
        n--;
    return json_text(t, n);
}

static json_t *program_row(sqlite3_stmt *st)
{
    json_t *p = json_pack("{s:I, s:o, s:o, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
                          (json_int_t)sqlite3_column_int64(st, 0), "parent_id", col_id(st, 1),
                          "second_parent_id", col_id(st, 2), "island", sqlite3_column_int(st, 3),
                          "generation", sqlite3_column_int(st, 4), "mutator", col_text(st, 5),
                          "patch_type", col_text(st, 6), "description", col_text(st, 7), "status",
                          col_text(st, 8), "score", col_real(st, 9), "time_ms", col_real(st, 10),
                          "novelty", col_real(st, 11), "created_at", col_real(st, 12));
    if (p)
        json_object_set_new(p, "error_line", first_line(st, 13));
    return p;
}

/* Sets "held_back" on each program row (objects with "id") of the run, as
 * every view defines it (cuco/run_view.h). On a database error the error
 * response is made and a negative code returned. */
static int mark_held_back(request *rq, int64_t run_id, json_t *rows)
{
    run_view_program *ps;
    size_t n;
    cuco_err e = CUCO_ERR_INIT;
    if (run_view_programs(rq->db, run_id, &ps, &n, &e) < 0) {
        respond_error(rq, 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return CUCO_EDB;
    }
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        const run_view_program *v =
            run_view_find(ps, n, (int64_t)json_integer_value(json_object_get(row, "id")));
        json_object_set_new(row, "held_back", json_boolean(v && v->held_back));
    }
    run_view_programs_free(ps, n);
    return 0;
}

static int api_programs(request *rq)
{
    static const char *const allowed[] = {"run",   "status", "island", "generation",
                                          "limit", "order",  NULL};
    static const struct {
        const char *name, *sql;
    } orders[] = {
        {"id", "id"},
        {"-id", "id DESC"},
        {"score", "score IS NULL, score, id"},
        {"-score", "score IS NULL, score DESC, id"},
        {"generation", "generation, id"},
        {"-generation", "generation DESC, id"},
        {"time_ms", "time_ms IS NULL, time_ms, id"},
        {"-time_ms", "time_ms IS NULL, time_ms DESC, id"},
        {"island", "island, id"},
    };
    if (reject_unknown_params(rq, allowed))
        return 0;
    long long island = -1, generation = -1, limit = -1;
    const char *s;
    if ((s = param(rq, "island")) && parse_int(s, 0, 1000000, &island) < 0)
        return respond_error(rq, 400, "bad island '%s': expected an integer >= 0", s);
    if ((s = param(rq, "generation")) && parse_int(s, 0, 100000000, &generation) < 0)
        return respond_error(rq, 400, "bad generation '%s': expected an integer >= 0", s);
    if ((s = param(rq, "limit")) && parse_int(s, 1, 1000000, &limit) < 0)
        return respond_error(rq, 400, "bad limit '%s': expected an integer in 1..1000000", s);
    const char *status = param(rq, "status");
    if (status) {
        size_t n = strlen(status);
        if (n == 0 || n > 64 || strspn(status, "abcdefghijklmnopqrstuvwxyz_0123456789") != n)
            return respond_error(rq, 400, "bad status '%s'", status);
    }
    const char *order_sql = "id";
    if ((s = param(rq, "order"))) {
        order_sql = NULL;
        for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++)
            if (!strcmp(orders[i].name, s))
                order_sql = orders[i].sql;
        if (!order_sql)
            return respond_error(rq, 400,
                                 "bad order '%s': expected id, score, generation, time_ms or"
                                 " island (prefix '-' for descending, except island)",
                                 s);
    }
    int64_t run_id;
    int rc;
    if ((rc = open_db(rq)) != 0 || resolve_run(rq, &run_id))
        return rc < 0 ? rc : 0;
    char *sql = cuco_sprintf("SELECT " PROGRAM_COLS " FROM programs WHERE run_id=?1"
                             " AND (?2 IS NULL OR status=?2) AND (?3 < 0 OR island=?3)"
                             " AND (?4 < 0 OR generation=?4) ORDER BY %s LIMIT ?5",
                             order_sql);
    sqlite3_stmt *st;
    if (!sql)
        return CUCO_ENOMEM;
    rc = sqlite3_prepare_v2(rq->db, sql, -1, &st, NULL);
    free(sql);
    if (rc != SQLITE_OK)
        return db_fail(rq, "listing programs");
    sqlite3_bind_int64(st, 1, run_id);
    if (status)
        sqlite3_bind_text(st, 2, status, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, island);
    sqlite3_bind_int64(st, 4, generation);
    sqlite3_bind_int64(st, 5, limit);
    json_t *list = json_array();
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_array_append_new(list, program_row(st));
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        json_decref(list);
        return db_fail(rq, "listing programs");
    }
    if (mark_held_back(rq, run_id, list) < 0) {
        json_decref(list);
        return rq->res->body ? 0 : CUCO_ENOMEM;
    }
    return respond_json(rq, 200,
                        json_pack("{s:I, s:I, s:o}", "run", (json_int_t)run_id, "count",
                                  (json_int_t)json_array_size(list), "programs", list));
}

static int api_program(request *rq, const char *id_text)
{
    static const char *const allowed[] = {NULL};
    long long id;
    if (reject_unknown_params(rq, allowed))
        return 0;
    if (parse_int(id_text, 1, INT64_MAX, &id) < 0)
        return respond_error(rq, 400, "bad program id '%s'", id_text);
    int rc;
    if ((rc = open_db(rq)) != 0)
        return rc < 0 ? rc : 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(rq->db,
                           "SELECT " PROGRAM_COLS ", run_id, code, code_hash, metrics, knobs,"
                           " (SELECT code FROM programs q WHERE q.id=programs.parent_id)"
                           " FROM programs WHERE id=?",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(rq, "reading program");
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
            return respond_error(rq, 404, "no program %lld", id);
        return db_fail(rq, "reading program");
    }
    json_t *p = program_row(st);
    int64_t run_id = sqlite3_column_int64(st, 14);
    json_object_set_new(p, "run_id", json_integer(run_id));
    json_object_set_new(p, "code", col_text(st, 15));
    json_object_set_new(p, "code_hash", col_text(st, 16));
    json_object_set_new(p, "metrics", col_json(st, 17));
    json_object_set_new(p, "knobs", col_json(st, 18));
    json_object_set_new(p, "error", col_text(st, 13));
    const char *code = (const char *)sqlite3_column_text(st, 15);
    const char *parent_code = (const char *)sqlite3_column_text(st, 19);
    if (sqlite3_column_type(st, 1) != SQLITE_NULL && parent_code && code) {
        cuco_buf diff = CUCO_BUF_INIT;
        cuco_err e = CUCO_ERR_INIT;
        size_t added = 0, removed = 0;
        char *an = cuco_sprintf("program %lld", (long long)sqlite3_column_int64(st, 1));
        char *bn = cuco_sprintf("program %lld", id);
        if (an && bn &&
            cuco_diff_lines(parent_code, code, an, bn, 3, &diff, &added, &removed, &e) == 0) {
            json_object_set_new(p, "diff", json_text(cuco_buf_str(&diff), diff.len));
            json_object_set_new(p, "diff_added", json_integer((json_int_t)added));
            json_object_set_new(p, "diff_removed", json_integer((json_int_t)removed));
        } else
            json_object_set_new(p, "diff", json_null());
        free(an);
        free(bn);
        cuco_buf_free(&diff);
        cuco_err_clear(&e);
    } else
        json_object_set_new(p, "diff", json_null());
    sqlite3_finalize(st);

    json_t *children = json_array();
    if (sqlite3_prepare_v2(rq->db,
                           "SELECT id FROM programs WHERE parent_id=?1 OR second_parent_id=?1"
                           " ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        while (sqlite3_step(st) == SQLITE_ROW)
            json_array_append_new(children, json_integer(sqlite3_column_int64(st, 0)));
        sqlite3_finalize(st);
    }
    json_object_set_new(p, "children", children);
    json_t *one = json_pack("[O]", p);
    rc = one ? mark_held_back(rq, run_id, one) : CUCO_ENOMEM;
    json_decref(one);
    if (rc < 0) {
        json_decref(p);
        return rq->res->body ? 0 : rc;
    }
    return respond_json(rq, 200, p);
}

/* The prologue of the endpoints that list one run's rows (?run= only):
 * checks the parameters, opens the database, resolves the run and prepares
 * sql (or, when that fails, as on a database of an older schema, older_sql
 * unless NULL) with the run id bound to its one parameter. Returns 1 with
 * *st ready; 0 when the response is already decided, *ret being the
 * handler's result. */
/* The start of a request about one run (`?run=ID`, the only parameter): 1
 * with the database open and *run_id set; 0 when a response has been sent
 * (or *ret < 0 on a failure of cuco's own). */
static int run_request(request *rq, int64_t *run_id, int *ret)
{
    static const char *const allowed[] = {"run", NULL};
    *ret = 0;
    if (reject_unknown_params(rq, allowed))
        return 0;
    int rc;
    if ((rc = open_db(rq)) != 0 || resolve_run(rq, run_id)) {
        *ret = rc < 0 ? rc : 0;
        return 0;
    }
    return 1;
}

static int run_statement(request *rq, const char *sql, const char *older_sql, const char *what,
                         int64_t *run_id, sqlite3_stmt **st, int *ret)
{
    if (!run_request(rq, run_id, ret))
        return 0;
    if (sqlite3_prepare_v2(rq->db, sql, -1, st, NULL) != SQLITE_OK &&
        (!older_sql || sqlite3_prepare_v2(rq->db, older_sql, -1, st, NULL) != SQLITE_OK)) {
        *ret = db_fail(rq, what);
        return 0;
    }
    sqlite3_bind_int64(*st, 1, *run_id);
    return 1;
}

/* The evaluations in order, each with the best so far and its held back
 * mark as every view defines them (cuco/run_view.h). */
static json_t *evaluation_rows(const run_view_program *ps, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n && list; i++) {
        const run_view_program *p = &ps[i];
        json_array_append_new(
            list,
            json_pack("{s:I, s:I, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "n",
                      (json_int_t)i + 1, "id", (json_int_t)p->id, "island", p->island, "generation",
                      p->generation, "status",
                      p->status ? json_text(p->status, strlen(p->status)) : json_null(), "score",
                      p->score >= 0 ? json_real(p->score) : json_null(), "time_ms",
                      p->time_ms >= 0 ? json_real(p->time_ms) : json_null(), "mutator",
                      p->mutator ? json_text(p->mutator, strlen(p->mutator)) : json_null(),
                      "created_at", p->created_at >= 0 ? json_real(p->created_at) : json_null(),
                      "best", p->best_so_far > 0 ? json_real(p->best_so_far) : json_null(),
                      "held_back", p->held_back));
    }
    return list;
}

static int api_evaluations(request *rq)
{
    int64_t run_id;
    int rc;
    if (!run_request(rq, &run_id, &rc))
        return rc;
    run_view_program *ps;
    size_t n;
    cuco_err e = CUCO_ERR_INIT;
    if (run_view_programs(rq->db, run_id, &ps, &n, &e) < 0) {
        rc = respond_error(rq, 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return rc;
    }
    json_t *list = evaluation_rows(ps, n);
    run_view_programs_free(ps, n);
    sqlite3_stmt *st;
    /* the evaluation cache of the run's workload (under any inputs digest:
     * scopes are "NAME#DIGEST"), by status */
    json_t *cache = json_object();
    if (sqlite3_prepare_v2(rq->db,
                           "WITH w(name) AS (SELECT workload FROM runs WHERE id=?)"
                           " SELECT status, count(*) FROM evaluations, w WHERE workload=w.name"
                           " OR substr(workload, 1, length(w.name) + 1) = w.name || '#'"
                           " GROUP BY status ORDER BY status",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run_id);
        while (sqlite3_step(st) == SQLITE_ROW)
            if (sqlite3_column_text(st, 0))
                json_object_set_new(cache, (const char *)sqlite3_column_text(st, 0),
                                    json_integer(sqlite3_column_int64(st, 1)));
        sqlite3_finalize(st);
    }
    return respond_json(rq, 200,
                        json_pack("{s:I, s:I, s:o, s:o}", "run", (json_int_t)run_id, "count",
                                  (json_int_t)n, "evaluations", list, "cache", cache));
}

static int api_llm(request *rq)
{
    int64_t run_id;
    sqlite3_stmt *st;
    int rc;
    if (!run_statement(rq,
                       "SELECT model, count(*), coalesce(sum(input_tokens),0),"
                       " coalesce(sum(output_tokens),0), coalesce(sum(cached_tokens),0),"
                       " coalesce(sum(cost_usd),0), avg(latency_s),"
                       " sum(coalesce(status,'')<>'ok')"
                       " FROM llm_calls WHERE run_id=? GROUP BY model"
                       " ORDER BY sum(cost_usd) DESC, model",
                       NULL, "reading LLM calls", &run_id, &st, &rc))
        return rc;
    json_t *models = json_array();
    double total = 0;
    json_int_t calls = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        total += sqlite3_column_double(st, 5);
        calls += sqlite3_column_int64(st, 1);
        json_array_append_new(
            models, json_pack("{s:o, s:I, s:I, s:I, s:I, s:f, s:o, s:I}", "model", col_text(st, 0),
                              "calls", (json_int_t)sqlite3_column_int64(st, 1), "input_tokens",
                              (json_int_t)sqlite3_column_int64(st, 2), "output_tokens",
                              (json_int_t)sqlite3_column_int64(st, 3), "cached_tokens",
                              (json_int_t)sqlite3_column_int64(st, 4), "cost_usd",
                              sqlite3_column_double(st, 5), "latency_s_avg", col_real(st, 6),
                              "failed", (json_int_t)sqlite3_column_int64(st, 7)));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        json_decref(models);
        return db_fail(rq, "reading LLM calls");
    }
    return respond_json(rq, 200,
                        json_pack("{s:I, s:I, s:f, s:o}", "run", (json_int_t)run_id, "calls", calls,
                                  "total_usd", total, "models", models));
}

static int api_meta(request *rq)
{
    int64_t run_id;
    sqlite3_stmt *st;
    int rc;
    if (!run_statement(rq,
                       "SELECT id, generation, text, created_at FROM meta_summaries"
                       " WHERE run_id=? ORDER BY id",
                       NULL, "reading meta summaries", &run_id, &st, &rc))
        return rc;
    json_t *list = json_array();
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_array_append_new(list, json_pack("{s:I, s:i, s:o, s:o}", "id",
                                              (json_int_t)sqlite3_column_int64(st, 0), "generation",
                                              sqlite3_column_int(st, 1), "text", col_text(st, 2),
                                              "created_at", col_real(st, 3)));
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        json_decref(list);
        return db_fail(rq, "reading meta summaries");
    }
    return respond_json(rq, 200,
                        json_pack("{s:I, s:o}", "run", (json_int_t)run_id, "summaries", list));
}

static int api_summary(request *rq)
{
    int64_t run_id;
    int rc;
    if (!run_request(rq, &run_id, &rc))
        return rc;
    json_t *s = NULL;
    cuco_err e = CUCO_ERR_INIT;
    if (report_summary(rq->db, run_id, rq->workspace, &s, &e) < 0) {
        rc = respond_error(rq, 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return rc;
    }
    return respond_json(rq, 200, s);
}

/* The run's knob effects (cuco/doe.h): what each knob's values do alone and
 * the strongest two-knob interactions, one line each, as in `cuco report`. */
static int api_effects(request *rq)
{
    int64_t run_id;
    int rc;
    if (!run_request(rq, &run_id, &rc))
        return rc;
    cuco_buf text = CUCO_BUF_INIT;
    size_t n_obs = 0;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_effects_lines_of_run(rq->db_path, run_id, "", 4, &text, &n_obs, &e) < 0) {
        rc = respond_error(rq, 500, "%s", cuco_err_msg(&e));
        cuco_err_clear(&e);
        cuco_buf_free(&text);
        return rc;
    }
    json_t *lines = json_array();
    for (char *line = text.len ? text.data : NULL, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (*line)
            json_array_append_new(lines, json_string(line));
        if (!next)
            break;
    }
    cuco_buf_free(&text);
    return respond_json(rq, 200,
                        json_pack("{s:I, s:I, s:o}", "run", (json_int_t)run_id, "programs",
                                  (json_int_t)n_obs, "lines", lines));
}

static const char *content_type_of(const char *name)
{
    if (cuco_str_ends_with(name, ".html"))
        return "text/html; charset=utf-8";
    if (cuco_str_ends_with(name, ".js"))
        return "text/javascript; charset=utf-8";
    if (cuco_str_ends_with(name, ".css"))
        return "text/css; charset=utf-8";
    if (cuco_str_ends_with(name, ".svg"))
        return "image/svg+xml";
    return "application/octet-stream";
}

static int serve_static(request *rq, const char *path)
{
    const char *name = !strcmp(path, "/") ? "index.html" : path + 1;
    if (strchr(name, '/') || strstr(name, "..") || !*name)
        return respond_error(rq, 404, "no such page %s", path);
    char *key = cuco_sprintf("src/web/static/%s", name);
    if (!key)
        return CUCO_ENOMEM;
    size_t size = 0;
    const unsigned char *data = cuco_embedded_find(key, &size);
    free(key);
    if (!data)
        return respond_error(rq, 404, "no such page %s", path);
    rq->res->status = 200;
    rq->res->body = (char *)data;
    rq->res->len = size;
    rq->res->body_static = 1;
    rq->res->content_type = content_type_of(name);
    return 0;
}

static int dispatch(request *rq, const char *method, const char *path)
{
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return respond_error(rq, 405, "method %s not allowed: this API is read-only (GET, HEAD)",
                             method);
    if (!cuco_str_starts_with(path, "/api/"))
        return serve_static(rq, path);
    const char *ep = path + 5;
    if (!strcmp(ep, "runs"))
        return api_runs(rq);
    if (!strcmp(ep, "programs"))
        return api_programs(rq);
    if (cuco_str_starts_with(ep, "programs/") && !strchr(ep + 9, '/'))
        return api_program(rq, ep + 9);
    if (!strcmp(ep, "evaluations"))
        return api_evaluations(rq);
    if (!strcmp(ep, "llm"))
        return api_llm(rq);
    if (!strcmp(ep, "meta"))
        return api_meta(rq);
    if (!strcmp(ep, "summary"))
        return api_summary(rq);
    if (!strcmp(ep, "effects"))
        return api_effects(rq);
    return respond_error(rq, 404, "no such endpoint %s", path);
}

/* The answer when not even an error response could be made. */
static void respond_oom(cuco_web_response *res)
{
    static const char oom[] = "{\"error\":\"out of memory\",\"status\":500}";
    web_response_free(res);
    res->status = 500;
    res->body = (char *)oom;
    res->len = sizeof oom - 1;
    res->body_static = 1;
    res->content_type = JSON_TYPE;
}

void web_bad_request(const char *why, cuco_web_response *res)
{
    memset(res, 0, sizeof *res);
    request rq = {NULL, NULL, NULL, 0, NULL, res};
    if (respond_error(&rq, 400, "%s", why) < 0 || !res->body)
        respond_oom(res);
}

/* Paths and query parameters arrive percent-decoded, as any bytes at all;
 * only UTF-8 ones are looked at. */
static int request_is_utf8(const char *method, const char *path, const cuco_web_param *params,
                           size_t nparams)
{
    if (!utf8_valid(method) || !utf8_valid(path))
        return 0;
    for (size_t i = 0; i < nparams; i++)
        if (!utf8_valid(params[i].key) || (params[i].value && !utf8_valid(params[i].value)))
            return 0;
    return 1;
}

int web_handle(const char *db_path, const char *workspace, const char *method, const char *path,
               const cuco_web_param *params, size_t nparams, cuco_web_response *res)
{
    memset(res, 0, sizeof *res);
    request rq = {db_path, workspace, params, nparams, NULL, res};
    int rc = request_is_utf8(method, path, params, nparams)
                 ? dispatch(&rq, method, path)
                 : respond_error(&rq, 400, "the request is not valid UTF-8 (path or query)");
    report_db_close(rq.db);
    if (rc < 0 || !res->body) {
        respond_oom(res);
        return rc < 0 ? rc : CUCO_ENOMEM;
    }
    return 0;
}
