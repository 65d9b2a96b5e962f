/* buf.h: a growable byte/string buffer, always NUL-terminated.
 * The buffer owns data; cuco_buf_free() releases it, cuco_buf_detach() hands
 * it to the caller (who then frees it with free()).
 */
#ifndef CUCO_BUF_H
#define CUCO_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct cuco_buf {
    char *data; /* NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} cuco_buf;

#define CUCO_BUF_INIT                                                                              \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

int cuco_buf_reserve(cuco_buf *b, size_t extra);
int cuco_buf_append(cuco_buf *b, const void *data, size_t n);
int cuco_buf_puts(cuco_buf *b, const char *s);
int cuco_buf_putc(cuco_buf *b, char c);
int cuco_buf_printf(cuco_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cuco_buf_vprintf(cuco_buf *b, const char *fmt, va_list ap);
void cuco_buf_reset(cuco_buf *b); /* len = 0, keeps memory */
void cuco_buf_free(cuco_buf *b);
/* Returns the string (never NULL: "" for an empty buffer), caller frees; the buffer is emptied. */
char *cuco_buf_detach(cuco_buf *b);
/* Returns b->data or "" when empty. */
const char *cuco_buf_str(const cuco_buf *b);

/* Small string helpers. Returned strings are malloc'd: caller frees. */
char *cuco_strdup(const char *s); /* NULL-safe */
char *cuco_strndup(const char *s, size_t n);
char *cuco_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cuco_str_starts_with(const char *s, const char *prefix);
int cuco_str_ends_with(const char *s, const char *suffix);
/* Trims ASCII whitespace in place; returns s. */
char *cuco_str_trim(char *s);

#endif
