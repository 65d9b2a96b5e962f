/* num.h: strict parsing of numbers from text (options, environment
 * variables), so that "5m" or "12abc" is an error instead of 5 or 12. */
#ifndef CUCO_NUM_H
#define CUCO_NUM_H

#include "cuco/err.h"

/* Parses all of text (surrounding blanks allowed) as a decimal integer in
 * [min, max]. Returns 0 and *out, or CUCO_EINVAL with a message naming what
 * (e.g. "--slots" or "CUCO_LLM_RETRIES") and the text. */
int cuco_parse_long(const char *what, const char *text, long min, long max, long *out, cuco_err *e);
/* The same for a finite floating-point number in [min, max]. */
int cuco_parse_double(const char *what, const char *text, double min, double max, double *out,
                      cuco_err *e);
/* Environment variable name as a number: 0 and *out left unchanged when it
 * is unset or empty; 0 and *out set when it parses; CUCO_EINVAL otherwise. */
int cuco_env_long(const char *name, long min, long max, long *out, cuco_err *e);
int cuco_env_double(const char *name, double min, double max, double *out, cuco_err *e);

#endif
