/* bound_int.h: what the files of src/bound share and nobody else needs: a
 * small token scanner for C/C++/CUDA source, used by the variant builder
 * (statement and call spans) and by the verification audit (conditions,
 * assignments, functions). */
#ifndef CUCO_BOUND_INT_H
#define CUCO_BOUND_INT_H

#include <stddef.h>

#include "cuco/err.h"

enum bl_kind { BL_IDENT, BL_NUMBER, BL_STRING, BL_CHAR, BL_PUNCT, BL_PP };

typedef struct bl_token {
    enum bl_kind kind;
    size_t off; /* byte offset in the text */
    size_t len;
    int line;  /* 1-based */
    int match; /* index of the matching bracket for ( ) [ ] { }, else -1 */
} bl_token;

typedef struct bl_func {
    char *name;    /* owned */
    int open;      /* token index of the body's '{' */
    int close;     /* its '}' */
    int params_lp; /* token index of the parameter list's '(' */
} bl_func;

typedef struct bl_source {
    char *path; /* owned */
    char *text; /* owned, NUL-terminated */
    size_t len;
    bl_token *tok; /* owned */
    int n;
    bl_func *funcs; /* owned */
    int n_funcs;
} bl_source;

/* Scans src->text (src->len bytes; src owns path and text, which
 * bl_source_free() frees with the tokens). Comments are
 * dropped; a preprocessor line is one BL_PP token. Brackets are matched
 * (unbalanced ones keep match = -1). Never fails on odd input. */
int bl_scan(bl_source *src, cuco_err *e);
void bl_source_free(bl_source *src);

/* Token text helpers. */
int bl_is(const bl_source *s, int i, const char *text);
int bl_is_ident(const bl_source *s, int i);
char *bl_text(const bl_source *s, int i); /* caller frees */
/* The function whose body holds token i, or NULL. */
const bl_func *bl_func_at(const bl_source *s, int i);

/* A host NCCL call that receives data, and whether the data it receives is
 * read anywhere (audit_comm.c). */
typedef struct bl_comm_use {
    int src; /* index of the source holding the call */
    int line;
    char *call;   /* "ncclAllReduce" (owned) */
    char *buffer; /* the receive argument's text (owned) */
    int read;     /* 1: a read of the buffer was found (or it cannot be followed) */
    int read_src; /* where the first read is (source index, -1 when none) */
    int read_line;
} bl_comm_use;

/* Every receiving NCCL call in src[0..n_src) with its verdict. *out: free
 * with bl_comm_uses_free(). Never fails: out of memory gives a shorter list. */
int bl_audit_comm(const bl_source *src, int n_src, bl_comm_use **out, size_t *n_out);
void bl_comm_uses_free(bl_comm_use *u, size_t n);

#endif
