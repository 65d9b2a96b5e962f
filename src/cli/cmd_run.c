/* cmd_run.c: 'cuco run WORKLOAD' — bound, analyze, transform, evolve,
 * confirm and report in one go.
 *
 * Each step is the matching cuco subcommand, run as a child of this same
 * binary with its output shown live on stderr (progress); stdout holds the
 * results: the confirm table and the final summary (or, with --json, one
 * JSON object). Every step reads and writes the workspace, so an
 * interrupted run is resumed by running the same command again: a
 * transformed program already in gen_0/ is kept, and the search continues
 * from its database.
 */
#include "cli_options.h"
#include "cli_summary.h"
#include "commands.h"

#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/compare.h"
#include "cuco/config.h"
#include "cuco/err.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/launch.h"
#include "cuco/log.h"
#include "cuco/proc.h"
#include "cuco/workload.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Below this ceiling (baseline / overlap bound) an LLM budget is not spent
 * without --force: no co-design can gain more than a few percent. */
#define RUN_MIN_CEILING 1.05
#define RUN_MIN_CEILING_TEXT "1.05"

enum run_step_id {
    STEP_BOUND,
    STEP_ANALYZE,
    STEP_TRANSFORM,
    STEP_EVOLVE,
    STEP_CONFIRM,
    STEP_REPORT,
    N_STEPS
};
static const char *const step_names[N_STEPS] = {"bound",  "analyze", "transform",
                                                "evolve", "confirm", "report"};

struct run_opts {
    const char *workload;
    const char *workspace;
    const char *mutator;
    int force;
    int from_seed;
    int skip_bound;
    int quiet;
    int json;                 /* --json: stdout holds one JSON object, nothing else */
    int confirm_rounds;       /* side-by-side rounds after the search; 0: none */
    const char *ranks;        /* --ranks: the workload at that many ranks; NULL: the manifest's */
    cuco_strlist evolve_args; /* passed through to 'cuco evolve' */
    int no_confine;           /* --no-confine: every step runs candidates unconfined */
    /* what happened, for the final summary */
    double step_s[N_STEPS]; /* seconds each step took; < 0: it did not run */
    int step_rc[N_STEPS];   /* its exit status */
    char stopped[512];      /* why the run stopped before the search, or "" */
    double cascade_s[4];    /* the search's build, verify, bench and re-timing seconds */
    long cascade_runs;      /* its runs of the cascade; -1: unknown */
};

static const cli_command run_command = {
    "run",
    "WORKLOAD [OPTIONS] [-- EVOLVE-OPTIONS...]",
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
    "before anything else runs. When the ceiling is under " RUN_MIN_CEILING_TEXT "x and the\n"
    "search would use an LLM mutator (llm, llm_diff, llm_full, llm_cross), the run\n"
    "stops there, spending nothing, unless --force is given; the offline knob\n"
    "mutator always runs.\n"
    "\n"
    "The steps' output is progress and goes to stderr; stdout holds the confirm\n"
    "table and a final summary line: the speedup over the seed (ms -> ms), the\n"
    "ceiling, the programs and failures, the wall time, and a line of where the\n"
    "time went (each step; the re-timings of the search).\n",
    "Anything after '--' goes to 'cuco evolve' unchanged (see 'cuco evolve --help').\n"
    "\n"
    "Exit status: 0 done; 1 a step failed, or stopped before an LLM search for a\n"
    "ceiling under " RUN_MIN_CEILING_TEXT "x (see --force); 2 bad usage; 4 the workspace is in\n"
    "use by another cuco process.\n",
    "WORKLOAD",
    1,
    1,
    1};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A progress line on stderr, unless --quiet. */
static void progress(const struct run_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const struct run_opts *o, const char *fmt, ...)
{
    if (o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

/* Where tables go: stdout, but stderr under --json (stdout is the JSON's). */
static FILE *results(const struct run_opts *o)
{
    return o->json ? stderr : stdout;
}

static char *self_exe(void)
{
    char *path = cuco_path_abs("/proc/self/exe");
    return path ? path : cuco_strdup("cuco");
}

/* Runs 'cuco ARGS...' for a step with live output on stderr (the step's
 * stdout too: all of it is progress here), timed into o; *captured (when not
 * NULL) receives the step's stdout (caller frees). Returns its exit code (or
 * 1 when it could not start or was killed). */
static int run_step(struct run_opts *o, enum run_step_id step, const char *exe, cuco_strlist *args,
                    char **captured)
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
    progress(o, "\n== cuco run: %s: %s\n", step_names[step], shown);
    cuco_debug("run: %s", shown);
    fflush(stdout);
    fflush(stderr);
    int saved_stdout = o->quiet ? -1 : dup(1);
    if (saved_stdout >= 0)
        dup2(2, 1);

    cuco_proc_opts po = {0};
    po.argv = (const char *const *)argv.items;
    po.echo = !o->quiet;
    po.capture_cap = 64 * 1024;
    cuco_proc_result res = {0};
    cuco_err e = CUCO_ERR_INIT;
    double t0 = now_s();
    int code;
    if (cuco_proc_run(&po, &res, &e) != 0) {
        cuco_err_print(&e, "cuco run", stderr);
        code = 1;
    } else {
        code = res.exited ? res.exit_code : 1;
        if (!res.exited) {
            char *how = cuco_proc_describe(&res);
            fprintf(stderr, "cuco run: %s %s\n", step_names[step], how);
            free(how);
        }
        if (o->quiet && code != 0)
            fprintf(stderr, "%s%s", res.out ? res.out : "", res.err ? res.err : "");
        if (captured && res.out) {
            *captured = res.out;
            res.out = NULL;
        }
        cuco_proc_result_free(&res);
    }
    o->step_s[step] = now_s() - t0;
    o->step_rc[step] = code;
    fflush(stdout);
    if (saved_stdout >= 0) {
        dup2(saved_stdout, 1);
        close(saved_stdout);
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
static int bound_gate(struct run_opts *o, const char *workspace)
{
    double ceiling = 0;
    char *advice = NULL;
    if (!bound_read(workspace, &ceiling, &advice))
        return 0;
    progress(o, "\n== cuco run: advice (from %s/bound.json)\n%s\n", workspace,
             advice ? advice : "(no advice: the bound was not measured)");
    free(advice);
    char *warning = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int w = cuco_bound_read_warning(workspace, &warning, &e);
    if (w > 0)
        fprintf(stderr, "WARNING: %s Speedups below are not proven correct.\n", warning);
    else if (w < 0)
        cuco_err_print(&e, "cuco run", stderr);
    free(warning);
    cuco_err_clear(&e);
    const char *mutator = effective_mutator(o);
    if (ceiling > 0 && ceiling < RUN_MIN_CEILING && cuco_config_is_llm_mutator(mutator)) {
        if (!o->force) {
            snprintf(o->stopped, sizeof o->stopped,
                     "the most any overlap can gain here is %.3fx (< %.2fx): the LLM mutator %s "
                     "would spend its budget for at most that. Nothing was spent; re-run with "
                     "--force to search anyway.",
                     ceiling, RUN_MIN_CEILING, mutator);
            fprintf(stderr, "cuco run: %s\n", o->stopped);
            return 1;
        }
        progress(o, "cuco run: ceiling %.3fx < %.2fx, searching anyway (--force)\n", ceiling,
                 RUN_MIN_CEILING);
    }
    return 0;
}

static void confirm_progress(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "  %s\n", line);
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

/* "  bytes 235.0M  algbw 250.1  busbw 266.4 GB/s  #wrong 0", as nccl-tests
 * users read them (cuco_compare_rates_of); nothing when the program reports
 * no byte count. */
static void confirm_rates(FILE *out, const cuco_compare_entry *c)
{
    cuco_compare_rates r;
    cuco_compare_rates_of(c, &r);
    if (r.bytes < 0) {
        fprintf(out, "  #wrong %d", r.wrong);
        return;
    }
    fprintf(out, "  bytes %.1fM", r.bytes / 1e6);
    if (r.algbw_gbps >= 0)
        fprintf(out, "  algbw %.3g", r.algbw_gbps);
    if (r.busbw_gbps >= 0)
        fprintf(out, "  busbw %.3g", r.busbw_gbps);
    fprintf(out, " GB/s  #wrong %d", r.wrong);
}

/* The table of the confirm step: each program's median over the rounds and
 * its speedups over the seed, gen_0 (at gen0_at; 0: none) and the expert
 * (second when has_expert), then bytes, algbw, busbw and #wrong. */
static void confirm_table(FILE *out, const cuco_compare_entry *entries, size_t n, size_t gen0_at,
                          int has_expert)
{
    double ref = entries[0].median_ms;
    for (size_t i = 0; i < n; i++) {
        const cuco_compare_entry *c = &entries[i];
        if (c->status != CUCO_EVAL_OK || c->median_ms <= 0) {
            fprintf(out, "  %-6s %s (#wrong %d)%s%.200s\n", c->label,
                    cuco_eval_status_name(c->status), c->status == CUCO_EVAL_WRONG_ANSWER,
                    c->excerpt ? ": " : "", c->excerpt ? c->excerpt : "");
            continue;
        }
        fprintf(out, "  %-6s %9.4f ms  (%.4f .. %.4f over %d rounds)", c->label, c->median_ms,
                c->min_ms, c->max_ms, c->n_times);
        if (i > 0 && ref > 0)
            fprintf(out, "  %.3fx over the seed", ref / c->median_ms);
        if (gen0_at && i > gen0_at && entries[gen0_at].median_ms > 0)
            fprintf(out, ", %.3fx over gen_0", entries[gen0_at].median_ms / c->median_ms);
        if (has_expert && i > 1 && entries[1].status == CUCO_EVAL_OK && entries[1].median_ms > 0)
            fprintf(out, ", %.3fx over the expert", entries[1].median_ms / c->median_ms);
        confirm_rates(out, c);
        fputc('\n', out);
    }
}

/* The bound line under the table, from confirm.json's text. */
static void confirm_bound_line(FILE *out, const char *json)
{
    json_t *root = json_loads(json, 0, NULL);
    json_t *b = json_object_get(root, "bound");
    if (json_is_object(b)) {
        fprintf(out, "  bound  %9.4f ms  (the seed's own compute %.4f, comm %.4f): ",
                json_number_value(json_object_get(b, "bound_ms")),
                json_number_value(json_object_get(b, "compute_ms")),
                json_number_value(json_object_get(b, "comm_ms")));
        json_t *ceiling = json_object_get(b, "ceiling");
        if (json_is_number(ceiling))
            fprintf(out, "ceiling %.3fx", json_number_value(ceiling));
        else
            fprintf(out, "%s", json_string_value(json_object_get(b, "note")));
        const char *label;
        json_t *g;
        json_object_foreach(json_object_get(b, "gap_closed"), label, g)
        {
            if (json_is_number(g))
                fprintf(out, "; %s closes %.1f%% of the gap", label, 100 * json_number_value(g));
            else
                fprintf(out,
                        "; %s: faster than the seed's computation alone (the computation "
                        "changed), the bound does not apply",
                        label);
        }
        fputc('\n', out);
    }
    json_decref(root);
}

/* The programs of the confirm step (texts owned by the caller). */
typedef struct confirm_set {
    char *seed, *expert, *gen0, *best;
    int best_is; /* 1: the best program is the seed, 2: gen_0 */
} confirm_set;

static void confirm_set_read(confirm_set *c, const cuco_workload *w, const char *workspace,
                             const char *gen0_program)
{
    const char *dot = strrchr(w->evolve_file, '.');
    char *best_name = cuco_sprintf("best%s", dot ? dot : "");
    char *best_path = best_name ? cuco_path_join(workspace, best_name) : NULL;
    char *seed_path = cuco_path_join(w->dir, w->evolve_file);
    char *expert_path = w->expert ? cuco_path_join(w->dir, w->expert) : NULL;
    c->seed = seed_path ? read_if_exists(seed_path) : NULL;
    c->gen0 = gen0_program ? read_if_exists(gen0_program) : NULL;
    c->best = best_path ? read_if_exists(best_path) : NULL;
    c->expert = expert_path ? read_if_exists(expert_path) : NULL;
    c->best_is = 0;
    if (c->best && c->seed && !strcmp(c->best, c->seed))
        c->best_is = 1;
    else if (c->best && c->gen0 && !strcmp(c->best, c->gen0))
        c->best_is = 2;
    free(best_name);
    free(best_path);
    free(seed_path);
    free(expert_path);
}

/* Step 5: the host-driven seed, the workload's expert program (the manifest's
 * `expert`, the best hand-written host-driven overlap, when it names one),
 * gen_0 (when the search started from it) and the best program
 * (WORKSPACE/best.EXT, when it is none of them) in interleaved rounds;
 * WORKSPACE/confirm.json and a table. Returns 0 when the comparison ran
 * (whatever the programs' statuses), 1 when it could not. */
static int confirm_step(struct run_opts *o, const cuco_workload *w, const char *workspace,
                        const char *gen0_program)
{
    confirm_set c;
    confirm_set_read(&c, w, workspace, gen0_program);
    cuco_compare_entry entries[4];
    memset(entries, 0, sizeof entries);
    size_t n = 0;
    entries[n++] = (cuco_compare_entry){.label = "seed"};
    /* second, so that confirm.json's last-against-second speedup is the best
     * program's over the expert's (it keeps the seed's frozen text) */
    if (c.expert)
        entries[n++] = (cuco_compare_entry){.label = "expert", .program_text = c.expert};
    size_t gen0_at = c.gen0 ? n : 0;
    if (c.gen0)
        entries[n++] =
            (cuco_compare_entry){.label = "gen_0", .program_text = c.gen0, .frozen_ref = c.gen0};
    if (c.best && !c.best_is)
        entries[n++] =
            (cuco_compare_entry){.label = "best", .program_text = c.best, .frozen_ref = c.gen0};
    int rc = 0;
    char *json = NULL, *path = NULL;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = now_s();
    if (n < 2) {
        progress(o, "\n== cuco run: confirm: nothing to compare with the seed%s\n",
                 c.best_is == 1 ? " (the best program is the seed itself)" : "");
        goto out;
    }
    progress(o,
             "\n== cuco run: confirm: %zu programs, %d interleaved rounds (each built once, "
             "verified and benchmarked every round)\n%s",
             n, o->confirm_rounds, c.best_is == 2 ? "  (the best program is gen_0 itself)\n" : "");
    cuco_eval_opts eo = {0};
    if (cuco_compare_programs(w, entries, n, o->confirm_rounds, &eo,
                              o->quiet ? NULL : confirm_progress, NULL, &e) < 0) {
        cuco_err_print(&e, "cuco run: confirm", stderr);
        rc = 1;
        goto out;
    }
    json = cuco_compare_json(w, entries, n, o->confirm_rounds);
    path = cuco_path_join(workspace, "confirm.json");
    if (!json || !path || cuco_fs_write(path, json, strlen(json), &e) != 0) {
        cuco_err_print(&e, "cuco run: confirm", stderr);
        rc = 1;
    }
    confirm_table(results(o), entries, n, gen0_at, c.expert != NULL);
    if (json)
        confirm_bound_line(results(o), json);
    if (path && rc == 0)
        progress(o, "cuco run: side-by-side times in %s\n", path);
out:
    o->step_s[STEP_CONFIRM] = now_s() - t0;
    o->step_rc[STEP_CONFIRM] = rc;
    cuco_err_clear(&e);
    free(json);
    free(path);
    cuco_compare_entries_clear(entries, n);
    free(c.seed);
    free(c.gen0);
    free(c.best);
    free(c.expert);
    return rc;
}

/* The options that go on to 'cuco evolve' as they are. */
typedef struct run_passthrough {
    const char *budget_usd, *generations, *evaluations, *time, *slots, *retime_rounds;
    cuco_strlist models;
} run_passthrough;

static void passthrough_push(struct run_opts *o, const run_passthrough *p)
{
    const char *const pairs[][2] = {{"--budget-usd", p->budget_usd},
                                    {"--generations", p->generations},
                                    {"--evaluations", p->evaluations},
                                    {"--time", p->time},
                                    {"--slots", p->slots},
                                    {"--retime-rounds", p->retime_rounds}};
    for (size_t i = 0; i < p->models.n; i++) {
        cuco_strlist_push(&o->evolve_args, "--model");
        cuco_strlist_push(&o->evolve_args, p->models.items[i]);
    }
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (pairs[i][1]) {
            cuco_strlist_push(&o->evolve_args, pairs[i][0]);
            cuco_strlist_push(&o->evolve_args, pairs[i][1]);
        }
}

static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
    run_passthrough p = {0};
    const cli_option options[] = {
        CLI_OPT_STRING("workspace", 0, &o->workspace, "DIR",
                       "where everything goes (default ./cuco-out/<workload name>)"),
        CLI_OPT_STRING("mutator", 0, &o->mutator, "NAME", "knob (default, offline) or llm"),
        CLI_OPT_LIST("model", 0, &p.models, "NAME",
                     "LLM model (with --mutator llm; also the transform's LLM\nroute for what "
                     "the rules refuse); repeatable"),
        CLI_OPT_DOUBLE_TEXT("budget-usd", 0, &p.budget_usd, "X",
                            "stop the search before LLM spend would exceed X", 0, 1e12),
        CLI_OPT_LONG_TEXT("generations", 0, &p.generations, "N", "search budget in generations", 0,
                          1e6),
        CLI_OPT_LONG_TEXT("evaluations", 0, &p.evaluations, "N", "search budget in evaluations", 0,
                          1e8),
        CLI_OPT_DOUBLE_TEXT("time", 0, &p.time, "S", "search budget in wall-clock seconds", 0, 1e9),
        CLI_OPT_CALL("slots", 0, &p.slots, "N|auto", "candidates evaluated at once", cli_opt_slots),
        CLI_OPT_LONG_TEXT("retime-rounds", 0, &p.retime_rounds, "N",
                          "re-time each apparent improvement beside the run's best\nin N rounds "
                          "before it counts (default 2; 0: never)",
                          0, 100),
        CLI_OPT_FLAG("from-seed", 0, &o->from_seed,
                     "skip the transform: search from the host-driven seed"),
        CLI_OPT_FLAG("skip-bound", 0, &o->skip_bound, "skip the bound step"),
        CLI_OPT_CALL("ranks", 0, &o->ranks, "N",
                     "run the workload at N ranks instead of the manifest's (a\nseparate "
                     "workload NAME@N: its own workspace and database)",
                     cli_opt_ranks),
        CLI_OPT_INT("confirm-rounds", 0, &o->confirm_rounds, "N",
                    "rounds of the confirm step (default 3; 0 skips it)", 0, 100),
        CLI_OPT_FLAG("force", 0, &o->force,
                     "spend an LLM budget even when the ceiling is under " RUN_MIN_CEILING_TEXT
                     "x"),
        CLI_OPT_FLAG("json", 0, &o->json,
                     "print the final result as one JSON object on stdout (the\nconfirm table "
                     "goes to stderr then)"),
        CLI_OPT_FLAG("no-confine", 0, &o->no_confine,
                     "every step builds and runs candidates unconfined (warns;\nalso "
                     "CUCO_CONFINE=0; docs/launch.md)"),
        CLI_OPT_END};
    cli_args args;
    int rc = cli_parse(&run_command, options, argc, argv, &args);
    if (rc == CLI_CONTINUE) {
        o->workload = args.pos[0];
        o->quiet = args.quiet;
        passthrough_push(o, &p);
        for (int i = 0; i < args.n_rest; i++)
            cuco_strlist_push(&o->evolve_args, args.rest[i]);
        cli_args_free(&args);
    }
    cuco_strlist_free(&p.models);
    return rc;
}

/* What the steps share. */
typedef struct run_ctx {
    struct run_opts *o;
    cuco_workload *w;
    char *exe, *workspace, *gen0, *gen0_program;
    int gpus;            /* visible GPUs of a GPU workload */
    int start_from_gen0; /* the search starts from a verified gen_0 */
} run_ctx;

/* Step 1: what any overlap could gain, before anything is spent. */
static void step_bound(run_ctx *c)
{
    if (!c->w->gpu || c->o->skip_bound)
        return;
    if (c->gpus == 0) {
        progress(c->o, "cuco run: bound skipped: no GPU visible (nvidia-smi -L found none)\n");
        return;
    }
    cuco_strlist args = {0};
    const char *b[] = {"bound", c->o->workload, "--workspace", c->workspace, NULL};
    args_push_all(&args, b);
    push_ranks(&args, c->o);
    int brc = run_step(c->o, STEP_BOUND, c->exe, &args, NULL);
    cuco_strlist_free(&args);
    if (brc != 0)
        progress(c->o,
                 "cuco run: bound exited %d (a verification warning or a failed run; see "
                 "above); continuing\n",
                 brc);
}

/* Step 2: the collectives of the evolve file; their number, or -1. */
static int step_analyze(run_ctx *c)
{
    char *analysis = cuco_path_join(c->workspace, "analysis.json");
    char *evolve_path = cuco_path_join(c->w->dir, c->w->evolve_file);
    cuco_strlist args = {0};
    const char *a[] = {"analyze", evolve_path, "-o", analysis, NULL};
    args_push_all(&args, a);
    int arc = run_step(c->o, STEP_ANALYZE, c->exe, &args, NULL);
    cuco_strlist_free(&args);
    int n_coll = arc == 0 ? analysis_collectives(analysis) : -1;
    if (arc != 0)
        progress(c->o, "cuco run: analyze failed (exit %d): the search starts from the seed\n",
                 arc);
    free(evolve_path);
    free(analysis);
    return n_coll;
}

/* Step 3: transform, unless there is nothing to transform or it was done;
 * the search starts from gen_0 only when it built, ran and verified. */
static void step_transform(run_ctx *c, int n_coll)
{
    struct run_opts *o = c->o;
    c->start_from_gen0 = !o->from_seed && cuco_fs_exists(c->gen0_program) && gen0_verified(c->gen0);
    if (o->from_seed) {
        progress(o, "cuco run: --from-seed: the search starts from the host-driven seed\n");
        return;
    }
    if (c->start_from_gen0) {
        progress(o, "cuco run: keeping the transformed program in %s\n", c->gen0_program);
        return;
    }
    if (n_coll <= 0) {
        progress(o, "cuco run: no NCCL collectives found: nothing to transform; the search "
                    "starts from the seed\n");
        return;
    }
    cuco_strlist args = {0};
    const char *t[] = {"transform", o->workload, "--workspace", c->workspace, NULL};
    args_push_all(&args, t);
    push_ranks(&args, o);
    /* with a model, what the rules refuse goes to the LLM route */
    for (size_t k = 0; k + 1 < o->evolve_args.n; k++)
        if (!strcmp(o->evolve_args.items[k], "--model")) {
            cuco_strlist_push(&args, "--model");
            cuco_strlist_push(&args, o->evolve_args.items[k + 1]);
        }
    int trc = run_step(o, STEP_TRANSFORM, c->exe, &args, NULL);
    cuco_strlist_free(&args);
    c->start_from_gen0 = trc == 0 && cuco_fs_exists(c->gen0_program) && gen0_verified(c->gen0);
    if (!c->start_from_gen0)
        progress(o,
                 "cuco run: transform did not produce a verified program (exit %d): the "
                 "search starts from the seed\n",
                 trc);
}

/* Step 4: the search (it resumes a run already in the workspace). Returns
 * this command's status for it. */
static int step_evolve(run_ctx *c)
{
    struct run_opts *o = c->o;
    cuco_strlist args = {0};
    const char *v[] = {"evolve",    o->workload, "--workspace", c->workspace,
                       "--mutator", o->mutator,  NULL};
    args_push_all(&args, v);
    push_ranks(&args, o);
    if (c->start_from_gen0) {
        cuco_strlist_push(&args, "--init");
        cuco_strlist_push(&args, c->gen0_program);
    }
    if (o->quiet)
        cuco_strlist_push(&args, "--quiet");
    for (size_t i = 0; i < o->evolve_args.n; i++)
        cuco_strlist_push(&args, o->evolve_args.items[i]);
    char *out = NULL;
    int erc = run_step(o, STEP_EVOLVE, c->exe, &args, &out);
    cuco_strlist_free(&args);
    /* where the search's time went, from its last lines (cmd_evolve.c) */
    const char *t = out ? strstr(out, "time in the cascade: ") : NULL;
    if (!t || sscanf(t,
                     "time in the cascade: build %lfs, verify %lfs, bench %lfs over %ld runs "
                     "(re-timing %lfs",
                     &o->cascade_s[0], &o->cascade_s[1], &o->cascade_s[2], &o->cascade_runs,
                     &o->cascade_s[3]) != 5)
        o->cascade_runs = -1;
    free(out);
    if (erc == 0)
        return 0;
    fprintf(stderr, "cuco run: evolve failed (exit %d); writing the report of what exists\n", erc);
    /* evolve's bad usage and busy workspace are this command's */
    return erc == CLI_EXIT_USAGE || erc == CLI_EXIT_BUSY ? erc : CLI_EXIT_FAILED;
}

/* Step 6: the report. Returns its exit status. */
static int step_report(run_ctx *c)
{
    cuco_strlist args = {0};
    const char *r[] = {"report", c->workspace, NULL};
    args_push_all(&args, r);
    int rrc = run_step(c->o, STEP_REPORT, c->exe, &args, NULL);
    cuco_strlist_free(&args);
    if (rrc == 0)
        progress(c->o, "cuco run: report in %s/report.html and %s/report.md\n", c->workspace,
                 c->workspace);
    return rrc;
}

/* Checks before any step: the workload at its ranks, the workspace, and
 * enough GPUs (NCCL refuses two ranks on one GPU, so every run would fail;
 * no GPU at all is handled after the transform, which can still build).
 * Returns CLI_CONTINUE or the exit status. */
static int run_prepare(run_ctx *c, cuco_err *e)
{
    struct run_opts *o = c->o;
    if (cuco_workload_load(o->workload, &c->w, e) != 0 ||
        (o->ranks &&
         cuco_workload_override_ranks(c->w, cuco_workload_parse_ranks(o->ranks), e) != 0)) {
        cuco_err_print(e, "cuco run", stderr);
        return CLI_EXIT_USAGE;
    }
    c->workspace =
        o->workspace ? cuco_strdup(o->workspace) : cuco_sprintf("cuco-out/%s", c->w->name);
    if (cuco_fs_mkdirs(c->workspace, e) != 0) {
        cuco_err_print(e, "cuco run", stderr);
        return CLI_EXIT_FAILED;
    }
    cuco_eval_default_build_cache(c->workspace);
    c->gen0 = cuco_path_join(c->workspace, "gen_0");
    c->gen0_program = cuco_path_join(c->gen0, c->w->evolve_file);
    progress(o, "cuco run: workload %s (%d ranks%s), workspace %s\n", c->w->name, c->w->ranks,
             c->w->gpu ? ", GPU" : ", CPU", c->workspace);
    c->gpus = c->w->gpu ? cuco_launch_visible_gpus() : 0;
    if (c->w->gpu && c->gpus > 0 && c->gpus < c->w->ranks) {
        snprintf(o->stopped, sizeof o->stopped,
                 "%s runs %d ranks, one GPU each, and %d GPU%s visible here: NCCL cannot put "
                 "two ranks on one GPU, so every run would fail. Run on a machine with %d GPUs "
                 "(the same command resumes from this workspace), or at fewer ranks with "
                 "--ranks %d (a separate workload for the database).",
                 c->w->name, c->w->ranks, c->gpus, c->gpus == 1 ? " is" : "s are", c->w->ranks,
                 c->gpus);
        fprintf(stderr, "cuco run: %s\n", o->stopped);
        return CLI_EXIT_FAILED;
    }
    return CLI_CONTINUE;
}

/* The steps in order; returns the exit status. */
static int run_steps(run_ctx *c)
{
    struct run_opts *o = c->o;
    step_bound(c);
    /* The advice comes first; a bound.json left by an earlier 'cuco bound'
     * counts too (e.g. measured on another machine). */
    if (bound_gate(o, c->workspace))
        return CLI_EXIT_FAILED;
    step_transform(c, step_analyze(c));
    if (c->w->gpu && c->gpus == 0) {
        snprintf(o->stopped, sizeof o->stopped,
                 "%s needs a GPU and none is visible here (see 'cuco doctor'): nothing can be "
                 "verified or searched. Run the same command on a GPU machine; it resumes from "
                 "this workspace.",
                 c->w->name);
        fprintf(stderr, "cuco run: %s\n", o->stopped);
        return CLI_EXIT_FAILED;
    }
    int rc = step_evolve(c);
    if (o->confirm_rounds > 0 &&
        confirm_step(o, c->w, c->workspace, c->start_from_gen0 ? c->gen0_program : NULL) != 0)
        rc = rc ? rc : CLI_EXIT_FAILED;
    if (step_report(c) != 0)
        rc = rc ? rc : CLI_EXIT_FAILED;
    return rc;
}

/* "cuco run: time: bound 12.0s, ..., evolve 5m19s (3 re-timings, 6 runs), ..." */
static void print_time_line(FILE *out, const struct run_opts *o, const json_t *result)
{
    fprintf(out, "cuco run: time:");
    const char *sep = " ";
    for (int i = 0; i < N_STEPS; i++) {
        if (o->step_s[i] < 0)
            continue;
        fprintf(out, "%s%s %.1fs", sep, step_names[i], o->step_s[i]);
        if (i == STEP_EVOLVE && o->cascade_runs >= 0)
            fprintf(out, " (build %.1fs, verify %.1fs, bench %.1fs in %ld cascade runs",
                    o->cascade_s[0], o->cascade_s[1], o->cascade_s[2], o->cascade_runs);
        if (i == STEP_EVOLVE && result) {
            fprintf(out, "%s%lld re-timings of %lld runs", o->cascade_runs >= 0 ? "; " : " (",
                    (long long)json_integer_value(json_object_get(result, "retimings")),
                    (long long)json_integer_value(json_object_get(result, "retiming_runs")));
            if (o->cascade_runs >= 0)
                fprintf(out, ", %.1fs", o->cascade_s[3]);
            fputc(')', out);
        } else if (i == STEP_EVOLVE && o->cascade_runs >= 0)
            fputc(')', out);
        sep = ", ";
    }
    fputc('\n', out);
}

/* The result as one JSON object (--json). */
static void print_json_result(const run_ctx *c, int rc, double wall_s, json_t *summary,
                              json_t *result, const char *warning)
{
    const struct run_opts *o = c->o;
    json_t *steps = json_object();
    for (int i = 0; i < N_STEPS; i++)
        if (o->step_s[i] >= 0)
            json_object_set_new(
                steps, step_names[i],
                json_pack("{s:i, s:f}", "exit", o->step_rc[i], "seconds", o->step_s[i]));
    json_t *ev = json_object_get(steps, "evolve");
    if (ev && o->cascade_runs >= 0)
        json_object_set_new(ev, "cascade",
                            json_pack("{s:I, s:f, s:f, s:f, s:f}", "runs",
                                      (json_int_t)o->cascade_runs, "build_s", o->cascade_s[0],
                                      "verify_s", o->cascade_s[1], "bench_s", o->cascade_s[2],
                                      "retime_s", o->cascade_s[3]));
    json_t *root = json_pack("{s:s, s:s?, s:i, s:f, s:o, s:s?, s:s?}", "workload",
                             c->w ? c->w->name : o->workload, "workspace", c->workspace,
                             "exit_status", rc, "wall_s", wall_s, "steps", steps, "stopped",
                             o->stopped[0] ? o->stopped : NULL, "warning", warning);
    json_object_set(root, "result", result ? result : json_null());
    json_object_set(root, "summary", summary ? summary : json_null());
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(root);
}

/* The end of every run: the verification warning, the summary line and
 * where the time went (or the JSON object). */
static void run_finish(const run_ctx *c, int rc, double wall_s)
{
    const struct run_opts *o = c->o;
    char *warning = NULL, *db_path = NULL;
    cuco_err e = CUCO_ERR_INIT;
    /* The speedups above were measured under the program's own verification. */
    if (c->workspace && cuco_bound_read_warning(c->workspace, &warning, &e) > 0 &&
        o->step_s[STEP_EVOLVE] >= 0)
        fprintf(stderr, "WARNING: %s Speedups above are not proven correct.\n", warning);
    cuco_err_clear(&e);
    json_t *summary = NULL, *result = NULL;
    if (c->workspace && o->step_s[STEP_EVOLVE] >= 0) {
        db_path = cuco_path_join(c->workspace, "runs.db");
        summary = db_path && cuco_fs_exists(db_path)
                      ? cli_summary_load(c->workspace, db_path, 0, &e)
                      : NULL;
        cuco_err_clear(&e);
        result = summary ? cli_summary_result(summary) : NULL;
    }
    if (o->json) {
        print_json_result(c, rc, wall_s, summary, result, warning);
    } else if (result) {
        cli_summary_print(stdout, c->w->name, result, wall_s);
        print_time_line(stdout, o, result);
    } else if (o->stopped[0]) {
        printf("cuco run: %s: stopped before the search\n", c->w ? c->w->name : o->workload);
    }
    json_decref(summary);
    json_decref(result);
    free(warning);
    free(db_path);
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = {0};
    o.mutator = "knob";
    o.confirm_rounds = 3;
    for (int i = 0; i < N_STEPS; i++)
        o.step_s[i] = -1;
    o.cascade_runs = -1;
    int rc = parse_run_args(argc, argv, &o);
    if (rc != CLI_CONTINUE) {
        cuco_strlist_free(&o.evolve_args);
        return rc;
    }
    /* The steps are cuco commands of their own and the confirm step runs
     * here: the environment carries the choice to all of them. */
    if (cli_unconfined(o.no_confine))
        setenv("CUCO_CONFINE", "0", 1);
    double t0 = now_s();
    cuco_err e = CUCO_ERR_INIT;
    run_ctx c = {.o = &o, .exe = self_exe()};
    rc = run_prepare(&c, &e);
    int prepared = rc == CLI_CONTINUE;
    if (prepared)
        rc = run_steps(&c);
    if (prepared || rc != CLI_EXIT_USAGE) /* not for a workload that does not load */
        run_finish(&c, rc, now_s() - t0);
    cuco_strlist_free(&o.evolve_args);
    cuco_workload_free(c.w);
    cuco_err_clear(&e);
    free(c.exe);
    free(c.workspace);
    free(c.gen0);
    free(c.gen0_program);
    return rc;
}
