/* cmd_evolve.c: 'cuco evolve': searches faster variants of a workload's
 * program with the evolution engine (libcuco evolve/), storing every
 * candidate in WORKSPACE/runs.db, resuming an unfinished run, and writing the
 * best program to WORKSPACE/best.EXT. */
#include "cli_options.h"
#include "commands.h"

#include <pthread.h>
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
#include "cuco/mutate.h"
#include "cuco/num.h"
#include "cuco/patch.h"
#include "cuco/program.h"
#include "cuco/toolchain.h"
#include "cuco/workload.h"

static const cli_command evolve_command = {
    "evolve",
    "WORKLOAD [OPTIONS]",
    "Searches faster variants of WORKLOAD's program (a workload folder or\n"
    "manifest; a bare name is looked up under ./workloads/). Every candidate\n"
    "goes through the evaluation cascade (see cuco eval) and is stored in\n"
    "WORKSPACE/runs.db; an unfinished run found there is resumed. At the end\n"
    "the best program is written to WORKSPACE/best.EXT (EXT of the evolve file).\n",
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
    "  repeats: 0              bench repeats (0: 1 with re-timing on, else the\n"
    "                          manifest's)\n"
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
    "4 the workspace is in use by another cuco process.\n",
    "WORKLOAD",
    1,
    1,
    0};

/* Where the time of the cascade runs went (the evaluating threads add to it;
 * cache hits cost nothing and are not here; re-timings are). */
typedef struct eval_clock {
    pthread_mutex_t lock;
    double compile_s, verify_s, bench_s;
    long runs;
} eval_clock;

typedef struct eval_ctx {
    const cuco_workload *w;
    const char *work_dir;
    int repeats;
    const cuco_launcher *launcher; /* NULL: mpirun directly */
    const char *frozen_ref;        /* the --init program; NULL: the seed */
    int no_confine;                /* --no-confine: candidates run unconfined */
    const char *root_text;         /* the run's first program: timed with the whole breakdown */
    eval_clock *clock;
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
    /* the compute-only and comm-only timings serve the baseline's bound; a
     * candidate's are one step each */
    o.quick_breakdown = strcmp(text, c->root_text) != 0;
    cuco_eval_result r;
    rc = cuco_eval_program(c->w, text, &o, &r, e);
    free(dir);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&c->clock->lock);
    c->clock->compile_s += r.compile_s;
    c->clock->verify_s += r.verify_s;
    c->clock->bench_s += r.bench_s;
    c->clock->runs++;
    pthread_mutex_unlock(&c->clock->lock);
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
        fprintf(stderr,
                "gen %3d  best %.3fx  ok %d failed %d  evals %ld (cached %ld)  retimed %ld  "
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

/* The options of 'cuco evolve'; a number left at -1 was not given (the
 * config's value stays). */
typedef struct evolve_args {
    const char *workload, *config, *workspace, *mutator, *init, *slots, *launcher, *base_url;
    const char *ranks;
    long generations, evaluations, seed;
    double wall_s, budget_usd;
    int islands, repeats, max_tokens, retime_rounds, gpus, verify_share;
    int json, quiet, fresh, shared_bench, no_confine;
    cuco_strlist models, prices; /* repeatable: kept in order */
} evolve_args;

static int evolve_parse(int argc, char **argv, evolve_args *a)
{
    const cli_option options[] = {
        CLI_OPT_STRING("config", 0, &a->config, "F", "search configuration (YAML, keys below)"),
        CLI_OPT_STRING("workspace", 0, &a->workspace, "D",
                       "workspace folder (default ./cuco-out/WORKLOAD-NAME/)"),
        CLI_OPT_LONG("generations", 0, &a->generations, "N",
                     "budget: generations (config budget.generations)", 0, 1e6),
        CLI_OPT_LONG("evaluations", 0, &a->evaluations, "N",
                     "budget: real evaluations (config budget.evaluations)", 0, 1e8),
        CLI_OPT_DOUBLE("time", 0, &a->wall_s, "S", "budget: wall seconds (config budget.wall_s)", 0,
                       1e9),
        CLI_OPT_DOUBLE("budget-usd", 0, &a->budget_usd, "X",
                       "budget: money for LLM mutators (config budget.usd)", 0, 1e12),
        CLI_OPT_INT("islands", 0, &a->islands, "N", "number of islands (config islands)", 1, 64),
        CLI_OPT_CALL(
            "slots", 0, &a->slots, "N|auto",
            "concurrent evaluations (config slots); with --slots,\n--launcher, --gpus or "
            "--shared-bench, runs go through a\nlauncher: local runs take N slots, each on its own "
            "GPUs\n(auto: GPUs / ranks, or cores / ranks for CPU\nworkloads) while compiling uses "
            "max(N, cores) threads",
            cli_opt_slots),
        CLI_OPT_STRING(
            "launcher", 0, &a->launcher, "KIND",
            "local (mpirun here, GPU slots) or slurm (sbatch; the\nworkspace must be on a file "
            "system the nodes share;\npartition, gres, account: CUCO_SLURM_* variables);\nsee "
            "docs/launch.md"),
        CLI_OPT_INT(
            "gpus", 0, &a->gpus, "N",
            "GPUs on this host for local slots (default: the\nentries of CUDA_VISIBLE_DEVICES when "
            "set, else\nnvidia-smi -L)",
            0, 1024),
        CLI_OPT_FLAG(
            "shared-bench", 0, &a->shared_bench,
            "benchmarks share the host with other runs (default:\na benchmark waits for, and holds "
            "off, all other runs)"),
        CLI_OPT_INT("verify-share", 0, &a->verify_share, "N",
                    "GPU workloads: up to N verification runs share one\nGPU set at once "
                    "(config verify_share, default 4;\n1: none); benchmarks never share",
                    1, 64),
        CLI_OPT_LONG("seed", 0, &a->seed, "N", "PRNG seed (config seed)", 0, 0x7fffffff),
        CLI_OPT_CALL(
            "ranks", 0, &a->ranks, "N",
            "run the workload at N ranks instead of the manifest's\n(a separate workload NAME@N in "
            "the database)",
            cli_opt_ranks),
        CLI_OPT_INT(
            "repeats", 0, &a->repeats, "N",
            "bench repeats per evaluation (config repeats;\ndefault 1 while re-timing is on: one "
            "timing\nscreens, re-timing races the contenders; else the\nmanifest's)",
            1, 1000),
        CLI_OPT_INT(
            "retime-rounds", 0, &a->retime_rounds, "N",
            "a candidate whose time beats the run's best is re-timed\nside by side with it in N "
            "interleaved rounds (each a\nfull evaluation) before it counts as the best; times are\n"
            "then medians of all of a program's timings, and one that\nfails on re-timing is "
            "marked failed (config\nretime_rounds; default 2; 0: trust single measurements)",
            0, 100),
        CLI_OPT_STRING(
            "mutator", 0, &a->mutator, "NAME",
            "use only this mutator: knob (default, the offline\ndesign-space search: knobs the "
            "program never reads are\nheld, a two-level screen estimates each knob's effect and\n"
            "the two-knob interactions, then it refines along the\nstrongest; never measures a "
            "setting twice), or an LLM\nmutator (needs --model):\nllm_diff (SEARCH/REPLACE edits), "
            "llm_full (rewrites the\nEVOLVE-BLOCKs), llm_cross (combines two parents), llm\n(cross "
            "with two parents, else full or diff); test_garbage\nand test_outside exist for tests "
            "only (a garbage answer,\nan edit outside the EVOLVE-BLOCKs)"),
        CLI_OPT_LIST("model", 0, &a->models, "SPEC",
                     "LLM model for the LLM mutators, \"anthropic:NAME\" or\n\"openai:NAME\" (any "
                     "OpenAI-compatible server: vLLM,\nOllama...), or a bare name (claude* goes to "
                     "Anthropic);\nrepeat or separate with commas for several (a bandit\npicks "
                     "among them by "
                     "improvement per dollar)"),
        CLI_OPT_LIST(
            "price", 0, &a->prices, "SPEC",
            "\"model=IN,OUT[,CACHED]\" in $ per million tokens, ';'-\nseparated (also "
            "$CUCO_LLM_PRICES); a --budget-usd needs a\nprice for every model (current Claude and "
            "GPT models are\nbuilt in)"),
        CLI_OPT_STRING(
            "base-url", 0, &a->base_url, "URL",
            "where the models' API is (default https://api.anthropic.com\nand "
            "https://api.openai.com, or $CUCO_ANTHROPIC_BASE_URL and\n$CUCO_OPENAI_BASE_URL)"),
        CLI_OPT_INT(
            "max-tokens", 0, &a->max_tokens, "N",
            "answer limit per LLM call (default 8192); each call is\nadmitted against the budget "
            "with this many output tokens",
            1, 1e6),
        CLI_OPT_STRING(
            "init", 0, &a->init, "FILE",
            "generation-0 program instead of the workload's seed\n(e.g. the output of cuco "
            "transform); it must keep the\nseed's frozen text (exit 2 otherwise)"),
        CLI_OPT_FLAG("fresh", 0, &a->fresh, "start a new run even if an unfinished one exists"),
        CLI_OPT_FLAG("json", 0, &a->json, "progress and result as JSON lines on stdout"),
        CLI_OPT_FLAG(
            "no-confine", 0, &a->no_confine,
            "build and run candidates unconfined: with cuco's environment,\nnetwork and file "
            "system (warns; also CUCO_CONFINE=0;\ndocs/launch.md)"),
        CLI_OPT_END};
    cli_args args;
    int rc = cli_parse(&evolve_command, options, argc, argv, &args);
    if (rc == CLI_CONTINUE) {
        a->workload = args.pos[0];
        a->quiet = args.quiet;
        cli_args_free(&args);
    }
    return rc;
}

/* The config (defaults, the --config file) with the options over it. */
static int evolve_config(const evolve_args *a, cuco_evolve_config *cfg, cuco_err *e)
{
    if (cuco_config_defaults(cfg, e) < 0 || (a->config && cuco_config_load(a->config, cfg, e) < 0))
        return -1;
    if (a->generations >= 0)
        cfg->budget_generations = (int)a->generations;
    if (a->evaluations >= 0)
        cfg->budget_evaluations = a->evaluations;
    if (a->wall_s >= 0)
        cfg->budget_wall_s = a->wall_s;
    if (a->budget_usd >= 0)
        cfg->budget_usd = a->budget_usd;
    if (a->islands > 0)
        cfg->islands = a->islands;
    if (a->slots && strcmp(a->slots, "auto"))
        cfg->slots = (int)strtol(a->slots, NULL, 10); /* checked by cli_opt_slots */
    if (a->verify_share > 0)
        cfg->verify_share = a->verify_share;
    if (a->seed >= 0)
        cfg->seed = (uint64_t)a->seed;
    if (a->repeats > 0)
        cfg->repeats = a->repeats;
    if (a->retime_rounds >= 0)
        cfg->retime_rounds = a->retime_rounds;
    for (size_t i = 0; i < a->models.n; i++)
        if (cuco_config_add_models(cfg, a->models.items[i], e) < 0)
            return -1;
    for (size_t i = 0; i < a->prices.n; i++)
        if (cuco_config_add_prices(cfg, a->prices.items[i], e) < 0)
            return -1;
    if (a->mutator && cuco_config_set_mutator(cfg, a->mutator, e) < 0)
        return -1;
    if (cuco_config_validate(cfg, e) < 0 || check_names(cfg, e) < 0)
        return -1;
    return 0;
}

/* The workload (a bare name is looked up under ./workloads/), at --ranks,
 * and its seed (caller frees). */
static int evolve_workload(const evolve_args *a, cuco_workload **w, char **seed, cuco_err *e)
{
    if (cuco_workload_load(a->workload, w, e) < 0) {
        char *alt = cuco_sprintf("workloads/%s", a->workload);
        int ok = alt && !strchr(a->workload, '/') && cuco_fs_is_dir(alt);
        if (ok) {
            cuco_err_clear(e);
            ok = cuco_workload_load(alt, w, e) == 0;
        }
        free(alt);
        if (!ok)
            return -1;
    }
    if (a->ranks && cuco_workload_override_ranks(*w, cuco_workload_parse_ranks(a->ranks), e) < 0)
        return -1;
    return cuco_workload_read_seed(*w, seed, e);
}

/* A GPU workload's runs, and with --slots, --launcher, --gpus,
 * --shared-bench or 'slots: N' in the config any workload's, go through a
 * launcher: concurrent GPU runs get disjoint GPUs, except verifications,
 * up to verify_share of which share one GPU set while benchmarks wait for
 * the host to themselves; compiling needs no slot, so the evaluation
 * threads are at least as many as the cores. *launcher stays NULL
 * otherwise (a CPU workload, one evaluation at a time). */
static int evolve_launcher(const evolve_args *a, const cuco_workload *w, cuco_evolve_config *cfg,
                           cuco_launcher **launcher, cuco_err *e)
{
    int run_slots = a->slots && strcmp(a->slots, "auto") ? cfg->slots : 0;
    if (!a->slots && !a->launcher && cfg->slots > 1)
        run_slots = cfg->slots;
    if (!w->gpu && !a->launcher && !a->slots && a->gpus < 0 && !a->shared_bench && run_slots <= 1)
        return 0;
    if (cuco_launcher_from_kind(a->launcher, w->gpu, w->ranks, run_slots, a->gpus, a->shared_bench,
                                cfg->verify_share, launcher, e) < 0)
        return -1;
    int n = cuco_launcher_slots(*launcher), cores = cuco_launch_detect_cores();
    if (n <= 0)
        n = run_slots > 0 ? run_slots : 4;
    cfg->slots = n > cores ? n : cores;
    if (!a->quiet)
        fprintf(stderr, "cuco evolve: launcher %s, %d run slot%s, %d evaluation threads%s\n",
                cuco_launcher_name(*launcher), n, n == 1 ? "" : "s", cfg->slots,
                w->gpu && !a->shared_bench && cfg->verify_share > 1
                    ? " (verifications share each GPU set; benchmarks have it alone)"
                    : "");
    return 0;
}

/* The LLM session of the LLM mutators; a resumed run keeps what it already
 * spent under its budget. Nothing to do without an LLM mutator. */
static int evolve_llm_init(const evolve_args *a, const cuco_evolve_config *cfg, cuco_db *db,
                           const cuco_workload *w, cuco_llm_run *llm, cuco_err *e)
{
    if (!cuco_llm_run_needed((const char *const *)cfg->mutators, cfg->n_mutators))
        return 0;
    double spent = 0;
    cuco_db_run prev;
    if (!a->fresh && db_run_find(db, w->name, &prev, e) == 0) {
        if (!strcmp(prev.status, "running") && db_run_cost(db, prev.id, &spent, e) < 0)
            spent = 0;
        db_run_free(&prev);
    }
    cuco_err_clear(e);
    cuco_toolchain tc;
    cuco_buf hw = CUCO_BUF_INIT;
    if (cuco_toolchain_detect(&tc, e) == 0) {
        cuco_llm_format_hardware(&tc, NULL, &hw);
        cuco_toolchain_free(&tc);
    }
    cuco_err_clear(e);
    cuco_llm_run_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.mutators = (const char *const *)cfg->mutators;
    lo.n_mutators = cfg->n_mutators;
    lo.models = (const char *const *)cfg->models;
    lo.n_models = cfg->n_models;
    lo.prices = cfg->prices;
    lo.budget_usd = cfg->budget_usd;
    lo.spent_usd = spent;
    lo.base_url = a->base_url;
    lo.max_tokens = a->max_tokens;
    lo.hardware = hw.len ? cuco_buf_str(&hw) : NULL;
    lo.db = db;
    lo.workload = w->name;
    int rc = cuco_llm_run_init(llm, &lo, e);
    cuco_buf_free(&hw);
    return rc;
}

/* What one run of the search needs, set up by cmd_evolve. */
typedef struct evolve_state {
    evolve_args args;
    cuco_evolve_config cfg;
    cuco_workload *w;
    cuco_db *db;
    cuco_launcher *launcher;
    cuco_llm_run llm;
    char *seed, *init_text, *ws, *dbpath, *lockpath, *evaldir;
    int lockfd;
    eval_clock clock;
} evolve_state;

/* Runs the engine over the state; r receives its result. */
static int evolve_search(evolve_state *st, cuco_evolve_result *r, cuco_err *e)
{
    eval_ctx ec = {.w = st->w,
                   .work_dir = st->evaldir,
                   .repeats = cuco_config_screen_repeats(&st->cfg),
                   .launcher = st->launcher,
                   .frozen_ref = st->init_text,
                   .no_confine = st->args.no_confine,
                   .root_text = st->init_text ? st->init_text : st->seed,
                   .clock = &st->clock};
    progress_ctx pc = {st->args.json, st->args.quiet};
    cuco_evolve_opts o;
    memset(&o, 0, sizeof o);
    o.cfg = &st->cfg;
    o.db = st->db;
    o.workload_name = st->w->name;
    /* cached results count only for the same manifest, harness and headers */
    char digest[17], *scope = NULL;
    cuco_err de = CUCO_ERR_INIT;
    if (cuco_eval_inputs_digest(st->w, digest, &de) == 0)
        scope = cuco_sprintf("%s#%s", st->w->name, digest);
    else
        cuco_err_print(&de, "cuco evolve: the evaluation cache is keyed by the workload name only",
                       stderr);
    cuco_err_clear(&de);
    o.cache_scope = scope;
    o.workload = st->w;
    /* an --init program (e.g. the transformed gen_0) is the frozen reference
     * of its descendants: its blocks may differ from the seed's */
    o.seed_text = st->init_text ? st->init_text : st->seed;
    o.init_text = st->init_text;
    o.evaluate = real_eval;
    o.eval_ctx = &ec;
    o.fresh = st->args.fresh;
    o.progress = on_progress;
    o.progress_ctx = &pc;
    if (st->llm.session) {
        o.mutators = st->llm.mutators;
        o.run_id_out = &st->llm.sink.run_id;
        o.meta_fn = cuco_llm_db_meta_llm;
        o.meta_ctx = &st->llm.meta_ctx;
        o.meta_summary = &st->llm.meta_summary;
        if (st->cfg.novelty_judge) {
            o.judge_fn = cuco_llm_run_judge;
            o.judge_ctx = &st->llm;
        }
    }
    int rc = cuco_evolve_run(&o, r, e);
    free(scope);
    return rc;
}

/* Writes the best program to WORKSPACE/best.EXT and prints the result (a
 * JSON line with --json). Returns the exit status. */
static int evolve_finish(evolve_state *st, const cuco_evolve_result *r, cuco_err *e)
{
    cuco_db_program best;
    if (r->best_id <= 0 || db_program_get(st->db, r->best_id, &best, e) < 0) {
        cuco_err_print(e, "cuco evolve", stderr);
        return CLI_EXIT_FAILED;
    }
    const char *dot = strrchr(st->w->evolve_file, '.');
    char *bestname = cuco_sprintf("best%s", dot ? dot : "");
    char *bestpath = bestname ? cuco_path_join(st->ws, bestname) : NULL;
    int wrc = bestpath ? cuco_fs_write(bestpath, best.code, strlen(best.code), e)
                       : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    const char *knobs = best.knobs_json ? best.knobs_json : "{}";
    const eval_clock *t = &st->clock;
    if (wrc == 0 && st->args.json)
        printf("{\"event\":\"done\",\"run_id\":%lld,\"best_id\":%lld,\"speedup\":%.6f,"
               "\"time_ms\":%.6f,\"baseline_ms\":%.6f,\"evaluations\":%ld,\"cached\":%ld,"
               "\"generations\":%d,\"stop\":\"%s\",\"knobs\":%s,\"best_file\":\"%s\","
               "\"retimings\":%ld,\"retimings_held\":%ld,\"retiming_runs\":%ld,"
               "\"cascade_runs\":%ld,\"compile_s\":%.3f,\"verify_s\":%.3f,\"bench_s\":%.3f,"
               "\"retime_s\":%.3f}\n",
               (long long)r->run_id, (long long)best.id, r->best_score, r->best_time_ms,
               r->baseline_ms, r->evaluations, r->cached, r->generations, r->stop_reason, knobs,
               bestpath, r->retimings, r->retimings_held, r->retiming_runs, t->runs, t->compile_s,
               t->verify_s, t->bench_s, r->retime_s);
    else if (wrc == 0)
        printf("run %lld: %s after %d generations, %ld evaluations (%ld cached)\n"
               "re-timed %ld apparent improvements beside the best (%ld runs): %ld held\n"
               "best program %lld: %.3fx (%.4f ms vs baseline %.4f ms; %s)\n"
               "knobs %s\nwritten to %s\n",
               (long long)r->run_id, r->stop_reason, r->generations, r->evaluations, r->cached,
               r->retimings, r->retiming_runs, r->retimings_held, (long long)best.id, r->best_score,
               r->best_time_ms, r->baseline_ms,
               st->cfg.retime_rounds > 0 ? "medians of all their timings"
                                         : "single measurements: --retime-rounds 0",
               knobs, bestpath);
    if (wrc == 0 && !st->args.json)
        printf("time in the cascade: build %.1fs, verify %.1fs, bench %.1fs over %ld runs "
               "(re-timing %.1fs of it, wall; cache hits cost nothing)\n",
               t->compile_s, t->verify_s, t->bench_s, t->runs, r->retime_s);
    else if (wrc != 0)
        cuco_err_print(e, "cuco evolve", stderr);
    free(bestname);
    free(bestpath);
    db_program_free(&best);
    return wrc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}

/* The workspace's paths, its lock (CLI_EXIT_BUSY when another process holds
 * it) and its database. Returns CLI_CONTINUE or the exit status. */
static int evolve_open_workspace(evolve_state *st, cuco_err *e)
{
    st->ws = st->args.workspace ? cuco_strdup(st->args.workspace)
                                : cuco_sprintf("cuco-out/%s", st->w->name);
    st->dbpath = st->ws ? cuco_path_join(st->ws, "runs.db") : NULL;
    st->lockpath = st->ws ? cuco_path_join(st->ws, "lock") : NULL;
    st->evaldir = st->ws ? cuco_path_join(st->ws, "eval") : NULL;
    if (!st->ws || !st->dbpath || !st->lockpath || !st->evaldir)
        cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    else if (cuco_fs_mkdirs(st->ws, e) == 0 && cuco_fs_mkdirs(st->evaldir, e) == 0) {
        cuco_eval_default_build_cache(st->ws);
        if (db_lock_acquire(st->lockpath, &st->lockfd, e) < 0) {
            cuco_err_print(e, "cuco evolve", stderr);
            return CLI_EXIT_BUSY;
        }
        if (db_open(st->dbpath, 0, &st->db, e) == 0)
            return CLI_CONTINUE;
    }
    cuco_err_print(e, "cuco evolve", stderr);
    return CLI_EXIT_USAGE;
}

/* Everything before the search: options, config, workload, launcher,
 * --init, workspace, LLM session. Returns CLI_CONTINUE or the exit status. */
static int evolve_setup(evolve_state *st, int argc, char **argv, cuco_err *e)
{
    evolve_args *a = &st->args;
    int rc = evolve_parse(argc, argv, a);
    if (rc != CLI_CONTINUE)
        return rc;
    a->no_confine = cli_unconfined(a->no_confine);
    if (evolve_config(a, &st->cfg, e) < 0 || evolve_workload(a, &st->w, &st->seed, e) < 0 ||
        evolve_launcher(a, st->w, &st->cfg, &st->launcher, e) < 0 ||
        (a->init && (cuco_fs_read(a->init, &st->init_text, NULL, e) < 0 ||
                     check_init(st->w, st->seed, st->init_text, a->init, e) < 0))) {
        cuco_err_print(e, "cuco evolve", stderr);
        return CLI_EXIT_USAGE;
    }
    rc = evolve_open_workspace(st, e);
    if (rc == CLI_CONTINUE && evolve_llm_init(a, &st->cfg, st->db, st->w, &st->llm, e) < 0) {
        cuco_err_print(e, "cuco evolve", stderr);
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}

static void evolve_state_free(evolve_state *st)
{
    cuco_llm_run_free(&st->llm);
    cuco_strlist_free(&st->args.models);
    cuco_strlist_free(&st->args.prices);
    db_close(st->db);
    db_lock_release(st->lockfd);
    cuco_launcher_free(st->launcher);
    cuco_config_free(&st->cfg);
    cuco_workload_free(st->w);
    free(st->seed);
    free(st->init_text);
    free(st->ws);
    free(st->dbpath);
    free(st->lockpath);
    free(st->evaldir);
    pthread_mutex_destroy(&st->clock.lock);
}

int cmd_evolve(int argc, char **argv)
{
    evolve_state st;
    memset(&st, 0, sizeof st);
    st.lockfd = -1;
    pthread_mutex_init(&st.clock.lock, NULL);
    st.args = (evolve_args){.generations = -1,
                            .evaluations = -1,
                            .seed = -1,
                            .wall_s = -1,
                            .budget_usd = -1,
                            .retime_rounds = -1,
                            .gpus = -1};
    cuco_err e = CUCO_ERR_INIT;
    int code = evolve_setup(&st, argc, argv, &e);
    if (code != CLI_CONTINUE)
        goto out;
    cuco_evolve_result r;
    int run_rc = evolve_search(&st, &r, &e);
    if (run_rc == 0)
        record_bound_warning(st.db, r.run_id, st.ws);
    if (st.llm.session)
        print_llm_summary(st.llm.session, st.args.json, st.args.quiet);
    const char *fatal = st.llm.session ? cuco_llm_session_fatal(st.llm.session) : NULL;
    /* the engine saw the LLM mutators run dry; say why instead */
    if (run_rc == 0 && fatal)
        snprintf(r.stop_reason, sizeof r.stop_reason, "stopped: the LLM calls cannot work");
    if (run_rc < 0) {
        cuco_err_print(&e, "cuco evolve", stderr);
        code = CLI_EXIT_FAILED;
        goto out;
    }
    code = evolve_finish(&st, &r, &e);
    if (fatal) {
        fprintf(stderr, "cuco evolve: the LLM calls cannot work: %s\n", fatal);
        code = CLI_EXIT_FAILED;
    }
out:
    evolve_state_free(&st);
    cuco_err_clear(&e);
    return code;
}
