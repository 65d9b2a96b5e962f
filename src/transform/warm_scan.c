/* warm_scan.c: schedule warm_read, read on schedule (a)'s scan (scan_int.h).
 *
 * An all-gather's or all-to-all's first consumer that is the launch of a
 * kernel the consumer split does not take (directly, or in a helper of the
 * file that is plain host code and that launch) may read the collective's
 * output after one read pass over it, on by default when the kernel's text
 * shows each block walking it (kernel_reread.c): the call gets cuco_tx::warm_site(site,
 * CUCO_WARM_<site>) as its first argument, and the glue (cuco_tx_recv.cuh)
 * reads the output once on the call's stream after it (a kernel whose
 * blocks re-read a buffer a copy has just written runs slower without;
 * bench/README.md, "A buffer read once before the kernel that re-reads
 * it"). cuBLAS calls are left alone: they read through their own tiling,
 * and a pass before a GEMM was measured to gain nothing.
 */
#include "cuco/transform.h"
#include "kernel_launch.h"
#include "scan_int.h"

#include <stdlib.h>

static int warm_no(cuco_sched_plan *p, char *why)
{
    free(p->warm_note);
    p->warm_note = why;
    return why ? 0 : CUCO_ENOMEM;
}

/* The name of parameter k of the file's function named at token f (its
 * declaration's last identifier); NULL when there is none. Caller frees. */
static char *param_name(const sview *v, size_t f, int k)
{
    size_t a, b;
    if (!scan_param_of(v, f, k, &a, &b))
        return NULL;
    while (b > a && !ident(v, b - 1))
        b--;
    return b > a ? cuco_strndup(v->src + tk(v, b - 1)->off, tk(v, b - 1)->len) : NULL;
}

/* The launch in the helper that statement st calls (scan_helper_launch):
 * the helper's name token in *f, the launch's statement in [*la, *lb) and
 * the bits of its arguments that name a parameter of the helper given the
 * call's buffers; the kernel's name token, or v->n when st calls no such
 * helper. */
static size_t helper_launch_reads(scan *s, const stmt *st, size_t *f, size_t *la, size_t *lb,
                                  unsigned long *reads, int *rc)
{
    const sview *v = s->v;
    size_t open = v->n;
    *f = scan_helper_launch(s, st, la, lb);
    size_t name = *f < v->n ? kernel_launch_name(v, *la, *lb, &open) : v->n;
    unsigned long given = 0;
    *reads = 0;
    if (name >= v->n || (*rc = scan_launch_reads(s, *f + 1, arg_count(v, *f + 1), &given)) != 0)
        return v->n;
    cuco_strlist params = {0}, heads = {0};
    for (int k = 0; *rc == 0 && k < (int)(8 * sizeof given); k++) {
        char *pn = (given >> k) & 1UL ? param_name(v, *f, k) : NULL;
        if (pn)
            *rc = cuco_strlist_push(&params, pn);
        free(pn);
    }
    for (int m = 0; *rc == 0 && m < (int)(8 * sizeof *reads) && m < arg_count(v, open); m++) {
        size_t a, b;
        cuco_strlist_free(&heads);
        if (!arg_range(v, open, m, &a, &b) || (*rc = scan_expr_heads(v, a, b, &heads, 1)) != 0)
            continue;
        for (size_t h = 0; h < heads.n; h++)
            if (cuco_strlist_has(&params, heads.items[h]))
                *reads |= 1UL << m;
    }
    cuco_strlist_free(&params);
    cuco_strlist_free(&heads);
    return *rc == 0 ? name : v->n;
}

/* The report line of a pass offered to the kernel named at token name,
 * launched at line, on or off by p->warm_default. */
static int warm_yes(const scan *s, size_t name, size_t helper, int line, const char *what,
                    cuco_sched_plan *p)
{
    const sview *v = s->v;
    int cl = (int)tk(v, s->call_tok)->len, cline = tk(v, s->call_tok)->line;
    const char *cn = v->src + tk(v, s->call_tok)->off;
    char *kernel = helper < v->n
                       ? cuco_sprintf("kernel %.*s (launched by %.*s at line %d)",
                                      (int)tk(v, name)->len, v->src + tk(v, name)->off,
                                      (int)tk(v, helper)->len, v->src + tk(v, helper)->off, line)
                       : cuco_sprintf("kernel %.*s at line %d", (int)tk(v, name)->len,
                                      v->src + tk(v, name)->off, line);
    if (!kernel)
        return CUCO_ENOMEM;
    int rc = warm_no(
        p, p->warm_default
               ? cuco_sprintf("%s reads the %s buffer of %.*s at line %d after one read pass "
                              "over it on the call's stream (none past the L2 cache's size): a "
                              "loop of each of its blocks walks that buffer, which every block "
                              "re-reads",
                              kernel, what, cl, cn, cline)
               : cuco_sprintf("offered to %s, which reads the %s buffer of %.*s at line %d; off "
                              "by default: no loop of its blocks walks the whole buffer that its "
                              "text shows (read once, a pass only adds its cost)",
                              kernel, what, cl, cn, cline));
    free(kernel);
    return rc;
}

int scan_try_warm(scan *s, const cuco_sched_place *pl, int placed, int site, cuco_sched_plan *p)
{
    const sview *v = s->v;
    const char *what = is(v, s->call_tok, "ncclAllGather") ? "gathered" : "all-to-all";
    if (p->split || p->split_line) /* split_line: decided, even if (a) then failed */
        return warm_no(p, cuco_sprintf("its first consumer (line %d) is consumer_split_by_source's",
                                       p->split_line));
    if (!placed || s->call >= s->n)
        return warm_no(p, cuco_strdup(p->note ? p->note : "the call could not be placed"));
    if (pl->wait >= s->n)
        return warm_no(p,
                       cuco_sprintf("no later statement of its block reads the %s buffer", what));
    const stmt *st = &s->stmts[pl->wait];
    int line = tk(v, st->a)->line, rc = 0;
    size_t open = v->n, a, b, la = st->a, lb = st->b, helper = v->n;
    unsigned long reads = 0;
    size_t name = st->kind == CUCO_SCHED_WORK ? kernel_launch_name(v, st->a, st->b, &open) : v->n;
    if (name < v->n)
        rc = scan_launch_reads(s, open, arg_count(v, open), &reads);
    else
        name = helper_launch_reads(s, st, &helper, &la, &lb, &reads, &rc);
    if (rc != 0)
        return rc;
    if (name >= v->n)
        return warm_no(p, cuco_sprintf("the statement its wait goes before (line %d) is no "
                                       "kernel launch, nor a call of a helper that is plain host "
                                       "code and one",
                                       line));
    if (!arg_range(v, s->call_tok + 1, 0, &a, &b))
        return warm_no(p, cuco_strdup("its first argument was not found"));
    scan_drop_unapplied(p);
    rc = scan_plan_edit(p, tk(v, a)->off, 0,
                        cuco_sprintf("cuco_tx::warm_site(%d, CUCO_WARM_%d), ", site, site),
                        tk(v, a)->off);
    if (rc != 0)
        return rc;
    p->warm = 1;
    p->warm_line = line;
    p->warm_default = kernel_launch_rereads(v, la, lb, reads);
    return warm_yes(s, name, helper, line, what, p);
}
