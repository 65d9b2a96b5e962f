/* bare.c: a workload made up for a bare host-driven program (one CUDA + MPI
 * + NCCL source, no manifest), so that commands taking a workload can take
 * the program itself. */
#include "cuco/workload.h"

#include "cuco/buf.h"
#include "cuco/fs.h"

#include <stdlib.h>
#include <string.h>

/* Splits s at spaces and tabs into l. */
static void push_words(cuco_strlist *l, const char *s)
{
    while (s && *s) {
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strcspn(s, " \t");
        if (n) {
            char *w = cuco_strndup(s, n);
            cuco_strlist_push(l, w);
            free(w);
        }
        s += n;
    }
}

int cuco_workload_from_program(const char *path, const cuco_bare_program *bp, cuco_workload **out,
                               cuco_err *e)
{
    *out = NULL;
    char *abs = cuco_path_abs(path);
    if (!abs)
        return cuco_err_set(e, CUCO_ENOTFOUND, "%s: no such file", path);
    if (cuco_fs_is_dir(abs)) {
        free(abs);
        return cuco_err_set(e, CUCO_EINVAL, "%s is a folder, not a program", path);
    }
    cuco_workload *w = calloc(1, sizeof *w);
    if (!w) {
        free(abs);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    w->dir = cuco_path_dirname(abs);
    w->manifest_path = cuco_strdup(abs);
    char *base = cuco_path_basename(abs);
    char *dot = base ? strrchr(base, '.') : NULL;
    w->name = dot ? cuco_strndup(base, (size_t)(dot - base)) : cuco_strdup(base ? base : "program");
    w->ranks = bp && bp->ranks > 0 ? bp->ranks : 2;
    w->gpu = 1;
    cuco_strlist_push(&w->sources, base);
    w->evolve_file = cuco_strdup(base);
    static const char *const build[] = {"nvcc",
                                        "-std=c++17",
                                        "-arch=sm_90",
                                        "-O3",
                                        "-I{workload_dir}",
                                        "-I{repo}/device",
                                        "-I{nccl_include}",
                                        "{mpi_compile_flags}",
                                        NULL};
    static const char *const link[] = {"-o",
                                       "{out}",
                                       "{evolve_file}",
                                       "-L{nccl_lib}",
                                       "-l:libnccl.so.2",
                                       "-lcublas",
                                       "-lcublasLt",
                                       "{mpi_link_flags}",
                                       NULL};
    for (size_t i = 0; build[i]; i++)
        cuco_strlist_push(&w->build_command, build[i]);
    push_words(&w->build_command, bp ? bp->flags : NULL);
    for (size_t i = 0; link[i]; i++)
        cuco_strlist_push(&w->build_command, link[i]);
    int cuda_rc = cuco_workload_build_cxx_as_cuda(w);
    w->build_output = cuco_strdup(w->name);
    w->build_timeout_s = 300;
    w->launcher = cuco_strdup("mpirun");
    w->env = calloc(1, sizeof *w->env);
    if (w->env) {
        w->env[0].key = cuco_strdup("LD_LIBRARY_PATH");
        w->env[0].value = cuco_strdup("{nccl_lib}");
        w->n_env = 1;
    }
    push_words(&w->verify.args, bp ? bp->args : NULL);
    push_words(&w->bench.args, bp ? bp->args : NULL);
    for (int i = 0; bp && i < bp->argc; i++) {
        cuco_strlist_push(&w->verify.args, bp->argv[i]);
        cuco_strlist_push(&w->bench.args, bp->argv[i]);
    }
    w->verify.timeout_s = 120;
    w->verify.repeats = 1;
    w->bench.timeout_s = 300;
    w->bench.repeats = 1;
    free(base);
    free(abs);
    if (cuda_rc != 0 || !w->name || !w->evolve_file || !w->build_output || !w->launcher ||
        !w->dir) {
        cuco_workload_free(w);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    *out = w;
    return 0;
}
