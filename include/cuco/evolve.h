/* evolve.h: the island-based evolution engine and the novelty check.
 *
 * A run: generation 0 evaluates the initial program (the workload's seed or
 * --init) as the baseline on island 0 and copies it to every island. Each
 * later generation proposes children_per_island children per island (parent
 * selection per config, mutator chosen by weight), rejects exact duplicates
 * (code hash already in the run: 'rejected_duplicate') and near-duplicate
 * code edits (MinHash Jaccard >= novelty_threshold: 'rejected_novelty'; with
 * novelty_judge, those just below it are shown to a judge, see judge_fn),
 * refuses edits outside the EVOLVE-BLOCKs ('patch_failed'; a mutator whose
 * own service failed, CUCO_ENET, gives 'infra_error'), inserts the rest
 * as 'pending' in one transaction, evaluates them concurrently (slots
 * threads; the evaluation cache is consulted first), then records the results
 * from the main thread. Every migration_interval generations the best of each
 * island is copied to the next (ring). The explore phase (flatter selection,
 * wider moves) switches to exploit after explore_fraction of the budget.
 * Stops on a budget (evaluations, generations, wall time, money; a mutator
 * returning CUCO_EBUDGET means its money budget refused a call: the children
 * already proposed are evaluated, then the run ends as done) or when the
 * mutators report the space exhausted. Mutators see the island's best
 * programs and the run's most recent failed children.
 *
 * Re-timing: a candidate whose single measurement beats the run's best is
 * re-timed side by side with it (config retime_rounds, up to
 * retime_per_generation after each generation, all remaining ones when the
 * run ends) before it counts; times are then medians of all timings of a
 * program in the run, and a program that fails on re-timing is marked
 * failed. Re-timing runs do not count against budget evaluations.
 *
 * Resume: the engine finds the workload's latest unfinished run in the
 * database, re-evaluates its 'pending' programs, and goes on from the next
 * generation. Randomness is drawn from a PRNG seeded by (seed, generation)
 * and the knob bandit is rebuilt from the database, so a resumed run proposes
 * the same candidates as an uninterrupted one (timings aside).
 */
#ifndef CUCO_EVOLVE_H
#define CUCO_EVOLVE_H

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/err.h"
#include "cuco/eval.h"
#include "cuco/workload.h"

#include <stddef.h>
#include <stdint.h>

/* config.h and mutate.h define these; this header only points at them. */
typedef struct cuco_evolve_config cuco_evolve_config;
typedef struct cuco_mutator cuco_mutator;

/* What an evaluator reports for one program. Strings owned by the outcome. */
typedef struct cuco_eval_outcome {
    cuco_eval_status status;
    double time_ms;     /* valid when status is OK */
    char *metrics_json; /* may be NULL */
    char *error;        /* excerpt, may be NULL */
} cuco_eval_outcome;
void cuco_eval_outcome_free(cuco_eval_outcome *o);

/* Evaluates text; called from worker threads (must be thread-safe). Returns
 * 0 with out filled, or negative when the evaluator itself failed (the
 * candidate is then recorded as infra_error). slot is 0..slots-1. */
typedef int (*cuco_evaluator_fn)(void *ctx, int slot, const char *text, cuco_eval_outcome *out,
                                 cuco_err *e);

typedef struct cuco_evolve_progress {
    int generation;
    double best_speedup;     /* best score so far */
    int ok, failed;          /* this generation's candidates */
    long evaluations;        /* real evaluations so far (this run) */
    long cached;             /* cache hits so far */
    double elapsed_s, eta_s; /* eta < 0 when unknown */
    double usd;
    int exploit;
    long retimings;     /* re-timings of apparent improvements so far */
    long retiming_runs; /* evaluations they cost */
} cuco_evolve_progress;

typedef struct cuco_evolve_opts {
    const cuco_evolve_config *cfg;
    cuco_db *db;
    const char *workload_name;
    /* Scope of the evaluation cache (table evaluations' workload column):
     * results are reused only within one scope. NULL: workload_name. cuco
     * evolve passes "NAME#DIGEST" with cuco_eval_inputs_digest(), so a
     * changed manifest, harness or header does not reuse old results. */
    const char *cache_scope;
    const cuco_workload *workload; /* optional, for the mutators */
    const char *seed_text;         /* the frozen reference (the workload's seed) */
    const char *init_text;         /* generation 0; NULL: seed_text */
    cuco_evaluator_fn evaluate;
    void *eval_ctx;
    int fresh; /* start a new run even if one can be resumed */
    void (*progress)(void *ctx, const cuco_evolve_progress *p);
    void *progress_ctx;
    /* Optional mutator objects used instead of creating cfg->mutators by
     * name (same count and order as cfg->mutators, whose weights apply);
     * borrowed. Lets a caller plug in a mutator of its own. */
    cuco_mutator *const *mutators;
    /* Optional: set to the run's id as soon as it is known (before any
     * mutator is called), e.g. for an LLM session's recorder. */
    int64_t *run_id_out;
    /* Every cfg->meta_interval generations the engine writes a meta summary
     * of the run to meta_summaries: with meta_fn when set (appends to out;
     * CUCO_EBUDGET stops the run like a refused mutator call), else by rules
     * (cuco_llm_db_meta_rules). The latest text is kept in *meta_summary
     * when set (the engine replaces it; the caller frees the last one), which
     * mutators may read. */
    int (*meta_fn)(void *ctx, int64_t run_id, int generation, const char *previous, cuco_buf *out,
                   cuco_err *e);
    void *meta_ctx;
    char **meta_summary;
    /* Optional novelty judge, used when cfg->novelty_judge is set: a code edit
     * (not a knob move) whose similarity to its nearest program of the run
     * lies in [novelty_threshold - novelty_judge_band, novelty_threshold) is
     * shown to judge_fn with that program (neighbour). *novel = 0: the child
     * is stored as 'rejected_novelty' with error "judge: " + what judge_fn
     * appended to reason, and is not evaluated; 1: it is evaluated. What a
     * failed call or an unusable answer means is judge_fn's choice (the LLM
     * judge says novel and records why with its call). CUCO_EBUDGET: the
     * child is evaluated and the run stops as for a refused mutator call;
     * other negative codes fail the run. LLM calls made by judge_fn are linked
     * to the child like the mutator's (llm_calls.program_id). */
    int (*judge_fn)(void *ctx, int64_t run_id, const char *candidate, const char *neighbour,
                    double similarity, int *novel, cuco_buf *reason, cuco_err *e);
    void *judge_ctx;
    /* Tests: stop abruptly (as a crash would) after this many candidates
     * were inserted as pending and before their evaluation; 0: never. */
    long crash_after_pending;
} cuco_evolve_opts;

typedef struct cuco_evolve_result {
    int64_t run_id;
    int64_t best_id;
    double best_score, best_time_ms, baseline_ms;
    long evaluations, cached;
    int generations;                               /* last generation completed */
    int crashed;                                   /* stopped by crash_after_pending */
    long retimings, retimings_held, retiming_runs; /* see retime_rounds in config.h */
    double retime_s;                               /* wall seconds spent re-timing (this call) */
    char stop_reason[64];
} cuco_evolve_result;

/* Runs (or resumes) the search. 0 on a finished or budget-stopped run. */
int cuco_evolve_run(const cuco_evolve_opts *o, cuco_evolve_result *r, cuco_err *e);

#endif
