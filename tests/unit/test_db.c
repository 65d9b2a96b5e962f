/* test_db.c: the candidate database: creation and schema version, reopening
 * (no second migration), read-only open while a writer holds it, programs
 * (insert, update, get, top, duplicate checks), the evaluation cache, LLM
 * costs and meta summaries, and the run lock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/fs.h"

static char *tmp_path(const char *name)
{
    const char *t = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/test_db.%ld", t ? t : "/tmp", (long)getpid());
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *p = cuco_path_join(dir, name);
    free(dir);
    unlink(p);
    return p;
}

static void test_schema_and_reopen(void **state)
{
    (void)state;
    char *p = tmp_path("a.db");
    cuco_db *db, *ro;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(db_open(p, 1, &ro, &e), CUCO_EDB); /* missing file, read-only */
    cuco_err_clear(&e);
    assert_int_equal(db_open(p, 0, &db, &e), 0);
    int v;
    assert_int_equal(db_schema_version(db, &v, &e), 0);
    assert_int_equal(v, CUCO_DB_SCHEMA_VERSION);
    int64_t run;
    assert_int_equal(db_run_create(db, "w", "{}", 7, &run, &e), 0);
    db_close(db);
    /* reopening keeps the data and does not migrate again */
    assert_int_equal(db_open(p, 0, &db, &e), 0);
    assert_int_equal(db_schema_version(db, &v, &e), 0);
    assert_int_equal(v, CUCO_DB_SCHEMA_VERSION);
    cuco_db_run r;
    assert_int_equal(db_run_find(db, "w", &r, &e), 0);
    assert_int_equal(r.id, run);
    assert_int_equal(r.seed, 7);
    assert_true(r.baseline_ms < 0);
    assert_string_equal(r.status, "running");
    db_run_free(&r);
    assert_int_equal(db_run_find(db, "other", &r, &e), CUCO_ENOTFOUND);
    cuco_err_clear(&e);
    /* a reader works while the writer is open */
    assert_int_equal(db_open(p, 1, &ro, &e), 0);
    assert_int_equal(db_run_find(ro, "w", &r, &e), 0);
    db_run_free(&r);
    assert_int_equal(db_run_create(ro, "w", "{}", 1, &run, &e), CUCO_EDB);
    cuco_err_clear(&e);
    db_close(ro);
    db_close(db);
    free(p);
}

static void test_programs_and_cache(void **state)
{
    (void)state;
    char *p = tmp_path("b.db");
    cuco_db *db;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(db_open(p, 0, &db, &e), 0);
    int64_t run, ids[3];
    assert_int_equal(db_run_create(db, "w", "{}", 1, &run, &e), 0);
    const char *hashes[3] = {"aaaa", "bbbb", "cccc"};
    for (int i = 0; i < 3; i++) {
        cuco_db_program pr;
        memset(&pr, 0, sizeof pr);
        pr.run_id = run;
        pr.island = i % 2;
        pr.code = "text";
        pr.code_hash = (char *)hashes[i];
        pr.knobs_json = i == 2 ? "{\"A\":\"1\"}" : NULL;
        pr.score = pr.time_ms = -1;
        assert_int_equal(db_program_insert(db, &pr, &ids[i], &e), 0);
    }
    assert_int_equal(db_program_update(db, ids[0], "ok", 1.0, 10.0, "{}", NULL, 0, &e), 0);
    assert_int_equal(db_program_update(db, ids[1], "ok", 2.0, 5.0, NULL, NULL, 1, &e), 0);
    cuco_db_program *top;
    size_t n;
    assert_int_equal(db_programs_top(db, run, -1, 10, &top, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(top[0].id, ids[1]);
    assert_true(top[0].score == 2.0);
    db_programs_free(top, n);
    assert_int_equal(db_programs_top(db, run, 0, 10, &top, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(top[0].id, ids[0]);
    db_programs_free(top, n);
    assert_int_equal(db_programs_pending(db, run, &top, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(top[0].id, ids[2]);
    db_programs_free(top, n);
    long ev, ca;
    assert_int_equal(db_run_evaluations(db, run, &ev, &ca, &e), 0);
    assert_int_equal(ev, 1);
    assert_int_equal(ca, 1);
    int seen;
    assert_int_equal(db_program_hash_seen(db, run, "bbbb", &seen, &e), 0);
    assert_true(seen);
    assert_int_equal(db_program_hash_seen(db, run, "dddd", &seen, &e), 0);
    assert_false(seen);
    assert_int_equal(db_program_knobs_seen(db, run, "{\"A\":\"1\"}", &seen, &e), 0);
    assert_true(seen);
    /* evaluation cache */
    int found;
    cuco_db_eval v;
    assert_int_equal(db_eval_lookup(db, "w", "aaaa", &found, &v, &e), 0);
    assert_false(found);
    cuco_db_eval s = {"ok", 12.5, "{\"x\":1}", NULL};
    assert_int_equal(db_eval_store(db, "w", "aaaa", &s, &e), 0);
    assert_int_equal(db_eval_lookup(db, "w", "aaaa", &found, &v, &e), 0);
    assert_true(found);
    assert_string_equal(v.status, "ok");
    assert_true(v.time_ms == 12.5);
    assert_string_equal(v.metrics_json, "{\"x\":1}");
    db_eval_free(&v);
    assert_int_equal(db_eval_lookup(db, "other", "aaaa", &found, &v, &e), 0);
    assert_false(found);
    /* costs */
    cuco_db_llm_call c = {run, ids[0], "m", 100, 10, 0, 0.25, 1.0, "h", "ok"};
    assert_int_equal(db_llm_call_insert(db, &c, NULL, &e), 0);
    c.cost_usd = 0.5;
    assert_int_equal(db_llm_call_insert(db, &c, NULL, &e), 0);
    double usd;
    assert_int_equal(db_run_cost(db, run, &usd, &e), 0);
    assert_true(usd > 0.7499 && usd < 0.7501);
    assert_int_equal(db_meta_insert(db, run, 3, "summary", &e), 0);
    db_close(db);
    free(p);
}

static void test_lock(void **state)
{
    (void)state;
    char *p = tmp_path("lock");
    int fd1, fd2;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(db_lock_acquire(p, &fd1, &e), 0);
    assert_int_equal(db_lock_acquire(p, &fd2, &e), CUCO_EBUSY);
    assert_non_null(strstr(cuco_err_msg(&e), "in use"));
    cuco_err_clear(&e);
    db_lock_release(fd1);
    assert_int_equal(db_lock_acquire(p, &fd2, &e), 0);
    db_lock_release(fd2);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_and_reopen),
        cmocka_unit_test(test_programs_and_cache),
        cmocka_unit_test(test_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
