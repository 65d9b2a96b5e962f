/* cmd_bound.c: 'cuco bound WORKLOAD|PROGRAM': measures what overlapping
 * communication with computation can gain (CUPTI kernel timeline, program
 * variants with communication or computation removed) and audits the
 * program's verification; writes WORKSPACE/bound.json and prints a summary
 * with warnings and advice (or the JSON with --json). */
#include "cli_options.h"
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

static const cli_command bound_command = {
    "bound",
    "WORKLOAD|PROGRAM.cu [OPTIONS] [-- PROGRAM-ARGS...]",
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
    "the kernel timeline still gives the bound.\n",
    "Exit status: 0 report written without warnings, 1 report written with a\n"
    "verification warning or a failed run, 2 bad usage or input.\n",
    "WORKLOAD or PROGRAM",
    1,
    1,
    1};

/* --part P of --build-only: dst is the bit set of cuco_bound_opts.build_parts. */
static int opt_part(const char *cmd, void *dst, const char *v)
{
    static const char *const parts[] = {"program", "comm_removed", "compute_removed"};
    for (unsigned i = 0; i < 3; i++)
        if (!strcmp(v, parts[i])) {
            *(unsigned *)dst |= 1u << i;
            return 0;
        }
    return cli_usage_error(cmd, "--part is program, comm_removed or compute_removed, not '%s'", v);
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

/* Measures and prints the report (its JSON with --json); returns the exit
 * status: 1 for a verification warning or a failed run of the program. */
static int bound_measure(const cuco_workload *w, const cuco_bound_opts *o, int json, int quiet)
{
    char *report = NULL, *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_bound_run(w, o, &report, &text, &e);
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
            fprintf(stderr, "cuco bound: wrote %s/bound.json\n", o->workspace);
    }
    free(report);
    free(text);
    cuco_err_clear(&e);
    return status;
}

int cmd_bound(int argc, char **argv)
{
    const char *workspace = NULL, *injection = NULL, *emit = NULL, *ranks_text = NULL;
    const char *prog_args = NULL, *nvcc_flags = NULL;
    int json = 0, timeout_s = 0;
    cuco_bound_opts o = {0};
    const cli_option options[] = {
        CLI_OPT_FLAG("json", 0, &json, "print the report as one JSON object (bound.json)"),
        CLI_OPT_STRING("workspace", 0, &workspace, "DIR",
                       "where bound.json and run folders go\n(default ./cuco-out/<workload name>)"),
        CLI_OPT_CALL(
            "ranks", 0, &ranks_text, "N",
            "ranks for a bare PROGRAM.cu (mpirun -np N; default 2), or\na workload's instead of "
            "its manifest's",
            cli_opt_ranks),
        CLI_OPT_STRING(
            "args", 0, &prog_args, "\"A B ...\"",
            "arguments of a bare PROGRAM.cu's run, split at spaces\n(or give them after '--')"),
        CLI_OPT_STRING(
            "nvcc-flags", 0, &nvcc_flags, "\"F ...\"",
            "extra compile/link flags for a bare PROGRAM.cu\n(e.g. \"-I../include -lcurand\"), "
            "split at spaces"),
        CLI_OPT_FLAG("static-only", 0, &o.static_only,
                     "only the static verification audit; run nothing"),
        CLI_OPT_FLAG(
            "no-variants", 0, &o.skip_variants,
            "skip the communication-/computation-removed variants\n(and so the dynamic audit)"),
        CLI_OPT_STRING("emit-variants", 0, &emit, "DIR",
                       "write the communication-removed and computation-removed\nprograms to DIR "
                       "(NAME.comm_removed.EXT, NAME.compute_removed.EXT)\nand stop"),
        CLI_OPT_INT(
            "timeout", 0, &timeout_s, "S",
            "limit of each run of the program or a variant, seconds\n(default: the manifest's "
            "bench timeout; 300 for a bare\nprogram); a run past it is killed and reported",
            1, 86400),
        CLI_OPT_FLAG(
            "single-run", 0, &o.single_run,
            "run the program once, with the timeline library loaded\n(default: once without it "
            "for its own timing, once with)"),
        CLI_OPT_FLAG(
            "build-only", 0, &o.build_only,
            "build the program and its two variants into WORKSPACE and\nstop; a later 'cuco "
            "bound' with the same WORKSPACE reuses\nbuilds of the same text (so builds can run in "
            "parallel)"),
        CLI_OPT_CALL(
            "part", 0, &o.build_parts, "P",
            "with --build-only: only program, comm_removed or\ncompute_removed (repeatable)",
            opt_part),
        CLI_OPT_STRING(
            "injection", 0, &injection, "LIB",
            "the timeline library (default: beside the cuco binary,\nor $CUCO_TIMELINE_LIB)"),
        CLI_OPT_FLAG(
            "no-confine", 0, &o.no_confine,
            "build and run the program unconfined: with cuco's\nenvironment, network and file "
            "system (warns; also\nCUCO_CONFINE=0; docs/launch.md)"),
        CLI_OPT_END};
    cli_args args;
    int rc = cli_parse(&bound_command, options, argc, argv, &args);
    if (rc != CLI_CONTINUE)
        return rc;
    const char *target = args.pos[0];
    int quiet = args.quiet, prog_argc = args.n_rest, ranks_given = ranks_text != NULL;
    int ranks = ranks_given ? cuco_workload_parse_ranks(ranks_text) : 2;
    char **prog_argv = args.rest;
    cli_args_free(&args);
    o.no_confine = cli_unconfined(o.no_confine);
    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
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
    char *text = NULL;
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
    int status = bound_measure(w, &o, json, quiet);
    free(ws);
    cuco_err_clear(&e);
    cuco_workload_free(w);
    return status;
}
