/* block_guard.c: what the code inside a candidate's EVOLVE-BLOCKs may not do,
 * so that nothing defined there changes what the frozen code around it means
 * (see cuco_patch_guard_blocks in patch.h).
 *
 * The frozen check (cuco_program_check_frozen) keeps the frozen text byte for
 * byte, but the preprocessor lets a block reach past its end: a macro named
 * like a frozen identifier ("#define fabs(x) 0.0", "#define MPI_Wtime fake")
 * rewrites every later use; #line, push_macro, #include, an unbalanced #if or
 * an unterminated comment hide or replace frozen text; a constructor, the
 * environment or the nonce reach the run outside the frozen flow; a function
 * defined with a frozen name (MPI_Wtime) or an asm label replaces the
 * library's. The checks work on tokens from the analyze lexer. */
#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/grow.h"
#include "cuco/patch.h"
#include "cuco/program.h"
#include "cuco/workload.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A set of identifiers, kept as a sorted array of views into texts that
 * outlive it. */
typedef struct name_set {
    struct name_view {
        const char *s;
        size_t len;
    } * items;
    size_t n, cap;
} name_set;

static int name_set_add(name_set *set, const char *s, size_t len)
{
    if (CUCO_GROW(set->items, set->cap, set->n + 1, 256) != 0)
        return CUCO_ENOMEM;
    set->items[set->n].s = s;
    set->items[set->n].len = len;
    set->n++;
    return 0;
}

static int view_cmp(const void *a, const void *b)
{
    const struct name_view *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int name_set_has(const name_set *set, const char *s, size_t len)
{
    struct name_view key = {s, len};
    return set->n && bsearch(&key, set->items, set->n, sizeof key, view_cmp) != NULL;
}

static int is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           (unsigned char)c >= 0x80;
}

/* Adds every identifier of text[0, len) (the words of a directive, such as a
 * frozen macro's body, count: a superset is safe). */
static int add_words(name_set *set, const char *text, size_t len)
{
    for (size_t i = 0; i < len;) {
        if (!is_ident_char(text[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && is_ident_char(text[i]))
            i++;
        if (!(text[s] >= '0' && text[s] <= '9') && name_set_add(set, text + s, i - s) != 0)
            return CUCO_ENOMEM;
    }
    return 0;
}

/* The state of one guard run. */
typedef struct guard {
    const char *cand;
    cuco_lex lx;        /* the whole candidate */
    cuco_block *blocks; /* of cand */
    size_t nblocks;
    name_set frozen;            /* identifiers of the frozen text and the headers */
    name_set seed_defs;         /* functions and macros the seed's blocks define */
    cuco_strlist seed_includes; /* the seed's blocks' #include lines (normalized) */
    cuco_err *e;
} guard;

static int violation(guard *g, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int violation(guard *g, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    cuco_err_set_at(g->e, CUCO_EINVAL, NULL, line,
                    "line %d of the candidate, inside an EVOLVE-BLOCK: %s", line, cuco_buf_str(&b));
    cuco_buf_free(&b);
    return CUCO_EINVAL;
}

static const char *tok_text(const guard *g, const cuco_tok *t)
{
    return g->cand + t->off;
}

static int tok_eq(const guard *g, const cuco_tok *t, const char *s)
{
    return t->len == strlen(s) && !memcmp(tok_text(g, t), s, t->len);
}

/* Index of the block holding offset off, or -1 for frozen text. */
static int block_of(const guard *g, size_t off)
{
    for (size_t i = 0; i < g->nblocks; i++)
        if (off >= g->blocks[i].body_start && off < g->blocks[i].body_end)
            return (int)i;
    return -1;
}

/* A directive's text after '#', with line continuations and comments turned
 * into spaces. Caller frees. */
static char *directive_text(const char *s, size_t len)
{
    cuco_buf b = CUCO_BUF_INIT;
    size_t i = 0;
    while (i < len && (s[i] == '#' || s[i] == ' ' || s[i] == '\t'))
        i++;
    while (i < len) {
        if (s[i] == '\\' && i + 1 < len && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
            i += s[i + 1] == '\r' && i + 2 < len && s[i + 2] == '\n' ? 3 : 2;
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < len && !end; k++)
                if (s[k] == '*' && s[k + 1] == '/')
                    end = s + k + 2;
            i = end ? (size_t)(end - s) : len;
            cuco_buf_putc(&b, ' ');
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
            break;
        } else {
            cuco_buf_putc(&b, s[i++]);
        }
    }
    return cuco_buf_detach(&b);
}

/* A directive's text with runs of blanks made one space and no blanks at
 * the ends, to compare directives. Caller frees. */
static char *directive_normalized(const char *s, size_t len)
{
    char *body = directive_text(s, len);
    if (!body)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; body[i]; i++) {
        int blank = body[i] == ' ' || body[i] == '\t' || body[i] == '\r';
        if (!blank)
            body[o++] = body[i];
        else if (o && body[o - 1] != ' ')
            body[o++] = ' ';
    }
    while (o && body[o - 1] == ' ')
        o--;
    body[o] = '\0';
    return body;
}

/* Headers any block may include: cuco's device library (a transformed
 * program's blocks include it) and C++ standard headers that define no
 * macros over names a program uses (not <tgmath.h>, whose fabs is a macro). */
static int is_library_include(const char *norm)
{
    static const char *const ok[] = {"\"cuco_device.cuh\"",
                                     "<algorithm>",
                                     "<array>",
                                     "<atomic>",
                                     "<chrono>",
                                     "<condition_variable>",
                                     "<cstdint>",
                                     "<cstdio>",
                                     "<cstdlib>",
                                     "<cstring>",
                                     "<functional>",
                                     "<limits>",
                                     "<memory>",
                                     "<mutex>",
                                     "<numeric>",
                                     "<thread>",
                                     "<tuple>",
                                     "<type_traits>",
                                     "<utility>",
                                     "<vector>",
                                     NULL};
    const char *what = !strncmp(norm, "include ", 8) ? norm + 8 : NULL;
    for (size_t i = 0; what && ok[i]; i++)
        if (!strcmp(what, ok[i]))
            return 1;
    return 0;
}

/* Whether the frozen text before offset `before` has the same #include
 * (norm): including it again adds nothing the program does not have there. */
static int frozen_include_before(const guard *g, const char *norm, size_t before)
{
    int found = 0;
    for (size_t i = 0; i < g->lx.ntoks && !found; i++) {
        const cuco_tok *t = &g->lx.toks[i];
        if (t->off >= before)
            break;
        if (t->kind != CUCO_TOK_PREPROC || block_of(g, t->off) >= 0)
            continue;
        char *other = directive_normalized(g->cand + t->off, t->len);
        found = other && !strcmp(other, norm);
        free(other);
    }
    return found;
}

/* An #include a block may keep: one of the seed's blocks', a library's, or
 * one the frozen text already makes before the block. */
static int is_seed_include(const guard *g, const cuco_tok *t)
{
    char *norm = directive_normalized(g->cand + t->off, t->len);
    int found = norm && is_library_include(norm);
    for (size_t i = 0; norm && i < g->seed_includes.n && !found; i++)
        found = !strcmp(norm, g->seed_includes.items[i]);
    if (norm && !found && !strncmp(norm, "include ", 8))
        found = frozen_include_before(g, norm, t->off);
    free(norm);
    return found;
}

/* The next identifier of text from *pos; *len 0 when none follows. */
static const char *next_word(const char *text, size_t *pos, size_t *len)
{
    size_t i = *pos;
    while (text[i] && !is_ident_char(text[i]))
        i++;
    size_t s = i;
    while (text[i] && is_ident_char(text[i]))
        i++;
    *pos = i;
    *len = i - s;
    return text + s;
}

static int word_is(const char *w, size_t len, const char *s)
{
    return len == strlen(s) && !memcmp(w, s, len);
}

static int is_reserved(const char *w, size_t len)
{
    return len >= 2 && w[0] == '_' && (w[1] == '_' || (w[1] >= 'A' && w[1] <= 'Z'));
}

/* Pragmas that only tune the code they precede or report something; any
 * other (GCC optimize, STDC FP_CONTRACT, push_macro, redefine_extname, weak,
 * ...) can change how the frozen code after the block is compiled. */
static int pragma_allowed(const char *text)
{
    static const char *const plain[] = {"unroll",
                                        "nounroll",
                                        "omp",
                                        "message",
                                        "ivdep",
                                        "nv_diag_suppress",
                                        "nv_diag_default",
                                        "diag_suppress",
                                        "diag_default",
                                        "nv_diag_warning",
                                        NULL};
    static const char *const gcc[] = {"unroll", "ivdep", "diagnostic", NULL};
    static const char *const clang[] = {"loop", "diagnostic", "unroll", NULL};
    size_t pos = 0, len, len2;
    const char *w = next_word(text, &pos, &len);
    for (size_t i = 0; plain[i]; i++)
        if (word_is(w, len, plain[i]))
            return 1;
    const char *const *sub = word_is(w, len, "GCC") ? gcc : word_is(w, len, "clang") ? clang : NULL;
    const char *w2 = next_word(text, &pos, &len2);
    for (size_t i = 0; sub && sub[i]; i++)
        if (word_is(w2, len2, sub[i]))
            return 1;
    return 0;
}

/* #define/#undef NAME: NAME must be the block's own, or one the seed's
 * blocks define too (a knob the frozen code reads). */
static int check_macro_name(guard *g, const cuco_tok *t, const char *dir, const char *body)
{
    size_t pos = 0, len;
    const char *name = next_word(body, &pos, &len);
    if (len == 0)
        return violation(g, t->line, "#%s without a macro name", dir);
    if (is_reserved(name, len))
        return violation(g, t->line,
                         "#%s %.*s: a reserved identifier (the compiler's and the "
                         "library's names are not the candidate's to redefine)",
                         dir, (int)len, name);
    if (name_set_has(&g->frozen, name, len) && !name_set_has(&g->seed_defs, name, len))
        return violation(g, t->line,
                         "#%s %.*s: the frozen code uses '%.*s', so the macro would change what "
                         "it means; name the block's macros with names of its own",
                         dir, (int)len, name, (int)len, name);
    return 0;
}

/* Where the scan of one block stands. */
typedef struct scan {
    size_t start, end;         /* the block's tokens */
    int if_depth;              /* #if nesting opened in the block */
    int if_line;               /* line of the outermost #if still open */
    int brace_depth;           /* { } nesting opened in the block */
    int scope_depth;           /* the same without extern "C" { } (no scope of its own) */
    unsigned char linkage[64]; /* whether the brace at each depth opened extern "C" */
} scan;

/* The directives a block may use (with the rules above); any other
 * (#assert, #ident, ...) is refused. */
static int is_known_directive(const char *name)
{
    static const char *const known[] = {"define",       "undef",   "if",       "ifdef",   "ifndef",
                                        "elif",         "elifdef", "elifndef", "else",    "endif",
                                        "error",        "warning", "pragma",   "include", "import",
                                        "include_next", "embed",   "line",     NULL};
    for (size_t i = 0; known[i]; i++)
        if (!strcmp(name, known[i]))
            return 1;
    return 0;
}

/* One preprocessor directive inside a block. */
static int check_directive(guard *g, const cuco_tok *t, scan *sc)
{
    int *depth = &sc->if_depth;
    char *body = directive_text(tok_text(g, t), t->len);
    if (!body)
        return cuco_err_set(g->e, CUCO_ENOMEM, "out of memory");
    size_t pos = 0, len;
    const char *dir = next_word(body, &pos, &len);
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)(len < 15 ? len : 15), dir);
    const char *rest = body + pos;
    int rc = 0;
    if (!strcmp(name, "define") || !strcmp(name, "undef"))
        rc = check_macro_name(g, t, name, rest);
    else if (!strcmp(name, "if") || !strcmp(name, "ifdef") || !strcmp(name, "ifndef"))
        sc->if_line = (*depth)++ ? sc->if_line : t->line;
    else if (!strcmp(name, "endif") && --(*depth) < 0)
        rc = violation(g, t->line, "#endif closes an #if of the frozen code");
    else if ((!strcmp(name, "else") || !strcmp(name, "elif") || !strcmp(name, "elifdef") ||
              !strcmp(name, "elifndef")) &&
             *depth == 0)
        rc = violation(g, t->line, "#%s belongs to an #if of the frozen code", name);
    else if ((!strcmp(name, "include") || !strcmp(name, "include_next") ||
              !strcmp(name, "import") || !strcmp(name, "embed")) &&
             !is_seed_include(g, t))
        rc = violation(g, t->line,
                       "#%s: includes belong to the frozen part of the program, not the block "
                       "(a block may keep only the #include lines of the seed's blocks, cuco's "
                       "device library and some C++ standard headers)",
                       name);
    else if (!strcmp(name, "line") || (len > 0 && dir[0] >= '0' && dir[0] <= '9'))
        rc = violation(g, t->line, "#line changes the frozen code's file and line numbers");
    else if (!strcmp(name, "pragma") && !pragma_allowed(rest))
        rc = violation(g, t->line,
                       "#pragma %s: only loop and diagnostic pragmas (unroll, omp, GCC unroll, "
                       "diagnostic) may be used inside a block; others can change how the frozen "
                       "code is compiled",
                       rest + strspn(rest, " \t"));
    else if (len == 0 && rest[strspn(rest, " \t\r")] != '\0')
        rc = violation(g, t->line, "a preprocessor directive the guard cannot read");
    else if (len > 0 && !is_known_directive(name))
        rc = violation(g, t->line, "#%.*s is not allowed inside a block", (int)len, dir);
    free(body);
    return rc;
}

/* Identifiers that reach the run outside the frozen flow. */
static int check_banned_word(guard *g, int line, const char *w, size_t len)
{
    static const char *const banned[] = {"CUCO_NONCE",      "environ",        "_environ",
                                         "__environ",       "constructor",    "destructor",
                                         "__constructor__", "__destructor__", NULL};
    for (size_t i = 0; banned[i]; i++)
        if (word_is(w, len, banned[i]))
            return violation(g, line,
                             "'%s' is not allowed in a block: it reaches the run outside the "
                             "frozen flow (the nonce, the environment, code before or after main)",
                             banned[i]);
    return 0;
}

static int check_words_of(guard *g, int line, const char *text, size_t len)
{
    for (size_t i = 0; i < len;) {
        if (!is_ident_char(text[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && is_ident_char(text[i]))
            i++;
        int rc = check_banned_word(g, line, text + s, i - s);
        if (rc)
            return rc;
    }
    return 0;
}

/* Strings naming the nonce or the sections that run code before main. */
static int check_string(guard *g, const cuco_tok *t)
{
    static const char *const banned[] = {
        "CUCO_NONCE", ".init_array", ".preinit_array", ".fini_array", ".ctors", ".dtors", NULL};
    char *s = cuco_strndup(tok_text(g, t), t->len);
    int rc = 0;
    for (size_t i = 0; s && banned[i] && !rc; i++)
        if (strstr(s, banned[i]))
            rc = violation(g, t->line, "a string naming %s is not allowed in a block", banned[i]);
    free(s);
    return s ? rc : cuco_err_set(g->e, CUCO_ENOMEM, "out of memory");
}

/* _Pragma("...") follows the rules of #pragma; any other form (from a macro
 * argument) cannot be read, so it is refused. */
static int check_pragma_operator(guard *g, size_t i, size_t end)
{
    const cuco_tok *t = &g->lx.toks[i];
    const cuco_tok *open = i + 1 < end ? &g->lx.toks[i + 1] : NULL;
    const cuco_tok *str = i + 2 < end ? &g->lx.toks[i + 2] : NULL;
    if (!open || !tok_eq(g, open, "(") || !str || str->kind != CUCO_TOK_STRING)
        return violation(g, t->line, "_Pragma without a string literal");
    char *text = cuco_strndup(tok_text(g, str), str->len);
    if (!text)
        return cuco_err_set(g->e, CUCO_ENOMEM, "out of memory");
    for (char *p = text; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = ' ';
    int rc = pragma_allowed(text) ? 0 : violation(g, t->line, "_Pragma(%s) is not allowed", text);
    free(text);
    return rc;
}

static int is_keyword(const char *w, size_t len)
{
    static const char *const kw[] = {"if",     "for",     "while",    "switch",  "catch", "return",
                                     "sizeof", "alignof", "decltype", "defined", NULL};
    for (size_t i = 0; kw[i]; i++)
        if (word_is(w, len, kw[i]))
            return 1;
    return 0;
}

/* The index after the ')' matching the '(' at i, or end. Tokens other than
 * comments and directives only. */
static size_t skip_parens(const guard *g, size_t i, size_t end)
{
    int depth = 0;
    for (; i < end; i++) {
        const cuco_tok *t = &g->lx.toks[i];
        if (t->kind != CUCO_TOK_PUNCT)
            continue;
        if (tok_eq(g, t, "("))
            depth++;
        else if (tok_eq(g, t, ")") && --depth == 0)
            return i + 1;
    }
    return end;
}

static size_t skip_trivia(const guard *g, size_t i, size_t end)
{
    while (i < end &&
           (g->lx.toks[i].kind == CUCO_TOK_COMMENT || g->lx.toks[i].kind == CUCO_TOK_PREPROC))
        i++;
    return i;
}

/* 1 when token i names a function that tokens i.. define: NAME ( ... )
 * [const|noexcept|override|final]* [-> TYPE] { */
static int is_function_definition(const guard *g, size_t i, size_t end)
{
    const cuco_tok *t = &g->lx.toks[i];
    if (t->kind != CUCO_TOK_IDENT || is_keyword(tok_text(g, t), t->len))
        return 0;
    size_t j = skip_trivia(g, i + 1, end);
    if (j >= end || !tok_eq(g, &g->lx.toks[j], "("))
        return 0;
    j = skip_trivia(g, skip_parens(g, j, end), end);
    while (j < end &&
           (tok_eq(g, &g->lx.toks[j], "const") || tok_eq(g, &g->lx.toks[j], "noexcept") ||
            tok_eq(g, &g->lx.toks[j], "override") || tok_eq(g, &g->lx.toks[j], "final")))
        j = skip_trivia(g, j + 1, end);
    if (j < end && tok_eq(g, &g->lx.toks[j], "->")) { /* a trailing return type */
        j = skip_trivia(g, j + 1, end);
        while (j < end && !tok_eq(g, &g->lx.toks[j], "{") && !tok_eq(g, &g->lx.toks[j], ";") &&
               !tok_eq(g, &g->lx.toks[j], "=") && !tok_eq(g, &g->lx.toks[j], ")"))
            j = skip_trivia(g, tok_eq(g, &g->lx.toks[j], "(") ? skip_parens(g, j, end) : j + 1,
                            end);
    }
    return j < end && tok_eq(g, &g->lx.toks[j], "{");
}

/* 1 when token i is the name a declaration declares: an identifier after a
 * type word or '*' / '&', followed by '[', '=', ';' or ','
 * ("static unsigned char key[64];", "int n = 0;", "T *p, q;"). */
static int is_declared_name(const guard *g, size_t i, size_t start, size_t end)
{
    if (i <= start || i + 1 >= end)
        return 0;
    /* a parameter of a prototype is inside parentheses of its statement */
    int depth = 0;
    for (size_t j = i; j-- > start;) {
        const cuco_tok *t = &g->lx.toks[j];
        if (tok_eq(g, t, ";") || tok_eq(g, t, "{") || tok_eq(g, t, "}"))
            break;
        if (tok_eq(g, t, ")"))
            depth++;
        else if (tok_eq(g, t, "(") && depth-- == 0)
            return 0;
    }
    const cuco_tok *prev = &g->lx.toks[i - 1], *next = &g->lx.toks[i + 1];
    int after_type = prev->kind == CUCO_TOK_IDENT || tok_eq(g, prev, "*") || tok_eq(g, prev, "&");
    int declarator_end = tok_eq(g, next, "[") || tok_eq(g, next, "=") || tok_eq(g, next, ";") ||
                         tok_eq(g, next, ",");
    return after_type && declarator_end;
}

/* Whether the token just before i is '::' or '.'/'->' (a member, not the
 * global name). */
static int is_qualified(const guard *g, size_t i, size_t start)
{
    while (i > start) {
        const cuco_tok *p = &g->lx.toks[--i];
        if (p->kind == CUCO_TOK_COMMENT)
            continue;
        return tok_eq(g, p, "::") || tok_eq(g, p, ".") || tok_eq(g, p, "->");
    }
    return 0;
}

/* Whether the '{' at token i opens extern "C" { ... }. */
static int opens_linkage(const guard *g, size_t i, size_t start)
{
    const cuco_tok *prev[2] = {NULL, NULL};
    for (size_t k = i, n = 0; k > start && n < 2;) {
        const cuco_tok *p = &g->lx.toks[--k];
        if (p->kind != CUCO_TOK_COMMENT)
            prev[n++] = p;
    }
    return prev[0] && prev[1] && prev[0]->kind == CUCO_TOK_STRING && tok_eq(g, prev[1], "extern");
}

/* Follows the braces at token i; -1 when one closes a brace opened before
 * the block. */
static int track_braces(const guard *g, size_t i, scan *sc)
{
    const cuco_tok *t = &g->lx.toks[i];
    if (tok_eq(g, t, "{") || tok_eq(g, t, "<%")) {
        int linkage = opens_linkage(g, i, sc->start);
        if (sc->brace_depth < 64)
            sc->linkage[sc->brace_depth] = (unsigned char)linkage;
        sc->brace_depth++;
        sc->scope_depth += !linkage;
    } else if (tok_eq(g, t, "}") || tok_eq(g, t, "%>")) {
        if (--sc->brace_depth < 0)
            return -1;
        sc->scope_depth -= !(sc->brace_depth < 64 && sc->linkage[sc->brace_depth]);
    }
    return 0;
}

/* The token before i that is not a comment or directive (i itself when none). */
static size_t prev_code(const guard *g, size_t i, size_t start)
{
    size_t k = i;
    while (k > start) {
        k--;
        if (g->lx.toks[k].kind != CUCO_TOK_COMMENT && g->lx.toks[k].kind != CUCO_TOK_PREPROC)
            return k;
    }
    return i;
}

/* How many template argument lists token k closes: '>' 1, '>>' 2. */
static int closes_angles(const guard *g, size_t k)
{
    return tok_eq(g, &g->lx.toks[k], ">") ? 1 : tok_eq(g, &g->lx.toks[k], ">>") ? 2 : 0;
}

/* Whether the name that ends just before token stop (NAME, A::B::NAME, with
 * template arguments <...> after it) starts with std:: (or ::std::). */
static int name_in_std(const guard *g, size_t stop, size_t start)
{
    size_t k = prev_code(g, stop, start);
    if (k != stop && closes_angles(g, k)) { /* back over <...> */
        int depth = 0;
        for (;; k = prev_code(g, k, start)) {
            depth += closes_angles(g, k) - tok_eq(g, &g->lx.toks[k], "<");
            if (depth == 0 || k == start)
                break;
        }
        k = prev_code(g, k, start);
    }
    size_t first = k;
    while (k != start && g->lx.toks[k].kind == CUCO_TOK_IDENT) {
        first = k;
        size_t c = prev_code(g, k, start);
        if (c == k || !tok_eq(g, &g->lx.toks[c], "::"))
            break;
        k = prev_code(g, c, start);
    }
    return tok_eq(g, &g->lx.toks[first], "std");
}

/* Whether token i opens `namespace std` (or __gnu_cxx), or is the
 * `template` of an explicit specialization (`template <>`) of a std::
 * template (the name before its parameters, base clause or body): code
 * that would add to, or replace part of, the standard library the frozen
 * code compiles against. */
static int touches_std(const guard *g, size_t i, size_t end)
{
    size_t j = skip_trivia(g, i + 1, end);
    if (j >= end)
        return 0;
    if (tok_eq(g, &g->lx.toks[i], "namespace"))
        return tok_eq(g, &g->lx.toks[j], "std") || tok_eq(g, &g->lx.toks[j], "__gnu_cxx");
    if (!tok_eq(g, &g->lx.toks[i], "template") || !tok_eq(g, &g->lx.toks[j], "<"))
        return 0;
    j = skip_trivia(g, j + 1, end);
    if (j >= end || !tok_eq(g, &g->lx.toks[j], ">"))
        return 0;
    size_t head = j + 1;
    int angle = 0;
    for (j = skip_trivia(g, head, end); j < end; j = skip_trivia(g, j + 1, end)) {
        const cuco_tok *t = &g->lx.toks[j];
        angle += tok_eq(g, t, "<") - closes_angles(g, j);
        if (angle == 0 && (tok_eq(g, t, "(") || tok_eq(g, t, "{") || tok_eq(g, t, ";") ||
                           tok_eq(g, t, ":") || tok_eq(g, t, "=")))
            return name_in_std(g, j, head);
    }
    return 0;
}

/* One token of a block. */
static int check_code_token(guard *g, size_t i, scan *sc)
{
    size_t start = sc->start, end = sc->end;
    const cuco_tok *t = &g->lx.toks[i];
    const char *s = tok_text(g, t);
    switch (t->kind) {
    case CUCO_TOK_PREPROC: {
        int rc = check_words_of(g, t->line, s, t->len);
        return rc ? rc : check_directive(g, t, sc);
    }
    case CUCO_TOK_STRING:
        return check_string(g, t);
    case CUCO_TOK_PUNCT:
        if (track_braces(g, i, sc) != 0)
            return violation(g, t->line, "this '}' closes a brace of the frozen code");
        if (tok_eq(g, t, "#") || tok_eq(g, t, "%:") || tok_eq(g, t, "%:%:") ||
            (tok_eq(g, t, "%") && t->off + 1 < g->lx.src_len && g->cand[t->off + 1] == ':'))
            return violation(g, t->line, "a '#' or '%%:' outside a directive the guard can read");
        return 0;
    case CUCO_TOK_IDENT: {
        int rc = check_banned_word(g, t->line, s, t->len);
        if (rc)
            return rc;
        if (tok_eq(g, t, "_Pragma") || tok_eq(g, t, "__pragma"))
            return check_pragma_operator(g, i, end);
        if (touches_std(g, i, end))
            return violation(g, t->line,
                             "opens namespace std or specializes a std:: template: a block may "
                             "not add to the standard library that the frozen code uses");
        if (tok_eq(g, t, "asm") || tok_eq(g, t, "__asm__") || tok_eq(g, t, "__asm")) {
            /* an asm statement runs inside a function; an asm label on a
             * declaration renames a symbol the frozen code may use */
            return sc->scope_depth > 0 ? 0 : violation(g, t->line, "asm outside a function body");
        }
        /* at file scope: inside a namespace or a class it names another one */
        if (sc->scope_depth == 0 && name_set_has(&g->frozen, s, t->len) &&
            !name_set_has(&g->seed_defs, s, t->len) && !is_qualified(g, i, start) &&
            is_function_definition(g, i, end))
            return violation(g, t->line,
                             "defines a function named '%.*s', a name the frozen code uses "
                             "(it would replace the library's or the harness's)",
                             (int)t->len, s);
        /* a file-scope variable of the frozen code declared again here is
         * the same object in C: the block could read or write it */
        if (sc->scope_depth == 0 && name_set_has(&g->frozen, s, t->len) &&
            !name_set_has(&g->seed_defs, s, t->len) && !is_qualified(g, i, start) &&
            is_declared_name(g, i, start, end))
            return violation(g, t->line,
                             "declares '%.*s' at file scope, a name the frozen code uses "
                             "(it would be the frozen code's own variable)",
                             (int)t->len, s);
        return 0;
    }
    default:
        return 0;
    }
}

/* Trigraphs (on with -std=c11) spell '#' and '\' the lexer does not see. */
static int check_trigraphs(guard *g, const cuco_block *b)
{
    for (size_t i = b->body_start; i + 2 < b->body_end; i++)
        if (g->cand[i] == '?' && g->cand[i + 1] == '?' && strchr("=/'()!<>-", g->cand[i + 2]) &&
            g->cand[i + 2]) {
            int line = b->start_line + 1;
            for (size_t k = b->body_start; k < i; k++)
                line += g->cand[k] == '\n';
            return violation(g, line, "a trigraph (??%c)", g->cand[i + 2]);
        }
    return 0;
}

static int check_block(guard *g, const cuco_block *b)
{
    int rc = check_trigraphs(g, b);
    if (rc)
        return rc;
    scan sc;
    memset(&sc, 0, sizeof sc);
    while (sc.start < g->lx.ntoks && g->lx.toks[sc.start].off < b->body_start)
        sc.start++;
    sc.end = sc.start;
    while (sc.end < g->lx.ntoks && g->lx.toks[sc.end].off < b->body_end)
        sc.end++;
    /* a comment, string or directive that runs past the END marker swallows
     * frozen text */
    if (sc.end > sc.start) {
        const cuco_tok *last = &g->lx.toks[sc.end - 1];
        if (last->off + last->len > b->body_end)
            return violation(g, last->line,
                             "this comment, string or directive runs past the block's end");
    }
    for (size_t i = sc.start; i < sc.end && !rc; i++)
        rc = check_code_token(g, i, &sc);
    if (!rc && sc.brace_depth > 0)
        rc = violation(g, b->end_line, "a '{' opened in the block is not closed in it");
    if (!rc && sc.if_depth > 0)
        rc = violation(g, sc.if_line, "an #if opened in the block is not closed in it");
    return rc;
}

/* Adds the identifiers of text's tokens outside g's blocks (all of them when
 * in_blocks is 0): identifiers and the words of directives (a frozen macro's
 * body). */
static int collect_words(guard *g, const cuco_lex *lx, int skip_blocks)
{
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if ((t->kind != CUCO_TOK_IDENT && t->kind != CUCO_TOK_PREPROC) ||
            (skip_blocks && block_of(g, t->off) >= 0))
            continue;
        if (add_words(&g->frozen, lx->src + t->off, t->len) != 0)
            return CUCO_ENOMEM;
    }
    return 0;
}

/* The identifiers of the frozen text: cand's outside its blocks and all of
 * extra's. extra_lx is filled (the views point into extra). */
static int collect_frozen(guard *g, const char *extra, cuco_lex *extra_lx)
{
    int rc = collect_words(g, &g->lx, 1);
    if (!rc && extra) {
        cuco_err le = CUCO_ERR_INIT;
        rc = cuco_lex_run(extra_lx, extra, strlen(extra), &le);
        cuco_err_clear(&le);
        if (!rc)
            rc = collect_words(g, extra_lx, 0);
    }
    return rc;
}

/* Adds the name a seed's "#define NAME" directive defines (a macro of the
 * block's that the frozen code may read, such as a knob). The views point
 * into the seed, the name is found in it again. */
static int add_seed_macro(guard *g, const char *s, size_t len)
{
    char *body = directive_text(s, len);
    if (!body)
        return CUCO_ENOMEM;
    size_t pos = 0, dlen, nlen;
    const char *dir = next_word(body, &pos, &dlen);
    const char *name = next_word(body, &pos, &nlen);
    int rc = 0;
    if (word_is(dir, dlen, "define") && nlen) {
        /* the same name within the directive's own text */
        for (size_t i = 0; i + nlen <= len && !rc; i++)
            if (!memcmp(s + i, name, nlen) && (i == 0 || !is_ident_char(s[i - 1])) &&
                (i + nlen == len || !is_ident_char(s[i + nlen]))) {
                rc = name_set_add(&g->seed_defs, s + i, nlen);
                break;
            }
    }
    free(body);
    return rc;
}

/* Notes what a directive of the seed's blocks allows a candidate: the macro
 * it defines, the header it includes. */
static int add_seed_directive(guard *g, const char *s, size_t len)
{
    char *norm = directive_normalized(s, len);
    if (!norm)
        return CUCO_ENOMEM;
    int rc = 0;
    if (!strncmp(norm, "include", 7) || !strncmp(norm, "import", 6))
        rc = cuco_strlist_push(&g->seed_includes, norm);
    else if (!strncmp(norm, "define", 6))
        rc = add_seed_macro(g, s, len);
    free(norm);
    return rc;
}

/* The functions, variables and macros the seed's blocks define (hooks and
 * knobs the frozen code uses). The seed's text must outlive the guard. */
static int collect_seed_defs(guard *g, const char *seed, cuco_lex *slx)
{
    cuco_block *sb = NULL;
    size_t sn = 0;
    cuco_err ie = CUCO_ERR_INIT;
    int rc = cuco_program_blocks(seed, &sb, &sn, &ie);
    if (rc == 0)
        rc = cuco_lex_run(slx, seed, strlen(seed), &ie);
    cuco_err_clear(&ie);
    if (rc) {
        free(sb);
        return rc == CUCO_ENOMEM ? rc : 0; /* an unreadable seed defines nothing */
    }
    guard sg = {.cand = seed, .lx = *slx, .blocks = sb, .nblocks = sn};
    for (size_t i = 0; i < slx->ntoks && rc == 0; i++) {
        const cuco_tok *t = &slx->toks[i];
        if (block_of(&sg, t->off) < 0)
            continue;
        if (t->kind == CUCO_TOK_IDENT &&
            (is_function_definition(&sg, i, slx->ntoks) || is_declared_name(&sg, i, 0, slx->ntoks)))
            rc = name_set_add(&g->seed_defs, seed + t->off, t->len);
        else if (t->kind == CUCO_TOK_PREPROC)
            rc = add_seed_directive(g, seed + t->off, t->len);
    }
    free(sb);
    return rc;
}

static void name_set_sort(name_set *set)
{
    if (set->n)
        qsort(set->items, set->n, sizeof set->items[0], view_cmp);
}

int cuco_patch_defined_functions(const char *text, cuco_strlist *out, cuco_err *e)
{
    guard g = {.cand = text, .e = e};
    int rc = cuco_lex_run(&g.lx, text, strlen(text), e);
    for (size_t i = 0; i < g.lx.ntoks && rc == 0; i++) {
        const cuco_tok *t = &g.lx.toks[i];
        if (!is_function_definition(&g, i, g.lx.ntoks))
            continue;
        char *name = cuco_strndup(text + t->off, t->len);
        rc = name && cuco_strlist_push(out, name) == 0
                 ? 0
                 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        free(name);
    }
    cuco_lex_free(&g.lx);
    return rc;
}

int cuco_patch_guard_blocks(const char *seed, const char *cand, const char *frozen_extra,
                            cuco_err *e)
{
    guard g = {.cand = cand, .e = e};
    cuco_lex seed_lx, extra_lx;
    memset(&seed_lx, 0, sizeof seed_lx);
    memset(&extra_lx, 0, sizeof extra_lx);
    int rc = cuco_program_blocks(cand, &g.blocks, &g.nblocks, e);
    if (rc)
        return cuco_err_prefix(e, "candidate program");
    rc = cuco_lex_run(&g.lx, cand, strlen(cand), e);
    if (!rc)
        rc = collect_frozen(&g, frozen_extra, &extra_lx);
    if (!rc && seed)
        rc = collect_seed_defs(&g, seed, &seed_lx);
    if (rc) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    name_set_sort(&g.frozen);
    name_set_sort(&g.seed_defs);
    for (size_t i = 0; i < g.nblocks && !rc; i++)
        rc = check_block(&g, &g.blocks[i]);
out:
    cuco_lex_free(&g.lx);
    cuco_lex_free(&seed_lx);
    cuco_lex_free(&extra_lx);
    free(g.blocks);
    free(g.frozen.items);
    free(g.seed_defs.items);
    cuco_strlist_free(&g.seed_includes);
    return rc;
}
