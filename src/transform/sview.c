/* sview.c: see sview.h. */
#include "sview.h"

#include <stdlib.h>
#include <string.h>

/* Whether the '{' that is code token k (the last one read) opens a namespace
 * ("namespace {", "namespace a::b {") or an extern "C" block. */
static int opens_namespace(const sview *v, size_t k)
{
    size_t j = k;
    while (j > 0 &&
           (tk(v, j - 1)->kind == CUCO_TOK_IDENT || cuco_tok_is(&v->lx, tk(v, j - 1), "::")) &&
           !cuco_tok_is(&v->lx, tk(v, j - 1), "namespace"))
        j--;
    return (j > 0 && cuco_tok_is(&v->lx, tk(v, j - 1), "namespace")) ||
           (k >= 2 && tk(v, k - 1)->kind == CUCO_TOK_STRING &&
            cuco_tok_is(&v->lx, tk(v, k - 2), "extern"));
}

/* The token after the qualifiers that may follow a function's parameter
 * list, from `after`: const, noexcept, override, ... and a trailing return
 * type (-> T). */
static size_t after_qualifiers(const sview *v, size_t after)
{
    static const char *const words[] = {"const",   "volatile", "noexcept", "override", "final",
                                        "mutable", "&",        "&&",       "try",      NULL};
    while (after < v->n) {
        if (in_words(v, after, words)) {
            after++;
        } else if (is(v, after, "->")) {
            after++;
            while (after < v->n && (ident(v, after) || is(v, after, "::") || is(v, after, "<") ||
                                    is(v, after, ">") || is(v, after, "*") || is(v, after, "&") ||
                                    is(v, after, ",")))
                after++;
        } else {
            break;
        }
    }
    return after;
}

/* v->defs: every `name(...) [qualifiers] [-> T] {` of the file. */
static int index_definitions(sview *v, cuco_err *e)
{
    v->defs = malloc((v->n + 1) * sizeof(size_t));
    v->def_bodies = malloc((v->n + 1) * sizeof(size_t));
    v->memo = calloc(1, sizeof(*v->memo));
    v->macro_memo = calloc(1, sizeof(*v->macro_memo));
    if (!v->defs || !v->def_bodies || !v->memo || !v->macro_memo)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    for (size_t k = 0; k + 1 < v->n; k++) {
        if (!ident(v, k) || !is(v, k + 1, "("))
            continue;
        size_t after = after_qualifiers(v, close_of(v, k + 1) + 1);
        if (after < v->n && is(v, after, "{")) {
            v->def_bodies[v->ndefs] = after;
            v->defs[v->ndefs++] = k;
        }
    }
    return 0;
}

size_t sview_next_def(const sview *v, size_t name, size_t *at, size_t *body)
{
    while (*at < v->ndefs) {
        size_t i = (*at)++, k = v->defs[i];
        if (k != name && same_tok(v, k, name)) {
            if (body)
                *body = v->def_bodies[i];
            return k;
        }
    }
    return v->n;
}

int sview_open(sview *v, const char *src, cuco_err *e)
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
            ns[d] = (char)opens_namespace(v, v->n - 1);
            sc += !ns[d];
            d++;
        } else if (t->kind == CUCO_TOK_PUNCT && t->len == 1 && src[t->off] == '}' && d > 0) {
            d--;
            sc -= !ns[d];
        }
    }
    free(ns);
    return index_definitions(v, e);
}

/* Frees what memo m holds (a scan made it again at its next use). */
static void sview_memo_clear(struct sview_memo *m)
{
    if (m && m->free_data)
        m->free_data(m->data);
    if (m)
        *m = (struct sview_memo){0};
}

int sview_add_macros(sview *v, const char *text, cuco_err *e)
{
    sview_memo_clear(v->macro_memo); /* indexed without these */
    if (v->has_macros)
        cuco_lex_free(&v->macros);
    v->has_macros = 0;
    int rc = cuco_lex_run(&v->macros, text, strlen(text), e);
    v->has_macros = rc == 0;
    return rc;
}

void sview_close(sview *v)
{
    cuco_lex_free(&v->lx);
    if (v->has_macros)
        cuco_lex_free(&v->macros);
    free(v->ix);
    free(v->depth);
    free(v->scope);
    free(v->defs);
    free(v->def_bodies);
    sview_memo_clear(v->memo);
    free(v->memo);
    sview_memo_clear(v->macro_memo);
    free(v->macro_memo);
}

const cuco_tok *tk(const sview *v, size_t i)
{
    return &v->lx.toks[v->ix[i]];
}

int sview_conditional_between(const sview *v, size_t a, size_t b)
{
    static const char *const conditionals[] = {"if",       "ifdef", "ifndef", "elif", "elifdef",
                                               "elifndef", "else",  "endif",  NULL};
    if (a >= v->n || a >= b)
        return 0;
    size_t to = b < v->n ? v->ix[b] : v->lx.ntoks;
    for (size_t t = v->ix[a] + 1; t < to; t++) {
        const cuco_tok *d = &v->lx.toks[t];
        if (d->kind != CUCO_TOK_PREPROC)
            continue;
        for (const char *const *w = conditionals; *w; w++)
            if (d->dir_len == strlen(*w) && !memcmp(v->src + d->dir_off, *w, d->dir_len))
                return d->line;
    }
    return 0;
}

/* Whether the ':' at k ends a label of a switch ("case 1:", "default:"). */
int sview_case_colon(const sview *v, size_t k)
{
    if (!is(v, k, ":"))
        return 0;
    return (k > 0 && is(v, k - 1, "default")) || sview_back_to(v, k, "case", "?");
}

int sview_back_to(const sview *v, size_t i, const char *word, const char *stop)
{
    int d = 0;
    for (size_t k = i; k-- > 0;) {
        d += is(v, k, ")") - is(v, k, "(");
        if (d < 0 || is(v, k, ";") || is(v, k, "{") || is(v, k, "}") || is(v, k, stop))
            return 0;
        if (d == 0 && is(v, k, word))
            return 1;
    }
    return 0;
}

/* The kind of the conditional directive d: 1 opens (#if, #ifdef, ...), 2
 * continues (#elif, #else, ...), 3 closes (#endif); 0 any other. */
static int conditional_kind(const sview *v, const cuco_tok *d)
{
    static const char *const words[] = {"if",       "ifdef", "ifndef", "elif", "elifdef",
                                        "elifndef", "else",  "endif",  NULL};
    static const int kinds[] = {1, 1, 1, 2, 2, 2, 2, 3};
    for (size_t w = 0; words[w]; w++)
        if (d->dir_len == strlen(words[w]) && !memcmp(v->src + d->dir_off, words[w], d->dir_len))
            return kinds[w];
    return 0;
}

int sview_conditional_cut(const sview *v, size_t from, size_t to, size_t *cut)
{
    int depth = 0;
    const cuco_tok *open = NULL; /* the first group opened at depth 0 and not closed */
    for (size_t t = 0; t < v->lx.ntoks; t++) {
        const cuco_tok *d = &v->lx.toks[t];
        if (d->off < from || d->kind != CUCO_TOK_PREPROC)
            continue;
        if (d->off >= to)
            break;
        int k = conditional_kind(v, d);
        if (k == 1 && depth++ == 0)
            open = d;
        else if (k != 0 && depth == 0) {
            *cut = d->off;
            return d->line;
        } else if (k == 3 && --depth == 0)
            open = NULL;
    }
    if (open)
        *cut = open->off;
    return open ? open->line : 0;
}

int sview_class_body(const sview *v, size_t brace)
{
    for (size_t k = brace; k-- > 0 && brace - k < 32;) {
        if (is(v, k, "class") || is(v, k, "struct"))
            return 1;
        if (is(v, k, ";") || is(v, k, "{") || is(v, k, "}") || is(v, k, ")"))
            return 0;
    }
    return 0;
}

size_t sview_member_decl_start(const sview *v, size_t brace, size_t k)
{
    while (k > brace + 1 && !is(v, k - 1, ";") && !is(v, k - 1, "}") && !is(v, k - 1, "{") &&
           !is(v, k - 1, ":"))
        k--;
    return k;
}

/* Whether the class body at brace declares the data member named like
 * token name, not static (every object has its own). */
static int own_member(const sview *v, size_t brace, size_t name)
{
    size_t end = close_of(v, brace);
    for (size_t k = brace + 1; k < end && k < v->n; k++) {
        if (is(v, k, "{") || is(v, k, "(")) {
            k = close_of(v, k); /* a method's body, a parameter list */
            continue;
        }
        if (!same_tok(v, k, name) ||
            !(is(v, k + 1, ";") || is(v, k + 1, "=") || is(v, k + 1, ",") || is(v, k + 1, "[")))
            continue;
        for (size_t d = sview_member_decl_start(v, brace, k); d < k; d++)
            if (is(v, d, "static"))
                return 0;
        return 1;
    }
    return 0;
}

/* The position of the data member named name among the data members of
 * the body at brace of the class named at brace - 1, in declaration order
 * (its aggregate's element); -1 when it declares none, or a constructor
 * (no aggregate). */
static int member_position(const sview *v, size_t brace, const char *name)
{
    size_t end = close_of(v, brace);
    int pos = 0, at = -1;
    for (size_t k = brace + 1; k < end && k < v->n; k++) {
        if (is(v, k, "(") && same_tok(v, k - 1, brace - 1))
            return -1; /* T(...): a constructor */
        if (is(v, k, "{") || is(v, k, "(") || is(v, k, "[")) {
            k = close_of(v, k); /* a method's body, parameters, an extent */
            continue;
        }
        if (!ident(v, k) || !(is(v, k + 1, ";") || is(v, k + 1, "=") || is(v, k + 1, ",") ||
                              is(v, k + 1, "[") || is(v, k + 1, "{")))
            continue;
        size_t d = sview_member_decl_start(v, brace, k);
        if (is(v, d, "static") || is(v, d, "using") || is(v, d, "typedef") || d == k)
            continue;
        if (cuco_tok_is(&v->lx, tk(v, k), name))
            at = pos;
        pos++;
    }
    return at;
}

size_t sview_aggregate_value(const sview *v, size_t i, const char *member)
{
    size_t brace = is(v, i + 1, "{")                                           ? i + 1
                   : ident(v, i + 1) && is(v, i + 2, "{")                      ? i + 2
                   : ident(v, i + 1) && is(v, i + 2, "=") && is(v, i + 3, "{") ? i + 3
                                                                               : v->n;
    if (brace >= v->n || !ident(v, i) ||
        (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "struct") ||
                   is(v, i - 1, "class") || is(v, i - 1, "union") || is(v, i - 1, "enum"))))
        return v->n; /* a member's, or the definition itself */
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, i) || !(is(v, k - 1, "struct") || is(v, k - 1, "class")) ||
            !is(v, k + 1, "{"))
            continue;
        int pos = member_position(v, k + 1, member);
        size_t a, b;
        return pos >= 0 && arg_range(v, brace, pos, &a, &b) ? a : v->n;
    }
    return v->n;
}

size_t sview_after_template_args(const sview *v, size_t i)
{
    if (!is(v, i, "<"))
        return i;
    int d = 0;
    for (size_t k = i; k < v->n && k < i + 32; k++) {
        d += is(v, k, "<") - is(v, k, ">");
        if (d == 0)
            return k + 1;
        if (is(v, k, ";") || is(v, k, "{") || is(v, k, "("))
            break;
    }
    return i;
}

/* The first token of what `return` at r gives back, less a cast around it
 * (`static_cast<T *>(data_)`, `(T *)data_`); *end: the token after it. */
static size_t returned_value(const sview *v, size_t r, size_t *end)
{
    size_t x = r + 1;
    if (is(v, x, "static_cast") || is(v, x, "reinterpret_cast") || is(v, x, "const_cast")) {
        size_t open = sview_after_template_args(v, x + 1);
        size_t close = is(v, open, "(") ? close_of(v, open) : v->n;
        *end = close < v->n ? close + 1 : v->n;
        return close < v->n ? open + 1 : v->n;
    }
    if (is(v, x, "(") && close_of(v, x) < v->n && ident(v, close_of(v, x) + 1)) {
        *end = v->n;
        return close_of(v, x) + 1; /* a C cast */
    }
    *end = v->n;
    return x;
}

int sview_getter(const sview *v, size_t m, size_t *member)
{
    *member = v->n;
    size_t call = m + 1 < v->n ? sview_after_template_args(v, m + 1) : v->n;
    if (m == 0 || !(is(v, m - 1, ".") || is(v, m - 1, "->")) || !is(v, call, "(") ||
        !is(v, call + 1, ")"))
        return 0;
    size_t at = 0, body, d, first = v->n;
    int same = 1;
    while ((d = sview_next_def(v, m, &at, &body)) < v->n) {
        size_t r = body + 1, cls = block_open(v, d), end = v->n;
        size_t value = returned_value(v, r, &end);
        size_t name = is(v, value, "this") && is(v, value + 1, "->") ? value + 2 : value;
        if (end < v->n && !is(v, name + 1, ")"))
            return 0; /* a named cast of more than the member */
        if (end < v->n)
            name = name + 1 == end - 1 ? name : v->n;
        size_t semi = end < v->n ? end : name + 1;
        if (!is(v, d + 1, "(") || !is(v, d + 2, ")") || !is(v, r, "return") || !ident(v, name) ||
            is(v, name, "this") || !is(v, semi, ";") || !is(v, semi + 1, "}") || cls >= v->n ||
            !sview_class_body(v, cls) || !own_member(v, cls, name))
            return 0; /* not a getter of a member every object has its own of */
        if (first >= v->n)
            first = name;
        else if (!same_tok(v, first, name))
            same = 0;
    }
    if (first >= v->n)
        return 0;
    if (same)
        *member = first;
    return 1;
}

int sview_smart_get(const sview *v, size_t i)
{
    return i >= 2 && is(v, i, "get") && (is(v, i - 1, ".") || is(v, i - 1, "->")) &&
           is(v, i + 1, "(") && is(v, i + 2, ")");
}

size_t sview_accessor_member(const sview *v, size_t m)
{
    size_t member;
    return sview_getter(v, m, &member) && member < v->n ? member : m;
}

int is(const sview *v, size_t i, const char *s)
{
    return i < v->n && cuco_tok_is(&v->lx, tk(v, i), s);
}

int ident(const sview *v, size_t i)
{
    return i < v->n && tk(v, i)->kind == CUCO_TOK_IDENT;
}

int in_words(const sview *v, size_t i, const char *const *w)
{
    for (; *w; w++)
        if (is(v, i, *w))
            return 1;
    return 0;
}

int in_list(const sview *v, size_t i, char *const *items, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (is(v, i, items[k]))
            return 1;
    return 0;
}

int same_tok(const sview *v, size_t a, size_t b)
{
    return tk(v, a)->len == tk(v, b)->len &&
           memcmp(v->src + tk(v, a)->off, v->src + tk(v, b)->off, tk(v, a)->len) == 0;
}

int same_range(const sview *v, size_t a, size_t b, size_t x, size_t y)
{
    if (b - a != y - x)
        return 0;
    for (size_t i = 0; i < b - a; i++)
        if (!same_tok(v, a + i, x + i))
            return 0;
    return 1;
}

int nccl_name(const sview *v, size_t i)
{
    return ident(v, i) && tk(v, i)->len > 4 && memcmp(v->src + tk(v, i)->off, "nccl", 4) == 0;
}

size_t close_of(const sview *v, size_t i)
{
    if (is(v, i, "<<<")) { /* a launch configuration: its '>>>' */
        for (size_t k = i + 1; k < v->n; k++)
            if (is(v, k, ">>>"))
                return k;
        return v->n;
    }
    int d = 0;
    for (size_t k = i; k < v->n; k++) {
        if (is(v, k, "(") || is(v, k, "[") || is(v, k, "{"))
            d++;
        else if (is(v, k, ")") || is(v, k, "]") || is(v, k, "}"))
            if (--d == 0)
                return k;
    }
    return v->n;
}

/* The end of the argument that starts at from in a list closing at close:
 * the ',' at its bracket depth, or close (v->n when the list is not closed). */
static size_t arg_end(const sview *v, size_t from, size_t close)
{
    int d = 0;
    for (size_t i = from; i < close && i < v->n; i++) {
        if (is(v, i, "(") || is(v, i, "[") || is(v, i, "{"))
            d++;
        else if (is(v, i, ")") || is(v, i, "]") || is(v, i, "}"))
            d--;
        else if (d == 0 && is(v, i, ","))
            return i;
    }
    return close;
}

int sview_param_index(const sview *v, size_t open, const char *name)
{
    size_t close = close_of(v, open);
    int k = 0, d = 0;
    for (size_t i = open + 1; i < close && i < v->n; i++) {
        /* in a parameter list a '<' opens template arguments
         * (std::array<float *, 4> &g) */
        d += is(v, i, "(") + is(v, i, "[") + is(v, i, "{") + is(v, i, "<") - is(v, i, ")") -
             is(v, i, "]") - is(v, i, "}") - is(v, i, ">") - 2 * is(v, i, ">>");
        if (d == 0 && is(v, i, ","))
            k++;
        else if (d == 0 && is(v, i, name) && ident(v, i) &&
                 (is(v, i + 1, ",") || is(v, i + 1, ")") || is(v, i + 1, "=") || is(v, i + 1, "[")))
            return k;
    }
    return -1;
}

int sview_param_range(const sview *v, size_t open, int k, size_t *a, size_t *b)
{
    size_t close = close_of(v, open), from = open + 1;
    int idx = 0, d = 0;
    for (size_t i = open + 1; i <= close && i < v->n; i++) {
        if (i < close)
            d += is(v, i, "(") + is(v, i, "[") + is(v, i, "{") + is(v, i, "<") - is(v, i, ")") -
                 is(v, i, "]") - is(v, i, "}") - is(v, i, ">") - 2 * is(v, i, ">>");
        if (i < close && !(d == 0 && is(v, i, ",")))
            continue;
        if (idx++ == k) {
            *a = from;
            *b = i;
            return i > from;
        }
        from = i + 1;
    }
    return 0;
}

size_t sview_param_name(const sview *v, size_t open, int k)
{
    size_t a, b, pn = v->n;
    if (!sview_param_range(v, open, k, &a, &b))
        return v->n;
    for (size_t q = a; q < b && !is(v, q, "="); q++)
        if (ident(v, q))
            pn = q;
    return pn;
}

int arg_range(const sview *v, size_t open, int k, size_t *a, size_t *b)
{
    size_t close = close_of(v, open), from = open + 1;
    for (int idx = 0;; idx++) {
        size_t end = arg_end(v, from, close);
        if (end >= v->n)
            return 0;
        if (idx == k || (k < 0 && end == close)) {
            *a = from;
            *b = end;
            return end > from;
        }
        if (end == close)
            return 0;
        from = end + 1;
    }
}

int arg_ranges(const sview *v, size_t open, size_t *from, size_t *to, int max)
{
    size_t close = close_of(v, open), at = open + 1;
    int n = 0;
    while (close < v->n && n < max) {
        size_t end = arg_end(v, at, close);
        if (end > at) {
            from[n] = at;
            to[n++] = end;
        }
        if (end >= close)
            break;
        at = end + 1;
    }
    return n;
}

int arg_count(const sview *v, size_t open)
{
    int n = 0;
    size_t a, b;
    while (arg_range(v, open, n, &a, &b))
        n++;
    return n;
}

int param_position(const sview *v, size_t open, const char *name, size_t len)
{
    size_t close = close_of(v, open), last = v->n;
    int idx = 0, d = 0;
    for (size_t i = open + 1; i <= close && i < v->n; i++) {
        d += is(v, i, "(") || is(v, i, "[") || is(v, i, "<");
        d -= (is(v, i, ")") && i < close) || is(v, i, "]") || is(v, i, ">");
        if (i == close || (d == 0 && (is(v, i, ",") || is(v, i, "=")))) {
            if (last < v->n && tk(v, last)->len == len &&
                memcmp(v->src + tk(v, last)->off, name, len) == 0)
                return idx;
            if (!is(v, i, "=")) {
                idx++;
                last = v->n;
            } else {
                while (i < close && !(d == 0 && is(v, i, ",")))
                    i++;
                idx++;
                last = v->n;
            }
        } else if (d == 0 && ident(v, i)) {
            last = i;
        }
    }
    return -1;
}

const char *const sview_keywords[] = {"if",    "for",   "while",   "switch",    "do",       "else",
                                      "try",   "catch", "return",  "break",     "continue", "goto",
                                      "throw", "case",  "default", "co_return", "co_yield", NULL};

int sview_declarator(const sview *v, size_t k, const char *follow)
{
    if (k == 0 || k + 1 >= v->n || !ident(v, k))
        return 0;
    int after_type = ident(v, k - 1) && !in_words(v, k - 1, sview_keywords);
    if (!after_type && !is(v, k - 1, "*") && !is(v, k - 1, "&"))
        return 0;
    if (is(v, k + 1, ",") && is(v, k - 1, "&"))
        return 0;
    const cuco_tok *n = tk(v, k + 1);
    for (const char *f = follow; *f;) {
        size_t len = strcspn(f, " ");
        if (len == n->len && memcmp(f, v->src + n->off, len) == 0)
            return 1;
        f += len + (f[len] == ' ');
    }
    return 0;
}

size_t sview_paren_around(const sview *v, size_t i)
{
    int d = 0;
    for (size_t k = i; k-- > 0 && !is(v, k, ";") && !is(v, k, "{") && !is(v, k, "}");) {
        d += is(v, k, ")") - is(v, k, "(");
        if (d < 0)
            return k;
    }
    return v->n;
}

size_t block_open(const sview *v, size_t i)
{
    int d = 0;
    for (size_t k = i; k-- > 0;) {
        if (is(v, k, "}"))
            d++;
        else if (is(v, k, "{") && d-- == 0)
            return k;
    }
    return v->n;
}

size_t params_of(const sview *v, size_t brace, int *lambda)
{
    size_t k = brace;
    *lambda = 0;
    while (k > 0 && in_words(v, k - 1,
                             (const char *const[]){"const", "noexcept", "override", "final",
                                                   "mutable", NULL}))
        k--;
    if (k == 0 || !is(v, k - 1, ")"))
        return v->n;
    int d = 0;
    size_t o = k - 1;
    for (;; o--) {
        if (is(v, o, ")"))
            d++;
        else if (is(v, o, "(") && --d == 0)
            break;
        if (o == 0)
            return v->n;
    }
    if (o == 0)
        return v->n;
    if (is(v, o - 1, "]")) {
        *lambda = 1;
        return o;
    }
    if (!ident(v, o - 1) || in_words(v, o - 1, sview_keywords))
        return v->n;
    return o;
}

size_t function_body_of(const sview *v, size_t i)
{
    int lambda = 0;
    for (size_t b = block_open(v, i); b < v->n; b = block_open(v, b))
        if (params_of(v, b, &lambda) < v->n && !lambda)
            return b;
    return v->n;
}

int call_of(const sview *v, size_t i, size_t f)
{
    if (i == f || !same_tok(v, i, f) || !is(v, i + 1, "(") ||
        (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"))))
        return 0;
    size_t after = close_of(v, i + 1) + 1;
    return !(after < v->n && (is(v, after, "{") || is(v, after, "const")));
}

size_t sview_lambda_body(const sview *v, size_t i, size_t *params)
{
    size_t body = function_body_of(v, i);
    for (size_t k = body < v->n ? body + 1 : v->n; k < i; k++) {
        if (!same_tok(v, k, i) || !is(v, k + 1, "=") || !is(v, k + 2, "["))
            continue;
        size_t open = close_of(v, k + 2) + 1;
        if (open >= v->n || !is(v, open, "("))
            return v->n;
        size_t lb = close_of(v, open) + 1;
        if (params)
            *params = open;
        return lb < v->n && is(v, lb, "{") ? lb : v->n;
    }
    return v->n;
}

size_t sview_open_of(const sview *v, size_t close)
{
    int depth = 0;
    for (size_t k = close; k < v->n; k--) {
        depth += is(v, k, ")") || is(v, k, "]");
        depth -= is(v, k, "(") || is(v, k, "[");
        if (depth == 0)
            return k;
        if (k == 0)
            break;
    }
    return v->n;
}

char *sview_text(const sview *v, size_t a, size_t b)
{
    return cuco_strndup(v->src + tk(v, a)->off,
                        tk(v, b - 1)->off + tk(v, b - 1)->len - tk(v, a)->off);
}

/* The start of the `#pragma` lines right before the line that starts at ls
 * (`#pragma omp parallel for`, `#pragma unroll`: they bind to the statement
 * after them, so what goes before it goes before them); ls when none. */
size_t sview_pragma_lines_before(const char *src, size_t ls)
{
    while (ls > 0) {
        size_t ps = ls - 1;
        while (ps > 0 && src[ps - 1] != '\n')
            ps--;
        size_t q = ps;
        while (src[q] == ' ' || src[q] == '\t')
            q++;
        if (src[q] != '#')
            break;
        q++;
        while (src[q] == ' ' || src[q] == '\t')
            q++;
        if (strncmp(src + q, "pragma", 6) != 0)
            break;
        ls = ps;
    }
    return ls;
}

int sview_arg_position(const sview *v, size_t open, size_t k)
{
    int pos = 0, d = 0;
    for (size_t i = open + 1; i < k && i < v->n; i++) {
        d += is(v, i, "(") + is(v, i, "[") + is(v, i, "{") - is(v, i, ")") - is(v, i, "]") -
             is(v, i, "}");
        pos += d == 0 && is(v, i, ",");
    }
    return pos;
}
