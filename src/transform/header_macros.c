/* header_macros.c: the macros of the program's own headers, for the
 * schedule scans. A statement that uses a macro names what the macro's text
 * names (scan_macros.c); the file's own #define lines are in its text, and
 * these are the ones of the headers it includes with #include "..." (a
 * launch helper of the project), read where the including file is, else in
 * the build command's -I folders of the repository or the workload, a few
 * levels deep. System headers (<...>) are not read. */
#include "tx_headers.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/fs.h"

enum { HEADER_DEPTH = 4, HEADER_MAX = 64 };

typedef struct macro_walk {
    cuco_buf out;
    cuco_strlist seen; /* the paths of the headers read */
    cuco_strlist dirs; /* the build's -I folders, after the including file's */
} macro_walk;

static int walk(macro_walk *m, const char *dir, const char *text, int depth, cuco_err *e);

/* Reads the header that the #include at t names, when it is in dir. */
static int read_header(macro_walk *m, const char *dir, const char *text, const cuco_tok *t,
                       int depth, cuco_err *e)
{
    char *name = cuco_tx_quoted_include(text, t);
    char *path = name ? cuco_path_join(dir, name) : NULL;
    for (size_t k = 0; path && !cuco_fs_exists(path) && k < m->dirs.n; k++) {
        free(path);
        path = cuco_path_join(m->dirs.items[k], name);
    }
    char *body = NULL, *sub = NULL;
    size_t len = 0;
    int rc = 0;
    if (!path || cuco_strlist_has(&m->seen, path) || m->seen.n == HEADER_MAX ||
        !cuco_fs_exists(path) || cuco_fs_is_dir(path))
        goto out;
    if (cuco_strlist_push(&m->seen, path) != 0) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    if (cuco_fs_read(path, &body, &len, NULL) != 0)
        goto out; /* unreadable: the build will say so */
    sub = cuco_path_dirname(path);
    rc = sub ? walk(m, sub, body, depth + 1, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
out:
    free(sub);
    free(body);
    free(path);
    free(name);
    return rc;
}

/* The #define lines of text (a header's, not the file's own: depth > 0)
 * and of the headers it includes. */
static int walk(macro_walk *m, const char *dir, const char *text, int depth, cuco_err *e)
{
    if (depth > HEADER_DEPTH)
        return 0;
    cuco_lex lx;
    int rc = cuco_lex_run(&lx, text, strlen(text), NULL);
    if (rc != 0) /* a header the lexer cannot read adds nothing */
        return rc == CUCO_ENOMEM ? cuco_err_set(e, CUCO_ENOMEM, "out of memory") : 0;
    for (size_t i = 0; rc == 0 && i < lx.ntoks; i++) {
        const cuco_tok *t = &lx.toks[i];
        if (t->kind != CUCO_TOK_PREPROC)
            continue;
        if (depth > 0 && cuco_tok_directive(text, t, "define")) {
            cuco_buf_append(&m->out, text + t->off, t->len);
            cuco_buf_putc(&m->out, '\n');
        } else {
            rc = read_header(m, dir, text, t, depth, e);
        }
    }
    cuco_lex_free(&lx);
    return rc;
}

/* The -I folders of the manifest's build command whose placeholders are the
 * repository's or the workload's ({repo}, {workload_dir}): where a
 * `#include "x.h"` not beside the file is found. */
static int include_dirs(const cuco_workload *w, cuco_strlist *dirs)
{
    static const char *const names[] = {"repo", "workload_dir"};
    int rc = 0;
    for (size_t i = 0; i < w->build_command.n && rc == 0; i++) {
        const char *a = w->build_command.items[i];
        if (strncmp(a, "-I", 2) != 0)
            continue;
        a = a[2] ? a + 2 : (i + 1 < w->build_command.n ? w->build_command.items[++i] : "");
        char *dir = cuco_strdup(a);
        for (int k = 0; dir && k < 2; k++) {
            char *key = cuco_sprintf("{%s}", names[k]), *at = key ? strstr(dir, key) : NULL;
            int known = 0;
            char *val = at ? cuco_workload_placeholder(w, NULL, names[k], &known) : NULL;
            char *next =
                val ? cuco_sprintf("%.*s%s%s", (int)(at - dir), dir, val, at + strlen(key)) : NULL;
            if (at) {
                free(dir);
                dir = next;
            } else {
                free(next);
            }
            free(val);
            free(key);
        }
        if (dir && dir[0] == '/' && !strchr(dir, '{'))
            rc = cuco_strlist_push(dirs, dir);
        free(dir);
    }
    return rc;
}

int cuco_tx_header_macros(const cuco_workload *w, const char *seed, char **out, cuco_err *e)
{
    *out = NULL;
    char *dir = cuco_tx_evolve_dir(w);
    if (!dir)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    macro_walk m = {.out = CUCO_BUF_INIT};
    int rc = include_dirs(w, &m.dirs) != 0 ? cuco_err_set(e, CUCO_ENOMEM, "out of memory") : 0;
    if (rc == 0)
        rc = walk(&m, dir, seed, 0, e);
    cuco_strlist_free(&m.dirs);
    free(dir);
    cuco_strlist_free(&m.seen);
    if (rc == 0 && m.out.len > 0) {
        *out = cuco_buf_detach(&m.out);
        if (!*out)
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    cuco_buf_free(&m.out);
    return rc;
}
