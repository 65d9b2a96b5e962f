/* err.c: the error context (see include/cuco/err.h). */
#include "cuco/err.h"
#include "cuco/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int err_vset(cuco_err *e, int code, const char *file, int line, const char *fmt, va_list ap)
{
    if (!e)
        return code;
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    free(e->msg);
    free(e->file);
    e->msg = cuco_buf_detach(&b);
    e->file = file ? cuco_strdup(file) : NULL;
    e->line = line;
    e->code = code;
    return code;
}

int cuco_err_set(cuco_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = err_vset(e, code, NULL, 0, fmt, ap);
    va_end(ap);
    return rc;
}

int cuco_err_set_at(cuco_err *e, int code, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = err_vset(e, code, file, line, fmt, ap);
    va_end(ap);
    return rc;
}

int cuco_err_errno(cuco_err *e, const char *fmt, ...)
{
    int saved = errno;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    cuco_buf_printf(&b, ": %s", strerror(saved));
    int rc = cuco_err_set(e, CUCO_ESYS, "%s", cuco_buf_str(&b));
    cuco_buf_free(&b);
    return rc;
}

int cuco_err_prefix(cuco_err *e, const char *fmt, ...)
{
    if (!e)
        return CUCO_EINVAL;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    cuco_buf_printf(&b, ": %s", e->msg ? e->msg : "(no detail)");
    free(e->msg);
    e->msg = cuco_buf_detach(&b);
    if (e->code == 0)
        e->code = CUCO_EINVAL;
    return e->code;
}

void cuco_err_clear(cuco_err *e)
{
    if (!e)
        return;
    free(e->msg);
    free(e->file);
    e->msg = NULL;
    e->file = NULL;
    e->line = 0;
    e->code = 0;
}

void cuco_err_print(const cuco_err *e, const char *prefix, FILE *out)
{
    if (prefix)
        fprintf(out, "%s: ", prefix);
    if (e && e->file && e->line > 0)
        fprintf(out, "%s:%d: ", e->file, e->line);
    else if (e && e->file)
        fprintf(out, "%s: ", e->file);
    fprintf(out, "%s\n", cuco_err_msg(e));
}

const char *cuco_err_msg(const cuco_err *e)
{
    return (e && e->msg) ? e->msg : "(no error)";
}
