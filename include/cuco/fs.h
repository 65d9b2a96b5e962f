/* fs.h: file-system helpers with error context. */
#ifndef CUCO_FS_H
#define CUCO_FS_H

#include "cuco/err.h"
#include <stddef.h>

/* Reads a whole file; *out is malloc'd and NUL-terminated (caller frees). */
int cuco_fs_read(const char *path, char **out, size_t *len, cuco_err *e);
/* Writes a file atomically (temp file in the same folder, fsync, rename); a
 * device, FIFO or socket is written in place, and through a symbolic link
 * the file it points to is replaced. */
int cuco_fs_write(const char *path, const void *data, size_t len, cuco_err *e);
/* mkdir -p. */
int cuco_fs_mkdirs(const char *path, cuco_err *e);
/* rm -rf (refuses "/" and ""). */
int cuco_fs_remove_tree(const char *path, cuco_err *e);
/* Copies a regular file. */
int cuco_fs_copy(const char *src, const char *dst, cuco_err *e);
int cuco_fs_exists(const char *path);
int cuco_fs_is_dir(const char *path);
/* Joins with one '/'; caller frees. */
char *cuco_path_join(const char *a, const char *b);
/* realpath(); caller frees; NULL if it does not exist. */
char *cuco_path_abs(const char *path);
/* Directory part ("." if none); caller frees. */
char *cuco_path_dirname(const char *path);
/* Last component; caller frees. */
char *cuco_path_basename(const char *path);
/* Searches PATH for an executable; caller frees; NULL if not found. */
char *cuco_which(const char *name);

#endif
