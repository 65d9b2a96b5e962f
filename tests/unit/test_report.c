/* test_report.c: the line diff (hunks, context, counts, edge cases) and the
 * run summary and report files on the synthetic run of test_web_fixture.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/diff.h"
#include "cuco/fs.h"
#include "cuco/report.h"
#include "test_web_fixture.h"

static char *diff_of(const char *a, const char *b, int context, size_t *add, size_t *del)
{
    cuco_buf out = CUCO_BUF_INIT;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_diff_lines(a, b, "a", "b", context, &out, add, del, &e), 0);
    return cuco_buf_detach(&out);
}

static void test_diff_identical_is_empty(void **state)
{
    (void)state;
    size_t add = 9, del = 9;
    char *d = diff_of("x\ny\n", "x\ny\n", 3, &add, &del);
    assert_string_equal(d, "");
    assert_int_equal(add, 0);
    assert_int_equal(del, 0);
    free(d);
}

static void test_diff_one_change_with_context(void **state)
{
    (void)state;
    size_t add, del;
    char *d =
        diff_of("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", 2, &add, &del);
    assert_string_equal(d, "--- a\n+++ b\n@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+five\n 6\n 7\n");
    assert_int_equal(add, 1);
    assert_int_equal(del, 1);
    free(d);
}

static void test_diff_separate_hunks_and_edges(void **state)
{
    (void)state;
    size_t add, del;
    /* changes at both ends, far apart: two hunks */
    char *d =
        diff_of("a\n1\n2\n3\n4\n5\n6\n7\n8\nz\n", "A\n1\n2\n3\n4\n5\n6\n7\n8\nZ\n", 1, &add, &del);
    assert_string_equal(d,
                        "--- a\n+++ b\n@@ -1,2 +1,2 @@\n-a\n+A\n 1\n@@ -9,2 +9,2 @@\n 8\n-z\n+Z\n");
    free(d);
    /* from nothing, and a last line without a newline */
    d = diff_of("", "x\ny", 3, &add, &del);
    assert_string_equal(d, "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n");
    assert_int_equal(add, 2);
    free(d);
    d = diff_of("x\ny\n", NULL, 0, &add, &del);
    assert_string_equal(d, "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n");
    assert_int_equal(del, 2);
    free(d);
}

static void test_diff_lcs_keeps_common_lines(void **state)
{
    (void)state;
    size_t add, del;
    /* moving a line: the LCS keeps b c d, so one delete and one insert */
    char *d = diff_of("a\nb\nc\nd\n", "b\nc\nd\na\n", 5, &add, &del);
    assert_int_equal(add, 1);
    assert_int_equal(del, 1);
    assert_non_null(strstr(d, "\n-a\n b\n c\n d\n+a\n"));
    free(d);
}

static void test_diff_large_inputs(void **state)
{
    (void)state;
    /* 20000 lines, every other one changed: the middle is beyond the LCS
     * table's size, the diff must still be correct (all replaced) */
    cuco_buf a = CUCO_BUF_INIT, b = CUCO_BUF_INIT;
    for (int i = 0; i < 20000; i++) {
        cuco_buf_printf(&a, "line %d\n", i);
        cuco_buf_printf(&b, i % 2 ? "line %d\n" : "LINE %d\n", i);
    }
    size_t add, del;
    char *d = diff_of(a.data, b.data, 0, &add, &del);
    assert_true(add >= 10000 && del >= 10000);
    assert_int_equal(add, del);
    free(d);
    cuco_buf_free(&a);
    cuco_buf_free(&b);
}

/* A fresh folder CUCO_TEST_TMP/test_report_TAG_PID holding the fixture's
 * runs.db: its path in dir, the database's in db. */
static void fixture_dir(const char *tag, char *dir, size_t dir_size, char *db, size_t db_size)
{
    const char *tmp = getenv("CUCO_TEST_TMP");
    snprintf(dir, dir_size, "%s/test_report_%s%ld", tmp ? tmp : "/tmp", tag, (long)getpid());
    cuco_err e = CUCO_ERR_INIT;
    cuco_fs_remove_tree(dir, &e);
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    snprintf(db, db_size, "%s/runs.db", dir);
    assert_int_equal(fixture_write_db(db), 0);
    cuco_err_clear(&e);
}

static void test_summary_and_report_files(void **state)
{
    (void)state;
    char dir[512], db[600];
    fixture_dir("", dir, sizeof dir, db, sizeof db);
    cuco_err e = CUCO_ERR_INIT;

    sqlite3 *h;
    assert_int_equal(report_db_open(db, &h, &e), 0);
    int64_t run = 0;
    assert_int_equal(report_run_resolve(h, &run, &e), 0);
    assert_int_equal(run, 2); /* the latest */
    run = 1;
    json_t *s;
    assert_int_equal(report_summary(h, run, dir, &s, &e), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "best"), "id")), 7);
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "bound"), "source")),
                        "root program metrics");
    assert_int_equal(json_array_size(json_object_get(s, "warnings")), 0);
    json_decref(s);
    cuco_buf svg = CUCO_BUF_INIT;
    int used = 0;
    assert_int_equal(report_plot_curve(h, 1, 0, &svg, &used, &e), 0);
    assert_int_equal(used, 0);
    assert_true(cuco_str_starts_with(svg.data, "<svg"));
    size_t pts = 0;
    for (const char *p = svg.data; (p = strstr(p, "class=\"pt\"")); p++)
        pts++;
    assert_int_equal(pts, 4);
    cuco_buf_free(&svg);
    report_db_close(h);

    cuco_report_opts o = {dir, NULL, NULL, 1, 1};
    cuco_report_result r;
    assert_int_equal(report_write(&o, &r, &e), 0);
    assert_true(cuco_str_ends_with(r.best_path, "/best.cu"));
    char *best = NULL;
    size_t len;
    assert_int_equal(cuco_fs_read(r.best_path, &best, &len, &e), 0);
    assert_non_null(strstr(best, "fused with the put"));
    free(best);
    char *md = NULL;
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(
        strstr(md, "| **best** (#7, generation 3, island 1, llm_cross) | 5.000 | **2.000x** |"));
    assert_non_null(strstr(md, "| fast path (#1, generation 0) | 8.000 | 1.250x |"));
    assert_non_null(strstr(md, "90.9%"));
    free(md);
    report_result_free(&r);

    /* a run that does not exist */
    cuco_report_opts bad = {dir, NULL, NULL, 99, 1};
    assert_int_equal(report_write(&bad, &r, &e), CUCO_ENOTFOUND);
    assert_non_null(strstr(cuco_err_msg(&e), "no run 99"));
    cuco_err_clear(&e);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
}

static json_t *summary_of(const char *dir, const char *db)
{
    sqlite3 *h;
    cuco_err e = CUCO_ERR_INIT;
    json_t *s = NULL;
    assert_int_equal(report_db_open(db, &h, &e), 0);
    assert_int_equal(report_summary(h, 1, dir, &s, &e), 0);
    report_db_close(h);
    return s;
}

static void exec_sql(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

static double num_at(json_t *s, const char *obj, const char *key)
{
    json_t *o = obj ? json_object_get(s, obj) : s;
    assert_true(json_is_number(json_object_get(o, key)));
    return json_number_value(json_object_get(o, key));
}

/* Which baseline the speedups are over: the workload's own program when the
 * search started from it (no fast path then); the host-driven time in
 * bound.json when it started from a given program (the fast path); else that
 * program, named as such. And a best faster than the bound is flagged. */
static void test_summary_baseline_and_fast_path(void **state)
{
    (void)state;
    char dir[512], db[600], bound[600];
    fixture_dir("base_", dir, sizeof dir, db, sizeof db);
    cuco_err e = CUCO_ERR_INIT;
    snprintf(bound, sizeof bound, "%s/bound.json", dir);

    /* 1. started from a given program, no bound.json: the start is the
     * reference and the report says so */
    json_t *s = summary_of(dir, db);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "fast_path"), "id")), 1);
    assert_true(fabs(num_at(s, NULL, "baseline_ms") - 10.0) < 1e-9);
    assert_non_null(
        strstr(json_string_value(json_object_get(s, "baseline_source")), "not measured"));
    assert_true(fabs(num_at(s, "best", "speedup") - 2.0) < 1e-9);
    json_decref(s);

    /* 2. with the host-driven time from 'cuco bound': speedups over it, and
     * the bound's ceiling and gap closed too */
    const char *bj = "{\"program\": {\"ran\": true, \"time_ms\": 20.0, \"compute_ms\": 12.0,"
                     " \"comm_ms\": 9.0}}";
    assert_int_equal(cuco_fs_write(bound, bj, strlen(bj), &e), 0);
    s = summary_of(dir, db);
    assert_true(fabs(num_at(s, NULL, "baseline_ms") - 20.0) < 1e-9);
    assert_non_null(strstr(json_string_value(json_object_get(s, "baseline_source")), "bound.json"));
    assert_true(fabs(num_at(s, "fast_path", "speedup") - 2.5) < 1e-9);
    assert_true(fabs(num_at(s, "best", "speedup") - 4.0) < 1e-9);
    assert_true(fabs(num_at(s, "best", "score") - 2.0) < 1e-9); /* the search's own */
    assert_true(fabs(num_at(s, "bound", "ceiling") - 20.0 / 12.0) < 1e-9);
    /* best 5 ms < bound 12 ms: the search changed the computation, so no
     * gap figure, and the bound says why (cuco/run_view.h) */
    assert_true(json_is_null(json_object_get(json_object_get(s, "bound"), "gap_closed")));
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(s, "bound"), "note")),
                           "bound does not apply: computation changed"));
    assert_int_equal(json_array_size(json_object_get(s, "warnings")), 0);
    json_decref(s);
    assert_int_equal(remove(bound), 0);

    /* 3. started from the workload's own program: it is the baseline, and
     * there is no fast path */
    exec_sql(db, "UPDATE programs SET mutator='seed' WHERE id=1;"
                 " UPDATE runs SET status='running' WHERE id=1");
    s = summary_of(dir, db);
    assert_true(json_is_null(json_object_get(s, "fast_path")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "start"), "id")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(s, "baseline_source")),
                           "host-driven program #1, measured by the search"));
    json_decref(s);
    cuco_report_opts o = {dir, NULL, NULL, 1, 1};
    cuco_report_result r;
    assert_int_equal(report_write(&o, &r, &e), 0);
    char *md = NULL;
    size_t len;
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(strstr(md, "| fast path | none: the search started from the workload's own"
                               " program | - |"));
    assert_non_null(strstr(md, "Baseline: host-driven program #1, measured by the search."));
    /* a run still going is reported as a snapshot */
    assert_non_null(strstr(md, "Run status: running."));
    assert_non_null(strstr(md, "this report is a snapshot"));
    free(md);
    report_result_free(&r);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
}

/* Evaluations and seconds until 95% of the best's gain: the fixture's best
 * (#7, score 2.0) is the first at or above 1.95, after 7 real evaluations
 * (failures count, the pending one does not); the seconds come from the
 * result times (schema 4). */
static void test_summary_time_to_95(void **state)
{
    (void)state;
    char dir[512], db[600];
    fixture_dir("t95_", dir, sizeof dir, db, sizeof db);
    cuco_err e = CUCO_ERR_INIT;
    exec_sql(db, "UPDATE programs SET evaluated_at=NULL");
    json_t *s = summary_of(dir, db);
    json_t *t = json_object_get(s, "to_95pct");
    assert_true(json_is_object(t));
    assert_int_equal(json_integer_value(json_object_get(t, "program_id")), 7);
    assert_int_equal(json_integer_value(json_object_get(t, "evaluations")), 7);
    assert_true(fabs(num_at(t, NULL, "threshold_score") - 1.95) < 1e-9);
    assert_true(json_is_null(json_object_get(t, "seconds")));
    json_decref(s);
    /* result times: seconds from the run's start; a cached result is no
     * evaluation */
    exec_sql(db, "UPDATE programs SET evaluated_at=(SELECT started_at FROM runs WHERE id=1) + id"
                 " WHERE run_id=1; UPDATE programs SET cached=1 WHERE id=2");
    s = summary_of(dir, db);
    t = json_object_get(s, "to_95pct");
    assert_int_equal(json_integer_value(json_object_get(t, "evaluations")), 6);
    assert_true(fabs(num_at(t, NULL, "seconds") - 7.0) < 1e-6);
    json_decref(s);
    cuco_report_opts o = {dir, NULL, NULL, 1, 1};
    cuco_report_result r;
    assert_int_equal(report_write(&o, &r, &e), 0);
    char *md = NULL;
    size_t len;
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(strstr(md, "was first reached by program #7, after 6 evaluations and 7 s."));
    free(md);
    report_result_free(&r);
    /* no gain: no figure */
    exec_sql(db, "UPDATE programs SET score=1.0 WHERE run_id=1 AND status='ok'");
    s = summary_of(dir, db);
    assert_true(json_is_null(json_object_get(s, "to_95pct")));
    json_decref(s);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
}

/* With re-timing on (config retime_rounds > 0) the best is the run's
 * champion (view run_champions): the start while no re-timing held, then the
 * latest challenger that held and is still correct, not the highest score
 * (the fixture's #7). */
static void test_summary_champion(void **state)
{
    (void)state;
    char dir[512], db[600];
    fixture_dir("champ_", dir, sizeof dir, db, sizeof db);
    cuco_err e = CUCO_ERR_INIT;
    json_t *s = summary_of(dir, db);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "best"), "id")), 7);
    json_decref(s);
    exec_sql(db, "UPDATE runs SET config='{\"retime_rounds\":2}' WHERE id=1");
    s = summary_of(dir, db);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "best"), "id")), 1);
    json_decref(s);
    exec_sql(db, "INSERT INTO retimings(run_id, challenger_id, champion_id, held)"
                 " VALUES(1, 4, 1, 1), (1, 7, 4, 0), (1, 2, 4, 1);"
                 " UPDATE programs SET status='wrong_answer' WHERE id=2");
    s = summary_of(dir, db);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "best"), "id")), 4);
    json_decref(s);
    /* #7 (2.0x once) came in before #4 and was re-timed without holding: it
     * reached nothing, so 95% of the champion's gain is first reached by #4,
     * and the curve's best-so-far line leaves #7 out (drawn hollow) */
    exec_sql(db, "UPDATE programs SET evaluated_at=(SELECT started_at FROM runs WHERE id=1) + id"
                 " WHERE run_id=1; UPDATE programs SET evaluated_at=evaluated_at - 3.5 WHERE id=7;"
                 " UPDATE retimings SET runs=4, rounds=2 WHERE challenger_id=7");
    s = summary_of(dir, db);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(s, "to_95pct"), "program_id")), 4);
    json_decref(s);
    exec_sql(db, "UPDATE retimings SET runs=0 WHERE challenger_id=7"); /* not yet re-timed */
    s = summary_of(dir, db);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(s, "to_95pct"), "program_id")), 7);
    json_decref(s);
    exec_sql(db, "UPDATE retimings SET runs=4 WHERE challenger_id=7");
    sqlite3 *h;
    assert_int_equal(report_db_open(db, &h, &e), 0);
    cuco_buf svg = CUCO_BUF_INIT;
    int used = 0;
    assert_int_equal(report_plot_curve(h, 1, 0, &svg, &used, &e), 0);
    assert_non_null(strstr(svg.data, "class=\"pt held-back\""));
    assert_non_null(strstr(svg.data, "#7: 2.000x (did not hold when re-timed)"));
    cuco_buf_free(&svg);
    report_db_close(h);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
}

/* The side-by-side times 'cuco run' leaves in confirm.json: in the summary
 * and in the report, marked stale once the run's best is none of the
 * programs they timed. */
static void test_summary_side_by_side(void **state)
{
    (void)state;
    char dir[512], db[600], confirm[600];
    fixture_dir("sbs_", dir, sizeof dir, db, sizeof db);
    cuco_err e = CUCO_ERR_INIT;
    snprintf(confirm, sizeof confirm, "%s/confirm.json", dir);
    exec_sql(db, "UPDATE programs SET code_hash='00000000000000b7' WHERE id=7");

    /* no confirm.json: null */
    json_t *s = summary_of(dir, db);
    assert_true(json_is_null(json_object_get(s, "side_by_side")));
    json_decref(s);

    const char *cj =
        "{\"version\": 1, \"rounds\": 3, \"programs\": ["
        "{\"label\": \"seed\", \"status\": \"ok\", \"program_hash\": \"00000000000000a1\","
        " \"median_ms\": 12.0, \"min_ms\": 11.5, \"max_ms\": 12.5},"
        "{\"label\": \"gen_0\", \"status\": \"wrong_answer\", \"program_hash\": \"1\"},"
        "{\"label\": \"best\", \"status\": \"ok\", \"program_hash\": \"00000000000000b7\","
        " \"median_ms\": 8.0, \"min_ms\": 7.9, \"max_ms\": 8.2}],"
        " \"bound\": {\"compute_ms\": 7.0, \"comm_ms\": 5.0, \"bound_ms\": 7.0,"
        " \"ceiling\": 1.7142857, \"gap_closed\": {\"best\": 0.8}}}";
    assert_int_equal(cuco_fs_write(confirm, cj, strlen(cj), &e), 0);
    s = summary_of(dir, db);
    json_t *sbs = json_object_get(s, "side_by_side");
    assert_true(json_is_object(sbs));
    assert_true(json_is_false(json_object_get(sbs, "stale")));
    json_decref(s);
    cuco_report_opts o = {dir, NULL, NULL, 1, 1};
    cuco_report_result r;
    assert_int_equal(report_write(&o, &r, &e), 0);
    char *md = NULL;
    size_t len;
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(strstr(md, "## Side by side"));
    assert_non_null(strstr(md, "| seed | 12.0000 | 11.5000 .. 12.5000 | 1.000x |"));
    assert_non_null(strstr(md, "| gen_0 | wrong_answer | - | - |"));
    assert_non_null(strstr(md, "| best | 8.0000 | 7.9000 .. 8.2000 | 1.500x |"));
    assert_non_null(strstr(md, "Gap closed by best: 80.0%."));
    assert_null(strstr(md, "the search went on"));
    free(md);
    /* a best faster than the computation alone, and a seed whose timed parts
     * ran longer than its step: said, not printed as figures */
    const char *cj2 =
        "{\"version\": 1, \"rounds\": 3, \"programs\": ["
        "{\"label\": \"seed\", \"status\": \"ok\", \"program_hash\": \"00000000000000a1\","
        " \"median_ms\": 12.0, \"min_ms\": 11.5, \"max_ms\": 12.5},"
        "{\"label\": \"best\", \"status\": \"ok\", \"program_hash\": \"00000000000000b7\","
        " \"median_ms\": 6.0, \"min_ms\": 5.9, \"max_ms\": 6.2}],"
        " \"bound\": {\"compute_ms\": 7.0, \"comm_ms\": 5.0, \"bound_ms\": 7.0,"
        " \"ceiling\": 1.7142857, \"gap_closed\": {\"best\": null},"
        " \"bound_does_not_apply\": [\"best\"]}}";
    assert_int_equal(cuco_fs_write(confirm, cj2, strlen(cj2), &e), 0);
    report_result_free(&r);
    assert_int_equal(report_write(&o, &r, &e), 0);
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(strstr(md, "best is faster than the computation alone: the computation "
                               "changed, the bound does not apply."));
    assert_null(strstr(md, "Gap closed by best"));
    free(md);
    char *html = NULL;
    assert_int_equal(cuco_fs_read(r.html_path, &html, &len, &e), 0);
    assert_non_null(strstr(html, "<table id=\"side-by-side\">"));
    free(html);
    report_result_free(&r);

    /* the search found another best since: stale */
    exec_sql(db, "UPDATE programs SET code_hash='00000000000000c7' WHERE id=7");
    s = summary_of(dir, db);
    assert_true(json_is_true(json_object_get(json_object_get(s, "side_by_side"), "stale")));
    json_decref(s);
    assert_int_equal(report_write(&o, &r, &e), 0);
    assert_int_equal(cuco_fs_read(r.md_path, &md, &len, &e), 0);
    assert_non_null(strstr(md, "the search went on after they were timed"));
    free(md);
    report_result_free(&r);

    /* an unreadable file is a warning, not a failure */
    assert_int_equal(cuco_fs_write(confirm, "{", 1, &e), 0);
    s = summary_of(dir, db);
    assert_true(json_is_null(json_object_get(s, "side_by_side")));
    int warned = 0;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(s, "warnings"), i, w) warned |=
        strstr(json_string_value(w), "cannot read confirm.json") != NULL;
    assert_true(warned);
    json_decref(s);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_identical_is_empty),
        cmocka_unit_test(test_diff_one_change_with_context),
        cmocka_unit_test(test_diff_separate_hunks_and_edges),
        cmocka_unit_test(test_diff_lcs_keeps_common_lines),
        cmocka_unit_test(test_diff_large_inputs),
        cmocka_unit_test(test_summary_and_report_files),
        cmocka_unit_test(test_summary_baseline_and_fast_path),
        cmocka_unit_test(test_summary_side_by_side),
        cmocka_unit_test(test_summary_champion),
        cmocka_unit_test(test_summary_time_to_95),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
