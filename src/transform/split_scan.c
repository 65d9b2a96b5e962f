/* split_scan.c: the splits read on schedule (a)'s scan (scan_int.h).
 *
 * Schedule (b), consumer split by source (scan_try_split): when an
 * all-gather's (or an all-to-all's) first consumer is a cuBLAS GEMM reading
 * the gathered buffer
 * (directly, in the block of an `if` without else, or in a helper called
 * once, the block or the helper's body being plain code and that GEMM), the
 * GEMM goes through cuco_tx::<gemm>_split(site, CUCO_SPLIT_<site>, ...),
 * the all-gather gets split_site(site, CUCO_SPLIT_<site>) first, and the
 * GEMM is no consumer any more: the wait is placed again, after it. A
 * launch of a kernel the manifest declares rows_independent or attention
 * (kernel_launch.h), in the same places, is split the same way through
 * cuco_tx::kernel_split or cuco_tx::attention_split. The same scan on a
 * receive (consume_as_received) takes only a declared rows_independent
 * kernel: it runs piece by piece as the receive lands
 * (cuco_tx::kernel_recv_split, the receive getting recv_site(...) first).
 *
 * producer_split (scan_try_produce): the GEMM or declared kernel right
 * before an all-reduce or reduce-scatter that writes its input runs in
 * ranges, each reduced as soon as it is made.
 */
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- schedule (b): consumer split by source -------------------------------- */

static const gemm_api gemm_table[] = {
    {"cublasGemmEx", "cuco_tx::gemm_ex_split", "cuco_tx::gemm_ex_produce",
     "cuco_tx::gemm_ex_record", 19, 7, 10, 14},
    {"cublasGemmStridedBatchedEx", "cuco_tx::gemm_strided_batched_ex_split",
     "cuco_tx::gemm_strided_batched_ex_produce", "cuco_tx::gemm_strided_batched_ex_record", 23, 7,
     11, 16},
    {"cublasSgemm", "cuco_tx::sgemm_split", "cuco_tx::sgemm_produce", "cuco_tx::sgemm_record", 14,
     7, 9, 12},
    {"cublasHgemm", "cuco_tx::hgemm_split", "cuco_tx::hgemm_produce", "cuco_tx::hgemm_record", 14,
     7, 9, 12},
    /* (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
     * size, stream): D is the output */
    {"cublasLtMatmul", "cuco_tx::lt_matmul_split", "cuco_tx::lt_matmul_produce",
     "cuco_tx::lt_matmul_record", 16, 3, 5, 10},
    {NULL, NULL, NULL, NULL, 0, 0, 0, 0}};

const gemm_api *gemm_at(const sview *v, size_t i)
{
    if (!ident(v, i) || !is(v, i + 1, "(") ||
        (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"))))
        return NULL;
    for (const gemm_api *g = gemm_table; g->name; g++)
        if (is(v, i, g->name))
            return g;
    return NULL;
}

/* Whether argument k of the call at open names one of the call's buffers. */
int scan_arg_names_buffer(const scan *s, size_t open, int k, int *hit)
{
    size_t a, b;
    cuco_strlist h = {0};
    *hit = 0;
    if (!arg_range(s->v, open, k, &a, &b))
        return 0;
    int rc = scan_expr_heads(s->v, a, b, &h, 1);
    int apart = rc == 0 && scan_members_apart_in(s, a, b); /* only other members of it */
    for (size_t i = 0; rc == 0 && i < h.n; i++)
        if (cuco_strlist_has(&s->all, h.items[i]) &&
            !(apart && !strcmp(h.items[i], s->member_base)))
            *hit = 1;
    cuco_strlist_free(&h);
    return rc;
}

/* The GEMM call of statement st when st is that call alone (in macros, or as
 * the body of an unbraced if without else); v->n with *why set otherwise. */
static size_t split_gemm(const scan *s, const stmt *st, const char **why)
{
    const sview *v = s->v;
    size_t g = v->n;
    int semis = 0;
    *why = "is not a cuBLAS GEMM call (cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemm, "
           "cublasHgemm, cublasLtMatmul)";
    for (size_t i = st->a; i < st->b; i++) {
        if (is(v, i, "{") || is(v, i, "else") || is(v, i, "for") || is(v, i, "while") ||
            is(v, i, "do") || is(v, i, "switch"))
            return v->n;
        semis += is(v, i, ";");
        if (gemm_at(v, i)) {
            if (g < v->n) {
                *why = "holds more than one GEMM";
                return v->n;
            }
            g = i;
        }
    }
    if (g >= v->n)
        return v->n;
    /* an error check's return in the macro around the GEMM leaves it one call */
    cuco_sched_kind kind = st->kind == CUCO_SCHED_EXIT ? st->kind_but_macro_exits : st->kind;
    if (semis != 1 || st->calls || kind != CUCO_SCHED_WORK) {
        *why = "is a GEMM inside a larger statement";
        return v->n;
    }
    const gemm_api *api = gemm_at(v, g);
    if (arg_count(v, g + 1) != api->nargs) {
        *why = "is a GEMM whose arguments could not be read";
        return v->n;
    }
    return g;
}

/* The one call of statement st to a function of the program that the lists
 * do not know (its name token); v->n when there is not exactly one. */
static size_t helper_callee(const sview *v, const stmt *st)
{
    size_t f = v->n;
    if (st->calls != 1 || st->method_calls)
        return v->n;
    for (size_t i = st->a; i < st->b; i++) {
        size_t open = scan_call_open(v, i);
        if (open >= v->n || !is(v, open, "(") || is(v, i + 1, "<") ||
            scan_call_in(v, i, scan_sync_calls) || scan_call_in(v, i, scan_work_calls) ||
            scan_call_in(v, i, scan_indirect_launches) || scan_call_in(v, i, scan_plain_calls) ||
            scan_all_caps(v, i) || nccl_name(v, i) ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"))))
            continue;
        if (f < v->n)
            return v->n;
        f = i;
    }
    return f;
}

/* The '{' of the body of the file-scope function named like token f, when
 * it has one definition and is called once (from inside a function); v->n
 * otherwise. */
static size_t helper_body(const sview *v, size_t f)
{
    size_t body = v->n;
    int calls = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!is(v, i + 1, "(") || !same_tok(v, i, f) ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"))))
            continue;
        size_t after = close_of(v, i + 1) + 1;
        if (block_open(v, i) < v->n) {
            calls++;
        } else if (after < v->n && is(v, after, "{")) {
            if (body < v->n)
                return v->n;
            body = after;
        }
    }
    return calls == 1 ? body : v->n;
}

/* Whether tokens [a, b) launch a kernel. */
static int has_launch(const sview *v, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (is(v, i, "<<<"))
            return 1;
    return 0;
}

/* When the braced block at body holds plain host code and one work
 * statement, a cuBLAS GEMM or a kernel launch: 1, that statement's tokens
 * in [*wa, *wb) and its GEMM's name token in *g (v->n for a launch); 0
 * otherwise. */
static int body_work(const scan *s, size_t body, size_t *wa, size_t *wb, size_t *g)
{
    const sview *v = s->v;
    size_t end = close_of(v, body), fa = 0, fb = 0, fg = v->n;
    int found = 0;
    for (size_t i = body + 1; i < end;) {
        stmt h;
        memset(&h, 0, sizeof(h));
        h.a = i;
        h.b = scan_stmt_after(v, i, end);
        if (h.b <= i)
            h.b = i + 1;
        int rc = scan_stmt_classify(v, &h);
        const char *ignored = NULL;
        size_t hg = rc == 0 && h.kind == CUCO_SCHED_WORK ? split_gemm(s, &h, &ignored) : v->n;
        int work = hg < v->n || (rc == 0 && h.kind == CUCO_SCHED_WORK && h.calls == 0 &&
                                 has_launch(v, h.a, h.b));
        int plain = rc == 0 && h.kind == CUCO_SCHED_PLAIN && h.calls == 0;
        scan_stmt_free(&h);
        if ((!work && !plain) || (work && found))
            return 0;
        if (work) {
            found = 1;
            fa = h.a;
            fb = h.b;
            fg = hg;
        }
        i = h.b;
    }
    if (found) {
        *wa = fa;
        *wb = fb;
        *g = fg;
    }
    return found;
}

/* When statement st calls a helper whose body is plain host code and one
 * work statement (body_work): 1, with that statement; 0 otherwise (*why). */
static int helper_work(const scan *s, const stmt *st, size_t *wa, size_t *wb, size_t *g,
                       const char **why)
{
    const sview *v = s->v;
    size_t f = helper_callee(v, st), body = f < v->n ? helper_body(v, f) : v->n;
    if (body >= v->n)
        return 0;
    *why = "calls a helper that is not plain host code and one cuBLAS GEMM or kernel launch";
    return body_work(s, body, wa, wb, g);
}

size_t scan_helper_launch(const scan *s, const stmt *st, size_t *wa, size_t *wb)
{
    const sview *v = s->v;
    const char *why = NULL;
    size_t f = helper_callee(v, st), g = v->n;
    if (f >= v->n || !helper_work(s, st, wa, wb, &g, &why) || g < v->n)
        return v->n;
    return f;
}

/* When statement st is `if (cond) { ... }` (no else) whose block is plain
 * host code and one work statement (body_work): 1, with that statement;
 * 0 otherwise (*why when it is such an if). */
static int guarded_work(const scan *s, const stmt *st, size_t *wa, size_t *wb, size_t *g,
                        const char **why)
{
    const sview *v = s->v;
    if (!is(v, st->a, "if") || !is(v, st->a + 1, "("))
        return 0;
    size_t body = close_of(v, st->a + 1) + 1;
    if (body >= st->b || !is(v, body, "{") || close_of(v, body) + 1 != st->b)
        return 0;
    *why = "is an if whose block is not plain host code and one cuBLAS GEMM or kernel launch";
    return body_work(s, body, wa, wb, g);
}

/* Sets plan->split_note to why the split does not apply: 1 (stop), or
 * CUCO_ENOMEM. */
static int split_no(cuco_sched_plan *p, const char *why, int line)
{
    free(p->split_note);
    p->split_note = cuco_sprintf("its first consumer (line %d) %s", line, why);
    return p->split_note ? 1 : CUCO_ENOMEM;
}

/* The launch kl, from its name through the '(' of its arguments, through
 * the glue call that head opens; head (owned, NULL: out of memory) is
 * freed. */
static int launch_edit(cuco_sched_plan *p, const sview *v, const kernel_launch *kl, char *head)
{
    size_t off = tk(v, kl->name)->off, end = tk(v, kl->args)->off + 1;
    int rc = head ? scan_plan_edit(p, off, end - off, kernel_launch_call(v, kl, head), off)
                  : CUCO_ENOMEM;
    free(head);
    return rc;
}

/* The split's edits: the GEMM (or the kernel launch) through its glue with
 * site and knob in front, the all-gather with split_site(...) as its first
 * argument. */
int scan_split_edits(scan *s, size_t call_open, int site, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t a, b, ga, gb;
    if (!arg_range(v, call_open, 0, &a, &b))
        return CUCO_EINVAL;
    int rc;
    int recv = scan_is_recv(s);
    if (p->split_kernel) {
        int att = s->ks.attention;
        char *spec = att ? kernel_launch_attention_spec(v, &s->ks) : kernel_launch_spec(&s->ks);
        const char *glue = att ? "attention_split" : recv ? "kernel_recv_split" : "kernel_split";
        char *head =
            spec ? cuco_sprintf("cuco_tx::%s(%d, CUCO_SPLIT_%d, %s", glue, site, site, spec) : NULL;
        free(spec);
        rc = launch_edit(p, v, &s->ks, head);
    } else {
        size_t g = s->gemm, goff = tk(v, g)->off;
        if (!arg_range(v, g + 1, 0, &ga, &gb))
            return CUCO_EINVAL;
        rc = scan_plan_edit(p, goff, tk(v, g)->len, cuco_strdup(gemm_at(v, g)->glue), goff);
        if (rc == 0)
            rc = scan_plan_edit(p, tk(v, ga)->off, 0,
                                cuco_sprintf("%d, CUCO_SPLIT_%d, ", site, site), goff);
    }
    if (rc == 0)
        rc = scan_plan_edit(p, tk(v, a)->off, 0,
                            cuco_sprintf("cuco_tx::%s(%d, CUCO_SPLIT_%d), ",
                                         recv ? "recv_site" : "split_site", site, site),
                            tk(v, a)->off);
    return rc;
}

/* Statement st stops consuming the gathered buffer (the split waits per
 * source rank itself): only its other names remain, and the wait is placed
 * again. */
static int stop_consuming(scan *s, stmt *st, cuco_sched_place *pl)
{
    int rc = scan_stmt_drop_heads(st, &s->all);
    if (rc != 0)
        return rc;
    st->kind = CUCO_SCHED_WORK; /* a helper's body was checked: plain code and the GEMM */
    return scan_place(s, pl);
}

int scan_launch_reads(const scan *s, size_t open, int nargs, unsigned long *bits)
{
    *bits = 0;
    int rc = 0;
    for (int k = 0; rc == 0 && k < nargs && k < (int)(8 * sizeof *bits); k++) {
        int hit = 0;
        rc = scan_arg_names_buffer(s, open, k, &hit);
        *bits |= (unsigned long)hit << k;
    }
    return rc;
}

/* The end of an attention split's report line: whether its queries may move
 * between ranks, or what the declaration lacks for it. */
static const char *lend_note(const kernel_launch *kl)
{
    if (!kl->attention)
        return "";
    if (kl->lend)
        return "; a rank that sees more keys lends its last queries to the least busy rank "
               "(CUCO_ATTN_LEND)";
    if (kl->query_terms)
        return "; no queries move between ranks (no mask declared, causal= absent or false: every "
               "rank's queries see every key)";
    return "; no queries move between ranks (the declaration lacks queries=, first_query=, "
           "query_args=, query_width= or query_grid=)";
}

/* Whether every argument of bits has a declared width (NAME:WIDTH). */
static int widths_declared(const kernel_launch *kl, unsigned long bits)
{
    for (int i = 0; i < 64; i++)
        if (((bits >> i) & 1UL) && !kl->width_from[i])
            return 0;
    return 1;
}

/* The split of a launch of a kernel declared rows_independent: every
 * argument that reads the gathered (or received) buffer must be a row
 * argument of the declaration. Returns 0 (p->split says whether it
 * applies), or negative. */
static int try_kernel_split(scan *s, cuco_sched_place *pl, stmt *st, int helper,
                            int (*editable)(void *, size_t), void *ctx, cuco_sched_plan *p)
{
    const sview *v = s->v;
    int line = tk(v, st->a)->line, recv = scan_is_recv(s);
    const char *what = recv ? "received" : "gathered";
    unsigned long reads = s->ks.rows_mask;
    /* in a helper its arguments are the helper's names: the glue checks at
     * run time that the gathered buffer reaches the kernel through row
     * arguments only */
    int rc = helper ? 0 : scan_launch_reads(s, s->ks.args, s->ks.nparams, &reads);
    if (rc != 0)
        return rc;
    const char *kname = v->src + tk(v, s->ks.bare)->off;
    int klen = (int)tk(v, s->ks.bare)->len;
    char *why = NULL;
    if (!reads)
        why = cuco_sprintf("launches kernel %.*s, which reads the %s buffer through no "
                           "argument (its launch configuration?)",
                           klen, kname, what);
    else if (reads & ~s->ks.rows_mask)
        why = cuco_sprintf("launches kernel %.*s, which reads the %s buffer through a "
                           "parameter its declaration's args= does not list",
                           klen, kname, what);
    else if (recv && s->ks.attention)
        why = cuco_sprintf("launches kernel %.*s, declared attention: a receive is consumed "
                           "piece by piece only by a kernel declared rows_independent",
                           klen, kname);
    else if (s->ks.attention && !is(v, s->call_tok, "ncclAllGather"))
        why = cuco_sprintf("launches kernel %.*s, declared attention: its keys are split by "
                           "source only when all-gathered",
                           klen, kname);
    else if (recv && !widths_declared(&s->ks, reads))
        why = cuco_sprintf("launches kernel %.*s, whose declaration gives no width to the "
                           "argument that reads the received buffer (args= NAME:WIDTH): a "
                           "receive may fill only part of what the kernel reads",
                           klen, kname);
    else if (editable && !editable(ctx, tk(v, s->ks.name)->off))
        why = cuco_sprintf("is in frozen code");
    if (why) {
        rc = split_no(p, why, line);
        free(why);
        return rc > 0 ? 0 : CUCO_ENOMEM;
    }
    if ((rc = stop_consuming(s, st, pl)) != 0)
        return rc;
    p->split = 1;
    p->split_kernel = 1;
    p->split_recv = recv;
    p->split_attention = s->ks.attention;
    p->split_lend = s->ks.attention && s->ks.lend;
    p->split_line = tk(v, s->ks.name)->line;
    p->split_gemm_off = tk(v, s->ks.name)->off;
    free(p->split_note);
    if (recv)
        p->split_note = cuco_sprintf(
            "kernel %.*s at line %d consumes ncclRecv at line %d piece by piece as it lands "
            "(declared %s at workload.yaml line %d)%s",
            klen, kname, p->split_line, tk(v, s->call_tok)->line, s->ks.decl->term, s->ks.decl_line,
            helper ? ", in the helper its first consumer calls" : "");
    else
        p->split_note = cuco_sprintf(
            "kernel %.*s at line %d consumes %.*s at line %d per source rank (%s; "
            "declared %s at workload.yaml line %d)%s%s",
            klen, kname, p->split_line, (int)tk(v, s->call_tok)->len,
            v->src + tk(v, s->call_tok)->off, tk(v, s->call_tok)->line,
            s->ks.attention ? "own keys first, the parts merged by log-sum-exp" : "own rows first",
            s->ks.decl->term, s->ks.decl_line,
            helper ? ", in the helper its first consumer calls" : "", lend_note(&s->ks));
    return p->split_note ? 0 : CUCO_ENOMEM;
}

/* Whether the call's block ends its function: only closing braces and the
 * other branches of an if/else follow it ("if (send) {...} else { recv }"). */
static int ends_function(const scan *s)
{
    const sview *v = s->v;
    if (s->fn.body >= v->n || s->fn.params == 0 || s->block_end >= v->n)
        return 0;
    size_t t = s->block == s->fn.body ? s->fn.body_end : s->block_end + 1;
    while (t < s->fn.body_end) {
        if (is(v, t, "}") || is(v, t, "else")) {
            t++;
        } else if (is(v, t, "if") && is(v, t + 1, "(")) {
            t = close_of(v, t + 1) + 1;
        } else if (is(v, t, "{")) {
            t = close_of(v, t) + 1;
        } else {
            return 0;
        }
    }
    return 1;
}

/* When the consumer found by *pl is a GEMM reading the gathered buffer (or
 * the launch of a kernel declared rows_independent): it stops being a
 * consumer (it waits per source rank itself), the wait is placed again after
 * it, and the split's edits go into the plan. Returns 0 (plan->split says
 * whether it applies), or a negative error. */
int scan_try_split(scan *s, cuco_sched_place *pl, int (*editable)(void *, size_t), void *ctx,
                   cuco_sched_plan *p)
{
    const sview *v = s->v;
    int recv = scan_is_recv(s);
    if (pl->wait >= s->n) {
        free(p->split_note);
        const char *what = recv ? "received" : "gathered";
        if (ends_function(s)) {
            const cuco_tok *name = tk(v, s->fn.params - 1);
            p->split_note = cuco_sprintf("no later statement of its block reads the %s buffer: "
                                         "the call ends function %.*s, and a consumer in its "
                                         "callers is not looked for",
                                         what, (int)name->len, v->src + name->off);
        } else {
            p->split_note =
                cuco_sprintf("no later statement of its block reads the %s buffer", what);
        }
        return p->split_note ? 0 : CUCO_ENOMEM;
    }
    stmt *st = &s->stmts[pl->wait];
    int line = tk(v, st->a)->line;
    const char *why = NULL;
    size_t g = split_gemm(s, st, &why), la = st->a, lb = st->b;
    int helper = 0;
    if (g >= v->n && helper_callee(v, st) < v->n)
        helper = helper_work(s, st, &la, &lb, &g, &why);
    if (g >= v->n && !helper)
        guarded_work(s, st, &la, &lb, &g, &why); /* its names are this function's */
    if (g >= v->n) {
        char *kwhy = NULL;
        int k = kernel_launch_rows(v, la, lb, s->sem, s->n_sem, &s->ks, &kwhy);
        if (k == 1)
            return try_kernel_split(s, pl, st, helper, editable, ctx, p);
        int rc = k < 0 ? k : split_no(p, kwhy ? kwhy : why, line);
        free(kwhy);
        return rc > 0 ? 0 : rc;
    }
    if (recv)
        return split_no(p,
                        "is a GEMM: a receive is consumed piece by piece only by a kernel "
                        "declared rows_independent",
                        line) > 0
                   ? 0
                   : CUCO_ENOMEM;
    const gemm_api *api = gemm_at(v, g);
    int ha = 0, hb = 0, rc = 0;
    if (helper) /* its operands are the helper's names: the glue checks at run time */
        ha = 1;
    if (rc == 0 && !helper)
        rc = scan_arg_names_buffer(s, g + 1, api->a, &ha);
    if (rc == 0 && !helper)
        rc = scan_arg_names_buffer(s, g + 1, api->b, &hb);
    if (rc != 0)
        return rc;
    if (!ha && !hb)
        return split_no(p, "does not read the gathered buffer through operand A or B", line) > 0
                   ? 0
                   : CUCO_ENOMEM;
    int hc = 0;
    if (!helper && (rc = scan_arg_names_buffer(s, g + 1, api->c, &hc)) != 0)
        return rc;
    if (hc)
        return split_no(p,
                        "is a GEMM that writes its output into the gathered or the sent buffer "
                        "(split, it would overwrite rows peers may still be reading)",
                        line) > 0
                   ? 0
                   : CUCO_ENOMEM;
    if (editable && !editable(ctx, tk(v, g)->off))
        return split_no(p, "is in frozen code", line) > 0 ? 0 : CUCO_ENOMEM;
    if ((rc = stop_consuming(s, st, pl)) != 0)
        return rc;
    p->split = 1;
    s->gemm = g;
    p->split_line = tk(v, g)->line;
    p->split_gemm_off = tk(v, g)->off;
    free(p->split_note);
    p->split_note = cuco_sprintf("%s at line %d consumes %.*s at line %d per source rank "
                                 "(own rows first)%s",
                                 api->name, p->split_line, (int)tk(v, s->call_tok)->len,
                                 v->src + tk(v, s->call_tok)->off, tk(v, s->call_tok)->line,
                                 helper ? ", in the helper its first consumer calls" : "");
    return p->split_note ? 0 : CUCO_ENOMEM;
}

/* ---- producer_split: the mirror of (b) for an all-reduce or a
 * reduce-scatter ------------------------------------------------------- */

static int produce_no(cuco_sched_plan *p, const char *why, int line)
{
    free(p->produce_note);
    p->produce_note =
        line ? cuco_sprintf("the statement before it (line %d) %s", line, why) : cuco_strdup(why);
    return p->produce_note ? 0 : CUCO_ENOMEM;
}

/* The collective's first argument (token a) gets produce_site(...). */
static int produce_site_edit(cuco_sched_plan *p, const sview *v, size_t a, int site)
{
    return scan_plan_edit(p, tk(v, a)->off, 0,
                          cuco_sprintf("cuco_tx::produce_site(%d, CUCO_PSPLIT_%d), ", site, site),
                          tk(v, a)->off);
}

void scan_drop_unapplied(cuco_sched_plan *p)
{
    if (!p->applies) {
        for (size_t i = 0; i < p->nedits; i++)
            free(p->edits[i].text);
        p->nedits = 0;
    }
}

/* (a)'s edits, when it does not apply, are dropped: the producer split's
 * own follow from produce_edit0 on. */
static void produce_start(cuco_sched_plan *p)
{
    scan_drop_unapplied(p);
    p->produce_edit0 = p->nedits;
}

/* The row argument the collective reduces, among those naming one of its
 * buffers (bits): the one spelled as the collective's input argument, else,
 * for a collective in place (its input spelled as its output), the only
 * one; -1 when several name its buffers (members of one struct, say) and
 * none is spelled as its input, or when the one that does may be its
 * output. */
static int produce_out_arg(const scan *s, unsigned long bits)
{
    const sview *v = s->v;
    size_t a, b, x, y, ra, rb;
    int only = -1, n = 0;
    if (!arg_range(v, s->call_tok + 1, 0, &a, &b) || !arg_range(v, s->call_tok + 1, 1, &ra, &rb))
        return -1;
    for (int k = 0; k < (int)(8 * sizeof bits); k++) {
        if (!((bits >> k) & 1UL))
            continue;
        if (arg_range(v, s->ks.args, k, &x, &y) && same_range(v, a, b, x, y))
            return k;
        only = k;
        n++;
    }
    return n == 1 && same_range(v, a, b, ra, rb) ? only : -1;
}

/* The producer split of a launch (s->ks) of a kernel declared
 * rows_independent right before the all-reduce or reduce-scatter: one of
 * its row arguments names the collective's input. The launch goes through
 * cuco_tx::kernel_produce with the position of that argument and the
 * collective's input count (a reduce-scatter's count times the ranks) and
 * type (evaluated at the launch, the statement right before); the
 * collective gets produce_site(...) first. */
static int try_kernel_produce(scan *s, int site, int (*editable)(void *, size_t), void *ctx,
                              cuco_sched_plan *p)
{
    const sview *v = s->v;
    int line = tk(v, s->ks.name)->line;
    unsigned long writes = 0;
    int rc = scan_launch_reads(s, s->ks.args, s->ks.nparams, &writes);
    if (rc != 0)
        return rc;
    writes &= s->ks.rows_mask;
    if (!writes)
        return produce_no(p,
                          "launches a kernel with no row argument (args=) naming the "
                          "collective's input buffer",
                          line);
    if (editable && !editable(ctx, tk(v, s->ks.name)->off))
        return produce_no(p, "is in frozen code", line);
    int out = produce_out_arg(s, writes);
    if (out < 0)
        return produce_no(p,
                          "launches a kernel with several row arguments that may name the "
                          "collective's buffers, none spelled as its input",
                          line);
    size_t a, b, c = s->call_tok + 1;
    /* the reduced buffer's elements: a reduce-scatter's count is per rank */
    int rs = is(v, s->call_tok, "ncclReduceScatter");
    char *count = scan_arg_text(v, c, 2, 0), *type = scan_arg_text(v, c, 3, 0);
    char *comm = rs ? scan_arg_text(v, c, 5, 0) : cuco_strdup("");
    char *spec = kernel_launch_spec(&s->ks);
    char *head = count && type && comm && spec && arg_range(v, c, 0, &a, &b)
                     ? cuco_sprintf("cuco_tx::kernel_produce(%d, CUCO_PSPLIT_%d, %s, %d, "
                                    "(size_t)(%s)%s%s%s, %s",
                                    site, site, spec, out, count,
                                    rs ? " * cuco_tx::comm_size(" : "", comm, rs ? ")" : "", type)
                     : NULL;
    free(count);
    free(type);
    free(comm);
    free(spec);
    if (!head)
        return CUCO_ENOMEM;
    produce_start(p);
    size_t off = tk(v, s->ks.name)->off;
    rc = launch_edit(p, v, &s->ks, head);
    if (rc == 0)
        rc = produce_site_edit(p, v, a, site);
    if (rc != 0)
        return rc;
    p->produce = 1;
    p->produce_kernel = 1;
    p->produce_line = line;
    p->produce_gemm_off = off;
    free(p->produce_note);
    p->produce_note =
        cuco_sprintf("kernel %.*s at line %d makes the input of %.*s at "
                     "line %d: the kernel runs in CUCO_PSPLIT_PIECES ranges of rows "
                     "and each range is reduced as soon as it is made (declared "
                     "rows_independent at workload.yaml line %d)",
                     (int)tk(v, s->ks.bare)->len, v->src + tk(v, s->ks.bare)->off, line,
                     (int)tk(v, s->call_tok)->len, v->src + tk(v, s->call_tok)->off,
                     tk(v, s->call_tok)->line, s->ks.decl_line);
    return p->produce_note ? 0 : CUCO_ENOMEM;
}

/* When the statement right before the all-reduce (or reduce-scatter) is a cuBLAS GEMM that
 * writes its input (operand C names a buffer of the call): the GEMM through
 * its produce glue, the collective with produce_site(...) first. Edits made
 * for schedule (a) stay only when (a) applies. */
int scan_try_produce(scan *s, int site, int (*editable)(void *, size_t), void *ctx,
                     cuco_sched_plan *p)
{
    const sview *v = s->v;
    if (s->call >= s->n || s->call == 0)
        return produce_no(p, "nothing comes before it in its block", 0);
    stmt *st = &s->stmts[s->call - 1];
    int line = tk(v, st->a)->line;
    const char *why = NULL;
    int apart = sview_conditional_between(v, st->a, s->stmts[s->call].a);
    if (apart) {
        char *n = cuco_sprintf("is apart from it by a preprocessor conditional (line %d): one "
                               "could be compiled without the other",
                               apart);
        int rc = n ? produce_no(p, n, line) : CUCO_ENOMEM;
        free(n);
        return rc;
    }
    size_t g = split_gemm(s, st, &why);
    if (g >= v->n) {
        char *kwhy = NULL;
        int k = kernel_launch_rows(v, st->a, st->b, s->sem, s->n_sem, &s->ks, &kwhy);
        int rc =
            k == 1 && s->ks.attention
                ? produce_no(p, "launches a kernel declared attention (no producer split)", line)
            : k == 1 ? try_kernel_produce(s, site, editable, ctx, p)
            : k < 0  ? k
                     : produce_no(p, kwhy ? kwhy : why, line);
        free(kwhy);
        return rc;
    }
    const gemm_api *api = gemm_at(v, g);
    int hit = 0;
    int rc = scan_arg_names_buffer(s, g + 1, api->c, &hit);
    if (rc != 0)
        return rc;
    if (!hit)
        return produce_no(
            p, "is a GEMM that does not write the collective's input buffer (operand C)", line);
    if (editable && !editable(ctx, tk(v, g)->off))
        return produce_no(p, "is in frozen code", line);
    size_t a, b, ga, gb, c = s->call_tok + 1;
    if (!arg_range(v, c, 0, &a, &b) || !arg_range(v, g + 1, 0, &ga, &gb))
        return CUCO_EINVAL;
    produce_start(p);
    size_t goff = tk(v, g)->off;
    rc = scan_plan_edit(p, goff, tk(v, g)->len, cuco_strdup(api->produce_glue), goff);
    if (rc == 0)
        rc = scan_plan_edit(p, tk(v, ga)->off, 0, cuco_sprintf("%d, CUCO_PSPLIT_%d, ", site, site),
                            goff);
    if (rc == 0)
        rc = produce_site_edit(p, v, a, site);
    if (rc != 0)
        return rc;
    p->produce = 1;
    p->produce_line = tk(v, g)->line;
    p->produce_gemm_off = goff;
    free(p->produce_note);
    p->produce_note = cuco_sprintf("%s at line %d makes the input of %.*s at line %d: "
                                   "the GEMM runs in CUCO_PSPLIT_PIECES ranges of output columns "
                                   "and each range is reduced as soon as it is made",
                                   api->name, p->produce_line, (int)tk(v, s->call_tok)->len,
                                   v->src + tk(v, s->call_tok)->off, tk(v, s->call_tok)->line);
    return p->produce_note ? 0 : CUCO_ENOMEM;
}

/* The split does not apply because schedule (a) does not (plan->note says
 * why): keeps rc, or CUCO_ENOMEM. */
int scan_split_fails(cuco_sched_plan *p, int rc)
{
    const char *why = p->note ? p->note : "the call could not be placed";
    char *n = p->split        ? cuco_sprintf("the wait after the GEMM cannot be placed: %s", why)
              : p->split_note ? NULL
                              : cuco_strdup(why);
    if (!n && (p->split || !p->split_note))
        return CUCO_ENOMEM;
    if (n) {
        free(p->split_note);
        p->split_note = n;
    }
    p->split = 0;
    return rc;
}
