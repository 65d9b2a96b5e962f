/* include_deps.h: the local headers a program's build reads, for keys of
 * build caches.
 *
 * A binary built from a source is stale when a header it includes changed
 * (the workloads' harness, device/'s collectives, the transform's runtime),
 * so a cache key must cover those headers as well. This follows `#include
 * "..."` and `#include <...>` lines (every one, whatever the surrounding
 * #if says: a superset is safe) through the including file's folder and the
 * -I folders of the build command, each file once. Headers found nowhere
 * (the compiler's and the system's own) are left to the key's toolchain
 * part. */
#ifndef CUCO_INCLUDE_DEPS_H
#define CUCO_INCLUDE_DEPS_H

#include <stddef.h>

#include "cuco/buf.h"
#include "cuco/err.h"

/* The include folders of a compiler command: "-IDIR", "-I DIR",
 * "--include-path DIR", "--include-path=DIR", "-isystem DIR" (relative
 * ones against cwd). Fills *dirs (malloc'd array of malloc'd strings, caller
 * frees each and the array) and *n. */
int cuco_include_dirs(const char *const *argv, size_t argc, const char *cwd, char ***dirs,
                      size_t *n, cuco_err *e);

/* Appends to key "path\ncontent\n" for every header reached from the given
 * source files (not the sources themselves), in a stable order (the order
 * they are first reached). At most 4096 headers. */
int cuco_include_digest(const char *const *sources, size_t n_sources, const char *const *dirs,
                        size_t n_dirs, cuco_buf *key, cuco_err *e);

#endif
