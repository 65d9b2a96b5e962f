/* cmd_transform.c: 'cuco transform WORKLOAD': the fast path. Parses the
 * arguments, runs cuco_transform_workload (src/transform) and, with --model,
 * the LLM route when the rules refuse (cuco_transform_llm), and prints the
 * report. Exit 0: transformed and verified (or, with --no-verify, transformed
 * and statically checked); 1: not transformed (refused, static check,
 * build or verification failed); 2: bad usage or manifest; 3: built, not
 * verified because there is no GPU. */
#include "cli_options.h"
#include "commands.h"
#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/err.h"
#include "cuco/fs.h"
#include "cuco/llm.h"
#include "cuco/transform.h"
#include "cuco/transform_llm.h"
#include "cuco/workload.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_command transform_command = {
    "transform",
    "WORKLOAD|PROGRAM.cu [OPTIONS]",
    "Rewrites the workload's host-driven NCCL calls into device-initiated\n"
    "communication on device/ (symmetric windows, a device communicator, LSA\n"
    "kernels), checks the result statically, builds, verifies and times it\n"
    "against the seed, and writes WORKSPACE/gen_0/: the program (the evolve\n"
    "file's name), program.diff, transform_report.md and transform_report.json.\n"
    "A verified program becomes the root of a new run in WORKSPACE/runs.db.\n"
    "WORKLOAD is a folder holding workload.yaml, or the manifest itself. A bare\n"
    "PROGRAM.cu is built with nvcc + MPI + NCCL + cuBLAS (as 'cuco bound' does)\n"
    "and run as 'mpirun -np N PROGRAM ARGS' for verification and timing; it must\n"
    "print 'Verification: PASS|FAIL' and 'CUCO_RESULT {\"time_ms\": ...}'\n"
    "(docs/workload.md) to be verified and timed. A bare .cpp is built as\n"
    "CUDA (-x cu); a .c file must be renamed .cu. A collective the device\n"
    "path cannot take (ncclReduce, ncclMax, a second communicator's call, a\n"
    "buffer from another allocator) stays host NCCL, inside an NCCL group too\n"
    "unless the group has point-to-point calls: the report's 'kept' lines say\n"
    "which and why (docs/transform.md).\n",
    "Exit status: 0 transformed and verified (--no-verify: transformed and\n"
    "statically checked), 1 not transformed (see the report), 2 bad usage or\n"
    "bad manifest, 3 built but not verified: no GPU on this machine.\n",
    "WORKLOAD",
    1,
    1,
    0};

static void print_progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "cuco transform: %s\n", line);
}

/* 1 (and says why) when a --price spec does not parse: bad usage, found
 * before any work rather than when the LLM route starts. */
static int bad_prices(const char *spec)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_llm_prices t;
    int rc = cuco_llm_prices_init(&t, &e);
    if (rc == 0)
        rc = cuco_llm_prices_parse(&t, spec, &e);
    if (rc)
        cuco_err_print(&e, "cuco transform", stderr);
    cuco_llm_prices_free(&t);
    cuco_err_clear(&e);
    return rc != 0;
}

/* The transform report (its JSON text) as lines for a reader. */
static void print_transform_report(const cuco_workload *w, const char *workspace,
                                   const char *report)
{
    json_t *r = report ? json_loads(report, 0, NULL) : NULL;
    if (!r)
        return;
    printf("%s: %s; static check: %s; verification: %s\n", w->name,
           json_is_true(json_object_get(r, "transformed")) ? "transformed" : "NOT transformed",
           json_string_value(json_object_get(r, "static_check")),
           json_string_value(json_object_get(r, "verification")));
    {
        /* A verification audit finding of 'cuco bound' (docs/bound.md). */
        char *ws = workspace ? cuco_strdup(workspace) : cuco_sprintf("cuco-out/%s", w->name);
        char *warning = NULL;
        cuco_err we = CUCO_ERR_INIT;
        if (ws && cuco_bound_read_warning(ws, &warning, &we) > 0)
            printf("WARNING: %s Its verification PASS and the speedup below are not proven "
                   "correct.\n",
                   warning);
        free(warning);
        free(ws);
        cuco_err_clear(&we);
    }
    json_t *notes = json_object_get(r, "notes"), *n;
    size_t i;
    json_array_foreach(notes, i, n)
    {
        const char *kind = json_string_value(json_object_get(n, "kind"));
        int line = (int)json_integer_value(json_object_get(n, "line"));
        if (line > 0)
            printf("  %s:%d: %s: %s\n", json_string_value(json_object_get(n, "file")), line, kind,
                   json_string_value(json_object_get(n, "text")));
        else
            printf("  %s: %s\n", kind, json_string_value(json_object_get(n, "text")));
    }
    json_t *llm = json_object_get(r, "llm");
    if (llm)
        printf("  LLM route: stage A %d edit(s), stage B %d edit(s), judge %s, %d calls, $%.6f\n",
               (int)json_integer_value(
                   json_object_get(json_object_get(json_object_get(r, "stages"), "A"), "attempts")),
               (int)json_integer_value(
                   json_object_get(json_object_get(json_object_get(r, "stages"), "B"), "attempts")),
               json_string_value(json_object_get(json_object_get(r, "judge"), "verdict")),
               (int)json_integer_value(json_object_get(llm, "calls_made")),
               json_real_value(json_object_get(llm, "usd")));
    json_t *sp = json_object_get(r, "speedup");
    if (sp)
        printf("  speedup over the seed: %.3fx\n", json_real_value(sp));
    const char *prog = json_string_value(json_object_get(r, "program"));
    if (prog)
        printf("  program: %s\n", prog);
    json_decref(r);
}

/* The transform's options; what cmd_transform reads after parsing. */
typedef struct transform_args {
    const char *workspace, *route, *prices, *base_url, *ranks;
    int no_verify, json, no_confine, max_attempts;
    double budget_usd;
    cuco_strlist models;
    cuco_bare_program bare;
} transform_args;

/* Parses argv into a; returns CLI_CONTINUE or the exit status. */
static int transform_parse(int argc, char **argv, transform_args *a, cli_args *args)
{
    const cli_option options[] = {
        CLI_OPT_STRING("workspace", 0, &a->workspace, "D",
                       "workspace folder (default: ./cuco-out/<workload>)"),
        CLI_OPT_CALL(
            "ranks", 0, &a->ranks, "N",
            "ranks of a bare PROGRAM.cu (default 2), or a workload's\ninstead of its manifest's (a "
            "separate workload NAME@N)",
            cli_opt_ranks),
        CLI_OPT_STRING("args", 0, &a->bare.args, "\"A ...\"", "its arguments (split at spaces)"),
        CLI_OPT_STRING("nvcc-flags", 0, &a->bare.flags, "\"F ...\"",
                       "extra nvcc flags for a bare PROGRAM.cu"),
        CLI_OPT_FLAG("no-verify", 0, &a->no_verify,
                     "do not build or run anything: rules and static check only;\nthe program is "
                     "registered as 'pending'"),
        CLI_OPT_LIST(
            "model", 0, &a->models, "SPEC",
            "an LLM for the LLM route (\"anthropic:NAME\", \"openai:NAME\"\nor a bare name; "
            "repeat for several): when the rules refuse\nthe program (or it fails its check, "
            "build or verification),\nthe model rewrites it in two stages (A: symmetric memory,\n"
            "window, device communicator; B: device-initiated\ncommunication instead of the host "
            "collectives), each edit\nbuilt (and verified with a GPU) with the errors fed back,\n"
            "then judged by the model and the static check. Keys:\nANTHROPIC_API_KEY, "
            "OPENAI_API_KEY; base URLs:\nCUCO_ANTHROPIC_BASE_URL, CUCO_OPENAI_BASE_URL. "
            "docs/llm.md"),
        CLI_OPT_STRING(
            "route", 0, &a->route, "R",
            "auto (default: rules, then the LLM route if refused and a\nmodel is given), rules, "
            "or llm (the LLM route only)"),
        CLI_OPT_INT("max-attempts", 0, &a->max_attempts, "N",
                    "edits per stage of the LLM route (default 4)", 0, 100),
        CLI_OPT_DOUBLE("budget-usd", 0, &a->budget_usd, "X", "money limit of the LLM route's calls",
                       0, 1e12),
        CLI_OPT_STRING("price", 0, &a->prices, "SPEC",
                       "\"model=IN,OUT[,CACHED]\" $ per million tokens (also\n$CUCO_LLM_PRICES)"),
        CLI_OPT_STRING("base-url", 0, &a->base_url, "URL", "the models' API base URL"),
        CLI_OPT_FLAG("json", 0, &a->json, "print the report as one JSON object"),
        CLI_OPT_FLAG(
            "no-confine", 0, &a->no_confine,
            "build and run the transformed program unconfined: with\ncuco's environment, network "
            "and file system (warns; also\nCUCO_CONFINE=0; docs/launch.md)"),
        CLI_OPT_END};
    int rc = cli_parse(&transform_command, options, argc, argv, args);
    if (rc != CLI_CONTINUE)
        return rc;
    if (a->ranks)
        a->bare.ranks = cuco_workload_parse_ranks(a->ranks);
    int use_llm = !strcmp(a->route, "llm");
    if (strcmp(a->route, "auto") && strcmp(a->route, "rules") && !use_llm)
        rc = cli_usage_error("transform", "--route is auto, rules or llm, not '%s'", a->route);
    else if ((use_llm && !a->models.n) || (use_llm && a->no_verify))
        rc = cli_usage_error("transform", "--route llm needs --model and builds every edit "
                                          "(no --no-verify)");
    else if (a->prices && bad_prices(a->prices))
        rc = CLI_EXIT_USAGE;
    if (rc != CLI_CONTINUE)
        cli_args_free(args);
    return rc;
}

int cmd_transform(int argc, char **argv)
{
    transform_args ta = {.route = "auto", .bare = {2, NULL, NULL, 0, NULL}};
    cli_args args;
    int code = transform_parse(argc, argv, &ta, &args);
    if (code != CLI_CONTINUE) {
        cuco_strlist_free(&ta.models);
        return code;
    }
    const char *workload_arg = args.pos[0], *workspace = ta.workspace, *route = ta.route;
    int quiet = args.quiet, no_verify = ta.no_verify, json = ta.json;
    int use_llm = !strcmp(route, "llm"), ranks_given = ta.ranks != NULL;
    size_t n_models = ta.models.n;
    const char **models = calloc(n_models + 1, sizeof *models);
    for (size_t k = 0; models && k < n_models; k++)
        models[k] = ta.models.items[k];
    cuco_bare_program bare = ta.bare;
    cli_args_free(&args);
    /* Both routes evaluate through the cascade, which reads the setting. */
    if (cli_unconfined(ta.no_confine))
        setenv("CUCO_CONFINE", "0", 1);
    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    char *report = NULL;
    code = CLI_EXIT_USAGE;
    /* a workload folder or manifest, or a bare PROGRAM.cu */
    if (cuco_workload_is_program_path(workload_arg) && !cuco_fs_is_dir(workload_arg)
            ? cuco_workload_from_program(workload_arg, &bare, &w, &e) != 0
            : cuco_workload_load(workload_arg, &w, &e) != 0) {
        cuco_err_print(&e, "cuco transform", stderr);
        goto out;
    }
    if (ranks_given && cuco_workload_override_ranks(w, bare.ranks, &e) != 0) {
        cuco_err_print(&e, "cuco transform", stderr);
        goto out;
    }
    cuco_transform_opts o;
    memset(&o, 0, sizeof(o));
    o.workspace = workspace;
    o.no_verify = no_verify;
    o.progress = quiet ? NULL : print_progress;
    cuco_transform_outcome outcome = CUCO_TX_REFUSED;
    if (!use_llm && cuco_transform_workload(w, &o, &outcome, &report, &e) != 0) {
        cuco_err_print(&e, "cuco transform", stderr);
        code = 1;
        goto out;
    }
    if (n_models && !no_verify && outcome == CUCO_TX_REFUSED && strcmp(route, "rules")) {
        cuco_transform_llm_opts lo;
        memset(&lo, 0, sizeof lo);
        lo.workspace = workspace;
        lo.models = models;
        lo.prices = ta.prices;
        lo.budget_usd = ta.budget_usd;
        lo.base_url = ta.base_url;
        lo.max_attempts = ta.max_attempts;
        lo.progress = o.progress;
        free(report);
        report = NULL;
        if (o.progress)
            o.progress(NULL, use_llm ? "LLM route" : "the rules did not transform it: LLM route");
        if (cuco_transform_llm(w, &lo, &outcome, &report, &e) != 0) {
            cuco_err_print(&e, "cuco transform", stderr);
            code = outcome == CUCO_TX_REFUSED && e.code == CUCO_EINVAL ? 2 : 1;
            goto out;
        }
    }
    code = outcome == CUCO_TX_REFUSED      ? CLI_EXIT_FAILED
           : outcome == CUCO_TX_UNVERIFIED ? CLI_EXIT_NO_GPU
                                           : CLI_EXIT_OK;
    if (json) {
        printf("%s\n", report ? report : "{}");
        goto out;
    }
    print_transform_report(w, workspace, report);
out:
    free(models);
    cuco_strlist_free(&ta.models);
    free(report);
    cuco_workload_free(w);
    cuco_err_clear(&e);
    return code;
}
