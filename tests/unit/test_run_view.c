/* test_run_view.c: one definition of a run's best (src/db/run_view.c). A
 * run whose re-timed improvement did not hold, with a migration copy of
 * that program on another island: the engine's best, the report's, the web
 * API's and both plotters' agree, and the copy is held back with its
 * original instead of inheriting its score. Also the bound and baseline
 * rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/fs.h"
#include "cuco/report.h"
#include "cuco/run_view.h"
#include "cuco/web.h"

static char dir[512], db_path[600];

static int64_t add_program(cuco_db *db, int64_t run, int64_t parent, int island, int gen,
                           const char *code, const char *hash, const char *mutator, double time_ms)
{
    cuco_db_program p;
    memset(&p, 0, sizeof p);
    p.run_id = run;
    p.parent_id = parent;
    p.island = island;
    p.generation = gen;
    p.code = (char *)code;
    p.code_hash = (char *)hash;
    p.mutator = (char *)mutator;
    p.status = (char *)"ok";
    p.time_ms = time_ms;
    p.score = 10.0 / time_ms;
    int64_t id = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(db_program_insert(db, &p, &id, &e), 0);
    return id;
}

/* Run 1 (re-timing on, baseline 10 ms): #1 the start, #2 (6.25 ms, 1.6x)
 * held against #1 and is the champion, #3 (5.96 ms, 1.678x once) was
 * re-timed against #2 and did not hold, #4 is #3 migrated to island 1 (its
 * code, hash and score, as the engine copies them). */
static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("CUCO_TEST_TMP");
    cuco_err e = CUCO_ERR_INIT;
    snprintf(dir, sizeof dir, "%s/run_view_%ld", tmp ? tmp : "/tmp", (long)getpid());
    snprintf(db_path, sizeof db_path, "%s/runs.db", dir);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
    if (cuco_fs_mkdirs(dir, &e) < 0)
        return -1;
    cuco_db *db;
    int64_t run;
    if (db_open(db_path, 0, &db, &e) < 0 ||
        db_run_create(db, "view_demo", "{\"islands\": 2, \"retime_rounds\": 2}", 1, &run, &e) < 0 ||
        db_run_set_baseline(db, run, 10.0, &e) < 0)
        return -1;
    int64_t p1 = add_program(db, run, 0, 0, 0, "int main(){}\n", "h1", "seed", 10.0);
    int64_t p2 = add_program(db, run, p1, 0, 1, "int main(){/*2*/}\n", "h2", "knob", 6.25);
    int64_t p3 = add_program(db, run, p2, 0, 2, "int main(){/*3*/}\n", "h3", "knob", 5.96);
    add_program(db, run, p3, 1, 3, "int main(){/*3*/}\n", "h3", "migration", 5.96);
    cuco_db_retiming won = {run, p2, p1, 1, 2, 4, 1, 6.25, 6.25, 10.0, NULL};
    cuco_db_retiming lost = {run, p3, p2, 2, 2, 4, 0, 5.96, 5.96, 6.25, NULL};
    int64_t rid;
    if (db_retiming_insert(db, &won, &rid, &e) < 0 || db_retiming_insert(db, &lost, &rid, &e) < 0 ||
        db_run_set_status(db, run, "done", &e) < 0)
        return -1;
    db_close(db);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
    return 0;
}

static json_t *web_get(const char *path)
{
    cuco_web_param run = {"run", "1"};
    cuco_web_response res;
    assert_int_equal(
        web_handle(db_path, dir, "GET", path, &run, !strcmp(path, "/api/runs") ? 0 : 1, &res), 0);
    assert_int_equal(res.status, 200);
    json_t *v = json_loadb(res.body, res.len, 0, NULL);
    web_response_free(&res);
    assert_non_null(v);
    return v;
}

static void test_engine_report_web_plots_agree(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    /* the engine (cuco_evolve_run's result comes from db_run_best) */
    cuco_db *db;
    run_view_best best;
    assert_int_equal(db_open(db_path, 1, &db, &e), 0);
    assert_int_equal(db_run_best(db, 1, &best, &e), 0);
    int held = -1; /* what the engine's migration asks */
    assert_int_equal(db_program_held_back(db, 4, &held, &e), 0);
    assert_int_equal(held, 1);
    assert_int_equal(db_program_held_back(db, 2, &held, &e), 0);
    assert_int_equal(held, 0);
    db_close(db);
    assert_int_equal(best.id, 2);
    assert_true(fabs(best.score - 1.6) < 1e-9);

    /* the copy is held back with its original */
    sqlite3 *h;
    run_view_program *ps;
    size_t n;
    assert_int_equal(report_db_open(db_path, &h, &e), 0);
    assert_int_equal(run_view_programs(h, 1, &ps, &n, &e), 0);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ps[i].held_back, ps[i].id >= 3);
    assert_true(fabs(ps[3].best_so_far - 1.6) < 1e-9);
    run_view_programs_free(ps, n);

    /* the report */
    json_t *s = NULL;
    assert_int_equal(report_summary(h, 1, dir, &s, &e), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "best"), "id")), 2);
    json_decref(s);

    /* both plotters: the best-so-far line ends at the best's score, and the
     * held back points are drawn hollow */
    cuco_buf svg = CUCO_BUF_INIT;
    int used = 0;
    assert_int_equal(report_plot_curve(h, 1, 0, &svg, &used, &e), 0);
    char want[64];
    const char *best_pt = strstr(svg.data, "<title>#2: 1.600x</title>");
    assert_non_null(best_pt);
    const char *cy = best_pt;
    while (cy > svg.data && strncmp(cy, "cy=\"", 4))
        cy--;
    double y_best = strtod(cy + 4, NULL);
    const char *path_end = strstr(strstr(svg.data, "class=\"best\""), "\"/>");
    const char *last = path_end;
    while (last > svg.data && *last != ',')
        last--;
    assert_true(fabs(strtod(last + 1, NULL) - y_best) < 0.05);
    snprintf(want, sizeof want, "#4: %.3fx (did not hold when re-timed)", 10.0 / 5.96);
    assert_non_null(strstr(svg.data, want));
    assert_non_null(strstr(svg.data, "class=\"pt held-back\""));
    assert_null(strstr(svg.data, ">0.00<")); /* the y axis fits the scores, round ticks */
    assert_non_null(strstr(svg.data, ">1.2</text>"));
    cuco_buf_free(&svg);
    char *gp = cuco_which("gnuplot");
    if (gp) {
        used = 0;
        assert_int_equal(report_plot_curve(h, 1, 1, &svg, &used, &e), 0);
        assert_int_equal(used, 1);
        assert_non_null(strstr(svg.data, "did not hold when re-timed")); /* hollow points */
        cuco_buf_free(&svg);
    }
    free(gp);
    assert_int_equal(report_plot_lineage(h, 1, 0, &svg, &used, &e), 0);
    assert_non_null(strstr(svg.data, "#4 1.68x (did not hold)"));
    cuco_buf_free(&svg);
    report_db_close(h);

    /* the web API: the run list, the evaluations' best so far, the programs */
    json_t *v = web_get("/api/runs");
    assert_true(fabs(json_real_value(json_object_get(json_array_get(json_object_get(v, "runs"), 0),
                                                     "best_score")) -
                     1.6) < 1e-9);
    json_decref(v);
    v = web_get("/api/evaluations");
    json_t *list = json_object_get(v, "evaluations");
    assert_true(fabs(json_real_value(json_object_get(json_array_get(list, 3), "best")) - 1.6) <
                1e-9);
    assert_true(json_is_true(json_object_get(json_array_get(list, 3), "held_back")));
    json_decref(v);
    v = web_get("/api/programs");
    list = json_object_get(v, "programs");
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *p = json_array_get(list, i);
        assert_int_equal(json_is_true(json_object_get(p, "held_back")),
                         json_integer_value(json_object_get(p, "id")) >= 3);
    }
    json_decref(v);
}

static void test_bound_and_baseline_rules(void **state)
{
    (void)state;
    run_view_bound b;
    run_view_bound_of(20, 12, 9, 15, &b);
    assert_true(b.has_ceiling && b.has_gap && !b.note);
    assert_true(fabs(b.ceiling - 20.0 / 12) < 1e-9);
    assert_true(fabs(b.gap_closed - 5.0 / 8) < 1e-9);
    run_view_bound_of(20, 12, 9, 5, &b); /* faster than the computation alone */
    assert_true(b.has_ceiling && !b.has_gap);
    assert_non_null(strstr(b.note, "bound does not apply: computation changed"));
    run_view_bound_of(5.47, 6.03, 1, 4, &b); /* a ceiling under 1 is not a figure */
    assert_true(!b.has_ceiling && !b.has_gap);
    assert_non_null(strstr(b.note, "clock and power"));
    run_view_bound_of(8, 8, 0, 8, &b); /* no communication: nothing to gain, no gap */
    assert_true(b.has_ceiling && !b.has_gap && !b.note && fabs(b.ceiling - 1) < 1e-9);
    run_view_baseline_source src;
    assert_true(run_view_baseline(1, 10, 20, &src) == 10 && src == RUN_VIEW_BASELINE_SEARCH);
    assert_true(run_view_baseline(0, 10, 20, &src) == 20 && src == RUN_VIEW_BASELINE_BOUND);
    assert_true(run_view_baseline(0, 10, -1, &src) == 10 && src == RUN_VIEW_BASELINE_START);
    assert_true(run_view_baseline(0, -1, -1, &src) < 0 && src == RUN_VIEW_BASELINE_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_report_web_plots_agree),
        cmocka_unit_test(test_bound_and_baseline_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
