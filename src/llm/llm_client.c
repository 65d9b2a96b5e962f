/* llm_client.c: sends LLM requests over libcurl's multi interface, several in
 * flight at once. Each request is admitted against the budget first, then
 * retried on 429, 5xx, timeouts and connection errors with exponential
 * backoff and jitter (never sooner than the server's retry-after); 4xx
 * answers fail at once with the server's message. API keys are read from the
 * environment when a request is built, go only into its HTTP header, and are
 * wiped from memory when the request is done. */
#include "cuco/llm.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cuco/log.h"

struct cuco_llm_client {
    char *base_url[2];
    char *key_env[2];
    double timeout_s;
    double connect_timeout_s;
    int max_retries;
    double backoff_base_s;
    double backoff_max_s;
    int max_parallel;
    unsigned rng;
    const cuco_llm_prices *prices; /* borrowed */
};

enum call_state { CALL_WAITING, CALL_IN_FLIGHT, CALL_DONE };

struct call {
    const cuco_llm_request *req;
    cuco_llm_response *resp;
    enum call_state state;
    char *url;
    char *body;
    struct curl_slist *headers; /* holds the key: wiped before it is freed */
    CURL *easy;
    cuco_buf rx;
    char curl_error[CURL_ERROR_SIZE];
    double retry_after_s; /* from the last response, < 0 if none */
    double next_at;       /* monotonic time of the next attempt */
    double started;
    double estimate_usd;
    int admitted;
    int all_timeouts; /* every failed attempt so far was a timeout */
    const cuco_llm_price *price;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static char *strip_slash(const char *url)
{
    char *s = cuco_strdup(url);
    if (s) {
        size_t n = strlen(s);
        while (n > 0 && s[n - 1] == '/')
            s[--n] = 0;
    }
    return s;
}

int cuco_llm_client_new(const cuco_llm_config *cfg, const cuco_llm_prices *prices,
                        cuco_llm_client **out, cuco_err *e)
{
    static int curl_ready;
    cuco_llm_config dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!cfg)
        cfg = &dflt;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return cuco_err_set(e, CUCO_ENET, "libcurl could not start");
        curl_ready = 1;
    }
    cuco_llm_client *c = calloc(1, sizeof *c);
    if (!c)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    c->base_url[CUCO_LLM_ANTHROPIC] = strip_slash(
        cfg->anthropic_base_url ? cfg->anthropic_base_url
                                : env_or("CUCO_ANTHROPIC_BASE_URL", "https://api.anthropic.com"));
    c->base_url[CUCO_LLM_OPENAI] = strip_slash(
        cfg->openai_base_url ? cfg->openai_base_url
                             : env_or("CUCO_OPENAI_BASE_URL", "https://api.openai.com"));
    c->key_env[CUCO_LLM_ANTHROPIC] =
        cuco_strdup(cfg->anthropic_key_env ? cfg->anthropic_key_env : "ANTHROPIC_API_KEY");
    c->key_env[CUCO_LLM_OPENAI] =
        cuco_strdup(cfg->openai_key_env ? cfg->openai_key_env : "OPENAI_API_KEY");
    c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 300;
    c->connect_timeout_s = cfg->connect_timeout_s > 0 ? cfg->connect_timeout_s : 10;
    c->max_retries = cfg->max_retries == 0 ? 4 : cfg->max_retries < 0 ? 0 : cfg->max_retries;
    c->backoff_base_s = cfg->backoff_base_s > 0 ? cfg->backoff_base_s : 1.0;
    c->backoff_max_s = cfg->backoff_max_s > 0 ? cfg->backoff_max_s : 60.0;
    c->max_parallel = cfg->max_parallel > 0 ? cfg->max_parallel : 8;
    c->rng = cfg->seed ? cfg->seed : (unsigned)time(NULL) ^ (unsigned)(now_s() * 1e6);
    c->prices = prices;
    if (!c->base_url[0] || !c->base_url[1] || !c->key_env[0] || !c->key_env[1]) {
        cuco_llm_client_free(c);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

void cuco_llm_client_free(cuco_llm_client *c)
{
    if (!c)
        return;
    for (int i = 0; i < 2; i++) {
        free(c->base_url[i]);
        free(c->key_env[i]);
    }
    free(c);
}

const char *cuco_llm_client_base_url(const cuco_llm_client *c, cuco_llm_api api)
{
    return c->base_url[api == CUCO_LLM_ANTHROPIC ? CUCO_LLM_ANTHROPIC : CUCO_LLM_OPENAI];
}

/* Overwrites a string so a key does not linger in freed memory. */
static void wipe(char *s)
{
    if (s) {
        volatile char *p = s;
        while (*p)
            *p++ = 0;
    }
}

static void free_headers(struct curl_slist *h)
{
    for (struct curl_slist *i = h; i; i = i->next)
        wipe(i->data);
    curl_slist_free_all(h);
}

static int is_official(const char *url)
{
    return strstr(url, "api.anthropic.com") || strstr(url, "api.openai.com");
}

int cuco_llm_client_check_key(const cuco_llm_client *c, cuco_llm_api api, cuco_err *e)
{
    int i = api == CUCO_LLM_ANTHROPIC ? CUCO_LLM_ANTHROPIC : CUCO_LLM_OPENAI;
    const char *key = getenv(c->key_env[i]);
    if ((!key || !*key) && (i == CUCO_LLM_ANTHROPIC || is_official(c->base_url[i])))
        return cuco_err_set(e, CUCO_EINVAL,
                            "%s is not set: the %s API at %s needs a key (export %s=...)",
                            c->key_env[i], cuco_llm_api_name(api), c->base_url[i], c->key_env[i]);
    return 0;
}

/* Builds url, body and headers of a call; CUCO_LLM_NO_KEY when needed. */
static int call_prepare(cuco_llm_client *c, struct call *k)
{
    const cuco_llm_request *req = k->req;
    int api = req->api == CUCO_LLM_ANTHROPIC ? CUCO_LLM_ANTHROPIC : CUCO_LLM_OPENAI;
    const char *key = getenv(c->key_env[api]);
    if ((!key || !*key) && (api == CUCO_LLM_ANTHROPIC || is_official(c->base_url[api]))) {
        /* local OpenAI-compatible servers (vLLM, Ollama) need no key */
        k->resp->status = CUCO_LLM_NO_KEY;
        k->resp->error = cuco_sprintf("%s is not set", c->key_env[api]);
        return -1;
    }
    k->url = cuco_sprintf("%s%s", c->base_url[api],
                          api == CUCO_LLM_ANTHROPIC ? "/v1/messages" : "/v1/chat/completions");
    k->body = cuco_llm_request_json(req);
    k->headers = curl_slist_append(NULL, "content-type: application/json");
    if (key && *key) {
        char *h = api == CUCO_LLM_ANTHROPIC ? cuco_sprintf("x-api-key: %s", key)
                                            : cuco_sprintf("Authorization: Bearer %s", key);
        if (h) {
            k->headers = curl_slist_append(k->headers, h);
            wipe(h);
            free(h);
        }
    }
    if (api == CUCO_LLM_ANTHROPIC)
        k->headers = curl_slist_append(k->headers, "anthropic-version: 2023-06-01");
    /* no "Expect: 100-continue" round trip for large prompts */
    k->headers = curl_slist_append(k->headers, "Expect:");
    if (!k->url || !k->body || !k->headers) {
        k->resp->status = CUCO_LLM_BAD_RESPONSE;
        k->resp->error = cuco_strdup("out of memory building the request");
        return -1;
    }
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct call *k = ud;
    if (cuco_buf_append(&k->rx, ptr, size * nmemb))
        return 0;
    return size * nmemb;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct call *k = ud;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";
    if (n > sizeof name - 1 && !strncasecmp(ptr, name, sizeof name - 1)) {
        char *v = cuco_strndup(ptr + sizeof name - 1, n - (sizeof name - 1));
        if (v) {
            k->retry_after_s = cuco_llm_retry_after_parse(cuco_str_trim(v));
            free(v);
        }
    }
    return n;
}

static int call_start(cuco_llm_client *c, CURLM *multi, struct call *k)
{
    k->easy = curl_easy_init();
    if (!k->easy)
        return -1;
    cuco_buf_reset(&k->rx);
    k->retry_after_s = -1;
    k->curl_error[0] = 0;
    CURL *h = k->easy;
    curl_easy_setopt(h, CURLOPT_URL, k->url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, k->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(k->body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, k->headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, k);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, k->curl_error);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PRIVATE, k);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "cuco");
    if (curl_multi_add_handle(multi, h) != CURLM_OK) {
        curl_easy_cleanup(h);
        k->easy = NULL;
        return -1;
    }
    k->state = CALL_IN_FLIGHT;
    k->resp->attempts++;
    cuco_debug("llm: POST %s model %s (attempt %d)", k->url, k->req->model, k->resp->attempts);
    return 0;
}

static unsigned next_rand(cuco_llm_client *c)
{
    c->rng = c->rng * 1103515245u + 12345u;
    return (c->rng >> 16) & 0x7fff;
}

/* Schedules another attempt, or ends the call when retries are used up. */
static void call_retry_or_fail(cuco_llm_client *c, struct call *k, double now, char *reason,
                               int was_timeout)
{
    if (!was_timeout)
        k->all_timeouts = 0;
    if (k->resp->attempts > c->max_retries) {
        k->resp->status = k->all_timeouts ? CUCO_LLM_TIMEOUT : CUCO_LLM_RETRIES_EXHAUSTED;
        k->resp->error = cuco_sprintf("%s (after %d attempts)", reason, k->resp->attempts);
        free(reason);
        k->state = CALL_DONE;
        return;
    }
    double delay = c->backoff_base_s * pow(2.0, k->resp->attempts - 1);
    if (delay > c->backoff_max_s)
        delay = c->backoff_max_s;
    delay *= 0.5 + 0.5 * (double)next_rand(c) / 32767.0; /* jitter: spread retries apart */
    if (k->retry_after_s > delay)
        delay = k->retry_after_s > 600 ? 600 : k->retry_after_s;
    cuco_warn("llm: %s: %s; retrying in %.2f s", k->req->model, reason, delay);
    free(reason);
    k->next_at = now + delay;
    k->state = CALL_WAITING;
}

/* A reply whose usage cannot be true (cuco_llm_usage_check) is a
 * bad_response, its text dropped and its counts zeroed. It is booked at the
 * request's upper estimate, what the budget admitted it at: the server may
 * bill it, and a server that lies about usage must neither drive the spend
 * down nor book more than the call could cost. */
static void refuse_usage(struct call *k, const char *why)
{
    cuco_llm_response *r = k->resp;
    r->status = CUCO_LLM_BAD_RESPONSE;
    r->error = cuco_strdup(why);
    free(r->text);
    r->text = NULL;
    r->input_tokens = r->cached_tokens = r->cache_write_tokens = r->output_tokens = 0;
    r->cost_usd = cuco_llm_estimate_cost(k->price, k->req);
}

/* The budget is a hard cap: a reply that claims to cost more than its
 * reservation and what is left of the limit is refused like a reply with
 * impossible usage. */
static void refuse_over_budget(const cuco_llm_budget *b, struct call *k)
{
    if (k->resp->status != CUCO_LLM_OK ||
        cuco_llm_budget_fits(b, k->estimate_usd, k->resp->cost_usd))
        return;
    char *why =
        cuco_sprintf("usage claims $%.6f, more than the $%.6f left of the $%.6f budget",
                     k->resp->cost_usd, cuco_llm_budget_left(b) + k->estimate_usd, b->limit_usd);
    refuse_usage(k, why ? why : "usage claims more than is left of the budget");
    free(why);
}

static void call_finish_attempt(cuco_llm_client *c, struct call *k, CURLcode result, double now)
{
    long http = 0;
    curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &http);
    k->resp->http_status = (int)http;
    if (result != CURLE_OK) {
        int timeout = result == CURLE_OPERATION_TIMEDOUT;
        call_retry_or_fail(
            c, k, now,
            cuco_sprintf("%s: %s", timeout ? "timed out" : "connection failed",
                         k->curl_error[0] ? k->curl_error : curl_easy_strerror(result)),
            timeout);
        return;
    }
    if (http == 429 || http == 408 || http >= 500) {
        char *msg = cuco_llm_error_message(k->rx.data, k->rx.len);
        call_retry_or_fail(c, k, now, cuco_sprintf("HTTP %ld: %s", http, msg ? msg : ""), 0);
        free(msg);
        return;
    }
    k->state = CALL_DONE;
    if (http != 200) {
        char *msg = cuco_llm_error_message(k->rx.data, k->rx.len);
        k->resp->status = CUCO_LLM_HTTP_ERROR;
        int api = k->req->api == CUCO_LLM_ANTHROPIC ? CUCO_LLM_ANTHROPIC : CUCO_LLM_OPENAI;
        k->resp->error = cuco_sprintf("HTTP %ld from %s: %s%s%s%s", http, k->url, msg ? msg : "",
                                      http == 401 || http == 403 ? " (check " : "",
                                      http == 401 || http == 403 ? c->key_env[api] : "",
                                      http == 401 || http == 403 ? ")" : "");
        free(msg);
        return;
    }
    cuco_err pe = CUCO_ERR_INIT;
    if (cuco_llm_response_parse(k->req->api, k->rx.data, k->rx.len, k->resp, &pe)) {
        k->resp->status = CUCO_LLM_BAD_RESPONSE;
        k->resp->error = cuco_strdup(cuco_err_msg(&pe));
        free(k->resp->text);
        k->resp->text = NULL;
    } else if (cuco_llm_usage_check(k->req, k->resp, &pe)) {
        refuse_usage(k, cuco_err_msg(&pe));
    } else {
        k->resp->status = CUCO_LLM_OK;
        k->resp->cost_usd = cuco_llm_cost(k->price, k->resp->input_tokens, k->resp->cached_tokens,
                                          k->resp->cache_write_tokens, k->resp->output_tokens);
    }
    cuco_err_clear(&pe);
}

static void call_release(struct call *k)
{
    free(k->url);
    free(k->body);
    free_headers(k->headers);
    cuco_buf_free(&k->rx);
}

int cuco_llm_batch_run(cuco_llm_client *c, const cuco_llm_request *reqs, cuco_llm_response *resps,
                       size_t n, cuco_llm_budget *budget, cuco_err *e)
{
    if (n == 0)
        return 0;
    struct call *calls = calloc(n, sizeof *calls);
    if (!calls)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    CURLM *multi = curl_multi_init();
    if (!multi) {
        free(calls);
        return cuco_err_set(e, CUCO_ENET, "libcurl: cannot create a multi handle");
    }
    double t0 = now_s();
    size_t pending = 0;
    for (size_t i = 0; i < n; i++) {
        struct call *k = &calls[i];
        memset(&resps[i], 0, sizeof resps[i]);
        k->req = &reqs[i];
        k->resp = &resps[i];
        k->all_timeouts = 1;
        k->state = CALL_DONE;
        k->price = cuco_llm_prices_find(c->prices, reqs[i].model);
        if (budget && budget->limit_usd > 0) {
            if (!k->price) {
                k->resp->status = CUCO_LLM_BUDGET;
                k->resp->error = cuco_sprintf("model '%s' has no price, so a budget cannot be "
                                              "kept: give it one (--price or a prices file)",
                                              reqs[i].model);
                continue;
            }
            cuco_err be = CUCO_ERR_INIT;
            k->estimate_usd = cuco_llm_estimate_cost(k->price, &reqs[i]);
            if (cuco_llm_budget_reserve(budget, k->estimate_usd, &be)) {
                k->resp->status = CUCO_LLM_BUDGET;
                k->resp->error = cuco_strdup(cuco_err_msg(&be));
                cuco_err_clear(&be);
                continue;
            }
            k->admitted = 1;
        } else if (budget) {
            /* no limit: nothing to reserve, but the spend is still counted */
            k->estimate_usd = 0;
            k->admitted = 1;
        }
        if (call_prepare(c, k)) {
            if (k->admitted) {
                cuco_llm_budget_commit(budget, k->estimate_usd, 0);
                k->admitted = 0;
            }
            continue;
        }
        k->state = CALL_WAITING;
        k->next_at = t0;
        k->started = t0;
        pending++;
    }
    int rc = 0;
    int in_flight = 0;
    while (pending > 0) {
        double now = now_s();
        double next_due = INFINITY;
        for (size_t i = 0; i < n; i++) {
            struct call *k = &calls[i];
            if (k->state != CALL_WAITING)
                continue;
            if (k->next_at <= now && in_flight < c->max_parallel) {
                if (call_start(c, multi, k)) {
                    rc = cuco_err_set(e, CUCO_ENET, "libcurl: cannot start a request");
                    goto out;
                }
                in_flight++;
            } else if (k->next_at < next_due) {
                next_due = k->next_at;
            }
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct call *k = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&k);
            CURLcode result = msg->data.result;
            curl_multi_remove_handle(multi, msg->easy_handle);
            in_flight--;
            call_finish_attempt(c, k, result, now_s());
            curl_easy_cleanup(k->easy);
            k->easy = NULL;
            if (k->state == CALL_DONE) {
                pending--;
                k->resp->latency_s = now_s() - k->started;
                if (k->admitted) {
                    refuse_over_budget(budget, k);
                    cuco_llm_budget_commit(budget, k->estimate_usd, k->resp->cost_usd);
                }
                k->admitted = 0;
            } else if (k->next_at < next_due) {
                next_due = k->next_at;
            }
        }
        if (pending == 0)
            break;
        double wait = isinf(next_due) ? 1.0 : next_due - now_s();
        if (wait < 0)
            wait = 0;
        if (wait > 1.0)
            wait = 1.0;
        if (in_flight > 0 || wait > 0)
            curl_multi_poll(multi, NULL, 0, (int)(wait * 1000) + (in_flight > 0 ? 0 : 1), NULL);
    }
out:
    for (size_t i = 0; i < n; i++) {
        struct call *k = &calls[i];
        if (k->easy) {
            curl_multi_remove_handle(multi, k->easy);
            curl_easy_cleanup(k->easy);
        }
        if (k->admitted)
            cuco_llm_budget_commit(budget, k->estimate_usd, 0);
        call_release(k);
    }
    curl_multi_cleanup(multi);
    free(calls);
    return rc;
}
