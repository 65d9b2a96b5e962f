/* scan_macros.c: what a macro of the file reaches when a statement uses it
 * (scan_int.h: scan_macro_reach). A statement names the variables in its
 * own text, but a macro's replacement may name more (`#define USE_Y
 * k<<<1, 32, 0, s>>>(y, n)` reads y), leave the function (`if (e) return
 * e;`), use another macro, or paste tokens into names no text shows (`#x`
 * only quotes its argument). */
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"
#include "tx_common.h"

enum { MACRO_DEPTH = 4 };

static const char *const exit_words[] = {"return", "break", "continue", "goto", "throw", NULL};
static int word_in(const char *w, size_t len, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == len && memcmp(*list, w, len) == 0)
            return 1;
    return 0;
}

/* One #define of the file or of the program's headers: its name, its
 * parameter list [params, body) (empty for an object-like macro) and its
 * replacement [body, end); count: how many #defines of that name there are
 * (#undef and #define again, #ifdef branches), the first one kept. */
typedef struct macro_def {
    const char *name;
    size_t len;
    const char *params, *body, *end;
    int count;
} macro_def;

/* Every macro of the view, made once (sview's macro memo) and looked up by
 * name: a statement's every name is looked up, and a scan of the lexed file
 * for each of them cost more than the rest of the transform. */
typedef struct macro_index {
    macro_def *defs;
    size_t n;
} macro_index;

static void macro_index_free(void *p)
{
    macro_index *ix = p;
    if (ix)
        free(ix->defs);
    free(ix);
}

static macro_def *def_named(const macro_index *ix, const char *w, size_t len)
{
    for (size_t i = 0; i < ix->n; i++)
        if (ix->defs[i].len == len && memcmp(ix->defs[i].name, w, len) == 0)
            return &ix->defs[i];
    return NULL;
}

/* The #defines of lx into ix, after those already there. */
static int index_lex(macro_index *ix, const cuco_lex *lx)
{
    for (size_t k = 0; k < lx->ntoks; k++) {
        const cuco_tok *t = &lx->toks[k];
        if (!cuco_tok_directive(lx->src, t, "define"))
            continue;
        const char *e = lx->src + t->off + t->len;
        size_t len;
        const char *name = cuco_tx_define_name(lx->src + t->dir_off + 6, e, &len), *q = name + len;
        if (len == 0)
            continue;
        macro_def *d = def_named(ix, name, len);
        if (d) {
            d->count++;
            continue;
        }
        macro_def *grown = realloc(ix->defs, (ix->n + 1) * sizeof(*grown));
        if (!grown)
            return CUCO_ENOMEM;
        ix->defs = grown;
        d = &ix->defs[ix->n++];
        *d = (macro_def){.name = name, .len = len, .params = q, .end = e, .count = 1};
        if (q < e && *q == '(')
            while (q < e && *q != ')')
                q++;
        d->body = q < e && *q == ')' ? q + 1 : q;
    }
    return 0;
}

/* The view's macros, the file's first, then the program's headers'. */
static const macro_index *macro_index_of(const sview *v)
{
    struct sview_memo *m = v->macro_memo;
    if (!m->data) {
        macro_index *ix = calloc(1, sizeof(*ix));
        if (!ix || index_lex(ix, &v->lx) != 0 ||
            (v->has_macros && index_lex(ix, &v->macros) != 0)) {
            macro_index_free(ix);
            return NULL;
        }
        m->data = ix;
        m->free_data = macro_index_free;
    }
    return m->data;
}

/* The first #define of the macro named w (len bytes), in the file, else in
 * the program's headers: its replacement [*body, *end) and parameter list
 * [*params, *body); NULL when none (or out of memory). */
static const macro_def *macro_text(const sview *v, const char *w, size_t len, const char **params,
                                   const char **body, const char **end)
{
    const macro_index *ix = macro_index_of(v);
    const macro_def *d = ix ? def_named(ix, w, len) : NULL;
    if (d) {
        *params = d->params;
        *body = d->body;
        *end = d->end;
    }
    return d;
}

/* Whether the function body opening at body only reports and leaves: it
 * launches nothing and calls only printing, the exits and the calls that
 * touch nothing but their arguments (an error check's `fail(#x, ...)`). */
static int reports_and_exits(const sview *v, size_t body)
{
    static const char *const ok[] = {"MPI_Abort", "exit",      "abort",      "fflush", "perror",
                                     "fputs",     "std::exit", "std::abort", NULL};
    size_t end = close_of(v, body);
    for (size_t k = body + 1; k < end && k < v->n; k++) {
        if (is(v, k, "<<<"))
            return 0;
        if (ident(v, k) && is(v, k + 1, "(") && !in_words(v, k, sview_keywords) &&
            !scan_call_in(v, k, ok) && !scan_call_in(v, k, scan_plain_calls))
            return 0;
    }
    return 1;
}

/* Whether a call of the function named w (len bytes) in a macro's text
 * does what the text does not show: a function of the file (its body may
 * touch any buffer, synchronise or communicate) or a communication call. */
static int hidden_call(const sview *v, const char *w, size_t len)
{
    if ((len > 4 && memcmp(w, "nccl", 4) == 0 &&
         !(len == 18 && !memcmp(w, "ncclGetErrorString", 18))) ||
        (len > 7 && memcmp(w, "cuco_tx", 7) == 0))
        return 1;
    for (size_t i = 0; i < v->ndefs; i++) {
        const cuco_tok *t = tk(v, v->defs[i]);
        if (t->len == len && memcmp(v->src + t->off, w, len) == 0 &&
            !reports_and_exits(v, v->def_bodies[i]))
            return 1;
    }
    return 0;
}

int scan_macro_number(const sview *v, size_t i)
{
    const char *params, *body, *end;
    if (!macro_text(v, v->src + tk(v, i)->off, tk(v, i)->len, &params, &body, &end) ||
        params != body)
        return 0;
    while (body < end && (*body == ' ' || *body == '\t' || *body == '('))
        body++;
    while (end > body && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == ')'))
        end--;
    if (body == end || !(*body >= '0' && *body <= '9'))
        return 0;
    for (const char *q = body; q < end; q++)
        if (!cuco_tx_ident_char(*q) && *q != '.')
            return 0; /* one literal: 64, 1024u, 0x40, 1e-3f */
    return 1;
}

static int is_param(const char *params, const char *body, const char *w, size_t len)
{
    for (const char *p = params; p + len <= body; p++)
        if (memcmp(p, w, len) == 0 && !cuco_tx_ident_char(p[len]) &&
            (p == params || !cuco_tx_ident_char(p[-1])))
            return 1;
    return 0;
}

static int reach_text(const sview *v, const char *w, size_t len, int depth, cuco_strlist *heads,
                      unsigned *reach)
{
    const char *params, *body, *end;
    const macro_def *d = depth > MACRO_DEPTH ? NULL : macro_text(v, w, len, &params, &body, &end);
    if (!d)
        return 0;
    if (d->count > 1)
        *reach |= SCAN_MACRO_OPAQUE; /* #undef and #define again, or #ifdef branches */
    for (const char *q = body; q < end;) {
        const char *lit = cuco_tx_literal_end(body, q, end); /* "%s failed\n" names nothing */
        if (lit != q) {
            q = lit;
            continue;
        }
        if (!cuco_tx_ident_char(*q) || (*q >= '0' && *q <= '9')) {
            if (q + 3 <= end && memcmp(q, "<<<", 3) == 0)
                *reach |= SCAN_MACRO_LAUNCHES;
            if (q + 2 <= end && q[0] == '#' && q[1] == '#')
                *reach |= SCAN_MACRO_OPAQUE; /* ##: pastes names no text shows */
            q++;
            continue;
        }
        const char *a = q;
        while (q < end && cuco_tx_ident_char(*q))
            q++;
        size_t n = (size_t)(q - a);
        const char *after = q;
        while (after < end && (*after == ' ' || *after == '\t'))
            after++;
        int member = a > body && (a[-1] == '.' || (a[-1] == '>' && a - 1 > body && a[-2] == '-'));
        if (member || is_param(params, body, a, n))
            continue;
        if (word_in(a, n, exit_words)) {
            *reach |= SCAN_MACRO_EXITS;
            continue;
        }
        if (word_in(a, n, scan_type_words) || word_in(a, n, sview_keywords))
            continue; /* a word of the language, as for a statement's heads */
        int rc = reach_text(v, a, n, depth + 1, heads, reach);
        if (rc != 0)
            return rc;
        if (after < end && *after == '(' && hidden_call(v, a, n))
            *reach |= SCAN_MACRO_OPAQUE;
        if (after < end && *after == '(' && word_in(a, n, scan_sync_calls))
            *reach |= SCAN_MACRO_SYNCS;
        if (after < end && (*after == '(' || *after == '<'))
            continue; /* a call: what it reads is in its arguments */
        char *name = cuco_strndup(a, n);
        rc = name ? cuco_strlist_push(heads, name) : CUCO_ENOMEM;
        free(name);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int scan_macro_reach(const sview *v, size_t i, cuco_strlist *heads, unsigned *reach)
{
    return reach_text(v, v->src + tk(v, i)->off, tk(v, i)->len, 0, heads, reach);
}

/* The name of parameter k of the parameter list [params, body) ("(a, b)"):
 * into *w, *len; __VA_ARGS__ for one past the named ones after "...". 0 when
 * there is none. */
static int param_name(const char *params, const char *body, int k, const char **w, size_t *len)
{
    const char *q = params + 1;
    for (int i = 0; q < body; i++) {
        while (q < body && (*q == ' ' || *q == '\t'))
            q++;
        const char *s = q;
        while (q < body && *q != ',' && *q != ')')
            q++;
        const char *e = q;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (i == k || (e - s == 3 && memcmp(s, "...", 3) == 0)) {
            int va = e - s == 3 && memcmp(s, "...", 3) == 0;
            *w = va ? "__VA_ARGS__" : s;
            *len = va ? 11 : (size_t)(e - s);
            return i == k || va;
        }
        if (q < body && *q == ',')
            q++;
        else
            break;
    }
    return 0;
}

/* Whether the use of a parameter at [q, q + len) of the replacement
 * [body, end) is pasted, set or has its address taken. */
static int use_not_read(const char *body, const char *q, size_t len, const char *end)
{
    const char *b = q, *a = q + len;
    while (b > body && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '('))
        b--;
    while (a < end && (*a == ' ' || *a == '\t' || *a == ')'))
        a++;
    if (b - body >= 2 && ((b[-1] == '#' && b[-2] == '#') || (b[-1] == '+' && b[-2] == '+') ||
                          (b[-1] == '-' && b[-2] == '-')))
        return 1;
    if (b > body && b[-1] == '&' && !(b - body >= 2 && b[-2] == '&'))
        return 1;
    if (end - a >= 2 && ((a[0] == '#' && a[1] == '#') || (a[0] == '+' && a[1] == '+') ||
                         (a[0] == '-' && a[1] == '-')))
        return 1;
    if (end - a >= 1 && a[0] == '=' && !(end - a >= 2 && a[1] == '='))
        return 1;
    static const char ops[] = "+-*/%&|^";
    if (end - a >= 2 && a[1] == '=' && strchr(ops, a[0]))
        return 1;
    return end - a >= 3 && (a[0] == '<' || a[0] == '>') && a[1] == a[0] && a[2] == '=';
}

int scan_macro_arg_read(const sview *v, size_t name, int k)
{
    const char *params, *body, *end;
    const cuco_tok *t = tk(v, name);
    if (!macro_text(v, v->src + t->off, t->len, &params, &body, &end) || params == body ||
        *params != '(')
        return 1; /* no function-like macro: a function's argument is a value */
    const char *w;
    size_t len;
    if (!param_name(params, body, k, &w, &len))
        return 0;
    size_t n;
    for (const char *q = body; (q = cuco_tx_next_name(body, q, end, &n)) != NULL; q += n)
        if (n == len && memcmp(q, w, len) == 0 && use_not_read(body, q, len, end))
            return 0;
    return 1;
}
