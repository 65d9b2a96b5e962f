/* test_novelty_judge.c: the novelty judge's answer format (first line NOVEL
 * or DUPLICATE alone, then the reason; anything else refused), and the
 * engine's use of a judge: asked only when novelty_judge is on and the
 * similarity lies in [threshold - band, threshold); DUPLICATE stores the
 * child as rejected_novelty with "judge: reason" and does not evaluate it,
 * NOVEL evaluates it, a budget refusal evaluates it and stops the run; a
 * mutator whose service failed (CUCO_ENET) gives an infra_error child that
 * is not counted as an evaluation; the LLM calls made for a child are
 * linked to it (llm_calls.program_id); a version-1 database (no purpose or
 * error column) is migrated when opened for writing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/config.h"
#include "cuco/evolve.h"
#include "cuco/fs.h"
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"

static void test_parse(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    int novel = -1;
    char *why = NULL;
    assert_int_equal(cuco_llm_judge_parse("NOVEL\nA new overlap scheme.\n", &novel, &why, &e), 0);
    assert_int_equal(novel, 1);
    assert_string_equal(why, "A new overlap scheme.");
    free(why);
    assert_int_equal(
        cuco_llm_judge_parse("\n  **DUPLICATE**\n\n  Only a rename.  \nmore", &novel, &why, &e), 0);
    assert_int_equal(novel, 0);
    assert_string_equal(why, "Only a rename.");
    free(why);
    assert_int_equal(cuco_llm_judge_parse("DUPLICATE.", &novel, &why, &e), 0);
    assert_int_equal(novel, 0);
    assert_string_equal(why, "");
    free(why);
    /* strict: the verdict alone on its line, in capitals */
    const char *bad[] = {
        "",          "  \n \n", "NOVEL because it pipelines", "Novel\nx", "Maybe it is new.\nNOVEL",
        "NOVELTY\nx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        assert_int_equal(cuco_llm_judge_parse(bad[i], &novel, &why, &e), CUCO_EINVAL);
        assert_null(why);
        cuco_err_clear(&e);
    }
    assert_int_equal(cuco_llm_judge_parse("Hard to say", &novel, &why, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "Hard to say"));
    cuco_err_clear(&e);
}

static const char seed[] = "#include <stdio.h>\n"
                           "// EVOLVE-BLOCK-START\n"
                           "static int work(int x)\n{\n"
                           "    int acc = 0;\n"
                           "    for (int i = 0; i < x; i++)\n"
                           "        acc += i * 3 + 1;\n"
                           "    return acc;\n}\n"
                           "// EVOLVE-BLOCK-END\n"
                           "int main(void) { printf(\"%d\\n\", work(10)); return 0; }\n";

/* A mutator that adds one statement per call to the block, records one LLM
 * call per proposal in the database (as an LLM mutator would), and fails
 * with CUCO_ENET on the calls listed in net_fail. */
typedef struct scripted {
    int calls;
    int net_fail; /* 1-based call that fails as a lost connection; 0: none */
} scripted;

static int scripted_propose(cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out,
                            cuco_err *e)
{
    scripted *s = m->state;
    memset(out, 0, sizeof *out);
    s->calls++;
    cuco_db_llm_call call;
    memset(&call, 0, sizeof call);
    call.run_id = c->run_id;
    call.model = "fake";
    call.cost_usd = 0.01;
    call.status = s->calls == s->net_fail ? "timeout" : "ok";
    int64_t id;
    int rc = db_llm_call_insert(c->db, &call, &id, e);
    if (rc == 0)
        rc = db_llm_call_describe(c->db, id, "diff", NULL, e);
    if (rc)
        return rc;
    if (s->calls == s->net_fail)
        return cuco_err_set(e, CUCO_ENET, "fake: LLM call failed: timeout");
    const char *at = strstr(seed, "    return acc;");
    out->text = cuco_sprintf("%.*s    acc ^= %d;\n%s", (int)(at - seed), seed, s->calls * 7, at);
    out->patch_type = cuco_strdup("diff");
    out->description = cuco_strdup("one more statement");
    return 0;
}

static int fake_eval(void *ctx, int slot, const char *text, cuco_eval_outcome *out, cuco_err *e)
{
    (void)ctx;
    (void)slot;
    (void)e;
    memset(out, 0, sizeof *out);
    out->status = CUCO_EVAL_OK;
    out->time_ms = 10.0 - (double)(strlen(text) % 7) * 0.1;
    return 0;
}

/* A judge answering from a script: 'D' duplicate, 'N' novel, 'B' budget
 * refusal; it records its own call like the LLM judge. */
typedef struct judge {
    const char *answers;
    int calls;
    double sims[16];
    cuco_db *db;
    int64_t run_id;
} judge;

static int fake_judge(void *ctx, int64_t run_id, const char *candidate, const char *neighbour,
                      double similarity, int *novel, cuco_buf *reason, cuco_err *e)
{
    judge *j = ctx;
    assert_non_null(candidate);
    assert_non_null(neighbour);
    assert_true(strcmp(candidate, neighbour) != 0);
    char a = j->answers[j->calls];
    if (j->calls < 16)
        j->sims[j->calls] = similarity;
    j->calls++;
    cuco_db_llm_call call;
    memset(&call, 0, sizeof call);
    call.run_id = run_id;
    call.model = "fake";
    call.cost_usd = a == 'B' ? 0 : 0.001;
    call.status = a == 'B' ? "budget" : "ok";
    int64_t id;
    int rc = db_llm_call_insert(j->db, &call, &id, e);
    if (rc == 0)
        rc = db_llm_call_describe(j->db, id, "novelty", NULL, e);
    if (rc)
        return rc;
    if (a == 'B')
        return cuco_err_set(e, CUCO_EBUDGET, "budget refused the judge");
    *novel = a != 'D';
    cuco_buf_printf(reason, "scripted %c", a);
    return 0;
}

static char *tmp_db(const char *name)
{
    const char *t = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/test_novelty_judge.%ld", t ? t : "/tmp", (long)getpid());
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *p = cuco_path_join(dir, name);
    free(dir);
    unlink(p);
    return p;
}

typedef struct outcome {
    const char *path; /* the database */
    cuco_evolve_result r;
    int mutator_calls;
    int judge_calls;
    double sims[16];
} outcome;

/* One run of `generations` generations (one child each) with the judge
 * settings given; checks run under the open database in check(). */
static void run(const char *name, int judge_on, double threshold, double band, const char *answers,
                int net_fail, int generations, outcome *res,
                void (*check)(cuco_db *db, const outcome *res))
{
    char *p = tmp_db(name);
    cuco_evolve_config c;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_config_defaults(&c, &e), 0);
    assert_int_equal(cuco_config_set_mutator(&c, "scripted", &e), 0);
    c.islands = 1;
    c.children_per_island = 1;
    c.meta_interval = 0;
    c.budget_generations = generations;
    c.budget_evaluations = 0;
    c.novelty_threshold = threshold;
    c.novelty_judge = judge_on;
    c.novelty_judge_band = band;
    scripted s = {0, net_fail};
    cuco_mutator m = {"scripted", &s, scripted_propose, NULL};
    cuco_mutator *ms[1] = {&m};
    cuco_db *db;
    assert_int_equal(db_open(p, 0, &db, &e), 0);
    judge j;
    memset(&j, 0, sizeof j);
    j.answers = answers;
    j.db = db;
    cuco_evolve_opts o;
    memset(&o, 0, sizeof o);
    o.cfg = &c;
    o.db = db;
    o.workload_name = "fake";
    o.seed_text = seed;
    o.evaluate = fake_eval;
    o.mutators = ms;
    o.judge_fn = fake_judge;
    o.judge_ctx = &j;
    int rc = cuco_evolve_run(&o, &res->r, &e);
    if (rc < 0)
        fprintf(stderr, "evolve: %s\n", cuco_err_msg(&e));
    assert_int_equal(rc, 0);
    res->path = p;
    res->mutator_calls = s.calls;
    res->judge_calls = j.calls;
    memcpy(res->sims, j.sims, sizeof res->sims);
    check(db, res);
    res->path = NULL;
    db_close(db);
    cuco_config_free(&c);
    free(p);
}

/* The integer a query returns (the test's own read-only connection). */
static long sql_long(const char *path, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long v = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

static long count_status(cuco_db *db, int64_t run_id, const char *status)
{
    cuco_db_program *ps;
    size_t n;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(db_programs_list(db, run_id, status, &ps, &n, &e), 0);
    long k = 0;
    for (size_t i = 0; i < n; i++)
        k += ps[i].generation > 0;
    db_programs_free(ps, n);
    return k;
}

static void check_judged(cuco_db *db, const outcome *res)
{
    cuco_err e = CUCO_ERR_INIT;
    /* D, N, B: the third child is evaluated, then the run stops */
    assert_int_equal(res->mutator_calls, 3);
    assert_int_equal(res->judge_calls, 3);
    for (int i = 0; i < 3; i++)
        assert_true(res->sims[i] < 0.999 && res->sims[i] > 0);
    assert_non_null(strstr(res->r.stop_reason, "budget"));
    cuco_db_program *ps;
    size_t n;
    assert_int_equal(db_programs_list(db, res->r.run_id, "rejected_novelty", &ps, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ps[0].error, "judge: scripted D");
    assert_true(ps[0].time_ms < 0);
    assert_int_equal(ps[0].generation, 1);
    int64_t dup = ps[0].id;
    db_programs_free(ps, n);
    assert_int_equal(count_status(db, res->r.run_id, "ok"), 2);
    long evals, cached;
    assert_int_equal(db_run_evaluations(db, res->r.run_id, &evals, &cached, &e), 0);
    assert_int_equal(evals, 3); /* baseline + the two judged novel */
    /* every call is linked to its child: a mutation and a judge call each,
     * the judge's refused call too */
    assert_int_equal(sql_long(res->path, "SELECT COUNT(*) FROM llm_calls"), 6);
    assert_int_equal(sql_long(res->path, "SELECT COUNT(*) FROM llm_calls c WHERE NOT EXISTS"
                                         " (SELECT 1 FROM programs p WHERE p.id = c.program_id"
                                         " AND p.generation > 0)"),
                     0);
    assert_int_equal(sql_long(res->path, "SELECT COUNT(*) FROM (SELECT program_id FROM llm_calls"
                                         " GROUP BY program_id HAVING SUM(purpose = 'diff') = 1"
                                         " AND SUM(purpose = 'novelty') = 1)"),
                     3);
    char *q = cuco_sprintf("SELECT COUNT(*) FROM llm_calls WHERE program_id = %lld"
                           " AND purpose = 'novelty'",
                           (long long)dup);
    assert_int_equal(sql_long(res->path, q), 1);
    free(q);
}

static void test_judge_band(void **state)
{
    (void)state;
    outcome res;
    run("judged.db", 1, 0.999, 0.999, "DNB", 0, 10, &res, check_judged);
}

static void check_not_asked(cuco_db *db, const outcome *res)
{
    assert_int_equal(res->judge_calls, 0);
    assert_int_equal(res->mutator_calls, 3);
    assert_int_equal(count_status(db, res->r.run_id, "ok"), 3);
    assert_int_equal(count_status(db, res->r.run_id, "rejected_novelty"), 0);
}

static void check_all_rejected(cuco_db *db, const outcome *res)
{
    /* at or above the threshold: rejected without asking */
    assert_int_equal(res->judge_calls, 0);
    assert_int_equal(count_status(db, res->r.run_id, "rejected_novelty"), 3);
}

static void test_judge_not_asked(void **state)
{
    (void)state;
    outcome res;
    /* judge off */
    run("off.db", 0, 0.999, 0.999, "DDD", 0, 3, &res, check_not_asked);
    /* on, but the band is empty */
    run("noband.db", 1, 0.999, 0.0, "DDD", 0, 3, &res, check_not_asked);
    /* on, but the similarities are below the band */
    run("below.db", 1, 0.999, 0.01, "DDD", 0, 3, &res, check_not_asked);
    /* on, and every child is above the threshold */
    run("above.db", 1, 0.0, 0.5, "DDD", 0, 3, &res, check_all_rejected);
}

static void check_infra(cuco_db *db, const outcome *res)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_db_program *ps;
    size_t n;
    assert_int_equal(db_programs_list(db, res->r.run_id, "infra_error", &ps, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_null(ps[0].code);
    assert_non_null(strstr(ps[0].error, "LLM call failed: timeout"));
    assert_int_equal(ps[0].generation, 2);
    db_programs_free(ps, n);
    assert_int_equal(count_status(db, res->r.run_id, "patch_failed"), 0);
    long evals, cached;
    assert_int_equal(db_run_evaluations(db, res->r.run_id, &evals, &cached, &e), 0);
    assert_int_equal(evals, 3); /* baseline + generations 1 and 3, not the failed call */
    /* every call (the failed one too) belongs to the child made from it */
    assert_int_equal(sql_long(res->path, "SELECT COUNT(*) FROM llm_calls c JOIN programs p"
                                         " ON p.id = c.program_id WHERE p.generation > 0"),
                     3);
    assert_int_equal(sql_long(res->path, "SELECT COUNT(*) FROM llm_calls c JOIN programs p"
                                         " ON p.id = c.program_id WHERE p.status = 'infra_error'"
                                         " AND c.status = 'timeout'"),
                     1);
}

static void test_infra_error(void **state)
{
    (void)state;
    outcome res;
    run("infra.db", 0, 0.999, 0.05, "", 2, 3, &res, check_infra);
}

/* A database written by schema version 1 (tests/data/web/run.sql) gains
 * llm_calls.purpose and .error; its calls and programs are kept. */
static void test_migration_v1(void **state)
{
    (void)state;
    const char *data = getenv("CUCO_TEST_DATA");
    if (!data)
        skip();
    char *sql_path = cuco_path_join(data, "web/run.sql"), *sql = NULL;
    size_t len;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(sql_path, &sql, &len, &e), 0);
    char *p = tmp_db("v1.db");
    sqlite3 *h;
    assert_int_equal(sqlite3_open(p, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    long calls = sql_long(p, "SELECT COUNT(*) FROM llm_calls");
    assert_true(calls > 0);
    assert_int_equal(sql_long(p, "SELECT max(version) FROM schema_version"), 1);

    cuco_db *db;
    assert_int_equal(db_open(p, 0, &db, &e), 0);
    int v = 0;
    assert_int_equal(db_schema_version(db, &v, &e), 0);
    assert_int_equal(v, CUCO_DB_SCHEMA_VERSION);
    assert_true(v >= 2);
    int64_t last = 0;
    assert_int_equal(db_llm_call_last_id(db, 1, &last, &e), 0);
    assert_true(last > 0);
    assert_int_equal(db_llm_call_describe(db, last, "novelty", "why", &e), 0);
    db_close(db);
    assert_int_equal(sql_long(p, "SELECT COUNT(*) FROM llm_calls"), calls);
    char *q = cuco_sprintf("SELECT COUNT(*) FROM llm_calls WHERE id = %lld AND purpose = 'novelty'"
                           " AND error = 'why'",
                           (long long)last);
    assert_int_equal(sql_long(p, q), 1);
    assert_int_equal(sql_long(p, "SELECT COUNT(*) FROM llm_calls WHERE purpose IS NULL"),
                     calls - 1);
    free(q);
    free(p);
    free(sql);
    free(sql_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),           cmocka_unit_test(test_judge_band),
        cmocka_unit_test(test_judge_not_asked), cmocka_unit_test(test_infra_error),
        cmocka_unit_test(test_migration_v1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
