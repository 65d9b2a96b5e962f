/* kernel_launch.c: reads a kernel launch statement against the manifest's
 * rows_independent declarations (kernel_launch.h). */
#include "kernel_launch.h"

#include "cuco/buf.h"
#include "cuco/err.h"

#include <stdlib.h>
#include <string.h>

/* The '<<<' of the launch whose name starts at token a ("k", "ns::k",
 * "k<float>"), and its bare name's token; v->n when a starts no launch. */
static size_t launch_lt(const sview *v, size_t a, size_t end, size_t *bare)
{
    size_t i = a;
    while (i + 2 < end && ident(v, i) && is(v, i + 1, "::"))
        i += 2;
    if (!ident(v, i))
        return v->n;
    *bare = i++;
    if (is(v, i, "<")) {
        int d = 0;
        for (; i < end; i++) {
            d += is(v, i, "<") - is(v, i, ">") - 2 * is(v, i, ">>");
            if (is(v, i, ";") || is(v, i, "{") || is(v, i, "<<<"))
                return v->n;
            if (d <= 0) {
                i++;
                break;
            }
        }
    }
    return i < end && is(v, i, "<<<") ? i : v->n;
}

/* Whether the launch's grid (configuration item 0) is written as its
 * argument k: the same tokens ("rows" and "rows"). */
static int same_text(const sview *v, size_t lt, size_t args, int k)
{
    size_t ca, cb, aa, ab;
    if (!arg_range(v, lt, 0, &ca, &cb) || !arg_range(v, args, k, &aa, &ab) || cb - ca != ab - aa)
        return 0;
    for (size_t i = 0; i < cb - ca; i++)
        if (!same_tok(v, ca + i, aa + i))
            return 0;
    return 1;
}

/* The '(' of the parameters of the one __global__ definition named like
 * token bare; v->n when there is none or more than one. */
static size_t kernel_params(const sview *v, size_t bare)
{
    size_t found = v->n;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!same_tok(v, i, bare) || !is(v, i + 1, "(") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        size_t close = close_of(v, i + 1);
        if (close + 1 >= v->n || !is(v, close + 1, "{"))
            continue;
        int global = 0;
        for (size_t k = i; k-- > 0 && !is(v, k, ";") && !is(v, k, "}") && !is(v, k, "{");)
            global |= is(v, k, "__global__");
        if (!global)
            continue;
        if (found < v->n)
            return v->n;
        found = i + 1;
    }
    return found;
}

/* The manifest's rows_independent declaration of the kernel at token bare. */
static const cuco_semantic *rows_decl(const sview *v, size_t bare, const cuco_semantic *sem,
                                      size_t n)
{
    const cuco_tok *t = tk(v, bare);
    for (size_t i = 0; i < n; i++)
        if (sem[i].kernel && !strcmp(sem[i].term, "rows_independent") &&
            strlen(sem[i].kernel) == t->len && !memcmp(sem[i].kernel, v->src + t->off, t->len))
            return &sem[i];
    return NULL;
}

/* The row arguments args= names ("x, y" or "x y:dout"): their bits into
 * kl->rows_mask and their widths' parameters into kl->width_from; *why on a
 * name the kernel does not have. */
static int row_args(const sview *v, size_t open, const char *list, const char *kernel,
                    kernel_launch *kl, char **why)
{
    kl->rows_mask = 0;
    for (const char *p = list; *p;) {
        p += strspn(p, ", \t");
        size_t len = strcspn(p, ", \t"), name = strcspn(p, ":");
        if (!len)
            break;
        if (name > len)
            name = len;
        int k = param_position(v, open, p, name);
        int w = name < len ? param_position(v, open, p + name + 1, len - name - 1) : -1;
        if (k < 0 || k >= 64 || (name < len && (w < 0 || w >= 127))) {
            int bad = k < 0 || k >= 64;
            *why = cuco_sprintf("launches kernel %s, whose declaration names args=%.*s, which is "
                                "not one of its parameters",
                                kernel, bad ? (int)name : (int)(len - name - 1),
                                bad ? p : p + name + 1);
            return *why ? 0 : CUCO_ENOMEM;
        }
        kl->rows_mask |= 1UL << k;
        kl->width_from[k] = (signed char)(w + 1);
        p += len;
    }
    return 1;
}

int kernel_launch_rows(const sview *v, size_t a, size_t b, const cuco_semantic *sem, size_t n,
                       kernel_launch *kl, char **why)
{
    memset(kl, 0, sizeof *kl);
    *why = NULL;
    size_t bare = v->n, lt = launch_lt(v, a, b, &bare);
    size_t gt = lt < v->n ? close_of(v, lt) : v->n;
    if (gt >= b || !is(v, gt + 1, "("))
        return 0;
    size_t close = close_of(v, gt + 1);
    char *name = cuco_strndup(v->src + tk(v, bare)->off, tk(v, bare)->len);
    if (!name)
        return CUCO_ENOMEM;
    const cuco_semantic *d = rows_decl(v, bare, sem, n);
    const char *rows = d ? cuco_semantic_param(d, "rows") : NULL;
    const char *args = d ? cuco_semantic_param(d, "args") : NULL;
    size_t params = d ? kernel_params(v, bare) : v->n;
    int rc = 1, refused = 1;
    if (close + 2 != b || !is(v, close + 1, ";"))
        *why = cuco_sprintf("is a launch of kernel %s inside a larger statement", name);
    else if (!d)
        *why = cuco_sprintf("launches kernel %s, which the manifest does not declare "
                            "rows_independent (and is no cuBLAS GEMM call)",
                            name);
    else if (!rows || !args)
        *why = cuco_sprintf("launches kernel %s, whose rows_independent declaration (workload.yaml "
                            "line %d) lacks %s",
                            name, d->line,
                            !rows ? "rows= (the row count's parameter)"
                                  : "args= (the parameters indexed by row)");
    else if (params >= v->n)
        *why = cuco_sprintf("launches kernel %s, whose __global__ definition is not in this file "
                            "(or is there more than once)",
                            name);
    else if (arg_count(v, params) != arg_count(v, gt + 1))
        *why = cuco_sprintf("launches kernel %s with %d arguments for its %d parameters", name,
                            arg_count(v, gt + 1), arg_count(v, params));
    else if ((kl->rows_pos = param_position(v, params, rows, strlen(rows))) < 0)
        *why = cuco_sprintf("launches kernel %s, whose declaration names rows=%s, which is not "
                            "one of its parameters",
                            name, rows);
    else {
        refused = 0;
        rc = row_args(v, params, args, name, kl, why);
    }
    if (refused && !*why)
        rc = CUCO_ENOMEM;
    if (rc == 1 && !*why) {
        kl->grid_rows = same_text(v, lt, gt + 1, kl->rows_pos);
        kl->name = a;
        kl->bare = bare;
        kl->lt = lt;
        kl->args = gt + 1;
        kl->nparams = arg_count(v, params);
        kl->decl_line = d->line;
    }
    free(name);
    if (rc < 0)
        return rc;
    return *why ? 0 : 1;
}

char *kernel_launch_spec(const kernel_launch *kl)
{
    int last = -1;
    for (int i = 0; i < 64; i++)
        if (kl->width_from[i])
            last = i;
    cuco_buf b = CUCO_BUF_INIT;
    int rc = cuco_buf_printf(&b, "cuco_tx::RowSpec{%d, 0x%lxUL, %d", kl->rows_pos, kl->rows_mask,
                             kl->grid_rows);
    for (int i = 0; rc == 0 && i <= last; i++)
        rc = cuco_buf_printf(&b, "%s%d", i ? ", " : ", {", kl->width_from[i]);
    if (rc == 0)
        rc = cuco_buf_puts(&b, last >= 0 ? "}}" : "}");
    if (rc != 0) {
        cuco_buf_free(&b);
        return NULL;
    }
    return cuco_buf_detach(&b);
}

char *kernel_launch_call(const sview *v, const kernel_launch *kl, const char *head)
{
    size_t ca = 0, cb = 0;
    size_t from = tk(v, kl->name)->off;
    size_t to = tk(v, kl->lt - 1)->off + tk(v, kl->lt - 1)->len;
    cuco_buf b = CUCO_BUF_INIT;
    int rc = cuco_buf_printf(&b, "%s, %.*s", head, (int)(to - from), v->src + from);
    for (int k = 0; k < 4 && rc == 0; k++) {
        if (arg_range(v, kl->lt, k, &ca, &cb)) {
            size_t o = tk(v, ca)->off, e = tk(v, cb - 1)->off + tk(v, cb - 1)->len;
            rc = cuco_buf_printf(&b, ", %.*s", (int)(e - o), v->src + o);
        } else {
            rc = cuco_buf_puts(&b, ", 0");
        }
    }
    if (rc == 0)
        rc = cuco_buf_puts(&b, ", ");
    if (rc != 0) {
        cuco_buf_free(&b);
        return NULL;
    }
    return cuco_buf_detach(&b);
}
