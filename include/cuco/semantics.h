/* semantics.h: what a kernel or a call means when its code does not show it,
 * declared in a workload's manifest (key `semantics`) in a small vocabulary
 * any user can write for their own kernels:
 *
 *   semantics:
 *     - kernel: attn_fwd          # a kernel (or host function) of the program
 *       is: attention
 *       over: keys                # optional parameters of the term
 *       merge: log_sum_exp
 *     - call: ncclAllToAll        # or an NCCL call of the program
 *       is: routing_permutation
 *
 * The transform reports each declaration and what it admits; the LLM
 * mutators get them as strategy notes. The vocabulary is cuco's, never a
 * workload's: src/workload/semantics.c lists every term. */
#ifndef CUCO_SEMANTICS_H
#define CUCO_SEMANTICS_H

#include <stddef.h>

#include "cuco/buf.h"

/* One declaration of the manifest. */
typedef struct cuco_semantic {
    char *kernel; /* the kernel or function it describes, or NULL */
    char *call;   /* the NCCL call it describes, or NULL */
    char *term;   /* a term of the vocabulary */
    char **keys;  /* its parameters (n_params), values in values */
    char **values;
    size_t n_params;
    int line; /* of the declaration in the manifest */
} cuco_semantic;

/* A term of the vocabulary. params: "name=v1|v2 name2=*" (* any word). */
typedef struct cuco_semantic_term {
    const char *name;
    const char *applies_to; /* "kernel" or "call" */
    const char *params;
    const char *means;    /* what it says about the code */
    const char *admits;   /* the overlap it admits */
    const char *schedule; /* the transform's schedule that uses it, or NULL: a strategy
                             note for the LLM mutators only */
} cuco_semantic_term;

/* The vocabulary (NULL-terminated by name). */
const cuco_semantic_term *cuco_semantic_terms(void);
const cuco_semantic_term *cuco_semantic_term_find(const char *name);

/* Checks a declaration against the vocabulary: NULL when it is valid, else a
 * message (static or *owned, caller frees *owned) naming what is wrong and
 * the valid terms or values. */
const char *cuco_semantic_check(const cuco_semantic *s, char **owned);

/* The value of parameter key, or NULL. */
const char *cuco_semantic_param(const cuco_semantic *s, const char *key);

/* One line per declaration: "kernel attn_fwd is attention (over=keys,
 * merge=log_sum_exp): <means>; admits <admits>[; schedule S | ; a strategy
 * note for the LLM mutators]" appended to out, each after prefix. */
void cuco_semantics_describe(const cuco_semantic *s, size_t n, const char *prefix, cuco_buf *out);

void cuco_semantic_free(cuco_semantic *s);

#endif
