/* diff.h: a line diff of two texts in unified format (src/util/diff.c),
 * for people and prompts: the web view, the LLM mutators, cuco report. */
#ifndef CUCO_DIFF_H
#define CUCO_DIFF_H

#include <stddef.h>

#include "cuco/buf.h"
#include "cuco/err.h"

/* A line diff of a against b (Myers/LCS on lines), unified format with
 * `context` lines of context and "--- a_name" / "+++ b_name" headers.
 * Appends to out; *added / *removed (may be NULL) receive the line counts.
 * Identical inputs give no hunk (only the headers are omitted too: out is
 * left unchanged). */
int cuco_diff_lines(const char *a, const char *b, const char *a_name, const char *b_name,
                    int context, cuco_buf *out, size_t *added, size_t *removed, cuco_err *e);

#endif
