/* log.h: leveled logging to stderr. Level from cuco_log_set_level() or the
 * CUCO_LOG environment variable (error, warn, info, debug). */
#ifndef CUCO_LOG_H
#define CUCO_LOG_H

enum cuco_log_level { CUCO_LOG_ERROR = 0, CUCO_LOG_WARN, CUCO_LOG_INFO, CUCO_LOG_DEBUG };

void cuco_log_set_level(enum cuco_log_level level);
enum cuco_log_level cuco_log_get_level(void);
void cuco_log(enum cuco_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define cuco_error(...) cuco_log(CUCO_LOG_ERROR, __VA_ARGS__)
#define cuco_warn(...) cuco_log(CUCO_LOG_WARN, __VA_ARGS__)
#define cuco_info(...) cuco_log(CUCO_LOG_INFO, __VA_ARGS__)
#define cuco_debug(...) cuco_log(CUCO_LOG_DEBUG, __VA_ARGS__)

#endif
