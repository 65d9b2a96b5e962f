/* llm_mutators.c: the LLM mutators (llm_diff, llm_full, llm_cross, llm)
 * behind the engine's mutator interface. Each proposal builds its prompts
 * from the parent, the island's best programs, the run's recent failures and
 * meta summary, asks the run's LLM session (model bandit, budget, recording),
 * and applies the answer with the patch engine and its frozen guard. */
#include "cuco/llm_mutate.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/hash.h"
#include "cuco/patch.h"

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
    int rc = kind == CUCO_LLM_PROMPT_DIFF ? cuco_patch_apply_diff(parent, answer, child, &e)
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
    for (size_t i = 0; i < c->n_failures; i++) {
        fails[i].score = -1;
        fails[i].status = c->failures[i].status;
        fails[i].mutator = c->failures[i].mutator;
        fails[i].description = c->failures[i].description;
        fails[i].error = c->failures[i].error;
    }
    cuco_llm_prompt_ctx pc;
    memset(&pc, 0, sizeof pc);
    if (c->workload) {
        pc.workload = c->workload->name;
        pc.description = c->workload->description;
        cuco_llm_format_space(c->workload, &space);
        pc.design_space = space.len ? cuco_buf_str(&space) : NULL;
    }
    pc.hardware = lm->hardware;
    pc.parent_code = c->parent->code;
    pc.parent_score = c->parent->score;
    pc.parent_metrics = c->parent->metrics_json;
    if (c->second) {
        pc.other_code = c->second->code;
        pc.other_score = c->second->score;
    }
    pc.top = c->n_top ? top : NULL;
    pc.n_top = c->n_top;
    pc.failures = c->n_failures ? fails : NULL;
    pc.n_failures = c->n_failures;
    pc.meta_summary = lm->meta_summary ? *lm->meta_summary : NULL;

    cuco_llm_prompt_kind kind = pick_kind(lm, c);
    struct apply_ctx actx = {c->seed_text};
    cuco_llm_candidate cand;
    int rc = cuco_llm_propose(lm->session, kind, &pc, 1, apply_answer, &actx, &cand, e);
    if (rc == 0 || rc == CUCO_EBUDGET) {
        if (cand.code && rc == 0) {
            out->text = cand.code;
            cand.code = NULL;
            out->patch_type = cuco_strdup(cuco_llm_prompt_kind_name(kind));
            out->description = cand.description && *cand.description
                                   ? cuco_sprintf("%s: %s", cand.model, cand.description)
                                   : cuco_strdup(cand.model);
            remember(lm, out->text, cand.arm, cand.cost_usd, c->parent->score);
        } else if (rc == 0) {
            if (cand.status == CUCO_LLM_OK)
                cuco_llm_session_reward(lm->session, cand.arm, 0, cand.cost_usd);
            rc =
                cuco_err_set(e, CUCO_EINVAL, "%s (%s): %s", lm->kind, cand.model ? cand.model : "?",
                             cand.failure ? cand.failure : "unusable answer");
        }
        cuco_llm_candidate_free(&cand);
    }
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
