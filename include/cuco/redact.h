/* redact.h: keeps what does not belong to a candidate out of the text cuco
 * stores, shows in the web UI and puts into a model's prompt. Pure text
 * functions (no I/O but realpath of the paths a compiler names).
 *
 * Two kinds of text are taken out:
 *  - what a compiler quotes from files outside the candidate's build folder
 *    and the build command's include folders: `#include "/etc/passwd"` puts
 *    that file's lines into the compiler's errors. Such diagnostics keep
 *    their location (path:line:col: severity), their message and the quoted
 *    source and caret lines after them are withheld;
 *  - text shaped like a secret: API keys (sk-..., sk-ant-..., AKIA...,
 *    ghp_...), "Bearer TOKEN", long tokens after key/token/secret/password
 *    and = or :, VALUE of NAME_KEY=VALUE-style environment lines, private
 *    key blocks. Each becomes "[redacted]". */
#ifndef CUCO_REDACT_H
#define CUCO_REDACT_H

#include <stddef.h>

#define CUCO_REDACTED "[redacted]"

/* text with everything shaped like a secret replaced by CUCO_REDACTED.
 * Returns a new string (caller frees), NULL when out of memory. */
char *cuco_redact_secrets(const char *text);

/* A compiler's output with the message and quoted lines of every diagnostic
 * about a file outside roots withheld (its location kept). Relative paths
 * in the output are taken against cwd; a path counts as inside when its real
 * path lies under the real path of one of the n roots (folders). A path
 * that does not resolve counts as outside. Returns a new string (caller
 * frees), NULL when out of memory. */
char *cuco_redact_compiler_output(const char *log, const char *cwd, const char *const *roots,
                                  size_t n);

#endif
