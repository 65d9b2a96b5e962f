/* test_web.c: the web UI's JSON API on a real database (test_web_fixture.h):
 * every endpoint, the filters, 400/404/405, requests and stored text that
 * are not UTF-8, the static page, and the API still answering, over HTTP
 * too, while another connection writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/fs.h"
#include "cuco/web.h"
#include "test_web_fixture.h"

static char db_path[512];

static int setup_db(void **state)
{
    (void)state;
    const char *tmp = getenv("CUCO_TEST_TMP");
    cuco_err e = CUCO_ERR_INIT;
    if (!tmp)
        tmp = "/tmp";
    cuco_fs_mkdirs(tmp, &e);
    cuco_err_clear(&e);
    snprintf(db_path, sizeof db_path, "%s/test_web_%ld.db", tmp, (long)getpid());
    return fixture_write_db(db_path) == 0 ? 0 : -1;
}

static int teardown_db(void **state)
{
    (void)state;
    char extra[600];
    remove(db_path);
    snprintf(extra, sizeof extra, "%s-wal", db_path);
    remove(extra);
    snprintf(extra, sizeof extra, "%s-shm", db_path);
    remove(extra);
    return 0;
}

/* GETs path with "k=v" pairs (NULL-terminated list); returns parsed body,
 * asserts the status. */
static json_t *get_json(const char *method, const char *path, int want_status, ...)
{
    cuco_web_param params[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, want_status);
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL && n < 8) {
        params[n].key = k;
        params[n].value = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    cuco_web_response res;
    assert_int_equal(web_handle(db_path, NULL, method, path, params, n, &res), 0);
    if (res.status != want_status)
        fprintf(stderr, "%s %s -> %d: %.*s\n", method, path, res.status, (int)res.len, res.body);
    assert_int_equal(res.status, want_status);
    assert_non_null(strstr(res.content_type, "json"));
    json_error_t jerr;
    json_t *v = json_loadb(res.body, res.len, 0, &jerr);
    assert_non_null(v);
    web_response_free(&res);
    return v;
}

static double num(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}
static json_int_t integer(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static void test_runs(void **state)
{
    (void)state;
    json_t *v = get_json("GET", "/api/runs", 200, NULL);
    json_t *runs = json_object_get(v, "runs");
    assert_int_equal(json_array_size(runs), 2);
    json_t *r1 = json_array_get(runs, 0);
    assert_string_equal(json_string_value(json_object_get(r1, "workload")), "cpu_demo");
    assert_int_equal(integer(r1, "programs"), 9);
    assert_true(fabs(num(r1, "best_score") - 2.0) < 1e-9);
    assert_true(fabs(num(r1, "spend_usd") - 0.037) < 1e-9);
    assert_string_equal(json_string_value(json_object_get(r1, "status")), "done");
    json_decref(v);
}

static void exec_sql(const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db_path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

/* With re-timing on, a run's best score is its champion's (#4, 10 / 5.5),
 * not the highest (#7, 2.0), as in cuco report. */
static void test_runs_champion(void **state)
{
    (void)state;
    exec_sql("UPDATE runs SET config=json_set(config, '$.retime_rounds', 2) WHERE id=1;"
             " INSERT INTO retimings(run_id, challenger_id, champion_id, held) VALUES(1, 4, 1, 1)");
    json_t *v = get_json("GET", "/api/runs", 200, NULL);
    json_t *r1 = json_array_get(json_object_get(v, "runs"), 0);
    assert_true(fabs(num(r1, "best_score") - 10.0 / 5.5) < 1e-9);
    json_decref(v);
    exec_sql("UPDATE runs SET config=json_remove(config, '$.retime_rounds') WHERE id=1;"
             " DELETE FROM retimings");
    v = get_json("GET", "/api/runs", 200, NULL);
    assert_true(fabs(num(json_array_get(json_object_get(v, "runs"), 0), "best_score") - 2.0) <
                1e-9);
    json_decref(v);
}

static void test_programs_filters(void **state)
{
    (void)state;
    /* default run: the latest (run 2, one program) */
    json_t *v = get_json("GET", "/api/programs", 200, NULL);
    assert_int_equal(integer(v, "run"), 2);
    assert_int_equal(integer(v, "count"), 1);
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", NULL);
    assert_int_equal(integer(v, "count"), 9);
    json_t *first = json_array_get(json_object_get(v, "programs"), 0);
    assert_int_equal(integer(first, "id"), 1);
    assert_true(json_is_null(json_object_get(first, "parent_id")));
    assert_null(json_object_get(first, "code")); /* lists stay light */
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", "status", "compile_error", NULL);
    assert_int_equal(integer(v, "count"), 2);
    json_t *p = json_array_get(json_object_get(v, "programs"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "error_line")),
                        "program.cu(4): error: identifier \"foo\" is undefined");
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", "island", "1", NULL);
    assert_int_equal(integer(v, "count"), 5);
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", "generation", "2", "island", "1", NULL);
    assert_int_equal(integer(v, "count"), 2);
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", "order", "-score", "limit", "2", NULL);
    json_t *list = json_object_get(v, "programs");
    assert_int_equal(json_array_size(list), 2);
    assert_int_equal(integer(json_array_get(list, 0), "id"), 7);
    assert_int_equal(integer(json_array_get(list, 1), "id"), 4);
    json_decref(v);

    v = get_json("GET", "/api/programs", 200, "run", "1", "order", "score", NULL);
    list = json_object_get(v, "programs");
    assert_int_equal(integer(json_array_get(list, 0), "id"), 1); /* lowest score; NULLs last */
    assert_true(json_is_null(json_object_get(json_array_get(list, 8), "score")));
    json_decref(v);
}

static void test_program_detail_and_diff(void **state)
{
    (void)state;
    json_t *v = get_json("GET", "/api/programs/7", 200, NULL);
    assert_int_equal(integer(v, "parent_id"), 4);
    assert_int_equal(integer(v, "second_parent_id"), 2);
    assert_string_equal(json_string_value(json_object_get(v, "mutator")), "llm_cross");
    const char *diff = json_string_value(json_object_get(v, "diff"));
    assert_non_null(diff);
    assert_non_null(strstr(diff, "--- program 4\n+++ program 7\n"));
    assert_non_null(strstr(diff, "\n-#define CUCO_CHUNK_BYTES 262144"));
    assert_non_null(strstr(diff, "\n+#define CUCO_CHUNK_BYTES 65536"));
    assert_non_null(strstr(diff, "\n+  x[i] = x[i] * 2.0f; // fused with the put\n"));
    assert_null(strstr(diff, "\n-int main")); /* unchanged lines are context only */
    assert_int_equal(integer(v, "diff_added"), 2);
    assert_int_equal(integer(v, "diff_removed"), 2);
    assert_true(json_is_object(json_object_get(v, "metrics")));
    assert_true(fabs(num(json_object_get(v, "metrics"), "time_ms") - 5.0) < 1e-9);
    assert_non_null(strstr(json_string_value(json_object_get(v, "code")), "fused with the put"));
    json_t *children = json_object_get(v, "children");
    assert_int_equal(json_array_size(children), 2);
    json_decref(v);

    v = get_json("GET", "/api/programs/3", 200, NULL);
    assert_non_null(strstr(json_string_value(json_object_get(v, "error")), "1 error detected"));
    assert_string_equal(json_string_value(json_object_get(v, "status")), "compile_error");
    json_decref(v);

    v = get_json("GET", "/api/programs/1", 200, NULL);
    assert_true(json_is_null(json_object_get(v, "diff"))); /* the root has no parent */
    json_decref(v);
}

static void test_evaluations_llm_meta(void **state)
{
    (void)state;
    json_t *v = get_json("GET", "/api/evaluations", 200, "run", "1", NULL);
    json_t *list = json_object_get(v, "evaluations");
    assert_int_equal(json_array_size(list), 8); /* the pending one is not evaluated yet */
    static const double best[] = {1.25,       1.5625,     1.5625, 10.0 / 5.5,
                                  10.0 / 5.5, 10.0 / 5.5, 2.0,    2.0};
    for (size_t i = 0; i < 8; i++)
        assert_true(fabs(num(json_array_get(list, i), "best") - best[i]) < 1e-9);
    assert_int_equal(integer(json_object_get(v, "cache"), "compile_error"), 1);
    json_decref(v);
    /* #7 re-timed beside the best without holding: marked, and the
     * best-so-far line stays at #4's score */
    exec_sql("INSERT INTO retimings(run_id, challenger_id, champion_id, held, rounds, runs)"
             " VALUES(1, 7, 4, 0, 2, 4)");
    v = get_json("GET", "/api/evaluations", 200, "run", "1", NULL);
    list = json_object_get(v, "evaluations");
    for (size_t i = 0; i < 8; i++) {
        json_t *row = json_array_get(list, i);
        int is7 = integer(row, "id") == 7;
        assert_int_equal(json_is_true(json_object_get(row, "held_back")), is7);
        assert_true(fabs(num(row, "best") - (i >= 6 ? 10.0 / 5.5 : best[i])) < 1e-9);
    }
    json_decref(v);
    exec_sql("DELETE FROM retimings");

    v = get_json("GET", "/api/llm", 200, "run", "1", NULL);
    assert_int_equal(integer(v, "calls"), 3);
    assert_true(fabs(num(v, "total_usd") - 0.037) < 1e-9);
    json_t *m0 = json_array_get(json_object_get(v, "models"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "model")), "claude-test");
    assert_int_equal(integer(m0, "calls"), 2);
    assert_int_equal(integer(m0, "input_tokens"), 2700);
    json_t *m1 = json_array_get(json_object_get(v, "models"), 1);
    assert_int_equal(integer(m1, "failed"), 1);
    json_decref(v);

    v = get_json("GET", "/api/meta", 200, "run", "1", NULL);
    json_t *s0 = json_array_get(json_object_get(v, "summaries"), 0);
    assert_int_equal(integer(s0, "generation"), 2);
    assert_non_null(strstr(json_string_value(json_object_get(s0, "text")), "Smaller chunks"));
    json_decref(v);
    /* the knob effects: the same lines as cuco report's (cli/test_search_planted
     * checks their content on a real search); this fixture's programs all
     * record one setting, so there is nothing to fit */
    v = get_json("GET", "/api/effects", 200, "run", "1", NULL);
    assert_int_equal(integer(v, "run"), 1);
    assert_int_equal(json_array_size(json_object_get(v, "lines")), 0);
    assert_true(json_is_integer(json_object_get(v, "programs")));
    json_decref(v);
    json_decref(get_json("GET", "/api/effects", 400, "bogus", "1", NULL));
    json_decref(get_json("GET", "/api/effects", 404, "run", "42", NULL));
}

static void test_summary(void **state)
{
    (void)state;
    json_t *v = get_json("GET", "/api/summary", 200, "run", "1", NULL);
    assert_true(fabs(num(v, "baseline_ms") - 10.0) < 1e-9);
    json_t *best = json_object_get(v, "best");
    assert_int_equal(integer(best, "id"), 7);
    assert_true(fabs(num(best, "score") - 2.0) < 1e-9);
    assert_int_equal(integer(json_object_get(v, "fast_path"), "id"), 1);
    json_t *bound = json_object_get(v, "bound");
    assert_true(fabs(num(bound, "bound_ms") - 4.5) < 1e-9);
    assert_true(fabs(num(bound, "ceiling") - 10.0 / 4.5) < 1e-9);
    assert_true(fabs(num(bound, "gap_closed") - 5.0 / 5.5) < 1e-9);
    json_t *failures = json_object_get(v, "failures");
    assert_int_equal(json_array_size(failures), 3);
    json_t *f0 = json_array_get(failures, 0);
    assert_string_equal(json_string_value(json_object_get(f0, "status")), "compile_error");
    assert_int_equal(integer(f0, "count"), 2);
    assert_int_equal(integer(f0, "example_id"), 3);
    assert_int_equal(integer(json_object_get(json_object_get(v, "programs"), "by_status"), "ok"),
                     4);
    assert_true(fabs(num(v, "spend_usd") - 0.037) < 1e-9);
    json_decref(v);
}

static void test_errors(void **state)
{
    (void)state;
    json_decref(get_json("GET", "/api/nope", 404, NULL));
    json_decref(get_json("GET", "/api/programs/999", 404, NULL));
    json_decref(get_json("GET", "/api/programs/abc", 400, NULL));
    json_decref(get_json("GET", "/api/programs/7/x", 404, NULL));
    json_decref(get_json("GET", "/api/programs", 400, "island", "-1", NULL));
    json_decref(get_json("GET", "/api/programs", 400, "limit", "0", NULL));
    json_decref(get_json("GET", "/api/programs", 400, "order", "score; DROP TABLE runs", NULL));
    json_decref(get_json("GET", "/api/programs", 400, "status", "ok' OR 1=1 --", NULL));
    json_decref(get_json("GET", "/api/programs", 400, "colour", "red", NULL));
    json_decref(get_json("GET", "/api/summary", 400, "run", "x1", NULL));
    json_decref(get_json("GET", "/api/summary", 404, "run", "42", NULL));
    json_t *v = get_json("POST", "/api/runs", 405, NULL);
    assert_non_null(strstr(json_string_value(json_object_get(v, "error")), "read-only"));
    json_decref(v);
    json_decref(get_json("DELETE", "/api/programs/1", 405, NULL));
    json_decref(get_json("PUT", "/", 405, NULL));
    json_decref(get_json("GET", "/../etc/passwd", 404, NULL));
    json_decref(get_json("GET", "/missing.js", 404, NULL));
    /* the database is where it was, unchanged */
    v = get_json("GET", "/api/runs", 200, NULL);
    assert_int_equal(json_array_size(json_object_get(v, "runs")), 2);
    json_decref(v);
}

/* Any bytes in a request get a 4xx with valid JSON; text in the database
 * that is not UTF-8 (a compiler's or a program's output) still gives JSON. */
static void test_not_utf8(void **state)
{
    (void)state;
    json_t *v = get_json("GET", "/api/programs", 400, "status", "\xff\xfe", NULL);
    assert_non_null(strstr(json_string_value(json_object_get(v, "error")), "UTF-8"));
    json_decref(v);
    json_decref(get_json("GET", "/api/programs", 400, "\xc3\x28", "1", NULL));
    json_decref(get_json("GET", "/api/programs", 400, "run", "1\xed\xa0\x80", NULL));
    json_decref(get_json("GET", "/api/\xff", 400, NULL));
    json_decref(get_json("GET", "/\xf8\x88\x80\x80\x80", 400, NULL));
    json_decref(get_json("G\xffT", "/api/runs", 400, NULL));
    json_decref(get_json("GET", "/api/runs", 400, "\x01", "\x7f", NULL));
    /* well-formed multi-byte UTF-8 is not refused */
    json_decref(get_json("GET", "/api/programs", 400, "status", "\xc3\xa9t\xc3\xa9", NULL));

    char other[600];
    snprintf(other, sizeof other, "%s.bytes", db_path);
    assert_int_equal(fixture_write_db(other), 0);
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(other, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "UPDATE programs SET error = ?", -1, &st, NULL),
                     SQLITE_OK);
    static const char bad[] = "x.c:1: error: \xff\xfe\xc3 bytes\nnext \xe2\x82";
    sqlite3_bind_text(st, 1, bad, (int)sizeof bad - 1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(h);
    const char *paths[] = {"/api/programs/1", "/api/programs"};
    for (size_t i = 0; i < 2; i++) {
        cuco_web_param run = {"run", "1"};
        cuco_web_response res;
        assert_int_equal(web_handle(other, NULL, "GET", paths[i], &run, i, &res), 0);
        assert_int_equal(res.status, 200);
        json_error_t jerr;
        v = json_loadb(res.body, res.len, 0, &jerr);
        assert_non_null(v);
        assert_non_null(strstr(res.body, "error: \\uFFFD\\uFFFD\\uFFFD bytes"));
        json_decref(v);
        web_response_free(&res);
    }
    remove(other);
}

static void test_missing_database(void **state)
{
    (void)state;
    cuco_web_response res;
    web_handle("/nonexistent/runs.db", NULL, "GET", "/api/runs", NULL, 0, &res);
    assert_int_equal(res.status, 503);
    web_response_free(&res);
}

static void test_static_page(void **state)
{
    (void)state;
    cuco_web_response res;
    web_handle(db_path, NULL, "GET", "/", NULL, 0, &res);
    assert_int_equal(res.status, 200);
    assert_non_null(strstr(res.content_type, "text/html"));
    assert_non_null(strstr(res.body, "app.js"));
    web_response_free(&res);
    web_handle(db_path, NULL, "HEAD", "/app.js", NULL, 0, &res);
    assert_int_equal(res.status, 200);
    assert_non_null(strstr(res.content_type, "javascript"));
    web_response_free(&res);
    web_handle(db_path, NULL, "GET", "/style.css", NULL, 0, &res);
    assert_int_equal(res.status, 200);
    web_response_free(&res);
}

/* ---- over HTTP, while a writer holds an open transaction ---- */

static size_t collect(char *data, size_t size, size_t n, void *userp)
{
    cuco_buf_append(userp, data, size * n);
    return size * n;
}

static long http(int port, const char *method, const char *path, cuco_buf *body)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fprintf(stderr, "curl: %s\n", curl_easy_strerror(rc));
    assert_int_equal(rc, CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

static void test_http_while_writing(void **state)
{
    (void)state;
    cuco_web_server *srv = NULL;
    cuco_err e = CUCO_ERR_INIT;
    cuco_web_opts opts = {db_path, NULL, NULL, 0};
    assert_int_equal(web_server_start(&opts, &srv, &e), 0);
    int port = web_server_port(srv);
    assert_true(port > 0);

    cuco_buf body = CUCO_BUF_INIT;
    assert_int_equal(http(port, "GET", "/api/programs?run=1", &body), 200);
    assert_non_null(strstr(cuco_buf_str(&body), "\"count\":9"));
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/programs?run=1&island=x", &body), 400);
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/bogus", &body), 404);
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "POST", "/api/runs", &body), 405);
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "HEAD", "/api/runs", &body), 200);
    assert_int_equal(body.len, 0);
    /* bytes that are not UTF-8, raw or escaped, in the path and the query,
     * and NUL bytes: 400 with JSON */
    static const char *const hostile[] = {"/api/%ff%fe",
                                          "/api/\xff\xc3",
                                          "/api/programs?run=%ff",
                                          "/api/programs?run=\xfe",
                                          "/api/programs?%c3%28=1",
                                          "/api/programs?run=1%00x",
                                          "/\xed\xa0\x80?a=b"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        cuco_buf_reset(&body);
        assert_int_equal(http(port, "GET", hostile[i], &body), 400);
        json_t *v = json_loadb(body.data, body.len, 0, NULL);
        assert_non_null(v);
        assert_int_equal(json_integer_value(json_object_get(v, "status")), 400);
        json_decref(v);
    }

    /* a writer in the middle of a generation's transaction */
    cuco_db *w = NULL;
    assert_int_equal(db_open(db_path, 0, &w, &e), 0);
    assert_int_equal(db_begin(w, &e), 0);
    int64_t id;
    assert_int_equal(fixture_program(w, 1, 7, 0, 0, 4, FIXTURE_BASE_CODE, "knob", "ok", 4.0, 10.0,
                                     NULL, NULL, &id),
                     0);
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/programs?run=1", &body), 200);
    assert_non_null(strstr(cuco_buf_str(&body), "\"count\":9")); /* not committed yet */
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/summary?run=1", &body), 200);
    assert_int_equal(db_commit(w, &e), 0);
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/programs?run=1", &body), 200);
    assert_non_null(strstr(cuco_buf_str(&body), "\"count\":10"));
    cuco_buf_reset(&body);
    assert_int_equal(http(port, "GET", "/api/summary?run=1", &body), 200);
    assert_non_null(strstr(cuco_buf_str(&body), "\"score\":2.5"));
    db_close(w);
    cuco_buf_free(&body);
    web_server_stop(srv);
    cuco_err_clear(&e);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write-db"))
        return fixture_write_db(argv[2]) == 0 ? 0 : 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs),
        cmocka_unit_test(test_runs_champion),
        cmocka_unit_test(test_programs_filters),
        cmocka_unit_test(test_program_detail_and_diff),
        cmocka_unit_test(test_evaluations_llm_meta),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_not_utf8),
        cmocka_unit_test(test_missing_database),
        cmocka_unit_test(test_static_page),
        cmocka_unit_test(test_http_while_writing),
    };
    int rc = cmocka_run_group_tests(tests, setup_db, teardown_db);
    curl_global_cleanup();
    return rc;
}
