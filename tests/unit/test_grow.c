/* test_grow.c: the doubling step for growable arrays (cuco_grow, CUCO_GROW). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>

#include "cuco/err.h"
#include "cuco/grow.h"

/* The allocation-failure test asks for an impossible size; under
 * AddressSanitizer that must come back as NULL rather than abort the run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

typedef struct wide {
    double x, y;
    int tag;
} wide;

static void test_grow_first_allocation_takes_min_cap(void **state)
{
    (void)state;
    wide *items = NULL;
    size_t cap = 0;
    assert_int_equal(CUCO_GROW(items, cap, 1, 8), 0);
    assert_non_null(items);
    assert_int_equal(cap, 8);
    /* A first request above min_cap doubles from min_cap until it fits. */
    int *more = NULL;
    size_t more_cap = 0;
    assert_int_equal(CUCO_GROW(more, more_cap, 20, 8), 0);
    assert_int_equal(more_cap, 32);
    /* min_cap 0: exactly what was asked for. */
    char *exact = NULL;
    size_t exact_cap = 0;
    assert_int_equal(CUCO_GROW(exact, exact_cap, 5, 0), 0);
    assert_int_equal(exact_cap, 5);
    free(items);
    free(more);
    free(exact);
}

static void test_grow_doubles_and_keeps_items(void **state)
{
    (void)state;
    wide *items = NULL;
    size_t n = 0, cap = 0, grew = 0;
    for (int i = 0; i < 1000; i++) {
        size_t before = cap;
        assert_int_equal(CUCO_GROW(items, cap, n + 1, 4), 0);
        if (cap != before) {
            assert_int_equal(cap, before ? before * 2 : 4);
            grew++;
        }
        items[n++] = (wide){i, -i, i * 3};
    }
    assert_int_equal(cap, 1024);
    assert_int_equal(grew, 9); /* 4, 8, ..., 1024 */
    for (int i = 0; i < 1000; i++) {
        assert_true(items[i].x == i && items[i].y == -i);
        assert_int_equal(items[i].tag, i * 3);
    }
    free(items);
}

static void test_grow_leaves_enough_room_alone(void **state)
{
    (void)state;
    int *none = NULL;
    size_t none_cap = 0;
    assert_int_equal(CUCO_GROW(none, none_cap, 0, 8), 0);
    assert_null(none);
    assert_int_equal(none_cap, 0);

    size_t cap = 16;
    int *items = malloc(cap * sizeof *items);
    assert_non_null(items);
    int *before = items;
    assert_int_equal(CUCO_GROW(items, cap, 16, 8), 0);
    assert_ptr_equal(items, before);
    assert_int_equal(cap, 16);
    free(items);
}

static void test_grow_refuses_overflow(void **state)
{
    (void)state;
    size_t cap = 4;
    wide *items = malloc(cap * sizeof *items);
    assert_non_null(items);
    items[3].tag = 42;
    wide *before = items;
    assert_int_equal(CUCO_GROW(items, cap, SIZE_MAX / sizeof *items + 1, 4), CUCO_ENOMEM);
    assert_int_equal(CUCO_GROW(items, cap, SIZE_MAX, 4), CUCO_ENOMEM);
    assert_ptr_equal(items, before);
    assert_int_equal(cap, 4);
    assert_int_equal(items[3].tag, 42);
    /* A min_cap past what can be counted falls back to the need itself. */
    wide *fresh = NULL;
    size_t fresh_cap = 0;
    assert_int_equal(CUCO_GROW(fresh, fresh_cap, 3, SIZE_MAX), 0);
    assert_int_equal(fresh_cap, 3);
    free(fresh);
    free(items);
}

static void test_grow_failed_allocation_leaves_array(void **state)
{
    (void)state;
    size_t cap = 4;
    char *items = malloc(cap);
    assert_non_null(items);
    items[0] = 'a';
    items[3] = 'd';
    char *before = items;
    /* Countable, but no machine can hand out half the address space. */
    assert_int_equal(CUCO_GROW(items, cap, SIZE_MAX / 2, 4), CUCO_ENOMEM);
    assert_ptr_equal(items, before);
    assert_int_equal(cap, 4);
    assert_int_equal(items[0], 'a');
    assert_int_equal(items[3], 'd');
    /* Still usable: a later, sane request grows it. */
    assert_int_equal(CUCO_GROW(items, cap, 5, 4), 0);
    assert_int_equal(cap, 8);
    assert_int_equal(items[3], 'd');
    free(items);
}

static void test_grow_rejects_zero_elem_size(void **state)
{
    (void)state;
    void *items = NULL;
    size_t cap = 0;
    assert_int_equal(cuco_grow(&items, &cap, 4, 0, 8), CUCO_EINVAL);
    assert_null(items);
    assert_int_equal(cap, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_first_allocation_takes_min_cap),
        cmocka_unit_test(test_grow_doubles_and_keeps_items),
        cmocka_unit_test(test_grow_leaves_enough_room_alone),
        cmocka_unit_test(test_grow_refuses_overflow),
        cmocka_unit_test(test_grow_failed_allocation_leaves_array),
        cmocka_unit_test(test_grow_rejects_zero_elem_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
