/* kernel_launch.c: reads a kernel launch statement against the manifest's
 * rows_independent and attention declarations (kernel_launch.h). */
#include "kernel_launch.h"

#include "cuco/buf.h"
#include "cuco/err.h"

#include <ctype.h>
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

size_t kernel_launch_name(const sview *v, size_t a, size_t b, size_t *args)
{
    size_t bare = v->n, lt = launch_lt(v, a, b, &bare);
    size_t gt = lt < v->n ? close_of(v, lt) : v->n;
    if (gt >= b || !is(v, gt + 1, "("))
        return v->n;
    *args = gt + 1;
    return bare;
}

/* Past a leading C cast of [*a, b) ("(unsigned)rows", "(long int)n"): a
 * parenthesised run of names followed by more tokens. */
static void skip_cast(const sview *v, size_t *a, size_t b)
{
    if (*a >= b || !is(v, *a, "("))
        return;
    size_t i = *a + 1;
    while (i < b && ident(v, i))
        i++;
    if (i > *a + 1 && i + 1 < b && is(v, i, ")"))
        *a = i + 1;
}

/* Whether the launch's grid (configuration item 0) is written as its
 * argument k: the same tokens ("rows" and "rows"), either one behind a C
 * cast ("(unsigned)rows"). */
static int same_text(const sview *v, size_t lt, size_t args, int k)
{
    size_t ca, cb, aa, ab;
    if (!arg_range(v, lt, 0, &ca, &cb) || !arg_range(v, args, k, &aa, &ab))
        return 0;
    skip_cast(v, &ca, cb);
    skip_cast(v, &aa, ab);
    return same_range(v, ca, cb, aa, ab);
}

/* The '(' of the parameters of the one __global__ definition named like
 * token bare; without a definition in the text (the kernel is defined in
 * another file), of its first __global__ declaration there (whose
 * parameter names then give the positions); v->n when there is neither, or
 * more than one definition. */
size_t kernel_launch_params(const sview *v, size_t bare)
{
    size_t found = v->n, declared = v->n;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!same_tok(v, i, bare) || !is(v, i + 1, "(") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        size_t close = close_of(v, i + 1);
        int body = close + 1 < v->n && is(v, close + 1, "{");
        if (close + 1 >= v->n || (!body && !is(v, close + 1, ";")))
            continue;
        int global = 0;
        for (size_t k = i; k-- > 0 && !is(v, k, ";") && !is(v, k, "}") && !is(v, k, "{");)
            global |= is(v, k, "__global__");
        if (!global)
            continue;
        if (!body) {
            if (declared >= v->n)
                declared = i + 1;
            continue;
        }
        if (found < v->n)
            return v->n;
        found = i + 1;
    }
    return found < v->n ? found : declared;
}

/* The manifest's rows_independent or attention declaration of the kernel
 * at token bare (the first of either). */
static const cuco_semantic *split_decl(const sview *v, size_t bare, const cuco_semantic *sem,
                                       size_t n)
{
    const cuco_tok *t = tk(v, bare);
    for (size_t i = 0; i < n; i++)
        if (sem[i].kernel &&
            (!strcmp(sem[i].term, "rows_independent") || !strcmp(sem[i].term, "attention")) &&
            strlen(sem[i].kernel) == t->len && !memcmp(sem[i].kernel, v->src + t->off, t->len))
            return &sem[i];
    return NULL;
}

/* Where a kernel's parameter names come from: its __global__ definition or
 * declaration in the text (the '(' at open), or the declaration's params=
 * list ("x w y rows dim") when neither is there (list not NULL). */
typedef struct param_src {
    const sview *v;
    size_t open;
    const char *list;
} param_src;

/* The next item of a declaration's list ("x, y" or "x y:dout"): its start,
 * *len its length (0: the list is over); *p moves past it. */
static const char *list_next(const char **p, size_t *len)
{
    *p += strspn(*p, ", \t");
    const char *item = *p;
    *len = strcspn(item, ", \t");
    *p += *len;
    return item;
}

/* The position of parameter name[0..len), or -1. */
static int param_at(const param_src *ps, const char *name, size_t len)
{
    if (!ps->list)
        return param_position(ps->v, ps->open, name, len);
    const char *p = ps->list, *item;
    size_t n;
    for (int k = 0; (item = list_next(&p, &n)), n; k++)
        if (n == len && !memcmp(item, name, len))
            return k;
    return -1;
}

/* How many parameters the kernel has. */
static int param_count(const param_src *ps)
{
    if (!ps->list)
        return arg_count(ps->v, ps->open);
    const char *p = ps->list;
    size_t n;
    int k = 0;
    while (list_next(&p, &n), n)
        k++;
    return k;
}

/* The parameters list names (declaration key `key`: "x, y", or with
 * widths "x y:dout"): their bits into *mask and, when widths is not NULL,
 * each one's width parameter + 1 into widths (0: none written); *why on a
 * name the kernel does not have. */
static int arg_bits(const param_src *ps, const char *key, const char *list, const char *kernel,
                    unsigned long *mask, signed char *widths, char **why)
{
    *mask = 0;
    const char *p, *rest = list ? list : "";
    size_t len;
    while ((p = list_next(&rest, &len)), len) {
        size_t name = widths ? strcspn(p, ":") : len;
        if (name > len)
            name = len;
        int k = param_at(ps, p, name);
        int w = name < len ? param_at(ps, p + name + 1, len - name - 1) : -1;
        if (k < 0 || k >= 64 || (name < len && (w < 0 || w >= 127))) {
            int bad = k < 0 || k >= 64;
            *why = cuco_sprintf("launches kernel %s, whose declaration names %s=%.*s, which is "
                                "not one of its parameters",
                                kernel, key, bad ? (int)name : (int)(len - name - 1),
                                bad ? p : p + name + 1);
            return *why ? 0 : CUCO_ENOMEM;
        }
        *mask |= 1UL << k;
        if (widths)
            widths[k] = (signed char)(w + 1);
    }
    return 1;
}

/* The first parameter an attention declaration needs and lacks (NULL: none). */
static const char *attention_missing(const cuco_semantic *d)
{
    static const char *const need[] = {"keys", "args", "out", "lse", "out_rows", "out_width", NULL};
    for (const char *const *k = need; *k; k++)
        if (!cuco_semantic_param(d, *k))
            return *k;
    return NULL;
}

/* The position of the parameter that declaration key names, into *pos (-1
 * when the key is absent); 0, or 1 with *why when the kernel has no such
 * parameter. */
static int decl_position(const param_src *ps, const cuco_semantic *d, const char *key,
                         const char *kernel, int *pos, char **why)
{
    const char *name = cuco_semantic_param(d, key);
    *pos = name ? param_at(ps, name, strlen(name)) : -1;
    if (!name || *pos >= 0)
        return 0;
    *why = cuco_sprintf("launches kernel %s, whose declaration names %s=%s, which is not one of "
                        "its parameters",
                        kernel, key, name);
    return 1;
}

/* attention's query terms (queries=, first_query=, query_args=,
 * query_grid=, causal=) into kl; kl->lend when all that moving work needs
 * is declared. 1, 0 with *why, or negative as decl_positions. */
static int query_positions(const param_src *ps, const cuco_semantic *d, const char *kernel,
                           kernel_launch *kl, char **why)
{
    const char *causal = cuco_semantic_param(d, "causal");
    const char *grid = cuco_semantic_param(d, "query_grid");
    kl->query_grid = grid ? (int)(grid[0] - 'x') : -1;
    if (causal && !strcmp(causal, "true"))
        kl->causal_pos = -2;
    else if (causal && strcmp(causal, "false") &&
             decl_position(ps, d, "causal", kernel, &kl->causal_pos, why))
        return *why ? 0 : CUCO_ENOMEM;
    if (decl_position(ps, d, "queries", kernel, &kl->queries_pos, why) ||
        decl_position(ps, d, "first_query", kernel, &kl->first_query_pos, why))
        return *why ? 0 : CUCO_ENOMEM;
    int rc = arg_bits(ps, "query_args", cuco_semantic_param(d, "query_args"), kernel,
                      &kl->query_mask, NULL, why);
    kl->query_terms = rc == 1 && kl->queries_pos >= 0 && kl->first_query_pos >= 0 &&
                      kl->query_mask && kl->query_grid >= 0 &&
                      cuco_semantic_param(d, "query_width");
    kl->lend = kl->query_terms && kl->causal_pos != -1;
    return rc;
}

/* The declaration's parameters as positions into kl (rows or keys, args,
 * and attention's first_key, out, lse and query terms): 1 when they all
 * name parameters, 0 with *why when not, negative when out of memory. */
static int decl_positions(const param_src *ps, const cuco_semantic *d, const char *kernel,
                          kernel_launch *kl, char **why)
{
    kl->attention = !strcmp(d->term, "attention");
    const char *count = kl->attention ? "keys" : "rows";
    if (decl_position(ps, d, count, kernel, &kl->rows_pos, why) ||
        (kl->attention && (decl_position(ps, d, "first_key", kernel, &kl->first_pos, why) ||
                           decl_position(ps, d, "out", kernel, &kl->out_pos, why) ||
                           decl_position(ps, d, "lse", kernel, &kl->lse_pos, why))))
        return *why ? 0 : CUCO_ENOMEM;
    int rc = kl->attention ? query_positions(ps, d, kernel, kl, why) : 1;
    return rc == 1 ? arg_bits(ps, "args", cuco_semantic_param(d, "args"), kernel, &kl->rows_mask,
                              kl->width_from, why)
                   : rc;
}

int kernel_launch_rows(const sview *v, size_t a, size_t b, const cuco_semantic *sem, size_t n,
                       kernel_launch *kl, char **why)
{
    memset(kl, 0, sizeof *kl);
    kl->first_pos = kl->out_pos = kl->lse_pos = -1;
    kl->queries_pos = kl->first_query_pos = kl->causal_pos = kl->query_grid = -1;
    *why = NULL;
    size_t bare = v->n, lt = launch_lt(v, a, b, &bare);
    size_t gt = lt < v->n ? close_of(v, lt) : v->n;
    if (gt >= b || !is(v, gt + 1, "("))
        return 0;
    size_t close = close_of(v, gt + 1);
    char *name = cuco_strndup(v->src + tk(v, bare)->off, tk(v, bare)->len);
    if (!name)
        return CUCO_ENOMEM;
    const cuco_semantic *d = split_decl(v, bare, sem, n);
    int att = d && !strcmp(d->term, "attention");
    const char *lacks = !d                                ? NULL
                        : att                             ? attention_missing(d)
                        : !cuco_semantic_param(d, "rows") ? "rows= (the row count's parameter)"
                        : !cuco_semantic_param(d, "args") ? "args= (the parameters indexed by row)"
                                                          : NULL;
    size_t params = d ? kernel_launch_params(v, bare) : v->n;
    const char *listed = d && params >= v->n ? cuco_semantic_param(d, "params") : NULL;
    param_src ps = {v, params, listed};
    int rc = 1, refused = 1;
    if (close + 2 != b || !is(v, close + 1, ";"))
        *why = cuco_sprintf("is a launch of kernel %s inside a larger statement", name);
    else if (!d)
        *why = cuco_sprintf("launches kernel %s, which the manifest does not declare "
                            "rows_independent or attention (and is no cuBLAS GEMM call)",
                            name);
    else if (lacks)
        *why = cuco_sprintf("launches kernel %s, whose %s declaration (workload.yaml line %d) "
                            "lacks %s%s",
                            name, d->term, d->line, lacks, att ? "=" : "");
    else if (params >= v->n && !listed)
        *why = cuco_sprintf("launches kernel %s, which is neither defined nor declared "
                            "__global__ in this file (or is defined there more than once; "
                            "params= in its declaration may list its parameter names)",
                            name);
    else if (param_count(&ps) != arg_count(v, gt + 1))
        *why = cuco_sprintf("launches kernel %s with %d arguments for its %d parameters%s", name,
                            arg_count(v, gt + 1), param_count(&ps),
                            listed ? " (its declaration's params=)" : "");
    else {
        refused = 0;
        rc = decl_positions(&ps, d, name, kl, why);
    }
    if (refused && !*why)
        rc = CUCO_ENOMEM;
    if (rc == 1 && !*why) {
        kl->grid_rows = !kl->attention && same_text(v, lt, gt + 1, kl->rows_pos);
        kl->name = a;
        kl->bare = bare;
        kl->lt = lt;
        kl->args = gt + 1;
        kl->nparams = param_count(&ps);
        kl->decl_line = d->line;
        kl->params = params;
        kl->param_list = listed;
        kl->decl = d;
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

/* expr with every identifier that names one of kl's kernel parameters
 * replaced by the launch's argument, in parentheses, appended to b. */
static int subst_params(cuco_buf *b, const sview *v, const kernel_launch *kl, const char *expr)
{
    int rc = 0;
    for (const char *p = expr; rc == 0 && *p;) {
        size_t n = 0;
        if (isalpha((unsigned char)*p) || *p == '_')
            while (isalnum((unsigned char)p[n]) || p[n] == '_')
                n++;
        else if (isdigit((unsigned char)*p))
            while (isalnum((unsigned char)p[n]) || p[n] == '.')
                n++;
        param_src ps = {v, kl->params, kl->param_list};
        int k = n && !isdigit((unsigned char)*p) ? param_at(&ps, p, n) : -1;
        size_t a, e;
        if (k >= 0 && arg_range(v, kl->args, k, &a, &e)) {
            size_t o = tk(v, a)->off, end = tk(v, e - 1)->off + tk(v, e - 1)->len;
            rc = cuco_buf_printf(b, "(%.*s)", (int)(end - o), v->src + o);
        } else {
            rc = cuco_buf_printf(b, "%.*s", (int)(n ? n : 1), p);
        }
        p += n ? n : 1;
    }
    return rc;
}

char *kernel_launch_attention_spec(const sview *v, const kernel_launch *kl)
{
    char *rows = kernel_launch_spec(kl);
    cuco_buf b = CUCO_BUF_INIT;
    int lend = kl->lend;
    int rc =
        rows ? cuco_buf_printf(
                   &b, "cuco_tx::AttnSpec{%s, %d, %d, %d, {%d, %d, %d, %d, 0x%lxUL}}, (size_t)(",
                   rows, kl->first_pos, kl->out_pos, kl->lse_pos, lend ? kl->queries_pos : -1,
                   kl->first_query_pos, kl->causal_pos, kl->query_grid, lend ? kl->query_mask : 0UL)
             : CUCO_ENOMEM;
    free(rows);
    if (rc == 0)
        rc = subst_params(&b, v, kl, cuco_semantic_param(kl->decl, "out_rows"));
    if (rc == 0)
        rc = cuco_buf_puts(&b, "), (size_t)(");
    if (rc == 0)
        rc = subst_params(&b, v, kl, cuco_semantic_param(kl->decl, "out_width"));
    if (rc == 0)
        rc = cuco_buf_puts(&b, "), (size_t)(");
    if (rc == 0)
        rc = subst_params(&b, v, kl, lend ? cuco_semantic_param(kl->decl, "query_width") : "0");
    if (rc == 0)
        rc = cuco_buf_puts(&b, ")");
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

/* Whether every name in tokens [a, b) is a parameter of the lambda whose
 * parameters open at params (`args...` of `auto... args`). */
static int only_params(const sview *v, size_t a, size_t b, size_t params)
{
    for (size_t k = a; k < b; k++) {
        if (!ident(v, k))
            continue;
        if (param_position(v, params, v->src + tk(v, k)->off, tk(v, k)->len) < 0)
            return 0;
    }
    return 1;
}

size_t kernel_lambda_launch(const sview *v, size_t i)
{
    size_t params = v->n, lb = sview_lambda_body(v, i, &params), a, b;
    if (lb >= v->n || !arg_range(v, params, 0, &a, &b))
        return v->n;
    size_t first = b - 1;
    if (!ident(v, first) || !same_tok(v, lb + 1, first) || !is(v, lb + 2, "<<<"))
        return v->n;
    size_t open = close_of(v, lb + 2) + 1;
    if (open >= v->n || !is(v, open, "(") || !is(v, close_of(v, open) + 1, ";") ||
        !is(v, close_of(v, open) + 2, "}") || !only_params(v, open + 1, close_of(v, open), params))
        return v->n;
    return lb + 2;
}
