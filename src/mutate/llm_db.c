/* llm_db.c: what the LLM mutators need from the run database: every LLM call
 * recorded in llm_calls, the island's best programs and the run's recent
 * failures for the prompts, and the rule-based meta summary. */
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"
#include "cuco/redact.h"

#include <stdlib.h>
#include <string.h>

int cuco_llm_db_record(void *ctx, const cuco_llm_call_record *rec, cuco_err *e)
{
    cuco_llm_db_sink *sink = ctx;
    cuco_db_llm_call c;
    memset(&c, 0, sizeof c);
    c.run_id = sink->run_id;
    c.program_id = sink->program_id;
    c.model = rec->model;
    c.input_tokens = rec->input_tokens + rec->cache_write_tokens;
    c.output_tokens = rec->output_tokens;
    c.cached_tokens = rec->cached_tokens;
    c.cost_usd = rec->cost_usd;
    c.latency_s = rec->latency_s;
    c.prompt_hash = rec->prompt_hash;
    c.status = rec->status;
    int64_t id = 0;
    int rc = db_llm_call_insert(sink->db, &c, &id, e);
    /* a service's error message can echo what it was sent */
    char *error = rec->error ? cuco_redact_secrets(rec->error) : NULL;
    if (!rc && (rec->purpose || rec->error))
        rc = db_llm_call_describe(sink->db, id, rec->purpose, error ? error : rec->error, e);
    free(error);
    if (rc)
        cuco_err_prefix(e, "recording an LLM call");
    return rc;
}

void cuco_llm_db_examples_free(cuco_llm_db_examples *ex)
{
    if (ex->top)
        db_programs_free(ex->top, ex->n_top);
    if (ex->all)
        db_programs_free(ex->all, ex->n_all);
    free(ex->top_ex);
    free(ex->fail_ex);
    memset(ex, 0, sizeof *ex);
}

static int is_failure(const char *status)
{
    return status && strcmp(status, "ok") && strcmp(status, "pending") &&
           strcmp(status, "rejected_duplicate") && strcmp(status, "rejected_novelty");
}

int cuco_llm_db_examples_load(cuco_db *db, int64_t run_id, int island, size_t n_top,
                              size_t n_failures, cuco_llm_db_examples *ex, cuco_llm_prompt_ctx *ctx,
                              cuco_err *e)
{
    memset(ex, 0, sizeof *ex);
    int rc = 0;
    if (n_top && (rc = db_programs_top(db, run_id, island, n_top, &ex->top, &ex->n_top, e)))
        goto fail;
    if (n_failures && (rc = db_programs_list(db, run_id, NULL, &ex->all, &ex->n_all, e)))
        goto fail;
    ex->top_ex = calloc(ex->n_top ? ex->n_top : 1, sizeof *ex->top_ex);
    ex->fail_ex = calloc(n_failures ? n_failures : 1, sizeof *ex->fail_ex);
    if (!ex->top_ex || !ex->fail_ex) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < ex->n_top; i++) {
        cuco_llm_example *x = &ex->top_ex[i];
        x->code = ex->top[i].code;
        x->score = ex->top[i].score;
        x->status = ex->top[i].status;
        x->mutator = ex->top[i].mutator;
        x->description = ex->top[i].description;
    }
    /* newest failures first */
    for (size_t i = ex->n_all; i > 0 && ex->n_fail < n_failures; i--) {
        const cuco_db_program *p = &ex->all[i - 1];
        if (!is_failure(p->status))
            continue;
        cuco_llm_example *x = &ex->fail_ex[ex->n_fail++];
        x->code = NULL;
        x->score = -1;
        x->status = p->status;
        x->mutator = p->mutator;
        x->description = p->description;
        x->error = p->error;
    }
    ctx->top = ex->n_top ? ex->top_ex : NULL;
    ctx->n_top = ex->n_top;
    ctx->failures = ex->n_fail ? ex->fail_ex : NULL;
    ctx->n_failures = ex->n_fail;
    return 0;
fail:
    cuco_llm_db_examples_free(ex);
    return rc;
}

/* The run's finished programs as meta entries, at most max of the newest
 * (0: all). *entries borrows from *ps: free both (free, db_programs_free). */
static int meta_entries(cuco_db *db, int64_t run_id, size_t max, cuco_db_program **ps, size_t *n,
                        cuco_meta_entry **entries, size_t *m, cuco_err *e)
{
    *m = 0;
    int rc = db_programs_list(db, run_id, NULL, ps, n, e);
    if (rc)
        return rc;
    *entries = calloc(*n ? *n : 1, sizeof **entries);
    if (!*entries) {
        db_programs_free(*ps, *n);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    size_t first = 0, finished = 0;
    for (size_t i = 0; i < *n; i++)
        finished += !((*ps)[i].status && !strcmp((*ps)[i].status, "pending"));
    for (size_t i = 0; i < *n; i++) {
        const cuco_db_program *p = &(*ps)[i];
        if (p->status && !strcmp(p->status, "pending"))
            continue;
        if (max && finished - first > max) {
            first++;
            continue;
        }
        cuco_meta_entry *x = &(*entries)[(*m)++];
        x->status = p->status;
        x->score = p->score;
        x->knobs_json = p->knobs_json;
        x->mutator = p->mutator;
        x->error = p->error;
    }
    return 0;
}

int cuco_llm_db_meta_rules(cuco_db *db, int64_t run_id, cuco_buf *out, cuco_err *e)
{
    cuco_db_program *ps = NULL;
    cuco_meta_entry *entries = NULL;
    size_t n = 0, m = 0;
    int rc = meta_entries(db, run_id, 0, &ps, &n, &entries, &m, e);
    if (rc)
        return rc;
    rc = cuco_meta_summary_rules(entries, m, out, e);
    free(entries);
    db_programs_free(ps, n);
    return rc;
}

/* Attempts shown to the model in one meta prompt. */
#define META_PROMPT_MAX_ENTRIES 200

int cuco_llm_db_meta_llm(void *ctx, int64_t run_id, int generation, const char *previous,
                         cuco_buf *out, cuco_err *e)
{
    const cuco_llm_db_meta_ctx *mc = ctx;
    (void)generation;
    cuco_db_program *ps = NULL;
    cuco_meta_entry *entries = NULL;
    size_t n = 0, m = 0;
    char *user = NULL;
    int rc = meta_entries(mc->db, run_id, META_PROMPT_MAX_ENTRIES, &ps, &n, &entries, &m, e);
    if (rc)
        return rc;
    rc = cuco_meta_summary_prompt(mc->workload, previous, entries, m, &user, e);
    if (rc == 0) {
        const char *users[1] = {user};
        cuco_llm_reply reply;
        memset(&reply, 0, sizeof reply);
        rc = cuco_llm_session_ask(mc->session, "meta", NULL, users, 1, &reply, e);
        if (rc == 0 && reply.resp.status == CUCO_LLM_OK && reply.resp.text && *reply.resp.text) {
            cuco_buf_puts(out, reply.resp.text);
        } else if (rc == 0) {
            /* a failed call: the run goes on with the rules' summary */
            rc = cuco_meta_summary_rules(entries, m, out, e);
        }
        cuco_llm_response_free(&reply.resp);
    }
    free(user);
    free(entries);
    db_programs_free(ps, n);
    return rc;
}
