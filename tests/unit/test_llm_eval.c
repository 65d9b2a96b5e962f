/* test_llm_eval.c: one LLM generation end to end without the engine: the
 * prompts built from workloads/cpu_demo's seed go to the replay server, the
 * replayed answers (tests/data/llm/evolve_cpu_demo.json: 429, good diff, 500,
 * truncated JSON, slow answers, a diff that does not apply, an edit outside
 * the block, a second good diff) become children or precise failures, the
 * good children pass the frozen-text check and the real cascade (build, run,
 * verify), and the costs add up exactly. Skips without python3 or MPI. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/llm.h"
#include "cuco/program.h"
#include "cuco/workload.h"

extern char **environ;

struct totals {
    int calls;
    double cost;
};

static int record_call(void *ctx, const cuco_llm_call_record *rec, cuco_err *e)
{
    (void)e;
    struct totals *t = ctx;
    t->calls++;
    t->cost += rec->cost_usd;
    return 0;
}

static void test_generation(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    const char *src = getenv("CUCO_SRC") ? getenv("CUCO_SRC") : CUCO_SOURCE_DIR;
    const char *tmp_root = getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp";
    char *dir = cuco_sprintf("%s/llm-eval-%d", tmp_root, (int)getpid());
    cuco_fs_remove_tree(dir, &e);
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *port_path = cuco_path_join(dir, "port");
    char *log_path = cuco_path_join(dir, "requests.jsonl");
    char *script = cuco_sprintf("%s/tests/data/llm/evolve_cpu_demo.json", src);
    char *server = cuco_sprintf("%s/tests/replay/replay_server.py", src);
    char *argv[] = {"python3", server, script, port_path, log_path, NULL};
    pid_t pid;
    assert_int_equal(posix_spawnp(&pid, "python3", NULL, NULL, argv, environ), 0);
    char *port = NULL;
    for (int i = 0; i < 200 && !port; i++) {
        if (cuco_fs_exists(port_path))
            cuco_fs_read(port_path, &port, NULL, &e);
        else
            usleep(25000);
    }
    assert_non_null(port);
    char *base = cuco_sprintf("http://127.0.0.1:%d", atoi(port));
    setenv("ANTHROPIC_API_KEY", "sk-replay-SECRET-42", 1);

    char *wl_dir = cuco_sprintf("%s/workloads/cpu_demo", src);
    cuco_workload *w = NULL;
    assert_int_equal(cuco_workload_load(wl_dir, &w, &e), 0);
    char *seed = NULL;
    assert_int_equal(cuco_workload_read_seed(w, &seed, &e), 0);

    const char *models[] = {"anthropic:replay-model", NULL};
    struct totals totals = {0, 0};
    cuco_llm_session_opts o;
    memset(&o, 0, sizeof o);
    o.models = models;
    o.temperature = -1;
    o.max_tokens = 8192;
    o.budget_usd = 0.161; /* see tests/cli/test_llm_evolve.sh for the arithmetic */
    o.prices = "replay-model=1,10";
    o.client.anthropic_base_url = base;
    o.client.timeout_s = 1;
    o.client.max_retries = 1;
    o.client.backoff_base_s = 0.05;
    o.client.max_parallel = 1; /* the server's queue order is the calls' order */
    o.record = record_call;
    o.record_ctx = &totals;
    cuco_llm_session *s = NULL;
    assert_int_equal(cuco_llm_session_new(&o, &s, &e), 0);

    cuco_buf space = CUCO_BUF_INIT;
    cuco_llm_format_space(w, &space);
    cuco_llm_prompt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.workload = w->name;
    ctx.description = w->description;
    ctx.design_space = cuco_buf_str(&space);
    ctx.parent_code = seed;
    ctx.parent_score = 1.0;

    /* six calls, one at a time like a run with one slot; failures feed the
     * next prompt */
    cuco_llm_candidate c[6];
    cuco_llm_example fails[6];
    size_t n_fail = 0;
    int rc = 0;
    for (int i = 0; i < 6; i++) {
        ctx.failures = n_fail ? fails : NULL;
        ctx.n_failures = n_fail;
        rc = cuco_llm_propose(s, CUCO_LLM_PROMPT_DIFF, &ctx, 1, NULL, NULL, &c[i], &e);
        assert_int_equal(rc, 0);
        if (!c[i].code) {
            memset(&fails[n_fail], 0, sizeof fails[n_fail]);
            fails[n_fail].status = "patch_failed";
            fails[n_fail].error = c[i].failure;
            n_fail++;
        }
    }
    assert_non_null(c[0].code);                            /* 429, then the good diff */
    assert_non_null(strstr(c[1].failure, "bad_response")); /* 500, then truncated JSON */
    assert_non_null(strstr(c[2].failure, "timeout"));      /* slow twice */
    assert_non_null(strstr(c[3].failure, "SEARCH text not found"));
    assert_non_null(strstr(c[4].failure, "outside the EVOLVE-BLOCKs"));
    assert_non_null(c[5].code);
    assert_string_equal(c[0].description, "Larger tiles keep more of b in cache.");

    /* the next call would exceed the budget: refused before it is sent */
    cuco_llm_candidate stop;
    assert_int_equal(cuco_llm_propose(s, CUCO_LLM_PROMPT_DIFF, &ctx, 1, NULL, NULL, &stop, &e),
                     CUCO_EBUDGET);
    assert_int_equal(stop.status, CUCO_LLM_BUDGET);
    cuco_llm_candidate_free(&stop);

    /* four answered calls of $0.02 each; 7 calls recorded (refusal included) */
    assert_true(fabs(totals.cost - 0.08) < 1e-12);
    assert_true(fabs(cuco_llm_session_budget(s)->spent_usd - 0.08) < 1e-12);
    assert_int_equal(totals.calls, 7);

    /* the request log: 9 requests, the last prompt shows the earlier failures */
    char *log = NULL;
    assert_int_equal(cuco_fs_read(log_path, &log, NULL, &e), 0);
    int lines = 0;
    for (char *p = log; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 9);
    assert_null(strstr(log, "must never be requested"));
    const char *last = strrchr(log, '\n');
    while (last > log && last[-1] != '\n')
        last--;
    assert_non_null(strstr(last, "Recent failed attempts"));
    assert_non_null(strstr(last, "SEARCH text not found"));
    assert_non_null(strstr(last, "cuco_compute_rows"));
    free(log);

    /* the good children keep the frozen text and pass build + run + verify */
    for (int i = 0; i < 6; i += 5) {
        assert_int_equal(cuco_program_check_frozen(seed, c[i].code, &e), 0);
        cuco_eval_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.max_level = 2;
        eo.work_dir = dir;
        cuco_eval_result r;
        memset(&r, 0, sizeof r);
        assert_int_equal(cuco_eval_program(w, c[i].code, &eo, &r, &e), 0);
        if (r.status != CUCO_EVAL_OK)
            fprintf(stderr, "child %d: %s\n%s\n", i, cuco_eval_status_name(r.status),
                    r.excerpt ? r.excerpt : "");
        assert_int_equal(r.status, CUCO_EVAL_OK);
        assert_int_equal(r.level, 2);
        cuco_eval_result_free(&r);
    }
    assert_non_null(strstr(c[0].code, "#define CUCO_BLOCK 32 "));
    assert_non_null(strstr(c[5].code, "#define CUCO_CHUNK_ROWS 64 "));

    for (int i = 0; i < 6; i++)
        cuco_llm_candidate_free(&c[i]);
    cuco_llm_session_free(s);
    cuco_buf_free(&space);
    free(seed);
    cuco_workload_free(w);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
    free(wl_dir);
    free(base);
    free(port);
    free(server);
    free(script);
    free(port_path);
    free(log_path);
    free(dir);
}

int main(void)
{
    char *py = cuco_which("python3"), *mpicc = cuco_which("mpicc"), *mpirun = cuco_which("mpirun");
    int missing = !py || !mpicc || !mpirun;
    free(py);
    free(mpicc);
    free(mpirun);
    if (missing) {
        fprintf(stderr, "test_llm_eval: python3, mpicc or mpirun not found, skipping\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_generation)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
