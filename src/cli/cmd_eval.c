/* cmd_eval.c: 'cuco eval WORKLOAD [PROGRAM]': runs the evaluation cascade
 * (frozen check, compile, run + verify, benchmark) on one program and prints
 * a summary or one JSON object. Exit 0: status ok; 1: the candidate failed;
 * 2: bad usage or a bad manifest. */
#include "cli_options.h"
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

static const cli_command eval_command = {
    "eval",
    "WORKLOAD [PROGRAM] [OPTIONS]",
    "Evaluates PROGRAM (default: the workload's own evolve file) through the\n"
    "cascade: frozen check, L1 compile, L2 run + verify, L3 benchmark.\n"
    "WORKLOAD is a folder holding workload.yaml, or the manifest itself.\n",
    "Exit status: 0 status ok, 1 the program failed (compile_error, run_error,\n"
    "timeout, wrong_answer, frozen_violation, bad_output, infra_error),\n"
    "2 bad usage or bad manifest.\n",
    "WORKLOAD",
    1,
    2,
    0};

static void print_progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "cuco eval: %s\n", line);
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
    const char *work_dir = NULL, *launcher_kind = NULL, *frozen_ref_arg = NULL, *ranks = NULL;
    int json = 0, keep_build = 0, level = 3, repeats = 0, no_confine = 0;
    double verify_timeout = 0;
    const cli_option options[] = {
        CLI_OPT_FLAG(
            "json", 0, &json,
            "print exactly one JSON object (status, level, time_ms,\ntime_ms_min, time_ms_max, "
            "spread, times_ms, metrics,\nexcerpt, program_hash, compile_s, verify_s, bench_s)"),
        CLI_OPT_INT("level", 0, &level, "N",
                    "stop after level N (1 compile, 2 verify, 3 bench; default 3)", 1, 3),
        CLI_OPT_INT("repeats", 0, &repeats, "N",
                    "benchmark repeats (default: the manifest's bench.repeats)", 1, 1000),
        CLI_OPT_DOUBLE("verify-timeout", 0, &verify_timeout, "S",
                       "override the manifest's verify.timeout_s (seconds)", 1e-3, 1e9),
        CLI_OPT_CALL("ranks", 0, &ranks, "N", "run at N ranks instead of the manifest's",
                     cli_opt_ranks),
        CLI_OPT_STRING(
            "frozen-ref", 0, &frozen_ref_arg, "FILE",
            "the text whose frozen part PROGRAM must keep (default: the\nworkload's seed); for a "
            "transformed program of a seed that\nmarks no EVOLVE-BLOCK, its gen_0 "
            "(WORKSPACE/gen_0/...)"),
        CLI_OPT_STRING("work-dir", 0, &work_dir, "D",
                       "make the build folder under D (default: $TMPDIR or /tmp)"),
        CLI_OPT_FLAG("keep-build", 0, &keep_build,
                     "keep the build folder even when the program passes"),
        CLI_OPT_STRING(
            "launcher", 0, &launcher_kind, "KIND",
            "local (default: mpirun here) or slurm (sbatch; --work-dir\nmust then be on a file "
            "system the nodes share)"),
        CLI_OPT_FLAG(
            "no-confine", 0, &no_confine,
            "build and run the program unconfined: with cuco's\nenvironment, network and file "
            "system (warns; also\nCUCO_CONFINE=0; docs/launch.md)"),
        CLI_OPT_END};
    cli_args args;
    int code = cli_parse(&eval_command, options, argc, argv, &args);
    if (code != CLI_CONTINUE)
        return code;
    const char *workload_arg = args.pos[0], *program_arg = args.n_pos > 1 ? args.pos[1] : NULL;
    int quiet = args.quiet;
    cli_args_free(&args);
    no_confine = cli_unconfined(no_confine);

    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    cuco_launcher *launcher = NULL;
    char *program = NULL, *frozen_ref = NULL;
    code = CLI_EXIT_USAGE;
    if (cuco_workload_load(workload_arg, &w, &e) != 0) {
        cuco_err_print(&e, "cuco eval", stderr);
        goto out;
    }
    if (ranks && cuco_workload_override_ranks(w, cuco_workload_parse_ranks(ranks), &e) != 0) {
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
        cuco_launcher_from_kind(launcher_kind, w->gpu, w->ranks, 1, -1, 0, 1, &launcher, &e) != 0) {
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
