/* sched_plan.c: the plan of one communication call (cuco_sched_scan): finds
 * its statement, block and function (sched_place.c), reads the block
 * (schedule_scan.c), places the call, tries the splits on the placement
 * (split_scan.c) and turns the result into edits and report lines: the
 * call's stream argument through cuco_tx::early_start, a
 * cuco_tx::early_wait before the first consumer (or the end of the block,
 * or, for a call that ends a loop's body, after the loop: sched_loop.c, or,
 * for a call that ends a wrapper, in each of its callers: sched_callers.c),
 * both keyed by the knob CUCO_EARLY_<site>. */
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The buffer and stream arguments of the calls schedule (a) places. */
typedef struct api_args {
    const char *api;
    int send, recv; /* argument positions; -1: none */
} api_args;

static const api_args api_table[] = {
    {"ncclAllGather", 0, 1}, {"ncclReduceScatter", 0, 1}, {"ncclAllReduce", 0, 1},
    {"ncclBroadcast", 0, 1}, {"ncclBcast", 0, 0},         {"ncclAlltoAll", 0, 1},
    {"ncclAllToAll", 0, 1},  {"ncclGather", 0, 1},        {"ncclScatter", 0, 1},
    {"ncclSend", 0, -1},     {"ncclRecv", -1, 0},         {NULL, 0, 0}};

/* The edits: the stream argument through early_start, the wait before node
 * pl->wait (or the block's '}'), naming the consumer's stream cs when it is
 * not NULL (wait_stream). */
static int plan_edits(scan *s, const cuco_sched_place *pl, size_t open, int site, const char *cs,
                      cuco_sched_plan *p)
{
    int rc = sched_start_edit(s, open, site, p);
    return rc == 0 ? sched_wait_edit(s, pl, site, cs, p) : rc;
}

/* The call's buffers and stream from its arguments. */
static int call_buffers(scan *s, size_t open, const char *api)
{
    const api_args *x = api_table;
    while (x->api && strcmp(x->api, api) != 0)
        x++;
    if (!x->api)
        return CUCO_ENOTFOUND;
    size_t a, b;
    int rc = 0;
    if (x->send >= 0 && arg_range(s->v, open, x->send, &a, &b)) {
        rc = scan_expr_heads(s->v, a, b, &s->send, 0);
        if (rc == 0)
            rc = scan_member_arg(s, a, b);
    }
    if (rc == 0 && x->recv >= 0 && arg_range(s->v, open, x->recv, &a, &b)) {
        rc = scan_expr_heads(s->v, a, b, &s->recv, 0);
        if (rc == 0)
            rc = scan_member_arg(s, a, b);
    }
    if (rc == 0 && arg_range(s->v, open, -1, &a, &b))
        s->stream = sview_text(s->v, a, b);
    return rc != 0 ? rc : s->stream ? 0 : CUCO_ENOMEM;
}

/* Why (a) does not apply to a call with nothing after it in its block: the
 * plan's note holds why the callers could not take the wait. */
static int end_note(const scan *s, cuco_sched_plan *p)
{
    char *why = p->note;
    p->note = cuco_sprintf("no independent work between the call and the end of its block "
                           "(line %d)%s%s",
                           tk(s->v, s->block_end)->line, why ? "; " : "", why ? why : "");
    free(why);
    return p->note ? 1 : CUCO_ENOMEM;
}

/* The report line of a plan that applies. */
static int applied_note(scan *s, const cuco_sched_place *pl, const char *api, cuco_sched_plan *p)
{
    const sview *v = s->v;
    int line = tk(v, s->call_tok)->line;
    char *where = pl->wait < s->n && pl->wait == s->fence && s->fence_line
                      ? cuco_sprintf("before the preprocessor conditional at line %d", p->wait_line)
                  : pl->wait < s->n
                      ? cuco_sprintf("before the statement at line %d", p->wait_line)
                      : cuco_sprintf("to the end of its block (line %d)", p->wait_line);
    free(p->note);
    p->note =
        where ? cuco_sprintf("early_start_late_wait: %s at line %d issued on a "
                             "side stream, wait moved %s (%zu independent launch%s in "
                             "between, %zu on its stream%s)",
                             api, line, where, pl->independent, pl->independent == 1 ? "" : "es",
                             pl->same_stream, pl->knob_default ? "" : "; knob default 0")
              : NULL;
    free(where);
    return p->note ? 0 : CUCO_ENOMEM;
}

/* (a) in the call's own block, placed at pl: the stream the wait names,
 * the checks, the edits and the report line. */
static int place_here(scan *s, const cuco_sched_place *pl, size_t open, const char *api, int site,
                      int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *plan)
{
    const sview *v = s->v;
    int rc = 0;
    const char *cs = NULL; /* the consumer's stream the wait names; NULL: the call's */
    if (pl->wait < s->n && !sched_wait_stream(v, &s->stmts[pl->wait], s->stream, &cs))
        rc = sched_note(plan,
                        "its first consumer (line %d) runs on a stream the wait cannot name "
                        "before it (an expression with a call or an increment, a name the "
                        "statement declares, or two streams besides the call's)",
                        tk(v, s->stmts[pl->wait].a)->line);
    size_t cut;
    int cut_line = rc == 0 ? sched_wait_cut(s, pl, &cut) : 0; /* the wait after a split GEMM */
    if (cut_line)
        rc = sched_apart_note(plan, cut_line);
    size_t at = rc == 0 ? sched_wait_token(s, pl) : 0;
    if (rc == 0 && editable && !editable(ctx, tk(v, at)->off))
        rc = sched_note(plan, "its first consumer (line %d) is in frozen code", tk(v, at)->line);
    if (rc == 0)
        rc = plan_edits(s, pl, open, site, cs, plan);
    if (rc == 0 && plan->split)
        rc = scan_split_edits(s, open, site, plan);
    if (rc == 0)
        rc = applied_note(s, pl, api, plan);
    if (rc == 0) {
        plan->applies = 1;
        plan->knob_default = pl->knob_default;
        plan->independent = pl->independent;
        plan->same_stream = pl->same_stream;
        plan->consumer_end = pl->wait >= s->n;
    }
    return rc;
}

int sched_scan_prepare(scan *s, size_t call_off, const char *api, cuco_sched_plan *plan,
                       cuco_err *e)
{
    const sview *v = s->v;
    size_t c = 0, call_stmt = 0;
    while (c < v->n && tk(v, c)->off != call_off)
        c++;
    if (c >= v->n || !is(v, c + 1, "("))
        return cuco_err_set(e, CUCO_EINVAL, "no call at byte %zu", call_off);
    s->call_tok = c;
    int rc = sched_locate(s, c, plan, &call_stmt);
    if (rc == 0)
        rc = call_buffers(s, c + 1, api);
    if (rc == 0)
        rc = scan_closure_and_escapes(s);
    if (rc == 0)
        rc = scan_read_block(s, call_stmt);
    if (rc == 0)
        rc = scan_members_apart(s);
    if (rc == 0 && s->call >= s->n)
        rc = sched_note(plan, "the call's statement was not found in its block", 0);
    return rc;
}

int sched_scan_view(const sview *v, size_t call_off, const char *api, int site,
                    const cuco_semantic *sem, size_t n_sem, int (*editable)(void *ctx, size_t off),
                    void *ctx, cuco_sched_plan *plan, cuco_err *e)
{
    memset(plan, 0, sizeof(*plan));
    scan s = {.v = v, .call = (size_t)-1, .sem = sem, .n_sem = n_sem};
    int rc = sched_scan_prepare(&s, call_off, api, plan, e);
    size_t c = s.call_tok;
    cuco_sched_place pl = {0};
    int placed = 0;
    if (rc == 0)
        placed = (rc = scan_place(&s, &pl)) == 0;
    if (placed && (rc = sched_fence(&s, &pl, plan)) != 0)
        placed = 0;
    int splits = cuco_sched_consumer_split(api) != NULL;
    if (rc == 0 && splits)
        rc = scan_try_split(&s, &pl, editable, ctx, plan);
    int done = 0, looped = 2; /* done: applied across the loop or in the callers */
    if (rc == 0 && pl.wait >= s.n && !plan->split) {
        looped = sched_loop(&s, api, site, editable, ctx, plan);
        done = looped == 0;
        rc = looped < 0 ? looped : 0;
    }
    if (rc == 0 && !done && pl.independent == 0 && pl.wait >= s.n) {
        if (plan->split) { /* the split's note is not why (a) does not apply */
            free(plan->note);
            plan->note = NULL;
        }
        rc = looped == 1 || plan->split ? 1 : sched_callers(&s, site, editable, ctx, plan);
        done = rc == 0;
        if (rc == 1)
            rc = end_note(&s, plan);
    } else if (rc == 0 && !done && pl.independent == 0) {
        rc = sched_note(plan,
                        "no independent work between the call and its first consumer (line %d)",
                        tk(v, s.stmts[pl.wait].a)->line);
    }
    if (rc == 0 && !done) /* done: applied, the wait after the loop or in the callers */
        rc = place_here(&s, &pl, c + 1, api, site, editable, ctx, plan);
    if (rc >= 0 && splits && !plan->applies)
        rc = scan_split_fails(plan, rc);
    if (rc >= 0 && splits && !scan_is_recv(&s)) {
        int wrc = scan_try_warm(&s, &pl, placed, site, plan);
        rc = wrc < 0 ? wrc : rc;
    }
    if (rc >= 0 && cuco_sched_producer_fed(api) && s.call < s.n) {
        int prc = scan_try_produce(&s, site, editable, ctx, plan);
        rc = prc < 0 ? prc : rc;
    }
    sched_scan_free(&s);
    return rc > 0 ? 0 : rc;
}

int cuco_sched_scan(const char *text, size_t call_off, const char *api, int site,
                    const cuco_semantic *sem, size_t n_sem, int (*editable)(void *ctx, size_t off),
                    void *ctx, cuco_sched_plan *plan, cuco_err *e)
{
    sview v;
    int rc = sview_open(&v, text, e);
    if (rc == 0)
        rc = sched_scan_view(&v, call_off, api, site, sem, n_sem, editable, ctx, plan, e);
    else
        memset(plan, 0, sizeof(*plan));
    sview_close(&v);
    return rc;
}
