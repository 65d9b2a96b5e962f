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

#include "cuco/buf.h"
#include "cuco/err.h"
#include "cuco/workload.h"

/* Appends to dirs the include folders of a compiler command: "-IDIR",
 * "-I DIR", "--include-path DIR", "--include-path=DIR", "-isystem DIR"
 * (relative ones against cwd). */
int cuco_include_dirs(const char *const *argv, size_t argc, const char *cwd, cuco_strlist *dirs,
                      cuco_err *e);

/* Appends to key "path\nsize\ncontent\n" for every header reached from the
 * sources (names relative to src_dir; the sources themselves are not
 * appended), in a stable order (the order they are first reached). At most
 * 4096 headers. */
int cuco_include_digest(const char *src_dir, const cuco_strlist *sources, const cuco_strlist *dirs,
                        cuco_buf *key, cuco_err *e);

#endif
