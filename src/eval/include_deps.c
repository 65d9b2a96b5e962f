/* include_deps.c: the local headers a build reads (see
 * cuco/include_deps.h). */
#include "cuco/include_deps.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/fs.h"

#define MAX_HEADERS 4096

static char *absolute_in(const char *dir, const char *cwd)
{
    if (dir[0] == '/' || !cwd)
        return cuco_strdup(dir);
    return cuco_path_join(cwd, dir);
}

int cuco_include_dirs(const char *const *argv, size_t argc, const char *cwd, cuco_strlist *dirs,
                      cuco_err *e)
{
    static const char *const with_value[] = {"-I", "--include-path", "-isystem", NULL};
    for (size_t i = 0; i < argc; i++) {
        const char *a = argv[i], *dir = NULL;
        for (size_t k = 0; with_value[k] && !dir; k++) {
            size_t len = strlen(with_value[k]);
            if (strncmp(a, with_value[k], len))
                continue;
            if (a[len] == '\0' && i + 1 < argc)
                dir = argv[++i];
            else if (a[len] == '=')
                dir = a + len + 1;
            else if (k == 0 && a[len] != '\0')
                dir = a + len;
        }
        if (!dir || !*dir)
            continue;
        char *abs = absolute_in(dir, cwd);
        int rc = abs ? cuco_strlist_push(dirs, abs) : CUCO_ENOMEM;
        free(abs);
        if (rc < 0)
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    return 0;
}

/* The name inside `#include "name"` or `#include <name>` starting at line
 * (caller frees), NULL when the line is no include. *quoted: 1 for "". */
static char *include_name(const char *line, const char *end, int *quoted)
{
    const char *p = line;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p != '#')
        return NULL;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 7 || strncmp(p, "include", 7))
        return NULL;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || (*p != '"' && *p != '<'))
        return NULL;
    char close = *p == '"' ? '"' : '>';
    *quoted = *p == '"';
    const char *q = memchr(p + 1, close, (size_t)(end - p - 1));
    if (!q || q == p + 1)
        return NULL;
    return cuco_strndup(p + 1, (size_t)(q - p - 1));
}

typedef struct walk {
    const cuco_strlist *dirs;
    cuco_strlist seen; /* headers' paths, in the order reached */
    cuco_buf *key;
} walk;

static int seen(const walk *w, const char *path)
{
    for (size_t i = 0; i < w->seen.n; i++)
        if (!strcmp(w->seen.items[i], path))
            return 1;
    return 0;
}

/* Where `name` included from the file at `from` is: the including file's
 * folder first (for "" only), then the include folders. Caller frees. */
static char *resolve(const walk *w, const char *from, const char *name, int quoted)
{
    if (name[0] == '/')
        return cuco_fs_exists(name) ? cuco_strdup(name) : NULL;
    if (quoted) {
        char *dir = cuco_path_dirname(from);
        char *p = dir ? cuco_path_join(dir, name) : NULL;
        free(dir);
        if (p && cuco_fs_exists(p))
            return p;
        free(p);
    }
    for (size_t i = 0; i < w->dirs->n; i++) {
        char *p = cuco_path_join(w->dirs->items[i], name);
        if (p && cuco_fs_exists(p))
            return p;
        free(p);
    }
    return NULL;
}

/* Reads the file at path, adds it to the key unless it is a source (is_source),
 * and follows its includes. */
static int visit(walk *w, const char *path, int is_source, cuco_err *e)
{
    char *body = NULL;
    size_t len = 0;
    cuco_err re = CUCO_ERR_INIT;
    if (cuco_fs_read(path, &body, &len, &re) < 0) {
        cuco_err_clear(&re);
        if (is_source)
            return 0; /* the caller keys the sources itself */
        /* a header that exists but cannot be read still changes the key */
        cuco_buf_printf(w->key, "%s\n(unreadable)\n", path);
        return 0;
    }
    if (!is_source) {
        cuco_buf_printf(w->key, "%s\n%zu\n", path, len);
        cuco_buf_append(w->key, body, len);
        cuco_buf_putc(w->key, '\n');
    }
    int rc = 0;
    for (const char *line = body; line && line < body + len && rc == 0;) {
        const char *nl = memchr(line, '\n', (size_t)(body + len - line));
        const char *end = nl ? nl : body + len;
        int quoted = 0;
        char *name = include_name(line, end, &quoted);
        if (name) {
            char *found = resolve(w, path, name, quoted);
            if (found && !seen(w, found) && w->seen.n < MAX_HEADERS) {
                if (cuco_strlist_push(&w->seen, found) < 0)
                    rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                else
                    rc = visit(w, w->seen.items[w->seen.n - 1], 0, e);
            }
            free(found);
            free(name);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(body);
    return rc;
}

int cuco_include_digest(const char *src_dir, const cuco_strlist *sources, const cuco_strlist *dirs,
                        cuco_buf *key, cuco_err *e)
{
    walk w = {dirs, {0}, key};
    int rc = 0;
    for (size_t i = 0; i < sources->n && rc == 0; i++) {
        char *src = cuco_path_join(src_dir, sources->items[i]);
        rc = src ? visit(&w, src, 1, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        free(src);
    }
    cuco_strlist_free(&w.seen);
    return rc;
}
