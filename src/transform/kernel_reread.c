/* kernel_reread.c: whether the blocks of a kernel each walk the same range
 * of an argument (kernel_launch.h, kernel_launch_rereads): an attention's
 * "for (k = threadIdx.x; k < nkeys; k += blockDim.x) s += keys[k];" does,
 * and so does "for (j = 0; j < nkeys; j++) s = dot(q, keys + j * dim);"
 * (the row handed to a device function); a grid-stride loop or a loop over
 * the block's own row does not. warm_read takes its knob's default from
 * it. */
#include "kernel_launch.h"

#include "cuco/buf.h"
#include "cuco/workload.h"

#include <stdlib.h>

static int block_word(const sview *v, size_t i, const cuco_strlist *set)
{
    if (is(v, i, "blockIdx") || is(v, i, "gridDim"))
        return 1;
    return ident(v, i) && in_list(v, i, set->items, set->n);
}

/* Whether tokens [a, b) name a block index or a name set from one. */
static int names_block(const sview *v, size_t a, size_t b, const cuco_strlist *set)
{
    for (size_t i = a; i < b; i++)
        if (block_word(v, i, set))
            return 1;
    return 0;
}

/* Names of the body [a, b) set (declared or assigned) from an expression
 * naming a block index, to a fixed point, into set. */
static int block_names(const sview *v, size_t a, size_t b, cuco_strlist *set)
{
    for (size_t grown = 1; grown;) {
        grown = 0;
        for (size_t i = a; i + 1 < b; i++) {
            if (!ident(v, i) || !is(v, i + 1, "=") || block_word(v, i, set))
                continue;
            size_t e = i + 2;
            while (e < b && !is(v, e, ";") && !is(v, e, ","))
                e++;
            if (!names_block(v, i + 2, e, set))
                continue;
            char *name = cuco_strndup(v->src + tk(v, i)->off, tk(v, i)->len);
            if (!name || cuco_strlist_push(set, name) != 0) {
                free(name);
                return CUCO_ENOMEM;
            }
            free(name);
            grown = 1;
        }
    }
    return 0;
}

/* The end of the operand that starts at token i: the next ',', ')', ']' or
 * ';' outside brackets, or end. */
static size_t operand_end(const sview *v, size_t i, size_t end)
{
    while (i < end && !is(v, i, ",") && !is(v, i, ")") && !is(v, i, "]") && !is(v, i, ";"))
        i = is(v, i, "(") || is(v, i, "[") ? close_of(v, i) + 1 : i + 1;
    return i < end ? i : end;
}

/* Whether [a, b) subscripts a parameter of bits args (of the list at
 * params), or a member of it, with an index naming no block index, or
 * moves it by such an offset (`keys + j * dim`, handed to a device
 * function that reads the row). */
static int subscripts_whole(const sview *v, size_t a, size_t b, size_t params, unsigned long args,
                            const cuco_strlist *set)
{
    for (size_t i = a; i < b; i++) {
        if (!ident(v, i) || (i > a && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        int k = param_position(v, params, v->src + tk(v, i)->off, tk(v, i)->len);
        if (k < 0 || k >= (int)(8 * sizeof args) || !((args >> k) & 1UL))
            continue;
        size_t j = i;
        while ((is(v, j + 1, ".") || is(v, j + 1, "->")) && ident(v, j + 2))
            j += 2;
        if (is(v, j + 1, "[") && !names_block(v, j + 2, close_of(v, j + 1), set))
            return 1;
        if (is(v, j + 1, "+") && !names_block(v, j + 2, operand_end(v, j + 2, b), set))
            return 1;
    }
    return 0;
}

/* The end of the statement that starts at token i (one past it). */
static size_t stmt_end(const sview *v, size_t i, size_t end)
{
    if (is(v, i, "{"))
        return close_of(v, i) + 1;
    while (i < end && !is(v, i, ";"))
        i = is(v, i, "(") || is(v, i, "[") || is(v, i, "{") ? close_of(v, i) + 1 : i + 1;
    return i < end ? i + 1 : end;
}

int kernel_launch_rereads(const sview *v, size_t a, size_t b, unsigned long args)
{
    size_t open = v->n, bare = kernel_launch_name(v, a, b, &open);
    size_t params = bare < v->n ? kernel_launch_params(v, bare) : v->n;
    size_t close = params < v->n ? close_of(v, params) : v->n;
    if (close >= v->n || !is(v, close + 1, "{") || !args)
        return 0;
    size_t body = close + 1, end = close_of(v, body);
    cuco_strlist set = {0};
    int rc = block_names(v, body, end, &set), found = 0;
    for (size_t i = body; rc == 0 && !found && i + 1 < end; i++) {
        if (!is(v, i, "for") || !is(v, i + 1, "("))
            continue;
        size_t hc = close_of(v, i + 1);
        if (hc >= end || is(v, i + 2, ";") || names_block(v, i + 2, hc, &set))
            continue;
        found = subscripts_whole(v, hc + 1, stmt_end(v, hc + 1, end), params, args, &set);
    }
    cuco_strlist_free(&set);
    return rc == 0 && found;
}
