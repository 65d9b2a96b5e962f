/* llm_run.c: what a run needs to use LLM mutators, put together in one
 * place: the session (models, prices, budget, client settings) whose every
 * call is recorded in the run's llm_calls table, one mutator object per
 * configured mutator name (LLM or built-in, in the configured order), and
 * the context of the LLM meta summary. */
#include "cuco/llm_mutate.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"

static int is_llm_name(const char *name)
{
    return name && (!strcmp(name, "llm") || !strcmp(name, "llm_diff") ||
                    !strcmp(name, "llm_full") || !strcmp(name, "llm_cross"));
}

int cuco_llm_run_needed(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_llm_name(names[i]))
            return 1;
    return 0;
}

void cuco_llm_run_free(cuco_llm_run *r)
{
    if (!r)
        return;
    for (size_t i = 0; r->mutators && i < r->n_mutators; i++)
        cuco_mutator_free(r->mutators[i]);
    free(r->mutators);
    cuco_llm_session_free(r->session);
    free(r->meta_summary);
    memset(r, 0, sizeof *r);
}

int cuco_llm_run_init(cuco_llm_run *r, const cuco_llm_run_opts *o, cuco_err *e)
{
    memset(r, 0, sizeof *r);
    r->sink.db = o->db;
    int rc = 0;
    char **models = NULL;
    char *prices = NULL;
    if (cuco_llm_run_needed(o->mutators, o->n_mutators)) {
        if (o->n_models == 0)
            return cuco_err_set(e, CUCO_EINVAL, "LLM mutators need a model (--model)");
        models = calloc(o->n_models + 1, sizeof *models);
        if (!models)
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        for (size_t i = 0; i < o->n_models; i++)
            models[i] = (char *)o->models[i];
        const char *env = getenv("CUCO_LLM_PRICES");
        if (env && *env && o->prices)
            prices = cuco_sprintf("%s;%s", env, o->prices);
        else if (o->prices)
            prices = cuco_strdup(o->prices);
        cuco_llm_session_opts so;
        memset(&so, 0, sizeof so);
        so.models = (const char *const *)models;
        so.budget_usd = o->budget_usd;
        so.spent_usd = o->spent_usd;
        so.max_tokens = o->max_tokens;
        so.temperature = -1;
        so.prices = prices; /* NULL: the session reads $CUCO_LLM_PRICES */
        so.client.anthropic_base_url = o->base_url;
        so.client.openai_base_url = o->base_url;
        so.record = cuco_llm_db_record;
        so.record_ctx = &r->sink;
        if ((rc = cuco_llm_session_new(&so, &r->session, e)) ||
            (rc = cuco_llm_session_check_keys(r->session, e)))
            goto out;
        r->meta_ctx.db = o->db;
        r->meta_ctx.session = r->session;
        r->meta_ctx.workload = o->workload;
    }
    r->mutators = calloc(o->n_mutators ? o->n_mutators : 1, sizeof *r->mutators);
    if (!r->mutators) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    r->n_mutators = o->n_mutators;
    for (size_t i = 0; i < o->n_mutators && !rc; i++) {
        if (is_llm_name(o->mutators[i])) {
            cuco_llm_mutator_opts mo = {r->session, (const char *const *)&r->meta_summary,
                                        o->hardware};
            rc = cuco_llm_mutator_create(o->mutators[i], &mo, &r->mutators[i], e);
        } else {
            rc = cuco_mutator_create(o->mutators[i], &r->mutators[i], e);
        }
    }
out:
    free(models);
    free(prices);
    return rc;
}
