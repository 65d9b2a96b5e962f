/* tx_test.h: what the transform's unit tests ask of a transform result.
 * Include after cmocka.h (tx_transform asserts). */
#ifndef CUCO_TESTS_TX_TEST_H
#define CUCO_TESTS_TX_TEST_H

#include <string.h>

#include "cuco/buf.h"
#include "cuco/transform.h"

/* Whether a note of this kind (at line, or any line when 0) holds needle. */
static inline int tx_has_note(const cuco_tx_notes *l, const char *kind, int line,
                              const char *needle)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].kind, kind) == 0 && (line == 0 || l->items[i].line == line) &&
            strstr(l->items[i].text, needle))
            return 1;
    return 0;
}

static inline int tx_has_schedule_note(const cuco_tx_notes *l, int line, const char *needle)
{
    return tx_has_note(l, "schedule", line, needle);
}

/* Transforms text with the rules; the result must not be refused. */
static inline void tx_transform(const char *text, cuco_tx_result *r)
{
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", text, r, &e), 0);
    assert_int_equal(r->refused, 0);
    assert_non_null(r->program);
    cuco_err_clear(&e);
}

/* The same with the manifest's declarations sem[0..n). */
static inline void tx_transform_declared(const char *text, const cuco_semantic *sem, size_t n,
                                         cuco_tx_result *r)
{
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules_declared("p.cu", text, sem, n, r, &e), 0);
    assert_int_equal(r->refused, 0);
    assert_non_null(r->program);
    cuco_err_clear(&e);
}

/* text with its first `from` replaced by `to` (owned; from must be there). */
static inline char *tx_replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    char *out = cuco_sprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    assert_non_null(out);
    return out;
}

#endif
