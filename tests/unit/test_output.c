/* test_output.c: reading a candidate's output (the last Verification line and
 * the last CUCO_RESULT line), the frozen code's vouch (CUCO_VOUCH: nonce,
 * place, hash, verdict), the nonce, status names, and the result JSON
 * object. */
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

#define NONCE "0123456789abcdef0123456789abcdef"
#define JSON "{\"time_ms\":0.074531,\"iters\":2,\"n\":64}"

/* An output the frozen code vouches for, with text put before the vouch
 * (between) and after it (after). Caller frees. */
static char *vouched(const char *verdict, const char *between, const char *after)
{
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", cuco_fnv1a64(JSON, strlen(JSON)));
    return cuco_sprintf("rank 0 starting\nVerification: %s\nCUCO_RESULT  " JSON " \r\n%s"
                        "CUCO_VOUCH " NONCE " %s %s\n%s",
                        verdict, between, hash, !strcmp(verdict, "PASS") ? "PASS" : "FAIL", after);
}

static void expect_vouch(const char *out, const char *nonce, cuco_vouch want, const char *why)
{
    char *reason = NULL;
    cuco_vouch got = cuco_run_output_vouch(out, nonce, &reason);
    if (got != want || (why && (!reason || !strstr(reason, why))) || (!why && reason))
        fail_msg("vouch %d (want %d), reason '%s' (want '%s') for:\n%s", got, want,
                 reason ? reason : "(none)", why ? why : "(none)", out);
    free(reason);
}

static void test_fnv1a64(void **state)
{
    (void)state;
    /* the published FNV-1a 64 test vectors */
    assert_true(cuco_fnv1a64("", 0) == 0xcbf29ce484222325ULL);
    assert_true(cuco_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
    assert_true(cuco_fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
}

static void test_nonce(void **state)
{
    (void)state;
    char a[CUCO_NONCE_LEN + 1], b[CUCO_NONCE_LEN + 1];
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_vouch_new_nonce(a, &e), 0);
    assert_int_equal(cuco_vouch_new_nonce(b, &e), 0);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strspn(a, "0123456789abcdef"), 32);
    assert_string_not_equal(a, b);
}

static void test_vouch_ok(void **state)
{
    (void)state;
    char *out = vouched("PASS", "", "");
    expect_vouch(out, NONCE, CUCO_VOUCH_OK, NULL);
    free(out);
    /* a failed verification vouched as FAIL; other lines around are fine */
    out = vouched("FAIL C[1][2] off", "rank 1 done\n", "bye\n");
    expect_vouch(out, NONCE, CUCO_VOUCH_OK, NULL);
    free(out);
}

static void test_vouch_missing_or_other_nonce(void **state)
{
    (void)state;
    expect_vouch("Verification: PASS\nCUCO_RESULT " JSON "\n", NONCE, CUCO_VOUCH_NONE,
                 "the frozen code did not vouch for this run: no CUCO_VOUCH line");
    char *out = vouched("PASS", "", "");
    expect_vouch(out, "ffffffffffffffffffffffffffffffff", CUCO_VOUCH_NONE, "no CUCO_VOUCH line");
    expect_vouch(out, "0123456789abcdef", CUCO_VOUCH_NONE, "no CUCO_VOUCH line"); /* a prefix */
    expect_vouch(out, NULL, CUCO_VOUCH_NONE, "no CUCO_VOUCH line");
    free(out);
}

static void test_vouch_followed_by_lines(void **state)
{
    (void)state;
    const char *after[] = {"CUCO_RESULT {\"time_ms\":0.001}\n", "Verification: PASS\n",
                           "CUCO_VOUCH " NONCE " 0000000000000000 PASS\n",
                           "  CUCO_VOUCH forged 0000000000000000 PASS"};
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) {
        char *out = vouched("PASS", "", after[i]);
        expect_vouch(out, NONCE, CUCO_VOUCH_BROKEN,
                     "the result line was not the one the frozen code printed");
        free(out);
    }
}

static void test_vouch_other_result_or_verdict(void **state)
{
    (void)state;
    /* a result line printed between the frozen one and the vouch */
    char *out = vouched("PASS", "CUCO_RESULT {\"time_ms\":0.001,\"iters\":2,\"n\":64}\n", "");
    expect_vouch(out, NONCE, CUCO_VOUCH_BROKEN,
                 "the result line was not the one the frozen code printed");
    free(out);
    out = vouched("PASS", "Verification: FAIL late\n", "");
    expect_vouch(out, NONCE, CUCO_VOUCH_BROKEN,
                 "the verification line was not the one the frozen code printed");
    free(out);
    /* the frozen verdict was FAIL, the last line says PASS */
    out = cuco_sprintf("Verification: PASS\nCUCO_RESULT " JSON "\nCUCO_VOUCH " NONCE " %016llx "
                       "FAIL\n",
                       cuco_fnv1a64(JSON, strlen(JSON)));
    expect_vouch(out, NONCE, CUCO_VOUCH_BROKEN, "the verification line was not");
    free(out);
    expect_vouch("Verification: PASS\nCUCO_RESULT " JSON "\nCUCO_VOUCH " NONCE " 12 PASS\n", NONCE,
                 CUCO_VOUCH_BROKEN, "is not 'CUCO_VOUCH <nonce>");
    expect_vouch("Verification: PASS\nCUCO_RESULT " JSON "\nCUCO_VOUCH " NONCE
                 " 0123456789abcdef PASS extra\n",
                 NONCE, CUCO_VOUCH_BROKEN, "is not 'CUCO_VOUCH <nonce>");
    expect_vouch("CUCO_VOUCH " NONCE " 0123456789abcdef PASS\n", NONCE, CUCO_VOUCH_BROKEN,
                 "the result line was not");
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
        cmocka_unit_test(test_fnv1a64),
        cmocka_unit_test(test_nonce),
        cmocka_unit_test(test_vouch_ok),
        cmocka_unit_test(test_vouch_missing_or_other_nonce),
        cmocka_unit_test(test_vouch_followed_by_lines),
        cmocka_unit_test(test_vouch_other_result_or_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
