/* include_deps.c: the local headers a build reads (see
 * cuco/include_deps.h). */
#include "cuco/include_deps.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/fs.h"
#include "cuco/grow.h"

#define MAX_HEADERS 4096

static void strings_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int push_string(char ***v, size_t *n, size_t *cap, char *s, cuco_err *e)
{
    if (!s || CUCO_GROW(*v, *cap, *n + 1, 8) < 0) {
        free(s);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    (*v)[(*n)++] = s;
    return 0;
}

static char *absolute_in(const char *dir, const char *cwd)
{
    if (dir[0] == '/' || !cwd)
        return cuco_strdup(dir);
    return cuco_path_join(cwd, dir);
}

int cuco_include_dirs(const char *const *argv, size_t argc, const char *cwd, char ***dirs,
                      size_t *n, cuco_err *e)
{
    *dirs = NULL;
    *n = 0;
    size_t cap = 0;
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
        if (dir && *dir && push_string(dirs, n, &cap, absolute_in(dir, cwd), e) < 0) {
            strings_free(*dirs, *n);
            *dirs = NULL;
            *n = 0;
            return CUCO_ENOMEM;
        }
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
    const char *const *dirs;
    size_t n_dirs;
    char **seen; /* absolute paths, in the order reached */
    size_t n_seen, cap_seen;
    cuco_buf *key;
} walk;

static int seen(const walk *w, const char *path)
{
    for (size_t i = 0; i < w->n_seen; i++)
        if (!strcmp(w->seen[i], path))
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
    for (size_t i = 0; i < w->n_dirs; i++) {
        char *p = cuco_path_join(w->dirs[i], name);
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
            if (found && !seen(w, found)) {
                if (w->n_seen >= MAX_HEADERS) {
                    free(found);
                } else if ((rc = push_string(&w->seen, &w->n_seen, &w->cap_seen, found, e)) == 0) {
                    rc = visit(w, w->seen[w->n_seen - 1], 0, e);
                }
            } else {
                free(found);
            }
            free(name);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(body);
    return rc;
}

int cuco_include_digest(const char *const *sources, size_t n_sources, const char *const *dirs,
                        size_t n_dirs, cuco_buf *key, cuco_err *e)
{
    walk w = {dirs, n_dirs, NULL, 0, 0, key};
    int rc = 0;
    for (size_t i = 0; i < n_sources && rc == 0; i++)
        rc = visit(&w, sources[i], 1, e);
    strings_free(w.seen, w.n_seen);
    return rc;
}
