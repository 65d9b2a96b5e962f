/* llm_mutators.c: the LLM mutators (llm_diff, llm_full, llm_cross, llm)
 * behind the engine's mutator interface. Each proposal builds its prompts
 * from the parent, the island's best programs, the run's recent failures and
 * meta summary, asks the run's LLM session (model bandit, budget, recording),
 * and applies the answer with the patch engine and its frozen guard. */
#include "cuco/doe.h"
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/hash.h"
#include "cuco/patch.h"
#include "cuco/program.h"
#include "cuco/redact.h"

/* Marks the error of a child whose LLM call failed (no fault of the code). */
#define LLM_CALL_FAILED "LLM call failed"

struct pending_reward {
    char hash[17];
    size_t arm;
    double cost_usd;
    double parent_score;
};

struct llm_mutator {
    char *kind;
    cuco_llm_session *session;
    const char *const *meta_summary;
    char *hardware;
    struct pending_reward *pending;
    size_t n_pending;
};

struct apply_ctx {
    const char *seed;
};

static int apply_answer(void *ctx, cuco_llm_prompt_kind kind, const char *parent,
                        const char *answer, char **child, char **reason)
{
    const struct apply_ctx *a = ctx;
    cuco_err e = CUCO_ERR_INIT;
    /* Models do not always answer in the form asked for: SEARCH/REPLACE
     * blocks are applied as a diff whatever the prompt, and whole blocks
     * answered to a diff prompt as a rewrite. */
    int as_diff = strstr(answer, "<<<<<<< SEARCH") != NULL ||
                  (kind == CUCO_LLM_PROMPT_DIFF && !strstr(answer, "EVOLVE-BLOCK-START"));
    int rc = as_diff ? cuco_patch_apply_diff(parent, answer, child, &e)
                     : cuco_patch_apply_rewrite(parent, answer, child, &e);
    if (!rc && (rc = cuco_patch_guard(a->seed ? a->seed : parent, *child, &e))) {
        free(*child);
        *child = NULL;
    }
    if (rc)
        *reason = cuco_strdup(cuco_err_msg(&e));
    cuco_err_clear(&e);
    return rc;
}

/* Rewards the bandit for children evaluated since the last call. */
static void collect_rewards(struct llm_mutator *lm, cuco_db *db, int64_t run_id)
{
    if (!lm->n_pending || !db)
        return;
    cuco_db_program *ps = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    if (db_programs_list(db, run_id, NULL, &ps, &n, &e)) {
        cuco_err_clear(&e);
        return;
    }
    for (size_t i = 0; i < lm->n_pending;) {
        struct pending_reward *pr = &lm->pending[i];
        int done = 0;
        for (size_t j = 0; j < n && !done; j++) {
            if (!ps[j].code_hash || strcmp(ps[j].code_hash, pr->hash) || !ps[j].status ||
                !strcmp(ps[j].status, "pending"))
                continue;
            double gain =
                ps[j].score >= 0 && pr->parent_score >= 0 ? ps[j].score - pr->parent_score : 0;
            cuco_llm_session_reward(lm->session, pr->arm, gain, pr->cost_usd);
            done = 1;
        }
        if (done)
            lm->pending[i] = lm->pending[--lm->n_pending];
        else
            i++;
    }
    db_programs_free(ps, n);
}

static void remember(struct llm_mutator *lm, const char *text, size_t arm, double cost,
                     double parent_score)
{
    struct pending_reward *grown = realloc(lm->pending, (lm->n_pending + 1) * sizeof *grown);
    if (!grown)
        return;
    lm->pending = grown;
    struct pending_reward *pr = &lm->pending[lm->n_pending++];
    cuco_hash_hex(text, strlen(text), pr->hash);
    pr->arm = arm;
    pr->cost_usd = cost;
    pr->parent_score = parent_score;
}

/* The knob declared on 1-based line, or NULL. */
static const cuco_knob *knob_at(const cuco_knob *k, size_t n, int line)
{
    for (size_t i = 0; i < n; i++)
        if (k[i].line == line)
            return &k[i];
    return NULL;
}

/* 1 when child differs from parent only in the values of knobs (every
 * changed line is the same knob's declaration in both). Such a child is a
 * design-space move like the knob mutator's, and the engine treats it as one
 * (patch type "knob:...": exact duplicates are refused, near-duplicate code
 * is not a reason). */
static int knob_only_edit(const char *parent, const char *child)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_knob *kp = NULL, *kc = NULL;
    size_t np = 0, nc = 0;
    int only = 0;
    if (cuco_program_knobs(parent, &kp, &np, &e) || cuco_program_knobs(child, &kc, &nc, &e))
        goto out;
    const char *a = parent, *b = child;
    int line = 1, changed = 0;
    only = 1;
    while (only && (*a || *b)) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la)) {
            const cuco_knob *x = knob_at(kp, np, line), *y = knob_at(kc, nc, line);
            if (!x || !y || strcmp(x->name, y->name) || !*a || !*b)
                only = 0;
            changed = 1;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
        line++;
    }
    only = only && changed;
out:
    cuco_knobs_free(kp, np);
    cuco_knobs_free(kc, nc);
    cuco_err_clear(&e);
    return only;
}

static cuco_llm_prompt_kind pick_kind(const struct llm_mutator *lm, const cuco_mutate_ctx *c)
{
    if (!strcmp(lm->kind, "llm_diff"))
        return CUCO_LLM_PROMPT_DIFF;
    if (!strcmp(lm->kind, "llm_full"))
        return CUCO_LLM_PROMPT_FULL;
    if (!strcmp(lm->kind, "llm_cross"))
        return c->second ? CUCO_LLM_PROMPT_CROSS : CUCO_LLM_PROMPT_DIFF;
    if (c->second)
        return CUCO_LLM_PROMPT_CROSS;
    if (!c->exploit && c->rng && cuco_rng_uniform(c->rng) < 1.0 / 3.0)
        return CUCO_LLM_PROMPT_FULL;
    return CUCO_LLM_PROMPT_DIFF;
}

static int llm_propose(cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out, cuco_err *e)
{
    struct llm_mutator *lm = m->state;
    memset(out, 0, sizeof *out);
    if (!c->parent || !c->parent->code)
        return cuco_err_set(e, CUCO_EINVAL, "%s: no parent program", lm->kind);
    const char *fatal = cuco_llm_session_fatal(lm->session);
    if (fatal) {
        /* the calls cannot work: say so once (the first failure was
         * recorded) and let the engine stop proposing */
        out->exhausted = 1;
        return cuco_err_set(e, CUCO_ENOTFOUND, "%s: LLM calls cannot work: %s", lm->kind, fatal);
    }
    collect_rewards(lm, c->db, c->run_id);

    cuco_buf space = CUCO_BUF_INIT;
    cuco_llm_example *top = calloc(c->n_top ? c->n_top : 1, sizeof *top);
    cuco_llm_example *fails = calloc(c->n_failures ? c->n_failures : 1, sizeof *fails);
    if (!top || !fails) {
        free(top);
        free(fails);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->n_top; i++) {
        top[i].code = c->top[i].code;
        top[i].score = c->top[i].score;
        top[i].status = c->top[i].status;
        top[i].mutator = c->top[i].mutator;
        top[i].description = c->top[i].description;
    }
    size_t n_fails = 0;
    for (size_t i = 0; i < c->n_failures; i++) {
        /* a call that failed says nothing about the code: not shown */
        if (c->failures[i].error && strstr(c->failures[i].error, LLM_CALL_FAILED))
            continue;
        cuco_llm_example *f = &fails[n_fails++];
        f->score = -1;
        f->status = c->failures[i].status;
        f->mutator = c->failures[i].mutator;
        f->description = c->failures[i].description;
        f->error = cuco_redact_secrets(c->failures[i].error); /* freed below */
    }
    cuco_llm_prompt_ctx pc;
    memset(&pc, 0, sizeof pc);
    if (c->workload) {
        pc.workload = c->workload->name;
        pc.description = c->workload->description;
        cuco_llm_format_space(c->workload, &space);
        pc.design_space = space.len ? cuco_buf_str(&space) : NULL;
    }
    /* what the run measured, so that an edit starts from it (cuco/doe.h) */
    cuco_effects *fx = NULL;
    cuco_err fx_err = CUCO_ERR_INIT;
    if (c->db && cuco_effects_of_run(c->db, c->run_id, &fx, &fx_err) == 0 && fx && fx->n_mains) {
        cuco_buf_puts(&space, "\nKnob effects measured in this run (change of time, ± one"
                              " standard error):\n");
        cuco_effects_format(fx, "- ", 4, &space);
        pc.design_space = cuco_buf_str(&space);
    }
    cuco_effects_free(fx);
    cuco_err_clear(&fx_err);
    pc.hardware = lm->hardware;
    pc.parent_code = c->parent->code;
    pc.parent_score = c->parent->score;
    /* what the run stored goes to a model: no secret in it (cuco/redact.h) */
    char *metrics = c->parent->metrics_json ? cuco_redact_secrets(c->parent->metrics_json) : NULL;
    pc.parent_metrics = metrics;
    if (c->second) {
        pc.other_code = c->second->code;
        pc.other_score = c->second->score;
    }
    pc.top = c->n_top ? top : NULL;
    pc.n_top = c->n_top;
    pc.failures = n_fails ? fails : NULL;
    pc.n_failures = n_fails;
    char *meta =
        lm->meta_summary && *lm->meta_summary ? cuco_redact_secrets(*lm->meta_summary) : NULL;
    pc.meta_summary = meta;

    cuco_llm_prompt_kind kind = pick_kind(lm, c);
    struct apply_ctx actx = {c->seed_text};
    cuco_llm_candidate cand;
    int rc = cuco_llm_propose(lm->session, kind, &pc, 1, apply_answer, &actx, &cand, e);
    if (rc == 0 || rc == CUCO_EBUDGET) {
        if (cand.code && rc == 0) {
            out->text = cand.code;
            cand.code = NULL;
            out->patch_type = knob_only_edit(c->parent->code, out->text)
                                  ? cuco_sprintf("knob:%s", cuco_llm_prompt_kind_name(kind))
                                  : cuco_strdup(cuco_llm_prompt_kind_name(kind));
            out->description = cand.description && *cand.description
                                   ? cuco_sprintf("%s: %s", cand.model, cand.description)
                                   : cuco_strdup(cand.model);
            remember(lm, out->text, cand.arm, cand.cost_usd, c->parent->score);
        } else if (rc == 0) {
            if (cand.status == CUCO_LLM_OK)
                cuco_llm_session_reward(lm->session, cand.arm, 0, cand.cost_usd);
            /* a failed call is no fault of the candidate: CUCO_ENET makes
             * the engine store it as infra_error, not as a bad program */
            rc = cuco_err_set(e, cand.status == CUCO_LLM_OK ? CUCO_EINVAL : CUCO_ENET,
                              "%s (%s): %s%s", lm->kind, cand.model ? cand.model : "?",
                              cand.status == CUCO_LLM_OK ? "" : LLM_CALL_FAILED ": ",
                              cand.failure ? cand.failure : "unusable answer");
        }
        cuco_llm_candidate_free(&cand);
    }
    for (size_t i = 0; i < n_fails; i++)
        free((char *)fails[i].error);
    free(metrics);
    free(meta);
    free(top);
    free(fails);
    cuco_buf_free(&space);
    return rc;
}

static void llm_destroy(cuco_mutator *m)
{
    struct llm_mutator *lm = m->state;
    if (lm) {
        free(lm->kind);
        free(lm->hardware);
        free(lm->pending);
        free(lm);
    }
    m->state = NULL;
}

int cuco_llm_mutator_create(const char *kind, const cuco_llm_mutator_opts *o, cuco_mutator **out,
                            cuco_err *e)
{
    static const char *const kinds[] = {"llm", "llm_diff", "llm_full", "llm_cross"};
    const char *name = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kind && !strcmp(kind, kinds[i]))
            name = kinds[i];
    if (!name)
        return cuco_err_set(e, CUCO_ENOTFOUND, "unknown LLM mutator '%s'", kind ? kind : "");
    if (!o || !o->session)
        return cuco_err_set(e, CUCO_EINVAL, "%s needs an LLM session (--model)", name);
    cuco_mutator *m = calloc(1, sizeof *m);
    struct llm_mutator *lm = calloc(1, sizeof *lm);
    if (!m || !lm) {
        free(m);
        free(lm);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    lm->kind = cuco_strdup(name);
    lm->session = o->session;
    lm->meta_summary = o->meta_summary;
    lm->hardware = cuco_strdup(o->hardware);
    m->name = name;
    m->state = lm;
    m->propose = llm_propose;
    m->destroy = llm_destroy;
    *out = m;
    return 0;
}
