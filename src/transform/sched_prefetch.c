/* sched_prefetch.c: schedule prefetch_next (scan_int.h).
 *
 * A layer loop gathers each layer's sharded weights right before it uses
 * them: `for (l = 0; l < L; l++) { ncclAllGather(shard[l], full, n, ...);
 * gemm(full, ...); }` (the forward pass of FSDP and ZeRO-3). The gather of
 * layer l + 1 needs nothing layer l computes, so it can run beside layer
 * l's work, into a window of the glue's own; the next iteration's call then
 * copies that window into its buffer instead of gathering. It applies when
 *   - the call is an all-gather, a statement of a braced `for` body of its
 *     own (not under an if, nor after && or ?), outside any NCCL group;
 *   - the header is `i = ...; COND; STEP` with a STEP of `i++`, `++i`,
 *     `i--`, `--i`, `i += e` or `i -= e` (a layer loop run backwards, or
 *     one that strides), COND names the counter, and neither calls anything
 *     but size() or names what the body sets (the next iteration's
 *     condition is COND with the counter one step on);
 *   - the send argument names the counter, the type, communicator and stream
 *     do not; none of them, nor the count, calls anything but size() or
 *     names what the body declares or sets;
 *   - the body leaves only through its end (no break, continue, return,
 *     goto or throw; an error check's return in a macro's text aside), and
 *     none of its other statements synchronises, calls what the analysis
 *     cannot see into, communicates other than by NCCL's calls on other
 *     buffers, or may touch the send buffer (sched_prefetch_keeps_send, in
 *     sched_prefetch_beside.c).
 * The call gets cuco_tx::prefetch_site(site, CUCO_PREF_<site>, next, count)
 * as its first argument: next is the send argument with i one step on, and
 * count the count's, when the header's condition holds for that; null and
 * 0 otherwise. At run time the glue uses a prefetch only when the call's
 * arguments are the ones it was made for. A gather that is a statement of
 * a function's body, not of a loop's, takes the schedule through the
 * function's calls where it can (sched_prefetch_caller.c).
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The all-gather's argument positions: send, count, type, communicator. */
enum { ARG_SEND = 0, ARG_COUNT = 2, ARG_TYPE = 3, ARG_COMM = 4 };

/* 1 with the note when the body may leave other than through its end, or
 * the call's statement may not run in every iteration. */
static int body_leaves(const scan *s, cuco_sched_plan *p)
{
    const sview *v = s->v;
    static const char *const leaves[] = {"break", "continue",  "return",  "goto",
                                         "throw", "co_return", "longjmp", NULL};
    for (size_t k = s->block + 1; k < s->block_end; k++)
        if (in_words(v, k, leaves))
            return sched_note(p, "its loop's body may leave the iteration early (line %d)",
                              tk(v, k)->line);
    static const char *const guards[] = {"if", "while", "for", "do", "switch",
                                         "&&", "||",    "?",   NULL};
    for (size_t k = s->stmts[s->call].a; k < s->call_tok; k++)
        if (in_words(v, k, guards))
            return sched_note(p, "the call does not run in every iteration (line %d)",
                              tk(v, k)->line);
    return 0;
}

/* 1 with the note when an argument the prefetch reads ahead names what the
 * body declares or sets, or calls anything; the count's and the send
 * argument's text for the next iteration into next[0], next[1]. */
static int next_arguments(const scan *s, const loop_shape *L, const char *step, cuco_sched_plan *p,
                          char *next[2])
{
    const sview *v = s->v;
    const int pos[5] = {ARG_SEND, ARG_COUNT, ARG_TYPE, ARG_COMM, -1};
    size_t a, b, open = s->call_tok + 1;
    for (int i = 0; i < 5; i++) {
        if (!arg_range(v, open, pos[i], &a, &b) ||
            !sched_readable_before(v, a, b, s->block, s->block_end))
            return sched_note(p,
                              "its arguments call what the analysis cannot read ahead, or name "
                              "what the body of its loop (line %d) declares or sets",
                              tk(v, L->kw)->line);
        if (pos[i] == ARG_SEND && !sched_prefetch_names(v, a, b, L->var))
            return sched_note(p,
                              "its send buffer does not change with its loop's counter (line %d)",
                              tk(v, L->kw)->line);
        if ((pos[i] == ARG_TYPE || pos[i] == ARG_COMM || pos[i] < 0) &&
            sched_prefetch_names(v, a, b, L->var))
            return sched_note(p,
                              "its type, communicator or stream changes with its loop's counter "
                              "(line %d)",
                              tk(v, L->kw)->line);
        if ((pos[i] == ARG_SEND || pos[i] == ARG_COUNT) &&
            !(next[pos[i] == ARG_SEND] = sched_prefetch_next_text(v, a, b, L->var, step)))
            return CUCO_ENOMEM;
    }
    return 0;
}

/* The body's other statements as graph nodes after the call's, which reads
 * and writes its send buffer only (each statement's heads less the send's
 * container where it names only other elements' members that stay apart):
 * 1 with the note when one of them may touch it, or communicates other than
 * by NCCL's calls on other buffers, synchronises or is opaque, or when none
 * launches work; *launches: the body's other launches. */
static int loop_keeps_send(const scan *s, const loop_shape *L, cuco_sched_plan *p, size_t *launches)
{
    char *what = cuco_sprintf("its loop's body (line %d)", tk(s->v, L->kw)->line);
    size_t a = 0, b = 0;
    char *root = arg_range(s->v, s->call_tok + 1, ARG_SEND, &a, &b)
                     ? sched_prefetch_send_root(s->v, a, b)
                     : NULL;
    prefetch_apart ap = {.L = L, .root = root, .member = a + 2};
    int rc = what ? sched_prefetch_keeps_send(s, &ap, 0, what, p, launches) : CUCO_ENOMEM;
    free(root);
    free(what);
    if (rc == 0 && *launches == 0)
        rc = sched_note(p, "its loop's body (line %d) launches no other work",
                        tk(s->v, L->kw)->line);
    return rc;
}

/* The edits and the report line of the schedule that applies: the site at
 * the call, and cuco_tx::prefetch_drop before the loop (a prefetch an
 * earlier run of the loop left is not taken). */
static int prefetch_edit(const scan *s, const loop_shape *L, int site, const char *cond,
                         char *next[2], size_t launches, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t a, b;
    if (!arg_range(v, s->call_tok + 1, 0, &a, &b))
        return sched_note(p, "its first argument was not found", 0);
    char *drop = cuco_sprintf("cuco_tx::prefetch_drop(%d, CUCO_PREF_%d);", site, site);
    int rc = drop ? sched_insert_before(v, L->kw, drop, p) : CUCO_ENOMEM;
    free(drop);
    char *no_reads = NULL, reads[48] = "0";
    if (rc == 0)
        rc = sched_prefetch_reads(s, site, p, &no_reads);
    /* the knob: 0 off, 1 the window copied, 2 read in place */
    p->knob_default = no_reads ? 1 : 2;
    if (!no_reads)
        snprintf(reads, sizeof reads, "CUCO_PREF_%d > 1", site);
    if (rc == 0)
        rc = scan_plan_edit(
            p, tk(v, a)->off, 0,
            cuco_sprintf("cuco_tx::prefetch_site(%d, CUCO_PREF_%d, %s ? "
                         "(const void *)(%s) : nullptr, %s ? (size_t)(%s) : 0, %s), ",
                         site, site, cond, next[1], cond, next[0], reads),
            tk(v, a)->off);
    char *how = no_reads ? cuco_sprintf("a window of its own, and the next iteration's call copies "
                                        "it into its buffer (not read in place: %s)",
                                        no_reads)
                         : cuco_strdup("one of two windows of its own, which the rest of the next "
                                       "iteration's body reads in place (cuco_tx::prefetched; its "
                                       "knob at 1 copies it instead); the loop's last call copies "
                                       "it into its buffer");
    if (rc == 0 && how)
        p->note = cuco_sprintf("ncclAllGather at line %d gathers the next iteration's input (%s) "
                               "beside the rest of its loop's body (line %d: %zu launch%s) into %s",
                               tk(v, s->call_tok)->line, next[1], tk(v, L->kw)->line, launches,
                               launches == 1 ? "" : "es", how);
    free(how);
    free(no_reads);
    if (rc != 0)
        return rc;
    p->applies = p->note != NULL;
    return p->note ? 0 : CUCO_ENOMEM;
}

int sched_prefetch_view(const sview *v, size_t call_off, const char *api, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *plan,
                        cuco_err *e)
{
    memset(plan, 0, sizeof(*plan));
    scan s = {.v = v, .call = (size_t)-1};
    int rc = sched_scan_prepare(&s, call_off, api, plan, e);
    loop_shape L;
    char *cond = NULL, *step = NULL, *next[2] = {NULL, NULL};
    size_t launches = 0;
    if (rc == 0 && (!sched_loop_find(v, s.block, &L) || L.range)) {
        /* a function's gather whose calls stand in a loop */
        rc = sched_prefetch_caller(&s, site, editable, ctx, plan);
        if (rc == 1) {
            char *why = plan->note;
            plan->note = NULL;
            rc = sched_note_take(plan, cuco_sprintf("the call is no statement of a counted `for` "
                                                    "loop's braced body, and %s",
                                                    why));
            free(why);
        }
        sched_scan_free(&s);
        return rc > 0 ? 0 : rc;
    }
    if (rc == 0 && sched_in_group(v, s.fn.body, L.kw))
        rc = sched_note(plan, "an NCCL group is open around its loop (line %d)", tk(v, L.kw)->line);
    if (rc == 0)
        rc = body_leaves(&s, plan);
    if (rc == 0)
        rc = sched_prefetch_next_condition(v, &L, s.block, s.block_end, plan, &cond, &step);
    if (rc == 0)
        rc = next_arguments(&s, &L, step, plan, next);
    if (rc == 0)
        rc = loop_keeps_send(&s, &L, plan, &launches);
    if (rc == 0 && !sched_loop_stands_alone(v, &L))
        rc = sched_note(plan, "its loop (line %d) is not a statement of a braced block",
                        tk(v, L.kw)->line);
    if (rc == 0 && editable &&
        (!editable(ctx, tk(v, s.call_tok)->off) || !editable(ctx, tk(v, L.kw)->off)))
        rc = sched_note(plan, "the call or its loop is in frozen code", 0);
    if (rc == 0)
        rc = prefetch_edit(&s, &L, site, cond, next, launches, plan);
    free(cond);
    free(step);
    free(next[0]);
    free(next[1]);
    sched_scan_free(&s);
    return rc > 0 ? 0 : rc;
}
