/* test_compare.c: the side-by-side comparison's statistics and JSON
 * (speedups against the first program, the last against the second, the
 * bound and the share of the gap closed from the first's own breakdown), on
 * entries filled by hand; the interleaved runs themselves are covered by
 * tests/cli/test_run_confirm.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/compare.h"

static double *times(int n, const double *v)
{
    double *t = malloc((size_t)n * sizeof *t);
    assert_non_null(t);
    memcpy(t, v, (size_t)n * sizeof *t);
    return t;
}

static double num(json_t *o, const char *k)
{
    assert_true(json_is_number(json_object_get(o, k)));
    return json_number_value(json_object_get(o, k));
}

static void test_json_speedups_and_gap(void **state)
{
    (void)state;
    cuco_workload w;
    memset(&w, 0, sizeof w);
    w.name = "demo";
    w.ranks = 2;
    cuco_compare_entry c[3];
    memset(c, 0, sizeof c);
    c[0].label = "seed";
    c[1].label = "gen_0";
    c[2].label = "best";
    const double t0[] = {10.0, 12.0, 11.0}, t1[] = {10.5, 10.4, 10.6}, t2[] = {9.0, 8.0, 8.4};
    c[0].times_ms = times(3, t0);
    c[1].times_ms = times(3, t1);
    c[2].times_ms = times(3, t2);
    c[0].n_times = c[1].n_times = c[2].n_times = 3;
    c[0].median_ms = 11.0;
    c[1].median_ms = 10.5;
    c[2].median_ms = 8.4;
    c[0].metrics_json = strdup("{\"time_ms\": 11.0, \"compute_ms\": 8.0, \"comm_ms\": 3.0}");
    char *text = cuco_compare_json(&w, c, 3, 3);
    assert_non_null(text);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "workload")), "demo");
    assert_int_equal(json_integer_value(json_object_get(j, "rounds")), 3);
    assert_int_equal(json_array_size(json_object_get(j, "programs")), 3);
    json_t *sp = json_object_get(j, "speedups");
    assert_true(fabs(num(sp, "gen_0_vs_seed") - 11.0 / 10.5) < 1e-9);
    assert_true(fabs(num(sp, "best_vs_seed") - 11.0 / 8.4) < 1e-9);
    assert_true(fabs(num(sp, "best_vs_gen_0") - 10.5 / 8.4) < 1e-9);
    json_t *b = json_object_get(j, "bound");
    assert_true(fabs(num(b, "bound_ms") - 8.0) < 1e-9);
    assert_true(fabs(num(b, "ceiling") - 11.0 / 8.0) < 1e-9);
    json_t *gap = json_object_get(b, "gap_closed");
    assert_true(fabs(num(gap, "best") - (11.0 - 8.4) / 3.0) < 1e-9);
    assert_true(fabs(num(gap, "gen_0") - 0.5 / 3.0) < 1e-9);
    assert_int_equal(json_array_size(json_object_get(b, "bound_does_not_apply")), 0);
    json_decref(j);
    free(text);

    /* faster than the seed's computation alone: the computation changed, and
     * the gap's share would mean nothing */
    double best_ms = c[2].median_ms;
    c[2].median_ms = 7.0;
    text = cuco_compare_json(&w, c, 3, 3);
    j = json_loads(text, 0, NULL);
    b = json_object_get(j, "bound");
    assert_true(json_is_null(json_object_get(json_object_get(b, "gap_closed"), "best")));
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(b, "bound_does_not_apply"), 0)), "best");
    assert_true(fabs(num(json_object_get(b, "gap_closed"), "gen_0") - 0.5 / 3.0) < 1e-9);
    json_decref(j);
    free(text);
    c[2].median_ms = best_ms;

    /* timed parts slower than the whole step: no ceiling, a note why */
    free(c[0].metrics_json);
    c[0].metrics_json = strdup("{\"time_ms\": 11.0, \"compute_ms\": 11.5, \"comm_ms\": 3.0}");
    text = cuco_compare_json(&w, c, 3, 3);
    j = json_loads(text, 0, NULL);
    b = json_object_get(j, "bound");
    assert_true(json_is_null(json_object_get(b, "ceiling")));
    assert_non_null(strstr(json_string_value(json_object_get(b, "note")), "no bound applies"));
    assert_int_equal(json_object_size(json_object_get(b, "gap_closed")), 0);
    json_decref(j);
    free(text);

    /* a failed program: no speedup, no gap; no breakdown: no bound */
    c[2].status = CUCO_EVAL_WRONG_ANSWER;
    c[2].median_ms = -1;
    free(c[0].metrics_json);
    c[0].metrics_json = strdup("{\"time_ms\": 11.0}");
    text = cuco_compare_json(&w, c, 3, 3);
    j = json_loads(text, 0, NULL);
    sp = json_object_get(j, "speedups");
    assert_null(json_object_get(sp, "best_vs_seed"));
    assert_null(json_object_get(sp, "best_vs_gen_0"));
    assert_non_null(json_object_get(sp, "gen_0_vs_seed"));
    assert_true(json_is_null(json_object_get(j, "bound")));
    json_t *p2 = json_array_get(json_object_get(j, "programs"), 2);
    assert_string_equal(json_string_value(json_object_get(p2, "status")), "wrong_answer");
    assert_true(json_is_null(json_object_get(p2, "median_ms")));
    json_decref(j);
    free(text);
    cuco_compare_entries_clear(c, 3);
    assert_null(c[0].times_ms);
    assert_null(c[0].metrics_json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_speedups_and_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
