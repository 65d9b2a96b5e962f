/* tx_notes.c: the report lines of a transform (cuco_tx_notes) and its result. */
#include "cuco/transform.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"

int cuco_tx_notes_add(cuco_tx_notes *l, int line, const char *kind, const char *fmt, ...)
{
    cuco_tx_note *items = realloc(l->items, (l->n + 1) * sizeof(*items));
    if (!items)
        return CUCO_ENOMEM;
    l->items = items;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *kind_copy = cuco_strdup(kind);
    if (rc != 0 || !kind_copy) {
        cuco_buf_free(&b);
        free(kind_copy);
        return CUCO_ENOMEM;
    }
    l->items[l->n].line = line;
    l->items[l->n].kind = kind_copy;
    l->items[l->n].text = cuco_buf_detach(&b);
    l->n++;
    return 0;
}

void cuco_tx_notes_free(cuco_tx_notes *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].kind);
        free(l->items[i].text);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

size_t cuco_tx_notes_count(const cuco_tx_notes *l, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += strcmp(l->items[i].kind, kind) == 0;
    return n;
}

void cuco_tx_result_free(cuco_tx_result *r)
{
    free(r->program);
    r->program = NULL;
    cuco_tx_notes_free(&r->notes);
}
