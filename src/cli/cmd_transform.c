/* cmd_transform.c: 'cuco transform WORKLOAD': the fast path. Parses the
 * arguments, runs cuco_transform_workload (src/transform) and, with --model,
 * the LLM route when the rules refuse (cuco_transform_llm), and prints the
 * report. Exit 0: transformed and verified (or, with --no-verify, transformed
 * and statically checked); 1: not transformed (refused, static check,
 * build or verification failed); 2: bad usage or manifest; 3: built, not
 * verified because there is no GPU. */
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

static void usage(FILE *out)
{
    fprintf(out, "usage: cuco transform WORKLOAD|PROGRAM.cu [OPTIONS]\n"
                 "\n"
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
                 "(docs/workload.md) to be verified and timed.\n"
                 "\n"
                 "Options:\n"
                 "  --workspace D   workspace folder (default: ./cuco-out/<workload>)\n"
                 "  --ranks N       ranks of a bare PROGRAM.cu (default 2), or a workload's\n"
                 "                  instead of its manifest's (a separate workload NAME@N)\n"
                 "  --args \"A ...\"  its arguments (split at spaces)\n"
                 "  --nvcc-flags \"F ...\"  extra nvcc flags for a bare PROGRAM.cu\n"
                 "  --no-verify     do not build or run anything: rules and static check only;\n"
                 "                  the program is registered as 'pending'\n"
                 "  --model SPEC    an LLM for the LLM route (\"anthropic:NAME\", \"openai:NAME\"\n"
                 "                  or a bare name; repeat for several): when the rules refuse\n"
                 "                  the program (or it fails its check, build or verification),\n"
                 "                  the model rewrites it in two stages (A: symmetric memory,\n"
                 "                  window, device communicator; B: device-initiated\n"
                 "                  communication instead of the host collectives), each edit\n"
                 "                  built (and verified with a GPU) with the errors fed back,\n"
                 "                  then judged by the model and the static check. Keys:\n"
                 "                  ANTHROPIC_API_KEY, OPENAI_API_KEY; base URLs:\n"
                 "                  CUCO_ANTHROPIC_BASE_URL, CUCO_OPENAI_BASE_URL. docs/llm.md\n"
                 "  --route R       auto (default: rules, then the LLM route if refused and a\n"
                 "                  model is given), rules, or llm (the LLM route only)\n"
                 "  --max-attempts N  edits per stage of the LLM route (default 4)\n"
                 "  --budget-usd X  money limit of the LLM route's calls\n"
                 "  --price SPEC    \"model=IN,OUT[,CACHED]\" $ per million tokens (also\n"
                 "                  $CUCO_LLM_PRICES)\n"
                 "  --base-url URL  the models' API base URL\n"
                 "  --json          print the report as one JSON object\n"
                 "  --quiet         no progress lines on stderr\n"
                 "  --no-confine    build and run the transformed program unconfined: with\n"
                 "                  cuco's environment, network and file system (warns; also\n"
                 "                  CUCO_CONFINE=0; docs/launch.md)\n"
                 "  -h, --help      this text\n"
                 "\n"
                 "Exit status: 0 transformed and verified (--no-verify: transformed and\n"
                 "statically checked), 1 not transformed (see the report), 2 bad usage or\n"
                 "bad manifest, 3 built but not verified: no GPU on this machine.\n");
}

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

int cmd_transform(int argc, char **argv)
{
    const char *workload_arg = NULL, *workspace = NULL;
    int no_verify = 0, json = 0, quiet = 0, no_confine = 0;
    cuco_bare_program bare = {2, NULL, NULL, 0, NULL};
    int ranks_given = 0; /* --ranks: also overrides a workload's manifest */
    /* the LLM route (src/transform/llm_route.c) */
    const char **models = calloc((size_t)argc + 1, sizeof *models);
    const char *route = "auto", *prices = NULL, *base_url = NULL;
    size_t n_models = 0;
    long max_attempts = 0;
    double budget_usd = 0;
    if (!models) {
        fprintf(stderr, "cuco transform: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(models);
            return 0;
        } else if (strcmp(a, "--workspace") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "cuco transform: --workspace needs a folder\n");
                free(models);
                return 2;
            }
            workspace = argv[i];
        } else if (!strcmp(a, "--model") || !strcmp(a, "--route") || !strcmp(a, "--price") ||
                   !strcmp(a, "--base-url") || !strcmp(a, "--max-attempts") ||
                   !strcmp(a, "--budget-usd")) {
            char *end = NULL;
            if (++i >= argc) {
                fprintf(stderr, "cuco transform: %s needs a value\n", a);
                free(models);
                return 2;
            }
            if (!strcmp(a, "--model"))
                models[n_models++] = argv[i];
            else if (!strcmp(a, "--route"))
                route = argv[i];
            else if (!strcmp(a, "--price"))
                prices = argv[i];
            else if (!strcmp(a, "--base-url"))
                base_url = argv[i];
            else if (!strcmp(a, "--max-attempts"))
                max_attempts = strtol(argv[i], &end, 10);
            else
                budget_usd = strtod(argv[i], &end);
            if (end && (*end || end == argv[i] || max_attempts < 0 || max_attempts > 100 ||
                        !(budget_usd >= 0))) {
                fprintf(stderr, "cuco transform: bad value '%s' for %s\n", argv[i], a);
                free(models);
                return 2;
            }
        } else if (!strcmp(a, "--ranks") || !strcmp(a, "--args") || !strcmp(a, "--nvcc-flags")) {
            if (++i >= argc) {
                fprintf(stderr, "cuco transform: %s needs a value\n", a);
                free(models);
                return 2;
            }
            if (!strcmp(a, "--ranks")) {
                char *end = NULL;
                long r = strtol(argv[i], &end, 10);
                if (!end || *end || r < 1 || r > 64) {
                    fprintf(stderr, "cuco transform: --ranks takes 1..64, not '%s'\n", argv[i]);
                    free(models);
                    return 2;
                }
                bare.ranks = (int)r;
                ranks_given = 1;
            } else if (!strcmp(a, "--args")) {
                bare.args = argv[i];
            } else {
                bare.flags = argv[i];
            }
        } else if (strcmp(a, "--no-verify") == 0) {
            no_verify = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--no-confine") == 0) {
            no_confine = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cuco transform: unknown option '%s' (see cuco transform --help)\n", a);
            free(models);
            return 2;
        } else if (!workload_arg) {
            workload_arg = a;
        } else {
            fprintf(stderr, "cuco transform: unexpected argument '%s'\n", a);
            free(models);
            return 2;
        }
    }
    int use_llm = !strcmp(route, "llm");
    if (strcmp(route, "auto") && strcmp(route, "rules") && !use_llm) {
        fprintf(stderr, "cuco transform: --route is auto, rules or llm, not '%s'\n", route);
        free(models);
        return 2;
    }
    if ((use_llm && !n_models) || (use_llm && no_verify)) {
        fprintf(stderr, "cuco transform: --route llm needs --model and builds every edit "
                        "(no --no-verify)\n");
        free(models);
        return 2;
    }
    if (!workload_arg) {
        usage(stderr);
        free(models);
        return 2;
    }
    if (prices && bad_prices(prices)) {
        free(models);
        return 2;
    }
    /* Both routes evaluate through the cascade, which reads the setting. */
    if (cli_unconfined(no_confine))
        setenv("CUCO_CONFINE", "0", 1);
    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    char *report = NULL;
    int code = 2;
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
        lo.prices = prices;
        lo.budget_usd = budget_usd;
        lo.base_url = base_url;
        lo.max_attempts = (int)max_attempts;
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
    code = outcome == CUCO_TX_NOT_BUILT ? 0 : (int)outcome;
    if (json) {
        printf("%s\n", report ? report : "{}");
        goto out;
    }
    json_t *r = report ? json_loads(report, 0, NULL) : NULL;
    if (!r)
        goto out;
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
out:
    free(models);
    free(report);
    cuco_workload_free(w);
    cuco_err_clear(&e);
    return code;
}
