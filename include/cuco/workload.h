/* workload.h: a workload folder and its manifest (workload.yaml).
 *
 * Manifest (YAML):
 *   name: cpu_demo                 # required, [A-Za-z0-9_-]+
 *   description: "..."             # optional
 *   ranks: 2                       # required, >= 1 (processes / GPUs)
 *   gpu: false                     # optional (default true): needs a GPU to run
 *   sources: [main.c, util.h]      # required, relative to the folder
 *   evolve_file: main.c            # required, one of sources; holds EVOLVE-BLOCKs
 *   expert: expert.c               # optional: the best hand-written variant of the
 *                                  # evolve file (same frozen text), timed beside
 *                                  # the seed by cuco run's confirm step
 *   build:
 *     command: [mpicc, -O2, -o, "{out}", "{evolve_file}", -lm]   # required argv
 *     output: cpu_demo             # required, binary name in the build folder
 *     timeout_s: 120               # optional (default 300)
 *   run:
 *     launcher: mpirun             # mpirun (default) | direct
 *     mpirun_args: [--oversubscribe]  # optional extra mpirun flags
 *     env: {OMP_NUM_THREADS: "1"}  # optional
 *   verify:                        # the L2 run: small size, short timeout
 *     args: [--n, "256"]
 *     timeout_s: 60
 *   bench:                         # the L3 run: full size, repeats
 *     args: [--n, "1024"]
 *     timeout_s: 300
 *     repeats: 3
 *   result:
 *     vouch: true                  # optional (default false): the frozen code vouches
 *                                  # for each run (CUCO_VOUCH line, docs/workload.md)
 *   space:                         # optional: design-space dims for this workload
 *     backend: [lsa]
 *     placement: [separate_kernel, fused, dedicated_ctas]
 *     ...                          # any dim name -> list of legal values
 *
 * Placeholders expanded in build.command and in args: {out} (binary path),
 * {evolve_file} (path of the candidate's evolve file), {src_dir} (the build
 * folder holding all sources), {workload_dir}, {ranks}, {nccl_include},
 * {nccl_lib}, {cuda_home}, {repo} (the cuco source tree, for device/ and
 * workloads/common). An argument that is exactly "{mpi_compile_flags}" or
 * "{mpi_link_flags}" expands to several arguments (from mpicc --showme).
 */
#ifndef CUCO_WORKLOAD_H
#define CUCO_WORKLOAD_H

#include "cuco/err.h"
#include <stddef.h>

typedef struct cuco_strlist {
    char **items; /* owned */
    size_t n;
} cuco_strlist;

typedef struct cuco_kv {
    char *key;
    char *value;
} cuco_kv;

typedef struct cuco_space_dim {
    char *name;
    cuco_strlist values;
} cuco_space_dim;

typedef struct cuco_run_level {
    cuco_strlist args;
    double timeout_s;
    int repeats; /* bench only; 1 for verify */
    int line;    /* manifest line of this section, for messages */
} cuco_run_level;

typedef struct cuco_workload {
    char *dir;           /* absolute path of the workload folder */
    char *manifest_path; /* absolute path of workload.yaml */
    char *name;
    char *description;
    int ranks;
    int gpu;
    cuco_strlist sources;
    char *evolve_file;
    char *expert; /* expert: path relative to dir, NULL when the manifest names none */
    cuco_strlist build_command;
    char *build_output;
    double build_timeout_s;
    char *launcher; /* "mpirun" or "direct" */
    cuco_strlist mpirun_args;
    cuco_kv *env;
    size_t n_env;
    cuco_run_level verify;
    cuco_run_level bench;
    cuco_space_dim *space;
    size_t n_space;
    int vouch; /* result.vouch: a run counts only when the frozen code vouches for it */
    struct cuco_semantic *semantics; /* declared semantics (cuco/semantics.h) */
    size_t n_semantics;
} cuco_workload;

/* Loads DIR/workload.yaml (or a path to a manifest file). Errors carry the
 * manifest path and line. The workload is owned by the caller:
 * cuco_workload_free(). */
int cuco_workload_load(const char *dir_or_manifest, cuco_workload **out, cuco_err *e);
void cuco_workload_free(cuco_workload *w);
/* Runs the workload at `ranks` ranks instead of its manifest's (the --ranks
 * option): a different rank count is a different workload for the database
 * and the evaluation cache, so its name becomes "NAME@RANKS" (e.g.
 * "gemm_allgather@1"). Nothing changes when ranks equals the manifest's.
 * CUCO_EINVAL when ranks is outside 1..65536. */
int cuco_workload_override_ranks(cuco_workload *w, int ranks, cuco_err *e);
/* Parses a --ranks value: 1..65536; -1 when it is not such a number. */
int cuco_workload_parse_ranks(const char *text);

struct cuco_toolchain;
/* The value of a placeholder that depends only on the workload and the
 * machine: workload_dir, ranks, repo ($CUCO_REPO, else the source tree),
 * nccl_include, nccl_lib, cuda_home (from tc). *known is 0 for other names
 * (NULL returned); a known name whose value the toolchain lacks gives NULL
 * with *known 1. Caller frees. */
char *cuco_workload_placeholder(const cuco_workload *w, const struct cuco_toolchain *tc,
                                const char *name, int *known);
/* 1 for the placeholders whose value comes from the toolchain. */
int cuco_workload_placeholder_needs_toolchain(const char *name);
/* Checks the placeholders of one manifest argument (build.command,
 * run.mpirun_args, run.env values, verify.args, bench.args): every '{' opens
 * a known placeholder closed by '}'; {mpi_compile_flags} and
 * {mpi_link_flags} only as the whole of a list item (whole_item 1). 0 when
 * it is so, else CUCO_EINVAL with e naming the offending text. */
int cuco_workload_placeholder_check(const char *arg, int whole_item, cuco_err *e);

/* 1 when path names a source file (.cu .cc .cpp .cxx .c), not a manifest. */
int cuco_workload_is_program_path(const char *path);

/* "C++" when path names a C++ source (.cpp .cc .cxx .c++ .C), "C" for a C
 * one (.c), else NULL (.cu and the rest). */
const char *cuco_workload_host_language(const char *path);
/* 1 when build.command compiles as CUDA whatever the file's name says
 * (-x cu, -xcu, --x=cu). */
int cuco_workload_builds_as_cuda(const cuco_workload *w);
/* A C++ evolve file built by nvcc is built as CUDA ("-x cu" right after
 * nvcc, unless a language is chosen already): the transform and the
 * mutators put device code into it, which nvcc would hand to the host
 * compiler as plain C++. The seed builds the same way. A C file is left as
 * it is (C is not always C++). CUCO_ENOMEM or 0. */
int cuco_workload_build_cxx_as_cuda(cuco_workload *w);

/* A workload for a bare host-driven program (one source file, no manifest):
 * built as 'nvcc -std=c++17 -arch=sm_90 -O3 -I<its folder> -I<cuco>/device -I<NCCL include>
 * <mpi compile flags> FLAGS -o NAME PROGRAM -L<NCCL lib> -l:libnccl.so.2
 * -lcublas -lcublasLt <mpi link flags>' and run as 'mpirun -np RANKS NAME
 * ARGS' (verify and bench alike), NCCL's library on LD_LIBRARY_PATH. args
 * and flags are split at spaces; argv[0..argc) are appended to the args.
 * Free with cuco_workload_free(). */
typedef struct cuco_bare_program {
    int ranks;         /* default 2 when <= 0 */
    const char *args;  /* or NULL */
    const char *flags; /* extra nvcc flags, or NULL */
    int argc;
    char **argv;
} cuco_bare_program;
int cuco_workload_from_program(const char *path, const cuco_bare_program *bp, cuco_workload **out,
                               cuco_err *e);

/* Reads the seed program (the evolve file as shipped). Caller frees. */
int cuco_workload_read_seed(const cuco_workload *w, char **text, cuco_err *e);

void cuco_strlist_free(cuco_strlist *l);
int cuco_strlist_push(cuco_strlist *l, const char *s);
/* Whether l holds the string s. */
int cuco_strlist_has(const cuco_strlist *l, const char *s);

#endif
