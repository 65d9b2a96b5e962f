/* analyze.h: a tolerant CUDA C++ lexer and the extractor behind 'cuco analyze'.
 *
 * The lexer turns source text into tokens with exact byte offsets and
 * line/column; it never fails on bad input but reports unterminated
 * constructs as diagnostics. The extractor reads one or more files and builds
 * a JSON description (schema in docs/analyze.md) of NCCL communicators,
 * collectives and point-to-point groups, allocations, kernel and library
 * launches, streams/events and the dependency graph, with spans precise
 * enough for a rewriter to replace or remove each call statement.
 */
#ifndef CUCO_ANALYZE_H
#define CUCO_ANALYZE_H

#include "cuco/buf.h"
#include "cuco/err.h"
#include <jansson.h>
#include <stddef.h>

enum cuco_tok_kind {
    CUCO_TOK_IDENT,
    CUCO_TOK_NUMBER,
    CUCO_TOK_STRING, /* "..." (with prefixes) and raw strings */
    CUCO_TOK_CHAR,
    CUCO_TOK_PUNCT,   /* operators and punctuation, incl. <<< and >>> */
    CUCO_TOK_PREPROC, /* a whole preprocessor line (continuations included) */
    CUCO_TOK_COMMENT,
};

typedef struct cuco_tok {
    enum cuco_tok_kind kind;
    size_t off;              /* byte offset of the first byte */
    size_t len;              /* bytes */
    int line;                /* 1-based */
    int col;                 /* 1-based, in bytes */
    size_t dir_off, dir_len; /* PREPROC only: the directive name ("define") */
} cuco_tok;

typedef struct cuco_lex_diag {
    int line, col;
    char *msg; /* owned */
} cuco_lex_diag;

typedef struct cuco_lex {
    const char *src; /* borrowed: must outlive the lexer result */
    size_t src_len;
    cuco_tok *toks; /* owned */
    size_t ntoks;
    cuco_lex_diag *diags; /* owned */
    size_t ndiags;
} cuco_lex;

/* Lexes src[0..len). Always succeeds unless memory runs out (CUCO_ENOMEM).
 * Free with cuco_lex_free(). */
int cuco_lex_run(cuco_lex *lx, const char *src, size_t len, cuco_err *e);
void cuco_lex_free(cuco_lex *lx);
/* Returns 1 when token t's text equals s. */
int cuco_tok_is(const cuco_lex *lx, const cuco_tok *t, const char *s);
/* Returns 1 when token t of the text src is a preprocessor directive named
 * d (`#define`: "define"). */
int cuco_tok_directive(const char *src, const cuco_tok *t, const char *d);

/* Analyzes the given files (and folders: every .cu/.cuh/.cpp/.cc/.c/.h in
 * them; local #include "..." files are followed). On success *out is a new
 * JSON object (caller json_decref()s). An unreadable file gives CUCO_EIO with
 * the file in e. */
int cuco_analyze_paths(const char *const *paths, size_t npaths, json_t **out, cuco_err *e);
/* Appends a human summary of an analysis (from cuco_analyze_paths) to b. */
int cuco_analyze_summary(const json_t *analysis, cuco_buf *b);

#endif
