/* llm_run.c: what a run needs to use LLM mutators, put together in one
 * place: the session (models, prices, budget, client settings) whose every
 * call is recorded in the run's llm_calls table, one mutator object per
 * configured mutator name (LLM or built-in, in the configured order), the
 * context of the LLM meta summary, and the LLM novelty judge. */
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/diff.h"
#include "cuco/log.h"

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

/* The next non-blank line of *p (advanced past it), trimmed: [*start, *len). */
static int next_line(const char **p, const char **start, size_t *len)
{
    while (**p) {
        const char *l = *p;
        size_t n = strcspn(l, "\n");
        *p = l + n + (l[n] == '\n');
        while (n && isspace((unsigned char)*l)) {
            l++;
            n--;
        }
        while (n && isspace((unsigned char)l[n - 1]))
            n--;
        if (n) {
            *start = l;
            *len = n;
            return 1;
        }
    }
    return 0;
}

/* 1 when the line is word, possibly wrapped in markdown emphasis (** or `)
 * and followed by a colon or a period. */
static int verdict_is(const char *l, size_t n, const char *word)
{
    size_t wl = strlen(word);
    while (n && (*l == '*' || *l == '_' || *l == '`')) {
        l++;
        n--;
    }
    while (n && (l[n - 1] == '*' || l[n - 1] == '_' || l[n - 1] == '`' || l[n - 1] == ':' ||
                 l[n - 1] == '.'))
        n--;
    return n == wl && !memcmp(l, word, wl);
}

int cuco_llm_judge_parse(const char *answer, int *novel, char **reason, cuco_err *e)
{
    const char *p = answer ? answer : "", *l = NULL;
    size_t n = 0;
    *reason = NULL;
    if (!next_line(&p, &l, &n))
        return cuco_err_set(e, CUCO_EINVAL, "the judge's answer is empty");
    if (verdict_is(l, n, "NOVEL"))
        *novel = 1;
    else if (verdict_is(l, n, "DUPLICATE"))
        *novel = 0;
    else
        return cuco_err_set(e, CUCO_EINVAL,
                            "the judge's first line is neither NOVEL nor DUPLICATE: \"%.*s\"",
                            (int)(n > 60 ? 60 : n), l);
    if (!next_line(&p, &l, &n)) {
        l = "";
        n = 0;
    }
    *reason = cuco_sprintf("%.*s", (int)(n > 300 ? 300 : n), l);
    if (!*reason)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    return 0;
}

/* Records on the run's latest call (the judge's) why its verdict was not
 * used, and warns. A failure to record is only logged: the run goes on. */
static void judge_note(cuco_llm_run *r, const char *why)
{
    cuco_warn("novelty judge: %s", why);
    cuco_err e = CUCO_ERR_INIT;
    int64_t id = 0;
    int rc = db_llm_call_last_id(r->sink.db, r->sink.run_id, &id, &e);
    if (rc == 0 && id > 0)
        rc = db_llm_call_describe(r->sink.db, id, NULL, why, &e);
    if (rc)
        cuco_warn("novelty judge: %s", cuco_err_msg(&e));
    cuco_err_clear(&e);
}

int cuco_llm_run_judge(void *ctx, int64_t run_id, const char *candidate, const char *neighbour,
                       double similarity, int *novel, cuco_buf *reason, cuco_err *e)
{
    cuco_llm_run *r = ctx;
    (void)run_id;
    *novel = 1;
    if (!r || !r->session)
        return cuco_err_set(e, CUCO_EINVAL, "the novelty judge needs an LLM session (--model)");
    char *tmpl = NULL, *blocks = NULL, *sim = NULL, *verdict_reason = NULL;
    cuco_buf diff = CUCO_BUF_INIT, user = CUCO_BUF_INIT;
    int rc = cuco_llm_template_load("novelty_judge.md", &tmpl, e);
    if (rc)
        goto out;
    if ((rc = cuco_diff_lines(neighbour, candidate, "existing", "candidate", 3, &diff, NULL, NULL,
                              e)))
        goto out;
    while (diff.len && diff.data[diff.len - 1] == '\n')
        diff.data[--diff.len] = '\0'; /* the template closes the fence */
    blocks = cuco_llm_blocks_text(candidate);
    sim = cuco_sprintf("%.2f", similarity);
    if (!blocks || !sim) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    const cuco_llm_var vars[] = {
        {"similarity", sim},
        {"diff", diff.len ? cuco_buf_str(&diff) : "(no line differs)"},
        {"candidate_blocks", blocks},
    };
    if ((rc = cuco_llm_template_fill(tmpl, "src/llm/prompts/novelty_judge.md", vars, 3, &user, e)))
        goto out;
    const char *users[1] = {cuco_buf_str(&user)};
    cuco_llm_reply reply;
    memset(&reply, 0, sizeof reply);
    rc = cuco_llm_session_ask(r->session, "novelty", NULL, users, 1, &reply, e);
    if (rc == 0 && reply.resp.status != CUCO_LLM_OK) {
        /* the call failed (recorded with its error): no verdict, evaluate */
        char *why = cuco_sprintf("no verdict (the call failed: %s), treated as NOVEL",
                                 cuco_llm_status_name(reply.resp.status));
        cuco_warn("novelty judge: %s", why ? why : "no verdict");
        cuco_buf_puts(reason, why ? why : "no verdict, treated as NOVEL");
        free(why);
    } else if (rc == 0) {
        cuco_err pe = CUCO_ERR_INIT;
        if (cuco_llm_judge_parse(reply.resp.text, novel, &verdict_reason, &pe) == 0) {
            cuco_buf_puts(reason, *verdict_reason ? verdict_reason : "no reason given");
        } else {
            *novel = 1;
            char *why = cuco_sprintf("unusable verdict, treated as NOVEL: %s", cuco_err_msg(&pe));
            judge_note(r, why ? why : "unusable verdict, treated as NOVEL");
            cuco_buf_puts(reason, why ? why : "unusable verdict, treated as NOVEL");
            free(why);
        }
        cuco_err_clear(&pe);
    }
    cuco_llm_response_free(&reply.resp);
out:
    free(tmpl);
    free(blocks);
    free(sim);
    free(verdict_reason);
    cuco_buf_free(&diff);
    cuco_buf_free(&user);
    return rc;
}
