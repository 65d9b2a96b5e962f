/* test_mutate.c: the PRNG is deterministic, UCB1 tries every arm first and
 * then favours the paying one, the knob mutator proposes legal settings not
 * yet in the run and reports exhaustion, varies every knob once before any
 * twice, screens first (the structured search of doe.h) and never moves a
 * knob the program cannot read, and the unknown mutator name is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/mutate.h"

static const char prog[] = "// EVOLVE-BLOCK-START\n"
                           "#define A 1 // cuco:knob 1 2\n"
                           "#define B 5 // cuco:knob 5 6\n"
                           "// EVOLVE-BLOCK-END\n"
                           "int main(void) { return 0; }\n";

static void test_rng(void **state)
{
    (void)state;
    cuco_rng a, b;
    cuco_rng_seed(&a, 11);
    cuco_rng_seed(&b, 11);
    for (int i = 0; i < 100; i++)
        assert_true(cuco_rng_next(&a) == cuco_rng_next(&b));
    for (int i = 0; i < 1000; i++) {
        double u = cuco_rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
        assert_true(cuco_rng_below(&a, 7) < 7);
    }
}

static void test_ucb1(void **state)
{
    (void)state;
    double sum[3] = {0, 0, 0};
    int pulls[3] = {0, 0, 0};
    assert_int_equal(cuco_ucb1_pick(sum, pulls, 3, 1.0), 0);
    pulls[0] = 1;
    assert_int_equal(cuco_ucb1_pick(sum, pulls, 3, 1.0), 1);
    pulls[1] = 1;
    pulls[2] = 1;
    /* arm 2 paid every time over many pulls: it wins */
    pulls[0] = 20, pulls[1] = 20, pulls[2] = 20;
    sum[2] = 18;
    sum[0] = 2;
    assert_int_equal(cuco_ucb1_pick(sum, pulls, 3, 1.0), 2);
    /* a rarely tried arm gets its exploration bonus */
    pulls[1] = 1;
    assert_int_equal(cuco_ucb1_pick(sum, pulls, 3, 1.5), 1);
}

/* A fresh database (path in *path, the caller frees it) with one run. */
static cuco_db *fresh_run_db(const char *name, char **path, int64_t *run)
{
    const char *t = getenv("CUCO_TEST_TMP");
    cuco_err e = CUCO_ERR_INIT;
    *path = cuco_sprintf("%s/%s.%ld.db", t ? t : "/tmp", name, (long)getpid());
    assert_int_equal(cuco_fs_mkdirs(t ? t : "/tmp", &e), 0);
    unlink(*path);
    cuco_db *db;
    assert_int_equal(db_open(*path, 0, &db, &e), 0);
    assert_int_equal(db_run_create(db, "m", "{}", 1, run, &e), 0);
    return db;
}

/* The row of a correct child with text (not copied) and its knobs JSON
 * (the caller frees knobs_json). */
static cuco_db_program child_row(int64_t run, int64_t parent_id, char *text)
{
    cuco_db_program ch;
    memset(&ch, 0, sizeof ch);
    ch.run_id = run;
    ch.code = text;
    ch.parent_id = parent_id;
    ch.status = "ok";
    ch.code_hash = "c";
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_knobs_json(text, &ch.knobs_json, &e), 0);
    return ch;
}

static void test_knob_mutator_exhausts(void **state)
{
    (void)state;
    char *p;
    int64_t run;
    cuco_db *db = fresh_run_db("test_mutate", &p, &run);
    cuco_err e = CUCO_ERR_INIT;
    cuco_mutator *m;
    assert_int_equal(cuco_mutator_create("nope", &m, &e), CUCO_ENOTFOUND);
    cuco_err_clear(&e);
    assert_int_equal(cuco_mutator_create("knob", &m, &e), 0);
    cuco_db_program parent;
    memset(&parent, 0, sizeof parent);
    parent.code = (char *)prog;
    /* the parent's own setting is in the run */
    cuco_db_program row = parent;
    row.run_id = run;
    row.code_hash = "p";
    assert_int_equal(cuco_knobs_json(prog, &row.knobs_json, &e), 0);
    assert_string_equal(row.knobs_json, "{\"A\":\"1\",\"B\":\"5\"}");
    assert_int_equal(db_program_insert(db, &row, &parent.id, &e), 0);
    free(row.knobs_json);
    cuco_rng rng;
    cuco_rng_seed(&rng, 5);
    cuco_mutate_ctx c = {prog, NULL, &parent, NULL, &parent, 1, NULL, 0, db, run, &rng, 0};
    char *seen[4] = {0};
    for (int i = 0; i < 3; i++) {
        cuco_mutation mu;
        assert_int_equal(m->propose(m, &c, &mu, &e), 0);
        assert_non_null(mu.patch_type);
        assert_true(!strncmp(mu.patch_type, "knob:", 5));
        cuco_db_program ch = child_row(run, parent.id, mu.text);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(seen[j], ch.knobs_json);
        assert_string_not_equal(ch.knobs_json, "{\"A\":\"1\",\"B\":\"5\"}");
        seen[i] = ch.knobs_json;
        assert_int_equal(db_program_insert(db, &ch, NULL, &e), 0);
        cuco_mutation_free(&mu);
    }
    cuco_mutation mu;
    assert_int_equal(m->propose(m, &c, &mu, &e), CUCO_ENOTFOUND);
    assert_true(mu.exhausted);
    assert_non_null(strstr(cuco_err_msg(&e), "exhausted"));
    cuco_err_clear(&e);
    for (int i = 0; i < 3; i++)
        free(seen[i]);
    cuco_mutator_free(m);
    db_close(db);
    free(p);
}

/* Seven knobs, one of them with four values, and a chain of seven
 * proposals, each from the one before (as a search following its best
 * does), each recorded in the run: every proposal varies a knob that no
 * program before it had varied, so none is left unvaried. A uniform choice
 * of the knob repeats one within a few proposals for most seeds. */
static void test_knob_mutator_covers_each_knob(void **state)
{
    (void)state;
    static const char wide[] = "// EVOLVE-BLOCK-START\n"
                               "#define A 0 // cuco:knob 0 1\n"
                               "#define B 0 // cuco:knob 0 1\n"
                               "#define C 0 // cuco:knob 0 1\n"
                               "#define D 0 // cuco:knob 0 1\n"
                               "#define E 0 // cuco:knob 0 1\n"
                               "#define F 0 // cuco:knob 0 1\n"
                               "#define G 0 // cuco:knob 0 1 2 3\n"
                               "// EVOLVE-BLOCK-END\n";
    cuco_err e = CUCO_ERR_INIT;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        char *p;
        int64_t run;
        cuco_db *db = fresh_run_db("test_mutate_cover", &p, &run);
        cuco_mutator *m;
        assert_int_equal(cuco_mutator_create("knob", &m, &e), 0);
        cuco_db_program parent;
        memset(&parent, 0, sizeof parent);
        parent.code = cuco_strdup(wide);
        parent.run_id = run;
        parent.code_hash = "p";
        parent.status = "ok";
        assert_int_equal(cuco_knobs_json(wide, &parent.knobs_json, &e), 0);
        assert_int_equal(db_program_insert(db, &parent, &parent.id, &e), 0);
        cuco_rng rng;
        cuco_rng_seed(&rng, seed);
        int varied[7] = {0};
        for (int i = 0; i < 7; i++) {
            cuco_mutate_ctx c = {wide, NULL, &parent, NULL, &parent, 1, NULL, 0, db, run, &rng, 0};
            cuco_mutation mu;
            assert_int_equal(m->propose(m, &c, &mu, &e), 0);
            cuco_db_program ch = child_row(run, parent.id, mu.text);
            int n_varied = 0;
            for (int k = 0; k < 7; k++) {
                char key[16];
                snprintf(key, sizeof key, "\"%c\":\"0\"", 'A' + k);
                if (!strstr(ch.knobs_json, key))
                    varied[k] = 1;
                n_varied += varied[k];
            }
            /* each proposal varies at least one knob not varied before */
            assert_true(n_varied >= i + 1);
            assert_int_equal(db_program_insert(db, &ch, &ch.id, &e), 0);
            /* the child is the next parent */
            free(parent.code);
            free(parent.knobs_json);
            parent = ch;
            parent.code = mu.text;
            mu.text = NULL;
            cuco_mutation_free(&mu);
        }
        free(parent.code);
        free(parent.knobs_json);
        cuco_mutator_free(m);
        db_close(db);
        unlink(p);
        free(p);
    }
}

/* Runs the knob mutator on code (knobs A, B, C; A and B screened): its
 * first three children are the screen's (knob:screen), each new and each
 * with C held at 0, and the fourth is something else that keeps C at 0.
 * With c_moot_at_a1, eight more children follow, and none with A=1 moves C
 * (the moves hold a moot knob too). */
static void expect_screen_holds_c(const char *code, const char *db_name, uint64_t seed,
                                  int c_moot_at_a1)
{
    char *p;
    int64_t run;
    cuco_db *db = fresh_run_db(db_name, &p, &run);
    cuco_err e = CUCO_ERR_INIT;
    cuco_mutator *m;
    assert_int_equal(cuco_mutator_create("knob", &m, &e), 0);
    cuco_db_program parent;
    memset(&parent, 0, sizeof parent);
    parent.code = (char *)code;
    cuco_db_program row = child_row(run, 0, (char *)code);
    row.time_ms = 10;
    row.score = 1;
    assert_int_equal(db_program_insert(db, &row, &parent.id, &e), 0);
    free(row.knobs_json);
    cuco_rng rng;
    cuco_rng_seed(&rng, seed);
    cuco_mutate_ctx c = {code, NULL, &parent, NULL, &parent, 1, NULL, 0, db, run, &rng, 0};
    /* two screened knobs: a 2^2 screen, 3 new runs */
    for (int i = 0; i < 3; i++) {
        cuco_mutation mu;
        assert_int_equal(m->propose(m, &c, &mu, &e), 0);
        assert_string_equal(mu.patch_type, "knob:screen");
        cuco_db_program ch = child_row(run, parent.id, mu.text);
        assert_non_null(strstr(ch.knobs_json, "\"C\":\"0\""));
        ch.time_ms = 9 - i;
        ch.score = 10 / ch.time_ms;
        assert_int_equal(db_program_insert(db, &ch, NULL, &e), 0);
        free(ch.knobs_json);
        cuco_mutation_free(&mu);
    }
    cuco_mutation mu;
    assert_int_equal(m->propose(m, &c, &mu, &e), 0);
    assert_string_not_equal(mu.patch_type, "knob:screen");
    assert_non_null(strstr(mu.description, "C=0"));
    cuco_mutation_free(&mu);
    for (int i = 0; c_moot_at_a1 && i < 8; i++) {
        if (m->propose(m, &c, &mu, &e) != 0) { /* the space may run out */
            cuco_err_clear(&e);
            break;
        }
        if (strstr(mu.description, "A=1"))
            assert_non_null(strstr(mu.description, "C=0"));
        cuco_db_program ch = child_row(run, parent.id, mu.text);
        ch.time_ms = 8 + i;
        ch.score = 10 / ch.time_ms;
        assert_int_equal(db_program_insert(db, &ch, NULL, &e), 0);
        free(ch.knobs_json);
        cuco_mutation_free(&mu);
    }
    cuco_mutator_free(m);
    db_close(db);
    unlink(p);
    free(p);
}

/* The structured search comes first: with two knobs the program reads and
 * one it names only in a comment, the first children are the screen's
 * (knob:screen), each new, and the unread knob never moves. */
static void test_knob_mutator_screens_first(void **state)
{
    (void)state;
    static const char used[] = "// EVOLVE-BLOCK-START\n"
                               "#define A 1 // cuco:knob 1 2\n"
                               "#define B 5 // cuco:knob 5 6 7\n"
                               "#define C 0 // cuco:knob 0 1\n"
                               "// EVOLVE-BLOCK-END\n"
                               "/* C is never read */\n"
                               "int main(void) { return A + B; }\n";
    expect_screen_holds_c(used, "test_mutate_screen", 3, 0);
}

/* A knob declared 'when A=2' is moot while A holds its start value 1: the
 * screen varies A and B only, and no later child with A=1 moves C. */
static void test_knob_mutator_holds_moot_knob(void **state)
{
    (void)state;
    static const char cond[] = "// EVOLVE-BLOCK-START\n"
                               "#define A 1 // cuco:knob 1 2\n"
                               "#define B 5 // cuco:knob 5 6 7\n"
                               "#define C 0 // cuco:knob 0 1 when A=2\n"
                               "// EVOLVE-BLOCK-END\n"
                               "int main(void) { return A == 2 ? B + C : B; }\n";
    expect_screen_holds_c(cond, "test_mutate_moot", 5, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_ucb1),
        cmocka_unit_test(test_knob_mutator_exhausts),
        cmocka_unit_test(test_knob_mutator_covers_each_knob),
        cmocka_unit_test(test_knob_mutator_screens_first),
        cmocka_unit_test(test_knob_mutator_holds_moot_knob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
