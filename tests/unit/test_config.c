/* test_config.c: the search configuration: defaults, a full YAML file, and
 * errors with file:line (unknown key, bad number, bad selection, YAML
 * syntax). Files are written under CUCO_TEST_TMP. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/config.h"
#include "cuco/fs.h"

static char *write_tmp(const char *name, const char *text)
{
    const char *t = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/test_config.%ld", t ? t : "/tmp", (long)getpid());
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *p = cuco_path_join(dir, name);
    free(dir);
    assert_int_equal(cuco_fs_write(p, text, strlen(text), &e), 0);
    return p;
}

static void test_defaults(void **state)
{
    (void)state;
    cuco_evolve_config c;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_config_defaults(&c, &e), 0);
    assert_int_equal(cuco_config_validate(&c, &e), 0);
    assert_int_equal(c.n_mutators, 1);
    assert_string_equal(c.mutators[0], "knob");
    assert_int_equal(c.slots, 1);
    assert_int_equal(c.retime_rounds, 2);
    char *j = cuco_config_json(&c);
    assert_non_null(strstr(j, "\"selection\":\"power_law\""));
    free(j);
    cuco_config_free(&c);
}

static void test_full_file(void **state)
{
    (void)state;
    char *p = write_tmp("full.yaml", "islands: 4\n"
                                     "children_per_island: 3\n"
                                     "migration_interval: 5\n"
                                     "selection: hill_climb\n"
                                     "explore_fraction: 0.5\n"
                                     "novelty_threshold: 0.9\n"
                                     "slots: 2\n"
                                     "seed: 99\n"
                                     "retime_rounds: 3\n"
                                     "retime_per_generation: 5\n"
                                     "budget:\n"
                                     "  evaluations: 50\n"
                                     "  generations: 7\n"
                                     "  wall_s: 60\n"
                                     "  usd: 1.5\n"
                                     "mutators:\n"
                                     "  knob: 2\n"
                                     "  test_garbage: 0.5\n");
    cuco_evolve_config c;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_config_defaults(&c, &e), 0);
    assert_int_equal(cuco_config_load(p, &c, &e), 0);
    assert_int_equal(c.islands, 4);
    assert_int_equal(c.children_per_island, 3);
    assert_int_equal(c.migration_interval, 5);
    assert_int_equal(c.selection, CUCO_SEL_HILL_CLIMB);
    assert_true(c.explore_fraction == 0.5);
    assert_true(c.novelty_threshold == 0.9);
    assert_int_equal(c.slots, 2);
    assert_int_equal(c.seed, 99);
    assert_int_equal(c.retime_rounds, 3);
    assert_int_equal(c.retime_per_generation, 5);
    assert_int_equal(c.budget_evaluations, 50);
    assert_int_equal(c.budget_generations, 7);
    assert_true(c.budget_wall_s == 60);
    assert_true(c.budget_usd == 1.5);
    assert_int_equal(c.n_mutators, 2);
    assert_string_equal(c.mutators[1], "test_garbage");
    assert_true(c.weights[0] == 2);
    cuco_config_free(&c);
    free(p);
}

static void expect_error(const char *text, int line, const char *needle)
{
    char *p = write_tmp("bad.yaml", text);
    cuco_evolve_config c;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_config_defaults(&c, &e), 0);
    assert_int_equal(cuco_config_load(p, &c, &e), CUCO_EINVAL);
    assert_int_equal(e.line, line);
    assert_string_equal(e.file, p);
    if (!strstr(cuco_err_msg(&e), needle))
        fail_msg("'%s' not in '%s'", needle, cuco_err_msg(&e));
    cuco_err_clear(&e);
    cuco_config_free(&c);
    free(p);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("islands: 2\nislandz: 3\n", 2, "unknown key 'islandz'");
    expect_error("islands: 2\nslots: many\n", 2, "not a number");
    expect_error("islands: 0\n", 1, "out of range");
    expect_error("selection: random\n", 1, "not power_law");
    expect_error("budget:\n  evaluations: 5\n  dollars: 3\n", 3, "unknown key budget.dollars");
    expect_error("islands: [1\n", 2, "YAML");
    expect_error("seed: 1.5\n", 1, "integer");
    expect_error("seed: 1\nretime_per_generation: 0\n", 2, "out of range");
}

/* Screening repeats: set repeats win; unset, one timing while re-timing
 * races the contenders, the manifest's when re-timing is off. */
static void test_screen_repeats(void **state)
{
    (void)state;
    cuco_evolve_config c;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_config_defaults(&c, &e), 0);
    assert_int_equal(c.repeats, 0);
    assert_true(c.retime_rounds > 0);
    assert_int_equal(cuco_config_screen_repeats(&c), 1);
    c.retime_rounds = 0;
    assert_int_equal(cuco_config_screen_repeats(&c), 0);
    c.repeats = 3;
    assert_int_equal(cuco_config_screen_repeats(&c), 3);
    c.retime_rounds = 2;
    assert_int_equal(cuco_config_screen_repeats(&c), 3);
    cuco_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_screen_repeats),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full_file),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
