/* config.h: the search configuration of `cuco evolve` (YAML file, every key
 * optional; defaults work without a file).
 *
 *   islands: 2                # number of islands (>= 1)
 *   children_per_island: 2    # children proposed per island per generation
 *   migration_interval: 3     # every N generations the best of island i is
 *                             # copied to island i+1 (ring); 0: never
 *   selection: power_law      # power_law | fitness | hill_climb
 *   explore_fraction: 0.3     # share of the budget spent exploring before exploiting
 *   novelty_threshold: 0.95   # Jaccard (MinHash) above which a code edit is a near-duplicate
 *   novelty_judge: false      # ask the LLM about code edits just below the threshold
 *   novelty_judge_band: 0.05  # ... those with similarity in [threshold - band, threshold):
 *                             # DUPLICATE rejects them like a near-duplicate
 *   archive_size: 8           # elites kept per island for parent selection
 *   slots: 1                  # concurrent evaluations
 *   seed: 1                   # PRNG seed
 *   repeats: 0                # bench repeats per evaluation (0: the manifest's)
 *   retime_rounds: 2          # a candidate that beats the run's best is re-timed
 *                             # side by side with it in N interleaved rounds before
 *                             # it counts as the best (0: never)
 *   retime_per_generation: 2  # at most this many re-timings after each generation
 *                             # (the rest wait; all are settled when the run ends)
 *   budget:
 *     evaluations: 30         # programs timed or taken from the cache
 *     generations: 20
 *     wall_s: 0               # 0: unlimited
 *     usd: 0                  # 0: unlimited (LLM mutators)
 *   mutators:                 # name -> weight
 *     knob: 1.0               # llm, llm_diff, llm_full, llm_cross need models
 *   models: [claude-sonnet-4-5]  # LLM models (a list, or "a,b")
 *   prices: "model=in,out[,cached];..."  # $ per million tokens (overrides)
 *   meta_interval: 5          # meta summary every N generations; 0: never
 */
#ifndef CUCO_CONFIG_H
#define CUCO_CONFIG_H

#include "cuco/err.h"
#include <stddef.h>
#include <stdint.h>

typedef enum cuco_selection {
    CUCO_SEL_POWER_LAW = 0,
    CUCO_SEL_FITNESS,
    CUCO_SEL_HILL_CLIMB,
} cuco_selection;

typedef struct cuco_evolve_config {
    int islands;
    int children_per_island;
    int migration_interval;
    cuco_selection selection;
    double explore_fraction;
    double novelty_threshold;
    int novelty_judge;         /* 1: LLM judge for similarities just below the threshold */
    double novelty_judge_band; /* width of that band below novelty_threshold */
    int archive_size;
    int slots;
    int verify_share; /* verification runs that may share one GPU set (benchmarks never do) */
    uint64_t seed;
    int repeats;
    long budget_evaluations;
    int budget_generations;
    double budget_wall_s;
    double budget_usd;
    char **mutators; /* owned names */
    double *weights; /* owned */
    size_t n_mutators;
    char **models; /* owned LLM model specs */
    size_t n_models;
    char *prices; /* owned price overrides "model=in,out[,cached];...", or NULL */
    int meta_interval;
    int retime_rounds;
    int retime_per_generation;
} cuco_evolve_config;

/* Fills the defaults (mutators: knob 1.0). Free with cuco_config_free(). */
int cuco_config_defaults(cuco_evolve_config *c, cuco_err *e);
/* Bench repeats of each evaluation: c->repeats when set; otherwise 1 when
 * apparent improvements are re-timed (retime_rounds > 0: a single timing
 * screens, the re-timing races the contenders), else 0 (the manifest's). */
int cuco_config_screen_repeats(const cuco_evolve_config *c);
/* Reads path over the values already in c. Errors carry path:line; unknown
 * keys are errors. */
int cuco_config_load(const char *path, cuco_evolve_config *c, cuco_err *e);
/* Replaces the mutator list with one mutator of weight 1. */
int cuco_config_set_mutator(cuco_evolve_config *c, const char *name, cuco_err *e);
/* Adds LLM models from spec ("a" or "a,b,..."); duplicates are ignored. */
int cuco_config_add_models(cuco_evolve_config *c, const char *spec, cuco_err *e);
/* Appends price overrides ("model=in,out[,cached]"), ';'-separated. */
int cuco_config_add_prices(cuco_evolve_config *c, const char *spec, cuco_err *e);
/* 1 when name is an LLM mutator (llm, llm_diff, llm_full, llm_cross). */
int cuco_config_is_llm_mutator(const char *name);
/* Checks ranges; CUCO_EINVAL naming the key. */
int cuco_config_validate(const cuco_evolve_config *c, cuco_err *e);
const char *cuco_selection_name(cuco_selection s);
/* The config as a JSON object (caller frees). */
char *cuco_config_json(const cuco_evolve_config *c);
void cuco_config_free(cuco_evolve_config *c);

#endif
