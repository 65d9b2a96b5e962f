/* test_output.c: reading a candidate's output (the last Verification line and
 * the last CUCO_RESULT line), status names, and the result JSON object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/eval.h"

static void test_pass_and_result(void **state)
{
    (void)state;
    cuco_run_output o;
    cuco_run_output_parse("rank 0 starting\n"
                          "Verification: PASS\n"
                          "CUCO_RESULT {\"time_ms\": 12.5, \"iters\": 10, \"comm_ms\": 3}\n",
                          &o);
    assert_int_equal(o.has_verification, 1);
    assert_int_equal(o.verified, 1);
    assert_null(o.fail_reason);
    assert_null(o.parse_error);
    assert_true(o.time_ms == 12.5);
    assert_non_null(strstr(o.result_json, "\"iters\":10"));
    cuco_run_output_free(&o);
}

static void test_last_lines_win(void **state)
{
    (void)state;
    cuco_run_output o;
    cuco_run_output_parse("Verification: PASS\nCUCO_RESULT {\"time_ms\": 1}\n"
                          "Verification: FAIL max error 0.5 at C[3][4]\n"
                          "CUCO_RESULT {\"time_ms\": 2}\n",
                          &o);
    assert_int_equal(o.has_verification, 1);
    assert_int_equal(o.verified, 0);
    assert_string_equal(o.fail_reason, "max error 0.5 at C[3][4]");
    assert_true(o.time_ms == 2);
    cuco_run_output_free(&o);

    cuco_run_output_parse("Verification: FAIL first try\nVerification: PASS\r\n"
                          "  CUCO_RESULT {\"time_ms\": 3.25}\r\n",
                          &o);
    assert_int_equal(o.verified, 1);
    assert_null(o.fail_reason);
    assert_true(o.time_ms == 3.25);
    assert_null(o.parse_error);
    cuco_run_output_free(&o);
}

static void test_fail_without_reason_and_odd_verdict(void **state)
{
    (void)state;
    cuco_run_output o;
    cuco_run_output_parse("Verification: FAIL\n", &o);
    assert_int_equal(o.has_verification, 1);
    assert_int_equal(o.verified, 0);
    assert_string_equal(o.fail_reason, "(no reason given)");
    assert_non_null(o.parse_error); /* no CUCO_RESULT */
    cuco_run_output_free(&o);
    cuco_run_output_parse("Verification: maybe\n", &o);
    assert_int_equal(o.verified, 0);
    assert_non_null(strstr(o.fail_reason, "unrecognized verdict 'maybe'"));
    cuco_run_output_free(&o);
}

static void test_missing_lines(void **state)
{
    (void)state;
    cuco_run_output o;
    cuco_run_output_parse("hello\nworld\n", &o);
    assert_int_equal(o.has_verification, 0);
    assert_null(o.result_json);
    assert_true(o.time_ms < 0);
    assert_non_null(strstr(o.parse_error, "no CUCO_RESULT line"));
    cuco_run_output_free(&o);
    cuco_run_output_parse(NULL, &o);
    assert_int_equal(o.has_verification, 0);
    assert_non_null(o.parse_error);
    cuco_run_output_free(&o);
    /* A word that merely starts with the tag is not a result line. */
    cuco_run_output_parse("CUCO_RESULTS {\"time_ms\": 1}\n", &o);
    assert_null(o.result_json);
    cuco_run_output_free(&o);
}

/* Parses one result line and expects it to be unusable for the given reason. */
static void expect_bad_result(const char *line, const char *needle)
{
    cuco_run_output o;
    char *text = cuco_sprintf("Verification: PASS\n%s\n", line);
    cuco_run_output_parse(text, &o);
    free(text);
    assert_int_equal(o.verified, 1);
    assert_true(o.time_ms < 0);
    if (!o.parse_error || !strstr(o.parse_error, needle))
        print_error("'%s': parse_error '%s', wanted '%s'\n", line,
                    o.parse_error ? o.parse_error : "(null)", needle);
    assert_non_null(o.parse_error);
    assert_non_null(strstr(o.parse_error, needle));
    cuco_run_output_free(&o);
}

static void test_bad_results(void **state)
{
    (void)state;
    expect_bad_result("CUCO_RESULT {\"time_ms\": 1.5,", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT {time_ms: 1}", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT {\"time_ms\": NaN}", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT {\"time_ms\": 1e999}", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT {\"time_ms\": 1, \"time_ms\": 2}", "malformed CUCO_RESULT JSON");
    expect_bad_result("CUCO_RESULT [1, 2]", "must be a JSON object");
    expect_bad_result("CUCO_RESULT {\"iters\": 3}", "no time_ms");
    expect_bad_result("CUCO_RESULT {\"time_ms\": \"fast\"}", "time_ms is not a number");
    expect_bad_result("CUCO_RESULT {\"time_ms\": 0}", "finite number > 0");
    expect_bad_result("CUCO_RESULT {\"time_ms\": -4.5}", "finite number > 0");
}

static void test_status_names(void **state)
{
    (void)state;
    const char *names[] = {"ok",           "compile_error",    "run_error",  "timeout",
                           "wrong_answer", "frozen_violation", "bad_output", "infra_error"};
    for (int i = 0; i < 8; i++) {
        assert_string_equal(cuco_eval_status_name((cuco_eval_status)i), names[i]);
        assert_int_equal(cuco_eval_status_parse(names[i]), i);
    }
    assert_int_equal(cuco_eval_status_parse("fine"), -1);
    assert_int_equal(cuco_eval_status_parse(NULL), -1);
    assert_string_equal(cuco_eval_status_name((cuco_eval_status)42), "unknown");
}

static void test_result_json(void **state)
{
    (void)state;
    cuco_eval_result r;
    memset(&r, 0, sizeof r);
    r.level = 3;
    r.status = CUCO_EVAL_OK;
    strcpy(r.program_hash, "0123456789abcdef");
    r.n_times = 3;
    r.times_ms = malloc(3 * sizeof *r.times_ms);
    r.times_ms[0] = 2;
    r.times_ms[1] = 1;
    r.times_ms[2] = 4;
    r.time_ms = 2;
    r.time_ms_min = 1;
    r.time_ms_max = 4;
    r.spread = 1.5;
    r.metrics_json = cuco_strdup("{\"time_ms\":2,\"compute_ms\":1.5}");
    r.excerpt = cuco_strdup("bad \xff byte"); /* not UTF-8: must still give valid JSON */
    char *s = cuco_eval_result_json(&r);
    json_error_t err;
    json_t *o = json_loads(s, 0, &err);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(o, "level")), 3);
    assert_true(json_number_value(json_object_get(o, "time_ms")) == 2);
    assert_true(json_number_value(json_object_get(o, "spread")) == 1.5);
    assert_int_equal(json_array_size(json_object_get(o, "times_ms")), 3);
    assert_true(json_number_value(json_object_get(json_object_get(o, "metrics"), "compute_ms")) ==
                1.5);
    assert_non_null(json_string_value(json_object_get(o, "excerpt")));
    assert_string_equal(json_string_value(json_object_get(o, "program_hash")), "0123456789abcdef");
    for (const char *k = "compile_s"; k; k = !strcmp(k, "compile_s")  ? "verify_s"
                                             : !strcmp(k, "verify_s") ? "bench_s"
                                                                      : NULL)
        assert_true(json_is_number(json_object_get(o, k)));
    json_decref(o);
    free(s);
    cuco_eval_result_free(&r);

    /* A failed candidate: no times, null time fields. */
    memset(&r, 0, sizeof r);
    r.status = CUCO_EVAL_COMPILE_ERROR;
    s = cuco_eval_result_json(&r);
    o = json_loads(s, 0, &err);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "compile_error");
    assert_true(json_is_null(json_object_get(o, "time_ms")));
    assert_true(json_is_null(json_object_get(o, "metrics")));
    json_decref(o);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_and_result),
        cmocka_unit_test(test_last_lines_win),
        cmocka_unit_test(test_fail_without_reason_and_odd_verdict),
        cmocka_unit_test(test_missing_lines),
        cmocka_unit_test(test_bad_results),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_result_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
