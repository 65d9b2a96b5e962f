/* grow.c: the doubling step for growable heap arrays (see cuco/grow.h). */
#include "cuco/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/err.h"

int cuco_grow(void *items_ptr, size_t *cap, size_t need, size_t elem_size, size_t min_cap)
{
    if (elem_size == 0)
        return CUCO_EINVAL;
    if (need <= *cap)
        return 0;
    size_t max_items = SIZE_MAX / elem_size;
    if (need > max_items)
        return CUCO_ENOMEM;
    size_t grown_cap = *cap ? *cap : min_cap;
    if (grown_cap == 0 || grown_cap > max_items)
        grown_cap = need;
    while (grown_cap < need)
        grown_cap = grown_cap > max_items / 2 ? max_items : grown_cap * 2;
    /* items_ptr points at a T *; it is read and written as bytes so that no
     * T * object is accessed through a void * lvalue. */
    void *items;
    memcpy(&items, items_ptr, sizeof items);
    void *grown = realloc(items, grown_cap * elem_size);
    if (!grown)
        return CUCO_ENOMEM;
    memcpy(items_ptr, &grown, sizeof grown);
    *cap = grown_cap;
    return 0;
}
