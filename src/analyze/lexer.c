/* lexer.c: a tolerant CUDA C++ tokenizer.
 *
 * Produces identifiers, numbers, strings (incl. raw strings), chars,
 * punctuation (with <<< and >>> as single tokens), whole preprocessor lines and
 * comments, each with offset, line and column. Bad input (unterminated
 * comments, strings, raw strings) becomes a diagnostic; every loop advances
 * at least one byte, so the lexer always terminates.
 */
#include "cuco/analyze.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/grow.h"

struct lexer {
    cuco_lex *lx;
    size_t pos, cap, dcap;
    int line, col;
    int at_line_start; /* only whitespace seen since the last newline */
};

static void advance(struct lexer *L, size_t n)
{
    const char *s = L->lx->src;
    for (size_t i = 0; i < n && L->pos < L->lx->src_len; i++) {
        if (s[L->pos] == '\n') {
            L->line++;
            L->col = 1;
        } else {
            L->col++;
        }
        L->pos++;
    }
}

static int push(struct lexer *L, enum cuco_tok_kind k, size_t off, int line, int col)
{
    cuco_lex *lx = L->lx;
    if (CUCO_GROW(lx->toks, L->cap, lx->ntoks + 1, 256) < 0)
        return CUCO_ENOMEM;
    cuco_tok *t = &lx->toks[lx->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    t->off = off;
    t->len = L->pos - off;
    t->line = line;
    t->col = col;
    return 0;
}

static int diag(struct lexer *L, int line, int col, const char *msg)
{
    cuco_lex *lx = L->lx;
    if (CUCO_GROW(lx->diags, L->dcap, lx->ndiags + 1, 8) < 0)
        return CUCO_ENOMEM;
    char *m = cuco_strdup(msg);
    if (!m)
        return CUCO_ENOMEM;
    lx->diags[lx->ndiags].line = line;
    lx->diags[lx->ndiags].col = col;
    lx->diags[lx->ndiags].msg = m;
    lx->ndiags++;
    return 0;
}

static char peek(const struct lexer *L, size_t ahead)
{
    size_t p = L->pos + ahead;
    return p < L->lx->src_len ? L->lx->src[p] : '\0';
}

/* Skips a backslash-newline at the current position; returns 1 if it did. */
static int skip_continuation(struct lexer *L)
{
    if (peek(L, 0) == '\\' && peek(L, 1) == '\n') {
        advance(L, 2);
        return 1;
    }
    if (peek(L, 0) == '\\' && peek(L, 1) == '\r' && peek(L, 2) == '\n') {
        advance(L, 3);
        return 1;
    }
    return 0;
}

/* Quoted literal body after the opening quote; stops at the closing quote or
 * at an unescaped newline / end of input (diagnosed). */
static int lex_quoted(struct lexer *L, char quote, int line, int col)
{
    while (L->pos < L->lx->src_len) {
        char c = peek(L, 0);
        if (c == '\\') {
            advance(L, peek(L, 1) ? 2 : 1);
            continue;
        }
        if (c == '\n')
            break;
        advance(L, 1);
        if (c == quote)
            return 0;
    }
    return diag(L, line, col,
                quote == '"' ? "unterminated string literal" : "unterminated character literal");
}

/* R"delim( ... )delim" starting at the opening quote. */
static int lex_raw(struct lexer *L, int line, int col)
{
    advance(L, 1); /* " */
    size_t dstart = L->pos;
    while (L->pos < L->lx->src_len && peek(L, 0) != '(' && peek(L, 0) != '\n' &&
           L->pos - dstart < 16)
        advance(L, 1);
    if (peek(L, 0) != '(')
        return diag(L, line, col, "malformed raw string delimiter");
    size_t dlen = L->pos - dstart;
    const char *delim = L->lx->src + dstart;
    advance(L, 1);
    while (L->pos < L->lx->src_len) {
        if (peek(L, 0) == ')' && L->pos + 1 + dlen < L->lx->src_len &&
            memcmp(L->lx->src + L->pos + 1, delim, dlen) == 0 &&
            L->lx->src[L->pos + 1 + dlen] == '"') {
            advance(L, dlen + 2);
            return 0;
        }
        advance(L, 1);
    }
    return diag(L, line, col, "unterminated raw string literal");
}

static const char *const puncts3[] = {"<<<", ">>>", "<<=", ">>=", "->*", "...", "<=>", NULL};
static const char *const puncts2[] = {
    "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*", "##", NULL};

static int lex_one(struct lexer *L)
{
    const char *s = L->lx->src;
    size_t start = L->pos;
    int line = L->line, col = L->col;
    char c = s[L->pos];

    if (c == '\n') {
        advance(L, 1);
        L->at_line_start = 1;
        return 0;
    }
    if (skip_continuation(L))
        return 0;
    if (isspace((unsigned char)c)) {
        advance(L, 1);
        return 0;
    }
    if (c == '/' && peek(L, 1) == '/') {
        while (L->pos < L->lx->src_len && peek(L, 0) != '\n')
            if (!skip_continuation(L))
                advance(L, 1);
        return push(L, CUCO_TOK_COMMENT, start, line, col);
    }
    if (c == '/' && peek(L, 1) == '*') {
        advance(L, 2);
        int closed = 0;
        while (L->pos < L->lx->src_len) {
            if (peek(L, 0) == '*' && peek(L, 1) == '/') {
                advance(L, 2);
                closed = 1;
                break;
            }
            advance(L, 1);
        }
        int rc = push(L, CUCO_TOK_COMMENT, start, line, col);
        if (!rc && !closed)
            rc = diag(L, line, col, "unterminated /* comment");
        return rc;
    }
    if (c == '#' && L->at_line_start) {
        /* The whole directive, continuations included; comments inside end
         * nothing except a // comment, which ends the line anyway. */
        advance(L, 1);
        while (peek(L, 0) == ' ' || peek(L, 0) == '\t')
            advance(L, 1);
        size_t dir = L->pos;
        while (isalnum((unsigned char)peek(L, 0)) || peek(L, 0) == '_')
            advance(L, 1);
        size_t dir_end = L->pos;
        while (L->pos < L->lx->src_len && peek(L, 0) != '\n') {
            if (skip_continuation(L))
                continue;
            if (peek(L, 0) == '/' && peek(L, 1) == '*') {
                advance(L, 2);
                while (L->pos < L->lx->src_len && !(peek(L, 0) == '*' && peek(L, 1) == '/'))
                    advance(L, 1);
                advance(L, 2);
                continue;
            }
            advance(L, 1);
        }
        int rc = push(L, CUCO_TOK_PREPROC, start, line, col);
        if (!rc) {
            L->lx->toks[L->lx->ntoks - 1].dir_off = dir;
            L->lx->toks[L->lx->ntoks - 1].dir_len = dir_end - dir;
        }
        return rc;
    }
    L->at_line_start = 0;
    if (isalpha((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80) {
        while (L->pos < L->lx->src_len && (isalnum((unsigned char)peek(L, 0)) ||
                                           peek(L, 0) == '_' || (unsigned char)peek(L, 0) >= 0x80))
            advance(L, 1);
        size_t n = L->pos - start;
        /* String/char prefixes: u8"", L"", R"()" ... */
        const char *id = s + start;
        int is_raw = (n >= 1 && id[n - 1] == 'R' &&
                      (n == 1 || (n == 2 && (id[0] == 'u' || id[0] == 'U' || id[0] == 'L')) ||
                       (n == 3 && id[0] == 'u' && id[1] == '8')));
        int is_prefix = (n == 1 && (id[0] == 'u' || id[0] == 'U' || id[0] == 'L')) ||
                        (n == 2 && id[0] == 'u' && id[1] == '8');
        if (peek(L, 0) == '"' && is_raw) {
            int rc = lex_raw(L, line, col);
            return rc ? rc : push(L, CUCO_TOK_STRING, start, line, col);
        }
        if ((peek(L, 0) == '"' || peek(L, 0) == '\'') && is_prefix) {
            char q = peek(L, 0);
            advance(L, 1);
            int rc = lex_quoted(L, q, line, col);
            return rc ? rc : push(L, q == '"' ? CUCO_TOK_STRING : CUCO_TOK_CHAR, start, line, col);
        }
        return push(L, CUCO_TOK_IDENT, start, line, col);
    }
    if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)peek(L, 1)))) {
        while (L->pos < L->lx->src_len) {
            char d = peek(L, 0);
            if ((d == '+' || d == '-') && strchr("eEpP", s[L->pos - 1]) &&
                !(s[start] == '0' && (s[start + 1] == 'x' || s[start + 1] == 'X') &&
                  strchr("eE", s[L->pos - 1])))
                advance(L, 1);
            else if (isalnum((unsigned char)d) || d == '.' || d == '_' ||
                     (d == '\'' && isalnum((unsigned char)peek(L, 1))))
                advance(L, 1);
            else
                break;
        }
        return push(L, CUCO_TOK_NUMBER, start, line, col);
    }
    if (c == '"' || c == '\'') {
        advance(L, 1);
        int rc = lex_quoted(L, c, line, col);
        return rc ? rc : push(L, c == '"' ? CUCO_TOK_STRING : CUCO_TOK_CHAR, start, line, col);
    }
    size_t rem = L->lx->src_len - L->pos;
    for (int i = 0; puncts3[i]; i++)
        if (rem >= 3 && memcmp(s + L->pos, puncts3[i], 3) == 0) {
            advance(L, 3);
            return push(L, CUCO_TOK_PUNCT, start, line, col);
        }
    for (int i = 0; puncts2[i]; i++)
        if (rem >= 2 && memcmp(s + L->pos, puncts2[i], 2) == 0) {
            advance(L, 2);
            return push(L, CUCO_TOK_PUNCT, start, line, col);
        }
    advance(L, 1);
    return push(L, CUCO_TOK_PUNCT, start, line, col);
}

int cuco_lex_run(cuco_lex *lx, const char *src, size_t len, cuco_err *e)
{
    memset(lx, 0, sizeof *lx);
    lx->src = src;
    lx->src_len = len;
    struct lexer L = {lx, 0, 0, 0, 1, 1, 1};
    while (L.pos < len) {
        size_t before = L.pos;
        int rc = lex_one(&L);
        if (rc) {
            cuco_lex_free(lx);
            return cuco_err_set(e, rc, "lexer: out of memory");
        }
        if (L.pos == before) /* cannot happen; guards against a stuck loop */
            advance(&L, 1);
    }
    return 0;
}

void cuco_lex_free(cuco_lex *lx)
{
    if (!lx)
        return;
    for (size_t i = 0; i < lx->ndiags; i++)
        free(lx->diags[i].msg);
    free(lx->diags);
    free(lx->toks);
    lx->diags = NULL;
    lx->toks = NULL;
    lx->ntoks = lx->ndiags = 0;
}

int cuco_tok_is(const cuco_lex *lx, const cuco_tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->len == n && memcmp(lx->src + t->off, s, n) == 0;
}

int cuco_tok_directive(const char *src, const cuco_tok *t, const char *d)
{
    size_t n = strlen(d);
    return t->kind == CUCO_TOK_PREPROC && t->dir_len == n && memcmp(src + t->dir_off, d, n) == 0;
}
