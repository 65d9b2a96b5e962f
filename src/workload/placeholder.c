/* placeholder.c: the values of a manifest's placeholders that depend only on
 * the workload and the machine ({workload_dir}, {ranks}, {repo},
 * {nccl_include}, {nccl_lib}, {cuda_home}); the cascade adds the ones of a
 * build ({out}, {evolve_file}, {src_dir}, MPI flags). It also holds the list
 * of every placeholder name, against which a manifest is checked when it is
 * loaded. */
#include "cuco/workload.h"

#include "cuco/buf.h"
#include "cuco/toolchain.h"

#include <stdlib.h>
#include <string.h>

#ifndef CUCO_SOURCE_DIR
#define CUCO_SOURCE_DIR "."
#endif

int cuco_workload_placeholder_needs_toolchain(const char *name)
{
    return !strcmp(name, "nccl_include") || !strcmp(name, "nccl_lib") || !strcmp(name, "cuda_home");
}

char *cuco_workload_placeholder(const cuco_workload *w, const struct cuco_toolchain *tc,
                                const char *name, int *known)
{
    *known = 1;
    if (!strcmp(name, "workload_dir"))
        return cuco_strdup(w->dir);
    if (!strcmp(name, "ranks"))
        return cuco_sprintf("%d", w->ranks);
    if (!strcmp(name, "repo")) {
        const char *repo = getenv("CUCO_REPO");
        return cuco_strdup(repo && *repo ? repo : CUCO_SOURCE_DIR);
    }
    if (cuco_workload_placeholder_needs_toolchain(name)) {
        const char *v = !tc                             ? NULL
                        : !strcmp(name, "nccl_include") ? tc->nccl_include
                        : !strcmp(name, "nccl_lib")     ? tc->nccl_lib
                                                        : tc->cuda_home;
        return v ? cuco_strdup(v) : NULL;
    }
    *known = 0;
    return NULL;
}

/* Every placeholder the cascade expands inside an argument. */
static const char *const inline_names[] = {
    "out",  "evolve_file",  "src_dir",  "workload_dir", "ranks",
    "repo", "nccl_include", "nccl_lib", "cuda_home",    NULL};
/* The placeholders that become several arguments: a list item of their own. */
static const char *const whole_names[] = {"mpi_compile_flags", "mpi_link_flags", NULL};

static int name_in(const char *name, size_t len, const char *const *names)
{
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == len && !strncmp(names[i], name, len))
            return 1;
    return 0;
}

static void list_names(cuco_buf *b)
{
    for (size_t i = 0; inline_names[i]; i++)
        cuco_buf_printf(b, "%s{%s}", i ? ", " : "", inline_names[i]);
    for (size_t i = 0; whole_names[i]; i++)
        cuco_buf_printf(b, ", {%s}", whole_names[i]);
}

static int unknown(const char *start, size_t len, cuco_err *e)
{
    cuco_buf known = CUCO_BUF_INIT;
    list_names(&known);
    int rc = cuco_err_set(e, CUCO_EINVAL, "unknown placeholder '%.*s' (known: %s)", (int)len, start,
                          cuco_buf_str(&known));
    cuco_buf_free(&known);
    return rc;
}

int cuco_workload_placeholder_check(const char *arg, int whole_item, cuco_err *e)
{
    for (const char *p = strchr(arg, '{'); p; p = strchr(p, '{')) {
        const char *close = strchr(p + 1, '}');
        const char *reopen = strchr(p + 1, '{');
        if (!close || (reopen && reopen < close)) {
            size_t shown = close ? (size_t)(reopen - p) : strlen(p);
            return cuco_err_set(e, CUCO_EINVAL, "unclosed placeholder '%.*s' (no '}')", (int)shown,
                                p);
        }
        size_t len = (size_t)(close - p - 1);
        if (name_in(p + 1, len, whole_names)) {
            if (!whole_item || p != arg || close[1])
                return cuco_err_set(e, CUCO_EINVAL,
                                    "'%.*s' must be a list item of its own (it becomes several "
                                    "arguments)",
                                    (int)len + 2, p);
        } else if (!name_in(p + 1, len, inline_names)) {
            return unknown(p, len + 2, e);
        }
        p = close + 1;
    }
    return 0;
}
