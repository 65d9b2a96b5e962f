/* cmd_run.c: 'cuco run WORKLOAD' — bound, analyze, transform, evolve and
 * report in one go.
 *
 * Each step is the matching cuco subcommand, run as a child of this same
 * binary with its output shown live. Every step reads and writes the
 * workspace, so an interrupted run is resumed by running the same command
 * again: a transformed program already in gen_0/ is kept, and the search
 * continues from its database.
 */
#include "commands.h"

#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/compare.h"
#include "cuco/config.h"
#include "cuco/err.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/launch.h"
#include "cuco/proc.h"
#include "cuco/workload.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Below this ceiling (baseline / overlap bound) an LLM budget is not spent
 * without --force: no co-design can gain more than a few percent. */
#define RUN_MIN_CEILING 1.05

struct run_opts {
    const char *workload;
    const char *workspace;
    const char *mutator;
    int force;
    int from_seed;
    int skip_bound;
    int quiet;
    int confirm_rounds;       /* side-by-side rounds after the search; 0: none */
    const char *ranks;        /* --ranks: the workload at that many ranks; NULL: the manifest's */
    cuco_strlist evolve_args; /* passed through to 'cuco evolve' */
    int no_confine;           /* --no-confine: every step runs candidates unconfined */
};

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: cuco run WORKLOAD [options] [-- EVOLVE-OPTIONS...]\n"
            "\n"
            "Runs the whole pipeline on a workload folder (one holding workload.yaml):\n"
            "  1. bound      measure the overlap ceiling and audit the verification\n"
            "                (GPU workloads; skipped where no GPU is visible)\n"
            "  2. analyze    find the program's collectives -> WORKSPACE/analysis.json\n"
            "  3. transform  fast path: a verified device-initiated baseline in\n"
            "                WORKSPACE/gen_0/ (only when the program has NCCL collectives;\n"
            "                kept when it already exists)\n"
            "  4. evolve     the search, starting from gen_0 (or the seed)\n"
            "  5. confirm    the host-driven seed, the workload's expert program (manifest\n"
            "                'expert'), gen_0 and the best program timed side by side in\n"
            "                interleaved rounds (each verified and benchmarked every\n"
            "                round) -> WORKSPACE/confirm.json: the speedups to quote\n"
            "  6. report     WORKSPACE/report.html, report.md and the best program\n"
            "Run the same command again to resume an interrupted run.\n"
            "\n"
            "After step 1 (or from a bound.json an earlier 'cuco bound' left in the\n"
            "workspace) the advice paragraph and any verification warning are printed\n"
            "before anything else runs. When the ceiling is under %.2fx and the search\n"
            "would use an LLM mutator (llm, llm_diff, llm_full, llm_cross), the run stops\n"
            "there, spending nothing, unless --force is given; the offline knob mutator\n"
            "always runs.\n"
            "\n"
            "Options:\n"
            "  --workspace DIR     where everything goes (default ./cuco-out/<workload name>)\n"
            "  --mutator NAME      knob (default, offline) or llm\n"
            "  --model NAME        LLM model (with --mutator llm; also the transform's LLM\n"
            "                      route for what the rules refuse); repeatable\n"
            "  --budget-usd X      stop the search before LLM spend would exceed X\n"
            "  --generations N     search budget in generations\n"
            "  --evaluations N     search budget in evaluations\n"
            "  --time S            search budget in wall-clock seconds\n"
            "  --slots N           candidates evaluated at once\n"
            "  --retime-rounds N   re-time each apparent improvement beside the run's best\n"
            "                      in N rounds before it counts (default 2; 0: never)\n"
            "  --from-seed         skip the transform: search from the host-driven seed\n"
            "  --skip-bound        skip the bound step\n"
            "  --ranks N           run the workload at N ranks instead of the manifest's (a\n"
            "                      separate workload NAME@N: its own workspace and database)\n"
            "  --confirm-rounds N  rounds of the confirm step (default 3; 0 skips it)\n"
            "  --force             spend an LLM budget even when the ceiling is under %.2fx\n"
            "  --quiet             only the final summary\n"
            "  --no-confine        every step builds and runs candidates unconfined (warns;\n"
            "                      also CUCO_CONFINE=0; docs/launch.md)\n"
            "  -h, --help          this text\n"
            "Anything after '--' goes to 'cuco evolve' unchanged (see 'cuco evolve --help').\n"
            "\n"
            "Exit status: 0 done; 1 a step failed, or stopped before an LLM search for a\n"
            "ceiling under %.2fx (see --force); 2 bad usage.\n",
            RUN_MIN_CEILING, RUN_MIN_CEILING, RUN_MIN_CEILING);
}

static char *self_exe(void)
{
    char *path = cuco_path_abs("/proc/self/exe");
    return path ? path : cuco_strdup("cuco");
}

/* Runs 'cuco ARGS...' with live output; returns its exit code (or 1 when it
 * could not start or was killed). */
static int run_step(const char *step, const char *exe, cuco_strlist *args, int quiet)
{
    cuco_strlist argv = {0};
    cuco_strlist_push(&argv, exe);
    for (size_t i = 0; i < args->n; i++)
        cuco_strlist_push(&argv, args->items[i]);
    /* NULL-terminate for exec without counting the terminator. */
    char **items = realloc(argv.items, (argv.n + 1) * sizeof *items);
    if (!items) {
        cuco_strlist_free(&argv);
        return 1;
    }
    argv.items = items;
    argv.items[argv.n] = NULL;

    char *shown = cuco_proc_argv_string((const char *const *)argv.items);
    if (!quiet)
        printf("\n== cuco run: %s: %s\n", step, shown);
    fflush(stdout);
    fflush(stderr);

    cuco_proc_opts po = {0};
    po.argv = (const char *const *)argv.items;
    po.echo = !quiet;
    po.capture_cap = 64 * 1024;
    cuco_proc_result res = {0};
    cuco_err e = CUCO_ERR_INIT;
    int code;
    if (cuco_proc_run(&po, &res, &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        code = 1;
    } else {
        code = res.exited ? res.exit_code : 1;
        if (!res.exited) {
            char *how = cuco_proc_describe(&res);
            fprintf(stderr, "cuco run: %s %s\n", step, how);
            free(how);
        }
        if (quiet && code != 0)
            fprintf(stderr, "%s%s", res.out ? res.out : "", res.err ? res.err : "");
        cuco_proc_result_free(&res);
    }
    cuco_err_clear(&e);
    free(shown);
    cuco_strlist_free(&argv);
    return code;
}

static int args_push_all(cuco_strlist *l, const char *const *items)
{
    for (; *items; items++)
        if (cuco_strlist_push(l, *items) != 0)
            return -1;
    return 0;
}

/* --ranks N for a step, when cuco run was given it. */
static void push_ranks(cuco_strlist *args, const struct run_opts *o)
{
    if (o->ranks) {
        cuco_strlist_push(args, "--ranks");
        cuco_strlist_push(args, o->ranks);
    }
}

/* Number of NCCL collective / point-to-point calls in analysis.json; -1 if
 * the file cannot be read. */
static int analysis_collectives(const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return -1;
    json_t *calls = json_object_get(root, "collectives");
    int n = json_is_array(calls) ? (int)json_array_size(calls) : -1;
    json_decref(root);
    return n;
}

/* 1 when gen_0's transform report says the program built, ran and verified
 * (only such a program may start the search). */
static int gen0_verified(const char *gen0)
{
    char *path = cuco_path_join(gen0, "transform_report.json");
    json_t *r = path ? json_load_file(path, 0, NULL) : NULL;
    free(path);
    json_t *outcome = json_object_get(r, "outcome");
    int ok = json_is_integer(outcome) && json_integer_value(outcome) == 0;
    json_decref(r);
    return ok;
}

/* What 'cuco bound' left in WORKSPACE/bound.json (docs/bound.md): the
 * ceiling (0 when unknown) and the advice paragraph (NULL when none; caller
 * frees). Returns 0 when there is no readable file. */
static int bound_read(const char *workspace, double *ceiling, char **advice)
{
    *ceiling = 0;
    *advice = NULL;
    char *path = cuco_path_join(workspace, "bound.json");
    json_error_t jerr;
    json_t *root = cuco_fs_exists(path) ? json_load_file(path, 0, &jerr) : NULL;
    free(path);
    if (!root)
        return 0;
    json_t *c = json_object_get(json_object_get(root, "bound"), "ceiling");
    if (json_is_number(c))
        *ceiling = json_number_value(c);
    const char *a = json_string_value(json_object_get(root, "advice"));
    if (a && *a)
        *advice = cuco_strdup(a);
    json_decref(root);
    return 1;
}

/* The mutator 'cuco evolve' will use: the last --mutator passed through
 * after '--', else --mutator of cuco run. */
static const char *effective_mutator(const struct run_opts *o)
{
    const char *m = o->mutator;
    for (size_t i = 0; i + 1 < o->evolve_args.n; i++)
        if (!strcmp(o->evolve_args.items[i], "--mutator"))
            m = o->evolve_args.items[i + 1];
    return m;
}

/* Prints the advice and any verification warning from bound.json before
 * anything else is spent. Returns 1 when the run must stop: the ceiling is
 * under RUN_MIN_CEILING, an LLM mutator would spend money, and --force was
 * not given (the offline knob mutator costs nothing and always runs). */
static int bound_gate(const struct run_opts *o, const char *workspace)
{
    double ceiling = 0;
    char *advice = NULL;
    if (!bound_read(workspace, &ceiling, &advice))
        return 0;
    printf("\n== cuco run: advice (from %s/bound.json)\n%s\n", workspace,
           advice ? advice : "(no advice: the bound was not measured)");
    free(advice);
    char *warning = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int w = cuco_bound_read_warning(workspace, &warning, &e);
    if (w > 0)
        printf("WARNING: %s Speedups below are not proven correct.\n", warning);
    else if (w < 0)
        cuco_err_print(&e, "cuco run", stderr);
    free(warning);
    cuco_err_clear(&e);
    const char *mutator = effective_mutator(o);
    if (ceiling > 0 && ceiling < RUN_MIN_CEILING && cuco_config_is_llm_mutator(mutator)) {
        if (!o->force) {
            fprintf(stderr,
                    "cuco run: the most any overlap can gain here is %.3fx (< %.2fx): the LLM "
                    "mutator %s would spend its budget for at most that. Nothing was spent; "
                    "re-run with --force to search anyway.\n",
                    ceiling, RUN_MIN_CEILING, mutator);
            return 1;
        }
        printf("cuco run: ceiling %.3fx < %.2fx, searching anyway (--force)\n", ceiling,
               RUN_MIN_CEILING);
    }
    return 0;
}

static void confirm_progress(void *ctx, const char *line)
{
    (void)ctx;
    printf("  %s\n", line);
    fflush(stdout);
}

/* Reads PATH when it exists; NULL when it does not or cannot be read (the
 * reason printed). */
static char *read_if_exists(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_fs_exists(path) && cuco_fs_read(path, &text, &len, &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        text = NULL;
    }
    cuco_err_clear(&e);
    return text;
}

/* Step 5: the host-driven seed, the workload's expert program (the manifest's
 * `expert`, the best hand-written host-driven overlap, when it names one),
 * gen_0 (when the search started from it) and the best program
 * (WORKSPACE/best.EXT, when it is none of them) in interleaved rounds;
 * WORKSPACE/confirm.json and a table. Returns 0 when the comparison ran
 * (whatever the programs' statuses), 1 when it could not. */
static int confirm_step(const struct run_opts *o, const cuco_workload *w, const char *workspace,
                        const char *gen0_program)
{
    const char *dot = strrchr(w->evolve_file, '.');
    char *best_name = cuco_sprintf("best%s", dot ? dot : "");
    char *best_path = best_name ? cuco_path_join(workspace, best_name) : NULL;
    char *seed_path = cuco_path_join(w->dir, w->evolve_file);
    char *seed_text = seed_path ? read_if_exists(seed_path) : NULL;
    char *gen0_text = gen0_program ? read_if_exists(gen0_program) : NULL;
    char *best_text = best_path ? read_if_exists(best_path) : NULL;
    char *expert_path = w->expert ? cuco_path_join(w->dir, w->expert) : NULL;
    char *expert_text = expert_path ? read_if_exists(expert_path) : NULL;
    free(best_name);
    free(seed_path);
    free(expert_path);
    cuco_compare_entry entries[4];
    memset(entries, 0, sizeof entries);
    size_t n = 0;
    entries[n++] = (cuco_compare_entry){.label = "seed"};
    /* second, so that confirm.json's last-against-second speedup is the best
     * program's over the expert's (it keeps the seed's frozen text) */
    if (expert_text)
        entries[n++] = (cuco_compare_entry){.label = "expert", .program_text = expert_text};
    size_t gen0_at = n;
    if (gen0_text)
        entries[n++] = (cuco_compare_entry){
            .label = "gen_0", .program_text = gen0_text, .frozen_ref = gen0_text};
    int best_is = 0; /* 1: the seed, 2: gen_0 */
    if (best_text && seed_text && !strcmp(best_text, seed_text))
        best_is = 1;
    else if (best_text && gen0_text && !strcmp(best_text, gen0_text))
        best_is = 2;
    else if (best_text)
        entries[n++] = (cuco_compare_entry){
            .label = "best", .program_text = best_text, .frozen_ref = gen0_text};
    int rc = 0;
    if (n < 2) {
        printf("\n== cuco run: confirm: nothing to compare with the seed%s\n",
               best_is == 1 ? " (the best program is the seed itself)" : "");
        goto out;
    }
    printf("\n== cuco run: confirm: %zu programs, %d interleaved rounds (each built once, "
           "verified and benchmarked every round)\n",
           n, o->confirm_rounds);
    if (best_is == 2)
        printf("  (the best program is gen_0 itself)\n");
    fflush(stdout);
    cuco_eval_opts eo = {0};
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_compare_programs(w, entries, n, o->confirm_rounds, &eo,
                              o->quiet ? NULL : confirm_progress, NULL, &e) < 0) {
        cuco_err_print(&e, "cuco run: confirm", stderr);
        cuco_err_clear(&e);
        rc = 1;
        goto out;
    }
    char *json = cuco_compare_json(w, entries, n, o->confirm_rounds);
    char *path = cuco_path_join(workspace, "confirm.json");
    if (!json || !path || cuco_fs_write(path, json, strlen(json), &e) != 0) {
        cuco_err_print(&e, "cuco run: confirm", stderr);
        rc = 1;
    }
    cuco_err_clear(&e);
    double ref = entries[0].median_ms;
    for (size_t i = 0; i < n; i++) {
        const cuco_compare_entry *c = &entries[i];
        if (c->status != CUCO_EVAL_OK || c->median_ms <= 0) {
            printf("  %-6s %s%s%.200s\n", c->label, cuco_eval_status_name(c->status),
                   c->excerpt ? ": " : "", c->excerpt ? c->excerpt : "");
            continue;
        }
        printf("  %-6s %9.4f ms  (%.4f .. %.4f over %d rounds)", c->label, c->median_ms, c->min_ms,
               c->max_ms, c->n_times);
        if (i > 0 && ref > 0)
            printf("  %.3fx over the seed", ref / c->median_ms);
        if (gen0_text && i > gen0_at && entries[gen0_at].median_ms > 0)
            printf(", %.3fx over gen_0", entries[gen0_at].median_ms / c->median_ms);
        if (expert_text && i > 1 && entries[1].status == CUCO_EVAL_OK && entries[1].median_ms > 0)
            printf(", %.3fx over the expert", entries[1].median_ms / c->median_ms);
        printf("\n");
    }
    if (json) {
        json_t *root = json_loads(json, 0, NULL);
        json_t *b = json_object_get(root, "bound");
        if (json_is_object(b)) {
            printf("  bound  %9.4f ms  (the seed's own compute %.4f, comm %.4f): ",
                   json_number_value(json_object_get(b, "bound_ms")),
                   json_number_value(json_object_get(b, "compute_ms")),
                   json_number_value(json_object_get(b, "comm_ms")));
            json_t *ceiling = json_object_get(b, "ceiling");
            if (json_is_number(ceiling))
                printf("ceiling %.3fx", json_number_value(ceiling));
            else
                printf("%s", json_string_value(json_object_get(b, "note")));
            const char *label;
            json_t *g;
            json_object_foreach(json_object_get(b, "gap_closed"), label, g)
            {
                if (json_is_number(g))
                    printf("; %s closes %.1f%% of the gap", label, 100 * json_number_value(g));
                else
                    printf("; %s: faster than the seed's computation alone (the computation "
                           "changed), the bound does not apply",
                           label);
            }
            printf("\n");
        }
        json_decref(root);
    }
    if (path && rc == 0)
        printf("cuco run: side-by-side times in %s\n", path);
    free(json);
    free(path);
out:
    cuco_compare_entries_clear(entries, n);
    free(seed_text);
    free(gen0_text);
    free(best_text);
    free(expert_text);
    free(best_path);
    return rc;
}

static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                cuco_strlist_push(&o->evolve_args, argv[i]);
            break;
        } else if (!strcmp(a, "--workspace") && has_value) {
            o->workspace = argv[++i];
        } else if (!strcmp(a, "--mutator") && has_value) {
            o->mutator = argv[++i];
        } else if ((!strcmp(a, "--model") || !strcmp(a, "--budget-usd") ||
                    !strcmp(a, "--generations") || !strcmp(a, "--evaluations") ||
                    !strcmp(a, "--time") || !strcmp(a, "--slots") ||
                    !strcmp(a, "--retime-rounds")) &&
                   has_value) {
            cuco_strlist_push(&o->evolve_args, a);
            cuco_strlist_push(&o->evolve_args, argv[++i]);
        } else if (!strcmp(a, "--ranks") && has_value) {
            o->ranks = argv[++i];
            if (cuco_workload_parse_ranks(o->ranks) < 0) {
                fprintf(stderr, "cuco run: --ranks wants a number from 1 to 65536, not '%s'\n",
                        o->ranks);
                return -1;
            }
        } else if (!strcmp(a, "--confirm-rounds") && has_value) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 0 || v > 100) {
                fprintf(stderr,
                        "cuco run: --confirm-rounds wants a number from 0 to 100, not "
                        "'%s'\n",
                        argv[i]);
                return -1;
            }
            o->confirm_rounds = (int)v;
        } else if (!strcmp(a, "--force")) {
            o->force = 1;
        } else if (!strcmp(a, "--from-seed")) {
            o->from_seed = 1;
        } else if (!strcmp(a, "--skip-bound")) {
            o->skip_bound = 1;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--no-confine")) {
            o->no_confine = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "cuco run: unknown option or missing value: %s\n", a);
            return -1;
        } else if (!o->workload) {
            o->workload = a;
        } else {
            fprintf(stderr, "cuco run: more than one workload given ('%s', '%s')\n", o->workload,
                    a);
            return -1;
        }
    }
    if (!o->workload) {
        fprintf(stderr, "cuco run: no workload given\n");
        return -1;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        run_usage(stdout);
        return 0;
    }
    struct run_opts o = {0};
    o.mutator = "knob";
    o.confirm_rounds = 3;
    if (parse_run_args(argc, argv, &o) != 0) {
        fprintf(stderr, "Try 'cuco run --help'.\n");
        cuco_strlist_free(&o.evolve_args);
        return 2;
    }
    /* The steps are cuco commands of their own and the confirm step runs
     * here: the environment carries the choice to all of them. */
    if (cli_unconfined(o.no_confine))
        setenv("CUCO_CONFINE", "0", 1);

    int rc = 0;
    cuco_err e = CUCO_ERR_INIT;
    cuco_workload *w = NULL;
    char *exe = self_exe();
    char *workspace = NULL, *analysis = NULL, *gen0 = NULL, *gen0_program = NULL;
    cuco_strlist args = {0};

    if (cuco_workload_load(o.workload, &w, &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        rc = 2;
        goto out;
    }
    if (o.ranks && cuco_workload_override_ranks(w, cuco_workload_parse_ranks(o.ranks), &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        rc = 2;
        goto out;
    }
    workspace = o.workspace ? cuco_strdup(o.workspace) : cuco_sprintf("cuco-out/%s", w->name);
    if (cuco_fs_mkdirs(workspace, &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        rc = 1;
        goto out;
    }
    cuco_eval_default_build_cache(workspace);

    if (!o.quiet)
        printf("cuco run: workload %s (%d ranks%s), workspace %s\n", w->name, w->ranks,
               w->gpu ? ", GPU" : ", CPU", workspace);

    /* Fewer GPUs than ranks: NCCL refuses two ranks on one GPU, so every
     * run would fail; say so before anything runs. (No GPU at all is
     * handled after the transform, which can still build.) */
    int gpus = w->gpu ? cuco_launch_visible_gpus() : 0;
    if (w->gpu && gpus > 0 && gpus < w->ranks) {
        printf("cuco run: %s runs %d ranks, one GPU each, and %d GPU%s visible here: NCCL "
               "cannot put two ranks on one GPU, so every run would fail. Run on a machine "
               "with %d GPUs (the same command resumes from this workspace), or at fewer "
               "ranks with --ranks %d (a separate workload for the database).\n",
               w->name, w->ranks, gpus, gpus == 1 ? " is" : "s are", w->ranks, gpus);
        rc = 1;
        goto out;
    }

    /* 1. bound: what any overlap could gain, before anything is spent. */
    if (w->gpu && !o.skip_bound) {
        if (gpus == 0) {
            printf("cuco run: bound skipped: no GPU visible (nvidia-smi -L found none)\n");
        } else {
            const char *b[] = {"bound", o.workload, "--workspace", workspace, NULL};
            args_push_all(&args, b);
            push_ranks(&args, &o);
            int brc = run_step("bound", exe, &args, o.quiet);
            cuco_strlist_free(&args);
            if (brc != 0)
                printf("cuco run: bound exited %d (a verification warning or a failed run; see "
                       "above); continuing\n",
                       brc);
        }
    }
    /* The advice comes first; a bound.json left by an earlier 'cuco bound'
     * counts too (e.g. measured on another machine). */
    if (bound_gate(&o, workspace)) {
        rc = 1;
        goto out;
    }

    /* 2. analyze the evolve file. */
    analysis = cuco_path_join(workspace, "analysis.json");
    char *evolve_path = cuco_path_join(w->dir, w->evolve_file);
    {
        const char *a[] = {"analyze", evolve_path, "-o", analysis, NULL};
        args_push_all(&args, a);
    }
    int arc = run_step("analyze", exe, &args, o.quiet);
    cuco_strlist_free(&args);
    free(evolve_path);
    int n_coll = arc == 0 ? analysis_collectives(analysis) : -1;
    if (arc != 0)
        printf("cuco run: analyze failed (exit %d): the search starts from the seed\n", arc);

    /* 3. transform, unless there is nothing to transform or it was done. */
    gen0 = cuco_path_join(workspace, "gen_0");
    gen0_program = cuco_path_join(gen0, w->evolve_file);
    /* the search starts from gen_0 only when it built, ran and verified */
    int start_from_gen0 = !o.from_seed && cuco_fs_exists(gen0_program) && gen0_verified(gen0);
    if (o.from_seed) {
        printf("cuco run: --from-seed: the search starts from the host-driven seed\n");
    } else if (start_from_gen0) {
        printf("cuco run: keeping the transformed program in %s\n", gen0_program);
    } else if (n_coll <= 0) {
        printf("cuco run: no NCCL collectives found: nothing to transform; the search starts "
               "from the seed\n");
    } else {
        const char *t[] = {"transform", o.workload, "--workspace", workspace, NULL};
        args_push_all(&args, t);
        push_ranks(&args, &o);
        /* with a model, what the rules refuse goes to the LLM route */
        for (size_t k = 0; k + 1 < o.evolve_args.n; k++)
            if (!strcmp(o.evolve_args.items[k], "--model")) {
                cuco_strlist_push(&args, "--model");
                cuco_strlist_push(&args, o.evolve_args.items[k + 1]);
            }
        int trc = run_step("transform", exe, &args, o.quiet);
        cuco_strlist_free(&args);
        start_from_gen0 = trc == 0 && cuco_fs_exists(gen0_program) && gen0_verified(gen0);
        if (!start_from_gen0) {
            printf("cuco run: transform did not produce a verified program (exit %d): the "
                   "search starts from the seed\n",
                   trc);
        }
    }
    if (w->gpu && gpus == 0) {
        printf("cuco run: %s needs a GPU and none is visible here (see 'cuco doctor'): "
               "nothing can be verified or searched. Run the same command on a GPU machine; "
               "it resumes from this workspace.\n",
               w->name);
        rc = 1;
        goto out;
    }

    /* 4. evolve (resumes a run already in the workspace). */
    {
        const char *v[] = {"evolve",    o.workload, "--workspace", workspace,
                           "--mutator", o.mutator,  NULL};
        args_push_all(&args, v);
        push_ranks(&args, &o);
        if (start_from_gen0) {
            cuco_strlist_push(&args, "--init");
            cuco_strlist_push(&args, gen0_program);
        }
        if (o.quiet)
            cuco_strlist_push(&args, "--quiet");
        for (size_t i = 0; i < o.evolve_args.n; i++)
            cuco_strlist_push(&args, o.evolve_args.items[i]);
    }
    int erc = run_step("evolve", exe, &args, o.quiet);
    cuco_strlist_free(&args);
    if (erc != 0) {
        fprintf(stderr, "cuco run: evolve failed (exit %d); writing the report of what exists\n",
                erc);
        rc = erc == 2 ? 2 : 1; /* evolve's bad usage is this command's */
    }

    /* 5. confirm: the speedups to quote, measured side by side. */
    if (o.confirm_rounds > 0 &&
        confirm_step(&o, w, workspace, start_from_gen0 ? gen0_program : NULL) != 0)
        rc = rc == 2 ? 2 : 1;

    /* 6. report. */
    {
        const char *r[] = {"report", workspace, NULL};
        args_push_all(&args, r);
    }
    int rrc = run_step("report", exe, &args, o.quiet);
    cuco_strlist_free(&args);
    if (rrc != 0)
        rc = rc == 2 ? 2 : 1;
    else
        printf("cuco run: report in %s/report.html and %s/report.md\n", workspace, workspace);
    {
        /* The speedups above were measured under the program's own verification. */
        char *warning = NULL;
        cuco_err we = CUCO_ERR_INIT;
        if (cuco_bound_read_warning(workspace, &warning, &we) > 0)
            printf("WARNING: %s Speedups above are not proven correct.\n", warning);
        free(warning);
        cuco_err_clear(&we);
    }

out:
    cuco_strlist_free(&args);
    cuco_strlist_free(&o.evolve_args);
    cuco_workload_free(w);
    cuco_err_clear(&e);
    free(exe);
    free(workspace);
    free(analysis);
    free(gen0);
    free(gen0_program);
    return rc;
}
