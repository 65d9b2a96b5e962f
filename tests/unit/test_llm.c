/* test_llm.c: the LLM layer without a network: request bodies, response and
 * error parsing, retry-after, model names, prices and costs, the budget, the
 * UCB1 bandit and prompt templates. */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cuco/llm.h"
#include "cuco/toolchain.h"

static void test_model_parse(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_api api;
    char *model = NULL;
    assert_int_equal(cuco_llm_model_parse("claude-sonnet-4-5", &api, &model, &e), 0);
    assert_int_equal(api, CUCO_LLM_ANTHROPIC);
    assert_string_equal(model, "claude-sonnet-4-5");
    free(model);
    assert_int_equal(cuco_llm_model_parse("gpt-5-mini", &api, &model, &e), 0);
    assert_int_equal(api, CUCO_LLM_OPENAI);
    free(model);
    assert_int_equal(cuco_llm_model_parse("openai:qwen2.5-coder:7b", &api, &model, &e), 0);
    assert_int_equal(api, CUCO_LLM_OPENAI);
    assert_string_equal(model, "qwen2.5-coder:7b");
    free(model);
    assert_int_equal(cuco_llm_model_parse("anthropic:my-proxy-model", &api, &model, &e), 0);
    assert_int_equal(api, CUCO_LLM_ANTHROPIC);
    free(model);
    assert_int_equal(cuco_llm_model_parse("google:gemini", &api, &model, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "unknown provider"));
    assert_int_equal(cuco_llm_model_parse("", &api, &model, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_request_json_anthropic(void **state)
{
    (void)state;
    cuco_llm_request req = {
        CUCO_LLM_ANTHROPIC, "claude-haiku-4-5", "SYS \"quoted\"", "hello\nworld", 1000, 0.5};
    char *text = cuco_llm_request_json(&req);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "model")), "claude-haiku-4-5");
    assert_int_equal(json_integer_value(json_object_get(root, "max_tokens")), 1000);
    json_t *sys = json_array_get(json_object_get(root, "system"), 0);
    assert_string_equal(json_string_value(json_object_get(sys, "text")), "SYS \"quoted\"");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sys, "cache_control"), "type")),
        "ephemeral");
    json_t *msgs = json_object_get(root, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "role")),
                        "user");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                        "hello\nworld");
    assert_true(fabs(json_real_value(json_object_get(root, "temperature")) - 0.5) < 1e-9);
    json_decref(root);
    free(text);
}

static void test_request_json_openai(void **state)
{
    (void)state;
    cuco_llm_request req = {CUCO_LLM_OPENAI, "gpt-4.1", "SYS", "USER", 200, -1};
    char *text = cuco_llm_request_json(&req);
    json_t *root = json_loads(text, 0, NULL);
    assert_null(json_object_get(root, "system"));
    assert_null(json_object_get(root, "temperature"));
    json_t *msgs = json_object_get(root, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "role")),
                        "system");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                        "SYS");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
                        "USER");
    json_decref(root);
    free(text);

    /* reasoning models: max_completion_tokens, no temperature */
    cuco_llm_request r5 = {CUCO_LLM_OPENAI, "gpt-5-mini", NULL, "U", 300, 0.7};
    text = cuco_llm_request_json(&r5);
    root = json_loads(text, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(root, "max_completion_tokens")), 300);
    assert_null(json_object_get(root, "max_tokens"));
    assert_null(json_object_get(root, "temperature"));
    json_decref(root);
    free(text);
    assert_true(cuco_llm_openai_reasoning_model("o4-mini"));
    assert_true(cuco_llm_openai_reasoning_model("o3"));
    assert_false(cuco_llm_openai_reasoning_model("gpt-4.1"));
    assert_false(cuco_llm_openai_reasoning_model("ollama-model"));
}

static void test_response_parse(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_response r;
    memset(&r, 0, sizeof r);
    const char *anth =
        "{\"content\":[{\"type\":\"text\",\"text\":\"part1 \"},{\"type\":\"tool_use\"},"
        "{\"type\":\"text\",\"text\":\"part2\"}],\"stop_reason\":\"max_tokens\","
        "\"usage\":{\"input_tokens\":120,\"output_tokens\":33,"
        "\"cache_read_input_tokens\":1000,\"cache_creation_input_tokens\":7}}";
    assert_int_equal(cuco_llm_response_parse(CUCO_LLM_ANTHROPIC, anth, strlen(anth), &r, &e), 0);
    assert_string_equal(r.text, "part1 part2");
    assert_string_equal(r.stop_reason, "max_tokens");
    assert_int_equal(r.input_tokens, 120);
    assert_int_equal(r.output_tokens, 33);
    assert_int_equal(r.cached_tokens, 1000);
    assert_int_equal(r.cache_write_tokens, 7);
    cuco_llm_response_free(&r);

    const char *oai =
        "{\"choices\":[{\"finish_reason\":\"length\",\"message\":{\"role\":\"assistant\","
        "\"content\":\"hi\"}}],\"usage\":{\"prompt_tokens\":500,\"completion_tokens\":9,"
        "\"prompt_tokens_details\":{\"cached_tokens\":384}}}";
    assert_int_equal(cuco_llm_response_parse(CUCO_LLM_OPENAI, oai, strlen(oai), &r, &e), 0);
    assert_string_equal(r.text, "hi");
    assert_string_equal(r.stop_reason, "length");
    assert_int_equal(r.input_tokens, 116); /* prompt_tokens includes the cached ones */
    assert_int_equal(r.cached_tokens, 384);
    assert_int_equal(r.output_tokens, 9);
    cuco_llm_response_free(&r);

    const char *truncated = "{\"content\":[{\"type\":\"text\",\"text\":\"par";
    assert_int_equal(
        cuco_llm_response_parse(CUCO_LLM_ANTHROPIC, truncated, strlen(truncated), &r, &e),
        CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "not JSON"));
    const char *no_usage = "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}";
    assert_int_equal(
        cuco_llm_response_parse(CUCO_LLM_ANTHROPIC, no_usage, strlen(no_usage), &r, &e),
        CUCO_EINVAL);
    const char *empty = "{\"choices\":[],\"usage\":{}}";
    assert_int_equal(cuco_llm_response_parse(CUCO_LLM_OPENAI, empty, strlen(empty), &r, &e),
                     CUCO_EINVAL);
    assert_null(r.text);
    cuco_err_clear(&e);
}

static void test_error_message(void **state)
{
    (void)state;
    const char *a = "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\","
                    "\"message\":\"invalid x-api-key\"}}";
    char *m = cuco_llm_error_message(a, strlen(a));
    assert_string_equal(m, "invalid x-api-key");
    free(m);
    const char *o = "{\"error\":\"model not found\"}";
    m = cuco_llm_error_message(o, strlen(o));
    assert_string_equal(m, "model not found");
    free(m);
    m = cuco_llm_error_message("<html>Bad Gateway</html>", 24);
    assert_string_equal(m, "<html>Bad Gateway</html>");
    free(m);
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_true(fabs(cuco_llm_retry_after_parse("2") - 2.0) < 1e-9);
    assert_true(fabs(cuco_llm_retry_after_parse(" 0.5 ") - 0.5) < 1e-9);
    assert_true(cuco_llm_retry_after_parse("soon") < 0);
    assert_true(cuco_llm_retry_after_parse("") < 0);
    /* a date in the past means "now" */
    assert_true(fabs(cuco_llm_retry_after_parse("Wed, 21 Oct 2015 07:28:00 GMT")) < 1e-9);
}

static void test_prices(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices t;
    assert_int_equal(cuco_llm_prices_init(&t, &e), 0);
    const cuco_llm_price *p = cuco_llm_prices_find(&t, "claude-sonnet-4-5-20250929");
    assert_non_null(p);
    assert_string_equal(p->model, "claude-sonnet-4-5");
    assert_true(p->input == 3.0 && p->output == 15.0);
    p = cuco_llm_prices_find(&t, "gpt-5-mini-2025-08-07");
    assert_string_equal(p->model, "gpt-5-mini"); /* longest prefix, not gpt-5 */
    assert_null(cuco_llm_prices_find(&t, "gpt-50"));
    assert_null(cuco_llm_prices_find(&t, "llama3"));

    /* 1M input at $3 + 2000 cached at $0.30/M + 100 written at 1.25 x $3/M + 10k output at $15/M */
    p = cuco_llm_prices_find(&t, "claude-sonnet-4-5");
    double c = cuco_llm_cost(p, 1000000, 2000, 100, 10000);
    assert_true(fabs(c - (3.0 + 0.0006 + 0.000375 + 0.15)) < 1e-12);

    assert_int_equal(cuco_llm_prices_parse(&t, "llama3=0.1,0.2;claude-sonnet-4-5=1,2,0.5", &e), 0);
    p = cuco_llm_prices_find(&t, "llama3");
    assert_true(p->input == 0.1 && p->output == 0.2 && p->cached_input == 0.1);
    p = cuco_llm_prices_find(&t, "claude-sonnet-4-5");
    assert_true(p->input == 1 && p->output == 2 && p->cached_input == 0.5);
    assert_int_equal(cuco_llm_prices_parse(&t, "broken=1", &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_prices_parse(&t, "broken=1,x", &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_prices_parse(&t, "neg=-1,2", &e), CUCO_EINVAL);

    /* a JSON override file */
    char path[] = "/tmp/cuco-prices-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *js = "{\"local-model\": {\"input\": 0, \"output\": 0},\n"
                     " \"gpt-4o\": {\"input\": 9, \"output\": 10, \"cached_input\": 1}}";
    assert_int_equal(write(fd, js, strlen(js)), (int)strlen(js));
    close(fd);
    assert_int_equal(cuco_llm_prices_load(&t, path, &e), 0);
    assert_true(cuco_llm_prices_find(&t, "gpt-4o-2024-08-06")->input == 9);
    assert_non_null(cuco_llm_prices_find(&t, "local-model"));
    const char *bad = "{\"m\": {\"input\": \"cheap\"}}";
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, bad, strlen(bad)), (int)strlen(bad));
    close(fd);
    assert_int_equal(cuco_llm_prices_load(&t, path, &e), CUCO_EINVAL);
    assert_string_equal(e.file, path);
    unlink(path);
    cuco_llm_prices_free(&t);
    cuco_err_clear(&e);
}

static void test_estimate(void **state)
{
    (void)state;
    cuco_llm_price p = {"m", 2.0, 10.0, 0.5};
    char user[3001];
    memset(user, 'x', 3000);
    user[3000] = 0;
    cuco_llm_request req = {CUCO_LLM_OPENAI, "m", NULL, user, 500, -1};
    long in = cuco_llm_estimate_input_tokens(&req);
    assert_int_equal(in, 1000 + 16);
    /* the estimate is never below the cost of a call at the usual 4 bytes/token
     * that uses all of max_tokens */
    double est = cuco_llm_estimate_cost(&p, &req);
    assert_true(est >= cuco_llm_cost(&p, 750, 0, 0, 500));
    assert_true(fabs(est - (1016 * 2.0 + 500 * 10.0) / 1e6) < 1e-15);
}

/* The bounds a reply's usage is believed within, and prices that are not
 * numbers refused. */
static void test_usage_check(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_request req = {CUCO_LLM_OPENAI, "m", "sys", "user", 1000, -1};
    assert_int_equal(cuco_llm_max_output_tokens(&req), 1164);
    assert_int_equal(cuco_llm_max_input_tokens(&req), 7 + 1000000);
    cuco_llm_response r;
    memset(&r, 0, sizeof r);
    r.input_tokens = 1000007;
    r.output_tokens = 1164;
    assert_int_equal(cuco_llm_usage_check(&req, &r, &e), 0);
    r.cached_tokens = 1;
    assert_int_equal(cuco_llm_usage_check(&req, &r, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "input tokens"));
    r.cached_tokens = 0;
    r.output_tokens = 1165;
    assert_int_equal(cuco_llm_usage_check(&req, &r, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "1165 output tokens"));
    r.output_tokens = 1;
    r.cache_write_tokens = -1;
    assert_int_equal(cuco_llm_usage_check(&req, &r, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "negative"));
    r.cache_write_tokens = 0;
    r.input_tokens = r.cached_tokens = LONG_MAX;
    assert_int_equal(cuco_llm_usage_check(&req, &r, &e), CUCO_EINVAL);

    cuco_llm_budget b;
    cuco_llm_budget_init(&b, 1.0);
    b.spent_usd = 0.5;
    b.reserved_usd = 0.3;
    assert_true(cuco_llm_budget_fits(&b, 0.1, 0.3));
    assert_false(cuco_llm_budget_fits(&b, 0.1, 0.31));
    cuco_llm_budget_init(&b, 0);
    assert_true(cuco_llm_budget_fits(&b, 0, 500));

    cuco_llm_prices t;
    assert_int_equal(cuco_llm_prices_init(&t, &e), 0);
    assert_int_equal(cuco_llm_prices_parse(&t, "m=nan,1", &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_prices_parse(&t, "m=1,inf", &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_prices_parse(&t, "m=1,-2", &e), CUCO_EINVAL);
    cuco_llm_prices_free(&t);
    cuco_err_clear(&e);
}

static void test_budget(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_budget b;
    cuco_llm_budget_init(&b, 1.0);
    assert_int_equal(cuco_llm_budget_reserve(&b, 0.4, &e), 0);
    assert_int_equal(cuco_llm_budget_reserve(&b, 0.4, &e), 0);
    /* two in flight reserve 0.8: a third 0.4 could take the run over */
    assert_int_equal(cuco_llm_budget_reserve(&b, 0.4, &e), CUCO_EBUDGET);
    assert_non_null(strstr(cuco_err_msg(&e), "budget"));
    assert_int_equal(b.refused, 1);
    cuco_llm_budget_commit(&b, 0.4, 0.1);
    cuco_llm_budget_commit(&b, 0.4, 0.15);
    assert_true(fabs(b.spent_usd - 0.25) < 1e-12);
    assert_true(b.reserved_usd == 0);
    assert_true(fabs(cuco_llm_budget_left(&b) - 0.75) < 1e-12);
    assert_int_equal(cuco_llm_budget_reserve(&b, 0.75, &e), 0); /* exactly to the limit is fine */
    cuco_llm_budget_commit(&b, 0.75, 0.75);
    assert_int_equal(cuco_llm_budget_reserve(&b, 1e-9, &e), CUCO_EBUDGET);
    assert_int_equal(b.calls, 3);

    cuco_llm_budget_init(&b, 0);
    assert_int_equal(cuco_llm_budget_reserve(&b, 1e9, &e), 0);
    assert_true(isinf(cuco_llm_budget_left(&b)));
    cuco_err_clear(&e);
}

static void test_bandit(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    const char *models[] = {"cheap", "pricey", "useless"};
    cuco_llm_bandit b;
    assert_int_equal(cuco_llm_bandit_init(&b, models, 3, &e), 0);
    /* every arm once first, in order */
    assert_int_equal(cuco_llm_bandit_choose(&b), 0);
    assert_int_equal(cuco_llm_bandit_choose(&b), 1);
    assert_int_equal(cuco_llm_bandit_choose(&b), 2);
    assert_int_equal(cuco_llm_bandit_find(&b, "pricey"), 1);
    assert_int_equal(cuco_llm_bandit_find(&b, "nope"), -1);

    /* cheap and pricey improve by the same amount per call, but pricey costs
     * ten times more; useless never improves */
    long counts[3] = {0, 0, 0};
    cuco_llm_bandit_update(&b, 0, 0.1, 0.01);
    cuco_llm_bandit_update(&b, 1, 0.1, 0.10);
    cuco_llm_bandit_update(&b, 2, 0.0, 0.01);
    for (int i = 0; i < 300; i++) {
        size_t a = cuco_llm_bandit_choose(&b);
        counts[a]++;
        double cost = a == 1 ? 0.10 : 0.01;
        double gain = a == 2 ? -0.05 : 0.1;
        cuco_llm_bandit_update(&b, a, gain, cost);
    }
    assert_true(counts[0] > counts[1]);
    assert_true(counts[0] > counts[2]);
    assert_true(counts[0] > 150);
    /* exploration never stops: every arm still got calls */
    assert_true(counts[1] > 0 && counts[2] > 0);
    assert_true(cuco_llm_bandit_value(&b, 0) > cuco_llm_bandit_value(&b, 2));
    assert_int_equal(b.total_pulls, 303);
    cuco_llm_bandit_free(&b);
    assert_int_equal(cuco_llm_bandit_init(&b, models, 0, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_template(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_buf out = CUCO_BUF_INIT;
    cuco_llm_var vars[] = {{"name", "cuco"}, {"errors", ""}, {"score", "1.25"}};
    const char *t = "Hi {{name}} ({{score}}).\n{{#errors}}Errors:\n{{errors}}{{/errors}}"
                    "{{^errors}}No errors.{{/errors}}\n{{#score}}S={{score}}{{/score}}";
    assert_int_equal(cuco_llm_template_fill(t, "t.md", vars, 3, &out, &e), 0);
    assert_string_equal(cuco_buf_str(&out), "Hi cuco (1.25).\nNo errors.\nS=1.25");
    cuco_buf_reset(&out);
    assert_int_equal(cuco_llm_template_fill("a\nb {{nmae}}", "t.md", vars, 3, &out, &e),
                     CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "unknown placeholder 'nmae'"));
    assert_int_equal(e.line, 2);
    assert_int_equal(cuco_llm_template_fill("{{#name}}open", "t.md", vars, 3, &out, &e),
                     CUCO_EINVAL);
    assert_int_equal(cuco_llm_template_fill("x {{name", "t.md", vars, 3, &out, &e), CUCO_EINVAL);
    cuco_buf_free(&out);

    /* the shipped templates are built in and fill with the mutators' names */
    char *text = NULL;
    assert_int_equal(cuco_llm_template_load("diff.md", &text, &e), 0);
    assert_non_null(strstr(text, "{{parent_code}}"));
    free(text);
    assert_int_equal(cuco_llm_template_load("nope.md", &text, &e), CUCO_ENOTFOUND);
    assert_int_equal(cuco_llm_template_load("../x", &text, &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_context_load("nccl_device_api.md", &text, &e), 0);
    assert_non_null(strstr(text, "ncclDevComm"));
    free(text);
    cuco_err_clear(&e);
}

static const char *seed_program = "#include <stdio.h>\n"
                                  "// EVOLVE-BLOCK-START\n"
                                  "#define CUCO_CHUNK 4  // cuco:knob 1 2 4 8\n"
                                  "static int work(int x) { return x * CUCO_CHUNK; }\n"
                                  "// EVOLVE-BLOCK-END\n"
                                  "int main(void) { printf(\"%d\\n\", work(2)); }\n"
                                  "  // EVOLVE-BLOCK-START\n"
                                  "static int second;\n"
                                  "  // EVOLVE-BLOCK-END\n";

static void test_blocks_text(void **state)
{
    (void)state;
    assert_int_equal(cuco_llm_block_count(seed_program), 2);
    assert_int_equal(cuco_llm_block_count("int x;"), 0);
    char *b = cuco_llm_blocks_text(seed_program);
    assert_non_null(strstr(b, "#define CUCO_CHUNK 4"));
    assert_non_null(strstr(b, "static int second;"));
    assert_null(strstr(b, "int main"));
    assert_null(strstr(b, "#include"));
    assert_non_null(strstr(b, "...\n  // EVOLVE-BLOCK-START"));
    free(b);
    b = cuco_llm_blocks_text("int x;\n");
    assert_string_equal(b, "int x;\n");
    free(b);
}

static void test_prompt_build(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_example fails[] = {
        {NULL, -1, "compile_error", "llm_diff", "unrolled the loop",
         "main.cu:12:5: error: 'ncclFoo' was not declared in this scope\n"},
        {NULL, -1, "patch_failed", "llm_diff", NULL, "SEARCH block 1 not found: \"int y\""},
    };
    cuco_llm_example top[] = {{seed_program, 1.75, "ok", "knob", "chunk 4", NULL}};
    cuco_llm_prompt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.workload = "cpu_demo";
    ctx.description = "A matrix product and an all-gather.";
    ctx.design_space = "backend: lsa\nchunk: 1, 2, 4, 8\n";
    ctx.hardware = "2x H200, 132 SMs, NVLink NV18";
    ctx.parent_code = seed_program;
    ctx.parent_score = 1.5;
    ctx.parent_metrics = "{\"time_ms\": 2.0}";
    ctx.failures = fails;
    ctx.n_failures = 2;
    ctx.top = top;
    ctx.n_top = 1;
    ctx.meta_summary = "Chunk 4 helped.";
    char *sys = NULL, *user = NULL;
    assert_int_equal(cuco_llm_prompt_build(CUCO_LLM_PROMPT_DIFF, &ctx, &sys, &user, &e), 0);
    assert_non_null(strstr(sys, "Workload: cpu_demo"));
    assert_non_null(strstr(sys, "A matrix product and an all-gather."));
    assert_non_null(strstr(sys, "chunk: 1, 2, 4, 8"));
    assert_non_null(strstr(sys, "2x H200"));
    assert_non_null(strstr(sys, "ncclGetLsaPointer")); /* API notes */
    assert_non_null(strstr(sys, "Fused push"));        /* strategy notes */
    assert_null(strstr(sys, "{{"));
    assert_non_null(strstr(user, "score 1.5000"));
    assert_non_null(strstr(user, "{\"time_ms\": 2.0}"));
    assert_non_null(strstr(user, "static int work(int x)"));
    assert_non_null(strstr(user, "compile_error (change: unrolled the loop)"));
    assert_non_null(strstr(user, "'ncclFoo' was not declared"));
    assert_non_null(strstr(user, "SEARCH block 1 not found"));
    assert_non_null(strstr(user, "Program 1: score 1.7500 (chunk 4)"));
    assert_non_null(strstr(user, "Chunk 4 helped."));
    assert_non_null(strstr(user, "<<<<<<< SEARCH"));
    assert_null(strstr(user, "{{"));
    free(sys);
    free(user);

    /* no failures, no summary: those sections vanish; full asks for all blocks */
    ctx.n_failures = 0;
    ctx.n_top = 0;
    ctx.meta_summary = NULL;
    assert_int_equal(cuco_llm_prompt_build(CUCO_LLM_PROMPT_FULL, &ctx, &sys, &user, &e), 0);
    assert_null(strstr(user, "Recent failed attempts"));
    assert_null(strstr(user, "learned so far"));
    assert_null(strstr(user, "Best programs"));
    assert_non_null(strstr(user, "(2 in all)"));
    free(sys);
    free(user);

    assert_int_equal(cuco_llm_prompt_build(CUCO_LLM_PROMPT_CROSS, &ctx, &sys, &user, &e),
                     CUCO_EINVAL);
    ctx.other_code = "// other program\n";
    ctx.other_score = 1.25;
    assert_int_equal(cuco_llm_prompt_build(CUCO_LLM_PROMPT_CROSS, &ctx, &sys, &user, &e), 0);
    assert_non_null(strstr(user, "Program B (score 1.2500)"));
    assert_non_null(strstr(user, "// other program"));
    free(sys);
    free(user);

    /* a long excerpt keeps its end */
    char *big = calloc(5000, 1);
    memset(big, 'a', 4000);
    strcpy(big + 4000, "\nTHE REAL ERROR\n");
    cuco_llm_example one = {NULL, -1, "run_error", NULL, NULL, big};
    ctx.failures = &one;
    ctx.n_failures = 1;
    ctx.max_excerpt = 100;
    assert_int_equal(cuco_llm_prompt_build(CUCO_LLM_PROMPT_DIFF, &ctx, &sys, &user, &e), 0);
    assert_non_null(strstr(user, "THE REAL ERROR"));
    assert_non_null(strstr(user, "bytes omitted"));
    assert_null(strstr(user, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    free(big);
    free(sys);
    free(user);
    cuco_err_clear(&e);
}

static void test_meta_rules(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_meta_entry m[] = {
        {"ok", 1.0, "{\"CHUNK\": \"1\"}", "seed", NULL},
        {"ok", 1.5, "{\"CHUNK\": \"4\"}", "knob", NULL},
        {"ok", 1.3, "{\"CHUNK\": \"4\"}", "knob", NULL},
        {"ok", 1.1, "{\"CHUNK\": \"2\"}", "knob", NULL},
        {"compile_error", 0, NULL, "llm_diff",
         "/tmp/b1/main.cu:12:5: error: 'x' was not declared\nmore\n"},
        {"compile_error", 0, NULL, "llm_diff",
         "/tmp/b2/main.cu:40:1: error: 'x' was not declared\n"},
        {"wrong_answer", 0, NULL, "llm_full", "Verification: FAIL rank 1 mismatch at 17\n"},
    };
    cuco_buf out = CUCO_BUF_INIT;
    assert_int_equal(cuco_meta_summary_rules(m, 7, &out, &e), 0);
    const char *t = cuco_buf_str(&out);
    assert_non_null(strstr(t, "7 programs evaluated: 4 ok, 2 compile_error, 1 wrong_answer."));
    assert_non_null(strstr(t, "Best: speedup 1.5000 (knob) with knobs {\"CHUNK\": \"4\"}"));
    assert_non_null(strstr(t, "Next: speedup 1.3000"));
    assert_non_null(strstr(t, "Next: speedup 1.1000"));
    assert_non_null(strstr(t, "Knob CHUNK=4 scored best on average: 1.4000 over 2 programs."));
    assert_null(strstr(t, "Knob CHUNK=1"));
    /* the two compile errors differ only in their paths: grouped */
    assert_non_null(strstr(t, "Common failure (2x): compile_error: error: 'x' was not declared"));
    assert_non_null(strstr(t, "Common failure (1x): wrong_answer: Verification: FAIL rank 1"));
    cuco_buf_free(&out);

    char *user = NULL;
    assert_int_equal(cuco_meta_summary_prompt("cpu_demo", "earlier text", m, 7, &user, &e), 0);
    assert_non_null(strstr(user, "\"cpu_demo\""));
    assert_non_null(strstr(user, "earlier text"));
    assert_non_null(strstr(user, "- ok, score 1.5000, by knob, knobs {\"CHUNK\": \"4\"}"));
    assert_non_null(strstr(user, "- compile_error, by llm_diff: error: 'x' was not declared"));
    free(user);
    assert_int_equal(cuco_meta_summary_prompt("w", NULL, m, 0, &user, &e), 0);
    assert_null(strstr(user, "Summary written earlier"));
    free(user);
    cuco_err_clear(&e);
}

static void test_apply_blocks(void **state)
{
    (void)state;
    char *child = NULL, *reason = NULL;
    const char *answer = "Idea: double the chunk.\n```cuda\n// EVOLVE-BLOCK-START\n"
                         "#define CUCO_CHUNK 8  // cuco:knob 1 2 4 8\n"
                         "static int work(int x) { return x << 3; }\n// EVOLVE-BLOCK-END\n```\n"
                         "and\n// EVOLVE-BLOCK-START\nstatic int second = 2;\n// EVOLVE-BLOCK-END";
    assert_int_equal(cuco_llm_apply_blocks(seed_program, answer, &child, &reason), 0);
    assert_null(reason);
    assert_non_null(
        strstr(child, "#include <stdio.h>\n// EVOLVE-BLOCK-START\n#define CUCO_CHUNK 8"));
    assert_non_null(strstr(child, "return x << 3; }\n// EVOLVE-BLOCK-END\nint main(void)"));
    assert_non_null(
        strstr(child, "  // EVOLVE-BLOCK-START\nstatic int second = 2;\n  // EVOLVE-BLOCK-END\n"));
    assert_null(strstr(child, "Idea"));
    assert_null(strstr(child, "```"));
    free(child);

    /* one block where the program has two */
    assert_int_equal(cuco_llm_apply_blocks(seed_program,
                                           "// EVOLVE-BLOCK-START\nx\n// EVOLVE-BLOCK-END\n",
                                           &child, &reason),
                     -1);
    assert_null(child);
    assert_string_equal(reason, "the answer holds 1 EVOLVE-BLOCK, the program has 2");
    free(reason);
    assert_int_equal(cuco_llm_apply_blocks(seed_program, "no code at all", &child, &reason), -1);
    assert_non_null(strstr(reason, "holds 0 EVOLVE-BLOCKs"));
    free(reason);
    assert_int_equal(cuco_llm_apply_blocks(seed_program,
                                           "// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-START\n", &child,
                                           &reason),
                     -1);
    assert_non_null(strstr(reason, "answer: EVOLVE-BLOCK-START on line 2 inside another block"));
    free(reason);

    char *d = cuco_llm_answer_description(
        "  Use 16-byte stores.\n\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n");
    assert_string_equal(d, "Use 16-byte stores.");
    free(d);
    d = cuco_llm_answer_description("```cuda\nint x;\n```");
    assert_string_equal(d, "");
    free(d);
}

static void test_novelty(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    char *user = NULL;
    assert_int_equal(cuco_llm_novelty_prompt(seed_program, "int only_this;\n", &user, &e), 0);
    assert_non_null(strstr(user, "#define CUCO_CHUNK 4"));
    assert_null(strstr(user, "int main(void)")); /* only the blocks are compared */
    assert_non_null(strstr(user, "int only_this;"));
    assert_non_null(strstr(user, "NOVEL or DUPLICATE"));
    free(user);
    int novel = -1;
    assert_int_equal(cuco_llm_novelty_parse("NOVEL\nA new placement.", &novel, &e), 0);
    assert_int_equal(novel, 1);
    assert_int_equal(cuco_llm_novelty_parse("**Duplicate** only a constant", &novel, &e), 0);
    assert_int_equal(novel, 0);
    assert_int_equal(cuco_llm_novelty_parse("Maybe?", &novel, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_apply_diff(void **state)
{
    (void)state;
    char *child = NULL, *reason = NULL;
    const char *good =
        "Bigger chunks.\n<<<<<<< SEARCH\n#define CUCO_CHUNK 4  // cuco:knob 1 2 4 8\n"
        "=======\n#define CUCO_CHUNK 8  // cuco:knob 1 2 4 8\n>>>>>>> REPLACE\n"
        "and\n<<<<<<< SEARCH\nstatic int second;\n=======\nstatic int second = 1;\n"
        "static int third;\n>>>>>>> REPLACE";
    assert_int_equal(cuco_llm_apply_diff(seed_program, good, &child, &reason), 0);
    assert_non_null(strstr(child, "// EVOLVE-BLOCK-START\n#define CUCO_CHUNK 8  // cuco:knob"));
    assert_non_null(
        strstr(child, "static int second = 1;\nstatic int third;\n  // EVOLVE-BLOCK-END"));
    assert_non_null(strstr(child, "int main(void)"));
    free(child);

    const char *missing = "<<<<<<< SEARCH\nint nothing_like_this;\n=======\nx\n>>>>>>> REPLACE\n";
    assert_int_equal(cuco_llm_apply_diff(seed_program, missing, &child, &reason), -1);
    assert_null(child);
    assert_string_equal(reason, "block 1: SEARCH text not found: \"int nothing_like_this;\"");
    free(reason);
    const char *frozen = "<<<<<<< SEARCH\nint main(void) { printf(\"%d\\n\", work(2)); }\n=======\n"
                         "int main(void) { return 0; }\n>>>>>>> REPLACE\n";
    assert_int_equal(cuco_llm_apply_diff(seed_program, frozen, &child, &reason), -1);
    assert_non_null(strstr(reason, "block 1: edits text outside the EVOLVE-BLOCKs"));
    free(reason);
    /* a SEARCH that runs across the END marker is outside too */
    const char *across = "<<<<<<< SEARCH\nstatic int work(int x) { return x * CUCO_CHUNK; }\n"
                         "// EVOLVE-BLOCK-END\n=======\n\n>>>>>>> REPLACE\n";
    assert_int_equal(cuco_llm_apply_diff(seed_program, across, &child, &reason), -1);
    assert_non_null(strstr(reason, "outside"));
    free(reason);
    const char *twice = "<<<<<<< SEARCH\nx = 1;\n=======\nx = 2;\n>>>>>>> REPLACE\n";
    assert_int_equal(
        cuco_llm_apply_diff("// EVOLVE-BLOCK-START\nx = 1;\nx = 1;\n// EVOLVE-BLOCK-END\n", twice,
                            &child, &reason),
        -1);
    assert_non_null(strstr(reason, "more than once"));
    free(reason);
    /* the second block fails: nothing is applied */
    const char *second_bad =
        "<<<<<<< SEARCH\nstatic int second;\n=======\nint s;\n>>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\nstatic int second;\n=======\nint t;\n>>>>>>> REPLACE\n";
    assert_int_equal(cuco_llm_apply_diff(seed_program, second_bad, &child, &reason), -1);
    assert_non_null(strstr(reason, "block 2: SEARCH text not found"));
    free(reason);
    assert_int_equal(cuco_llm_apply_diff(seed_program, "<<<<<<< SEARCH\nx\n", &child, &reason), -1);
    assert_string_equal(reason, "SEARCH/REPLACE block 1 is not closed");
    free(reason);
    assert_int_equal(cuco_llm_apply_diff(seed_program, "just prose", &child, &reason), -1);
    assert_string_equal(reason, "the answer holds no SEARCH/REPLACE block");
    free(reason);
}

static void test_format_hardware(void **state)
{
    (void)state;
    cuco_toolchain tc;
    memset(&tc, 0, sizeof tc);
    tc.nvcc_version = "13.0";
    tc.nccl_version = 22809;
    tc.nccl_device_api = 1;
    cuco_buf out = CUCO_BUF_INIT;
    cuco_llm_format_hardware(&tc, "2x NVIDIA H200, 132 SMs", &out);
    assert_string_equal(cuco_buf_str(&out), "GPUs: 2x NVIDIA H200, 132 SMs\nCUDA: nvcc 13.0\n"
                                            "NCCL: 2.28.9, device API yes, GIN headers no\n");
    cuco_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_parse),
        cmocka_unit_test(test_request_json_anthropic),
        cmocka_unit_test(test_request_json_openai),
        cmocka_unit_test(test_response_parse),
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_prices),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_usage_check),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_bandit),
        cmocka_unit_test(test_template),
        cmocka_unit_test(test_blocks_text),
        cmocka_unit_test(test_prompt_build),
        cmocka_unit_test(test_meta_rules),
        cmocka_unit_test(test_apply_blocks),
        cmocka_unit_test(test_novelty),
        cmocka_unit_test(test_apply_diff),
        cmocka_unit_test(test_format_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
