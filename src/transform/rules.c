/* rules.c: the rule route of the fast path. Reads a host-driven program with
 * the analysis lexer, rewrites each NCCL collective / point-to-point call in
 * place into the cuco_tx glue (same arguments, so the program's own error
 * checks, streams and synchronisation stay valid), makes the allocations that
 * feed a collective symmetric, inserts device-communicator setup/teardown,
 * and puts the glue and its knobs into an EVOLVE-BLOCK. Anything it cannot
 * rewrite is reported with its line and the program is refused as a whole.
 */
#include "cuco/transform.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/embedded.h"
#include "cuco/program.h"

/* ---- notes ---------------------------------------------------------------- */

int cuco_tx_notes_add(cuco_tx_notes *l, int line, const char *kind, const char *fmt, ...)
{
    cuco_tx_note *items = realloc(l->items, (l->n + 1) * sizeof(*items));
    if (!items)
        return CUCO_ENOMEM;
    l->items = items;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *kind_copy = cuco_strdup(kind);
    if (rc != 0 || !kind_copy) {
        cuco_buf_free(&b);
        free(kind_copy);
        return CUCO_ENOMEM;
    }
    l->items[l->n].line = line;
    l->items[l->n].kind = kind_copy;
    l->items[l->n].text = cuco_buf_detach(&b);
    l->n++;
    return 0;
}

void cuco_tx_notes_free(cuco_tx_notes *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].kind);
        free(l->items[i].text);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

size_t cuco_tx_notes_count(const cuco_tx_notes *l, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += strcmp(l->items[i].kind, kind) == 0;
    return n;
}

void cuco_tx_result_free(cuco_tx_result *r)
{
    free(r->program);
    r->program = NULL;
    cuco_tx_notes_free(&r->notes);
}

const char *cuco_transform_runtime(void)
{
    size_t n = 0;
    const unsigned char *t = cuco_embedded_find("src/transform/cuco_tx_runtime.cuh", &n);
    return t ? (const char *)t : NULL;
}

/* ---- token view ----------------------------------------------------------- */

/* The code tokens (comments and preprocessor lines left out) with their brace
 * depth, over one lexed text. */
typedef struct view {
    const char *src;
    cuco_lex lx;
    size_t *ix;  /* code token -> lexer token */
    int *depth;  /* brace depth before the token */
    int *scope;  /* the same, namespace and extern "C" braces left out (0: file scope) */
    size_t n;
} view;

static const cuco_tok *T(const view *v, size_t i);

static int view_open(view *v, const char *src, cuco_err *e)
{
    memset(v, 0, sizeof(*v));
    v->src = src;
    int rc = cuco_lex_run(&v->lx, src, strlen(src), e);
    if (rc != 0)
        return rc;
    v->ix = malloc((v->lx.ntoks + 1) * sizeof(size_t));
    v->depth = malloc((v->lx.ntoks + 1) * sizeof(int));
    v->scope = malloc((v->lx.ntoks + 1) * sizeof(int));
    /* per open brace: 1 when it opens a namespace or an extern "C" block */
    char *ns = malloc(v->lx.ntoks + 1);
    if (!v->ix || !v->depth || !v->scope || !ns) {
        free(ns);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int d = 0, sc = 0;
    for (size_t i = 0; i < v->lx.ntoks; i++) {
        const cuco_tok *t = &v->lx.toks[i];
        if (t->kind == CUCO_TOK_COMMENT || t->kind == CUCO_TOK_PREPROC)
            continue;
        v->ix[v->n] = i;
        v->depth[v->n] = d;
        v->scope[v->n] = sc;
        v->n++;
        if (t->kind == CUCO_TOK_PUNCT && t->len == 1 && src[t->off] == '{') {
            /* "namespace {", "namespace a::b {", "extern "C" {" */
            size_t k = v->n - 1;
            while (k > 0 && (T(v, k - 1)->kind == CUCO_TOK_IDENT || cuco_tok_is(&v->lx, T(v, k - 1), "::")) &&
                   !cuco_tok_is(&v->lx, T(v, k - 1), "namespace"))
                k--;
            int is_ns = (k > 0 && cuco_tok_is(&v->lx, T(v, k - 1), "namespace")) ||
                        (v->n >= 3 && T(v, v->n - 2)->kind == CUCO_TOK_STRING &&
                         cuco_tok_is(&v->lx, T(v, v->n - 3), "extern"));
            ns[d] = (char)is_ns;
            d++;
            sc += !is_ns;
        } else if (t->kind == CUCO_TOK_PUNCT && t->len == 1 && src[t->off] == '}' && d > 0) {
            d--;
            sc -= !ns[d];
        }
    }
    free(ns);
    return 0;
}

static void view_close(view *v)
{
    cuco_lex_free(&v->lx);
    free(v->ix);
    free(v->depth);
    free(v->scope);
}

static const cuco_tok *T(const view *v, size_t i) { return &v->lx.toks[v->ix[i]]; }
static int is(const view *v, size_t i, const char *s) { return i < v->n && cuco_tok_is(&v->lx, T(v, i), s); }
static int is_ident(const view *v, size_t i) { return i < v->n && T(v, i)->kind == CUCO_TOK_IDENT; }
static size_t tok_end(const view *v, size_t i) { return T(v, i)->off + T(v, i)->len; }

/* Index of the token closing the bracket opened at i (n when unbalanced). */
static size_t match_close(const view *v, size_t i)
{
    int d = 0;
    for (size_t j = i; j < v->n; j++) {
        if (is(v, j, "(") || is(v, j, "[") || is(v, j, "{"))
            d++;
        else if (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")) {
            if (--d == 0)
                return j;
        }
    }
    return v->n;
}

/* Arguments of the call whose "(" is at open: [first, last] token ranges. */
typedef struct args {
    size_t first[16], last[16];
    int n; /* -1: more than 16 or empty argument */
    size_t close;
} args;

static void call_args(const view *v, size_t open, args *a)
{
    a->n = 0;
    a->close = match_close(v, open);
    if (a->close >= v->n || a->close == open + 1)
        return;
    size_t start = open + 1;
    int d = 0;
    for (size_t j = open + 1; j <= a->close; j++) {
        int at_end = j == a->close;
        if (!at_end && (is(v, j, "(") || is(v, j, "[") || is(v, j, "{")))
            d++;
        else if (!at_end && (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")))
            d--;
        if ((at_end || (d == 0 && is(v, j, ","))) ) {
            if (a->n >= 16 || j == start) {
                a->n = -1;
                return;
            }
            a->first[a->n] = start;
            a->last[a->n] = j - 1;
            a->n++;
            start = j + 1;
        }
    }
}

static char *arg_text(const view *v, const args *a, int k)
{
    size_t s = T(v, a->first[k])->off;
    return cuco_strndup(v->src + s, tok_end(v, a->last[k]) - s);
}

/* The last identifier of the lvalue chain an argument starts with, after
 * casts and '&': "(void **)&s.gathered" -> gathered, "p.cache + off" -> cache,
 * "&buf[i]" -> buf, "ls[i].out" -> out, "ns::alloc" -> alloc. Returns the
 * token index or n. */
static size_t chain_last(const view *v, size_t first, size_t last)
{
    size_t j = first;
    while (j <= last) {
        if (is(v, j, "&") || is(v, j, "*")) {
            j++;
        } else if (is(v, j, "(")) {
            size_t c = match_close(v, j);
            if (c >= last)
                j++; /* a parenthesized expression: look inside */
            else if (c + 1 <= last && (is_ident(v, c + 1) || is(v, c + 1, "&") || is(v, c + 1, "(")))
                j = c + 1; /* a C cast */
            else
                j++;
        } else if (is(v, j, "static_cast") || is(v, j, "reinterpret_cast") ||
                   is(v, j, "const_cast")) {
            while (j <= last && !is(v, j, "("))
                j++;
            j++;
        } else {
            break;
        }
    }
    if (j > last || !is_ident(v, j))
        return v->n;
    /* a member of an array element is that member: "layers[i].out" -> out */
    size_t end = j;
    for (;;) {
        size_t k = end + 1;
        while (k <= last && is(v, k, "[")) {
            size_t c = match_close(v, k);
            if (c > last)
                break;
            k = c + 1;
        }
        if (k + 1 <= last && (is(v, k, ".") || is(v, k, "->") || (k == end + 1 && is(v, k, "::"))) &&
            is_ident(v, k + 1)) {
            end = k + 1;
            continue;
        }
        break;
    }
    return end;
}

/* ---- edits ---------------------------------------------------------------- */

typedef struct edit {
    size_t off, len;
    char *text;     /* owned */
    int wrap;       /* 1: its statement lines get EVOLVE-BLOCK markers (program without blocks) */
    size_t stmt_lo, stmt_hi; /* statement bytes, for wrap */
    long seq;       /* order among edits at the same offset */
} edit;

typedef struct ctx {
    const char *file;
    view v;
    cuco_block *blocks;
    size_t nblocks;
    edit *edits;
    size_t nedits;
    cuco_tx_result *r;
    cuco_strlist symm_names;  /* buffer names resolved to symmetric allocations */
    size_t *alloc_sites;      /* cudaMalloc tokens made symmetric */
    size_t nalloc;
} ctx;

static int line_of(const ctx *c, size_t i) { return T(&c->v, i)->line; }

static int in_block(const ctx *c, size_t off)
{
    for (size_t b = 0; b < c->nblocks; b++)
        if (off >= c->blocks[b].body_start && off < c->blocks[b].body_end)
            return 1;
    return 0;
}

static int refuse(ctx *c, int line, const char *fmt, const char *a, const char *b)
{
    c->r->refused = 1;
    return cuco_tx_notes_add(&c->r->notes, line, "refused", fmt, a ? a : "", b ? b : "");
}

/* Statement extent around token i: after the previous ';', '{' or '}' to the
 * next ';' at the same nesting. */
static void stmt_span(const ctx *c, size_t i, size_t *lo, size_t *hi)
{
    const view *v = &c->v;
    size_t s = i;
    while (s > 0 && !is(v, s - 1, ";") && !is(v, s - 1, "{") && !is(v, s - 1, "}"))
        s--;
    size_t e2 = i;
    int d = 0;
    while (e2 < v->n) {
        if (is(v, e2, "(") || is(v, e2, "["))
            d++;
        else if (is(v, e2, ")") || is(v, e2, "]"))
            d--;
        else if (d <= 0 && (is(v, e2, ";") || is(v, e2, "{") || is(v, e2, "}")))
            break;
        e2++;
    }
    if (e2 >= v->n)
        e2 = v->n - 1;
    *lo = T(v, s)->off;
    *hi = tok_end(v, e2);
}

static int add_edit(ctx *c, size_t tok_for_stmt, size_t off, size_t len, const char *text)
{
    edit *ed = realloc(c->edits, (c->nedits + 1) * sizeof(*ed));
    if (!ed)
        return CUCO_ENOMEM;
    c->edits = ed;
    edit *x = &c->edits[c->nedits];
    x->off = off;
    x->len = len;
    x->text = cuco_strdup(text);
    if (!x->text)
        return CUCO_ENOMEM;
    x->wrap = c->nblocks == 0;
    x->seq = (long)c->nedits;
    stmt_span(c, tok_for_stmt, &x->stmt_lo, &x->stmt_hi);
    c->nedits++;
    return 0;
}

/* An edit of token i must be inside the blocks when the program has some. */
static int editable(ctx *c, size_t i, const char *what)
{
    if (c->nblocks == 0 || in_block(c, T(&c->v, i)->off))
        return 1;
    refuse(c, line_of(c, i), "%s is outside the EVOLVE-BLOCKs (frozen code): rewriting it would edit the harness%s",
           what, NULL);
    return 0;
}

/* ---- symmetric buffers ---------------------------------------------------- */

static int name_seen(const cuco_strlist *l, const char *s)
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
    if (!editable(c, tok, "the allocation of a communicated buffer"))
        return 0;
    size_t *s = realloc(c->alloc_sites, (c->nalloc + 1) * sizeof(*s));
    if (!s)
        return -1;
    c->alloc_sites = s;
    c->alloc_sites[c->nalloc++] = tok;
    const cuco_tok *t = T(&c->v, tok);
    if (add_edit(c, tok, t->off, t->len, "cuco_tx::symm_malloc") != 0)
        return -1;
    cuco_tx_notes_add(&c->r->notes, t->line, "symmetric",
                      "%.*s -> cuco_tx::symm_malloc (symmetric window) for %s", (int)t->len,
                      c->v.src + t->off, why);
    return 1;
}

/* Allocations in the body of function fname (a pointer-returning allocator). */
static int resolve_function(ctx *c, const char *fname, const char *why)
{
    const view *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (v->scope[i] != 0 || !cuco_tok_is(&v->lx, T(v, i), fname) || !is(v, i + 1, "("))
            continue;
        size_t close = match_close(v, i + 1);
        if (close + 1 >= v->n || !is(v, close + 1, "{"))
            continue; /* a call or prototype, not the definition */
        size_t body_end = match_close(v, close + 1);
        for (size_t j = close + 2; j < body_end; j++) {
            if (is(v, j, "cudaMalloc") && is(v, j + 1, "(")) {
                int rc = add_alloc(c, j, why);
                if (rc < 0)
                    return rc;
                found += rc > 0;
            }
        }
    }
    return found;
}

static int resolve_buffer(ctx *c, const char *name, const char *why, int depth);

/* Index of the parameter called `name` in the parameter list opened at
 * token open, or -1 ("float *dst", "const T *x = nullptr", "float v[]"). */
static int param_index(const view *v, size_t open, const char *name)
{
    args p;
    call_args(v, open, &p);
    for (int k = 0; k < p.n; k++) {
        size_t last = p.last[k];
        for (size_t j = p.first[k]; j <= p.last[k]; j++)
            if (is(v, j, "=")) {
                last = j - 1;
                break;
            }
        while (last > p.first[k] && is(v, last, "]")) {
            size_t j = last;
            while (j > p.first[k] && !is(v, j, "["))
                j--;
            last = j - 1;
        }
        if (last > p.first[k] && is_ident(v, last) && cuco_tok_is(&v->lx, T(v, last), name))
            return k;
    }
    return -1;
}

/* A buffer that is a parameter of a function (at file or namespace scope) is
 * the argument its callers pass: "static void exchange(float *dst, ...)"
 * called as "exchange(nxt, ...)" resolves dst through nxt. */
static int resolve_params(ctx *c, const char *name, const char *why, int depth)
{
    const view *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (v->scope[i] != 0 || !is_ident(v, i) || !is(v, i + 1, "("))
            continue;
        size_t close = match_close(v, i + 1);
        if (close + 1 >= v->n || !is(v, close + 1, "{"))
            continue; /* not a definition */
        int k = param_index(v, i + 1, name);
        if (k < 0)
            continue;
        for (size_t j = 0; j + 1 < v->n; j++) {
            if (j == i || T(v, j)->kind != CUCO_TOK_IDENT || T(v, j)->len != T(v, i)->len ||
                memcmp(v->src + T(v, j)->off, v->src + T(v, i)->off, T(v, i)->len) != 0 || !is(v, j + 1, "("))
                continue;
            /* member calls, and other declarations ("void exchange(") are not calls */
            if (j > 0 && (is(v, j - 1, ".") || is(v, j - 1, "->") ||
                          (is_ident(v, j - 1) && !is(v, j - 1, "return"))))
                continue;
            args a;
            call_args(v, j + 1, &a);
            if (a.n <= k)
                continue;
            size_t last = chain_last(v, a.first[k], a.last[k]);
            if (last >= v->n || cuco_tok_is(&v->lx, T(v, last), name))
                continue;
            char *arg = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
            if (!arg)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, arg, why, depth + 1);
            free(arg);
            if (rc < 0)
                return rc;
            found += rc;
        }
    }
    return found;
}

/* Finds the allocation(s) behind buffer name; returns how many were made
 * symmetric (0: none found), negative on memory failure. */
static int resolve_buffer(ctx *c, const char *name, const char *why, int depth)
{
    const view *v = &c->v;
    if (depth > 8 || name_seen(&c->symm_names, name))
        return name_seen(&c->symm_names, name) ? 1 : 0;
    if (cuco_strlist_push(&c->symm_names, name) != 0)
        return CUCO_ENOMEM;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if ((is(v, i, "cudaMalloc") || is(v, i, "cudaMallocAsync")) && is(v, i + 1, "(")) {
            args a;
            call_args(v, i + 1, &a);
            if (a.n < 1)
                continue;
            size_t last = chain_last(v, a.first[0], a.last[0]);
            if (last < v->n && cuco_tok_is(&v->lx, T(v, last), name)) {
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
            call_args(v, i + 1, &a);
            if (a.n != 2)
                continue;
            size_t x = chain_last(v, a.first[0], a.last[0]), y = chain_last(v, a.first[1], a.last[1]);
            size_t other = v->n;
            if (x < v->n && cuco_tok_is(&v->lx, T(v, x), name))
                other = y;
            else if (y < v->n && cuco_tok_is(&v->lx, T(v, y), name))
                other = x;
            if (other >= v->n)
                continue;
            char *oname = cuco_strndup(v->src + T(v, other)->off, T(v, other)->len);
            if (!oname)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, oname, why, depth + 1);
            free(oname);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* name = RHS;  (not ==, not a declaration of a function parameter) */
        if (!cuco_tok_is(&v->lx, T(v, i), name) || !is(v, i + 1, "="))
            continue;
        size_t rs = i + 2, re = rs;
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
        if (re == rs)
            continue;
        if (is(v, rs, "nullptr") || is(v, rs, "NULL") || T(v, rs)->kind == CUCO_TOK_NUMBER)
            continue;
        size_t base = chain_last(v, rs, re - 1);
        if (base >= v->n)
            continue;
        char *bname = cuco_strndup(v->src + T(v, base)->off, T(v, base)->len);
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
        if (after < re && is(v, after, "(") && base == chain_last(v, base, base))
            rc = resolve_function(c, bname, why); /* name = (T *)alloc_fn(...) */
        else
            rc = resolve_buffer(c, bname, why, depth + 1);
        free(bname);
        if (rc < 0)
            return rc;
        found += rc;
    }
    int rc = resolve_params(c, name, why, depth);
    return rc < 0 ? rc : found + rc;
}

static int in_list(const char *const *l, const view *v, size_t i);

/* The first call of another allocator (managed, pooled, host memory...)
 * whose first argument names `name`; its token index, or n. */
static size_t other_allocation(const ctx *c, const char *name)
{
    static const char *const others[] = {"cudaMallocManaged", "cudaMallocFromPoolAsync",
                                         "cudaMallocHost",    "cudaHostAlloc",   "cudaMallocPitch",
                                         "ncclMemAlloc",      "cuMemAlloc",      NULL};
    const view *v = &c->v;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!is(v, i + 1, "(") || !in_list(others, v, i))
            continue;
        args a;
        call_args(v, i + 1, &a);
        if (a.n < 1)
            continue;
        size_t last = chain_last(v, a.first[0], a.last[0]);
        if (last < v->n && cuco_tok_is(&v->lx, T(v, last), name))
            return i;
    }
    return v->n;
}

/* Makes the buffer of argument k of the call symmetric, or refuses. */
static int need_symmetric(ctx *c, const args *a, int k, size_t call_tok, const char *call)
{
    const view *v = &c->v;
    size_t last = chain_last(v, a->first[k], a->last[k]);
    char *text = arg_text(v, a, k);
    if (!text)
        return CUCO_ENOMEM;
    if (last >= v->n) {
        refuse(c, line_of(c, call_tok), "%s: cannot tell which buffer '%s' is", call, text);
        free(text);
        return 0;
    }
    char *name = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
    char *why = cuco_sprintf("'%s' of %s at line %d", text, call, line_of(c, call_tok));
    int rc = (!name || !why) ? CUCO_ENOMEM : resolve_buffer(c, name, why, 0);
    if (rc == 0) {
        size_t at = name ? other_allocation(c, name) : v->n;
        if (at < v->n) {
            char *detail = cuco_sprintf("'%s' comes from %.*s at line %d, which cannot back a symmetric "
                                        "window (only cudaMalloc allocations are rewritten to "
                                        "ncclMemAlloc)",
                                        text, (int)T(v, at)->len, v->src + T(v, at)->off, line_of(c, at));
            refuse(c, line_of(c, call_tok), "%s: buffer %s", call, detail ? detail : "?");
            free(detail);
        } else {
            refuse(c, line_of(c, call_tok), "%s: cannot find the cudaMalloc of buffer '%s'", call, text);
        }
    }
    free(name);
    free(why);
    free(text);
    return rc < 0 ? rc : 0;
}

/* ---- calls ---------------------------------------------------------------- */

static const char *const unsupported_calls[] = {"ncclReduce", "ncclAllToAllv", "ncclAlltoAllv", NULL};

/* Collectives the runtime builds from point-to-point: name, replacement,
 * argument count, index of the receive buffer (symmetric). */
typedef struct p2p_collective {
    const char *name, *to;
    int nargs, recv_arg;
} p2p_collective;
static const p2p_collective p2p_collectives[] = {
    {"ncclAlltoAll", "cuco_tx::all_to_all", 6, 1}, {"ncclAllToAll", "cuco_tx::all_to_all", 6, 1},
    {"ncclBroadcast", "cuco_tx::broadcast", 7, 1}, {"ncclBcast", "cuco_tx::bcast", 6, 0},
    {"ncclGather", "cuco_tx::gather", 7, 1},       {"ncclScatter", "cuco_tx::scatter", 7, 1},
    {NULL, NULL, 0, 0}};
static const char *const host_collectives[] = {
    "ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclSend", "ncclRecv", "ncclBroadcast",
    "ncclBcast", "ncclReduce", "ncclAllToAll", "ncclAlltoAll", "ncclAllToAllv", "ncclAlltoAllv",
    "ncclGather", "ncclScatter", NULL};
static const char *const device_dtypes[] = {"ncclFloat32", "ncclFloat", "ncclFloat16", "ncclHalf",
                                            "ncclBfloat16", "ncclInt32", "ncclInt", NULL};
static const char *const float_dtypes[] = {"ncclFloat32", "ncclFloat", "ncclFloat16", "ncclHalf", "ncclBfloat16", NULL};

static const p2p_collective *p2p_collective_of(const char *name)
{
    for (const p2p_collective *p = p2p_collectives; p->name; p++)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}

static int in_list(const char *const *l, const view *v, size_t i)
{
    for (; *l; l++)
        if (cuco_tok_is(&v->lx, T(v, i), *l))
            return 1;
    return 0;
}

/* A literal NCCL dtype the device reductions do not implement. */
static void check_reduce_args(ctx *c, const args *a, size_t i, const char *call)
{
    const view *v = &c->v;
    size_t dt = a->first[3], op = a->first[4];
    if (a->first[3] == a->last[3] && is_ident(v, dt) && strncmp(v->src + T(v, dt)->off, "nccl", 4) == 0 &&
        !in_list(device_dtypes, v, dt)) {
        char *t = arg_text(v, a, 3);
        refuse(c, line_of(c, i), "%s: data type %s has no device reduction in device/", call, t);
        free(t);
    }
    int literal_op = a->first[4] == a->last[4];
    if (literal_op && is(v, op, "ncclAvg")) {
        /* a sum, then a scale by 1/nranks: floating types only */
        if (!(a->first[3] == a->last[3] && in_list(float_dtypes, v, dt))) {
            char *t = arg_text(v, a, 3);
            refuse(c, line_of(c, i), "%s: ncclAvg of data type '%s': the device average is implemented for "
                                     "literal floating types only (float, half, bf16)", call, t);
            free(t);
        }
    } else if (!(literal_op && is(v, op, "ncclSum"))) {
        char *t = arg_text(v, a, 4);
        refuse(c, line_of(c, i), "%s: reduction '%s' is not the literal ncclSum or ncclAvg (device/ only sums)",
               call, t);
        free(t);
    }
}

typedef struct p2p_call {
    size_t tok;
    int is_send;
    int group; /* 0: none */
    int top;   /* index of the enclosing top-level function's first token */
    args a;
} p2p_call;

static size_t top_start(const view *v, size_t i)
{
    while (i > 0 && v->scope[i] > 0)
        i--;
    return i;
}

/* Receives need their buffer in a symmetric window (the sender stores into
 * it); sends need nothing: the receiver posts where its data goes. */
static int rewrite_p2p(ctx *c, p2p_call *calls, size_t n)
{
    const view *v = &c->v;
    for (size_t i = 0; i < n; i++) {
        p2p_call *s = &calls[i];
        int rc = 0;
        if (!s->is_send)
            rc = need_symmetric(c, &s->a, 0, s->tok, "ncclRecv");
        if (rc == 0)
            rc = add_edit(c, s->tok, T(v, s->tok)->off, T(v, s->tok)->len,
                          s->is_send ? "cuco_tx::send" : "cuco_tx::recv");
        if (rc == 0)
            rc = cuco_tx_notes_add(&c->r->notes, line_of(c, s->tok), "rewrite", "%s",
                                   s->is_send ? "ncclSend -> cuco_tx::send (waits for the receiver to "
                                                "post its buffer, stores into it over NVLink, signals)"
                                              : "ncclRecv -> cuco_tx::recv (posts its buffer to the "
                                                "source, then waits for the source's signal)");
        if (rc != 0)
            return rc < 0 ? rc : CUCO_ENOMEM;
    }
    return 0;
}

/* Stream capture into a CUDA graph: a graph replays the kernels with the
 * arguments they had when captured, while the runtime's point-to-point
 * protocol numbers each call on the host (and sets a communicator up on its
 * first call), so captured device calls would replay stale sequence numbers. */
static const char *const capture_calls[] = {"cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph",
                                            "cudaStreamBeginCapture_v2", NULL};

static int scan_calls(ctx *c)
{
    const view *v = &c->v;
    p2p_call *p2p = NULL;
    size_t np2p = 0;
    int group = 0, group_depth = 0, next_group = 0, rc = 0;
    int capture_line = 0, collective_calls = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (!is_ident(v, i) || (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"))))
            continue;
        int called = is(v, i + 1, "(");
        const cuco_tok *t = T(v, i);
        if (called && !capture_line && in_list(capture_calls, v, i))
            capture_line = t->line;
        if (called && in_list(host_collectives, v, i))
            collective_calls++;
        char *name = cuco_strndup(v->src + t->off, t->len);
        if (!name)
            return CUCO_ENOMEM;
        if (in_list(host_collectives, v, i) && !called) {
            refuse(c, t->line, "%s is used but not called (a function pointer or a macro argument?)%s", name, NULL);
        } else if (in_list(unsupported_calls, v, i)) {
            refuse(c, t->line, "%s: device/ has no device-side %s; left host-driven, so the program is not transformed",
                   name, name);
        } else if (!called) {
            /* nothing */
        } else if (strcmp(name, "ncclGroupStart") == 0 || strcmp(name, "ncclGroupEnd") == 0) {
            int start = name[9] == 'S';
            if (start && group_depth++ == 0)
                group = ++next_group;
            else if (!start && group_depth > 0 && --group_depth == 0)
                group = 0;
            if (editable(c, i, name)) {
                rc = add_edit(c, i, t->off, t->len, start ? "cuco_tx::group_start" : "cuco_tx::group_end");
                if (rc == 0)
                    rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                                           "%s -> cuco_tx::%s (groups the device point-to-point calls)",
                                           name, start ? "group_start" : "group_end");
            }
        } else if (strcmp(name, "ncclAllGather") == 0 || strcmp(name, "ncclReduceScatter") == 0 ||
                   strcmp(name, "ncclAllReduce") == 0) {
            args a;
            call_args(v, i + 1, &a);
            int ag = name[4] == 'A' && name[7] == 'G', rs = name[4] == 'R';
            int want = ag ? 6 : 7;
            if (a.n != want) {
                refuse(c, t->line, "%s: expected its %s arguments", name, ag ? "6" : "7");
            } else if (editable(c, i, name)) {
                if (!ag)
                    check_reduce_args(c, &a, i, name);
                rc = need_symmetric(c, &a, rs ? 0 : 1, i, name);
                const char *to = ag ? "cuco_tx::all_gather" : rs ? "cuco_tx::reduce_scatter" : "cuco_tx::all_reduce";
                if (rc == 0)
                    rc = add_edit(c, i, t->off, t->len, to);
                if (rc == 0)
                    rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                                           "%s -> %s (device/ LSA kernel on the same stream)", name, to);
            }
        } else if (p2p_collective_of(name)) {
            const p2p_collective *pc = p2p_collective_of(name);
            args a;
            call_args(v, i + 1, &a);
            if (a.n != pc->nargs) {
                char nbuf[16];
                snprintf(nbuf, sizeof nbuf, "%d", pc->nargs);
                refuse(c, t->line, "%s: expected its %s arguments", name, nbuf);
            } else if (editable(c, i, name)) {
                rc = need_symmetric(c, &a, pc->recv_arg, i, name);
                if (rc == 0)
                    rc = add_edit(c, i, t->off, t->len, pc->to);
                if (rc == 0)
                    rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                                           "%s -> %s (device point-to-point puts into the receivers' "
                                           "symmetric buffers)",
                                           name, pc->to);
            }
        } else if (strcmp(name, "ncclSend") == 0 || strcmp(name, "ncclRecv") == 0) {
            p2p_call pc;
            pc.tok = i;
            pc.is_send = name[4] == 'S';
            pc.group = group;
            pc.top = (int)top_start(v, i);
            call_args(v, i + 1, &pc.a);
            if (pc.a.n != 6) {
                refuse(c, t->line, "%s: expected its 6 arguments%s", name, NULL);
            } else if (editable(c, i, name)) {
                p2p_call *grown = realloc(p2p, (np2p + 1) * sizeof(*grown));
                if (!grown)
                    rc = CUCO_ENOMEM;
                else {
                    p2p = grown;
                    p2p[np2p++] = pc;
                }
            }
        } else if (strcmp(name, "ncclCommInitAll") == 0) {
            refuse(c, t->line,
                   "%s: one process drives several GPUs; the device runtime keeps one device "
                   "communicator per process (one rank per process, e.g. under mpirun)%s",
                   name, NULL);
        } else if (strcmp(name, "ncclCommInitRank") == 0 || strcmp(name, "ncclCommInitRankConfig") == 0 ||
                   strcmp(name, "ncclCommSplit") == 0) {
            args a;
            call_args(v, i + 1, &a);
            int k = strcmp(name, "ncclCommSplit") == 0 ? 3 : 0;
            if (a.n > k && (c->nblocks == 0 || in_block(c, t->off))) {
                char *comm = arg_text(v, &a, k);
                size_t lo, hi;
                stmt_span(c, i, &lo, &hi);
                char *ins = comm ? cuco_sprintf(" cuco_tx::comm_setup(*(%s));", comm) : NULL;
                /* the argument is a pointer to the communicator */
                rc = ins ? add_edit(c, i, hi, 0, ins) : CUCO_ENOMEM;
                if (rc == 0)
                    rc = cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                           "device communicator created after %s", name);
                free(comm);
                free(ins);
            } else {
                cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                  "%s is in frozen code: the device communicator is created at the "
                                  "first device collective",
                                  name);
            }
        } else if (strcmp(name, "ncclCommDestroy") == 0 || strcmp(name, "ncclCommAbort") == 0) {
            args a;
            call_args(v, i + 1, &a);
            if (a.n == 1 && (c->nblocks == 0 || in_block(c, t->off))) {
                char *comm = arg_text(v, &a, 0);
                size_t lo, hi;
                stmt_span(c, i, &lo, &hi);
                char *ins = comm ? cuco_sprintf("cuco_tx::comm_teardown(%s); ", comm) : NULL;
                rc = ins ? add_edit(c, i, lo, 0, ins) : CUCO_ENOMEM;
                if (rc == 0)
                    rc = cuco_tx_notes_add(&c->r->notes, t->line, "teardown",
                                           "device communicator and windows released before %s", name);
                free(comm);
                free(ins);
            } else {
                cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                  "%s is in frozen code: windows and the device communicator are "
                                  "released by the last symmetric free",
                                  name);
            }
        }
        free(name);
        if (rc != 0)
            break;
    }
    if (rc == 0 && capture_line && collective_calls)
        refuse(c, capture_line,
               "stream capture into a CUDA graph: a graph replays its kernels with the arguments "
               "of the capture, while the device runtime numbers point-to-point calls and sets "
               "communicators up on the host, so replays would reuse stale state; capture only "
               "the computation, or run without graphs%s%s",
               NULL, NULL);
    if (rc == 0)
        rc = rewrite_p2p(c, p2p, np2p);
    free(p2p);
    return rc;
}

/* cudaFree inside the blocks -> symm_free (plain pointers fall back to
 * cudaFree); a frozen cudaFree of a symmetric buffer is refused. */
static int rewrite_frees(ctx *c)
{
    const view *v = &c->v;
    if (c->nalloc == 0)
        return 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        int async = is(v, i, "cudaFreeAsync");
        if (!(async || is(v, i, "cudaFree")) || !is(v, i + 1, "(") || (i > 0 && is(v, i - 1, "::")))
            continue;
        if (c->nblocks == 0 || in_block(c, T(v, i)->off)) {
            int rc = add_edit(c, i, T(v, i)->off, T(v, i)->len,
                              async ? "cuco_tx::symm_free_async" : "cuco_tx::symm_free");
            if (rc != 0)
                return rc;
            continue;
        }
        args a;
        call_args(v, i + 1, &a);
        size_t last = a.n >= 1 ? chain_last(v, a.first[0], a.last[0]) : v->n;
        if (last < v->n) {
            char *nm = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
            if (nm && name_seen(&c->symm_names, nm))
                refuse(c, T(v, i)->line, "cudaFree(%s) of a symmetric buffer is in frozen code%s", nm, NULL);
            free(nm);
        }
    }
    return 0;
}

static int refuse_macros(ctx *c)
{
    const cuco_lex *lx = &c->v.lx;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind != CUCO_TOK_PREPROC)
            continue;
        for (const char *const *n = host_collectives; *n; n++) {
            size_t nl = strlen(*n);
            for (size_t k = 0; k + nl <= t->len; k++) {
                const char *p = lx->src + t->off + k;
                if (memcmp(p, *n, nl) == 0 && (k + nl == t->len || !(p[nl] == '_' || ((p[nl] | 32) >= 'a' && (p[nl] | 32) <= 'z')))) {
                    c->r->refused = 1;
                    cuco_tx_notes_add(&c->r->notes, t->line, "refused",
                                      "%s inside a preprocessor directive (a macro) cannot be rewritten in place",
                                      *n);
                    break;
                }
            }
        }
    }
    return 0;
}

/* ---- assembly ------------------------------------------------------------- */

static int cmp_edit(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static size_t line_start(const char *s, size_t off)
{
    while (off > 0 && s[off - 1] != '\n')
        off--;
    return off;
}

static size_t line_after(const char *s, size_t off)
{
    while (s[off] && s[off] != '\n')
        off++;
    return s[off] ? off + 1 : off;
}

/* Where the glue goes: the start of the first block's body (which must be at
 * file scope), or after the last top-level #include. */
static int glue_position(ctx *c, size_t *pos, int *wrap)
{
    const view *v = &c->v;
    if (c->nblocks > 0) {
        size_t at = c->blocks[0].body_start;
        for (size_t i = 0; i < v->n; i++) {
            if (T(v, i)->off >= at) {
                if (v->depth[i] != 0)
                    return refuse(c, c->blocks[0].start_line,
                                  "the first EVOLVE-BLOCK is not at file scope: the device library "
                                  "include and the glue cannot go into it%s%s",
                                  NULL, NULL),
                           1;
                break;
            }
        }
        *pos = at;
        *wrap = 0;
        return 0;
    }
    size_t after = 0;
    const cuco_lex *lx = &v->lx;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind == CUCO_TOK_PREPROC && t->dir_len == 7 && memcmp(lx->src + t->dir_off, "include", 7) == 0)
            after = line_after(lx->src, t->off + t->len - (t->len > 0));
    }
    *pos = after;
    *wrap = 1;
    return 0;
}

static int assemble(ctx *c, const char *text)
{
    size_t pos;
    int wrap;
    if (glue_position(c, &pos, &wrap) != 0 || c->r->refused)
        return 0;
    const char *glue = cuco_transform_runtime();
    if (!glue)
        return CUCO_EINVAL;
    cuco_buf g = CUCO_BUF_INIT;
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-START\n");
    cuco_buf_puts(&g, glue);
    if (g.len && g.data[g.len - 1] != '\n')
        cuco_buf_putc(&g, '\n');
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-END\n");
    /* line ranges to wrap (program without blocks), merged */
    size_t nr = 0;
    size_t (*ranges)[2] = malloc((c->nedits + 1) * sizeof(*ranges));
    if (!ranges) {
        cuco_buf_free(&g);
        return CUCO_ENOMEM;
    }
    for (size_t i = 0; i < c->nedits; i++) {
        if (!c->edits[i].wrap)
            continue;
        ranges[nr][0] = line_start(text, c->edits[i].stmt_lo);
        ranges[nr][1] = line_after(text, c->edits[i].stmt_hi > 0 ? c->edits[i].stmt_hi - 1 : 0);
        nr++;
    }
    /* merge overlapping or touching ranges until none is left (small n) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < nr; i++)
            for (size_t j = 0; j < nr; j++)
                if (i != j && ranges[i][1] > ranges[i][0] && ranges[j][1] > ranges[j][0] &&
                    ranges[i][0] <= ranges[j][1] && ranges[j][0] <= ranges[i][1]) {
                    if (ranges[j][0] < ranges[i][0])
                        ranges[i][0] = ranges[j][0];
                    if (ranges[j][1] > ranges[i][1])
                        ranges[i][1] = ranges[j][1];
                    ranges[j][0] = ranges[j][1] = 0;
                    changed = 1;
                }
    }
    int rc = 0;
    for (size_t i = 0; i < nr && rc == 0; i++) {
        if (ranges[i][1] <= ranges[i][0])
            continue;
        rc = add_edit(c, 0, ranges[i][0], 0, "// EVOLVE-BLOCK-START\n");
        if (rc == 0)
            rc = add_edit(c, 0, ranges[i][1], 0,
                          text[ranges[i][1] - 1] != '\n' ? "\n// EVOLVE-BLOCK-END\n"
                                                         : "// EVOLVE-BLOCK-END\n");
    }
    free(ranges);
    if (rc == 0)
        rc = add_edit(c, 0, pos, 0, cuco_buf_str(&g));
    if (rc == 0)
        c->edits[c->nedits - 1].seq = -1; /* the glue goes before a marker at the same place */
    cuco_buf_free(&g);
    if (rc != 0)
        return rc;
    /* insertions at the same offset: markers end before code starts; a START
     * marker at a line start goes before the glue; stable otherwise */
    if (c->nedits > 1)
        qsort(c->edits, c->nedits, sizeof(*c->edits), cmp_edit);
    cuco_buf out = CUCO_BUF_INIT;
    size_t at = 0;
    for (size_t i = 0; i < c->nedits; i++) {
        edit *x = &c->edits[i];
        if (x->off < at)
            continue; /* overlapping edit: cannot happen with token-level edits */
        cuco_buf_append(&out, text + at, x->off - at);
        cuco_buf_puts(&out, x->text);
        at = x->off + x->len;
    }
    cuco_buf_puts(&out, text + at);
    c->r->program = cuco_buf_detach(&out);
    return c->r->program ? 0 : CUCO_ENOMEM;
}

int cuco_transform_rules(const char *file_name, const char *text, cuco_tx_result *r, cuco_err *e)
{
    memset(r, 0, sizeof(*r));
    ctx c;
    memset(&c, 0, sizeof(c));
    c.file = file_name;
    c.r = r;
    int rc = cuco_program_blocks(text, &c.blocks, &c.nblocks, e);
    if (rc != 0) {
        if (!e->file)
            cuco_err_prefix(e, "%s", file_name);
        return rc;
    }
    rc = view_open(&c.v, text, e);
    if (rc == 0)
        rc = refuse_macros(&c);
    if (rc == 0)
        rc = scan_calls(&c);
    if (rc == 0)
        rc = rewrite_frees(&c);
    if (rc == 0 && cuco_tx_notes_count(&r->notes, "rewrite") == 0 && !r->refused) {
        r->refused = 1;
        cuco_tx_notes_add(&r->notes, 0, "refused", "no NCCL collective or point-to-point call found: nothing to transform");
    }
    if (rc == 0 && !r->refused)
        rc = assemble(&c, text);
    if (rc == 0 && r->refused) {
        free(r->program);
        r->program = NULL;
    }
    if (rc == CUCO_ENOMEM)
        cuco_err_set(e, rc, "out of memory");
    else if (rc == CUCO_EINVAL && !e->code)
        cuco_err_set(e, rc, "the cuco_tx glue is not embedded in this build");
    view_close(&c.v);
    for (size_t i = 0; i < c.nedits; i++)
        free(c.edits[i].text);
    free(c.edits);
    free(c.blocks);
    free(c.alloc_sites);
    cuco_strlist_free(&c.symm_names);
    return rc;
}
