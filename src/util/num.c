/* num.c: strict number parsing for options and environment variables
 * (strtol/strtod with every character accounted for and a range check). */
#include "cuco/num.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* Only blanks left after the number. */
static int rest_is_blank(const char *end)
{
    while (*end && isspace((unsigned char)*end))
        end++;
    return *end == '\0';
}

int cuco_parse_long(const char *what, const char *text, long min, long max, long *out, cuco_err *e)
{
    char *end = NULL;
    errno = 0;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || end == text || !rest_is_blank(end) || errno == ERANGE)
        return cuco_err_set(e, CUCO_EINVAL, "%s: '%s' is not an integer", what, text ? text : "");
    if (v < min || v > max)
        return cuco_err_set(e, CUCO_EINVAL, "%s: %ld is out of range [%ld, %ld]", what, v, min,
                            max);
    *out = v;
    return 0;
}

int cuco_parse_double(const char *what, const char *text, double min, double max, double *out,
                      cuco_err *e)
{
    char *end = NULL;
    errno = 0;
    double v = text ? strtod(text, &end) : 0;
    if (!text || end == text || !rest_is_blank(end) || errno == ERANGE || !isfinite(v))
        return cuco_err_set(e, CUCO_EINVAL, "%s: '%s' is not a number", what, text ? text : "");
    if (v < min || v > max)
        return cuco_err_set(e, CUCO_EINVAL, "%s: %g is out of range [%g, %g]", what, v, min, max);
    *out = v;
    return 0;
}

int cuco_env_long(const char *name, long min, long max, long *out, cuco_err *e)
{
    const char *v = getenv(name);
    return v && *v ? cuco_parse_long(name, v, min, max, out, e) : 0;
}

int cuco_env_double(const char *name, double min, double max, double *out, cuco_err *e)
{
    const char *v = getenv(name);
    return v && *v ? cuco_parse_double(name, v, min, max, out, e) : 0;
}
