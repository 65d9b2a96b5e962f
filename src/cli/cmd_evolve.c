/* cmd_evolve.c: 'cuco evolve': searches faster variants of a workload's
 * program with the evolution engine (libcuco evolve/), storing every
 * candidate in WORKSPACE/runs.db, resuming an unfinished run, and writing the
 * best program to WORKSPACE/best.EXT. */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/config.h"
#include "cuco/db.h"
#include "cuco/eval.h"
#include "cuco/evolve.h"
#include "cuco/fs.h"
#include "cuco/launch.h"
#include "cuco/llm.h"
#include "cuco/llm_mutate.h"
#include "cuco/patch.h"
#include "cuco/program.h"
#include "cuco/toolchain.h"
#include "cuco/workload.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuco evolve WORKLOAD [options]\n"
            "\n"
            "Searches faster variants of WORKLOAD's program (a workload folder or\n"
            "manifest; a bare name is looked up under ./workloads/). Every candidate\n"
            "goes through the evaluation cascade (see cuco eval) and is stored in\n"
            "WORKSPACE/runs.db; an unfinished run found there is resumed. At the end\n"
            "the best program is written to WORKSPACE/best.EXT (EXT of the evolve file).\n"
            "\n"
            "options:\n"
            "  --config F        search configuration (YAML, keys below)\n"
            "  --workspace D     workspace folder (default ./cuco-out/WORKLOAD-NAME/)\n"
            "  --generations N   budget: generations (config budget.generations)\n"
            "  --evaluations N   budget: real evaluations (config budget.evaluations)\n"
            "  --time S          budget: wall seconds (config budget.wall_s)\n"
            "  --budget-usd X    budget: money for LLM mutators (config budget.usd)\n"
            "  --islands N       number of islands (config islands)\n"
            "  --slots N|auto    concurrent evaluations (config slots); with --slots,\n"
            "                    --launcher, --gpus or --shared-bench, runs go through a\n"
            "                    launcher: local runs take N slots, each on its own GPUs\n"
            "                    (auto: GPUs / ranks, or cores / ranks for CPU\n"
            "                    workloads) while compiling uses max(N, cores) threads\n"
            "  --launcher KIND   local (mpirun here, GPU slots) or slurm (sbatch; the\n"
            "                    workspace must be on a file system the nodes share;\n"
            "                    partition, gres, account: CUCO_SLURM_* variables);\n"
            "                    see docs/launch.md\n"
            "  --gpus N          GPUs on this host for local slots (default: the\n"
            "                    entries of CUDA_VISIBLE_DEVICES when set, else\n"
            "                    nvidia-smi -L)\n"
            "  --shared-bench    benchmarks share the host with other runs (default:\n"
            "                    a benchmark waits for, and holds off, all other runs)\n"
            "  --seed N          PRNG seed (config seed)\n"
            "  --ranks N         run the workload at N ranks instead of the manifest's\n"
            "                    (a separate workload NAME@N in the database)\n"
            "  --repeats N       bench repeats per evaluation (config repeats;\n"
            "                    default the manifest's)\n"
            "  --retime-rounds N a candidate whose time beats the run's best is re-timed\n"
            "                    side by side with it in N interleaved rounds (each a\n"
            "                    full evaluation) before it counts as the best; times are\n"
            "                    then medians of all of a program's timings, and one that\n"
            "                    fails on re-timing is marked failed (config\n"
            "                    retime_rounds; default 2; 0: trust single measurements)\n"
            "  --mutator NAME    use only this mutator: knob (default, the offline\n"
            "                    design-space search: knobs the program never reads are\n"
            "                    held, a two-level screen estimates each knob's effect and\n"
            "                    the two-knob interactions, then it refines along the\n"
            "                    strongest; never measures a setting twice), or an LLM\n"
            "                    mutator (needs --model):\n"
            "                    llm_diff (SEARCH/REPLACE edits), llm_full (rewrites the\n"
            "                    EVOLVE-BLOCKs), llm_cross (combines two parents), llm\n"
            "                    (cross with two parents, else full or diff); test_garbage\n"
            "                    and test_outside exist for tests only (a garbage answer,\n"
            "                    an edit outside the EVOLVE-BLOCKs)\n"
            "  --model SPEC      LLM model for the LLM mutators, \"anthropic:NAME\" or\n"
            "                    \"openai:NAME\" (any OpenAI-compatible server: vLLM,\n"
            "                    Ollama...), or a bare name (claude* goes to Anthropic);\n"
            "                    repeat or separate with commas for several (a bandit\n"
            "                    picks among them by improvement per dollar)\n"
            "  --price SPEC      \"model=IN,OUT[,CACHED]\" in $ per million tokens, ';'-\n"
            "                    separated (also $CUCO_LLM_PRICES); a --budget-usd needs a\n"
            "                    price for every model (current Claude and GPT models are\n"
            "                    built in)\n"
            "  --base-url URL    where the models' API is (default https://api.anthropic.com\n"
            "                    and https://api.openai.com, or $CUCO_ANTHROPIC_BASE_URL and\n"
            "                    $CUCO_OPENAI_BASE_URL)\n"
            "  --max-tokens N    answer limit per LLM call (default 8192); each call is\n"
            "                    admitted against the budget with this many output tokens\n"
            "  --init FILE       generation-0 program instead of the workload's seed\n"
            "                    (e.g. the output of cuco transform); it must keep the\n"
            "                    seed's frozen text (exit 2 otherwise)\n"
            "  --fresh           start a new run even if an unfinished one exists\n"
            "  --quiet           print nothing but errors and the final result\n"
            "  --json            progress and result as JSON lines\n"
            "  --no-confine      build and run candidates unconfined: with cuco's environment,\n"
            "                    network and file system (warns; also CUCO_CONFINE=0;\n"
            "                    docs/launch.md)\n"
            "\n"
            "config keys (YAML; all optional):\n"
            "  islands: 2              number of islands\n"
            "  children_per_island: 2  children per island per generation\n"
            "  migration_interval: 3   copy each island's best to the next every N\n"
            "                          generations (ring); 0 never\n"
            "  selection: power_law    power_law | fitness | hill_climb\n"
            "  explore_fraction: 0.3   share of the budget explored before exploiting\n"
            "  novelty_threshold: 0.95 MinHash Jaccard at which a code edit is rejected\n"
            "                          as a near-duplicate\n"
            "  novelty_judge: false    with LLM mutators: a code edit whose similarity is\n"
            "                          in [threshold - band, threshold) is shown with its\n"
            "                          nearest program to the model, which answers NOVEL\n"
            "                          (evaluated) or DUPLICATE (rejected as a near-duplicate)\n"
            "  novelty_judge_band: 0.05 width of that band\n"
            "  archive_size: 8         elites per island for parent selection\n"
            "  slots: 1                concurrent evaluations\n"
            "  seed: 1                 PRNG seed\n"
            "  repeats: 0              bench repeats (0: the manifest's)\n"
            "  retime_rounds: 2        see --retime-rounds\n"
            "  retime_per_generation: 2 re-timings after each generation at most (the\n"
            "                          rest wait; all are settled when the run ends, even\n"
            "                          past a time budget); they do not count against\n"
            "                          budget evaluations\n"
            "  budget: {evaluations: 30, generations: 20, wall_s: 0, usd: 0}\n"
            "                          0 means unlimited\n"
            "  mutators: {knob: 1.0}   mutator name -> weight (knob, llm, llm_diff,\n"
            "                          llm_full, llm_cross)\n"
            "  models: [NAME, ...]     LLM models (as --model)\n"
            "  prices: \"m=in,out;...\" prices (as --price)\n"
            "  meta_interval: 5        summary of the run for the prompts every N\n"
            "                          generations (by the model with LLM mutators); 0 never\n"
            "\n"
            "LLM keys come from the environment only and are never stored or printed:\n"
            "ANTHROPIC_API_KEY for Anthropic, OPENAI_API_KEY for api.openai.com (local\n"
            "OpenAI-compatible servers need none). Every call is stored with its tokens\n"
            "and cost in WORKSPACE/runs.db (table llm_calls); a call is sent only if it\n"
            "cannot take the spend past --budget-usd, and the run ends at the first\n"
            "refusal. Timeouts and retries: $CUCO_LLM_TIMEOUT_S (300), $CUCO_LLM_RETRIES\n"
            "(4), $CUCO_LLM_BACKOFF_S (1), $CUCO_LLM_PARALLEL (8). A missing key is a\n"
            "usage error (exit status 2, before the run). A key or model the server\n"
            "refuses, or a server that cannot be reached, stops the LLM mutators after\n"
            "that call with an error (exit status 1); its candidate is stored as failed.\n"
            "Calls that time out or fail otherwise only fail their candidate. See\n"
            "docs/llm.md.\n"
            "\n"
            "Exit status: 0 done, 1 the run failed (e.g. the initial program does not\n"
            "pass its evaluation, or the LLM calls cannot work), 2 bad usage or config,\n"
            "3 the workspace is in use.\n");
}

typedef struct eval_ctx {
    const cuco_workload *w;
    const char *work_dir;
    int repeats;
    const cuco_launcher *launcher; /* NULL: mpirun directly */
    const char *frozen_ref;        /* the --init program; NULL: the seed */
    int no_confine;                /* --no-confine: candidates run unconfined */
} eval_ctx;

/* The verification audit's warning of 'cuco bound' (WORKSPACE/bound.json)
 * goes into the run's record, so the report shows it next to the speedups. */
static void record_bound_warning(cuco_db *db, int64_t run_id, const char *ws)
{
    char *warning = NULL;
    cuco_err we = CUCO_ERR_INIT;
    int found = cuco_bound_read_warning(ws, &warning, &we);
    if (found > 0 && db_run_set_warning(db, run_id, warning, &we) < 0)
        cuco_err_print(&we, "cuco evolve: recording the bound warning", stderr);
    free(warning);
    cuco_err_clear(&we);
}

/* An --init program is held to what 'cuco eval' asks of any candidate: the
 * seed's frozen text, byte for byte, and blocks that pass the block guard
 * (with the workload's headers). A seed without EVOLVE-BLOCKs (a bare
 * program that the transform marked) has no frozen text to keep. */
static int check_init(const cuco_workload *w, const char *seed, const char *init, const char *path,
                      cuco_err *e)
{
    cuco_block *blocks = NULL;
    size_t n = 0;
    int rc = cuco_program_blocks(seed, &blocks, &n, e);
    free(blocks);
    if (rc < 0)
        return cuco_err_prefix(e, "the seed");
    if (n == 0)
        return 0;
    rc = cuco_program_check_frozen(seed, init, e);
    if (rc < 0)
        return cuco_err_prefix(e, "--init %s: edit outside the EVOLVE-BLOCKs of the seed", path);
    char *context = NULL;
    cuco_err ce = CUCO_ERR_INIT;
    if (cuco_eval_frozen_context(w, &context, &ce) < 0)
        fprintf(stderr, "cuco evolve: the block guard of --init runs without the headers: %s\n",
                cuco_err_msg(&ce));
    cuco_err_clear(&ce);
    rc = cuco_patch_guard_blocks(seed, init, context, e);
    free(context);
    return rc < 0 ? cuco_err_prefix(e, "--init %s", path) : 0;
}

static int real_eval(void *ctx, int slot, const char *text, cuco_eval_outcome *out, cuco_err *e)
{
    eval_ctx *c = ctx;
    memset(out, 0, sizeof *out);
    char *dir = cuco_sprintf("%s/slot%d", c->work_dir, slot);
    if (!dir)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = cuco_fs_mkdirs(dir, e);
    if (rc < 0) {
        free(dir);
        return rc;
    }
    cuco_eval_opts o;
    memset(&o, 0, sizeof o);
    o.work_dir = dir;
    o.max_level = 3;
    o.repeats = c->repeats;
    o.launcher = c->launcher;
    o.frozen_ref = c->frozen_ref;
    o.no_confine = c->no_confine;
    cuco_eval_result r;
    rc = cuco_eval_program(c->w, text, &o, &r, e);
    free(dir);
    if (rc < 0)
        return rc;
    out->status = r.status;
    out->time_ms = r.time_ms;
    out->metrics_json = r.metrics_json;
    out->error = r.excerpt;
    r.metrics_json = r.excerpt = NULL;
    cuco_eval_result_free(&r);
    return 0;
}

typedef struct progress_ctx {
    int json, quiet;
} progress_ctx;

static void on_progress(void *ctx, const cuco_evolve_progress *p)
{
    progress_ctx *c = ctx;
    if (c->quiet)
        return;
    if (c->json) {
        printf("{\"event\":\"generation\",\"generation\":%d,\"best_speedup\":%.6f,\"ok\":%d,"
               "\"failed\":%d,\"evaluations\":%ld,\"cached\":%ld,\"elapsed_s\":%.3f,"
               "\"eta_s\":%.3f,\"usd\":%.6f,\"phase\":\"%s\",\"retimings\":%ld,"
               "\"retiming_runs\":%ld}\n",
               p->generation, p->best_speedup, p->ok, p->failed, p->evaluations, p->cached,
               p->elapsed_s, p->eta_s, p->usd, p->exploit ? "exploit" : "explore", p->retimings,
               p->retiming_runs);
    } else {
        char eta[32];
        if (p->eta_s >= 0)
            snprintf(eta, sizeof eta, "%.0fs", p->eta_s);
        else
            snprintf(eta, sizeof eta, "?");
        printf("gen %3d  best %.3fx  ok %d failed %d  evals %ld (cached %ld)  retimed %ld  "
               "%.0fs elapsed, eta %s  $%.2f  %s\n",
               p->generation, p->best_speedup, p->ok, p->failed, p->evaluations, p->cached,
               p->retimings, p->elapsed_s, eta, p->usd, p->exploit ? "exploit" : "explore");
    }
    fflush(stdout);
}

/* What the LLM calls cost: one line per model and the total (stderr), or one
 * JSON line with --json. */
static void print_llm_summary(const cuco_llm_session *s, int json, int quiet)
{
    const cuco_llm_budget *b = cuco_llm_session_budget(s);
    if (json) {
        printf("{\"event\":\"llm\",\"calls\":%ld,\"usd\":%.6f,\"budget_usd\":%.6f,"
               "\"refused\":%ld}\n",
               b->calls, b->spent_usd, b->limit_usd > 0 ? b->limit_usd : 0, b->refused);
        fflush(stdout);
        return;
    }
    if (quiet)
        return;
    cuco_buf text = CUCO_BUF_INIT;
    cuco_llm_session_summary(s, &text);
    fputs(cuco_buf_str(&text), stderr);
    cuco_buf_free(&text);
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "cuco evolve: %s needs a whole number from %ld to %ld, not '%s'\n", opt, lo,
                hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *opt, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= 0)) {
        fprintf(stderr, "cuco evolve: %s needs a number >= 0, not '%s'\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* Names that would only fail once the run started (exit 1) are bad usage
 * (exit 2) found here: a mutator that does not exist, a price that does not
 * parse. */
static int check_names(const cuco_evolve_config *cfg, cuco_err *e)
{
    for (size_t i = 0; i < cfg->n_mutators; i++) {
        if (cuco_config_is_llm_mutator(cfg->mutators[i]))
            continue;
        cuco_mutator *m = NULL;
        int rc = cuco_mutator_create(cfg->mutators[i], &m, e);
        cuco_mutator_free(m);
        if (rc < 0)
            return rc;
    }
    if (!cfg->prices)
        return 0;
    cuco_llm_prices t;
    int rc = cuco_llm_prices_init(&t, e);
    if (rc == 0)
        rc = cuco_llm_prices_parse(&t, cfg->prices, e);
    cuco_llm_prices_free(&t);
    return rc;
}

int cmd_evolve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *wl_arg = NULL, *config = NULL, *workspace = NULL, *mutator = NULL, *init = NULL;
    const char *opt_val[20] = {0};
    static const char *const opts_with_value[] = {
        "--config",   "--workspace", "--generations", "--evaluations", "--time",  "--budget-usd",
        "--islands",  "--slots",     "--seed",        "--mutator",     "--init",  "--repeats",
        "--launcher", "--gpus",      "--base-url",    "--max-tokens",  "--ranks", "--retime-rounds",
        NULL};
    /* --model and --price may be repeated: kept in order */
    const char **model_args = calloc((size_t)argc + 1, sizeof *model_args);
    const char **price_args = calloc((size_t)argc + 1, sizeof *price_args);
    size_t n_model_args = 0, n_price_args = 0;
    if (!model_args || !price_args) {
        free(model_args);
        free(price_args);
        fprintf(stderr, "cuco evolve: out of memory\n");
        return 1;
    }
    int json = 0, quiet = 0, fresh = 0, shared_bench = 0, run_slots = 0, gpus = -1;
    int no_confine = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int k = -1;
        for (int j = 0; opts_with_value[j]; j++)
            if (!strcmp(a, opts_with_value[j]))
                k = j;
        int repeated = !strcmp(a, "--model") || !strcmp(a, "--price");
        if (k >= 0 || repeated) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cuco evolve: %s needs a value\n", a);
                free(model_args);
                free(price_args);
                return 2;
            }
            if (!strcmp(a, "--model"))
                model_args[n_model_args++] = argv[++i];
            else if (!strcmp(a, "--price"))
                price_args[n_price_args++] = argv[++i];
            else
                opt_val[k] = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--fresh")) {
            fresh = 1;
        } else if (!strcmp(a, "--shared-bench")) {
            shared_bench = 1;
        } else if (!strcmp(a, "--no-confine")) {
            no_confine = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "cuco evolve: unknown option %s (see cuco evolve --help)\n", a);
            free(model_args);
            free(price_args);
            return 2;
        } else if (!wl_arg) {
            wl_arg = a;
        } else {
            fprintf(stderr, "cuco evolve: unexpected argument %s\n", a);
            free(model_args);
            free(price_args);
            return 2;
        }
    }
    if (!wl_arg) {
        usage(stderr);
        free(model_args);
        free(price_args);
        return 2;
    }
    no_confine = cli_unconfined(no_confine);
    config = opt_val[0];
    workspace = opt_val[1];
    mutator = opt_val[9];
    init = opt_val[10];

    cuco_err e = CUCO_ERR_INIT;
    cuco_evolve_config cfg;
    cuco_workload *w = NULL;
    cuco_db *db = NULL;
    cuco_launcher *launcher = NULL;
    char *seed = NULL, *init_text = NULL, *ws = NULL, *dbpath = NULL, *lockpath = NULL;
    char *evaldir = NULL;
    cuco_llm_run llm;
    memset(&llm, 0, sizeof llm);
    int max_tokens = 0;
    int lockfd = -1, code = 2;
    if (cuco_config_defaults(&cfg, &e) < 0)
        goto fail;
    if (config && cuco_config_load(config, &cfg, &e) < 0)
        goto fail;
    long lv;
    double dv;
    if (opt_val[2]) {
        if (parse_long("--generations", opt_val[2], 0, 1000000, &lv))
            goto out;
        cfg.budget_generations = (int)lv;
    }
    if (opt_val[3]) {
        if (parse_long("--evaluations", opt_val[3], 0, 100000000, &lv))
            goto out;
        cfg.budget_evaluations = lv;
    }
    if (opt_val[4]) {
        if (parse_double("--time", opt_val[4], &dv))
            goto out;
        cfg.budget_wall_s = dv;
    }
    if (opt_val[5]) {
        if (parse_double("--budget-usd", opt_val[5], &dv))
            goto out;
        cfg.budget_usd = dv;
    }
    if (opt_val[6]) {
        if (parse_long("--islands", opt_val[6], 1, 64, &lv))
            goto out;
        cfg.islands = (int)lv;
    }
    if (opt_val[7] && strcmp(opt_val[7], "auto")) {
        if (parse_long("--slots", opt_val[7], 1, 256, &lv))
            goto out;
        cfg.slots = (int)lv;
        run_slots = (int)lv;
    }
    if (opt_val[13]) {
        if (parse_long("--gpus", opt_val[13], 0, 1024, &lv))
            goto out;
        gpus = (int)lv;
    }
    if (opt_val[8]) {
        if (parse_long("--seed", opt_val[8], 0, 0x7fffffffL, &lv))
            goto out;
        cfg.seed = (uint64_t)lv;
    }
    if (opt_val[11]) {
        if (parse_long("--repeats", opt_val[11], 1, 1000, &lv))
            goto out;
        cfg.repeats = (int)lv;
    }
    if (opt_val[15]) {
        if (parse_long("--max-tokens", opt_val[15], 1, 1000000, &lv))
            goto out;
        max_tokens = (int)lv;
    }
    if (opt_val[17]) {
        if (parse_long("--retime-rounds", opt_val[17], 0, 100, &lv))
            goto out;
        cfg.retime_rounds = (int)lv;
    }
    for (size_t i = 0; i < n_model_args; i++)
        if (cuco_config_add_models(&cfg, model_args[i], &e) < 0)
            goto fail;
    for (size_t i = 0; i < n_price_args; i++)
        if (cuco_config_add_prices(&cfg, price_args[i], &e) < 0)
            goto fail;
    if (mutator && cuco_config_set_mutator(&cfg, mutator, &e) < 0)
        goto fail;
    if (cuco_config_validate(&cfg, &e) < 0 || check_names(&cfg, &e) < 0)
        goto fail;

    if (cuco_workload_load(wl_arg, &w, &e) < 0) {
        char *alt = cuco_sprintf("workloads/%s", wl_arg);
        int ok = alt && !strchr(wl_arg, '/') && cuco_fs_is_dir(alt);
        if (ok) {
            cuco_err_clear(&e);
            ok = cuco_workload_load(alt, &w, &e) == 0;
        }
        free(alt);
        if (!ok)
            goto fail;
    }
    if (opt_val[16]) {
        int r = cuco_workload_parse_ranks(opt_val[16]);
        if (r < 0) {
            fprintf(stderr, "cuco evolve: --ranks needs a number from 1 to 65536, not '%s'\n",
                    opt_val[16]);
            goto out;
        }
        if (cuco_workload_override_ranks(w, r, &e) < 0)
            goto fail;
    }
    if (cuco_workload_read_seed(w, &seed, &e) < 0)
        goto fail;
    /* 'slots: N' of the config file means the same as --slots N: runs go
     * through the local launcher, so concurrent GPU runs get disjoint GPUs */
    if (!opt_val[7] && !opt_val[12] && cfg.slots > 1)
        run_slots = cfg.slots;
    if (opt_val[12] || opt_val[7] || opt_val[13] || shared_bench || run_slots > 1) {
        if (cuco_launcher_from_kind(opt_val[12], w->gpu, w->ranks, run_slots, gpus, shared_bench,
                                    &launcher, &e) < 0)
            goto fail;
        /* Runs are gated by the launcher's slots; compiling needs no slot, so
         * the threads that evaluate are at least as many as the cores. */
        int n = cuco_launcher_slots(launcher), cores = cuco_launch_detect_cores();
        if (n <= 0)
            n = run_slots > 0 ? run_slots : 4;
        cfg.slots = n > cores ? n : cores;
        if (!quiet)
            fprintf(stderr, "cuco evolve: launcher %s, %d run slot%s, %d evaluation threads\n",
                    cuco_launcher_name(launcher), n, n == 1 ? "" : "s", cfg.slots);
    }
    if (init && (cuco_fs_read(init, &init_text, NULL, &e) < 0 ||
                 check_init(w, seed, init_text, init, &e) < 0))
        goto fail;

    ws = workspace ? cuco_strdup(workspace) : cuco_sprintf("cuco-out/%s", w->name);
    dbpath = cuco_path_join(ws, "runs.db");
    lockpath = cuco_path_join(ws, "lock");
    evaldir = cuco_path_join(ws, "eval");
    if (!ws || !dbpath || !lockpath || !evaldir) {
        cuco_err_set(&e, CUCO_ENOMEM, "out of memory");
        goto fail;
    }
    if (cuco_fs_mkdirs(ws, &e) < 0 || cuco_fs_mkdirs(evaldir, &e) < 0)
        goto fail;
    cuco_eval_default_build_cache(ws);

    if (db_lock_acquire(lockpath, &lockfd, &e) < 0) {
        cuco_err_print(&e, "cuco evolve", stderr);
        code = 3;
        goto out;
    }
    if (db_open(dbpath, 0, &db, &e) < 0)
        goto fail;

    if (cuco_llm_run_needed((const char *const *)cfg.mutators, cfg.n_mutators)) {
        double spent = 0;
        cuco_db_run prev;
        /* a resumed run keeps what it already spent under its budget */
        if (!fresh && db_run_find(db, w->name, &prev, &e) == 0) {
            if (!strcmp(prev.status, "running") && db_run_cost(db, prev.id, &spent, &e) < 0)
                spent = 0;
            db_run_free(&prev);
        }
        cuco_err_clear(&e);
        cuco_toolchain tc;
        cuco_buf hw = CUCO_BUF_INIT;
        if (cuco_toolchain_detect(&tc, &e) == 0) {
            cuco_llm_format_hardware(&tc, NULL, &hw);
            cuco_toolchain_free(&tc);
        }
        cuco_err_clear(&e);
        cuco_llm_run_opts lo;
        memset(&lo, 0, sizeof lo);
        lo.mutators = (const char *const *)cfg.mutators;
        lo.n_mutators = cfg.n_mutators;
        lo.models = (const char *const *)cfg.models;
        lo.n_models = cfg.n_models;
        lo.prices = cfg.prices;
        lo.budget_usd = cfg.budget_usd;
        lo.spent_usd = spent;
        lo.base_url = opt_val[14];
        lo.max_tokens = max_tokens;
        lo.hardware = hw.len ? cuco_buf_str(&hw) : NULL;
        lo.db = db;
        lo.workload = w->name;
        int lrc = cuco_llm_run_init(&llm, &lo, &e);
        cuco_buf_free(&hw);
        if (lrc < 0)
            goto fail;
    }

    eval_ctx ec = {w, evaldir, cfg.repeats, launcher, init_text, no_confine};
    progress_ctx pc = {json, quiet};
    cuco_evolve_opts o;
    memset(&o, 0, sizeof o);
    o.cfg = &cfg;
    o.db = db;
    o.workload_name = w->name;
    /* cached results count only for the same manifest, harness and headers */
    char digest[17], *scope = NULL;
    cuco_err de = CUCO_ERR_INIT;
    if (cuco_eval_inputs_digest(w, digest, &de) == 0)
        scope = cuco_sprintf("%s#%s", w->name, digest);
    else
        cuco_err_print(&de, "cuco evolve: the evaluation cache is keyed by the workload name only",
                       stderr);
    cuco_err_clear(&de);
    o.cache_scope = scope;
    o.workload = w;
    /* an --init program (e.g. the transformed gen_0) is the frozen reference
     * of its descendants: its blocks may differ from the seed's */
    o.seed_text = init_text ? init_text : seed;
    o.init_text = init_text;
    o.evaluate = real_eval;
    o.eval_ctx = &ec;
    o.fresh = fresh;
    o.progress = on_progress;
    o.progress_ctx = &pc;
    if (llm.session) {
        o.mutators = llm.mutators;
        o.run_id_out = &llm.sink.run_id;
        o.meta_fn = cuco_llm_db_meta_llm;
        o.meta_ctx = &llm.meta_ctx;
        o.meta_summary = &llm.meta_summary;
        if (cfg.novelty_judge) {
            o.judge_fn = cuco_llm_run_judge;
            o.judge_ctx = &llm;
        }
    }
    cuco_evolve_result r;
    int run_rc = cuco_evolve_run(&o, &r, &e);
    free(scope);
    if (run_rc == 0)
        record_bound_warning(db, r.run_id, ws);
    if (llm.session)
        print_llm_summary(llm.session, json, quiet);
    /* the engine saw the LLM mutators run dry; say why instead */
    if (run_rc == 0 && llm.session && cuco_llm_session_fatal(llm.session))
        snprintf(r.stop_reason, sizeof r.stop_reason, "stopped: the LLM calls cannot work");
    if (run_rc < 0) {
        cuco_err_print(&e, "cuco evolve", stderr);
        code = 1;
        goto out;
    }
    cuco_db_program best;
    if (r.best_id <= 0 || db_program_get(db, r.best_id, &best, &e) < 0) {
        cuco_err_print(&e, "cuco evolve", stderr);
        code = 1;
        goto out;
    }
    const char *dot = strrchr(w->evolve_file, '.');
    char *bestname = cuco_sprintf("best%s", dot ? dot : "");
    char *bestpath = bestname ? cuco_path_join(ws, bestname) : NULL;
    int wrc = bestpath ? cuco_fs_write(bestpath, best.code, strlen(best.code), &e)
                       : cuco_err_set(&e, CUCO_ENOMEM, "out of memory");
    if (wrc == 0) {
        if (json)
            printf("{\"event\":\"done\",\"run_id\":%lld,\"best_id\":%lld,\"speedup\":%.6f,"
                   "\"time_ms\":%.6f,\"baseline_ms\":%.6f,\"evaluations\":%ld,\"cached\":%ld,"
                   "\"generations\":%d,\"stop\":\"%s\",\"knobs\":%s,\"best_file\":\"%s\","
                   "\"retimings\":%ld,\"retimings_held\":%ld,\"retiming_runs\":%ld}\n",
                   (long long)r.run_id, (long long)best.id, r.best_score, r.best_time_ms,
                   r.baseline_ms, r.evaluations, r.cached, r.generations, r.stop_reason,
                   best.knobs_json ? best.knobs_json : "{}", bestpath, r.retimings,
                   r.retimings_held, r.retiming_runs);
        else
            printf("run %lld: %s after %d generations, %ld evaluations (%ld cached)\n"
                   "re-timed %ld apparent improvements beside the best (%ld runs): %ld held\n"
                   "best program %lld: %.3fx (%.4f ms vs baseline %.4f ms; %s)\n"
                   "knobs %s\nwritten to %s\n",
                   (long long)r.run_id, r.stop_reason, r.generations, r.evaluations, r.cached,
                   r.retimings, r.retiming_runs, r.retimings_held, (long long)best.id, r.best_score,
                   r.best_time_ms, r.baseline_ms,
                   cfg.retime_rounds > 0 ? "medians of all their timings"
                                         : "single measurements: --retime-rounds 0",
                   best.knobs_json ? best.knobs_json : "{}", bestpath);
        code = 0;
    } else {
        cuco_err_print(&e, "cuco evolve", stderr);
        code = 1;
    }
    free(bestname);
    free(bestpath);
    db_program_free(&best);
    if (llm.session && cuco_llm_session_fatal(llm.session)) {
        fprintf(stderr, "cuco evolve: the LLM calls cannot work: %s\n",
                cuco_llm_session_fatal(llm.session));
        code = 1;
    }
    goto out;
fail:
    cuco_err_print(&e, "cuco evolve", stderr);
out:
    cuco_llm_run_free(&llm);
    free(model_args);
    free(price_args);
    db_close(db);
    db_lock_release(lockfd);
    cuco_launcher_free(launcher);
    cuco_config_free(&cfg);
    cuco_workload_free(w);
    free(seed);
    free(init_text);
    free(ws);
    free(dbpath);
    free(lockpath);
    free(evaldir);
    cuco_err_clear(&e);
    return code;
}
