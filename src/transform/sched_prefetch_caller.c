/* sched_prefetch_caller.c: schedule prefetch_next through a function's
 * calls (scan_int.h).
 *
 * A layer loop often calls a function per layer that gathers the layer's
 * weights itself: `for (l = 0; l < L; l++) layer_forward(m, l, x, y);`
 * with `ncclAllGather(m->shard[l], m->wfull, n, ...)` in layer_forward. The
 * gather of layer l + 1 can run beside the rest of layer l, as in
 * sched_prefetch.c, when
 *   - the gather is a statement of the body of a free function F of the
 *     file, no leave comes before it, and F's every use is a call in
 *     another function, each in a counted `for` loop (its body braced or
 *     not) outside an NCCL group, whose header the schedule reads
 *     (sched_prefetch_next_condition);
 *   - the send argument names a parameter P for which each call passes the
 *     loop's counter itself, other parameters whose arguments the loop's
 *     body does not set, and no local of F; F sets none of them; the type,
 *     communicator and stream do not name P; nothing calls anything but
 *     size();
 *   - neither F's other statements nor the loop body's other statements
 *     may touch the send buffer (sched_prefetch_keeps_send; in the caller
 *     the send's names are the arguments for F's parameters), and the
 *     loop's body leaves only through the error check of its call of F.
 * Each call passes its counter through cuco_tx::prefetch_hint(site,
 * CUCO_PREF_n, COND, NEXT, l): the next iteration's counter NEXT, when the
 * header's condition COND holds for it. F's gather gets prefetch_site(site,
 * CUCO_PREF_n, next, count), the send and the count with P replaced by that
 * counter, when the hint was made for this call's P
 * (cuco_tx::prefetch_hinted): a call of F from elsewhere, or a stale hint,
 * prefetches nothing. The window is copied into the receive buffer (no
 * reads in place).
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The all-gather's argument positions: send, count, type, communicator. */
enum { ARG_SEND = 0, ARG_COUNT = 2, ARG_TYPE = 3, ARG_COMM = 4, ARG_STREAM = 5 };

/* F's gather: F's name token, the counter's parameter P (its token in F's
 * parameter list), the send argument [sa, sb), the bits of F's parameters
 * the send names, and F's calls (owned). */
typedef struct fn_gather {
    size_t name, param, sa, sb;
    unsigned long long send_params;
    size_t *sites, nsites;
} fn_gather;

/* One call of F in its loop: the loop, its body [from, to), the statement
 * of the body that holds the call [sa, sb), and the argument passed for P
 * [pa, pb). */
typedef struct call_loop {
    size_t call;
    loop_shape L;
    size_t from, to, sa, sb, pa, pb;
    int braced;
} call_loop;

/* The index of F's parameter named like token k; -1 when none is. */
static int param_index_at(const scan *s, size_t k)
{
    char *w = cuco_strndup(s->v->src + tk(s->v, k)->off, tk(s->v, k)->len);
    int i = w ? sview_param_index(s->v, s->fn.params, w) : -1;
    free(w);
    return i;
}

/* The token of the parameter named k in F's parameter list (v->n: none). */
static size_t param_token(const scan *s, size_t k)
{
    const sview *v = s->v;
    size_t close = close_of(v, s->fn.params);
    for (size_t i = s->fn.params + 1; i < close && i < v->n; i++)
        if (same_tok(v, i, k) &&
            (is(v, i + 1, ",") || is(v, i + 1, ")") || is(v, i + 1, "=") || is(v, i + 1, "[")))
            return i;
    return v->n;
}

/* F's side: no leave before the call; the send argument names
 * no local of F and nothing F sets, and no argument calls anything but
 * size(); the counter's parameter param is no reference F could set
 * through; 1 with the note when not. */
static int function_side(const scan *s, const fn_gather *g, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t param = g->param;
    static const char *const leaves[] = {"return", "goto", "throw", "co_return", "longjmp", NULL};
    int line = tk(v, s->call_tok)->line;
    for (size_t k = s->fn.body + 1; k < s->stmts[s->call].a; k++)
        if (in_words(v, k, leaves))
            return sched_note(p, "its function may leave before the call (line %d)",
                              tk(v, k)->line);
    if (!sched_readable_before(v, g->sa, g->sb, s->fn.body, s->fn.body_end))
        return sched_note(p,
                          "its send argument (line %d) calls what the analysis cannot read "
                          "ahead, or names what its function declares or sets",
                          line);
    for (int k = ARG_COUNT; k <= ARG_STREAM; k++) {
        size_t a, b;
        if (!arg_range(v, s->call_tok + 1, k, &a, &b) || !sched_calls_only_sizes(v, a, b))
            return sched_note(p,
                              "an argument of the call (line %d) calls what the analysis "
                              "cannot read ahead",
                              line);
        if (k != ARG_COUNT && sched_prefetch_names(v, a, b, param))
            return sched_note(p,
                              "its type, communicator or stream (line %d) changes with the "
                              "parameter its send buffer changes with",
                              line);
    }
    for (size_t k = param; k > s->fn.params && !is(v, k - 1, ",") && !is(v, k - 1, "("); k--)
        if (is(v, k - 1, "&") || is(v, k - 1, "&&"))
            return sched_note(p,
                              "the parameter its send buffer changes with (line %d) is a "
                              "reference",
                              tk(v, param)->line);
    return 0;
}

/* The `for` around the call at k, when the call is in its body: braced
 * (the call's block is the body) or the body's one statement. */
static int find_call_loop(const sview *v, size_t k, call_loop *c)
{
    size_t blk = block_open(v, k), end = blk < v->n ? close_of(v, blk) : v->n, x = v->n, y = v->n;
    for (size_t i = blk + 1; end < v->n && i < end;) {
        size_t j = scan_stmt_after(v, i, end);
        j = j <= i ? i + 1 : j;
        if (k >= i && k < j) {
            x = i;
            y = j;
            break;
        }
        i = j;
    }
    if (x >= v->n)
        return 0;
    c->call = k;
    if (is(v, x, "for") && is(v, x + 1, "(")) {
        size_t close = close_of(v, x + 1);
        if (close >= v->n || k <= close || is(v, close + 1, "{"))
            return 0;
        *c = (call_loop){.call = k, .from = close + 1, .to = y, .sa = close + 1, .sb = y};
        return sched_loop_find(v, close + 1, &c->L) && !c->L.range;
    }
    *c = (call_loop){.call = k, .from = blk, .to = end, .sa = x, .sb = y, .braced = 1};
    return sched_loop_find(v, blk, &c->L) && !c->L.range;
}

/* Whether the loop's body leaves other than through the error check of
 * the statement that holds the call (`if (f(...) != 0) return -1;`: the
 * call in the if's condition). */
static int body_leaves(const sview *v, const call_loop *c)
{
    static const char *const leaves[] = {"break", "continue",  "return",  "goto",
                                         "throw", "co_return", "longjmp", NULL};
    int checked = is(v, c->sa, "if") && is(v, c->sa + 1, "(") && c->call < close_of(v, c->sa + 1);
    for (size_t k = c->from; k < c->to; k++)
        if (in_words(v, k, leaves) && !(checked && k >= c->sa && k < c->sb))
            return 1;
    return 0;
}

/* The caller's side of the call at k: its loop, the argument for P (the
 * loop's counter), the arguments for the other parameters the send names
 * unchanged by the body and free of the counter, no group, no leave; 1 with
 * the note when not. */
static int caller_side(const scan *s, const fn_gather *g, size_t k, call_loop *c,
                       cuco_sched_plan *p)
{
    const sview *v = s->v;
    int line = tk(v, k)->line;
    if (!find_call_loop(v, k, c))
        return sched_note(p,
                          "its function's call at line %d is no statement of a counted `for` "
                          "loop's body",
                          line);
    int pk = param_index_at(s, g->param);
    if (pk < 0 || !arg_range(v, k + 1, pk, &c->pa, &c->pb) || c->pb != c->pa + 1 ||
        !same_tok(v, c->pa, c->L.var))
        return sched_note(p,
                          "its function's call at line %d does not pass its loop's counter "
                          "for the parameter its send buffer changes with",
                          line);
    size_t a, b;
    for (int i = 0; i < 64; i++)
        if (i != pk && (g->send_params >> i & 1) &&
            (!arg_range(v, k + 1, i, &a, &b) || !sched_readable_before(v, a, b, c->from, c->to) ||
             sched_prefetch_names(v, a, b, c->L.var)))
            return sched_note(p,
                              "an argument its send buffer reads at its function's call at "
                              "line %d changes in that call's loop (or with its counter)",
                              line);
    if (sched_in_group(v, function_body_of(v, c->L.kw), c->L.kw))
        return sched_note(p,
                          "an NCCL group is open around the loop of its function's call at "
                          "line %d",
                          line);
    if (body_leaves(v, c))
        return sched_note(p,
                          "the loop of its function's call at line %d may leave an iteration "
                          "early",
                          line);
    if (!sched_loop_stands_alone(v, &c->L))
        return sched_note(p,
                          "the loop of its function's call at line %d is not a statement of a "
                          "braced block",
                          line);
    return 0;
}

/* The caller's name for the object the send is a member of: the argument
 * for that parameter when it is a name (`m`) or its address (`&model`),
 * owned; NULL when the send is no member of a parameter or the argument is
 * more. */
static char *caller_root(const scan *s, const fn_gather *g, const call_loop *c)
{
    const sview *v = s->v;
    char *root = sched_prefetch_send_root(v, g->sa, g->sb);
    int k = root ? param_index_at(s, g->sa) : -1;
    size_t a, b;
    free(root);
    if (k < 0 || !arg_range(v, c->call + 1, k, &a, &b))
        return NULL;
    if (is(v, a, "&"))
        a++;
    return b == a + 1 && ident(v, a) ? cuco_strndup(v->src + tk(v, a)->off, tk(v, a)->len) : NULL;
}

/* Pushes the heads of tokens [a, b) (every variable they name) onto out,
 * less root where the tokens name it only through other members
 * (sched_prefetch_root_apart_in). */
static int heads_apart(const sview *v, size_t a, size_t b, const prefetch_apart *ap,
                       cuco_strlist *out)
{
    cuco_strlist h = {0};
    int rc = 0;
    for (size_t k = a; k < b && rc == 0; k++) {
        char *w = scan_is_head(v, k) ? cuco_strndup(v->src + tk(v, k)->off, tk(v, k)->len) : NULL;
        rc = scan_is_head(v, k) ? (w ? cuco_strlist_push(&h, w) : CUCO_ENOMEM) : 0;
        free(w);
    }
    int apart = ap->root && sched_prefetch_root_apart_in(v, a, b, ap->root, ap->member);
    for (size_t i = 0; i < h.n && rc == 0; i++)
        if (!apart || strcmp(h.items[i], ap->root) != 0)
            rc = cuco_strlist_push(out, h.items[i]);
    cuco_strlist_free(&h);
    return rc;
}

/* The names the statement of F's call reads or writes besides the call
 * (`rc` of `rc = f(...)`, those a macro around it names), and those of
 * F's arguments for parameters the send does not name (F may write through
 * them), into out; 1 when the statement calls anything but a macro around
 * F's call that only checks it, or an argument of F calls anything. */
static int call_stmt_heads(const sview *v, const call_loop *c, const prefetch_apart *ap,
                           unsigned long long send_params, cuco_strlist *out)
{
    size_t close = close_of(v, c->call + 1), a, b;
    int rc = 0;
    for (size_t k = c->sa; k < c->sb && rc == 0; k++) {
        if (k >= c->call && k <= close)
            continue;
        int call = ident(v, k) && (is(v, k + 1, "(") || is(v, k + 1, "<<<")) &&
                   !in_words(v, k, sview_keywords);
        if (call && !(scan_all_caps(v, k) && is(v, k + 1, "(") && k < c->call &&
                      close_of(v, k + 1) > close))
            return 1;
        /* a macro around the call: what its text does beside it (an error
         * check's exit aside) */
        unsigned reach = 0;
        if (call && (rc = scan_macro_reach(v, k, out, &reach)) == 0 &&
            (reach & (SCAN_MACRO_LAUNCHES | SCAN_MACRO_OPAQUE | SCAN_MACRO_SYNCS)))
            return 1;
    }
    for (int i = 0; rc == 0 && arg_range(v, c->call + 1, i, &a, &b); i++)
        if (!sched_calls_only_sizes(v, a, b))
            return 1; /* a call in an argument runs in the loop's body too */
    if (rc == 0)
        rc = heads_apart(v, c->sa, c->call, ap, out);
    if (rc == 0)
        rc = heads_apart(v, close + 1, c->sb, ap, out);
    for (int i = 0; rc == 0 && arg_range(v, c->call + 1, i, &a, &b); i++)
        if (i >= 64 || !(send_params >> i & 1))
            rc = heads_apart(v, a, b, ap, out);
    return rc;
}

/* The loop's body leaves the send buffer alone (in the caller's names:
 * the arguments for F's parameters, and what may hold them): neither the
 * statement of F's call besides the call, nor F's other arguments, nor the
 * body's other statements touch it; 1 with the note when they may. */
static int caller_keeps_send(const scan *s, const fn_gather *g, const call_loop *c,
                             cuco_sched_plan *p)
{
    const sview *v = s->v;
    scan cs = {.v = v, .call = (size_t)-1, .sem = s->sem, .n_sem = s->n_sem, .call_tok = c->call};
    cs.block = c->braced ? c->from : block_open(v, c->sa);
    cs.block_end = c->braced ? c->to : close_of(v, cs.block);
    char *root = caller_root(s, g, c);
    prefetch_apart ap = {.root = root, .member = g->sa + 2};
    cuco_strlist heads = {0};
    int line = tk(v, c->call)->line;
    int rc = scan_fn_scope_find(&cs.fn, v, cs.block);
    if (rc == 0 && (rc = sched_map_names(s, c->call + 1, &s->send, &cs.send)) == 1)
        rc = sched_note(p, "its send buffer is a local of its function (line %d)", line);
    if (rc == 0)
        rc = scan_closure_and_escapes(&cs);
    if (rc == 0 && (rc = call_stmt_heads(v, c, &ap, g->send_params, &heads)) == 1)
        rc = sched_note(p, "the statement of its function's call at line %d calls more", line);
    for (size_t i = 0; rc == 0 && i < heads.n; i++)
        if (cuco_strlist_has(&cs.all, heads.items[i]))
            rc = sched_note(p,
                            "the statement of its function's call at line %d names or passes "
                            "what may hold its send buffer",
                            line);
    if (rc == 0 && c->braced)
        rc = scan_read_block(&cs, c->sa);
    char *what = rc == 0 && c->braced ? cuco_sprintf("the loop (line %d) of its function's call "
                                                     "at line %d",
                                                     tk(v, c->L.kw)->line, line)
                                      : NULL;
    size_t launches = 0;
    if (rc == 0 && c->braced)
        rc = what ? sched_prefetch_keeps_send(&cs, &ap, 0, what, p, &launches) : CUCO_ENOMEM;
    free(what);
    free(root);
    cuco_strlist_free(&heads);
    sched_scan_free(&cs);
    return rc;
}

/* The hint at the call's argument for P: cuco_tx::prefetch_hint(site,
 * CUCO_PREF_site, COND, NEXT, counter). */
static int hint_edit(const scan *s, const call_loop *c, int site, cuco_sched_plan *p)
{
    const sview *v = s->v;
    char *cond = NULL, *step = NULL;
    int rc = sched_prefetch_next_condition(v, &c->L, c->from, c->to, p, &cond, &step);
    char *next = rc == 0 ? sched_prefetch_next_text(v, c->pa, c->pb, c->L.var, step) : NULL;
    if (rc == 0 && !next)
        rc = CUCO_ENOMEM;
    if (rc == 0)
        rc = scan_plan_edit(p, tk(v, c->pa)->off, 0,
                            cuco_sprintf("cuco_tx::prefetch_hint(%d, CUCO_PREF_%d, %s, %s, ", site,
                                         site, cond, next),
                            tk(v, c->pa)->off);
    const cuco_tok *last = tk(v, c->pb - 1);
    if (rc == 0)
        rc = scan_plan_edit(p, last->off + last->len, 0, cuco_strdup(")"), tk(v, c->pa)->off);
    char *drop =
        rc == 0 ? cuco_sprintf("cuco_tx::prefetch_drop(%d, CUCO_PREF_%d);", site, site) : NULL;
    if (rc == 0)
        rc = drop ? sched_insert_before(v, c->L.kw, drop, p) : CUCO_ENOMEM;
    free(drop);
    free(next);
    free(cond);
    free(step);
    return rc;
}

/* The site at F's gather: next and count with P the hinted counter. */
static int site_edit(const scan *s, const fn_gather *g, int site, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t param = g->param, sa = g->sa, sb = g->sb;
    size_t ca, cb;
    if (!arg_range(v, s->call_tok + 1, ARG_COUNT, &ca, &cb))
        return sched_note(p, "its count argument was not found", 0);
    char *hinted = cuco_sprintf("cuco_tx::prefetch_hinted(%d, %.*s)", site, (int)tk(v, param)->len,
                                v->src + tk(v, param)->off);
    char *repl = cuco_sprintf("cuco_tx::prefetch_hint_next(%d)", site);
    char *next = repl ? sched_prefetch_subst(v, sa, sb, param, repl) : NULL;
    char *count = repl ? sched_prefetch_subst(v, ca, cb, param, repl) : NULL;
    int rc = hinted && next && count ? 0 : CUCO_ENOMEM;
    if (rc == 0)
        rc = scan_plan_edit(p, tk(v, sa)->off, 0,
                            cuco_sprintf("cuco_tx::prefetch_site(%d, CUCO_PREF_%d, %s ? (const "
                                         "void *)(%s) : nullptr, %s ? (size_t)(%s) : 0, 0), ",
                                         site, site, hinted, next, hinted, count),
                            tk(v, sa)->off);
    free(hinted);
    free(repl);
    free(next);
    free(count);
    return rc;
}

/* F's calls, each checked and hinted; *loop_line: the first one's loop. */
static int each_call(const scan *s, const fn_gather *g, int site,
                     int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *p,
                     int *loop_line)
{
    const sview *v = s->v;
    int rc = 0;
    for (size_t i = 0; i < g->nsites && rc == 0; i++) {
        call_loop c;
        rc = caller_side(s, g, g->sites[i], &c, p);
        if (rc == 0)
            rc = caller_keeps_send(s, g, &c, p);
        if (rc == 0 && editable &&
            (!editable(ctx, tk(v, c.pa)->off) || !editable(ctx, tk(v, c.L.kw)->off)))
            rc = sched_note(p, "its function's call at line %d or its loop is in frozen code",
                            tk(v, g->sites[i])->line);
        if (rc == 0)
            rc = hint_edit(s, &c, site, p);
        if (rc == 0 && i == 0)
            *loop_line = tk(v, c.L.kw)->line;
    }
    return rc;
}

/* F's calls into g->sites, the parameters the send names into
 * g->send_params, and the counter's parameter into g->param: the one for
 * which F's first call passes the counter of the loop around it; 1 with
 * the note when F is not called, its first call stands in no counted loop
 * or passes no counter for a parameter the send names. */
static int counter_param(const scan *s, fn_gather *g, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t a, b;
    call_loop c;
    int rc = sched_call_sites(s, g->name, &g->sites, &g->nsites, p);
    if (rc == 0 && g->nsites == 0)
        return sched_note_take(p, cuco_sprintf("its function %.*s is not called in the file",
                                               (int)tk(v, g->name)->len,
                                               v->src + tk(v, g->name)->off));
    if (rc == 0 && !find_call_loop(v, g->sites[0], &c))
        return sched_note(p,
                          "its function's call at line %d is no statement of a counted `for` "
                          "loop's body",
                          tk(v, g->sites[0])->line);
    for (size_t k = g->sa; rc == 0 && k < g->sb; k++) {
        int i = ident(v, k) && sched_prefetch_names_at(v, g->sa, k, k) ? param_index_at(s, k) : -1;
        if (i < 0 || i >= 64)
            continue;
        g->send_params |= 1ULL << i;
        if (g->param >= v->n && arg_range(v, g->sites[0] + 1, i, &a, &b) && b == a + 1 &&
            same_tok(v, a, c.L.var))
            g->param = param_token(s, k);
    }
    if (rc == 0 && g->param >= v->n)
        rc = sched_note(p,
                        "its send buffer changes with no parameter for which its function's "
                        "call at line %d passes its loop's counter",
                        tk(v, g->sites[0])->line);
    return rc;
}

/* F's other statements leave the send buffer alone (*launches: the work
 * launched beside the gather); 1 with the note when not. */
static int function_keeps_send(const scan *s, const fn_gather *g, size_t *launches,
                               cuco_sched_plan *p)
{
    const sview *v = s->v;
    char *what =
        cuco_sprintf("its function %.*s", (int)tk(v, g->name)->len, v->src + tk(v, g->name)->off);
    char *root = sched_prefetch_send_root(v, g->sa, g->sb);
    prefetch_apart ap = {.root = root, .member = g->sa + 2};
    int rc = what ? sched_prefetch_keeps_send(s, &ap, 1, what, p, launches) : CUCO_ENOMEM;
    free(root);
    free(what);
    return rc;
}

/* The report line of the schedule that applies, into p->note. */
static int caller_note(const scan *s, const fn_gather *g, int loop_line, size_t launches,
                       cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t name = g->name, param = g->param, sa = g->sa, sb = g->sb, n_calls = g->nsites;
    char *send = sview_text(v, sa, sb);
    free(p->note);
    p->note = send ? cuco_sprintf("ncclAllGather at line %d gathers the input of its function "
                                  "%.*s's next call (%s, with %.*s the counter of the loop at "
                                  "line %d one step on, which each of its %zu call%s passes) "
                                  "beside the rest of that call and of the loop's iteration "
                                  "(%zu launch%s in the function) into a window of its own, and "
                                  "the next call copies it into its buffer",
                                  tk(v, s->call_tok)->line, (int)tk(v, name)->len,
                                  v->src + tk(v, name)->off, send, (int)tk(v, param)->len,
                                  v->src + tk(v, param)->off, loop_line, n_calls,
                                  n_calls == 1 ? "" : "s", launches, launches == 1 ? "" : "es")
                   : NULL;
    free(send);
    return p->note ? 0 : CUCO_ENOMEM;
}

int sched_prefetch_caller(const scan *s, int site, int (*editable)(void *ctx, size_t off),
                          void *ctx, cuco_sched_plan *p)
{
    const sview *v = s->v;
    fn_gather g = {.name = sched_free_function(s), .param = v->n};
    size_t edits = p->nedits, launches = 0;
    int loop_line = 0;
    if (s->block != s->fn.body || g.name == 0)
        return sched_note(p, "it is no statement of a free function's body either", 0);
    int rc = arg_range(v, s->call_tok + 1, ARG_SEND, &g.sa, &g.sb)
                 ? counter_param(s, &g, p)
                 : sched_note(p, "its send argument was not found", tk(v, s->call_tok)->line);
    if (rc == 0)
        rc = function_side(s, &g, p);
    if (rc == 0)
        rc = function_keeps_send(s, &g, &launches, p);
    if (rc == 0 && editable && !editable(ctx, tk(v, s->call_tok)->off))
        rc = sched_note(p, "the call (line %d) is in frozen code", tk(v, s->call_tok)->line);
    if (rc == 0)
        rc = each_call(s, &g, site, editable, ctx, p, &loop_line);
    if (rc == 0)
        rc = site_edit(s, &g, site, p);
    if (rc == 0)
        rc = caller_note(s, &g, loop_line, launches, p);
    if (rc == 0) {
        p->applies = 1;
        p->knob_default = 1;
    } else {
        sched_drop_edits(p, edits);
    }
    free(g.sites);
    return rc;
}
