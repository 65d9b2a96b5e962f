/* test_llm_client.c: the LLM clients against the replay server
 * (tests/replay/replay_server.py) on 127.0.0.1: what goes over the wire
 * (headers, bodies, the key), retries on 429 with retry-after and on 500,
 * timeouts, truncated JSON, 401 with the server's message, several requests
 * in flight at once, costs, the budget refusing the call that could go
 * over it, and replies whose usage cannot be true (negative, past
 * max_tokens, past the prompt, past the budget) refused as bad_response.
 * Skips when python3 is missing. */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cuco/fs.h"
#include "cuco/llm.h"
#include "cuco/log.h"

extern char **environ;

#define TEST_KEY "sk-test-SECRET-1234567890"

struct replay {
    pid_t pid;
    char *dir;
    char *log_path;
    char *base_url;
};

static char *tmp_dir(const char *name)
{
    const char *root = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/%s-%d", root ? root : "/tmp", name, (int)getpid());
    cuco_err e = CUCO_ERR_INIT;
    cuco_fs_remove_tree(dir, &e);
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    return dir;
}

/* Starts the server on a script; returns 0, or 77 when it cannot run here. */
static void replay_start(struct replay *r, const char *name, const char *script)
{
    cuco_err e = CUCO_ERR_INIT;
    memset(r, 0, sizeof *r);
    r->dir = tmp_dir(name);
    char *script_path = cuco_path_join(r->dir, "script.json");
    char *port_path = cuco_path_join(r->dir, "port");
    r->log_path = cuco_path_join(r->dir, "requests.jsonl");
    assert_int_equal(cuco_fs_write(script_path, script, strlen(script), &e), 0);
    const char *src = getenv("CUCO_SRC");
    char *server = cuco_sprintf("%s/tests/replay/replay_server.py", src ? src : CUCO_SOURCE_DIR);
    char *argv[] = {"python3", server, script_path, port_path, r->log_path, NULL};
    assert_int_equal(posix_spawnp(&r->pid, "python3", NULL, NULL, argv, environ), 0);
    char *port = NULL;
    for (int i = 0; i < 200 && !port; i++) {
        if (cuco_fs_exists(port_path))
            cuco_fs_read(port_path, &port, NULL, &e);
        else
            usleep(25000);
    }
    assert_non_null(port);
    r->base_url = cuco_sprintf("http://127.0.0.1:%d", atoi(port));
    free(port);
    free(server);
    free(script_path);
    free(port_path);
    cuco_err_clear(&e);
}

static void replay_stop(struct replay *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        waitpid(r->pid, NULL, 0);
    }
    free(r->dir);
    free(r->log_path);
    free(r->base_url);
}

/* The request log as a JSON array of records. */
static json_t *replay_log(const struct replay *r)
{
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(r->log_path, &text, NULL, &e), 0);
    json_t *all = json_array();
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        json_array_append_new(all, json_loads(line, 0, NULL));
    free(text);
    return all;
}

static cuco_llm_client *make_client(const struct replay *r, cuco_llm_prices *prices, double timeout,
                                    int retries)
{
    cuco_llm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.anthropic_base_url = r->base_url;
    cfg.openai_base_url = r->base_url;
    cfg.timeout_s = timeout;
    cfg.max_retries = retries;
    cfg.backoff_base_s = 0.05;
    cfg.backoff_max_s = 0.2;
    cfg.seed = 7;
    cuco_llm_client *c = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_llm_client_new(&cfg, prices, &c, &e), 0);
    return c;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int setup(void **state)
{
    (void)state;
    setenv("ANTHROPIC_API_KEY", TEST_KEY, 1);
    setenv("OPENAI_API_KEY", TEST_KEY "-oai", 1);
    return 0;
}

static void test_anthropic_wire_and_cost(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-anthropic",
                 "{\"anthropic\": [{\"text\": \"hello back\", \"usage\": {\"input\": 1000, "
                 "\"output\": 200, \"cached\": 5000}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    cuco_llm_client *c = make_client(&r, &prices, 10, 2);
    cuco_llm_request req = {
        CUCO_LLM_ANTHROPIC, "claude-sonnet-4-5", "SYSTEM TEXT", "USER TEXT", 321, -1};
    cuco_llm_response resp;
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_OK);
    assert_int_equal(resp.http_status, 200);
    assert_string_equal(resp.text, "hello back");
    assert_int_equal(resp.input_tokens, 1000);
    assert_int_equal(resp.cached_tokens, 5000);
    assert_int_equal(resp.output_tokens, 200);
    assert_int_equal(resp.attempts, 1);
    /* 1000 x $3 + 5000 x $0.30 + 200 x $15, per million */
    assert_true(fabs(resp.cost_usd - (3000.0 + 1500.0 + 3000.0) / 1e6) < 1e-12);

    json_t *log = replay_log(&r);
    assert_int_equal(json_array_size(log), 1);
    json_t *rec = json_array_get(log, 0);
    assert_string_equal(json_string_value(json_object_get(rec, "path")), "/v1/messages");
    json_t *h = json_object_get(rec, "headers");
    assert_string_equal(json_string_value(json_object_get(h, "x-api-key")), TEST_KEY);
    assert_string_equal(json_string_value(json_object_get(h, "anthropic-version")), "2023-06-01");
    assert_null(json_object_get(h, "authorization"));
    json_t *body = json_object_get(rec, "body");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(body, "system"), 0), "text")),
                        "SYSTEM TEXT");
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 321);
    json_decref(log);
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_openai_wire(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-openai",
                 "{\"openai\": [{\"text\": \"ok\", \"usage\": {\"input\": 100, \"output\": 10, "
                 "\"cached\": 900}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    cuco_llm_client *c = make_client(&r, &prices, 10, 2);
    cuco_llm_request req = {CUCO_LLM_OPENAI, "gpt-4.1", "SYS", "USR", 50, 0.2};
    cuco_llm_response resp;
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_OK);
    assert_int_equal(resp.input_tokens, 100);
    assert_int_equal(resp.cached_tokens, 900);
    /* 100 x $2 + 900 x $0.50 + 10 x $8 */
    assert_true(fabs(resp.cost_usd - (200.0 + 450.0 + 80.0) / 1e6) < 1e-12);
    json_t *log = replay_log(&r);
    json_t *rec = json_array_get(log, 0);
    assert_string_equal(json_string_value(json_object_get(rec, "path")), "/v1/chat/completions");
    json_t *h = json_object_get(rec, "headers");
    assert_string_equal(json_string_value(json_object_get(h, "authorization")),
                        "Bearer " TEST_KEY "-oai");
    json_t *msgs = json_object_get(json_object_get(rec, "body"), "messages");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "role")),
                        "system");
    json_decref(log);
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_retries(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-retry",
                 "{\"anthropic\": ["
                 "{\"status\": 429, \"headers\": {\"retry-after\": \"1\"}, \"body\": "
                 "{\"error\": {\"message\": \"rate limited\"}}},"
                 "{\"status\": 500, \"body\": \"oops\"},"
                 "{\"status\": 529, \"body\": {\"error\": {\"message\": \"overloaded\"}}},"
                 "{\"text\": \"finally\", \"usage\": {\"input\": 1, \"output\": 1}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    cuco_llm_client *c = make_client(&r, &prices, 10, 3);
    cuco_llm_request req = {CUCO_LLM_ANTHROPIC, "claude-haiku-4-5", NULL, "x", 10, -1};
    cuco_llm_response resp;
    double t0 = now_s();
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    double took = now_s() - t0;
    assert_int_equal(resp.status, CUCO_LLM_OK);
    assert_string_equal(resp.text, "finally");
    assert_int_equal(resp.attempts, 4);
    /* retry-after 1 s is honoured although backoff_max is 0.2 s */
    assert_true(took >= 1.0);
    assert_true(took < 5.0);
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);

    /* retries used up: the last server message is reported */
    replay_start(
        &r, "llm-retry2",
        "{\"anthropic\": [{\"status\": 503, \"body\": {\"error\": {\"message\": \"down 1\"}}},"
        "{\"status\": 503, \"body\": {\"error\": {\"message\": \"down 2\"}}}]}");
    cuco_llm_prices_init(&prices, &e);
    c = make_client(&r, &prices, 10, 1);
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_RETRIES_EXHAUSTED);
    assert_int_equal(resp.attempts, 2);
    assert_non_null(strstr(resp.error, "down 2"));
    assert_true(resp.cost_usd == 0);
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_errors_not_retried(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-errors",
                 "{\"anthropic\": [{\"status\": 401, \"body\": {\"type\": \"error\", \"error\": "
                 "{\"type\": \"authentication_error\", \"message\": \"invalid x-api-key\"}}},"
                 "{\"body\": \"{\\\"content\\\": [{\\\"type\\\": \\\"te\"},"
                 "{\"delay_s\": 2, \"text\": \"too late\"},"
                 "{\"delay_s\": 2, \"text\": \"too late again\"}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    cuco_llm_client *c = make_client(&r, &prices, 0.5, 1);
    cuco_llm_request req = {CUCO_LLM_ANTHROPIC, "claude-haiku-4-5", NULL, "x", 10, -1};
    cuco_llm_response resp;

    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_HTTP_ERROR);
    assert_int_equal(resp.http_status, 401);
    assert_int_equal(resp.attempts, 1);
    assert_non_null(strstr(resp.error, "invalid x-api-key"));
    assert_null(strstr(resp.error, TEST_KEY));
    cuco_llm_response_free(&resp);

    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_BAD_RESPONSE);
    assert_non_null(strstr(resp.error, "not JSON"));
    assert_null(resp.text);
    cuco_llm_response_free(&resp);

    double t0 = now_s();
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_TIMEOUT);
    assert_int_equal(resp.attempts, 2);
    assert_true(now_s() - t0 < 1.9); /* gave up on both before the server answered */
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_parallel_and_budget(void **state)
{
    (void)state;
    struct replay r;
    /* four answers that each take 0.6 s; usage 1000 in, 100 out */
    replay_start(
        &r, "llm-parallel",
        "{\"openai\": ["
        "{\"delay_s\": 0.6, \"text\": \"a\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"delay_s\": 0.6, \"text\": \"b\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"delay_s\": 0.6, \"text\": \"c\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"delay_s\": 0.6, \"text\": \"d\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"text\": \"e\", \"usage\": {\"input\": 1000, \"output\": 100}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    assert_int_equal(cuco_llm_prices_parse(&prices, "local-coder=1,10", &e), 0);
    cuco_llm_client *c = make_client(&r, &prices, 10, 1);
    cuco_llm_request reqs[4];
    for (int i = 0; i < 4; i++) {
        cuco_llm_request q = {CUCO_LLM_OPENAI, "local-coder", NULL, "p", 1000, -1};
        reqs[i] = q;
    }
    cuco_llm_response resps[4];
    cuco_llm_budget budget;
    cuco_llm_budget_init(&budget, 1.0);
    double t0 = now_s();
    assert_int_equal(cuco_llm_batch_run(c, reqs, resps, 4, &budget, &e), 0);
    double took = now_s() - t0;
    assert_true(took < 2.0); /* in flight together, not 4 x 0.6 s = 2.4 s */
    double sum = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(resps[i].status, CUCO_LLM_OK);
        sum += resps[i].cost_usd;
        assert_true(fabs(resps[i].cost_usd - (1000.0 * 1 + 100.0 * 10) / 1e6) < 1e-12);
        cuco_llm_response_free(&resps[i]);
    }
    assert_true(fabs(budget.spent_usd - sum) < 1e-12);
    assert_true(budget.reserved_usd == 0);
    assert_int_equal(budget.calls, 4);

    /* The estimate of one call is (17 tokens in x $1 + 1000 out x $10) / 1e6
     * = 0.010017. With 0.008 spent and a limit of 0.02, one more fits
     * (0.018017) but a second in the same batch would not. */
    cuco_llm_budget_init(&budget, 0.02);
    budget.spent_usd = 0.008;
    assert_int_equal(cuco_llm_batch_run(c, reqs, resps, 2, &budget, &e), 0);
    assert_int_equal(resps[0].status, CUCO_LLM_OK);
    assert_int_equal(resps[1].status, CUCO_LLM_BUDGET);
    assert_non_null(strstr(resps[1].error, "budget"));
    assert_int_equal(resps[1].attempts, 0);
    assert_int_equal(budget.refused, 1);
    assert_true(fabs(budget.spent_usd - 0.010) < 1e-12);
    cuco_llm_response_free(&resps[0]);
    cuco_llm_response_free(&resps[1]);

    /* a model without a price cannot run under a budget */
    cuco_llm_request unpriced = {CUCO_LLM_OPENAI, "mystery", NULL, "p", 10, -1};
    assert_int_equal(cuco_llm_batch_run(c, &unpriced, resps, 1, &budget, &e), 0);
    assert_int_equal(resps[0].status, CUCO_LLM_BUDGET);
    assert_non_null(strstr(resps[0].error, "no price"));
    cuco_llm_response_free(&resps[0]);

    json_t *log = replay_log(&r);
    assert_int_equal(json_array_size(log), 5); /* refused calls never reached the server */
    json_decref(log);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

/* One request of max_tokens 1000 and a 1-byte prompt at $1/$10 per Mtok,
 * answered by the replay server's next reply. */
static void run_one(cuco_llm_client *c, cuco_llm_api api, cuco_llm_budget *budget,
                    cuco_llm_response *resp)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_request q = {api, "local-coder", NULL, "p", 1000, -1};
    assert_int_equal(cuco_llm_batch_run(c, &q, resp, 1, budget, &e), 0);
    cuco_err_clear(&e);
}

static void expect_refused(cuco_llm_client *c, cuco_llm_api api, cuco_llm_budget *budget,
                           const char *why)
{
    cuco_llm_response resp;
    double spent = budget->spent_usd;
    run_one(c, api, budget, &resp);
    if (resp.status != CUCO_LLM_BAD_RESPONSE || !resp.error || !strstr(resp.error, why))
        fprintf(stderr, "status %d error '%s', want bad_response '%s'\n", resp.status,
                resp.error ? resp.error : "", why);
    assert_int_equal(resp.status, CUCO_LLM_BAD_RESPONSE);
    assert_non_null(strstr(resp.error, why));
    assert_null(resp.text);
    assert_true(resp.input_tokens == 0 && resp.output_tokens == 0 && resp.cached_tokens == 0);
    /* booked at the estimate it was admitted at: (17 x $1 + 1000 x $10) / 1e6 */
    assert_true(fabs(resp.cost_usd - 0.010017) < 1e-12);
    assert_true(fabs(budget->spent_usd - spent - 0.010017) < 1e-12);
    assert_true(budget->reserved_usd == 0);
    cuco_llm_response_free(&resp);
}

/* Usage a reply cannot have (negative counts, more output than max_tokens
 * allows, more input than the prompt holds) is a bad_response, booked at the
 * request's estimate, and a reply that claims more than is left of the
 * budget is refused too: the spend never goes down and never passes the
 * limit. */
static void test_usage_bounds(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-usage",
                 "{\"openai\": ["
                 "{\"text\": \"a\", \"usage\": {\"input\": -5, \"output\": 10}},"
                 "{\"text\": \"b\", \"usage\": {\"input\": 10, \"output\": -1000000}},"
                 "{\"text\": \"c\", \"usage\": {\"input\": 10, \"output\": 50000000}},"
                 "{\"text\": \"d\", \"usage\": {\"input\": 2000000, \"output\": 10}},"
                 "{\"text\": \"e\", \"usage\": {\"input\": 1000, \"output\": 1164}},"
                 "{\"text\": \"f\", \"usage\": {\"input\": 900000, \"output\": 10}},"
                 "{\"text\": \"g\", \"usage\": {\"input\": 10, \"output\": 1165}}],"
                 " \"anthropic\": ["
                 "{\"text\": \"h\", \"usage\": {\"input\": 10, \"output\": 5, \"cached\": -3}},"
                 "{\"text\": \"i\", \"usage\": {\"input\": 9223372036854775807, "
                 "\"output\": 5, \"cached\": 9223372036854775807}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);
    assert_int_equal(cuco_llm_prices_parse(&prices, "local-coder=1,10", &e), 0);
    cuco_llm_client *c = make_client(&r, &prices, 10, 0);
    cuco_llm_budget budget;
    cuco_llm_budget_init(&budget, 1.0);
    expect_refused(c, CUCO_LLM_OPENAI, &budget, "negative token count");
    expect_refused(c, CUCO_LLM_OPENAI, &budget, "negative token count");
    expect_refused(c, CUCO_LLM_OPENAI, &budget, "50000000 output tokens");
    expect_refused(c, CUCO_LLM_OPENAI, &budget, "2000000 input tokens");
    /* 1000 x 1.1 + 64 = 1164 output tokens are still believed */
    cuco_llm_response resp;
    run_one(c, CUCO_LLM_OPENAI, &budget, &resp);
    assert_int_equal(resp.status, CUCO_LLM_OK);
    assert_int_equal(resp.output_tokens, 1164);
    assert_true(fabs(resp.cost_usd - (1000.0 + 11640.0) / 1e6) < 1e-12);
    cuco_llm_response_free(&resp);
    /* $0.9001 is within what the request could cost but not within the
     * $0.02 left of a budget */
    cuco_llm_budget small;
    cuco_llm_budget_init(&small, 0.03);
    small.spent_usd = 0.01;
    expect_refused(c, CUCO_LLM_OPENAI, &small, "left of the $0.030000 budget");
    assert_true(small.spent_usd <= small.limit_usd);
    expect_refused(c, CUCO_LLM_OPENAI, &budget, "1165 output tokens");
    expect_refused(c, CUCO_LLM_ANTHROPIC, &budget, "negative token count");
    expect_refused(c, CUCO_LLM_ANTHROPIC, &budget, "input tokens");
    assert_true(budget.spent_usd > 0 && budget.spent_usd <= budget.limit_usd);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_key_handling(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-key",
                 "{\"anthropic\": [{\"status\": 500, \"body\": \"x\"}, {\"text\": \"t\", "
                 "\"usage\": {\"input\": 1, \"output\": 1}}], "
                 "\"openai\": [{\"text\": \"local\", \"usage\": {\"input\": 1, \"output\": 1}}]}");
    cuco_llm_prices prices;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices_init(&prices, &e);

    /* debug logging on, stderr captured: the key never shows up */
    char *err_path = cuco_path_join(r.dir, "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(err_path, "w");
    dup2(fileno(f), 2);
    cuco_log_set_level(CUCO_LOG_DEBUG);
    cuco_llm_client *c = make_client(&r, &prices, 10, 2);
    cuco_llm_request req = {CUCO_LLM_ANTHROPIC, "claude-haiku-4-5", NULL, "x", 10, -1};
    cuco_llm_response resp;
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    cuco_log_set_level(CUCO_LOG_WARN);
    assert_int_equal(resp.status, CUCO_LLM_OK);
    cuco_llm_response_free(&resp);
    char *logged = NULL;
    assert_int_equal(cuco_fs_read(err_path, &logged, NULL, &e), 0);
    assert_non_null(strstr(logged, "POST")); /* debug lines were written */
    assert_non_null(strstr(logged, "retrying"));
    assert_null(strstr(logged, TEST_KEY));
    free(logged);
    free(err_path);

    /* no key: Anthropic refuses to send; an OpenAI-compatible local server
     * (not api.openai.com) is called without one */
    unsetenv("ANTHROPIC_API_KEY");
    unsetenv("OPENAI_API_KEY");
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_NO_KEY);
    assert_non_null(strstr(resp.error, "ANTHROPIC_API_KEY"));
    cuco_llm_response_free(&resp);
    cuco_llm_request local = {CUCO_LLM_OPENAI, "llama3", NULL, "x", 10, -1};
    assert_int_equal(cuco_llm_batch_run(c, &local, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_OK);
    assert_true(resp.cost_usd == 0); /* no price: free */
    cuco_llm_response_free(&resp);
    json_t *log = replay_log(&r);
    json_t *h = json_object_get(json_array_get(log, 2), "headers");
    assert_null(json_object_get(h, "authorization"));
    json_decref(log);
    setenv("ANTHROPIC_API_KEY", TEST_KEY, 1);
    setenv("OPENAI_API_KEY", TEST_KEY "-oai", 1);
    cuco_llm_client_free(c);
    cuco_llm_prices_free(&prices);
    replay_stop(&r);
}

static void test_connection_refused(void **state)
{
    (void)state;
    cuco_llm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.anthropic_base_url = "http://127.0.0.1:1/";
    cfg.max_retries = 2;
    cfg.backoff_base_s = 0.01;
    cuco_llm_client *c = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_llm_client_new(&cfg, NULL, &c, &e), 0);
    assert_string_equal(cuco_llm_client_base_url(c, CUCO_LLM_ANTHROPIC), "http://127.0.0.1:1");
    cuco_llm_request req = {CUCO_LLM_ANTHROPIC, "claude-x", NULL, "x", 10, -1};
    cuco_llm_response resp;
    assert_int_equal(cuco_llm_batch_run(c, &req, &resp, 1, NULL, &e), 0);
    assert_int_equal(resp.status, CUCO_LLM_RETRIES_EXHAUSTED);
    assert_int_equal(resp.attempts, 3);
    assert_non_null(strstr(resp.error, "connection failed"));
    cuco_llm_response_free(&resp);
    cuco_llm_client_free(c);
}

struct recorded {
    int n;
    double cost;
    char statuses[256];
    char models[512];
};

static int record_call(void *ctx, const cuco_llm_call_record *rec, cuco_err *e)
{
    (void)e;
    struct recorded *r = ctx;
    r->n++;
    r->cost += rec->cost_usd;
    strncat(r->statuses, rec->status, sizeof r->statuses - strlen(r->statuses) - 2);
    strcat(r->statuses, " ");
    strncat(r->models, rec->model, sizeof r->models - strlen(r->models) - 2);
    strcat(r->models, " ");
    assert_int_equal(strlen(rec->prompt_hash), 16);
    assert_string_equal(rec->purpose, "diff");
    return 0;
}

static void test_session(void **state)
{
    (void)state;
    struct replay r;
    replay_start(
        &r, "llm-session",
        "{\"anthropic\": [{\"text\": \"A1\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"text\": \"A2\", \"usage\": {\"input\": 1000, \"output\": 100}},"
        "{\"status\": 400, \"body\": {\"error\": {\"message\": \"context too long\"}}}],"
        " \"openai\": [{\"text\": \"O1\", \"usage\": {\"input\": 2000, \"output\": 50}}]}");
    const char *models[] = {"claude-haiku-4-5", "openai:local-coder", NULL};
    struct recorded rec;
    memset(&rec, 0, sizeof rec);
    cuco_llm_session_opts o;
    memset(&o, 0, sizeof o);
    o.models = models;
    o.budget_usd = 0.05;
    o.max_tokens = 1000;
    o.temperature = -1;
    o.prices = "local-coder=0.5,2";
    o.client.anthropic_base_url = r.base_url;
    o.client.openai_base_url = r.base_url;
    o.client.max_retries = -1;
    o.record = record_call;
    o.record_ctx = &rec;
    cuco_llm_session *s = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_llm_session_new(&o, &s, &e), 0);

    /* two prompts at once: the bandit tries each model once first */
    const char *sys[] = {"S1", "S2"};
    const char *usr[] = {"U1", "U2"};
    cuco_llm_reply rep[2];
    assert_int_equal(cuco_llm_session_ask(s, "diff", sys, usr, 2, rep, &e), 0);
    assert_string_equal(rep[0].model, "claude-haiku-4-5");
    assert_string_equal(rep[0].resp.text, "A1");
    assert_string_equal(rep[1].model, "openai:local-coder");
    assert_string_equal(rep[1].resp.text, "O1");
    double c0 = (1000 * 1.0 + 100 * 5.0) / 1e6, c1 = (2000 * 0.5 + 50 * 2.0) / 1e6;
    assert_true(fabs(rep[0].resp.cost_usd - c0) < 1e-12);
    assert_true(fabs(rep[1].resp.cost_usd - c1) < 1e-12);
    assert_true(fabs(cuco_llm_session_budget(s)->spent_usd - (c0 + c1)) < 1e-12);
    assert_int_equal(rec.n, 2);
    assert_true(fabs(rec.cost - (c0 + c1)) < 1e-12);
    /* the anthropic child improved a lot, the local one did not */
    cuco_llm_session_reward(s, rep[0].arm, 0.5, rep[0].resp.cost_usd);
    cuco_llm_session_reward(s, rep[1].arm, 0.0, rep[1].resp.cost_usd);
    cuco_llm_response_free(&rep[0].resp);
    cuco_llm_response_free(&rep[1].resp);

    /* the bandit now prefers claude (improvement per dollar, with the
     * exploration bonus of the other arm not yet larger); a 400 is reported
     * with the server's message */
    assert_int_equal(cuco_llm_session_ask(s, "diff", sys, usr, 1, rep, &e), 0);
    assert_string_equal(rep[0].model, "claude-haiku-4-5");
    assert_string_equal(rep[0].resp.text, "A2");
    cuco_llm_session_reward(s, rep[0].arm, 0.0, rep[0].resp.cost_usd);
    cuco_llm_response_free(&rep[0].resp);
    assert_int_equal(cuco_llm_session_ask(s, "diff", sys, usr, 1, rep, &e), 0);
    assert_string_equal(rep[0].model, "claude-haiku-4-5");
    assert_int_equal(rep[0].resp.status, CUCO_LLM_HTTP_ERROR);
    assert_non_null(strstr(rep[0].resp.error, "context too long"));
    cuco_llm_response_free(&rep[0].resp);
    assert_string_equal(rec.statuses, "ok ok ok http_error ");

    /* the budget: each call may cost up to 1000 out x $5 = $0.005 + input;
     * with the limit at what is spent plus a little, the next call is refused
     * before it is sent */
    cuco_llm_session_free(s);
    double spent = c0 + c1 + c0;
    o.budget_usd = spent + 0.004;
    o.spent_usd = spent;
    assert_int_equal(cuco_llm_session_new(&o, &s, &e), 0);
    assert_int_equal(cuco_llm_session_ask(s, "diff", sys, usr, 1, rep, &e), CUCO_EBUDGET);
    assert_non_null(strstr(cuco_err_msg(&e), "budget"));
    assert_int_equal(rep[0].resp.status, CUCO_LLM_BUDGET);
    assert_int_equal(rec.n, 5); /* the refusal is recorded too */
    assert_string_equal(rec.statuses, "ok ok ok http_error budget ");
    cuco_llm_response_free(&rep[0].resp);
    cuco_buf sum = CUCO_BUF_INIT;
    cuco_llm_session_summary(s, &sum);
    assert_non_null(strstr(cuco_buf_str(&sum), "1 refused"));
    cuco_buf_free(&sum);
    cuco_llm_session_free(s);

    json_t *log = replay_log(&r);
    assert_int_equal(json_array_size(log), 4); /* the refused call never went out */
    json_decref(log);

    /* a budget with a model that has no price is refused up front */
    const char *unpriced[] = {"openai:mystery", NULL};
    o.models = unpriced;
    assert_int_equal(cuco_llm_session_new(&o, &s, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "--price"));
    cuco_err_clear(&e);
    replay_stop(&r);
}

static const char *parent_program = "int frozen_top;\n"
                                    "// EVOLVE-BLOCK-START\n"
                                    "int chunk = 4;\n"
                                    "// EVOLVE-BLOCK-END\n"
                                    "int frozen_bottom;\n";

static void test_propose(void **state)
{
    (void)state;
    struct replay r;
    replay_start(&r, "llm-propose",
                 "{\"anthropic\": ["
                 "{\"text\": \"Bigger chunks.\\n// EVOLVE-BLOCK-START\\nint chunk = 8;\\n// "
                 "EVOLVE-BLOCK-END\\n\","
                 " \"usage\": {\"input\": 10, \"output\": 10}},"
                 "{\"text\": \"I rewrote everything: int chunk = 2;\", \"stop\": \"max_tokens\","
                 " \"usage\": {\"input\": 10, \"output\": 10}},"
                 "{\"status\": 500, \"body\": \"boom\"}]}");
    const char *models[] = {"claude-haiku-4-5", NULL};
    cuco_llm_session_opts o;
    memset(&o, 0, sizeof o);
    o.models = models;
    o.temperature = -1;
    o.client.anthropic_base_url = r.base_url;
    o.client.max_retries = -1;
    o.client.max_parallel = 1; /* one at a time, so the server's queue order is the calls' */
    cuco_llm_session *s = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_llm_session_new(&o, &s, &e), 0);
    cuco_llm_prompt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.workload = "toy";
    ctx.parent_code = parent_program;
    ctx.parent_score = 1.0;
    cuco_llm_candidate c[3];
    assert_int_equal(cuco_llm_propose(s, CUCO_LLM_PROMPT_FULL, &ctx, 3, NULL, NULL, c, &e), 0);
    assert_string_equal(c[0].code, "int frozen_top;\n// EVOLVE-BLOCK-START\nint chunk = 8;\n"
                                   "// EVOLVE-BLOCK-END\nint frozen_bottom;\n");
    assert_string_equal(c[0].description, "Bigger chunks.");
    assert_null(c[0].failure);
    assert_null(c[1].code);
    assert_non_null(strstr(c[1].failure, "holds 0 EVOLVE-BLOCKs"));
    assert_non_null(strstr(c[1].failure, "cut at max_tokens"));
    assert_null(c[2].code);
    assert_non_null(strstr(c[2].failure, "HTTP 500"));
    for (int i = 0; i < 3; i++)
        cuco_llm_candidate_free(&c[i]);

    /* all three calls carried the same prompt, with the parent's code in it */
    json_t *log = replay_log(&r);
    assert_int_equal(json_array_size(log), 3);
    json_t *body = json_object_get(json_array_get(log, 0), "body");
    const char *user = json_string_value(
        json_object_get(json_array_get(json_object_get(body, "messages"), 0), "content"));
    assert_non_null(strstr(user, "int chunk = 4;"));
    assert_non_null(strstr(user, "(1 in all)"));
    assert_non_null(strstr(json_string_value(json_object_get(
                               json_array_get(json_object_get(body, "system"), 0), "text")),
                           "Workload: toy"));
    json_decref(log);
    cuco_llm_session_free(s);
    cuco_err_clear(&e);
    replay_stop(&r);
}

int main(void)
{
    char *py = cuco_which("python3");
    if (!py) {
        fprintf(stderr, "test_llm_client: python3 not found, skipping\n");
        return 77;
    }
    free(py);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anthropic_wire_and_cost),
        cmocka_unit_test(test_openai_wire),
        cmocka_unit_test(test_retries),
        cmocka_unit_test(test_errors_not_retried),
        cmocka_unit_test(test_parallel_and_budget),
        cmocka_unit_test(test_usage_bounds),
        cmocka_unit_test(test_key_handling),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_session),
        cmocka_unit_test(test_propose),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
