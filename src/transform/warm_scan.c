/* warm_scan.c: schedule warm_read, read on schedule (a)'s scan (scan_int.h).
 *
 * An all-gather's or all-to-all's first consumer that is the launch of a
 * kernel the consumer split does not take reads the collective's output
 * after one read pass over it: the call gets cuco_tx::warm_site(site,
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

/* The report line of a pass offered to the kernel named at token name,
 * launched at line, on or off by p->warm_default. */
static int warm_yes(const scan *s, size_t name, int line, const char *what, cuco_sched_plan *p)
{
    const sview *v = s->v;
    int kl = (int)tk(v, name)->len, cl = (int)tk(v, s->call_tok)->len;
    const char *kn = v->src + tk(v, name)->off, *cn = v->src + tk(v, s->call_tok)->off;
    int cline = tk(v, s->call_tok)->line;
    return warm_no(
        p, p->warm_default
               ? cuco_sprintf("kernel %.*s at line %d reads the %s buffer of %.*s at line %d "
                              "after one read pass over it on the call's stream (none past the "
                              "L2 cache's size): a loop of each of its blocks walks that buffer, "
                              "which every block re-reads",
                              kl, kn, line, what, cl, cn, cline)
               : cuco_sprintf("offered to kernel %.*s at line %d, which reads the %s buffer of "
                              "%.*s at line %d; off by default: no loop of its blocks walks the "
                              "whole buffer that its text shows (read once, a pass only adds "
                              "its cost)",
                              kl, kn, line, what, cl, cn, cline));
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
    int line = tk(v, st->a)->line;
    size_t open = v->n, a, b;
    size_t name = st->kind == CUCO_SCHED_WORK ? kernel_launch_name(v, st->a, st->b, &open) : v->n;
    if (name >= v->n)
        return warm_no(p, cuco_sprintf("the statement its wait goes before (line %d) is no "
                                       "kernel launch",
                                       line));
    if (!arg_range(v, s->call_tok + 1, 0, &a, &b))
        return warm_no(p, cuco_strdup("its first argument was not found"));
    unsigned long reads = 0;
    int rc = scan_launch_reads(s, open, arg_count(v, open), &reads);
    if (rc != 0)
        return rc;
    scan_drop_unapplied(p);
    rc = scan_plan_edit(p, tk(v, a)->off, 0,
                        cuco_sprintf("cuco_tx::warm_site(%d, CUCO_WARM_%d), ", site, site),
                        tk(v, a)->off);
    if (rc != 0)
        return rc;
    p->warm = 1;
    p->warm_line = line;
    p->warm_default = kernel_launch_rereads(v, st->a, st->b, reads);
    return warm_yes(s, name, line, what, p);
}
