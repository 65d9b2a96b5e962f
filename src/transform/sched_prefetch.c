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
 *   - the header is `i = ...; COND; i++` (or `++i`, `i += 1`), COND names
 *     the counter, calls nothing but size() and names nothing the body sets
 *     (the next iteration's condition is COND with the counter one up);
 *   - the send argument names the counter, the type, communicator and stream
 *     do not; none of them, nor the count, calls anything but size() or
 *     names what the body declares or sets;
 *   - the body leaves only through its end (no break, continue, return,
 *     goto or throw), and none of its other statements communicates,
 *     synchronises, calls what the analysis cannot see into or may touch
 *     the send buffer (the graph of schedule (a)).
 * The call gets cuco_tx::prefetch_site(site, CUCO_PREF_<site>, next, count)
 * as its first argument: next is the send argument with i + 1 for i, and
 * count the count's, when the header's condition holds for i + 1; null and
 * 0 otherwise. At run time the glue uses a prefetch only when the call's
 * arguments are the ones it was made for.
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The all-gather's argument positions: send, count, type, communicator. */
enum { ARG_SEND = 0, ARG_COUNT = 2, ARG_TYPE = 3, ARG_COMM = 4 };

/* Whether token k of tokens [a, ...) names the counter var (not a member
 * of that name, `x.l`). */
static int counter_at(const sview *v, size_t a, size_t k, size_t var)
{
    return same_tok(v, k, var) && !(k > a && (is(v, k - 1, ".") || is(v, k - 1, "->")));
}

/* The text of tokens [a, b) with each use of the counter var (not a
 * member name) written `(var + 1)`; NULL when out of memory. */
static char *next_text(const sview *v, size_t a, size_t b, size_t var)
{
    cuco_buf out = CUCO_BUF_INIT;
    int rc = 0;
    for (size_t k = a; k < b && rc == 0; k++) {
        const cuco_tok *t = tk(v, k);
        if (k > a) {
            const cuco_tok *p = tk(v, k - 1);
            rc = cuco_buf_append(&out, v->src + p->off + p->len, t->off - p->off - p->len);
        }
        if (rc == 0 && counter_at(v, a, k, var))
            rc = cuco_buf_printf(&out, "(%.*s + 1)", (int)t->len, v->src + t->off);
        else if (rc == 0)
            rc = cuco_buf_append(&out, v->src + t->off, t->len);
    }
    if (rc != 0) {
        cuco_buf_free(&out);
        return NULL;
    }
    return cuco_buf_detach(&out);
}

/* Whether tokens [a, b) name the counter var. */
static int names_var(const sview *v, size_t a, size_t b, size_t var)
{
    for (size_t k = a; k < b; k++)
        if (counter_at(v, a, k, var))
            return 1;
    return 0;
}

/* The header's condition for the next iteration (the whole condition with
 * the counter one up: `(l + 1) < L`, `(l + 1) < n && !stop`) into *cond; 1
 * with the note when the header is not `i = ...; COND; i++` (or `++i`, `i
 * += 1`) with a COND that names the counter, calls nothing and names
 * nothing the body sets. */
static int next_condition(const scan *s, const loop_shape *L, cuco_sched_plan *p, char **cond)
{
    const sview *v = s->v;
    size_t a = L->semi[0] + 1, b = L->semi[1], st = L->semi[1] + 1, end = L->close;
    int one_step =
        (end == st + 2 && ((is(v, st, "++") && same_tok(v, st + 1, L->var)) ||
                           (same_tok(v, st, L->var) && is(v, st + 1, "++")))) ||
        (end == st + 3 && same_tok(v, st, L->var) && is(v, st + 1, "+=") && is(v, st + 2, "1"));
    if (!one_step || b <= a || !names_var(v, a, b, L->var) ||
        !sched_readable_before(v, a, b, s->block, s->block_end))
        return sched_note(p,
                          "its loop (line %d) is not `i = ...; COND; i++` (or ++i, i += 1) with a "
                          "COND on i that calls nothing and that the body does not set",
                          tk(v, L->kw)->line);
    char *next = next_text(v, a, b, L->var);
    *cond = next ? cuco_sprintf("(%s)", next) : NULL;
    free(next);
    return *cond ? 0 : CUCO_ENOMEM;
}

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
static int next_arguments(const scan *s, const loop_shape *L, cuco_sched_plan *p, char *next[2])
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
        if (pos[i] == ARG_SEND && !names_var(v, a, b, L->var))
            return sched_note(p,
                              "its send buffer does not change with its loop's counter (line %d)",
                              tk(v, L->kw)->line);
        if ((pos[i] == ARG_TYPE || pos[i] == ARG_COMM || pos[i] < 0) && names_var(v, a, b, L->var))
            return sched_note(p,
                              "its type, communicator or stream changes with its loop's counter "
                              "(line %d)",
                              tk(v, L->kw)->line);
        if ((pos[i] == ARG_SEND || pos[i] == ARG_COUNT) &&
            !(next[pos[i] == ARG_SEND] = next_text(v, a, b, L->var)))
            return CUCO_ENOMEM;
    }
    return 0;
}

/* The container of the send argument [a, b) when it is an iteration's
 * element (NAME[i], NAME[i].m): NAME's token; v->n otherwise. */
static size_t send_container(const sview *v, const loop_shape *L, size_t a, size_t b)
{
    int element =
        ident(v, a) && is(v, a + 1, "[") && same_tok(v, a + 2, L->var) && is(v, a + 3, "]");
    int member = b == a + 6 && (is(v, a + 4, ".") || is(v, a + 4, "->")) && ident(v, a + 5);
    return element && (b == a + 4 || member) ? a : v->n;
}

/* The body's other statements as graph nodes after the call's, which reads
 * and writes its send buffer only (each statement's heads less the send's
 * container where it names only other elements' members that stay apart):
 * 1 with the note when one of them may touch it, or communicates,
 * synchronises or is opaque; *launches: the body's other launches. */
static int body_keeps_send(const scan *s, const loop_shape *L, cuco_sched_plan *p, size_t *launches)
{
    const sview *v = s->v;
    size_t a = 0, b = 0;
    size_t owner =
        arg_range(v, s->call_tok + 1, ARG_SEND, &a, &b) ? send_container(v, L, a, b) : v->n;
    /* the send's own member is never apart: the next iteration may write it
     * on its element before its call, after this prefetch read it */
    size_t member = owner < v->n && b == a + 6 ? a + 5 : 0;
    cuco_sched_node *nodes = calloc(s->n, sizeof(*nodes));
    cuco_strlist *heads = calloc(s->n, sizeof(*heads));
    int rc = nodes && heads ? 0 : CUCO_ENOMEM;
    if (rc == 0)
        nodes[0] = (cuco_sched_node){CUCO_SCHED_COMM,
                                     s->stream,
                                     (const char *const *)s->send.items,
                                     s->send.n,
                                     (const char *const *)s->send.items,
                                     s->send.n,
                                     0};
    size_t n = 1;
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        const stmt *st = &s->stmts[i];
        if (i == s->call)
            continue;
        const cuco_strlist *h = &st->heads;
        if (owner < v->n) {
            rc = sched_loop_heads_apart(s, L, st, owner, member, &heads[n]);
            h = &heads[n];
        }
        nodes[n] = (cuco_sched_node){st->kind,
                                     st->stream,
                                     (const char *const *)h->items,
                                     h->n,
                                     (const char *const *)h->items,
                                     h->n,
                                     tk(v, st->a)->line};
        n++;
    }
    cuco_sched_place pl = {0};
    if (rc == 0) {
        cuco_sched_graph g = scan_graph(s, nodes, n);
        rc = cuco_sched_place_call(&g, 0, &pl);
    }
    if (rc == 0 && pl.wait < n && nodes[pl.wait].kind == CUCO_SCHED_COMM)
        rc = sched_note(p,
                        "the statement at line %d of its loop's body communicates too (two "
                        "collectives of the loop would run at once)",
                        nodes[pl.wait].line);
    else if (rc == 0 && pl.wait < n)
        rc = sched_note_take(
            p, cuco_sprintf("the statement at line %d of its loop's body (line %d) may touch its "
                            "send buffer while the next iteration's is gathered (or it "
                            "synchronises, leaves the function or calls what the analysis "
                            "cannot see into)",
                            nodes[pl.wait].line, tk(v, L->kw)->line));
    else if (rc == 0 && pl.independent == 0)
        rc = sched_note(p, "its loop's body (line %d) launches no other work", tk(v, L->kw)->line);
    *launches = pl.independent;
    for (size_t i = 0; heads && i < s->n; i++)
        cuco_strlist_free(&heads[i]);
    free(heads);
    free(nodes);
    return rc;
}

/* Whether a statement can go right before the loop: its `for` starts a
 * statement of a braced block (not the body of an unbraced if or loop). */
static int loop_stands_alone(const sview *v, const loop_shape *L)
{
    size_t k = L->kw;
    return k > 0 && (is(v, k - 1, ";") || is(v, k - 1, "{") || is(v, k - 1, "}"));
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
    char *cond = NULL, *next[2] = {NULL, NULL};
    size_t launches = 0;
    if (rc == 0 && (!sched_loop_find(v, s.block, &L) || L.range))
        rc = sched_note(plan, "the call is no statement of a counted `for` loop's braced body", 0);
    if (rc == 0 && sched_in_group(v, s.fn.body, L.kw))
        rc = sched_note(plan, "an NCCL group is open around its loop (line %d)", tk(v, L.kw)->line);
    if (rc == 0)
        rc = body_leaves(&s, plan);
    if (rc == 0)
        rc = next_condition(&s, &L, plan, &cond);
    if (rc == 0)
        rc = next_arguments(&s, &L, plan, next);
    if (rc == 0)
        rc = body_keeps_send(&s, &L, plan, &launches);
    if (rc == 0 && !loop_stands_alone(v, &L))
        rc = sched_note(plan, "its loop (line %d) is not a statement of a braced block",
                        tk(v, L.kw)->line);
    if (rc == 0 && editable &&
        (!editable(ctx, tk(v, s.call_tok)->off) || !editable(ctx, tk(v, L.kw)->off)))
        rc = sched_note(plan, "the call or its loop is in frozen code", 0);
    if (rc == 0)
        rc = prefetch_edit(&s, &L, site, cond, next, launches, plan);
    free(cond);
    free(next[0]);
    free(next[1]);
    sched_scan_free(&s);
    return rc > 0 ? 0 : rc;
}
