/* rules_sched.c: the schedules of the rule route: each rewritten call offered to the
 * schedule scans (schedule_scan.c, split_scan.c, send_made.c), their plans
 * turned into edits and their report lines. */
#include "rules_int.h"
#include "scan_int.h"

static void sched_sites_add(sched_sites *s, size_t site)
{
    s->n++;
    s->last = site;
}

void rl_site_switch_condition(cuco_buf *g, const sched_sites *s, const char *prefix)
{
    if (s->n == 1)
        cuco_buf_printf(g, " when %s_%zu=1", prefix, s->last);
    cuco_buf_putc(g, '\n');
}

int rl_sched_candidate(ctx *c, size_t tok, int group)
{
    size_t *t = realloc(c->sched_toks, (c->nsched + 1) * sizeof(*t));
    if (!t)
        return CUCO_ENOMEM;
    c->sched_toks = t;
    int *g = realloc(c->sched_group, (c->nsched + 1) * sizeof(*g));
    if (!g)
        return CUCO_ENOMEM;
    c->sched_group = g;
    c->sched_toks[c->nsched] = tok;
    c->sched_group[c->nsched++] = group;
    const char *api = c->v.src + tk(&c->v, tok)->off;
    size_t len = tk(&c->v, tok)->len;
    unsigned reads = cuco_glue_reads_of(api, len);
    c->glue.reads |= reads;
    if (len == strlen("ncclAllGather") && !strncmp(api, "ncclAllGather", len))
        c->n_gathers++;
    else
        c->glue.reads_besides_gather |= reads;
    return 0;
}

static int sched_editable(void *ctxp, size_t off)
{
    const ctx *c = ctxp;
    return c->nblocks == 0 || rl_in_block(c, off);
}

/* Schedule (b)'s knob and report line for the all-gather of site k, or
 * consume_as_received's for the receive of site k. */
static int split_report(ctx *c, const cuco_sched_plan *plan, size_t k, int line, const char *api)
{
    int split = plan->applies && plan->split;
    const char *name = cuco_sched_consumer_split(api);
    int rc = 0;
    if (split) {
        sched_sites_add(plan->split_recv ? &c->recv_splits : &c->splits, k);
        c->gemm_splits += !plan->split_kernel;
        if (plan->split_attention)
            sched_sites_add(&c->attn_splits, k);
        c->attn_lends += plan->split_lend;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_SPLIT_%zu 1 // cuco:knob run 0 1\n", k);
    }
    if (rc == 0)
        rc = split ? cuco_tx_notes_add(&c->r->notes, plan->split_line, "schedule",
                                       "%s: %s (knob CUCO_SPLIT_%zu)", name, plan->split_note, k)
                   : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                       "%s does not apply to %s: %s", name, api,
                                       plan->split_note ? plan->split_note : "no placement");
    return rc;
}

/* warm_read's knob and report line for the all-gather or all-to-all of
 * site k. */
static int warm_report(ctx *c, const cuco_sched_plan *plan, size_t k, int line, const char *api)
{
    int rc = 0;
    if (plan->warm)
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_WARM_%zu %d // cuco:knob run 0 1\n", k,
                             plan->warm_default);
    if (rc == 0)
        rc = plan->warm
                 ? cuco_tx_notes_add(&c->r->notes, plan->warm_line, "schedule",
                                     "warm_read: %s (knob CUCO_WARM_%zu)", plan->warm_note, k)
                 : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                     "warm_read does not apply to %s: %s", api, plan->warm_note);
    return rc;
}

/* producer_split's knob and report line for the all-reduce of site k. */
static int produce_report(ctx *c, const cuco_sched_plan *plan, size_t k, int line, const char *api)
{
    int rc = 0;
    /* On by default for a kernel feeding an all-reduce (measured:
     * bench/README.md, "Producer split of a kernel, ranges on two streams");
     * off for a GEMM, and for a reduce-scatter (its copy-engine steps were
     * slower than the whole device reduce-scatter: bench/README.md,
     * "Producer split into a reduce-scatter"). */
    int on = plan->produce_kernel && strcmp(api, "ncclAllReduce") == 0;
    if (plan->produce) {
        sched_sites_add(&c->produces, k);
        c->gemm_produces += !plan->produce_kernel;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_PSPLIT_%zu %d // cuco:knob run 0 1\n", k, on);
    }
    if (rc == 0)
        rc = plan->produce
                 ? cuco_tx_notes_add(&c->r->notes, plan->produce_line, "schedule",
                                     "producer_split: %s (knob CUCO_PSPLIT_%zu, default %s)",
                                     plan->produce_note, k, on ? "on" : "off")
                 : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                     "producer_split does not apply to %s: %s", api,
                                     plan->produce_note ? plan->produce_note : "no placement");
    return rc;
}

/* Whether an earlier plan's consumer split rewrote the GEMM (or launch)
 * whose name is at byte off. */
static int split_taken(const ctx *c, size_t off)
{
    for (size_t i = 0; i < c->nsplit_gemms; i++)
        if (c->split_gemms[i] == off)
            return 1;
    return 0;
}

/* A later all-gather whose first consumer an earlier one already split: the
 * attention split of a kernel waits for the pieces of every all-gather of
 * its keys, so this one keeps its edits but the launch's (the earlier plan
 * rewrote it); any other split consumer reads one gathered buffer per
 * part, so this all-gather's plan is dropped (it stays in place, before the
 * split consumer on its stream). */
static int split_shared(ctx *c, cuco_sched_plan *plan)
{
    if (!plan->split || !split_taken(c, plan->split_gemm_off))
        return 0;
    size_t kept = 0;
    for (size_t i = 0; i < plan->nedits; i++) {
        cuco_sched_edit *x = &plan->edits[i];
        int launch = x->off == plan->split_gemm_off && x->len > 0;
        if (!plan->split_attention || launch)
            free(x->text);
        else
            plan->edits[kept++] = *x;
    }
    plan->nedits = kept;
    free(plan->split_note);
    if (plan->split_attention) {
        plan->split_note = cuco_sprintf("joins the attention split of the kernel at line %d: its "
                                        "parts wait for this all-gather's pieces too",
                                        plan->split_line);
    } else {
        plan->split = plan->applies = 0;
        free(plan->note);
        plan->note = cuco_sprintf("its first consumer (line %d) is already split for an earlier "
                                  "all-gather",
                                  plan->split_line);
        plan->split_note = cuco_strdup(plan->note ? plan->note : "");
        if (!plan->note)
            return CUCO_ENOMEM;
    }
    return plan->split_note ? 0 : CUCO_ENOMEM;
}

/* Whether every scheduled call of the group of site k is an all-gather,
 * all-reduce or reduce-scatter: cuco_tx::group_start/end defer only the
 * point-to-point calls (and the collectives made of them), so each of
 * these runs where it stands and may be scheduled as if ungrouped. */
static int group_of_collectives(const ctx *c, size_t k)
{
    const sview *v = &c->v;
    for (size_t j = 0; j < c->nsched; j++) {
        size_t t = c->sched_toks[j];
        if (c->sched_group[j] == c->sched_group[k] && !is(v, t, "ncclAllGather") &&
            !is(v, t, "ncclAllReduce") && !is(v, t, "ncclReduceScatter"))
            return 0;
    }
    return 1;
}

/* A GEMM takes one of the two splits: the producer split of a GEMM the
 * consumer split already rewrote is dropped (its edits and its knob), with
 * the reason in its note. */
static int one_split_per_gemm(ctx *c, cuco_sched_plan *plan)
{
    if (plan->split) {
        size_t *g = realloc(c->split_gemms, (c->nsplit_gemms + 1) * sizeof *g);
        if (!g)
            return CUCO_ENOMEM;
        c->split_gemms = g;
        c->split_gemms[c->nsplit_gemms++] = plan->split_gemm_off;
    }
    if (!plan->produce || !split_taken(c, plan->produce_gemm_off))
        return 0;
    for (size_t i = plan->produce_edit0; i < plan->nedits; i++)
        free(plan->edits[i].text);
    plan->nedits = plan->produce_edit0;
    plan->produce = 0;
    free(plan->produce_note);
    plan->produce_note = cuco_sprintf("the GEMM before it (line %d) is already split by "
                                      "consumer_split_by_source",
                                      plan->produce_line);
    return plan->produce_note ? 0 : CUCO_ENOMEM;
}

/* Edits of a plan into the transform's list; an insertion at the start of a
 * block goes inside it. */
static int plan_apply(ctx *c, const cuco_sched_edit *edits, size_t n)
{
    const sview *v = &c->v;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const cuco_sched_edit *x = &edits[i];
        static const char lt_glue[] = "cuco_tx::lt_matmul_"; /* split_scan.c's gemm_table */
        c->gemm_lt |= x->text && !strncmp(x->text, lt_glue, sizeof lt_glue - 1);
        rc = rl_add_edit(c, rl_tok_at(v, x->stmt_off), x->off, x->len, x->text);
        if (rc == 0 && x->len == 0)
            c->edits[c->nedits - 1].seq = LONG_MAX;
    }
    return rc;
}

/* Schedule send_as_produced for the ncclSend of site k (send_made.c). */
static int send_made_apply(ctx *c, const char *text, size_t k, int grouped, cuco_err *e)
{
    const sview *v = &c->v;
    size_t tok = c->sched_toks[k];
    int line = tk(v, tok)->line;
    if (grouped)
        return cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                 "send_as_produced does not apply to ncclSend: inside "
                                 "ncclGroupStart/ncclGroupEnd");
    cuco_send_made_plan plan;
    int rc = send_made_scan_view(v, tk(v, tok)->off, (int)k, sched_editable, c, &plan, e);
    if (rc == 0 && plan.applies)
        rc = plan_apply(c, plan.edits, plan.nedits);
    if (rc == 0 && plan.applies) {
        c->send_made = 1;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_SENDP_%zu 1 // cuco:knob run 0 1\n", k);
    }
    if (rc == 0)
        rc = plan.applies
                 ? cuco_tx_notes_add(&c->r->notes, plan.gemm_line, "schedule",
                                     "send_as_produced: %s (knob CUCO_SENDP_%zu)", plan.note, k)
                 : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                     "send_as_produced does not apply to ncclSend: %s",
                                     plan.note ? plan.note : "no plan");
    cuco_send_made_plan_free(&plan);
    return rc;
}

/* Schedule prefetch_next for the all-gather of site k (sched_prefetch.c):
 * *taken is 1 when it applies, and the call then takes no other schedule. */
static int prefetch_apply(ctx *c, size_t k, const char *api, cuco_err *e, int *taken)
{
    const sview *v = &c->v;
    size_t tok = c->sched_toks[k];
    int line = tk(v, tok)->line;
    cuco_sched_plan plan;
    int rc = sched_prefetch_view(v, tk(v, tok)->off, api, (int)k, sched_editable, c, &plan, e);
    *taken = rc == 0 && plan.applies;
    if (*taken)
        rc = plan_apply(c, plan.edits, plan.nedits);
    if (rc == 0 && *taken)
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_PREF_%zu %d // cuco:knob run 0 1%s\n", k,
                             plan.knob_default, plan.knob_default > 1 ? " 2" : "");
    if (rc == 0)
        rc = *taken ? cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                        "prefetch_next: %s (knob CUCO_PREF_%zu)", plan.note, k)
                    : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                        "prefetch_next does not apply to %s: %s", api,
                                        plan.note ? plan.note : "no plan");
    static const char *const others[] = {"early_start_late_wait", "consumer_split_by_source",
                                         "warm_read", NULL};
    for (int i = 0; rc == 0 && *taken && others[i]; i++)
        rc = cuco_tx_notes_add(&c->r->notes, line, "schedule",
                               "%s does not apply to %s: the call is prefetch_next's", others[i],
                               api);
    cuco_sched_plan_free(&plan);
    return rc;
}

static int sched_apply(ctx *c, const char *text, size_t k, cuco_err *e)
{
    const sview *v = &c->v;
    size_t tok = c->sched_toks[k];
    char *api = cuco_strndup(v->src + tk(v, tok)->off, tk(v, tok)->len);
    if (!api)
        return CUCO_ENOMEM;
    int line = tk(v, tok)->line, rc = 0;
    const char *split_name = cuco_sched_consumer_split(api);
    int taken = 0;
    if (strcmp(api, "ncclSend") == 0)
        rc = send_made_apply(c, text, k, c->sched_group[k], e);
    else if (strcmp(api, "ncclAllGather") == 0 && !c->sched_group[k])
        rc = prefetch_apply(c, k, api, e, &taken);
    if (rc != 0 || taken) {
        free(api);
        return rc;
    }
    if (c->sched_group[k] && !group_of_collectives(c, k)) {
        rc = cuco_tx_notes_add(&c->r->notes, line, "schedule",
                               "early_start_late_wait does not apply to %s: inside "
                               "ncclGroupStart/ncclGroupEnd with point-to-point calls, the group "
                               "is issued as one",
                               api);
        if (rc == 0 && split_name)
            rc = cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                   "%s does not apply to %s: inside ncclGroupStart/ncclGroupEnd",
                                   split_name, api);
        free(api);
        return rc;
    }
    cuco_sched_plan plan;
    rc = sched_scan_view(v, tk(v, tok)->off, api, (int)k, c->sem, c->n_sem, sched_editable, c,
                         &plan, e);
    if (rc == 0)
        rc = split_shared(c, &plan);
    if (rc == 0)
        rc = one_split_per_gemm(c, &plan);
    if (rc == 0 && (plan.applies || plan.produce || plan.warm))
        rc = plan_apply(c, plan.edits, plan.nedits);
    if (rc == 0 && plan.applies)
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_EARLY_%zu %d // cuco:knob run 0 1\n", k,
                             plan.knob_default);
    if (rc == 0)
        rc = plan.applies ? cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                              "%s (knob CUCO_EARLY_%zu)", plan.note, k)
                          : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                              "early_start_late_wait does not apply to %s: %s", api,
                                              plan.note ? plan.note : "no placement");
    if (rc == 0 && split_name)
        rc = split_report(c, &plan, k, line, api);
    if (rc == 0 && plan.warm_note)
        rc = warm_report(c, &plan, k, line, api);
    if (rc == 0 && cuco_sched_producer_fed(api))
        rc = produce_report(c, &plan, k, line, api);
    cuco_sched_plan_free(&plan);
    free(api);
    return rc;
}

/* The report line of a call a schedule would have served, in a program
 * that captures streams into graphs. */
static int sched_not_under_capture(ctx *c, size_t k)
{
    const cuco_tok *t = tk(&c->v, c->sched_toks[k]);
    return cuco_tx_notes_add(&c->r->notes, t->line, "schedule",
                             "no schedule applies to %.*s: the program captures streams into "
                             "CUDA graphs (line %d), whose replays would repeat the schedules' "
                             "host-side decisions",
                             (int)t->len, c->v.src + t->off, c->capture_line);
}

int rl_sched_all(ctx *c, const char *text, cuco_err *e)
{
    /* program order: point-to-point calls were recorded after the collectives */
    for (size_t i = 1; i < c->nsched; i++)
        for (size_t j = i; j > 0 && c->sched_toks[j - 1] > c->sched_toks[j]; j--) {
            size_t t = c->sched_toks[j];
            int g = c->sched_group[j];
            c->sched_toks[j] = c->sched_toks[j - 1];
            c->sched_group[j] = c->sched_group[j - 1];
            c->sched_toks[j - 1] = t;
            c->sched_group[j - 1] = g;
        }
    int rc = 0;
    for (size_t k = 0; k < c->nsched && rc == 0; k++)
        rc = c->capture_line ? sched_not_under_capture(c, k) : sched_apply(c, text, k, e);
    return rc;
}
