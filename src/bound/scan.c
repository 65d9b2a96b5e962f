/* scan.c: a small, tolerant token scanner for C/C++/CUDA source, enough for
 * finding calls, statements, conditions and function bodies. It does not
 * parse: it splits the text into identifiers, numbers, literals, punctuation
 * and whole preprocessor lines, matches brackets, and marks function bodies
 * (a '{' at file level, or inside a namespace/struct, after a parameter
 * list). Odd input (unterminated literals, stray brackets) never fails. */
#include "bound_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/grow.h"

static const char *const multi_punct[] = {
    "<<<", ">>>", "<<=", ">>=", "->*", "...", "::", "->", "++", "--", "<=", ">=", "==", "!=",
    "&&",  "||",  "+=",  "-=",  "*=",  "/=",  "%=", "&=", "|=", "^=", "<<", ">>", NULL};

static int push(bl_source *s, size_t *cap, enum bl_kind k, size_t off, size_t len, int line)
{
    if (CUCO_GROW(s->tok, *cap, (size_t)s->n + 1, 1024) != 0)
        return CUCO_ENOMEM;
    s->tok[s->n++] = (bl_token){k, off, len, line, -1};
    return 0;
}

static int is_keyword_ctrl(const bl_source *s, int i)
{
    static const char *const kw[] = {"if",     "for",    "while",    "switch",  "catch",
                                     "return", "sizeof", "decltype", "alignof", "__launch_bounds__",
                                     NULL};
    for (int k = 0; kw[k]; k++)
        if (bl_is(s, i, kw[k]))
            return 1;
    return 0;
}

static void match_brackets(bl_source *s, cuco_err *e)
{
    int *stack = malloc(((size_t)s->n + 1) * sizeof *stack);
    int top = 0;
    if (!stack)
        return;
    for (int i = 0; i < s->n; i++) {
        if (s->tok[i].kind != BL_PUNCT || s->tok[i].len != 1)
            continue;
        char c = s->text[s->tok[i].off];
        if (c == '(' || c == '[' || c == '{') {
            stack[top++] = i;
        } else if (c == ')' || c == ']' || c == '}') {
            char want = c == ')' ? '(' : c == ']' ? '[' : '{';
            /* Pop to the nearest opener of the same kind; openers skipped are unbalanced. */
            int j = top - 1;
            while (j >= 0 && s->text[s->tok[stack[j]].off] != want)
                j--;
            if (j < 0)
                continue;
            s->tok[i].match = stack[j];
            s->tok[stack[j]].match = i;
            top = j;
        }
    }
    free(stack);
    (void)e;
}

/* A '{' opens a function body when it follows ')' (possibly through
 * qualifiers such as const, noexcept, override, or a trailing return type
 * is not handled) whose '(' follows a name that is not a keyword, and it is
 * not inside another function. */
static int find_funcs(bl_source *s)
{
    size_t cap = 0;
    for (int i = 0; i < s->n; i++) {
        if (!bl_is(s, i, "{") || s->tok[i].match < 0)
            continue;
        int j = i - 1;
        while (j >= 0 &&
               (bl_is(s, j, "const") || bl_is(s, j, "noexcept") || bl_is(s, j, "override") ||
                bl_is(s, j, "final") || bl_is(s, j, "mutable")))
            j--;
        if (j < 0 || !bl_is(s, j, ")") || s->tok[j].match < 0)
            continue;
        int lp = s->tok[j].match;
        int name = lp - 1;
        if (name < 0 || !bl_is_ident(s, name) || is_keyword_ctrl(s, name))
            continue;
        if (name > 0 && (bl_is(s, name - 1, "]") || bl_is(s, name - 1, ".")))
            continue;
        if (CUCO_GROW(s->funcs, cap, (size_t)s->n_funcs + 1, 64) != 0)
            return CUCO_ENOMEM;
        s->funcs[s->n_funcs++] = (bl_func){bl_text(s, name), i, s->tok[i].match, lp};
        i = s->tok[i].match; /* nothing inside a body is another function */
    }
    return 0;
}

int bl_scan(bl_source *s, cuco_err *e)
{
    const char *t = s->text;
    size_t n = s->len, p = 0;
    size_t cap = 0;
    int line = 1, at_line_start = 1;
    s->n = 0;
    while (p < n) {
        char c = t[p];
        if (c == '\n') {
            line++;
            p++;
            at_line_start = 1;
            continue;
        }
        if (isspace((unsigned char)c)) {
            p++;
            continue;
        }
        size_t start = p;
        int start_line = line;
        enum bl_kind kind;
        if (c == '/' && p + 1 < n && t[p + 1] == '/') {
            while (p < n && t[p] != '\n') {
                if (t[p] == '\\' && p + 1 < n && t[p + 1] == '\n') {
                    line++;
                    p++;
                }
                p++;
            }
            continue;
        }
        if (c == '/' && p + 1 < n && t[p + 1] == '*') {
            p += 2;
            while (p < n && !(t[p] == '*' && p + 1 < n && t[p + 1] == '/')) {
                if (t[p] == '\n')
                    line++;
                p++;
            }
            p = p < n ? p + 2 : n;
            continue;
        }
        if (c == '#' && at_line_start) {
            while (p < n && t[p] != '\n') {
                if (t[p] == '\\' && p + 1 < n && t[p + 1] == '\n') {
                    line++;
                    p++;
                } else if (t[p] == '/' && p + 1 < n && t[p + 1] == '*') {
                    p += 2;
                    while (p < n && !(t[p] == '*' && p + 1 < n && t[p + 1] == '/')) {
                        if (t[p] == '\n')
                            line++;
                        p++;
                    }
                    if (p < n)
                        p++;
                }
                p++;
            }
            if (p > n)
                p = n;
            kind = BL_PP;
        } else if (c == 'R' && p + 1 < n && t[p + 1] == '"') {
            /* Raw string R"delim( ... )delim" */
            size_t q = p + 2;
            while (q < n && t[q] != '(' && t[q] != '\n' && q - p < 20)
                q++;
            cuco_buf close = CUCO_BUF_INIT;
            cuco_buf_putc(&close, ')');
            cuco_buf_append(&close, t + p + 2, q - (p + 2));
            cuco_buf_putc(&close, '"');
            const char *end = q < n ? strstr(t + q, cuco_buf_str(&close)) : NULL;
            size_t stop = end ? (size_t)(end - t) + close.len : n;
            for (size_t k = p; k < stop; k++)
                if (t[k] == '\n')
                    line++;
            p = stop;
            cuco_buf_free(&close);
            kind = BL_STRING;
        } else if (c == '"' || c == '\'') {
            p++;
            while (p < n && t[p] != c && t[p] != '\n') {
                if (t[p] == '\\' && p + 1 < n) {
                    if (t[p + 1] == '\n')
                        line++;
                    p++;
                }
                p++;
            }
            if (p < n && t[p] == c)
                p++;
            kind = c == '"' ? BL_STRING : BL_CHAR;
        } else if (isalpha((unsigned char)c) || c == '_') {
            while (p < n && (isalnum((unsigned char)t[p]) || t[p] == '_'))
                p++;
            /* Prefixed literals: L"..", u8"..", u'..' */
            if (p < n && (t[p] == '"' || t[p] == '\'') && p - start <= 2) {
                at_line_start = 0;
                continue; /* the literal is scanned next, the prefix dropped */
            }
            kind = BL_IDENT;
        } else if (isdigit((unsigned char)c) ||
                   (c == '.' && p + 1 < n && isdigit((unsigned char)t[p + 1]))) {
            while (p < n &&
                   (isalnum((unsigned char)t[p]) || t[p] == '.' || t[p] == '_' || t[p] == '\'' ||
                    ((t[p] == '+' || t[p] == '-') &&
                     (t[p - 1] == 'e' || t[p - 1] == 'E' || t[p - 1] == 'p' || t[p - 1] == 'P'))))
                p++;
            kind = BL_NUMBER;
        } else {
            size_t len = 1;
            for (int k = 0; multi_punct[k]; k++) {
                size_t ml = strlen(multi_punct[k]);
                if (p + ml <= n && !memcmp(t + p, multi_punct[k], ml)) {
                    len = ml;
                    break;
                }
            }
            p += len;
            kind = BL_PUNCT;
        }
        at_line_start = 0;
        if (push(s, &cap, kind, start, p - start, start_line))
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory scanning %s", s->path);
    }
    match_brackets(s, e);
    if (find_funcs(s))
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory scanning %s", s->path);
    return 0;
}

void bl_source_free(bl_source *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_funcs; i++)
        free(s->funcs[i].name);
    free(s->funcs);
    free(s->tok);
    free(s->path);
    free(s->text);
    memset(s, 0, sizeof *s);
}

int bl_is(const bl_source *s, int i, const char *text)
{
    if (i < 0 || i >= s->n)
        return 0;
    size_t l = strlen(text);
    return s->tok[i].len == l && !memcmp(s->text + s->tok[i].off, text, l);
}

int bl_is_ident(const bl_source *s, int i)
{
    return i >= 0 && i < s->n && s->tok[i].kind == BL_IDENT;
}

char *bl_text(const bl_source *s, int i)
{
    if (i < 0 || i >= s->n)
        return cuco_strdup("");
    return cuco_strndup(s->text + s->tok[i].off, s->tok[i].len);
}

const bl_func *bl_func_at(const bl_source *s, int i)
{
    for (int k = 0; k < s->n_funcs; k++)
        if (s->funcs[k].open < i && i < s->funcs[k].close)
            return &s->funcs[k];
    return NULL;
}
