/* cmd_bound.c: 'cuco bound WORKLOAD|PROGRAM': measures what overlapping
 * communication with computation can gain (CUPTI kernel timeline, program
 * variants with communication or computation removed) and audits the
 * program's verification; writes WORKSPACE/bound.json and prints a summary
 * with warnings and advice (or the JSON with --json). */
#include "commands.h"
#include "cuco/analyze.h"
#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/err.h"
#include "cuco/fs.h"
#include "cuco/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: cuco bound WORKLOAD|PROGRAM.cu [OPTIONS] [-- PROGRAM-ARGS...]\n"
        "\n"
        "Runs the program at its bench size with a CUPTI timeline library loaded\n"
        "(libcuco_timeline.so through CUDA_INJECTION64_PATH) and reports per rank and\n"
        "for the critical rank: busy compute and communication time (unions of\n"
        "kernel intervals), the overlap bound max(compute, comm), the ceiling, the\n"
        "time ranks wait for each other, and the top kernels. Two variants, with the\n"
        "collectives removed and with the kernels/cuBLAS calls removed, are built and\n"
        "timed beside it. The verification is audited: statically (the PASS line must\n"
        "depend on a comparison of results) and dynamically (the variant without\n"
        "communication must fail verification). Results go to WORKSPACE/bound.json.\n"
        "\n"
        "WORKLOAD is a folder holding workload.yaml (or the manifest): built and run\n"
        "as the manifest says, at its bench size. Any other PROGRAM.cu (one CUDA\n"
        "source of a host-driven MPI + NCCL program, unchanged) is built with\n"
        "  nvcc -std=c++17 -arch=sm_90 -O3 -I<its folder> -I<NCCL include> <mpicc\n"
        "  --showme:compile> [--nvcc-flags] PROGRAM.cu -L<NCCL lib> -l:libnccl.so.2\n"
        "  -lcublas -lcublasLt <mpicc --showme:link>\n"
        "(NCCL from $NCCL_HOME, else the CUDA toolkit or the system, as 'cuco doctor'\n"
        "shows) and run as 'mpirun -np N PROGRAM ARGS' with the NCCL library on\n"
        "LD_LIBRARY_PATH. Its success line must say PASS (or OK/success) and it may\n"
        "print 'CUCO_RESULT {\"time_ms\":...}' for its own timing; without that line\n"
        "the kernel timeline still gives the bound.\n"
        "\n"
        "Options:\n"
        "  --json            print the report as one JSON object (bound.json)\n"
        "  --workspace DIR   where bound.json and run folders go\n"
        "                    (default ./cuco-out/<workload name>)\n"
        "  --ranks N         ranks for a bare PROGRAM.cu (mpirun -np N; default 2), or\n"
        "                    a workload's instead of its manifest's\n"
        "  --args \"A B ...\"  arguments of a bare PROGRAM.cu's run, split at spaces\n"
        "                    (or give them after '--')\n"
        "  --nvcc-flags \"F ...\"  extra compile/link flags for a bare PROGRAM.cu\n"
        "                    (e.g. \"-I../include -lcurand\"), split at spaces\n"
        "  --static-only     only the static verification audit; run nothing\n"
        "  --no-variants     skip the communication-/computation-removed variants\n"
        "                    (and so the dynamic audit)\n"
        "  --emit-variants DIR  write the communication-removed and computation-removed\n"
        "                    programs to DIR (NAME.comm_removed.EXT, NAME.compute_removed.EXT)\n"
        "                    and stop\n"
        "  --timeout S       limit of each run of the program or a variant, seconds\n"
        "                    (default: the manifest's bench timeout; 300 for a bare\n"
        "                    program); a run past it is killed and reported\n"
        "  --single-run      run the program once, with the timeline library loaded\n"
        "                    (default: once without it for its own timing, once with)\n"
        "  --build-only      build the program and its two variants into WORKSPACE and\n"
        "                    stop; a later 'cuco bound' with the same WORKSPACE reuses\n"
        "                    builds of the same text (so builds can run in parallel)\n"
        "  --part P          with --build-only: only program, comm_removed or\n"
        "                    compute_removed (repeatable)\n"
        "  --injection LIB   the timeline library (default: beside the cuco binary,\n"
        "                    or $CUCO_TIMELINE_LIB)\n"
        "  --quiet           no progress lines on stderr\n"
        "  --no-confine      build and run the program unconfined: with cuco's\n"
        "                    environment, network and file system (warns; also\n"
        "                    CUCO_CONFINE=0; docs/launch.md)\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit status: 0 report written without warnings, 1 report written with a\n"
        "verification warning or a failed run, 2 bad usage or input.\n");
}

static void print_progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "cuco bound: %s\n", line);
}

/* Writes both variants of the workload's program into dir; prints what changed. */
static int emit_variants(const cuco_workload *w, const char *dir, cuco_err *e)
{
    char *seed = NULL;
    int rc = cuco_fs_mkdirs(dir, e);
    if (!rc)
        rc = cuco_workload_read_seed(w, &seed, e);
    const char *ext = strrchr(w->evolve_file, '.');
    char *stem = ext ? cuco_strndup(w->evolve_file, (size_t)(ext - w->evolve_file))
                     : cuco_strdup(w->evolve_file);
    char *base = cuco_path_basename(stem);
    char *evolve_path = cuco_path_join(w->dir, w->evolve_file);
    const char *paths[] = {evolve_path};
    json_t *analysis = NULL;
    cuco_err ae = CUCO_ERR_INIT;
    if (!rc && cuco_analyze_paths(paths, 1, &analysis, &ae)) {
        fprintf(stderr, "cuco bound: analysis failed (%s); variants from the call scanner only\n",
                cuco_err_msg(&ae));
        analysis = NULL;
    }
    cuco_err_clear(&ae);
    free(evolve_path);
    for (int v = 0; !rc && v < 2; v++) {
        char *text = NULL;
        int n = 0;
        const char *what = v == 0 ? "comm_removed" : "compute_removed";
        rc = cuco_bound_variant_from(seed, w->evolve_file, analysis,
                                     v == 0 ? CUCO_VARIANT_NO_COMM : CUCO_VARIANT_NO_COMPUTE, &text,
                                     &n, e);
        if (rc)
            break;
        char *name = cuco_sprintf("%s.%s%s", base, what, ext ? ext : "");
        char *path = cuco_path_join(dir, name);
        rc = cuco_fs_write(path, text, strlen(text), e);
        if (!rc)
            printf("%s: %d call%s replaced\n", path, n, n == 1 ? "" : "s");
        free(path);
        free(name);
        free(text);
    }
    json_decref(analysis);
    free(base);
    free(stem);
    free(seed);
    return rc;
}

int cmd_bound(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *target = NULL, *workspace = NULL, *injection = NULL, *emit = NULL;
    const char *prog_args = NULL, *nvcc_flags = NULL;
    int json = 0, quiet = 0, ranks = 2, prog_argc = 0, timeout_s = 0;
    int ranks_given = 0; /* --ranks: also overrides a workload's manifest */
    char **prog_argv = NULL;
    cuco_bound_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            prog_argc = argc - i - 1;
            prog_argv = argv + i + 1;
            break;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--static-only")) {
            o.static_only = 1;
        } else if (!strcmp(a, "--no-variants")) {
            o.skip_variants = 1;
        } else if (!strcmp(a, "--single-run")) {
            o.single_run = 1;
        } else if (!strcmp(a, "--build-only")) {
            o.build_only = 1;
        } else if (!strcmp(a, "--no-confine")) {
            o.no_confine = 1;
        } else if (!strcmp(a, "--timeout") && i + 1 < argc) {
            char *end = NULL;
            long t = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || t < 1 || t > 86400) {
                fprintf(stderr, "cuco bound: --timeout needs seconds >= 1, not '%s'\n", argv[i]);
                return 2;
            }
            timeout_s = (int)t;
        } else if (!strcmp(a, "--part") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "program"))
                o.build_parts |= 1u;
            else if (!strcmp(v, "comm_removed"))
                o.build_parts |= 2u;
            else if (!strcmp(v, "compute_removed"))
                o.build_parts |= 4u;
            else {
                fprintf(stderr,
                        "cuco bound: --part is program, comm_removed or compute_removed, "
                        "not '%s'\n",
                        v);
                return 2;
            }
        } else if ((!strcmp(a, "--workspace") || !strcmp(a, "--ranks") ||
                    !strcmp(a, "--injection") || !strcmp(a, "--emit-variants") ||
                    !strcmp(a, "--args") || !strcmp(a, "--nvcc-flags")) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--args"))
                prog_args = v;
            else if (!strcmp(a, "--nvcc-flags"))
                nvcc_flags = v;
            else if (!strcmp(a, "--emit-variants"))
                emit = v;
            else if (!strcmp(a, "--workspace"))
                workspace = v;
            else if (!strcmp(a, "--injection"))
                injection = v;
            else {
                char *end = NULL;
                long n = strtol(v, &end, 10);
                if (!*v || *end || n < 1 || n > 4096) {
                    fprintf(stderr, "cuco bound: --ranks needs a number >= 1, not '%s'\n", v);
                    return 2;
                }
                ranks = (int)n;
                ranks_given = 1;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cuco bound: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (!target) {
            target = a;
        } else {
            fprintf(stderr, "cuco bound: one WORKLOAD or PROGRAM only ('%s')\n", a);
            return 2;
        }
    }
    if (!target) {
        usage(stderr);
        return 2;
    }
    o.no_confine = cli_unconfined(o.no_confine);
    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    int rc;
    int is_manifest = cuco_fs_is_dir(target) || cuco_str_ends_with(target, ".yaml") ||
                      cuco_str_ends_with(target, ".yml");
    if (is_manifest && (prog_args || nvcc_flags || prog_argc)) {
        fprintf(stderr, "cuco bound: --args, --nvcc-flags and '-- ARGS' are for a bare PROGRAM.cu; "
                        "a workload is built and run as its manifest says\n");
        return 2;
    }
    if (is_manifest) {
        rc = cuco_workload_load(target, &w, &e);
        if (!rc && ranks_given)
            rc = cuco_workload_override_ranks(w, ranks, &e);
    } else {
        cuco_bare_program bp = {ranks, prog_args, nvcc_flags, prog_argc, prog_argv};
        rc = cuco_workload_from_program(target, &bp, &w, &e);
    }
    if (rc) {
        cuco_err_print(&e, "cuco bound", stderr);
        cuco_err_clear(&e);
        cuco_workload_free(w);
        return 2;
    }
    if (timeout_s > 0)
        w->bench.timeout_s = timeout_s;
    if (emit) {
        int status = emit_variants(w, emit, &e) ? 2 : 0;
        if (status)
            cuco_err_print(&e, "cuco bound", stderr);
        cuco_err_clear(&e);
        cuco_workload_free(w);
        return status;
    }
    char *ws = workspace ? cuco_strdup(workspace) : cuco_sprintf("cuco-out/%s", w->name);
    o.workspace = ws;
    o.injection_lib = injection;
    if (!quiet) {
        o.progress = print_progress;
    }
    char *report = NULL, *text = NULL;
    if (o.build_only) {
        rc = cuco_bound_build(w, &o, &text, &e);
        if (rc < 0)
            cuco_err_print(&e, "cuco bound", stderr);
        else
            fputs(text, stdout);
        free(text);
        free(ws);
        cuco_err_clear(&e);
        cuco_workload_free(w);
        return rc < 0 ? 2 : rc;
    }
    rc = cuco_bound_run(w, &o, &report, &text, &e);
    int status = 0;
    if (rc) {
        cuco_err_print(&e, "cuco bound", stderr);
        status = rc == CUCO_EINVAL || rc == CUCO_ENOTFOUND ? 2 : 1;
    } else {
        if (json)
            printf("%s\n", report);
        else
            fputs(text, stdout);
        /* A verification warning or a failed run of the program makes the
         * exit status 1 (the variants are meant to fail verification). */
        if (strstr(report, "\"warning\": true") || !strstr(report, "\"program_ok\": true"))
            status = 1;
        if (!quiet)
            fprintf(stderr, "cuco bound: wrote %s/bound.json\n", ws);
    }
    free(report);
    free(text);
    free(ws);
    cuco_err_clear(&e);
    cuco_workload_free(w);
    return status;
}
