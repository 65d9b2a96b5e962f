/* placeholder.c: the values of a manifest's placeholders that depend only on
 * the workload and the machine ({workload_dir}, {ranks}, {repo},
 * {nccl_include}, {nccl_lib}, {cuda_home}); the cascade adds the ones of a
 * build ({out}, {evolve_file}, {src_dir}, MPI flags). */
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

char *cuco_workload_placeholder(const cuco_workload *w, const struct cuco_toolchain *tc, const char *name,
                                int *known)
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
        const char *v = !tc                            ? NULL
                        : !strcmp(name, "nccl_include") ? tc->nccl_include
                        : !strcmp(name, "nccl_lib")     ? tc->nccl_lib
                                                        : tc->cuda_home;
        return v ? cuco_strdup(v) : NULL;
    }
    *known = 0;
    return NULL;
}
