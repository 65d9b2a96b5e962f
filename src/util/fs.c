/* fs.c: file-system helpers (read, atomic write, mkdir -p, rm -rf, copy, which). */
#include "cuco/fs.h"
#include "cuco/buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cuco_fs_read(const char *path, char **out, size_t *len, cuco_err *e)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cuco_err_errno(e, "cannot open %s", path);
    cuco_buf b = CUCO_BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (cuco_buf_append(&b, chunk, n) != 0) {
            fclose(f);
            cuco_buf_free(&b);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory reading %s", path);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        cuco_buf_free(&b);
        return cuco_err_set(e, CUCO_EIO, "read error on %s", path);
    }
    if (len)
        *len = b.len;
    *out = cuco_buf_detach(&b);
    return 0;
}

/* Writes all of data to fd; errno-style error naming `what` on failure. */
static int write_all(int fd, const void *data, size_t len, const char *what, cuco_err *e)
{
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return cuco_err_errno(e, "write to %s", what);
        }
        p += w;
        left -= (size_t)w;
    }
    return 0;
}

int cuco_fs_write(const char *path, const void *data, size_t len, cuco_err *e)
{
    struct stat st;
    /* A device, FIFO or socket (say -o /dev/null) is written in place: the
     * rename below would replace it with a regular file. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        int fd = open(path, O_WRONLY);
        if (fd < 0)
            return cuco_err_errno(e, "cannot open %s", path);
        int rc = write_all(fd, data, len, path, e);
        close(fd);
        return rc;
    }
    /* Through a symbolic link, the file it points to is replaced, not the
     * link. */
    char *target = NULL;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        target = realpath(path, NULL);
        if (target)
            path = target;
    }
    char *tmp = cuco_sprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        int rc = cuco_err_errno(e, "cannot create %s", tmp);
        free(tmp);
        free(target);
        return rc;
    }
    int wrc = write_all(fd, data, len, tmp, e);
    if (wrc != 0) {
        close(fd);
        unlink(tmp);
        free(tmp);
        free(target);
        return wrc;
    }
    fsync(fd);
    close(fd);
    if (rename(tmp, path) != 0) {
        int rc = cuco_err_errno(e, "rename %s to %s", tmp, path);
        unlink(tmp);
        free(tmp);
        free(target);
        return rc;
    }
    free(tmp);
    free(target);
    return 0;
}

int cuco_fs_mkdirs(const char *path, cuco_err *e)
{
    if (!path || !*path)
        return cuco_err_set(e, CUCO_EINVAL, "empty directory path");
    char *p = cuco_strdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int rc = cuco_err_errno(e, "cannot create directory %s", p);
            free(p);
            return rc;
        }
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        int rc = cuco_err_errno(e, "cannot create directory %s", p);
        free(p);
        return rc;
    }
    free(p);
    if (!cuco_fs_is_dir(path))
        return cuco_err_set(e, CUCO_EIO, "%s exists and is not a directory", path);
    return 0;
}

int cuco_fs_remove_tree(const char *path, cuco_err *e)
{
    if (!path || !*path || !strcmp(path, "/"))
        return cuco_err_set(e, CUCO_EINVAL, "refusing to remove '%s'", path ? path : "");
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : cuco_err_errno(e, "stat %s", path);
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0)
            return cuco_err_errno(e, "remove %s", path);
        return 0;
    }
    DIR *d = opendir(path);
    if (!d)
        return cuco_err_errno(e, "open directory %s", path);
    struct dirent *ent;
    int rc = 0;
    while (rc == 0 && (ent = readdir(d)) != NULL) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
            continue;
        char *child = cuco_path_join(path, ent->d_name);
        rc = cuco_fs_remove_tree(child, e);
        free(child);
    }
    closedir(d);
    if (rc == 0 && rmdir(path) != 0)
        rc = cuco_err_errno(e, "remove directory %s", path);
    return rc;
}

int cuco_fs_copy(const char *src, const char *dst, cuco_err *e)
{
    char *data = NULL;
    size_t len = 0;
    int rc = cuco_fs_read(src, &data, &len, e);
    if (rc == 0)
        rc = cuco_fs_write(dst, data, len, e);
    free(data);
    if (rc == 0) {
        struct stat st;
        if (stat(src, &st) == 0)
            chmod(dst, st.st_mode & 07777);
    }
    return rc;
}

int cuco_fs_exists(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0;
}

int cuco_fs_is_dir(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *cuco_path_join(const char *a, const char *b)
{
    if (!a || !*a)
        return cuco_strdup(b);
    if (!b || !*b)
        return cuco_strdup(a);
    if (b[0] == '/')
        return cuco_strdup(b);
    size_t la = strlen(a);
    return cuco_sprintf("%s%s%s", a, a[la - 1] == '/' ? "" : "/", b);
}

char *cuco_path_abs(const char *path)
{
    char *r = realpath(path, NULL);
    return r;
}

char *cuco_path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return cuco_strdup(".");
    if (slash == path)
        return cuco_strdup("/");
    return cuco_strndup(path, (size_t)(slash - path));
}

char *cuco_path_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return cuco_strdup(slash ? slash + 1 : path);
}

char *cuco_which(const char *name)
{
    if (!name || !*name)
        return NULL;
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? cuco_strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char *copy = cuco_strdup(path);
    char *save = NULL;
    char *found = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char *cand = cuco_path_join(dir, name);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            found = cand;
        else
            free(cand);
    }
    free(copy);
    return found;
}
