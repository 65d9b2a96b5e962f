/* sched_callers.c: schedule (a) across a function's return (scan_int.h).
 *
 * A collective that ends a wrapper (`void reduce_from_tp(float *x, size_t
 * n) { ncclAllReduce(x, x, n, ...); }`) has nothing after it in its block:
 * its consumer is in the caller. When the call is the last thing its
 * function does (the wait would go to the end of the body, nothing
 * independent before), the call starts early there, and every call of that
 * function gets the wait before its own first consumer in the caller's
 * block, read with the caller's names: the arguments passed for the
 * function's buffer and stream parameters. It applies only when the
 * function is a free function of the file (static, or the file holds main)
 * whose name is used for nothing but calls, in no macro's text, and every
 * call is a plain statement of a braced block outside an NCCL group, in
 * another function, whose wait can be placed: a call without its wait
 * would leave the collective unwaited.
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

int sched_map_names(const scan *s, size_t open, const cuco_strlist *in, cuco_strlist *out)
{
    const sview *v = s->v;
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        int k = sview_param_index(v, s->fn.params, in->items[i]);
        size_t a, b;
        if (k < 0 && cuco_strlist_has(&s->fn.locals, in->items[i]))
            rc = 1;
        else if (k < 0)
            rc = cuco_strlist_push(out, in->items[i]);
        else if (arg_range(v, open, k, &a, &b))
            rc = scan_expr_heads(v, a, b, out, 0);
        else
            rc = CUCO_EINVAL;
    }
    return rc;
}

/* The caller's text of the call's stream: the argument for a stream
 * parameter, else the same text (a global). */
static char *map_stream(const scan *s, size_t open)
{
    const sview *v = s->v;
    int k = s->stream ? sview_param_index(v, s->fn.params, s->stream) : -1;
    size_t a, b;
    if (k < 0 || !arg_range(v, open, k, &a, &b))
        return s->stream ? cuco_strdup(s->stream) : NULL;
    return sview_text(v, a, b);
}

/* Whether the text of a #define (the file's or its headers') names the
 * function at name: a call there is not in the view. */
static int in_macro(const sview *v, size_t name)
{
    const char *w = v->src + tk(v, name)->off;
    size_t len = tk(v, name)->len;
    const cuco_lex *lexes[] = {&v->lx, v->has_macros ? &v->macros : NULL};
    for (int l = 0; l < 2; l++)
        for (size_t k = 0; lexes[l] && k < lexes[l]->ntoks; k++) {
            const cuco_tok *t = &lexes[l]->toks[k];
            if (t->kind != CUCO_TOK_PREPROC)
                continue;
            const char *a = lexes[l]->src + t->off, *e = a + t->len;
            for (const char *q = a; q + len <= e; q++)
                if (!memcmp(q, w, len) && (q == a || !cuco_tx_ident_char(q[-1])) &&
                    (q + len == e || !cuco_tx_ident_char(q[len])))
                    return 1;
        }
    return 0;
}

/* Whether another file may call the function at name: not static, and no
 * main in this file (a program of several sources). */
static int seen_elsewhere(const sview *v, size_t name)
{
    for (size_t k = name; k-- > 0 && !is(v, k, ";") && !is(v, k, "}") && !is(v, k, "{");)
        if (is(v, k, "static"))
            return 0;
    for (size_t i = 0; i < v->ndefs; i++)
        if (is(v, v->defs[i], "main"))
            return 0;
    return 1;
}

int sched_call_sites(const scan *s, size_t name, size_t **sites, size_t *n, cuco_sched_plan *p)
{
    const sview *v = s->v;
    if (in_macro(v, name))
        return sched_note_take(p, cuco_strdup("its function is named in a macro's text"));
    if (seen_elsewhere(v, name))
        return sched_note_take(p,
                               cuco_strdup("its function is not static and the file has no main: "
                                           "another file may call it"));
    for (size_t k = 0; k + 1 < v->n; k++) {
        if (k == name || !same_tok(v, k, name))
            continue;
        size_t body = function_body_of(v, k);
        if (body >= v->n)
            continue; /* a declaration at file scope */
        if (!is(v, k + 1, "(") || is(v, k - 1, ".") || is(v, k - 1, "->") || is(v, k - 1, "&") ||
            (body >= s->fn.body && body <= s->fn.body_end))
            return sched_note_take(p, cuco_sprintf("its function is used at line %d other than by "
                                                   "a call in another function",
                                                   tk(v, k)->line));
        size_t *g = realloc(*sites, (*n + 1) * sizeof(*g));
        if (!g)
            return CUCO_ENOMEM;
        *sites = g;
        g[(*n)++] = k;
    }
    return 0;
}

/* The wait at the call of the function at k: placed in its caller's block
 * with the caller's names, the edit added to p; sum adds up the
 * independent launches there. 1 with the note when it cannot be placed. */
static int site_wait(const scan *s, size_t k, int site, int (*editable)(void *, size_t), void *ctx,
                     cuco_sched_plan *p, cuco_sched_place *sum)
{
    const sview *v = s->v;
    scan cs = {.v = v, .call = (size_t)-1, .sem = s->sem, .n_sem = s->n_sem, .call_tok = k};
    size_t call_stmt = 0;
    cuco_sched_place pl = {0};
    int rc = sched_locate(&cs, k, p, &call_stmt);
    if (rc == 1) { /* the note is about the call of the function */
        char *why = p->note;
        p->note = NULL;
        rc = sched_note_take(p, cuco_sprintf("at its call at line %d, %s", tk(v, k)->line, why));
        free(why);
    }
    if (rc == 0 && sched_in_group(v, cs.block, call_stmt))
        rc = sched_note_take(
            p, cuco_sprintf("its call at line %d is inside an NCCL group", tk(v, k)->line));
    if (rc == 0) {
        int mrc = sched_map_names(s, k + 1, &s->send, &cs.send);
        if (mrc == 0)
            mrc = sched_map_names(s, k + 1, &s->recv, &cs.recv);
        rc = mrc != 1
                 ? mrc
                 : sched_note_take(p, cuco_strdup("its buffer is a local of its function, which "
                                                  "the callers cannot name"));
    }
    if (rc == 0 && !(cs.stream = map_stream(s, k + 1)))
        rc = CUCO_ENOMEM;
    char *what = rc == 0 ? cuco_sprintf("its call at line %d", tk(v, k)->line) : NULL;
    if (rc == 0 && !what)
        rc = CUCO_ENOMEM;
    if (rc == 0)
        rc = sched_wait_after(&cs, call_stmt, what, site, editable, ctx, p, &pl);
    free(what);
    sum->independent += pl.independent;
    sum->same_stream += pl.same_stream;
    sched_scan_free(&cs);
    return rc;
}

/* Whether a buffer parameter of the function (in names) is set in its body
 * (`if (!buf) buf = g_grad[b];`): the callers' argument is then not what
 * the call reduces. */
static int param_set(const scan *s, const cuco_strlist *names)
{
    static const char *const sets[] = {"=", "+=", "-=", "++", "--", NULL};
    const sview *v = s->v;
    for (size_t i = 0; i < names->n; i++) {
        if (sview_param_index(v, s->fn.params, names->items[i]) < 0)
            continue;
        for (size_t k = s->fn.body + 1; k < s->fn.body_end; k++)
            if (is(v, k, names->items[i]) && !is(v, k - 1, ".") && !is(v, k - 1, "->") &&
                (in_words(v, k + 1, sets) || is(v, k - 1, "&") || is(v, k - 1, "++") ||
                 is(v, k - 1, "--")))
                return 1;
    }
    return 0;
}

size_t sched_free_function(const scan *s)
{
    const sview *v = s->v;
    size_t name = s->fn.params - 1;
    return name == 0 || !ident(v, name) || is(v, name - 1, "::") || is(v, name - 1, ".") ||
                   sview_class_body(v, block_open(v, name))
               ? 0
               : name;
}

int sched_callers(scan *s, int site, int (*editable)(void *ctx, size_t off), void *ctx,
                  cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t name = sched_free_function(s), *sites = NULL, n = 0, edits = p->nedits;
    cuco_sched_place sum = {0};
    if (s->block != s->fn.body || name == 0)
        return sched_note_take(p, cuco_strdup("and it does not end a free function whose calls "
                                              "could take its wait"));
    if (param_set(s, &s->send) || param_set(s, &s->recv))
        return sched_note_take(p, cuco_strdup("and its buffer parameter is set in its function: "
                                              "the callers' argument is not what it reduces"));
    char *fname = cuco_strndup(v->src + tk(v, name)->off, tk(v, name)->len);
    if (!fname)
        return CUCO_ENOMEM;
    int rc = sched_call_sites(s, name, &sites, &n, p);
    if (rc == 0 && n == 0)
        rc = sched_note_take(p,
                             cuco_sprintf("and its function %s is not called in the file", fname));
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = site_wait(s, sites[i], site, editable, ctx, p, &sum);
    if (rc == 0 && sum.independent == 0)
        rc = sched_note_take(p, cuco_sprintf("nor after the calls of its function %s", fname));
    if (rc == 0)
        rc = sched_start_edit(s, s->call_tok + 1, site, p);
    if (rc == 0) {
        free(p->note);
        p->note = cuco_sprintf("early_start_late_wait: %.*s at line %d issued on a side stream, "
                               "its wait moved after each of the %zu call%s of %s, before the "
                               "first consumer there (%zu independent launch%s in between in all)",
                               (int)tk(v, s->call_tok)->len, v->src + tk(v, s->call_tok)->off,
                               tk(v, s->call_tok)->line, n, n == 1 ? "" : "s", fname,
                               sum.independent, sum.independent == 1 ? "" : "es");
        rc = p->note ? 0 : CUCO_ENOMEM;
    }
    if (rc == 0) {
        p->applies = 1;
        p->knob_default = sum.same_stream > 0;
        p->independent = sum.independent;
        p->same_stream = sum.same_stream;
    } else {
        sched_drop_edits(p, edits);
    }
    free(sites);
    free(fname);
    return rc;
}
