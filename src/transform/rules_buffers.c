/* rules_buffers.c: which allocations feed a collective: a buffer's name followed through
 * assignments, helper parameters, tables and scopes to its cudaMalloc (or
 * ncclMemAlloc), which becomes symmetric, and the frees that go with it. */
#include "rules_int.h"

static int resolve_buffer(ctx *c, const char *name, size_t at, const char *why, int depth);

/* The token naming the buffer of the expression [first, last]: the end of
 * its name chain (rl_chain_last), or, for `buf.data()`, the member that
 * getter returns (sview_accessor_member); v->n when there is none. */
static size_t buffer_token(const sview *v, size_t first, size_t last)
{
    size_t t = rl_chain_last(v, first, last);
    size_t m = t < v->n ? sview_accessor_member(v, t) : t;
    if (m == t && sview_smart_get(v, t) && ident(v, t - 2))
        return t - 2; /* a smart pointer's get(): what it holds */
    return m;
}

int rl_name_seen(const cuco_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i], s) == 0)
            return 1;
    return 0;
}

static int alloc_seen(const ctx *c, size_t tok)
{
    for (size_t i = 0; i < c->nalloc; i++)
        if (c->alloc_sites[i] == tok)
            return 1;
    return 0;
}

static int add_alloc(ctx *c, size_t tok, const char *why)
{
    if (alloc_seen(c, tok))
        return 1;
    if (!rl_editable(c, tok, "the allocation of a communicated buffer"))
        return 0;
    size_t *s = realloc(c->alloc_sites, (c->nalloc + 1) * sizeof(*s));
    if (!s)
        return -1;
    c->alloc_sites = s;
    c->alloc_sites[c->nalloc++] = tok;
    const cuco_tok *t = tk(&c->v, tok);
    /* ncclMemAlloc memory can back a window already: it becomes one of the
     * runtime's windows, still answering ncclResult_t */
    int nccl = is(&c->v, tok, "ncclMemAlloc");
    const char *to = nccl ? "cuco_tx::symm_mem_alloc" : "cuco_tx::symm_malloc";
    c->nccl_mem |= nccl;
    if (rl_add_edit(c, tok, t->off, t->len, to) != 0)
        return -1;
    cuco_tx_notes_add(&c->r->notes, t->line, "symmetric", "%.*s -> %s (symmetric window) for %s",
                      (int)t->len, c->v.src + t->off, to, why);
    return 1;
}

/* Allocations in the body of function fname (a pointer-returning allocator). */
static int resolve_function(ctx *c, const char *fname, const char *why)
{
    const sview *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!cuco_tok_is(&v->lx, tk(v, i), fname) || !is(v, i + 1, "("))
            continue;
        size_t body = rl_function_body(v, i + 1);
        if (!body)
            continue; /* a call or prototype, not the definition */
        size_t body_end = close_of(v, body);
        for (size_t j = body + 1; j < body_end; j++) {
            if ((is(v, j, "cudaMalloc") || is(v, j, "cudaMallocAsync") ||
                 is(v, j, "ncclMemAlloc")) &&
                is(v, j + 1, "(")) {
                int rc = add_alloc(c, j, why);
                if (rc < 0)
                    return rc;
                found += rc > 0;
            }
        }
    }
    return found;
}

/* Whether the function whose name is at token fn is used anywhere in the
 * file but its own definition and declarations (called, or passed on). */
static int has_caller(const ctx *c, size_t fn)
{
    const sview *v = &c->v;
    for (size_t j = 0; j + 1 < v->n; j++) {
        if (j == fn || !same_tok(v, j, fn))
            continue;
        size_t open = rl_call_open(v, j);
        if (open < v->n &&
            (rl_function_body(v, open) || (j > 0 && ident(v, j - 1) && !rl_is_keyword(v, j - 1))))
            continue; /* another definition or a prototype */
        return 1;
    }
    return 0;
}

/* A buffer that is a parameter of a function (at file or namespace scope) is
 * the argument its callers pass: "static void exchange(float *dst, ...)"
 * called as "exchange(nxt, ...)" resolves dst through nxt. */
static int resolve_params(ctx *c, const char *name, size_t scope_fn, const char *why, int depth)
{
    const sview *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        size_t open = ident(v, i) && !rl_is_keyword(v, i) ? rl_def_params(v, i) : v->n;
        if (open >= v->n || !rl_function_body(v, open))
            continue; /* not a definition of a function or a named lambda */
        if (scope_fn < v->n && i != scope_fn)
            continue; /* a name declared in a function is a parameter of that function only */
        int k = sview_param_index(v, open, name);
        if (k < 0)
            continue;
        for (size_t j = 0; j + 1 < v->n; j++) {
            if (j == i || tk(v, j)->kind != CUCO_TOK_IDENT || !same_tok(v, j, i))
                continue;
            size_t call = rl_call_open(v, j);
            /* other declarations ("void exchange(") are not calls; member calls are
             * ("comm.all_reduce(buf, n)" of a method defined in a class) */
            if (call >= v->n || rl_function_body(v, call) ||
                (j > 0 && ident(v, j - 1) && !rl_is_keyword(v, j - 1)))
                continue;
            args a;
            rl_call_args(v, call, &a);
            if (a.n <= k)
                continue;
            size_t last = buffer_token(v, a.first[k], a.last[k]);
            /* a caller's own variable of the same name is another variable */
            if (last >= v->n || (cuco_tok_is(&v->lx, tk(v, last), name) &&
                                 (scope_fn >= v->n || c->fn_of[last] == scope_fn)))
                continue;
            char *arg = cuco_strndup(v->src + tk(v, last)->off, tk(v, last)->len);
            if (!arg)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, arg, last, why, depth + 1);
            free(arg);
            if (rc < 0)
                return rc;
            found += rc;
        }
    }
    return found;
}

/* The allocation(s) behind the value of the expression starting at token
 * rs (up to ';' or ',' at its level): a buffer name or an allocator call. */
static int resolve_rhs(ctx *c, size_t rs, const char *why, int depth)
{
    const sview *v = &c->v;
    size_t re = rs;
    int d = 0;
    while (re < v->n) {
        if (is(v, re, "(") || is(v, re, "[") || is(v, re, "{"))
            d++;
        else if (is(v, re, ")") || is(v, re, "]") || is(v, re, "}")) {
            if (--d < 0)
                break;
        } else if (d == 0 && (is(v, re, ";") || is(v, re, ",")))
            break;
        re++;
    }
    if (re == rs || is(v, rs, "nullptr") || is(v, rs, "NULL") || tk(v, rs)->kind == CUCO_TOK_NUMBER)
        return 0;
    size_t base = rl_chain_last(v, rs, re - 1),
           member = base < v->n ? sview_accessor_member(v, base) : base;
    if (base >= v->n)
        return 0;
    if (member != base) { /* p = buf.data(): the member the getter returns */
        char *mname = cuco_strndup(v->src + tk(v, member)->off, tk(v, member)->len);
        int rc = mname ? resolve_buffer(c, mname, member, why, depth + 1) : CUCO_ENOMEM;
        free(mname);
        return rc;
    }
    char *bname = cuco_strndup(v->src + tk(v, base)->off, tk(v, base)->len);
    if (!bname)
        return CUCO_ENOMEM;
    int rc;
    size_t after = base + 1;
    if (after < re && is(v, after, "<")) { /* alloc_fn<T>(...) */
        int d2 = 0;
        for (; after < re; after++) {
            if (is(v, after, "<"))
                d2++;
            else if (is(v, after, ">") && --d2 == 0)
                break;
            else if (is(v, after, ">>") && (d2 -= 2) <= 0)
                break;
        }
        after++;
    }
    if (after < re && is(v, after, "(") && base == rl_chain_last(v, base, base))
        rc = resolve_function(c, bname, why); /* name = (T *)alloc_fn(...) */
    else
        rc = resolve_buffer(c, bname, base, why, depth + 1);
    free(bname);
    return rc;
}

/* The table name before "[...] = {" whose '{' is at brace, or n. */
static size_t table_name(const sview *v, size_t brace)
{
    size_t j = brace - 1; /* the '=' */
    while (j > 0 && is(v, j - 1, "]")) {
        int d = 0;
        for (j--; j > 0; j--) {
            if (is(v, j, "]"))
                d++;
            else if (is(v, j, "[") && --d == 0)
                break;
        }
    }
    return j > 0 && ident(v, j - 1) ? j - 1 : v->n;
}

/* An array initializer "{a, b, ...}" opened at brace. With member NULL:
 * resolves every element (the table holds those buffers). With a member:
 * when an element is its address ("&t->member"), the table is one of
 * pointers to pointers, and each store through it ("*(tab[i]) = p",
 * "*tab[i] = p") sets the member: resolves what is stored. */
static int resolve_table(ctx *c, size_t brace, const char *member, const char *why, int depth)
{
    const sview *v = &c->v;
    args a;
    rl_call_args(v, brace, &a);
    int found = 0;
    if (!member) {
        for (int k = 0; k < a.n; k++) {
            if (is(v, a.first[k], "&"))
                continue;
            size_t last = rl_chain_last(v, a.first[k], a.last[k]);
            if (last >= v->n)
                continue;
            char *el = cuco_strndup(v->src + tk(v, last)->off, tk(v, last)->len);
            int rc = el ? resolve_buffer(c, el, last, why, depth + 1) : CUCO_ENOMEM;
            free(el);
            if (rc < 0)
                return rc;
            found += rc;
        }
        return found;
    }
    int holds = 0;
    for (int k = 0; k < a.n && !holds; k++) {
        size_t last = rl_chain_last(v, a.first[k], a.last[k]);
        holds = is(v, a.first[k], "&") && last < v->n && cuco_tok_is(&v->lx, tk(v, last), member);
    }
    size_t tab = table_name(v, brace);
    if (!holds || tab >= v->n)
        return 0;
    for (size_t j = 0; j + 2 < v->n; j++) {
        if (!is(v, j, "*"))
            continue;
        size_t t = j + 1, paren = is(v, t, "(");
        t += paren;
        if (!ident(v, t) || !same_tok(v, t, tab) || !is(v, t + 1, "["))
            continue;
        size_t e = rl_after_brackets(v, t + 1);
        if (paren && is(v, e, ")"))
            e++;
        if (!is(v, e, "="))
            continue;
        int rc = resolve_rhs(c, e + 1, why, depth);
        if (rc < 0)
            return rc;
        found += rc;
    }
    return found;
}

int rl_scope_map(ctx *c)
{
    const sview *v = &c->v;
    if (c->fn_of)
        return 0;
    c->fn_of = malloc((v->n + 1) * sizeof(*c->fn_of));
    if (!c->fn_of)
        return CUCO_ENOMEM;
    for (size_t i = 0; i <= v->n; i++)
        c->fn_of[i] = v->n;
    for (size_t f = 0; f + 1 < v->n; f++) {
        size_t open = ident(v, f) && !rl_is_keyword(v, f) ? rl_def_params(v, f) : v->n;
        size_t body = open < v->n ? rl_function_body(v, open) : 0;
        if (!body)
            continue;
        size_t end = close_of(v, body);
        /* later (inner) definitions overwrite their outer function's tokens */
        for (size_t t = open; t <= end && t < v->n; t++)
            c->fn_of[t] = f;
    }
    return 0;
}

/* The scope of the name used at token at: the tokens [*lo, *hi) of the
 * innermost function around it that declares the name (a local or a
 * parameter), with its name token in *fn; the whole file and *fn = n for a
 * name no enclosing function declares (a global, a member). Two functions
 * with a variable of the same name (a reference solver beside the
 * distributed one) are two buffers. */
static void name_scope(const ctx *c, const char *name, size_t at, size_t *lo, size_t *hi,
                       size_t *fn, int *param)
{
    const sview *v = &c->v;
    *lo = 0;
    *hi = v->n;
    *fn = v->n;
    *param = 0;
    if (at > 0 && at < v->n && (is(v, at - 1, ".") || is(v, at - 1, "->")))
        return; /* a member: set wherever its objects are, not a local of that name */
    size_t nl = strlen(name);
    for (size_t f = at < v->n ? c->fn_of[at] : v->n; f < v->n; f = c->fn_of[f]) {
        size_t open = rl_def_params(v, f), end = close_of(v, rl_function_body(v, open));
        for (size_t t = open; t < end && t < v->n; t++) {
            if (tk(v, t)->len != nl || memcmp(v->src + tk(v, t)->off, name, nl) != 0 ||
                !rl_declares_variable(v, t))
                continue;
            *lo = open;
            *hi = end + 1;
            *fn = f;
            *param = t < rl_function_body(v, open);
            return;
        }
    }
}

/* Whether the name at x is the variable of a range-for over a container
 * named name that encloses it (`for (auto &g : grads) cudaMalloc(&g, n);`:
 * the allocations of grads' elements). */
static int range_for_over(const sview *v, size_t x, const char *name)
{
    for (size_t k = x; k-- > 0;) {
        if (!is(v, k, "for") || !is(v, k + 1, "("))
            continue;
        size_t close = close_of(v, k + 1), body_end = close;
        if (close < v->n && is(v, close + 1, "{"))
            body_end = close_of(v, close + 1);
        else /* one statement: to its ';' */
            for (int d = 0; ++body_end < v->n && !(d == 0 && is(v, body_end, ";"));)
                d += is(v, body_end, "(") - is(v, body_end, ")");
        if (close >= v->n || x <= close || x >= body_end)
            continue; /* not the loop around x */
        for (size_t q = k + 2; q + 1 < close; q++)
            if (is(v, q, ":") && same_tok(v, q - 1, x)) {
                size_t src = rl_chain_last(v, q + 1, close - 1);
                return src < v->n && cuco_tok_is(&v->lx, tk(v, src), name);
            }
    }
    return 0;
}

/* The allocations behind name found in tokens [lo, hi): its cudaMalloc,
 * what it is assigned or swapped with, the tables that hold it. */
static int resolve_range(ctx *c, const char *name, size_t lo, size_t hi, const char *why, int depth)
{
    const sview *v = &c->v;
    int found = 0;
    for (size_t i = lo; i + 1 < hi; i++) {
        if ((is(v, i, "cudaMalloc") || is(v, i, "cudaMallocAsync") || is(v, i, "ncclMemAlloc")) &&
            is(v, i + 1, "(")) {
            args a;
            rl_call_args(v, i + 1, &a);
            if (a.n < 1)
                continue;
            size_t last = rl_chain_last(v, a.first[0], a.last[0]);
            if (last < v->n &&
                (cuco_tok_is(&v->lx, tk(v, last), name) || range_for_over(v, last, name))) {
                int rc = add_alloc(c, i, why);
                if (rc < 0)
                    return rc;
                found += rc > 0;
            }
            continue;
        }
        /* swap(a, b) (std::swap, thrust::swap ...): a double buffer whose halves
         * trade places; each half may end up in the other's role */
        if (is(v, i, "swap") && is(v, i + 1, "(")) {
            args a;
            rl_call_args(v, i + 1, &a);
            if (a.n != 2)
                continue;
            size_t x = rl_chain_last(v, a.first[0], a.last[0]),
                   y = rl_chain_last(v, a.first[1], a.last[1]);
            size_t other = v->n;
            if (x < v->n && cuco_tok_is(&v->lx, tk(v, x), name))
                other = y;
            else if (y < v->n && cuco_tok_is(&v->lx, tk(v, y), name))
                other = x;
            if (other >= v->n)
                continue;
            char *oname = cuco_strndup(v->src + tk(v, other)->off, tk(v, other)->len);
            if (!oname)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, oname, other, why, depth + 1);
            free(oname);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* "T *name[] = {a, b}": a table of pointers is each buffer it holds;
         * "name[b] = flat + b * n": an element set to a view of a buffer */
        if (cuco_tok_is(&v->lx, tk(v, i), name) && is(v, i + 1, "[")) {
            size_t eq = rl_after_brackets(v, i + 1);
            int rc = !is(v, eq, "=")      ? 0
                     : is(v, eq + 1, "{") ? resolve_table(c, eq + 1, NULL, why, depth)
                                          : resolve_rhs(c, eq + 1, why, depth);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* "T **tab[] = {&s->a, &s->b};" then "*(tab[i]) = p;": name is set through the table */
        if (is(v, i, "=") && is(v, i + 1, "{") && i > 0 && is(v, i - 1, "]")) {
            int rc = resolve_table(c, i + 1, name, why, depth);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* name(RHS), name{RHS}: a constructor's member initialiser
         * (": partial_(device_alloc(n))") or a declarator's */
        if (cuco_tok_is(&v->lx, tk(v, i), name) && (is(v, i + 1, "(") || is(v, i + 1, "{")) &&
            i > 0 && (is(v, i - 1, ":") || is(v, i - 1, ",")) && sview_paren_around(v, i) >= v->n) {
            int rc = resolve_rhs(c, i + 2, why, depth);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* T{a, b}: an aggregate of a struct that declares the member name */
        size_t value = is(v, i + 1, "{") || is(v, i + 2, "{") || is(v, i + 3, "{")
                           ? sview_aggregate_value(v, i, name)
                           : v->n;
        if (value < v->n) {
            int rc = resolve_rhs(c, value, why, depth);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* name = RHS;  (not ==, not a declaration of a function parameter, not
         * a store through the pointer: "*s->name = v") */
        if (!cuco_tok_is(&v->lx, tk(v, i), name) || !is(v, i + 1, "=") || rl_stores_through(v, i))
            continue;
        int rc = resolve_rhs(c, i + 2, why, depth);
        if (rc < 0)
            return rc;
        found += rc;
    }
    return found;
}

/* Finds the allocation(s) behind buffer name, used at token at, in the scope
 * of the variable it names (name_scope); returns how many were made
 * symmetric (0: none found), negative on memory failure. */
static int resolve_buffer(ctx *c, const char *name, size_t at, const char *why, int depth)
{
    const sview *v = &c->v;
    if (depth > 8)
        return 0;
    if (rl_scope_map(c) != 0)
        return CUCO_ENOMEM;
    size_t lo, hi, fn;
    int param;
    name_scope(c, name, at, &lo, &hi, &fn, &param);
    /* each variable is resolved once: "buf" of two functions is two
     * variables; met again while its own resolution is under way (p = q;
     * q = p) it adds nothing, and one that found nothing is tried again */
    char *key = cuco_sprintf("%s@%zu", name, fn);
    if (!key)
        return CUCO_ENOMEM;
    int busy = rl_name_seen(&c->symm_busy, key), done = rl_name_seen(&c->symm_found, key);
    int rc = busy || done ? 0 : cuco_strlist_push(&c->symm_busy, key);
    /* the plain name too, for the frozen cudaFree check */
    if (rc == 0 && !rl_name_seen(&c->symm_names, name))
        rc = cuco_strlist_push(&c->symm_names, name);
    if (busy || done || rc != 0) {
        free(key);
        return rc != 0 ? CUCO_ENOMEM : done;
    }
    int found = resolve_range(c, name, lo, hi, why, depth);
    rc = found < 0 ? found : resolve_params(c, name, fn, why, depth);
    free(c->symm_busy.items[--c->symm_busy.n]); /* this key: the stack's top */
    if (rc < 0) {
        free(key);
        return rc;
    }
    found += rc;
    if (found == 0 && param && !has_caller(c, fn)) {
        /* a parameter of a function nothing here calls: the same name's
         * allocations in the rest of the file are a guess, said in the report */
        found = resolve_range(c, name, 0, v->n, why, depth);
        if (found > 0)
            cuco_tx_notes_add(&c->r->notes, tk(v, fn)->line, "note",
                              "guessed: '%s' of %.*s (which no function of this file calls) is "
                              "the buffer of the same name allocated elsewhere in the file",
                              name, (int)tk(v, fn)->len, v->src + tk(v, fn)->off);
    }
    rc = found > 0 ? cuco_strlist_push(&c->symm_found, key) : 0;
    free(key);
    return rc != 0 ? CUCO_ENOMEM : found;
}

/* The first call of another allocator (managed, pooled, host memory...)
 * whose first argument names `name`; its token index, or n. */
static size_t other_allocation(const ctx *c, const char *name)
{
    static const char *const others[] = {"cudaMallocManaged",
                                         "cudaMallocFromPoolAsync",
                                         "cudaMallocHost",
                                         "cudaHostAlloc",
                                         "cudaMallocPitch",
                                         "cuMemAlloc",
                                         NULL};
    const sview *v = &c->v;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!is(v, i + 1, "(") || !in_words(v, i, others))
            continue;
        args a;
        rl_call_args(v, i + 1, &a);
        if (a.n < 1)
            continue;
        size_t last = rl_chain_last(v, a.first[0], a.last[0]);
        if (last < v->n && cuco_tok_is(&v->lx, tk(v, last), name))
            return i;
    }
    return v->n;
}

/* Containers whose memory comes from their own allocator. */
static const char *const container_words[] = {"device_vector",  "device_ptr", "device_buffer",
                                              "device_uvector", "Tensor",     "unique_ptr",
                                              "shared_ptr",     NULL};

/* Appends to b, and returns 1, when the declaration at token t is of a
 * container (container_words) rather than of a pointer. */
static int container_note(ctx *c, cuco_buf *b, size_t t)
{
    const sview *v = &c->v;
    size_t lo, hi;
    rl_stmt_span(c, t, &lo, &hi);
    for (const char *const *w = container_words; *w; w++) {
        size_t wl = strlen(*w);
        for (size_t q = lo; q + wl <= hi; q++) {
            char before = q > lo ? v->src[q - 1] : ' ', after = v->src[q + wl];
            if (memcmp(v->src + q, *w, wl) != 0 || before == '_' ||
                ((before | 32) >= 'a' && (before | 32) <= 'z') || after == '_' ||
                ((after | 32) >= 'a' && (after | 32) <= 'z'))
                continue;
            cuco_buf_printf(
                b,
                "; '%.*s' is declared at line %d as '%.*s': the memory of a %s comes from its own "
                "allocator, which cannot back a symmetric window (allocate the buffer with "
                "cudaMalloc)",
                (int)tk(v, t)->len, v->src + tk(v, t)->off, tk(v, t)->line, (int)(hi - lo),
                v->src + lo, *w);
            return 1;
        }
    }
    return 0;
}

/* Where the trace of a buffer whose cudaMalloc was not found stops, for
 * the refusal: the expression it gets its value from, and a container
 * (thrust::device_vector, a smart pointer ...) that holds it or a name in
 * that expression. Caller frees; NULL when there is nothing to say. */
static char *trace_hint(ctx *c, const char *name)
{
    const sview *v = &c->v;
    cuco_buf b = CUCO_BUF_INIT;
    size_t rs = v->n, re = v->n;
    for (size_t i = 0; i + 2 < v->n && rs >= v->n; i++) {
        if (!cuco_tok_is(&v->lx, tk(v, i), name) || !is(v, i + 1, "=") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        rs = i + 2;
        int d = 0;
        for (re = rs; re < v->n; re++) {
            if (is(v, re, "(") || is(v, re, "[") || is(v, re, "{"))
                d++;
            else if ((is(v, re, ")") || is(v, re, "]") || is(v, re, "}")) && --d < 0)
                break;
            else if (d == 0 && (is(v, re, ";") || is(v, re, ",")))
                break;
        }
        if (re > rs)
            cuco_buf_printf(&b, "; '%s' gets its value at line %d from '%.*s'", name,
                            tk(v, rs)->line, (int)(rl_tok_end(v, re - 1) - tk(v, rs)->off),
                            v->src + tk(v, rs)->off);
    }
    /* the buffer's own declaration, then those of the names its value is made of */
    size_t own = rl_declaration_of(v, name, strlen(name));
    if (!(own < v->n && container_note(c, &b, own)))
        for (size_t j = rs; rs < v->n && j < re; j++) {
            if (!ident(v, j) || is(v, j + 1, "(") || is(v, j + 1, "::"))
                continue;
            size_t t = rl_declaration_of(v, v->src + tk(v, j)->off, tk(v, j)->len);
            if (t < v->n && container_note(c, &b, t))
                break;
        }
    if (b.len == 0) {
        cuco_buf_free(&b);
        return NULL;
    }
    return cuco_buf_detach(&b);
}

/* A buffer that cannot become a window: the call is refused (group -1: a
 * receive, which must meet its peer's rewritten send), kept host NCCL
 * (keep_or_refuse, group: the call's NCCL group), or left as it is
 * (SYMM_OPTIONAL). */
static int no_window(ctx *c, int group, int line, const char *fmt, const char *a, const char *b)
{
    if (group == SYMM_OPTIONAL)
        return 0;
    return group < 0 ? rl_refuse(c, line, fmt, a, b) : rl_keep_or_refuse(c, line, group, fmt, a, b);
}

int rl_need_symmetric(ctx *c, const args *a, int k, size_t call_tok, const char *call, int group)
{
    const sview *v = &c->v;
    size_t last = buffer_token(v, a->first[k], a->last[k]);
    char *text = rl_arg_text(v, a, k);
    if (!text)
        return CUCO_ENOMEM;
    if (last >= v->n) {
        no_window(c, group, rl_line_of(c, call_tok), "%s: cannot tell which buffer '%s' is", call,
                  text);
        free(text);
        return 0;
    }
    char *name = cuco_strndup(v->src + tk(v, last)->off, tk(v, last)->len);
    char *why = cuco_sprintf("'%s' of %s at line %d", text, call, rl_line_of(c, call_tok));
    int rc = (!name || !why) ? CUCO_ENOMEM : resolve_buffer(c, name, last, why, 0);
    if (rc == 0) {
        size_t at = name ? other_allocation(c, name) : v->n;
        if (at < v->n && is(v, at, "cudaMallocManaged") && strcmp(call, "ncclAllReduce") == 0) {
            /* host-readable scratch (a loss or a norm summed over ranks): staged
             * through a symmetric buffer of the glue */
            c->staged = c->stage_call = 1;
            rc = cuco_tx_notes_add(&c->r->notes, rl_line_of(c, call_tok), "symmetric",
                                   "'%s' comes from cudaMallocManaged at line %d (host-readable "
                                   "memory, which cannot be a symmetric window): %s runs on a "
                                   "symmetric staging buffer, copied in and out on its stream",
                                   text, rl_line_of(c, at), call);
        } else if (at < v->n) {
            char *detail =
                cuco_sprintf("'%s' comes from %.*s at line %d, which cannot back a symmetric "
                             "window (only cudaMalloc, cudaMallocAsync and ncclMemAlloc "
                             "allocations become windows)",
                             text, (int)tk(v, at)->len, v->src + tk(v, at)->off, rl_line_of(c, at));
            no_window(c, group, rl_line_of(c, call_tok), "%s: buffer %s", call,
                      detail ? detail : "?");
            free(detail);
        } else {
            char *hint = name ? trace_hint(c, name) : NULL;
            char *what = cuco_sprintf("'%s'%s", text, hint ? hint : "");
            no_window(c, group, rl_line_of(c, call_tok),
                      "%s: cannot find the cudaMalloc of buffer %s", call, what ? what : text);
            free(what);
            free(hint);
        }
    }
    free(name);
    free(why);
    free(text);
    return rc < 0 ? rc : 0;
}

/* The glue's free for the free function named by w (len bytes), or NULL. */
static const char *glue_free(const ctx *c, const char *w, size_t len)
{
    if (len == 13 && memcmp(w, "cudaFreeAsync", 13) == 0)
        return "cuco_tx::symm_free_async";
    if (len == 8 && memcmp(w, "cudaFree", 8) == 0)
        return "cuco_tx::symm_free";
    if (c->nccl_mem && len == 11 && memcmp(w, "ncclMemFree", 11) == 0)
        return "cuco_tx::symm_mem_free";
    return NULL;
}

/* Whether the word at w (after a) is qualified by an object or a scope
 * other than the global one (`x.cudaFree`, `p->cudaFree`, `ns::cudaFree`;
 * not `::cudaFree`). */
static int member_or_scoped(const char *a, const char *w)
{
    const char *d = w;
    while (d > a && (d[-1] == ' ' || d[-1] == '\t'))
        d--;
    if (d > a && (d[-1] == '.' || (d[-1] == '>' && d - a >= 2 && d[-2] == '-')))
        return 1;
    if (!(d - a >= 2 && d[-1] == ':' && d[-2] == ':'))
        return 0;
    d -= 2;
    while (d > a && (d[-1] == ' ' || d[-1] == '\t'))
        d--;
    return d > a && (cuco_tx_ident_char(d[-1]) || d[-1] == '>');
}

/* The frees inside the #define lines of editable code (`#define SAFE_FREE(p)
 * do { cudaFree(p); p = NULL; } while (0)`): each through the glue's free,
 * which frees any other pointer as the original did. A macro that stands
 * for a free itself (`#define cudaFree(p) ...`) is left as it is: the glue
 * and the device library expand it too. */
static int rewrite_macro_frees(ctx *c)
{
    const cuco_lex *lx = &c->v.lx;
    for (size_t k = 0; k < lx->ntoks; k++) {
        const cuco_tok *t = &lx->toks[k];
        if (!cuco_tok_directive(lx->src, t, "define"))
            continue;
        int frozen = c->nblocks != 0 && !rl_in_block(c, t->off);
        const char *a = lx->src + t->off, *e = a + t->len, *w;
        size_t name_len, n;
        const char *name = cuco_tx_define_name(lx->src + t->dir_off + 6, e, &name_len);
        if (glue_free(c, name, name_len))
            continue;
        for (const char *q = name + name_len; (w = cuco_tx_next_name(a, q, e, &n)) != NULL;
             q = w + n) {
            const char *to = glue_free(c, w, n);
            if (!to || member_or_scoped(a, w))
                continue;
            if (frozen) { /* said once for the macro: nothing of it is edited */
                int rc = cuco_tx_notes_add(
                    &c->r->notes, t->line, "note",
                    "macro %.*s frees with %.*s in frozen code, where it is not rewritten: a "
                    "symmetric buffer freed through it fails (its free returns an error and its "
                    "window stays registered)",
                    (int)name_len, name, (int)n, w);
                if (rc != 0)
                    return rc;
                break;
            }
            int rc = rl_add_edit(c, 0, (size_t)(w - lx->src), n, to);
            if (rc != 0)
                return rc;
            c->edits[c->nedits - 1].stmt_lo = t->off; /* the #define line is the statement */
            c->edits[c->nedits - 1].stmt_hi = t->off + t->len;
        }
    }
    return 0;
}

/* Whether the free function named at token i is named as a value (a
 * deleter): `&cudaFree` taken by an expression (`decltype(&cudaFree)`,
 * `o(p, &cudaFree)`), or `cudaFree` alone after `,` or `=` (`f = cudaFree;`).
 * Not a declarator (`cudaError_t (*cudaFree)(void *)`) nor a macro's
 * argument (`LOAD(cudaFree)`), which may name something else. */
static int free_named_as_value(const sview *v, size_t i)
{
    static const char *const before_amp[] = {"(", ",", "=", "{", "return", "?", ":", NULL};
    static const char *const after[] = {")", ",", ";", "}", NULL};
    if (i < 2)
        return 0;
    if (is(v, i - 1, "&"))
        return in_words(v, i - 2, before_amp);
    return (is(v, i - 1, ",") || is(v, i - 1, "=")) && in_words(v, i + 1, after);
}

int rl_rewrite_frees(ctx *c)
{
    const sview *v = &c->v;
    if (c->nalloc == 0)
        return 0;
    int rc = rewrite_macro_frees(c);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i + 1 < v->n; i++) {
        const char *to = glue_free(c, v->src + tk(v, i)->off, tk(v, i)->len);
        /* a call (`::cudaFree(p)` too), or the function named as a value (a
         * deleter): the glue's free has its type */
        int global = i > 1 && is(v, i - 1, "::") && !ident(v, i - 2) && !is(v, i - 2, ">");
        if (!to ||
            (i > 0 && !global && (is(v, i - 1, "::") || is(v, i - 1, ".") || is(v, i - 1, "->"))) ||
            !(is(v, i + 1, "(") || free_named_as_value(v, i)))
            continue;
        if (!is(v, i + 1, "(") && c->nblocks != 0 && !rl_in_block(c, tk(v, i)->off))
            continue;
        if (c->nblocks == 0 || rl_in_block(c, tk(v, i)->off)) {
            rc = rl_add_edit(c, i, tk(v, i)->off, tk(v, i)->len, to);
            if (rc != 0)
                return rc;
            continue;
        }
        args a;
        rl_call_args(v, i + 1, &a);
        size_t last = a.n >= 1 ? rl_chain_last(v, a.first[0], a.last[0]) : v->n;
        if (last < v->n) {
            char *nm = cuco_strndup(v->src + tk(v, last)->off, tk(v, last)->len);
            if (nm && rl_name_seen(&c->symm_names, nm))
                rl_refuse(c, tk(v, i)->line, "%s(%s) of a symmetric buffer is in frozen code",
                          is(v, i, "ncclMemFree") ? "ncclMemFree" : "cudaFree", nm);
            free(nm);
        }
    }
    return 0;
}
