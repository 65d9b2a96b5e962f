/* sched_prefetch_beside.c: what schedule prefetch_next's two routes
 * share (scan_int.h): the next iteration's text (its counter one step on,
 * its condition), and whether a statement may run beside a prefetch in
 * flight (the graph of schedule (a), with the send's container, or the
 * object it is a member of, kept apart where the text shows it). The
 * route of a loop's own call is sched_prefetch.c; that through a
 * function's calls, sched_prefetch_caller.c.
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The all-gather's send argument. */
enum { ARG_SEND = 0 };

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

/* The first token of the declaration of L's counter: the header's when it
 * declares it, else the nearest before the loop in its function (a
 * parameter too); *end: the counter's token there. v->n when none is
 * seen. */
static size_t counter_decl(const sview *v, const loop_shape *L, size_t *end)
{
    size_t d = L->var > L->open + 1 ? L->var : v->n;
    size_t fn = function_body_of(v, L->kw);
    int lambda = 0;
    size_t from = fn < v->n ? params_of(v, fn, &lambda) : v->n;
    for (size_t k = L->kw; d >= v->n && from < v->n && k > from;) {
        k--;
        if (same_tok(v, k, L->var) && sview_declarator(v, k, "= ; , [ ) {"))
            d = k;
    }
    if (d >= v->n)
        return v->n;
    *end = d;
    size_t a = d;
    while (a > 0 && !is(v, a - 1, ";") && !is(v, a - 1, "{") && !is(v, a - 1, "}") &&
           !is(v, a - 1, "(") && !is(v, a - 1, ","))
        a--;
    return a;
}

/* Whether L's counter is declared with an integer type no narrower than
 * int: `l - 1` of an `unsigned short` is an int, and `(l - 1) < L` would
 * hold below 0; a type of another name (a typedef) is not read. */
static int counter_wide(const sview *v, const loop_shape *L)
{
    static const char *const wide[] = {"int",      "long",      "size_t",  "ssize_t",  "ptrdiff_t",
                                       "int32_t",  "uint32_t",  "int64_t", "uint64_t", "unsigned",
                                       "intptr_t", "uintptr_t", "signed",  "auto",     NULL};
    static const char *const narrow[] = {"short",    "char", "int8_t", "uint8_t", "int16_t",
                                         "uint16_t", "bool", "float",  "double",  NULL};
    size_t end = v->n, a = counter_decl(v, L, &end);
    int seen = 0;
    for (size_t k = a; k < end && end < v->n; k++) {
        if (in_words(v, k, narrow))
            return 0;
        seen |= in_words(v, k, wide);
    }
    return seen;
}

int sched_prefetch_step(const sview *v, const loop_shape *L, size_t from, size_t to, char **step)
{
    size_t st = L->semi[1] + 1, end = L->close;
    *step = NULL;
    if (!counter_wide(v, L))
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
              scan_member_never_set(v, k + 2)))
            return 0;
    }
    /* the send's own table never copied out (`plan.w = m->shard`, through
     * which another name could write its elements) nor set but by
     * allocations */
    return scan_member_never_set(v, member);
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

int sched_loop_stands_alone(const sview *v, const loop_shape *L)
{
    size_t k = L->kw;
    return k > 0 && (is(v, k - 1, ";") || is(v, k - 1, "{") || is(v, k - 1, "}"));
}
