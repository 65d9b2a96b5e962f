/* llm_message.c: the wire format of the two LLM APIs: request bodies for
 * Anthropic Messages and OpenAI-compatible chat completions, and strict
 * parsing of their responses (text, stop reason, token usage) and of their
 * error bodies. No network here: llm_client.c sends what this file builds. */
#include "cuco/llm.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *cuco_llm_api_name(cuco_llm_api api)
{
    return api == CUCO_LLM_ANTHROPIC ? "anthropic" : "openai";
}

const char *cuco_llm_status_name(cuco_llm_status s)
{
    switch (s) {
    case CUCO_LLM_OK:
        return "ok";
    case CUCO_LLM_HTTP_ERROR:
        return "http_error";
    case CUCO_LLM_RETRIES_EXHAUSTED:
        return "retries_exhausted";
    case CUCO_LLM_TIMEOUT:
        return "timeout";
    case CUCO_LLM_BAD_RESPONSE:
        return "bad_response";
    case CUCO_LLM_NO_KEY:
        return "no_key";
    case CUCO_LLM_BUDGET:
        return "budget";
    }
    return "unknown";
}

int cuco_llm_model_parse(const char *spec, cuco_llm_api *api, char **model, cuco_err *e)
{
    if (!spec || !*spec)
        return cuco_err_set(e, CUCO_EINVAL, "empty model name");
    const char *colon = strchr(spec, ':');
    if (colon) {
        size_t plen = (size_t)(colon - spec);
        if (plen == 9 && !strncmp(spec, "anthropic", 9))
            *api = CUCO_LLM_ANTHROPIC;
        else if (plen == 6 && !strncmp(spec, "openai", 6))
            *api = CUCO_LLM_OPENAI;
        else
            return cuco_err_set(e, CUCO_EINVAL,
                                "model '%s': unknown provider '%.*s' (anthropic or openai)", spec,
                                (int)plen, spec);
        if (!colon[1])
            return cuco_err_set(e, CUCO_EINVAL, "model '%s': empty model name", spec);
        *model = cuco_strdup(colon + 1);
    } else {
        *api = cuco_str_starts_with(spec, "claude") ? CUCO_LLM_ANTHROPIC : CUCO_LLM_OPENAI;
        *model = cuco_strdup(spec);
    }
    return *model ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

void cuco_llm_response_free(cuco_llm_response *r)
{
    if (!r)
        return;
    free(r->text);
    free(r->stop_reason);
    free(r->error);
    memset(r, 0, sizeof *r);
}

int cuco_llm_openai_reasoning_model(const char *model)
{
    if (!model)
        return 0;
    if (cuco_str_starts_with(model, "gpt-5"))
        return 1;
    return model[0] == 'o' && model[1] >= '1' && model[1] <= '9';
}

char *cuco_llm_request_json(const cuco_llm_request *req)
{
    json_t *root = json_object();
    json_t *messages = json_array();
    /* OpenAI's reasoning models refuse max_tokens and any temperature but
     * the default; other OpenAI-compatible servers (vLLM, Ollama) expect
     * max_tokens */
    int reasoning = req->api == CUCO_LLM_OPENAI && cuco_llm_openai_reasoning_model(req->model);
    json_object_set_new(root, "model", json_string(req->model ? req->model : ""));
    json_object_set_new(root, reasoning ? "max_completion_tokens" : "max_tokens",
                        json_integer(req->max_tokens));
    if (req->temperature >= 0 && !reasoning)
        json_object_set_new(root, "temperature", json_real(req->temperature));
    if (req->api == CUCO_LLM_ANTHROPIC) {
        /* the system prompt (API notes, strategies) is the same for every
         * call of a run: mark it for Anthropic's prompt cache, so later calls
         * read it at a tenth of the input price */
        if (req->system && *req->system)
            json_object_set_new(root, "system",
                                json_pack("[{s:s, s:s, s:{s:s}}]", "type", "text", "text",
                                          req->system, "cache_control", "type", "ephemeral"));
    } else if (req->system && *req->system) {
        json_array_append_new(messages,
                              json_pack("{s:s, s:s}", "role", "system", "content", req->system));
    }
    json_array_append_new(
        messages, json_pack("{s:s, s:s}", "role", "user", "content", req->user ? req->user : ""));
    json_object_set_new(root, "messages", messages);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static long usage_long(json_t *usage, const char *key)
{
    json_t *v = json_object_get(usage, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : 0;
}

static int parse_anthropic(json_t *root, cuco_llm_response *r, cuco_err *e)
{
    json_t *content = json_object_get(root, "content");
    if (!json_is_array(content))
        return cuco_err_set(e, CUCO_EINVAL, "response has no 'content' array");
    cuco_buf text = CUCO_BUF_INIT;
    size_t i;
    json_t *block;
    json_array_foreach(content, i, block)
    {
        const char *type = json_string_value(json_object_get(block, "type"));
        const char *t = json_string_value(json_object_get(block, "text"));
        if (type && !strcmp(type, "text") && t)
            cuco_buf_puts(&text, t);
    }
    if (text.len == 0) {
        cuco_buf_free(&text);
        return cuco_err_set(e, CUCO_EINVAL, "response has no text content");
    }
    json_t *usage = json_object_get(root, "usage");
    if (!json_is_object(usage)) {
        cuco_buf_free(&text);
        return cuco_err_set(e, CUCO_EINVAL, "response has no 'usage'");
    }
    r->text = cuco_buf_detach(&text);
    r->input_tokens = usage_long(usage, "input_tokens");
    r->output_tokens = usage_long(usage, "output_tokens");
    r->cached_tokens = usage_long(usage, "cache_read_input_tokens");
    r->cache_write_tokens = usage_long(usage, "cache_creation_input_tokens");
    r->stop_reason = cuco_strdup(json_string_value(json_object_get(root, "stop_reason")));
    return 0;
}

static int parse_openai(json_t *root, cuco_llm_response *r, cuco_err *e)
{
    json_t *choices = json_object_get(root, "choices");
    if (!json_is_array(choices) || json_array_size(choices) == 0)
        return cuco_err_set(e, CUCO_EINVAL, "response has no 'choices'");
    json_t *choice = json_array_get(choices, 0);
    const char *t =
        json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
    if (!t || !*t)
        return cuco_err_set(e, CUCO_EINVAL, "response has no message content");
    json_t *usage = json_object_get(root, "usage");
    if (!json_is_object(usage))
        return cuco_err_set(e, CUCO_EINVAL, "response has no 'usage'");
    long prompt = usage_long(usage, "prompt_tokens");
    long cached = usage_long(json_object_get(usage, "prompt_tokens_details"), "cached_tokens");
    if (cached > prompt)
        cached = prompt;
    r->text = cuco_strdup(t);
    r->input_tokens = prompt - cached; /* prompt_tokens counts the cached ones too */
    r->cached_tokens = cached;
    r->output_tokens = usage_long(usage, "completion_tokens");
    r->stop_reason = cuco_strdup(json_string_value(json_object_get(choice, "finish_reason")));
    return 0;
}

int cuco_llm_response_parse(cuco_llm_api api, const char *body, size_t len, cuco_llm_response *r,
                            cuco_err *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(body ? body : "", body ? len : 0, 0, &jerr);
    if (!root)
        return cuco_err_set(e, CUCO_EINVAL, "response is not JSON: %s (line %d column %d)",
                            jerr.text, jerr.line, jerr.column);
    int rc;
    if (!json_is_object(root))
        rc = cuco_err_set(e, CUCO_EINVAL, "response is not a JSON object");
    else if (api == CUCO_LLM_ANTHROPIC)
        rc = parse_anthropic(root, r, e);
    else
        rc = parse_openai(root, r, e);
    json_decref(root);
    return rc;
}

char *cuco_llm_error_message(const char *body, size_t len)
{
    if (!body || !len)
        return cuco_strdup("(empty body)");
    json_t *root = json_loadb(body, len, 0, NULL);
    const char *msg = NULL;
    if (root) {
        json_t *err = json_object_get(root, "error");
        msg = json_string_value(json_object_get(err, "message"));
        if (!msg)
            msg = json_string_value(err); /* some servers send "error": "text" */
        if (!msg)
            msg = json_string_value(json_object_get(root, "message"));
    }
    char *out = msg ? cuco_strdup(msg) : cuco_strndup(body, len > 500 ? 500 : len);
    json_decref(root);
    return out;
}

double cuco_llm_retry_after_parse(const char *value)
{
    if (!value)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    if (!*value)
        return -1;
    char *end;
    double s = strtod(value, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (end != value && !*end)
        return s >= 0 ? s : -1;
    time_t when = curl_getdate(value, NULL);
    if (when < 0)
        return -1;
    double d = difftime(when, time(NULL));
    return d > 0 ? d : 0;
}
