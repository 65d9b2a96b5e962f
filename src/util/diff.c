/* diff.c: a line-based diff (unified format) used to show what a program
 * changed from its parent (web view, LLM prompts) and the best program from
 * the baseline (report).
 *
 * The common head and tail are stripped first (a patch touches few lines),
 * then the middle is aligned by a longest-common-subsequence table. When the
 * middle is too large for the table, the whole middle is shown as replaced:
 * the diff stays correct, only less minimal.
 */
#include "cuco/diff.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/grow.h"

typedef struct line_ref {
    const char *s;
    size_t n; /* without the newline */
} line_ref;

enum { OP_EQ, OP_DEL, OP_INS };
typedef struct edit_op {
    int op;
    size_t ai, bi; /* line indices in a and b */
} edit_op;

#define LCS_MAX_CELLS ((size_t)32 * 1024 * 1024)

/* Splits s into lines; *out malloc'd (caller frees). */
static int split_lines(const char *s, line_ref **out, size_t *n)
{
    size_t cap = 16, cnt = 0;
    line_ref *v = malloc(cap * sizeof *v);
    if (!v)
        return CUCO_ENOMEM;
    const char *p = s ? s : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (CUCO_GROW(v, cap, cnt + 1, 16) < 0) {
            free(v);
            return CUCO_ENOMEM;
        }
        v[cnt].s = p;
        v[cnt].n = len;
        cnt++;
        p += len + (nl ? 1 : 0);
    }
    *out = v;
    *n = cnt;
    return 0;
}

static int line_eq(const line_ref *x, const line_ref *y)
{
    return x->n == y->n && memcmp(x->s, y->s, x->n) == 0;
}

static int ops_push(edit_op **ops, size_t *n, size_t *cap, int op, size_t ai, size_t bi)
{
    if (cuco_grow(ops, cap, *n + 1, sizeof **ops, 64) < 0)
        return CUCO_ENOMEM;
    (*ops)[(*n)++] = (edit_op){op, ai, bi};
    return 0;
}

/* Edit script of a[lo_a..hi_a) vs b[lo_b..hi_b) by LCS, appended to ops. */
static int diff_middle(const line_ref *a, size_t lo_a, size_t hi_a, const line_ref *b, size_t lo_b,
                       size_t hi_b, edit_op **ops, size_t *n, size_t *cap)
{
    size_t na = hi_a - lo_a, nb = hi_b - lo_b;
    int rc = 0;
    if ((na + 1) * (nb + 1) > LCS_MAX_CELLS) {
        for (size_t i = lo_a; i < hi_a && rc == 0; i++)
            rc = ops_push(ops, n, cap, OP_DEL, i, lo_b);
        for (size_t j = lo_b; j < hi_b && rc == 0; j++)
            rc = ops_push(ops, n, cap, OP_INS, hi_a, j);
        return rc;
    }
    /* len[i][j]: LCS length of a[lo_a+i..) and b[lo_b+j..) */
    size_t w = nb + 1;
    uint32_t *len = calloc((na + 1) * w, sizeof *len);
    if (!len)
        return CUCO_ENOMEM;
    for (size_t i = na; i-- > 0;)
        for (size_t j = nb; j-- > 0;) {
            if (line_eq(&a[lo_a + i], &b[lo_b + j]))
                len[i * w + j] = len[(i + 1) * w + j + 1] + 1;
            else {
                uint32_t d = len[(i + 1) * w + j], r = len[i * w + j + 1];
                len[i * w + j] = d >= r ? d : r;
            }
        }
    size_t i = 0, j = 0;
    while ((i < na || j < nb) && rc == 0) {
        if (i < na && j < nb && line_eq(&a[lo_a + i], &b[lo_b + j])) {
            rc = ops_push(ops, n, cap, OP_EQ, lo_a + i, lo_b + j);
            i++, j++;
        } else if (i < na && (j == nb || len[(i + 1) * w + j] >= len[i * w + j + 1])) {
            rc = ops_push(ops, n, cap, OP_DEL, lo_a + i, lo_b + j); /* removals first */
            i++;
        } else {
            rc = ops_push(ops, n, cap, OP_INS, lo_a + i, lo_b + j);
            j++;
        }
    }
    free(len);
    return rc;
}

static int put_line(cuco_buf *out, char tag, const line_ref *l)
{
    int rc = cuco_buf_putc(out, tag);
    if (rc == 0)
        rc = cuco_buf_append(out, l->s, l->n);
    if (rc == 0)
        rc = cuco_buf_putc(out, '\n');
    return rc;
}

int cuco_diff_lines(const char *a, const char *b, const char *a_name, const char *b_name,
                    int context, cuco_buf *out, size_t *added, size_t *removed, cuco_err *e)
{
    line_ref *la = NULL, *lb = NULL;
    size_t na = 0, nb = 0, nops = 0, cap = 0, nadd = 0, ndel = 0;
    edit_op *ops = NULL;
    int rc;
    if (context < 0)
        context = 0;
    if ((rc = split_lines(a, &la, &na)) < 0 || (rc = split_lines(b, &lb, &nb)) < 0)
        goto out;
    size_t head = 0;
    while (head < na && head < nb && line_eq(&la[head], &lb[head]))
        head++;
    size_t tail = 0;
    while (tail < na - head && tail < nb - head && line_eq(&la[na - 1 - tail], &lb[nb - 1 - tail]))
        tail++;
    for (size_t i = 0; i < head && rc == 0; i++)
        rc = ops_push(&ops, &nops, &cap, OP_EQ, i, i);
    if (rc == 0)
        rc = diff_middle(la, head, na - tail, lb, head, nb - tail, &ops, &nops, &cap);
    for (size_t k = 0; k < tail && rc == 0; k++)
        rc = ops_push(&ops, &nops, &cap, OP_EQ, na - tail + k, nb - tail + k);
    if (rc < 0)
        goto out;
    for (size_t k = 0; k < nops; k++) {
        nadd += ops[k].op == OP_INS;
        ndel += ops[k].op == OP_DEL;
    }
    if (nadd + ndel > 0) {
        rc = cuco_buf_printf(out, "--- %s\n+++ %s\n", a_name ? a_name : "a", b_name ? b_name : "b");
        size_t k = 0;
        while (k < nops && rc == 0) {
            while (k < nops && ops[k].op == OP_EQ)
                k++;
            if (k == nops)
                break;
            /* a hunk: from `context` lines before this change to the end of the
             * last change that is within 2*context lines of the previous one */
            size_t start = k >= (size_t)context ? k - (size_t)context : 0;
            size_t end = k, last_change = k;
            while (end < nops) {
                if (ops[end].op != OP_EQ)
                    last_change = end;
                else if (end - last_change > (size_t)(2 * context))
                    break;
                end++;
            }
            end = last_change + 1 + (size_t)context;
            if (end > nops)
                end = nops;
            size_t a_start = ops[start].ai, b_start = ops[start].bi, a_cnt = 0, b_cnt = 0;
            for (size_t m = start; m < end; m++) {
                a_cnt += ops[m].op != OP_INS;
                b_cnt += ops[m].op != OP_DEL;
            }
            rc = cuco_buf_printf(out, "@@ -%zu,%zu +%zu,%zu @@\n", a_cnt ? a_start + 1 : a_start,
                                 a_cnt, b_cnt ? b_start + 1 : b_start, b_cnt);
            for (size_t m = start; m < end && rc == 0; m++) {
                if (ops[m].op == OP_EQ)
                    rc = put_line(out, ' ', &la[ops[m].ai]);
                else if (ops[m].op == OP_DEL)
                    rc = put_line(out, '-', &la[ops[m].ai]);
                else
                    rc = put_line(out, '+', &lb[ops[m].bi]);
            }
            k = end;
        }
    }
    if (added)
        *added = nadd;
    if (removed)
        *removed = ndel;
out:
    free(la);
    free(lb);
    free(ops);
    if (rc < 0)
        return cuco_err_set(e, CUCO_ENOMEM, "diff: out of memory");
    return 0;
}
