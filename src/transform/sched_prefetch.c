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
 *     goto or throw), and none of its other statements communicates,
 *     synchronises, calls what the analysis cannot see into or may touch
 *     the send buffer (the graph of schedule (a)).
 * The call gets cuco_tx::prefetch_site(site, CUCO_PREF_<site>, next, count)
 * as its first argument: next is the send argument with i one step on, and
 * count the count's, when the header's condition holds for that; null and
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

int sched_prefetch_names_at(const sview *v, size_t a, size_t k, size_t var)
{
    return same_tok(v, k, var) && !(k > a && (is(v, k - 1, ".") || is(v, k - 1, "->")));
}

int sched_prefetch_names(const sview *v, size_t a, size_t b, size_t var)
{
    for (size_t k = a; k < b; k++)
        if (sched_prefetch_names_at(v, a, k, var))
            return 1;
    return 0;
}

char *sched_prefetch_subst(const sview *v, size_t a, size_t b, size_t var, const char *repl)
{
    cuco_buf out = CUCO_BUF_INIT;
    int rc = 0;
    for (size_t k = a; k < b && rc == 0; k++) {
        const cuco_tok *t = tk(v, k);
        if (k > a) {
            const cuco_tok *p = tk(v, k - 1);
            rc = cuco_buf_append(&out, v->src + p->off + p->len, t->off - p->off - p->len);
        }
        if (rc == 0)
            rc = sched_prefetch_names_at(v, a, k, var)
                     ? cuco_buf_append(&out, repl, strlen(repl))
                     : cuco_buf_append(&out, v->src + t->off, t->len);
    }
    if (rc != 0) {
        cuco_buf_free(&out);
        return NULL;
    }
    return cuco_buf_detach(&out);
}

char *sched_prefetch_next_text(const sview *v, size_t a, size_t b, size_t var, const char *step)
{
    char *repl = cuco_sprintf("(%.*s %s)", (int)tk(v, var)->len, v->src + tk(v, var)->off, step);
    char *text = repl ? sched_prefetch_subst(v, a, b, var, repl) : NULL;
    free(repl);
    return text;
}

/* Whether the header declares its counter narrower than int: `l - 1`
 * would then be an int, and `(l - 1) < L` hold below 0. */
static int narrow_counter(const sview *v, const loop_shape *L)
{
    static const char *const narrow[] = {"short",   "char",     "int8_t", "uint8_t",
                                         "int16_t", "uint16_t", "__half", NULL};
    for (size_t k = L->open + 1; k < L->var; k++)
        if (in_words(v, k, narrow))
            return 1;
    return 0;
}

int sched_prefetch_step(const sview *v, const loop_shape *L, size_t from, size_t to, char **step)
{
    size_t st = L->semi[1] + 1, end = L->close;
    *step = NULL;
    if (narrow_counter(v, L))
        return 0;
    if (end == st + 2)
        return (*step = cuco_strdup(is(v, st, "++") || is(v, st + 1, "++") ? "+ 1" : "- 1"))
                   ? 0
                   : CUCO_ENOMEM;
    if (end < st + 3 || !sched_readable_before(v, st + 2, end, from, to))
        return 0;
    char *e = sview_text(v, st + 2, end);
    *step = e ? cuco_sprintf("%c (%s)", is(v, st + 1, "+=") ? '+' : '-', e) : NULL;
    free(e);
    return *step ? 0 : CUCO_ENOMEM;
}

int sched_prefetch_next_condition(const sview *v, const loop_shape *L, size_t from, size_t to,
                                  cuco_sched_plan *p, char **cond, char **step)
{
    size_t a = L->semi[0] + 1, b = L->semi[1];
    int rc = sched_prefetch_step(v, L, from, to, step);
    if (rc != 0)
        return rc;
    if (!*step || b <= a || !sched_prefetch_names(v, a, b, L->var) ||
        !sched_readable_before(v, a, b, from, to))
        return sched_note(p,
                          "its loop (line %d) is not `i = ...; COND; STEP` with a COND on i and "
                          "a STEP (i++, i--, i += e, i -= e) that call nothing and that the body "
                          "does not set, and an i no narrower than int",
                          tk(v, L->kw)->line);
    char *next = sched_prefetch_next_text(v, a, b, L->var, *step);
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

/* The container of the send argument [a, b) when it is an iteration's
 * element (NAME[i], NAME[i].m): NAME's token; v->n otherwise. */
static size_t send_container(const sview *v, const loop_shape *L, size_t a, size_t b)
{
    int element =
        ident(v, a) && is(v, a + 1, "[") && same_tok(v, a + 2, L->var) && is(v, a + 3, "]");
    int member = b == a + 6 && (is(v, a + 4, ".") || is(v, a + 4, "->")) && ident(v, a + 5);
    return element && (b == a + 4 || member) ? a : v->n;
}

/* The kind of statement st as a node beside the prefetch: an error
 * check's return (a macro's text) counts as little as in body_leaves: on
 * that way out, which the program takes only on failure, the prefetch may
 * still be reading the next iteration's send buffer into the glue's own
 * window (schedule (a), whose call writes the program's buffers, keeps
 * such a return a barrier); a collective (NCCL calls that move data
 * between the buffers it names) runs beside it, since the prefetch's
 * copy-engine gather takes a stream, a window and a rendezvous of its own
 * (no SM, no barrier of the communicator), so only the buffers keep them
 * apart; with returns, a `return` ends the function the prefetch outlives. */
static cuco_sched_kind beside_kind(const sview *v, const stmt *st, int returns)
{
    if (!returns && is(v, st->a, "return"))
        return CUCO_SCHED_EXIT;
    cuco_sched_kind rest = st->kind_but_data_calls; /* what the return's value does counts */
    return st->data_calls && rest == CUCO_SCHED_PLAIN ? CUCO_SCHED_WORK : rest;
}

char *sched_prefetch_send_root(const sview *v, size_t a, size_t b)
{
    return b > a + 2 && ident(v, a) && (is(v, a + 1, "->") || is(v, a + 1, ".")) && ident(v, a + 2)
               ? cuco_strndup(v->src + tk(v, a)->off, tk(v, a)->len)
               : NULL;
}

int sched_prefetch_root_apart_in(const sview *v, size_t a, size_t b, const char *root,
                                 size_t member)
{
    for (size_t k = a; k < b; k++) {
        if (!is(v, k, root) || (k > a && (is(v, k - 1, ".") || is(v, k - 1, "->"))))
            continue;
        if (!(is(v, k + 1, "->") || is(v, k + 1, ".")) || !ident(v, k + 2) ||
            same_tok(v, k + 2, member) || is(v, k + 3, "(") ||
            !(scan_scalar_member(v, k + 2) || scan_other_member_stays(v, k + 2) ||
              (scan_member_never_set(v, k + 2) && scan_member_never_set(v, member))))
            return 0;
    }
    return 1;
}

/* sched_prefetch_root_apart_in for statement st, whose macros' texts do
 * not name root. */
static int root_apart(const sview *v, const stmt *st, const char *root, size_t member)
{
    return !st->macro_opaque && !cuco_strlist_has(&st->macro_heads, root) &&
           sched_prefetch_root_apart_in(v, st->a, st->b, root, member);
}

/* The heads of st less the apart object (ap->root) when st names it only
 * through other members. */
static int heads_less_root(const sview *v, const stmt *st, const prefetch_apart *ap,
                           cuco_strlist *out)
{
    int apart = root_apart(v, st, ap->root, ap->member), rc = 0;
    for (size_t i = 0; i < st->heads.n && rc == 0; i++)
        if (!apart || strcmp(st->heads.items[i], ap->root) != 0)
            rc = cuco_strlist_push(out, st->heads.items[i]);
    return rc;
}

int sched_prefetch_keeps_send(const scan *s, const prefetch_apart *ap, int returns,
                              const char *what, cuco_sched_plan *p, size_t *launches)
{
    const sview *v = s->v;
    const loop_shape *L = ap->L;
    size_t a = 0, b = 0;
    size_t owner =
        L && arg_range(v, s->call_tok + 1, ARG_SEND, &a, &b) ? send_container(v, L, a, b) : v->n;
    /* the send's own member is never apart: the next iteration may write it
     * on its element before its call, after this prefetch read it */
    size_t member = owner < v->n && b == a + 6 ? a + 5 : 0;
    cuco_sched_node *nodes = calloc(s->n + 1, sizeof(*nodes));
    cuco_strlist *heads = calloc(s->n + 1, sizeof(*heads));
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
        } else if (ap->root) {
            rc = heads_less_root(v, st, ap, &heads[n]);
            h = &heads[n];
        }
        nodes[n] = (cuco_sched_node){beside_kind(v, st, returns),
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
        rc = sched_note_take(
            p, cuco_sprintf("the statement at line %d of %s communicates and is more than NCCL "
                            "calls that move data between the buffers it names (a helper or MPI "
                            "that communicates, a synchronisation, a communicator's setup)",
                            nodes[pl.wait].line, what));
    else if (rc == 0 && pl.wait < n)
        rc = sched_note_take(
            p, cuco_sprintf("the statement at line %d of %s may touch its send buffer while the "
                            "next iteration's is gathered (or it synchronises, leaves the "
                            "function or calls what the analysis cannot see into)",
                            nodes[pl.wait].line, what));
    *launches = pl.independent;
    for (size_t i = 0; heads && i <= s->n; i++)
        cuco_strlist_free(&heads[i]);
    free(heads);
    free(nodes);
    return rc;
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

int sched_loop_stands_alone(const sview *v, const loop_shape *L)
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
