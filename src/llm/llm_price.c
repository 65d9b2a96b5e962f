/* llm_price.c: what LLM calls cost. A table of $/million-token prices per
 * model (built-in for current Claude and GPT models, overridable from a JSON
 * file or a flag), the cost of a finished call, the upper estimate of a
 * call not yet sent that the budget admits calls against, and the bounds a
 * reply's claimed usage must keep to. */
#include "cuco/llm.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* List prices in $ per million tokens (input, output, cached input). A name
 * matches itself and any dated or suffixed variant ("claude-sonnet-4-5" covers
 * "claude-sonnet-4-5-20250929"); the longest matching prefix wins. */
static const struct {
    const char *model;
    double input, output, cached;
} builtin_prices[] = {
    {"claude-opus-4-5", 5.0, 25.0, 0.50},
    {"claude-opus-4-1", 15.0, 75.0, 1.50},
    {"claude-opus-4", 15.0, 75.0, 1.50},
    {"claude-sonnet-4-5", 3.0, 15.0, 0.30},
    {"claude-sonnet-4", 3.0, 15.0, 0.30},
    {"claude-3-7-sonnet", 3.0, 15.0, 0.30},
    {"claude-haiku-4-5", 1.0, 5.0, 0.10},
    {"claude-3-5-haiku", 0.80, 4.0, 0.08},
    {"gpt-5", 1.25, 10.0, 0.125},
    {"gpt-5-mini", 0.25, 2.0, 0.025},
    {"gpt-5-nano", 0.05, 0.40, 0.005},
    {"gpt-4.1", 2.0, 8.0, 0.50},
    {"gpt-4.1-mini", 0.40, 1.60, 0.10},
    {"gpt-4.1-nano", 0.10, 0.40, 0.025},
    {"gpt-4o", 2.50, 10.0, 1.25},
    {"gpt-4o-mini", 0.15, 0.60, 0.075},
    {"o3", 2.0, 8.0, 0.50},
    {"o4-mini", 1.10, 4.40, 0.275},
};

int cuco_llm_prices_init(cuco_llm_prices *t, cuco_err *e)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof builtin_prices / sizeof builtin_prices[0]; i++) {
        int rc = cuco_llm_prices_set(t, builtin_prices[i].model, builtin_prices[i].input,
                                     builtin_prices[i].output, builtin_prices[i].cached, e);
        if (rc)
            return rc;
    }
    return 0;
}

void cuco_llm_prices_free(cuco_llm_prices *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->items[i].model);
    free(t->items);
    memset(t, 0, sizeof *t);
}

int cuco_llm_prices_set(cuco_llm_prices *t, const char *model, double input, double output,
                        double cached_input, cuco_err *e)
{
    if (!model || !*model)
        return cuco_err_set(e, CUCO_EINVAL, "price without a model name");
    if (!(input >= 0 && output >= 0 && cached_input >= 0) || !isfinite(input) ||
        !isfinite(output) || !isfinite(cached_input))
        return cuco_err_set(e, CUCO_EINVAL, "price of '%s' is negative or not a number", model);
    for (size_t i = 0; i < t->n; i++) {
        if (!strcmp(t->items[i].model, model)) {
            t->items[i].input = input;
            t->items[i].output = output;
            t->items[i].cached_input = cached_input;
            return 0;
        }
    }
    cuco_llm_price *grown = realloc(t->items, (t->n + 1) * sizeof *grown);
    if (!grown)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    t->items = grown;
    cuco_llm_price *p = &t->items[t->n];
    p->model = cuco_strdup(model);
    if (!p->model)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    p->input = input;
    p->output = output;
    p->cached_input = cached_input;
    t->n++;
    return 0;
}

int cuco_llm_prices_load(cuco_llm_prices *t, const char *path, cuco_err *e)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return cuco_err_set_at(e, CUCO_EINVAL, path, jerr.line, "%s", jerr.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = cuco_err_set_at(e, CUCO_EINVAL, path, 1, "prices: expected an object of models");
        goto out;
    }
    const char *model;
    json_t *entry;
    json_object_foreach(root, model, entry)
    {
        json_t *in = json_object_get(entry, "input");
        json_t *outp = json_object_get(entry, "output");
        json_t *cached = json_object_get(entry, "cached_input");
        if (!json_is_number(in) || !json_is_number(outp) || (cached && !json_is_number(cached))) {
            rc = cuco_err_set_at(e, CUCO_EINVAL, path, 0,
                                 "prices: '%s' needs numbers 'input' and 'output' "
                                 "(and optionally 'cached_input')",
                                 model);
            goto out;
        }
        double inv = json_number_value(in);
        rc = cuco_llm_prices_set(t, model, inv, json_number_value(outp),
                                 cached ? json_number_value(cached) : inv, e);
        if (rc) {
            cuco_err_prefix(e, "%s", path);
            goto out;
        }
    }
out:
    json_decref(root);
    return rc;
}

int cuco_llm_prices_parse(cuco_llm_prices *t, const char *spec, cuco_err *e)
{
    char *copy = cuco_strdup(spec ? spec : "");
    if (!copy)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        double v[3] = {0, 0, -1};
        int nv = 0;
        if (eq) {
            *eq = 0;
            char *p = eq + 1;
            while (nv < 3) {
                char *end;
                v[nv] = strtod(p, &end);
                if (end == p)
                    break;
                nv++;
                if (*end != ',') {
                    p = end;
                    break;
                }
                p = end + 1;
            }
            if (*p)
                nv = 0;
        }
        if (!eq || nv < 2) {
            rc = cuco_err_set(e, CUCO_EINVAL,
                              "price '%s': expected model=input,output[,cached_input] in $/Mtok",
                              item);
            break;
        }
        rc = cuco_llm_prices_set(t, cuco_str_trim(item), v[0], v[1], nv == 3 ? v[2] : v[0], e);
        if (rc)
            break;
    }
    free(copy);
    return rc;
}

const cuco_llm_price *cuco_llm_prices_find(const cuco_llm_prices *t, const char *model)
{
    const cuco_llm_price *best = NULL;
    size_t best_len = 0;
    if (!t || !model)
        return NULL;
    for (size_t i = 0; i < t->n; i++) {
        const char *name = t->items[i].model;
        size_t len = strlen(name);
        if (!strcmp(name, model))
            return &t->items[i];
        /* a prefix counts only at a word boundary: "gpt-5" covers
         * "gpt-5-2025-08-07" but not "gpt-50" */
        if (len > best_len && !strncmp(name, model, len) &&
            (model[len] == '-' || model[len] == '@' || model[len] == ':')) {
            best = &t->items[i];
            best_len = len;
        }
    }
    return best;
}

double cuco_llm_cost(const cuco_llm_price *p, long input_tokens, long cached_tokens,
                     long cache_write_tokens, long output_tokens)
{
    if (!p)
        return 0;
    return ((double)input_tokens * p->input + (double)cached_tokens * p->cached_input +
            (double)cache_write_tokens * p->input * 1.25 + (double)output_tokens * p->output) /
           1e6;
}

long cuco_llm_estimate_input_tokens(const cuco_llm_request *req)
{
    size_t bytes = (req->system ? strlen(req->system) : 0) + (req->user ? strlen(req->user) : 0);
    return (long)((bytes + 2) / 3) + 16;
}

double cuco_llm_estimate_cost(const cuco_llm_price *p, const cuco_llm_request *req)
{
    if (!p)
        return 0;
    return cuco_llm_cost(p, cuco_llm_estimate_input_tokens(req), 0, 0,
                         req->max_tokens > 0 ? req->max_tokens : 0);
}

long cuco_llm_max_input_tokens(const cuco_llm_request *req)
{
    size_t bytes = (req->system ? strlen(req->system) : 0) + (req->user ? strlen(req->user) : 0);
    return (long)bytes + 1000000;
}

long cuco_llm_max_output_tokens(const cuco_llm_request *req)
{
    long max = req->max_tokens > 0 ? req->max_tokens : 0;
    return max + max / 10 + 64;
}

int cuco_llm_usage_check(const cuco_llm_request *req, const cuco_llm_response *r, cuco_err *e)
{
    long in = r->input_tokens, cached = r->cached_tokens, written = r->cache_write_tokens;
    long out = r->output_tokens;
    if (in < 0 || cached < 0 || written < 0 || out < 0)
        return cuco_err_set(e, CUCO_EINVAL,
                            "usage has a negative token count (input %ld, cached %ld, cache "
                            "write %ld, output %ld)",
                            in, cached, written, out);
    long max_out = cuco_llm_max_output_tokens(req);
    if (out > max_out)
        return cuco_err_set(e, CUCO_EINVAL,
                            "usage claims %ld output tokens, more than max_tokens %d allows (%ld)",
                            out, req->max_tokens, max_out);
    long max_in = cuco_llm_max_input_tokens(req);
    /* summed as doubles: three longs near LONG_MAX would overflow */
    double all_in = (double)in + (double)cached + (double)written;
    if (all_in > (double)max_in)
        return cuco_err_set(e, CUCO_EINVAL,
                            "usage claims %.0f input tokens, more than a prompt of %ld bytes can "
                            "hold (%ld)",
                            all_in, max_in - 1000000, max_in);
    return 0;
}
