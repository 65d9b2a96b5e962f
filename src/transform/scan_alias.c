/* scan_alias.c: the alias pairs of a function (scan_int.h:
 * scan_alias_pairs), flow-insensitive: what names may hold the same buffer.
 * A pointer copied (p = y, T *p = y + off), stored into a table, an
 * element's member or through a pointer (tab[i] = y, s[1].buf = y, *pp =
 * y), bound (auto [p, q] = ..., std::tie(p, q) = ..., range-for), swapped,
 * declared with it in brackets (device_ptr<float> p(y), vector<float *>
 * v{x, y}), captured by a lambda, handed to a call beside an address (a
 * memcpy, an out-parameter, a descriptor set with &y) or to an object's
 * method (v.push_back(y)). Names that can hold no buffer (scalars, streams,
 * handles) are left out of lists of names, where they would join the
 * buffers they sit beside. */
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"

/* Whether the function of f declares name as an arithmetic scalar or a
 * handle ("size_t n", "const int rows = 4", "cudaStream_t s": such a type
 * word right before the name), which no buffer can alias. */
static int declared_scalar(const fn_scope *f, const sview *v, const char *name)
{
    static const char *const scalar_words[] = {"int",
                                               "long",
                                               "short",
                                               "char",
                                               "unsigned",
                                               "signed",
                                               "float",
                                               "double",
                                               "bool",
                                               "size_t",
                                               "ssize_t",
                                               "int8_t",
                                               "uint8_t",
                                               "int16_t",
                                               "uint16_t",
                                               "int32_t",
                                               "uint32_t",
                                               "int64_t",
                                               "uint64_t",
                                               "ptrdiff_t",
                                               "cudaStream_t",
                                               "cudaEvent_t",
                                               "ncclComm_t",
                                               "cublasHandle_t",
                                               "cublasLtHandle_t",
                                               "dim3",
                                               "ncclDataType_t",
                                               "ncclRedOp_t",
                                               NULL};
    size_t len = strlen(name);
    for (size_t i = f->params + 1; i < f->body_end && i < v->n; i++)
        if (ident(v, i) && tk(v, i)->len == len && !memcmp(v->src + tk(v, i)->off, name, len) &&
            (is(v, i + 1, "=") || is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, ")")) &&
            in_words(v, i - 1, scalar_words))
            return 1;
    return 0;
}

/* Pairs (lhs, each of rhs); a list of names (lists) leaves out what
 * declared_scalar says holds no buffer, on either side. */
static int add_pairs(fn_scope *f, const sview *v, size_t lhs, const cuco_strlist *rhs, int lists)
{
    char *name = cuco_strndup(v->src + tk(v, lhs)->off, tk(v, lhs)->len);
    if (!name)
        return CUCO_ENOMEM;
    int rc = 0, scalar = lists && declared_scalar(f, v, name);
    for (size_t k = 0; k < rhs->n && rc == 0 && !scalar; k++) {
        if ((lists && declared_scalar(f, v, rhs->items[k])) || !strcmp(rhs->items[k], name))
            continue;
        rc = cuco_strlist_push(&f->alias_a, name);
        if (rc == 0)
            rc = cuco_strlist_push(&f->alias_b, rhs->items[k]);
    }
    free(name);
    return rc;
}

/* The '[' that opens the subscripts ending right before at ("a[i][j]" -> the
 * first '['); at itself when none ends there. */
static size_t before_subscripts(const sview *v, size_t at)
{
    while (at > 0 && is(v, at - 1, "]")) {
        size_t k = at - 1;
        int d = 0;
        for (; k < v->n; k--) {
            d += is(v, k, "]") - is(v, k, "[");
            if (d == 0 || k == 0)
                break;
        }
        if (d != 0 || !is(v, k, "["))
            return at;
        at = k;
    }
    return at;
}

/* The head of the name chain that ends right before '=' at eq (p.buf,
 * L->x, s[1].buf, tab[i], *p); v->n when there is none. */
static size_t lhs_head(const sview *v, size_t eq)
{
    size_t k = eq;
    for (;;) {
        k = before_subscripts(v, k);
        if (k == 0 || !ident(v, k - 1))
            return v->n;
        k--;
        if (k >= 1 && (is(v, k - 1, ".") || is(v, k - 1, "->")))
            k--;
        else
            break;
    }
    return in_words(v, k, scan_type_words) ? v->n : k;
}

/* The '(' or '[' matching the ')' or ']' at close, scanning back; v->n. */
static size_t open_before(const sview *v, size_t close)
{
    int d = 0;
    for (size_t k = close; k < v->n; k--) {
        d += is(v, k, ")") || is(v, k, "]");
        d -= is(v, k, "(") || is(v, k, "[");
        if (d == 0)
            return k;
        if (k == 0)
            break;
    }
    return v->n;
}

/* Every name inside [a, b) paired with every head of the right side. */
static int bind_all(fn_scope *f, const sview *v, size_t a, size_t b, const cuco_strlist *rhs)
{
    int rc = 0;
    for (size_t k = a; k < b && rc == 0; k++)
        if (ident(v, k) && !in_words(v, k, scan_type_words))
            rc = add_pairs(f, v, k, rhs, 1);
    return rc;
}

/* An assignment at eq: its left side with the right side's heads (a lambda's
 * every name); structured bindings and std::tie bind each name. */
static int assignment(fn_scope *f, const sview *v, size_t eq, size_t b)
{
    size_t e = eq + 1;
    int d = 0;
    while (e < b && !(d == 0 && (is(v, e, ";") || is(v, e, ",") || is(v, e, ")")))) {
        d += is(v, e, "(") || is(v, e, "[") || is(v, e, "{");
        d -= is(v, e, ")") || is(v, e, "]") || is(v, e, "}");
        e++;
    }
    cuco_strlist rhs = {0};
    int lambda = is(v, eq + 1, "[");
    int rc = is(v, eq + 1, "{") ? scan_expr_heads(v, eq + 2, close_of(v, eq + 1), &rhs, 0)
                                : scan_expr_heads(v, eq + 1, e, &rhs, lambda);
    size_t open =
        eq > 0 && (is(v, eq - 1, "]") || is(v, eq - 1, ")")) ? open_before(v, eq - 1) : v->n;
    if (rc != 0) {
    } else if (open < v->n && open > 0 && is(v, open, "[") &&
               (is(v, open - 1, "auto") || is(v, open - 1, "&") || is(v, open - 1, "&&"))) {
        cuco_strlist_free(&rhs);
        rc = scan_expr_heads(v, eq + 1, e, &rhs, 1); /* auto [p, q] = ... */
        if (rc == 0)
            rc = bind_all(f, v, open + 1, eq - 1, &rhs);
    } else if (open < v->n && open > 0 && is(v, open, "(") && is(v, open - 1, "tie")) {
        cuco_strlist_free(&rhs);
        rc = scan_expr_heads(v, eq + 1, e, &rhs, 1); /* std::tie(p, q) = ... */
        if (rc == 0)
            rc = bind_all(f, v, open + 1, eq - 1, &rhs);
    } else {
        size_t lhs = lhs_head(v, eq);
        if (lhs < v->n)
            rc = add_pairs(f, v, lhs, &rhs, lambda || is(v, eq + 1, "{") || rhs.n > 1);
    }
    cuco_strlist_free(&rhs);
    return rc;
}

/* Calls that take addresses only to make or ask for something: no pointer
 * they are given ends up holding another. */
static const char *const making_calls[] = {"cudaMalloc",
                                           "cudaMallocAsync",
                                           "cudaMallocHost",
                                           "cudaHostAlloc",
                                           "cudaMallocManaged",
                                           "cudaMallocPitch",
                                           "ncclMemAlloc",
                                           "cudaStreamCreate",
                                           "cudaStreamCreateWithFlags",
                                           "cudaStreamCreateWithPriority",
                                           "cudaEventCreate",
                                           "cudaEventCreateWithFlags",
                                           "cudaGetDevice",
                                           "cudaGetDeviceCount",
                                           "cudaDeviceGetAttribute",
                                           "cudaGetDeviceProperties",
                                           "ncclCommInitRank",
                                           "ncclCommInitRankConfig",
                                           "ncclCommInitAll",
                                           "ncclGetUniqueId",
                                           "ncclCommCount",
                                           "ncclCommUserRank",
                                           "ncclCommCuDevice",
                                           "cublasCreate",
                                           "cublasLtCreate",
                                           "MPI_Comm_rank",
                                           "MPI_Comm_size",
                                           "MPI_Init",
                                           "cudaEventElapsedTime",
                                           "cudaStreamGetPriority",
                                           "cudaDeviceGetStreamPriorityRange",
                                           "cudaMemGetInfo",
                                           NULL};

/* Parameter t of the function of the file named like token name: *a, *b
 * its declaration's tokens; 0 when the file defines no such function. */
static int param_of(const sview *v, size_t name, int t, size_t *a, size_t *b)
{
    size_t at = 0;
    for (size_t k = sview_next_def(v, name, &at, NULL); k < v->n;
         k = sview_next_def(v, name, &at, NULL))
        if (v->scope[k] == 0 && arg_range(v, k + 1, t, a, b))
            return 1;
    return 0;
}

/* Whether a library call's arguments can make one pointer hold another:
 * of the CUDA, NCCL, cuBLAS and MPI APIs only the copies can. */
static int library_keeps_pointers(const sview *v, size_t name)
{
    static const char *const prefixes[] = {"cuda",   "nccl",  "cublas", "cusparse",
                                           "curand", "cufft", "MPI_",   NULL};
    const char *w = v->src + tk(v, name)->off;
    size_t len = tk(v, name)->len;
    int library = len > 2 && w[0] == 'c' && w[1] == 'u' && w[2] >= 'A' && w[2] <= 'Z';
    for (const char *const *p = prefixes; *p && !library; p++)
        library = len > strlen(*p) && memcmp(w, *p, strlen(*p)) == 0;
    if (!library)
        return 1;
    return (len >= 10 && memcmp(w, "cudaMemcpy", 10) == 0) ||
           (len >= 8 && memcmp(w, "cuMemcpy", 8) == 0);
}

/* Whether argument t of the call at name can be made to hold another
 * argument: taken by address (&p) into a parameter that is not a pointer to
 * const (or into a function the file does not define, the library's copies
 * and unknown calls), or a plain name into a parameter the callee can set
 * (T *&out, T **out). */
static int arg_takes_pointer(const sview *v, size_t name, int t, int by_address)
{
    size_t a, b;
    if (!param_of(v, name, t, &a, &b))
        return by_address && library_keeps_pointers(v, name);
    int stars = 0, refs = 0, const_first = 0;
    for (size_t q = a; q < b; q++) {
        const_first |= stars == 0 && is(v, q, "const");
        stars += is(v, q, "*");
        refs += is(v, q, "&") || is(v, q, "&&");
    }
    if (by_address)
        return stars >= 2 || (stars == 1 && !const_first);
    return stars >= 2 || (stars >= 1 && refs >= 1);
}

enum { MAX_ARGS = 64 };

/* The object whose method is called at name (`v` of v.push_back, `s` of
 * s.bufs[i].add); v->n when name is no method. */
static size_t method_object(const sview *v, size_t name)
{
    if (name < 2 || !(is(v, name - 1, ".") || is(v, name - 1, "->")))
        return v->n;
    size_t k = name - 1;
    while (k >= 2 && (is(v, k, ".") || is(v, k, "->")) && ident(v, k - 1)) {
        k = before_subscripts(v, k - 1);
        if (k > 0 && (is(v, k - 1, ".") || is(v, k - 1, "->")))
            k--;
        else
            break;
    }
    return ident(v, k) ? k : v->n;
}

/* The name a call's argument [a, b) (argument t) may be made to hold
 * another argument through: &p, or p into an out-parameter; v->n. */
static size_t holder_arg(const sview *v, size_t name, int t, size_t a, size_t b)
{
    if (is(v, a, "&") && ident(v, a + 1) && arg_takes_pointer(v, name, t, 1))
        return a + 1;
    if (ident(v, a) && a + 1 == b && arg_takes_pointer(v, name, t, 0))
        return a;
    return v->n;
}

/* A call at name whose arguments hand a pointer over: each argument taken
 * by address (&p: memcpy(&p, &y, 8), view_of(&p, y), a descriptor set with
 * &y) holds the other arguments' heads; an object's method (v.push_back(y))
 * makes the object hold its arguments'. */
static int call_pairs(fn_scope *f, const sview *v, size_t name)
{
    size_t open = name + 1, close = close_of(v, open);
    if (close >= v->n || in_words(v, name, making_calls) || scan_call_in(v, name, making_calls))
        return 0;
    size_t from[MAX_ARGS], to[MAX_ARGS];
    int n = arg_ranges(v, open, from, to, MAX_ARGS), rc = 0;
    size_t obj = method_object(v, name);
    for (int t = -1; t < n && rc == 0; t++) {
        size_t lhs = t < 0 ? obj : holder_arg(v, name, t, from[t], to[t]);
        if (lhs >= v->n)
            continue;
        cuco_strlist rhs = {0};
        for (int o = 0; o < n && rc == 0; o++)
            if (o != t)
                rc = scan_expr_heads(v, from[o], to[o], &rhs, 0);
        if (rc == 0)
            rc = add_pairs(f, v, lhs, &rhs, 1);
        cuco_strlist_free(&rhs);
    }
    return rc;
}

/* Drops the pairs whose source is a scalar or handle that nothing is ever
 * assigned to (`p.n = n` with `size_t n` a parameter): it holds no buffer,
 * so it joins p to nothing. One that takes a value (`uint64_t a =
 * (uint64_t)y;`) may carry an address, and its pairs stay. */
static int drop_inert_scalars(fn_scope *f, const sview *v)
{
    size_t n = f->alias_a.n, kept = 0;
    char *drop = calloc(n ? n : 1, 1);
    if (!drop)
        return CUCO_ENOMEM;
    for (size_t i = 0; i < n; i++)
        drop[i] = !cuco_strlist_has(&f->alias_a, f->alias_b.items[i]) &&
                  declared_scalar(f, v, f->alias_b.items[i]);
    for (size_t i = 0; i < n; i++) {
        if (drop[i]) {
            free(f->alias_a.items[i]);
            free(f->alias_b.items[i]);
            continue;
        }
        f->alias_a.items[kept] = f->alias_a.items[i];
        f->alias_b.items[kept++] = f->alias_b.items[i];
    }
    f->alias_a.n = f->alias_b.n = kept;
    free(drop);
    return 0;
}

int scan_alias_pairs(fn_scope *f, const sview *v, size_t a, size_t b)
{
    int rc = 0;
    for (size_t i = a; i < b && rc == 0; i++) {
        cuco_strlist rhs = {0};
        size_t lhs = v->n;
        if (is(v, i, "=")) {
            rc = assignment(f, v, i, b);
        } else if (ident(v, i) && (is(v, i + 1, "(") || is(v, i + 1, "{")) && i > a &&
                   (is(v, i - 1, ">") ||
                    (ident(v, i - 1) && !in_words(v, i - 1, sview_keywords)))) {
            /* a declaration with its initialiser in brackets:
             * "thrust::device_ptr<float> p(y);", "std::vector<float *> v{x, y};" */
            lhs = i;
            rc = scan_expr_heads(v, i + 2, close_of(v, i + 1), &rhs, 0);
        } else if (is(v, i, "swap") && is(v, i + 1, "(") && ident(v, i + 2)) {
            lhs = i + 2;
            rc = scan_expr_heads(v, i + 3, close_of(v, i + 1), &rhs, 0);
        } else if (is(v, i, ":") && ident(v, i - 1) && !is(v, i + 1, ":")) {
            size_t k = i; /* range-for: "for (auto &b : buckets)" */
            while (k > a && !is(v, k, "(") && !is(v, k, ";") && !is(v, k, "{"))
                k--;
            if (is(v, k, "(") && k > 0 && is(v, k - 1, "for")) {
                lhs = i - 1;
                rc = scan_expr_heads(v, i + 1, close_of(v, k), &rhs, 0);
            }
        } else if (ident(v, i) && is(v, i + 1, "(") && !in_words(v, i, sview_keywords)) {
            rc = call_pairs(f, v, i);
        }
        if (rc == 0 && lhs < v->n)
            rc = add_pairs(f, v, lhs, &rhs, rhs.n > 1);
        cuco_strlist_free(&rhs);
    }
    return rc == 0 ? drop_inert_scalars(f, v) : rc;
}
