/* sched_loop.c: schedule (a) across a loop's iterations (scan_int.h).
 *
 * Data parallelism sums each bucket of gradients as soon as the backward
 * pass has made it: `for (b = ...) { backward(grads[b]); ncclAllReduce(
 * grads[b], grads[b], ...); }`. The collective ends its loop's body, so
 * nothing in its block follows it; but the next iterations touch only their
 * own elements. Then the call starts early, the next iterations run beside
 * it, and its wait goes after the loop, before the first consumer in the
 * enclosing block. It applies when
 *   - the loop is a `for` with a braced body, outside any NCCL group, whose
 *     header calls nothing but size();
 *   - each buffer argument of the call is its iteration's own: `NAME[i]`,
 *     with i the counter that only the header changes, or the range-for's
 *     variable (`x`, `x.m`, `x->m`), which the body never sets;
 *   - every other statement of the body names NAME only as `NAME[i]`, sets
 *     no element, and is otherwise independent of the call's buffers: no
 *     other communication, synchronisation, exit or unknown call;
 *   - the body's launches are on the call's stream (the guard below waits
 *     on that stream), which names nothing the loop declares, and the
 *     call's buffers, count, type and communicator name nothing the body
 *     declares or sets.
 * Two elements may still share memory (two pointers into one buffer):
 * cuco_tx::loop_guard, at the top of the body, checks this iteration's
 * buffers against those still in flight at run time and waits for them
 * first when they overlap.
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The argument positions of a collective the loop schedule takes: its
 * buffers, count, type and communicator; whether the send or the receive
 * buffer holds count elements of every rank. */
typedef struct loop_api {
    const char *api;
    int send, recv, count, dtype, comm, send_all, recv_all;
} loop_api;

static const loop_api loop_apis[] = {{"ncclAllReduce", 0, 1, 2, 3, 5, 0, 0},
                                     {"ncclBroadcast", 0, 1, 2, 3, 5, 0, 0},
                                     {"ncclBcast", 0, 0, 1, 2, 4, 0, 0},
                                     {"ncclReduceScatter", 0, 1, 2, 3, 5, 1, 0},
                                     {"ncclAllGather", 0, 1, 2, 3, 4, 0, 1},
                                     {"ncclSend", 0, 0, 1, 2, 4, 0, 0},
                                     {NULL, 0, 0, 0, 0, 0, 0, 0}};

/* Whether tokens [a, b) step the counter var: ++i, i++, --i, i--, i += e,
 * i -= e. */
static int counter_steps(const sview *v, size_t a, size_t b, size_t var)
{
    if (b == a + 2)
        return ((is(v, a, "++") || is(v, a, "--")) && same_tok(v, a + 1, var)) ||
               (same_tok(v, a, var) && (is(v, a + 1, "++") || is(v, a + 1, "--")));
    if (b < a + 3 || !same_tok(v, a, var) || !(is(v, a + 1, "+=") || is(v, a + 1, "-=")))
        return 0;
    for (size_t k = a + 2; k < b; k++)
        if (same_tok(v, k, var) || is(v, k, ","))
            return 0;
    return 1;
}

int sched_calls_only_sizes(const sview *v, size_t a, size_t b)
{
    static const char *const sizes[] = {"size", "length", "empty", "sizeof", NULL};
    for (size_t k = a; k + 1 < b; k++)
        if (ident(v, k) && is(v, k + 1, "(") && !in_words(v, k, sizes) &&
            !in_words(v, k, sview_keywords))
            return 0;
    return 1;
}

int sched_loop_find(const sview *v, size_t body, loop_shape *L)
{
    if (body < 3 || !is(v, body - 1, ")"))
        return 0;
    size_t open = sview_open_of(v, body - 1);
    if (open == 0 || open >= v->n || !is(v, open, "(") || !is(v, open - 1, "for"))
        return 0;
    *L = (loop_shape){.kw = open - 1, .open = open, .close = body - 1, .var = v->n, .semi = {0, 0}};
    size_t semi[2] = {0, 0}, colon = v->n;
    int ns = 0, d = 0;
    for (size_t k = open + 1; k < L->close; k++) {
        d += is(v, k, "(") + is(v, k, "[") + is(v, k, "{") - is(v, k, ")") - is(v, k, "]") -
             is(v, k, "}");
        if (d == 0 && is(v, k, ";") && ns < 2)
            semi[ns++] = k;
        else if (d == 0 && is(v, k, ":") && colon == v->n)
            colon = k;
    }
    if (ns == 0 && colon < v->n && ident(v, colon - 1)) {
        *L = (loop_shape){L->kw, L->open, L->close, colon - 1, 1, colon + 1, L->close, {0, 0}};
        return sched_calls_only_sizes(v, colon + 1, L->close);
    }
    if (ns != 2)
        return 0;
    L->semi[0] = semi[0];
    L->semi[1] = semi[1];
    for (size_t k = open + 1; k < semi[0] && L->var == v->n; k++)
        if (ident(v, k) && is(v, k + 1, "="))
            L->var = k;
    return L->var < v->n && counter_steps(v, semi[1] + 1, L->close, L->var) &&
           sched_calls_only_sizes(v, semi[0] + 1, L->close);
}

/* Whether the token at k, a name (its member `.m`/`->m` after it taken
 * with it), is assigned, stepped or has its address taken. */
static int sets_at(const sview *v, size_t k)
{
    static const char *const ops[] = {"=", "+=", "-=", "*=", "/=", "++", "--", NULL};
    if (k > 0 && (is(v, k - 1, "++") || is(v, k - 1, "--") || is(v, k - 1, "&")))
        return 1;
    size_t j = k + 1;
    if ((is(v, j, ".") || is(v, j, "->")) && ident(v, j + 1))
        j += 2;
    return in_words(v, j, ops);
}

/* Whether tokens [a, b) set the name like token var, or declare it anew. */
static int body_sets(const sview *v, size_t a, size_t b, size_t var)
{
    for (size_t k = a; k < b; k++)
        if (same_tok(v, k, var) && (sets_at(v, k) || scan_declaration_at(v, k)))
            return 1;
    return 0;
}

/* The call's buffers as its iteration's own: the containers of its
 * NAME[i] arguments, and the members of the element they are (`x.grad`);
 * whole: one is the element itself (`grads[b]`, `x`). */
typedef struct own_set {
    size_t owners[2], members[2];
    int nowners, nmembers, whole;
    size_t never; /* a member never masked (prefetch_next's send member); 0: none */
} own_set;

/* When token k starts an element of the loop's iteration (NAME[i] with i
 * the loop's counter, or the range variable): the token after it; v->n
 * otherwise. */
static size_t element_end(const sview *v, const loop_shape *L, size_t k)
{
    if (L->range)
        return same_tok(v, k, L->var) ? k + 1 : v->n;
    return ident(v, k) && is(v, k + 1, "[") && same_tok(v, k + 2, L->var) && is(v, k + 3, "]")
               ? k + 4
               : v->n;
}

/* Whether the element at k is named as the call's own buffer or apart
 * from every element's: the element itself when the call's buffer is, one
 * of the call's members, a scalar member (`x.n`), or a member that keeps
 * its allocation in place everywhere (`x.w`, scan_other_member_stays: no
 * other element's buffer can be it); *end: the token after. */
static int own_mention(const sview *v, const loop_shape *L, const own_set *o, size_t k, size_t *end)
{
    size_t e = element_end(v, L, k);
    if (e >= v->n)
        return 0;
    int member = (is(v, e, ".") || is(v, e, "->")) && ident(v, e + 1) && !is(v, e + 2, "(");
    *end = member ? e + 2 : e;
    if (!member)
        return o->whole && !is(v, e, ".") && !is(v, e, "->");
    if (o->never && same_tok(v, e + 1, o->never))
        return 0;
    for (int i = 0; i < o->nmembers; i++)
        if (same_tok(v, e + 1, o->members[i]))
            return 1;
    return scan_scalar_member(v, e + 1) || scan_other_member_stays(v, e + 1);
}

/* Records the call's buffer argument [a, b) into o when it is its
 * iteration's own element (NAME[i], the range variable, or a member of
 * either); 0 otherwise. */
static int own_element(const sview *v, const loop_shape *L, size_t a, size_t b, own_set *o)
{
    size_t e = element_end(v, L, a);
    if (e >= v->n)
        return 0;
    int member = (is(v, e, ".") || is(v, e, "->")) && ident(v, e + 1);
    if ((member ? e + 2 : e) != b)
        return 0;
    if (!L->range && o->nowners < 2)
        o->owners[o->nowners++] = a;
    if (member && o->nmembers < 2)
        o->members[o->nmembers++] = e + 1;
    o->whole |= !member;
    return 1;
}

/* Whether statement [a, b) names the element like token name (a container
 * of NAME[i], or the range variable) only as the call's own buffer, never
 * setting it. */
static int names_only_own(const sview *v, const loop_shape *L, const own_set *o, size_t a, size_t b,
                          size_t name)
{
    static const char *const sets[] = {"=", "+=", "-=", NULL};
    for (size_t k = a; k < b; k++) {
        size_t end;
        if (!same_tok(v, k, name) || (k > a && (is(v, k - 1, ".") || is(v, k - 1, "->"))))
            continue;
        if (!own_mention(v, L, o, k, &end) || sets_at(v, k) || (end < b && in_words(v, end, sets)))
            return 0;
    }
    return 1;
}

/* The heads of the body's statement st, less those that name only the
 * iteration's own element as the call uses it (the range variable, the
 * containers of its NAME[i] arguments) into *out; a head a macro of the
 * statement reaches (`#define NEXT(l) grads[(l) + 1]`: the statement's
 * tokens do not show how) is kept. */
static int masked_heads(const scan *s, const loop_shape *L, const stmt *st, const own_set *o,
                        cuco_strlist *out)
{
    const sview *v = s->v;
    int rc = 0;
    for (size_t i = 0; i < st->heads.n && rc == 0; i++) {
        const char *h = st->heads.items[i];
        if (st->macro_opaque || cuco_strlist_has(&st->macro_heads, h)) {
            rc = cuco_strlist_push(out, h);
            continue;
        }
        int own = L->range && cuco_tok_is(&v->lx, tk(v, L->var), h) &&
                  names_only_own(v, L, o, st->a, st->b, L->var);
        for (int k = 0; !own && k < o->nowners; k++)
            own = cuco_tok_is(&v->lx, tk(v, o->owners[k]), h) &&
                  names_only_own(v, L, o, st->a, st->b, o->owners[k]);
        if (!own)
            rc = cuco_strlist_push(out, h);
    }
    return rc;
}

int sched_loop_heads_apart(const scan *s, const loop_shape *L, const stmt *st, size_t owner,
                           size_t member, cuco_strlist *out)
{
    own_set o = {.owners = {owner, 0}, .nowners = 1, .never = member};
    return masked_heads(s, L, st, &o, out);
}

/* Appends every name of from to to. */
static int push_all(cuco_strlist *to, const cuco_strlist *from)
{
    int rc = 0;
    for (size_t i = 0; i < from->n && rc == 0; i++)
        rc = cuco_strlist_push(to, from->items[i]);
    return rc;
}

/* The call's names for the loop: its buffers and, in a range-for, the
 * range's heads (a later iteration naming the range otherwise touches it). */
static int call_names(const scan *s, const loop_shape *L, cuco_strlist *out)
{
    int rc = push_all(out, &s->send);
    if (rc == 0)
        rc = push_all(out, &s->recv);
    if (rc == 0 && L->range)
        rc = scan_expr_heads(s->v, L->rng_a, L->rng_b, out, 1);
    return rc;
}

/* The body's other statements, masked, as graph nodes after the call's:
 * placed into *out (its independent launches, and of which on the call's
 * stream), none may touch the call's buffers. 0, or 1 with the note when
 * one may. */
static int body_apart(const scan *s, const loop_shape *L, const own_set *o, cuco_sched_plan *p,
                      cuco_sched_place *out)
{
    const sview *v = s->v;
    cuco_sched_node *nodes = calloc(s->n, sizeof(*nodes));
    cuco_strlist *heads = calloc(s->n, sizeof(*heads));
    int rc = nodes && heads ? call_names(s, L, &heads[0]) : CUCO_ENOMEM;
    size_t n = 1;
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        if (i == s->call)
            continue;
        const stmt *st = &s->stmts[i];
        rc = masked_heads(s, L, st, o, &heads[n]);
        /* a `continue` or `break` leaves the iteration or the loop, after
         * which the wait stands: no barrier across the iterations */
        nodes[n] = (cuco_sched_node){
            st->kind_but_loop_exits, st->stream, NULL, heads[n].n, NULL, heads[n].n,
            tk(v, st->a)->line};
        n++;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        nodes[i].reads = nodes[i].writes = (const char *const *)heads[i].items;
    if (rc == 0) {
        nodes[0] = (cuco_sched_node){
            CUCO_SCHED_COMM, s->stream, nodes[0].reads, heads[0].n, nodes[0].reads, heads[0].n, 0};
        cuco_sched_graph g = scan_graph(s, nodes, n);
        rc = cuco_sched_place_call(&g, 0, out);
    }
    if (rc == 0 && out->wait < n)
        rc = sched_note_take(
            p, cuco_sprintf("nor across the iterations of its loop (line %d): the statement at "
                            "line %d of its body may touch the buffer while a later iteration "
                            "runs (it names it other than as its iteration's own element, or it "
                            "synchronises, communicates, leaves the loop or calls what the "
                            "analysis cannot see into)",
                            tk(v, L->kw)->line, nodes[out->wait].line));
    for (size_t i = 0; heads && i < s->n; i++)
        cuco_strlist_free(&heads[i]);
    free(heads);
    free(nodes);
    return rc;
}

int sched_readable_before(const sview *v, size_t a, size_t b, size_t from, size_t to)
{
    for (size_t k = a; k < b; k++)
        if (ident(v, k) && !(k > a && (is(v, k - 1, ".") || is(v, k - 1, "->"))) &&
            body_sets(v, from, to, k))
            return 0;
    return sched_calls_only_sizes(v, a, b);
}

/* The loop_guard statement of the call (its '(' at open) into *guard; 1
 * with the note when an argument cannot be read at the top of the body: a
 * buffer that is not its iteration's own, a name the body declares or
 * sets. o: what of the element the call's buffers are. */
static int guard_stmt(const scan *s, const loop_shape *L, const loop_api *x, size_t open, int site,
                      own_set *o, cuco_sched_plan *p, char **guard)
{
    const sview *v = s->v;
    const int pos[5] = {x->send, x->recv, x->count, x->dtype, x->comm};
    char *t[5] = {0};
    size_t a, b;
    int rc = 0;
    memset(o, 0, sizeof(*o));
    for (int i = 0; i < 5 && rc == 0; i++) {
        if (!arg_range(v, open, pos[i], &a, &b))
            rc = sched_note(p,
                            "nor across the iterations of its loop (line %d): its arguments "
                            "could not be read",
                            tk(v, L->kw)->line);
        else if (i < 2 && !own_element(v, L, a, b, o))
            rc = sched_note(p,
                            "nor across the iterations of its loop (line %d): its buffer is not "
                            "its iteration's own element (NAME[i] with i the loop's counter, or "
                            "the range-for's variable or its member)",
                            tk(v, L->kw)->line);
        else if (!sched_readable_before(v, a, b, s->block, s->block_end))
            rc = sched_note(p,
                            "nor across the iterations of its loop (line %d): its arguments name "
                            "what the body declares or sets",
                            tk(v, L->kw)->line);
        else if (!(t[i] = sview_text(v, a, b)))
            rc = CUCO_ENOMEM;
    }
    if (rc == 0)
        rc = (*guard = cuco_sprintf(
                  "cuco_tx::loop_guard(%d, CUCO_EARLY_%d, %s, %s, %s, %s, %s, %d, %d);", site, site,
                  t[0], t[1], t[2], t[3], t[4], x->send_all, x->recv_all))
                 ? 0
                 : CUCO_ENOMEM;
    for (int i = 0; i < 5; i++)
        free(t[i]);
    return rc;
}

/* The wait after the loop: the loop's statement in its block read as the
 * call, with the call's names and stream (*pl placed there). */
static int wait_after_loop(const scan *s, const loop_shape *L, int site,
                           int (*editable)(void *, size_t), void *ctx, cuco_sched_plan *p,
                           cuco_sched_place *pl)
{
    const sview *v = s->v;
    scan cs = {.v = v, .call = (size_t)-1, .sem = s->sem, .n_sem = s->n_sem, .call_tok = L->kw};
    size_t stmt0 = L->kw;
    char *what = cuco_sprintf("its loop at line %d", tk(v, L->kw)->line);
    int rc = what ? sched_locate_stmt(&cs, p, &stmt0) : CUCO_ENOMEM;
    if (rc == 0)
        rc = call_names(s, L, &cs.send);
    if (rc == 0)
        rc = call_names(s, L, &cs.recv);
    if (rc == 0 && !(cs.stream = cuco_strdup(s->stream)))
        rc = CUCO_ENOMEM;
    if (rc == 0)
        rc = sched_wait_after(&cs, stmt0, what, site, editable, ctx, p, pl);
    p->consumer_end = rc == 0 && pl->wait >= cs.n;
    if (rc == 1) {
        char *why = p->note;
        p->note = NULL;
        rc = sched_note_take(p, cuco_sprintf("nor across the iterations of its loop (line %d): %s",
                                             tk(v, L->kw)->line, why));
        free(why);
    }
    free(what);
    sched_scan_free(&cs);
    return rc;
}

/* The report line of the schedule applied across the loop, and the
 * plan's counts (body: the body's launches, after: the enclosing block's
 * between the loop and the wait). */
static int loop_note(const scan *s, const loop_shape *L, const char *api,
                     const cuco_sched_place *body, const cuco_sched_place *after,
                     cuco_sched_plan *p)
{
    const sview *v = s->v;
    char *where = p->consumer_end ? cuco_sprintf("to the end of its block (line %d)", p->wait_line)
                                  : cuco_sprintf("before the statement at line %d", p->wait_line);
    free(p->note);
    p->note = where ? cuco_sprintf("early_start_late_wait: %s at line %d issued on a side stream "
                                   "beside the later iterations of its loop (line %d: %zu "
                                   "independent launch%s each), its wait moved after the loop, "
                                   "%s (%zu independent launch%s in between); cuco_tx::loop_guard "
                                   "waits first in an iteration whose buffers overlap one in "
                                   "flight",
                                   api, tk(v, s->call_tok)->line, tk(v, L->kw)->line,
                                   body->independent, body->independent == 1 ? "" : "es", where,
                                   after->independent, after->independent == 1 ? "" : "es")
                    : NULL;
    free(where);
    if (!p->note)
        return CUCO_ENOMEM;
    p->applies = 1;
    p->independent = body->independent + after->independent;
    p->same_stream = body->same_stream + after->same_stream;
    p->knob_default = p->same_stream > 0;
    return 0;
}

/* The checks on the loop itself: no NCCL group open around it, a counter
 * only the header steps (a range variable the body never sets), a stream
 * that names nothing the loop declares or sets. 1 with the note when one
 * fails. */
static int loop_checks(const scan *s, const loop_shape *L, cuco_sched_plan *p)
{
    const sview *v = s->v;
    int line = tk(v, L->kw)->line;
    size_t a, b;
    if (sched_in_group(v, s->fn.body, L->kw))
        return sched_note(p,
                          "nor across the iterations of its loop (line %d): an NCCL group is "
                          "open around the loop",
                          line);
    if (body_sets(v, s->block, s->block_end, L->var))
        return sched_note(p,
                          "nor across the iterations of its loop (line %d): the body sets the "
                          "loop's variable",
                          line);
    int names_var = 0;
    if (arg_range(v, s->call_tok + 1, -1, &a, &b))
        for (size_t k = a; k < b; k++)
            names_var |= same_tok(v, k, L->var);
    if (names_var || !arg_range(v, s->call_tok + 1, -1, &a, &b) ||
        !sched_readable_before(v, a, b, L->open, s->block_end))
        return sched_note(p,
                          "nor across the iterations of its loop (line %d): its stream names "
                          "what the loop declares or sets",
                          line);
    return 0;
}

int sched_loop(scan *s, const char *api, int site, int (*editable)(void *ctx, size_t off),
               void *ctx, cuco_sched_plan *p)
{
    const sview *v = s->v;
    loop_shape L;
    const loop_api *x = loop_apis;
    while (x->api && strcmp(x->api, api) != 0)
        x++;
    if (!x->api || !sched_loop_find(v, s->block, &L))
        return 2;
    size_t edits = p->nedits;
    own_set own;
    char *guard = NULL;
    cuco_sched_place body = {0}, after = {0};
    int rc = loop_checks(s, &L, p);
    if (rc == 0)
        rc = guard_stmt(s, &L, x, s->call_tok + 1, site, &own, p, &guard);
    if (rc == 0)
        rc = body_apart(s, &L, &own, p, &body);
    if (rc == 0 && body.independent == 0)
        rc = sched_note(p,
                        "nor across the iterations of its loop (line %d): its body launches "
                        "no other work",
                        tk(v, L.kw)->line);
    if (rc == 0 && body.same_stream < body.independent) /* loop_guard's wait covers one stream */
        rc = sched_note(p,
                        "nor across the iterations of its loop (line %d): its body launches on "
                        "another stream than the call's",
                        tk(v, L.kw)->line);
    size_t first = s->stmts[0].a;
    if (rc == 0 && editable && !editable(ctx, tk(v, first)->off))
        rc = sched_note(p,
                        "nor across the iterations of its loop (line %d): its body starts in "
                        "frozen code",
                        tk(v, L.kw)->line);
    if (rc == 0)
        rc = wait_after_loop(s, &L, site, editable, ctx, p, &after);
    if (rc == 0)
        rc = sched_insert_before(v, first, guard, p);
    if (rc == 0)
        rc = sched_start_edit(s, s->call_tok + 1, site, p);
    if (rc == 0)
        rc = loop_note(s, &L, api, &body, &after, p);
    if (rc != 0)
        sched_drop_edits(p, edits);
    free(guard);
    return rc;
}
