/* cmd_eval.c: 'cuco eval WORKLOAD [PROGRAM]': runs the evaluation cascade
 * (frozen check, compile, run + verify, benchmark) on one program and prints
 * a summary or one JSON object. Exit 0: status ok; 1: the candidate failed;
 * 2: bad usage or a bad manifest. */
#include "commands.h"
#include "cuco/buf.h"
#include "cuco/err.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/launch.h"
#include "cuco/workload.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuco eval WORKLOAD [PROGRAM] [OPTIONS]\n"
            "\n"
            "Evaluates PROGRAM (default: the workload's own evolve file) through the\n"
            "cascade: frozen check, L1 compile, L2 run + verify, L3 benchmark.\n"
            "WORKLOAD is a folder holding workload.yaml, or the manifest itself.\n"
            "\n"
            "Options:\n"
            "  --json              print exactly one JSON object (status, level, time_ms,\n"
            "                      time_ms_min, time_ms_max, spread, times_ms, metrics,\n"
            "                      excerpt, program_hash, compile_s, verify_s, bench_s)\n"
            "  --level N           stop after level N (1 compile, 2 verify, 3 bench; default 3)\n"
            "  --repeats N         benchmark repeats (default: the manifest's bench.repeats)\n"
            "  --verify-timeout S  override the manifest's verify.timeout_s (seconds)\n"
            "  --ranks N           run at N ranks instead of the manifest's\n"
            "  --frozen-ref FILE   the text whose frozen part PROGRAM must keep (default: the\n"
            "                      workload's seed); for a transformed program of a seed that\n"
            "                      marks no EVOLVE-BLOCK, its gen_0 (WORKSPACE/gen_0/...)\n"
            "  --work-dir D        make the build folder under D (default: $TMPDIR or /tmp)\n"
            "  --keep-build        keep the build folder even when the program passes\n"
            "  --launcher KIND     local (default: mpirun here) or slurm (sbatch; --work-dir\n"
            "                      must then be on a file system the nodes share)\n"
            "  --quiet             no progress lines on stderr\n"
            "  --no-confine        build and run the program unconfined: with cuco's\n"
            "                      environment, network and file system (warns; also\n"
            "                      CUCO_CONFINE=0; docs/launch.md)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 status ok, 1 the program failed (compile_error, run_error,\n"
            "timeout, wrong_answer, frozen_violation, bad_output, infra_error),\n"
            "2 bad usage or bad manifest.\n");
}

static void print_progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "cuco eval: %s\n", line);
}

static int parse_positive(const char *opt, const char *text, double max, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (!*text || *end || !(v > 0) || v > max) {
        fprintf(stderr, "cuco eval: %s needs a number > 0, not '%s'\n", opt, text);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_whole(const char *opt, const char *text, long max, int *out)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 1 || v > max) {
        fprintf(stderr, "cuco eval: %s needs a whole number from 1 to %ld, not '%s'\n", opt, max,
                text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void print_summary(const cuco_workload *w, const cuco_eval_result *r)
{
    static const char *const level_names[] = {"none", "L1 compile", "L2 verify", "L3 bench"};
    printf("workload   %s\n", w->name);
    printf("program    %s\n", r->program_hash);
    printf("status     %s\n", cuco_eval_status_name(r->status));
    printf("level      %d (%s)\n", r->level,
           level_names[r->level >= 0 && r->level <= 3 ? r->level : 0]);
    if (r->n_times > 0) {
        printf("time_ms    median %.4f  min %.4f  max %.4f  spread %.1f%%  (%d runs)\n", r->time_ms,
               r->time_ms_min, r->time_ms_max, 100 * r->spread, r->n_times);
        json_t *m = r->metrics_json ? json_loads(r->metrics_json, 0, NULL) : NULL;
        json_t *compute = json_object_get(m, "compute_ms"), *comm = json_object_get(m, "comm_ms");
        if (json_is_number(compute) && json_is_number(comm)) {
            double cp = json_number_value(compute), cm = json_number_value(comm);
            double bound = cp > cm ? cp : cm;
            printf("breakdown  compute_ms %.4f  comm_ms %.4f  overlap bound max(compute, comm) %.4f"
                   " (median run at %.2fx the bound)\n",
                   cp, cm, bound, bound > 0 ? r->time_ms / bound : 0);
        }
        json_decref(m);
    }
    printf("seconds    compile %.2f  verify %.2f  bench %.2f\n", r->compile_s, r->verify_s,
           r->bench_s);
    if (r->build_dir)
        printf("build dir  %s\n", r->build_dir);
    if (r->excerpt && r->status != CUCO_EVAL_OK)
        printf("--- excerpt ---\n%s%s", r->excerpt,
               cuco_str_ends_with(r->excerpt, "\n") ? "" : "\n");
}

int cmd_eval(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *workload_arg = NULL, *program_arg = NULL, *work_dir = NULL, *launcher_kind = NULL;
    const char *frozen_ref_arg = NULL;
    int json = 0, quiet = 0, keep_build = 0, level = 3, repeats = 0, ranks = 0, no_confine = 0;
    double verify_timeout = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--keep-build")) {
            keep_build = 1;
        } else if (!strcmp(a, "--no-confine")) {
            no_confine = 1;
        } else if (!strcmp(a, "--level") || !strcmp(a, "--repeats") ||
                   !strcmp(a, "--verify-timeout") || !strcmp(a, "--work-dir") ||
                   !strcmp(a, "--launcher") || !strcmp(a, "--ranks") ||
                   !strcmp(a, "--frozen-ref")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cuco eval: %s needs a value\n", a);
                return 2;
            }
            const char *val = argv[++i];
            if (!strcmp(a, "--work-dir")) {
                work_dir = val;
            } else if (!strcmp(a, "--frozen-ref")) {
                frozen_ref_arg = val;
            } else if (!strcmp(a, "--ranks")) {
                if ((ranks = cuco_workload_parse_ranks(val)) < 0) {
                    fprintf(stderr, "cuco eval: --ranks needs a number from 1 to 65536, not '%s'\n",
                            val);
                    return 2;
                }
            } else if (!strcmp(a, "--launcher")) {
                launcher_kind = val;
            } else if (!strcmp(a, "--verify-timeout")) {
                if (parse_positive(a, val, 1e9, &verify_timeout))
                    return 2;
            } else if (!strcmp(a, "--level")) {
                if (parse_whole(a, val, 3, &level))
                    return 2;
            } else if (parse_whole(a, val, 1000, &repeats)) {
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cuco eval: unknown option '%s' (see cuco eval --help)\n", a);
            return 2;
        } else if (!workload_arg) {
            workload_arg = a;
        } else if (!program_arg) {
            program_arg = a;
        } else {
            fprintf(stderr, "cuco eval: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!workload_arg) {
        usage(stderr);
        return 2;
    }
    no_confine = cli_unconfined(no_confine);

    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    cuco_launcher *launcher = NULL;
    char *program = NULL, *frozen_ref = NULL;
    int code = 2;
    if (cuco_workload_load(workload_arg, &w, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        goto out;
    }
    if (ranks && cuco_workload_override_ranks(w, ranks, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        goto out;
    }
    if (verify_timeout > 0)
        w->verify.timeout_s = verify_timeout;
    if (program_arg && cuco_fs_read(program_arg, &program, NULL, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        goto out;
    }
    if (frozen_ref_arg && cuco_fs_read(frozen_ref_arg, &frozen_ref, NULL, &e) != 0) {
        cuco_err_print(&e, "cuco eval: --frozen-ref", stderr);
        goto out;
    }
    if (launcher_kind &&
        cuco_launcher_from_kind(launcher_kind, w->gpu, w->ranks, 1, -1, 0, &launcher, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        goto out;
    }
    cuco_eval_opts opts = {
        .launcher = launcher,
        .work_dir = work_dir,
        .max_level = level,
        .repeats = repeats,
        .keep_build = keep_build,
        .frozen_ref = frozen_ref,
        .progress = quiet ? NULL : print_progress,
        .no_confine = no_confine,
    };
    cuco_eval_result r;
    if (cuco_eval_program(w, program, &opts, &r, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        code = 1;
        goto out;
    }
    if (json) {
        char *s = cuco_eval_result_json(&r);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        print_summary(w, &r);
    }
    code = r.status == CUCO_EVAL_OK ? 0 : 1;
    cuco_eval_result_free(&r);
out:
    free(program);
    free(frozen_ref);
    cuco_launcher_free(launcher);
    cuco_workload_free(w);
    cuco_err_clear(&e);
    return code;
}
