/* kernel_launch.h: a statement that launches a kernel the manifest declares
 * rows_independent or attention (cuco/semantics.h), read for schedule (b)'s
 * kernel splits: where its name, launch configuration and arguments lie,
 * which parameter holds the row (key) count, which are indexed by row (key),
 * and for attention where its output, log-sum-exp and first key's index go. */
#ifndef CUCO_TRANSFORM_KERNEL_LAUNCH_H
#define CUCO_TRANSFORM_KERNEL_LAUNCH_H

#include "cuco/semantics.h"
#include "sview.h"

#include <stddef.h>

typedef struct kernel_launch {
    size_t name;             /* the kernel's first name token ("ns::k<float>" starts at ns) */
    size_t bare;             /* its own name's token (k) */
    size_t lt;               /* its '<<<' */
    size_t args;             /* the '(' of its arguments */
    int nparams;             /* the kernel's parameters, as many as the launch's arguments */
    int rows_pos;            /* the parameter that holds the row count */
    unsigned long rows_mask; /* bit i: parameter i is indexed by row */
    /* per parameter: 0, a row argument with as many elements per row as the
     * gathered (or reduced) one; k + 1: its elements per row are parameter
     * k's value (args= "y:dout") */
    signed char width_from[64];
    int grid_rows;          /* 1: the launch's grid is its row count's argument (one block a row) */
    int decl_line;          /* the declaration's line in the manifest */
    size_t params;          /* the '(' of the kernel's parameters in its __global__ definition or
                             * declaration; v->n when they come from param_list */
    const char *param_list; /* the declaration's params= (borrowed), or NULL */
    const cuco_semantic *decl; /* the declaration (borrowed from the caller's list) */
    /* attention (decl->term "attention"): rows are keys; first_key= (-1: none),
     * out= and lse= parameters */
    int attention, first_pos, out_pos, lse_pos;
    /* attention's queries (moving work between ranks): the query count's and
     * first_query='s parameters (-1: not declared), causal= (a parameter,
     * -1 absent, -2 written as true), the grid dimension over the queries
     * (0 x, 1 y, 2 z; -1 not declared), bit i: parameter i is indexed by
     * query; query_terms is 1 when every one but causal= is declared, lend
     * when a mask is too (without one no rank sees more keys than another) */
    int queries_pos, first_query_pos, causal_pos, query_grid, query_terms, lend;
    unsigned long query_mask;
} kernel_launch;

/* The bare name token of the kernel whose launch statement [a, b) is
 * ("k<<<...>>>(...);", "ns::k<float><<<...>>>(...);") and the '(' of its
 * arguments (*args); v->n when it is no launch. */
size_t kernel_launch_name(const sview *v, size_t a, size_t b, size_t *args);

/* The '(' of the parameters of the __global__ kernel named like token bare:
 * its one definition in the text, else its declaration; v->n when neither
 * (or when it is defined more than once). */
size_t kernel_launch_params(const sview *v, size_t bare);

/* Whether every block of the kernel launched at statement [a, b) (defined
 * in the text) may walk the same range of an argument of bits args: a for
 * loop whose header names no block index (blockIdx, gridDim, or a name set
 * from them) subscripts such a parameter (or a member of it) with an index
 * that names none either. 0 when not, or when the body is not in the text.
 * kernel_reread.c. */
int kernel_launch_rereads(const sview *v, size_t a, size_t b, unsigned long args);

/* Reads statement [a, b) as one launch `k<<<...>>>(...);` of a kernel that a
 * declaration of sem[0..n) calls rows_independent (rows=, args=) or
 * attention (keys=, args=, out=, lse=, out_rows=, out_width=, first_key=),
 * with those parameters found among the kernel's parameters (its __global__
 * definition or declaration in the same text, else the declaration's
 * params= list of names). Returns 1 when it is (*kl filled); 0 when
 * not, with *why set (owned, NULL when the statement launches no kernel);
 * negative when out of memory. */
int kernel_launch_rows(const sview *v, size_t a, size_t b, const cuco_semantic *sem, size_t n,
                       kernel_launch *kl, char **why);

/* The glue's RowSpec aggregate for kl: "cuco_tx::RowSpec{3, 0x5UL, 1,
 * {0, 0, 6}}" (rows position, row bits, grid_rows, widths; the widths left
 * out when every row argument has the reference width). NULL when out of
 * memory. */
char *kernel_launch_spec(const kernel_launch *kl);

/* The text that replaces the launch from its name through the '(' of its
 * arguments: "<head>, kernel, grid, block, smem, stream, " (smem and stream
 * 0 when the launch leaves them out), head being the glue call's opening
 * ("cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{...}"). NULL
 * when out of memory. */
/* The glue's AttnSpec aggregate and output shape for an attention launch:
 * "cuco_tx::AttnSpec{<RowSpec>, first, out, lse, {queries, first_query,
 * causal, grid, 0xMASKUL}}, (size_t)(ROWS), (size_t)(WIDTH),
 * (size_t)(QWIDTH)", ROWS, WIDTH and QWIDTH being out_rows=, out_width=
 * and query_width= (0 without it) with each of the kernel's parameter
 * names replaced by the launch's argument. NULL when out of memory. */
char *kernel_launch_attention_spec(const sview *v, const kernel_launch *kl);

char *kernel_launch_call(const sview *v, const kernel_launch *kl, const char *head);

/* When the call named at i is of a lambda its function defines before it
 * that only launches its first parameter with its other parameters (`auto
 * launch = [&](auto k, auto... a) { k<<<g, 256, 0, stream>>>(a...); };`):
 * the '<<<' of that launch, whose configuration gives the stream; v->n
 * otherwise. */
size_t kernel_lambda_launch(const sview *v, size_t i);

#endif
