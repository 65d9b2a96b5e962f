/* grow.h: growing a heap array so it holds at least a given number of items.
 *
 * The arrays libcuco builds (tokens, events, sites, blocks) grow by doubling;
 * this is that step written once, with the size arithmetic checked. It leaves
 * reporting to the caller, which knows what it was building, so it takes no
 * struct cuco_err.
 */
#ifndef CUCO_GROW_H
#define CUCO_GROW_H

#include <stddef.h>

/* Makes room for at least `need` items of elem_size bytes (elem_size > 0) in
 * the array whose address is items_ptr (a T **, e.g. &list; the array is
 * NULL when *cap is 0). When need exceeds *cap, the capacity becomes *cap
 * doubled as often as needed (or min_cap, when *cap is 0; 0 means exactly
 * need), and the array is reallocated; items already there keep their
 * values. Returns 0, or CUCO_ENOMEM when the size would overflow or the
 * allocation fails, and CUCO_EINVAL for elem_size 0; on failure the array
 * and *cap are left untouched, still owned by the caller. The caller owns the
 * array throughout and frees it with free(). */
int cuco_grow(void *items_ptr, size_t *cap, size_t need, size_t elem_size, size_t min_cap);

/* Type-checked form: `items` is a T * lvalue and `cap` a size_t lvalue, as in
 * CUCO_GROW(list, cap, count + 1, 8). */
#define CUCO_GROW(items, cap, need, min_cap)                                                       \
    cuco_grow(&(items), &(cap), (need), sizeof *(items), (min_cap))

#endif
