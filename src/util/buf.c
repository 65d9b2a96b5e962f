/* buf.c: growable NUL-terminated buffer and small string helpers. */
#include "cuco/buf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cuco_buf_reserve(cuco_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int cuco_buf_append(cuco_buf *b, const void *data, size_t n)
{
    if (cuco_buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int cuco_buf_puts(cuco_buf *b, const char *s)
{
    return cuco_buf_append(b, s, strlen(s));
}

int cuco_buf_putc(cuco_buf *b, char c)
{
    return cuco_buf_append(b, &c, 1);
}

int cuco_buf_vprintf(cuco_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || cuco_buf_reserve(b, (size_t)n) != 0)
        return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int cuco_buf_printf(cuco_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void cuco_buf_reset(cuco_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void cuco_buf_free(cuco_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *cuco_buf_detach(cuco_buf *b)
{
    char *s = b->data ? b->data : cuco_strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

const char *cuco_buf_str(const cuco_buf *b)
{
    return b->data ? b->data : "";
}

char *cuco_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *cuco_strndup(const char *s, size_t n)
{
    return s ? strndup(s, n) : NULL;
}

char *cuco_sprintf(const char *fmt, ...)
{
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    return cuco_buf_detach(&b);
}

int cuco_str_starts_with(const char *s, const char *prefix)
{
    return s && prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

int cuco_str_ends_with(const char *s, const char *suffix)
{
    if (!s || !suffix)
        return 0;
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

char *cuco_str_trim(char *s)
{
    if (!s)
        return s;
    char *p = s;
    while (*p && isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n > 0 && isspace((unsigned char)p[n - 1]))
        n--;
    memmove(s, p, n);
    s[n] = '\0';
    return s;
}
