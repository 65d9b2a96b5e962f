/* test_llm_transform.c: the pieces of the LLM route and of a run's LLM setup
 * that need no server: the judge's verdict, which mutator names need an LLM,
 * and cuco_llm_run_init() (mutators in the configured order, a missing key
 * refused before any call, a budget without a price refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"
#include "cuco/transform_llm.h"

static void test_verdict(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    int pass = -1;
    assert_int_equal(cuco_transform_llm_verdict("PASS\nall good", &pass, &e), 0);
    assert_int_equal(pass, 1);
    assert_int_equal(cuco_transform_llm_verdict("  **Pass**: fine", &pass, &e), 0);
    assert_int_equal(pass, 1);
    assert_int_equal(cuco_transform_llm_verdict("FAIL - a host copy is left", &pass, &e), 0);
    assert_int_equal(pass, 0);
    assert_int_equal(cuco_transform_llm_verdict("# fail\n", &pass, &e), 0);
    assert_int_equal(pass, 0);
    assert_int_equal(cuco_transform_llm_verdict("PASSED it is", &pass, &e), CUCO_EINVAL);
    assert_int_equal(cuco_transform_llm_verdict("I think it passes", &pass, &e), CUCO_EINVAL);
    assert_int_equal(cuco_transform_llm_verdict("", &pass, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_run_needed(void **state)
{
    (void)state;
    const char *knob[] = {"knob"}, *mixed[] = {"knob", "llm_full"};
    assert_int_equal(cuco_llm_run_needed(knob, 1), 0);
    assert_int_equal(cuco_llm_run_needed(mixed, 2), 1);
    assert_int_equal(cuco_llm_run_needed(NULL, 0), 0);
}

static void test_run_init(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_run run;
    cuco_llm_run_opts o;
    memset(&o, 0, sizeof o);

    /* built-in mutators only: no session */
    const char *knob[] = {"knob"};
    o.mutators = knob;
    o.n_mutators = 1;
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), 0);
    assert_null(run.session);
    assert_int_equal(run.n_mutators, 1);
    assert_string_equal(run.mutators[0]->name, "knob");
    cuco_llm_run_free(&run);

    /* an LLM mutator without a model */
    const char *mixed[] = {"llm_diff", "knob"};
    o.mutators = mixed;
    o.n_mutators = 2;
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "--model"));
    cuco_llm_run_free(&run);

    /* a model whose key is not set: refused before any call */
    const char *models[] = {"anthropic:some-model"};
    o.models = models;
    o.n_models = 1;
    char *saved = getenv("ANTHROPIC_API_KEY") ? strdup(getenv("ANTHROPIC_API_KEY")) : NULL;
    unsetenv("ANTHROPIC_API_KEY");
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "ANTHROPIC_API_KEY is not set"));
    cuco_llm_run_free(&run);

    /* with a key: the mutators in the configured order, one session */
    setenv("ANTHROPIC_API_KEY", "sk-test", 1);
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), 0);
    assert_non_null(run.session);
    assert_int_equal(run.n_mutators, 2);
    assert_string_equal(run.mutators[0]->name, "llm_diff");
    assert_string_equal(run.mutators[1]->name, "knob");
    assert_null(cuco_llm_session_fatal(run.session));
    cuco_llm_run_free(&run);

    /* a budget needs a price for every model */
    o.budget_usd = 1;
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "no known price"));
    cuco_llm_run_free(&run);
    o.prices = "some-model=1,2";
    assert_int_equal(cuco_llm_run_init(&run, &o, &e), 0);
    assert_true(cuco_llm_session_budget(run.session)->limit_usd == 1);
    cuco_llm_run_free(&run);

    if (saved) {
        setenv("ANTHROPIC_API_KEY", saved, 1);
        free(saved);
    } else {
        unsetenv("ANTHROPIC_API_KEY");
    }
    cuco_err_clear(&e);
}

int main(void)
{
    unsetenv("CUCO_LLM_PRICES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_run_needed),
        cmocka_unit_test(test_run_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
