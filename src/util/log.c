/* log.c: leveled logging to stderr, level from CUCO_LOG or the CLI. */
#include "cuco/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1;

static enum cuco_log_level level_from_env(void)
{
    const char *v = getenv("CUCO_LOG");
    if (!v)
        return CUCO_LOG_WARN;
    if (!strcmp(v, "error"))
        return CUCO_LOG_ERROR;
    if (!strcmp(v, "info"))
        return CUCO_LOG_INFO;
    if (!strcmp(v, "debug"))
        return CUCO_LOG_DEBUG;
    return CUCO_LOG_WARN;
}

void cuco_log_set_level(enum cuco_log_level level)
{
    log_level = (int)level;
}

enum cuco_log_level cuco_log_get_level(void)
{
    if (log_level < 0)
        log_level = (int)level_from_env();
    return (enum cuco_log_level)log_level;
}

void cuco_log(enum cuco_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > cuco_log_get_level())
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuco: %s: ", names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
