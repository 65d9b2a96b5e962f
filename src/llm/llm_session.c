/* llm_session.c: a run's use of LLMs in one object: the client, the price
 * table, the budget and the model bandit. A mutator asks it for answers; it
 * picks a model per prompt, admits each call against the budget, sends the
 * calls together, and hands every call (refused ones too) to the recorder
 * that writes the database's llm_calls table. */
#include "cuco/llm.h"
#include "cuco/num.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/hash.h"
#include "cuco/log.h"

struct cuco_llm_session {
    cuco_llm_client *client;
    cuco_llm_prices prices;
    cuco_llm_budget budget;
    cuco_llm_bandit bandit;
    cuco_llm_api *apis; /* per arm */
    char **bare;        /* per arm: model name without the provider prefix */
    double *arm_spent;  /* per arm: $ spent */
    long *arm_calls;    /* per arm: calls sent */
    int max_tokens;
    double temperature;
    cuco_llm_record_fn record;
    void *record_ctx;
    char *fatal; /* why no call can work, once a call has shown it */
};

int cuco_llm_config_from_env(cuco_llm_config *cfg, cuco_err *e)
{
    /* Strict: "5m" is an error, not 5 seconds. */
    long l;
    if (cfg->timeout_s <= 0 && cuco_env_double("CUCO_LLM_TIMEOUT_S", 0, 86400, &cfg->timeout_s, e))
        return CUCO_EINVAL;
    if (cfg->max_retries == 0) {
        l = 0;
        if (cuco_env_long("CUCO_LLM_RETRIES", 0, 100, &l, e))
            return CUCO_EINVAL;
        if (getenv("CUCO_LLM_RETRIES") && *getenv("CUCO_LLM_RETRIES"))
            cfg->max_retries = l > 0 ? (int)l : -1;
    }
    if (cfg->backoff_base_s <= 0 &&
        cuco_env_double("CUCO_LLM_BACKOFF_S", 0, 3600, &cfg->backoff_base_s, e))
        return CUCO_EINVAL;
    if (cfg->backoff_max_s <= 0 &&
        cuco_env_double("CUCO_LLM_BACKOFF_MAX_S", 0, 86400, &cfg->backoff_max_s, e))
        return CUCO_EINVAL;
    if (cfg->max_parallel <= 0) {
        l = cfg->max_parallel;
        if (cuco_env_long("CUCO_LLM_PARALLEL", 0, 1024, &l, e))
            return CUCO_EINVAL;
        cfg->max_parallel = (int)l;
    }
    return 0;
}

void cuco_llm_session_free(cuco_llm_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->bandit.n; i++)
        free(s->bare ? s->bare[i] : NULL);
    free(s->bare);
    free(s->apis);
    free(s->arm_spent);
    free(s->arm_calls);
    cuco_llm_bandit_free(&s->bandit);
    cuco_llm_prices_free(&s->prices);
    cuco_llm_client_free(s->client);
    free(s->fatal);
    free(s);
}

/* A failure that the next call would repeat: no key, a key or model the
 * server refuses, or a server that cannot be reached at all (after the
 * retries). Timeouts, rate limits and server errors may pass. */
static int failure_is_fatal(const cuco_llm_response *r)
{
    switch (r->status) {
    case CUCO_LLM_NO_KEY:
        return 1;
    case CUCO_LLM_HTTP_ERROR:
        return r->http_status == 401 || r->http_status == 403 || r->http_status == 404;
    case CUCO_LLM_RETRIES_EXHAUSTED:
        return r->http_status == 0;
    default:
        return 0;
    }
}

static void note_fatal(cuco_llm_session *s, const char *model, cuco_llm_api api,
                       const cuco_llm_response *r)
{
    if (s->fatal || !failure_is_fatal(r))
        return;
    const char *hint = "";
    if (r->error && strstr(r->error, "(check "))
        hint = ""; /* the client already says what to check */
    else if (r->status == CUCO_LLM_NO_KEY || r->http_status == 401 || r->http_status == 403)
        hint = api == CUCO_LLM_ANTHROPIC ? " (check ANTHROPIC_API_KEY)" : " (check OPENAI_API_KEY)";
    else if (r->http_status == 404)
        hint = " (check the model name and the base URL)";
    else
        hint = api == CUCO_LLM_ANTHROPIC ? " (check the server, or CUCO_ANTHROPIC_BASE_URL)"
                                         : " (check the server, or CUCO_OPENAI_BASE_URL)";
    s->fatal = cuco_sprintf("%s: %s%s", model,
                            r->error ? r->error : cuco_llm_status_name(r->status), hint);
}

int cuco_llm_session_check_keys(const cuco_llm_session *s, cuco_err *e)
{
    for (size_t i = 0; i < s->bandit.n; i++) {
        if (cuco_llm_client_check_key(s->client, s->apis[i], e))
            return cuco_err_prefix(e, "model %s", s->bandit.arms[i].model);
    }
    return 0;
}

const char *cuco_llm_session_fatal(const cuco_llm_session *s)
{
    return s ? s->fatal : NULL;
}

int cuco_llm_session_new(const cuco_llm_session_opts *o, cuco_llm_session **out, cuco_err *e)
{
    size_t n = 0;
    while (o->models && o->models[n])
        n++;
    if (n == 0)
        return cuco_err_set(e, CUCO_EINVAL, "no model given (--model)");
    cuco_llm_session *s = calloc(1, sizeof *s);
    if (!s)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc;
    if ((rc = cuco_llm_prices_init(&s->prices, e)) ||
        (o->prices_file && (rc = cuco_llm_prices_load(&s->prices, o->prices_file, e))) ||
        (o->prices && (rc = cuco_llm_prices_parse(&s->prices, o->prices, e))) ||
        (!o->prices && getenv("CUCO_LLM_PRICES") &&
         (rc = cuco_llm_prices_parse(&s->prices, getenv("CUCO_LLM_PRICES"), e))) ||
        (rc = cuco_llm_bandit_init(&s->bandit, o->models, n, e)))
        goto fail;
    s->apis = calloc(n, sizeof *s->apis);
    s->bare = calloc(n, sizeof *s->bare);
    s->arm_spent = calloc(n, sizeof *s->arm_spent);
    s->arm_calls = calloc(n, sizeof *s->arm_calls);
    if (!s->apis || !s->bare || !s->arm_spent || !s->arm_calls) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = cuco_llm_model_parse(o->models[i], &s->apis[i], &s->bare[i], e)))
            goto fail;
        if (o->budget_usd > 0 && !cuco_llm_prices_find(&s->prices, s->bare[i])) {
            rc = cuco_err_set(e, CUCO_EINVAL,
                              "model '%s' has no known price, so --budget-usd cannot be kept: "
                              "give it one with --price '%s=INPUT,OUTPUT' ($ per million tokens)",
                              o->models[i], s->bare[i]);
            goto fail;
        }
    }
    cuco_llm_config cfg = o->client;
    if ((rc = cuco_llm_config_from_env(&cfg, e)) ||
        (rc = cuco_llm_client_new(&cfg, &s->prices, &s->client, e)))
        goto fail;
    cuco_llm_budget_init(&s->budget, o->budget_usd);
    s->budget.spent_usd = o->spent_usd;
    s->max_tokens = o->max_tokens > 0 ? o->max_tokens : 8192;
    s->temperature = o->temperature;
    s->record = o->record;
    s->record_ctx = o->record_ctx;
    *out = s;
    return 0;
fail:
    cuco_llm_session_free(s);
    return rc;
}

int cuco_llm_session_ask(cuco_llm_session *s, const char *purpose, const char *const *systems,
                         const char *const *users, size_t n, cuco_llm_reply *replies, cuco_err *e)
{
    if (n == 0)
        return 0;
    cuco_llm_request *reqs = calloc(n, sizeof *reqs);
    cuco_llm_response *resps = calloc(n, sizeof *resps);
    if (!reqs || !resps) {
        free(reqs);
        free(resps);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t arm = cuco_llm_bandit_choose(&s->bandit);
        replies[i].arm = arm;
        replies[i].model = s->bandit.arms[arm].model;
        reqs[i].api = s->apis[arm];
        reqs[i].model = s->bare[arm];
        reqs[i].system = systems ? systems[i] : NULL;
        reqs[i].user = users[i];
        reqs[i].max_tokens = s->max_tokens;
        reqs[i].temperature = s->temperature;
    }
    int rc = cuco_llm_batch_run(s->client, reqs, resps, n, &s->budget, e);
    int refused = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        cuco_llm_response *r = &resps[i];
        if (r->attempts > 0) {
            s->arm_calls[replies[i].arm]++;
            s->arm_spent[replies[i].arm] += r->cost_usd;
        }
        if (r->status == CUCO_LLM_BUDGET)
            refused++;
        else if (r->status != CUCO_LLM_OK)
            cuco_warn("llm: %s call to %s failed: %s", purpose, replies[i].model,
                      r->error ? r->error : cuco_llm_status_name(r->status));
        note_fatal(s, replies[i].model, reqs[i].api, r);
        if (s->record) {
            cuco_buf prompt = CUCO_BUF_INIT;
            cuco_buf_puts(&prompt, reqs[i].system ? reqs[i].system : "");
            cuco_buf_puts(&prompt, "\n\n");
            cuco_buf_puts(&prompt, reqs[i].user ? reqs[i].user : "");
            cuco_llm_call_record rec;
            memset(&rec, 0, sizeof rec);
            rec.model = replies[i].model;
            rec.purpose = purpose;
            rec.status = cuco_llm_status_name(r->status);
            rec.input_tokens = r->input_tokens;
            rec.cached_tokens = r->cached_tokens;
            rec.cache_write_tokens = r->cache_write_tokens;
            rec.output_tokens = r->output_tokens;
            rec.cost_usd = r->cost_usd;
            rec.latency_s = r->latency_s;
            rec.attempts = r->attempts;
            rec.error = r->error;
            cuco_hash_hex(prompt.data ? prompt.data : "", prompt.len, rec.prompt_hash);
            cuco_buf_free(&prompt);
            int rrc = s->record(s->record_ctx, &rec, e);
            if (rrc && !rc)
                rc = rrc;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (resps[i].status == CUCO_LLM_BUDGET || rc) {
            /* a call never sent was not a pull of its arm */
            if (s->bandit.arms[replies[i].arm].pulls > 0 && resps[i].attempts == 0) {
                s->bandit.arms[replies[i].arm].pulls--;
                s->bandit.total_pulls--;
            }
        }
        replies[i].resp = resps[i];
    }
    free(reqs);
    free(resps);
    if (!rc && refused)
        rc = cuco_err_set(e, CUCO_EBUDGET,
                          "budget of $%.4f reached: $%.6f spent; the next call could cost more "
                          "than is left",
                          s->budget.limit_usd, s->budget.spent_usd);
    return rc;
}

void cuco_llm_session_reward(cuco_llm_session *s, size_t arm, double improvement, double cost_usd)
{
    cuco_llm_bandit_update(&s->bandit, arm, improvement, cost_usd);
}

const cuco_llm_budget *cuco_llm_session_budget(const cuco_llm_session *s)
{
    return &s->budget;
}

const cuco_llm_bandit *cuco_llm_session_bandit(const cuco_llm_session *s)
{
    return &s->bandit;
}

void cuco_llm_session_summary(const cuco_llm_session *s, cuco_buf *out)
{
    for (size_t i = 0; i < s->bandit.n; i++) {
        const cuco_llm_arm *a = &s->bandit.arms[i];
        cuco_buf_printf(out, "llm: %s: %ld calls, $%.6f, improvement %.4f\n", a->model,
                        s->arm_calls[i], s->arm_spent[i], a->improvement);
    }
    cuco_buf_printf(out, "llm: total $%.6f over %ld calls", s->budget.spent_usd, s->budget.calls);
    if (s->budget.limit_usd > 0)
        cuco_buf_printf(out, " (budget $%.4f, %ld refused)", s->budget.limit_usd,
                        s->budget.refused);
    cuco_buf_putc(out, '\n');
}
