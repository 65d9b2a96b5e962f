/* llm_mutate.h: the glue between the LLM layer (llm.h) and a run's database
 * (db.h) that the LLM mutators (llm_diff, llm_full, llm_cross) stand on:
 * recording LLM calls into llm_calls, filling a prompt context with the
 * island's best programs and the run's recent failures, and the rule-based
 * meta summary of a run. */
#ifndef CUCO_LLM_MUTATE_H
#define CUCO_LLM_MUTATE_H

#include "cuco/db.h"
#include "cuco/llm.h"

/* mutate.h defines it; this header only points at it. */
typedef struct cuco_mutator cuco_mutator;
#include <stddef.h>
#include <stdint.h>

/* Context of cuco_llm_db_record(): where calls go. program_id may be set
 * before a call when the child it produces is already known (0: none). */
typedef struct cuco_llm_db_sink {
    cuco_db *db;
    int64_t run_id;
    int64_t program_id;
} cuco_llm_db_sink;

/* A cuco_llm_record_fn that inserts the call into llm_calls (ctx: a
 * cuco_llm_db_sink). Cache writes are counted with the input tokens. */
int cuco_llm_db_record(void *ctx, const cuco_llm_call_record *rec, cuco_err *e);

/* What a prompt shows from the database, owned by this struct (the prompt
 * context borrows from it): the best n_top ok programs of the island and the
 * n_failures most recent failed programs of the run. */
typedef struct cuco_llm_db_examples {
    cuco_db_program *top;
    size_t n_top;
    cuco_db_program *all; /* the run's programs (failures point into it) */
    size_t n_all;
    cuco_llm_example *top_ex;
    cuco_llm_example *fail_ex;
    size_t n_fail;
} cuco_llm_db_examples;

/* Loads the examples and points ctx->top / ctx->failures at them. Free with
 * cuco_llm_db_examples_free() after the prompt is built. */
int cuco_llm_db_examples_load(cuco_db *db, int64_t run_id, int island, size_t n_top,
                              size_t n_failures, cuco_llm_db_examples *ex, cuco_llm_prompt_ctx *ctx,
                              cuco_err *e);
void cuco_llm_db_examples_free(cuco_llm_db_examples *ex);

/* The rule-based meta summary of a run (cuco_meta_summary_rules over its
 * programs). Appends to out. */
int cuco_llm_db_meta_rules(cuco_db *db, int64_t run_id, cuco_buf *out, cuco_err *e);

/* Context of cuco_llm_db_meta_llm() (all borrowed). */
typedef struct cuco_llm_db_meta_ctx {
    cuco_db *db;
    cuco_llm_session *session;
    const char *workload;
} cuco_llm_db_meta_ctx;

/* The LLM meta summary of a run, in the shape of cuco_evolve_opts.meta_fn
 * (ctx: a cuco_llm_db_meta_ctx): asks the session (purpose "meta", prompt
 * meta.md over the run's newest 200 finished programs and the previous
 * summary) and appends the answer to out. A failed call falls back to the
 * rule-based summary; CUCO_EBUDGET when the budget refused the call. */
int cuco_llm_db_meta_llm(void *ctx, int64_t run_id, int generation, const char *previous,
                         cuco_buf *out, cuco_err *e);

/* The LLM mutators. kind: "llm_diff" (SEARCH/REPLACE edits), "llm_full"
 * (rewrite of the blocks), "llm_cross" (combine the two parents; falls back
 * to llm_diff without a second parent) or "llm" (cross when there is a second
 * parent, else full for a third of the explore phase's calls, else diff).
 * The session is borrowed (one per run, shared by the mutators) and its
 * recorder should be cuco_llm_db_record. Answers are applied with the patch
 * engine and checked by its frozen guard; an unusable answer fails propose
 * with the reason (the engine stores it). propose returns CUCO_EBUDGET when
 * the budget refused the call: the run should stop. Rewards for the model
 * bandit are read back from the database on the next propose (children are
 * found by code hash). meta_summary (borrowed, may change between calls)
 * is fed to the prompts. */
typedef struct cuco_llm_mutator_opts {
    cuco_llm_session *session;
    const char *const *meta_summary; /* points at the run's latest summary, or NULL */
    const char *hardware;            /* cuco_llm_format_hardware() text, or NULL */
} cuco_llm_mutator_opts;

int cuco_llm_mutator_create(const char *kind, const cuco_llm_mutator_opts *o, cuco_mutator **out,
                            cuco_err *e);

/* ---- a run's LLM setup -------------------------------------------------- */

/* What `cuco evolve` needs to run LLM mutators (all borrowed). */
typedef struct cuco_llm_run_opts {
    const char *const *mutators; /* the run's mutator names, n_mutators of them */
    size_t n_mutators;
    const char *const *models; /* model specs, n_models of them (>= 1 when any
                                  mutator is an LLM mutator) */
    size_t n_models;
    const char *prices;   /* "model=in,out[,cached];..." or NULL; added after
                             $CUCO_LLM_PRICES, which it overrides */
    double budget_usd;    /* <= 0: no limit */
    double spent_usd;     /* already spent by the run being resumed */
    const char *base_url; /* overrides the base URL of every model's API, or NULL */
    int max_tokens;       /* per call; 0: 8192 */
    const char *hardware; /* cuco_llm_format_hardware() text, or NULL */
    cuco_db *db;          /* where calls are recorded */
    const char *workload; /* name, for the meta summary prompt */
} cuco_llm_run_opts;

/* The session, the mutators and the database glue of one run. The engine
 * takes mutators (same order as the names; the non-LLM ones are the
 * built-ins), sets *run_id_out (point it at &sink.run_id), calls meta_fn
 * with meta_ctx and keeps its latest text in meta_summary (which the LLM
 * mutators read). */
typedef struct cuco_llm_run {
    cuco_llm_session *session; /* NULL when no mutator is an LLM mutator */
    cuco_mutator **mutators;   /* n_mutators, owned */
    size_t n_mutators;
    cuco_llm_db_sink sink;
    cuco_llm_db_meta_ctx meta_ctx;
    char *meta_summary; /* owned; replaced by the engine */
} cuco_llm_run;

/* Reads a novelty judge's answer: the first non-empty line is NOVEL or
 * DUPLICATE (alone, markdown emphasis allowed), the next non-empty line is
 * the reason. *novel: 1 or 0; *reason (caller frees): the reason cut to 300
 * bytes, "" when there is none. CUCO_EINVAL saying what the answer starts
 * with otherwise. */
int cuco_llm_judge_parse(const char *answer, int *novel, char **reason, cuco_err *e);

/* The LLM novelty judge, in the shape of cuco_evolve_opts.judge_fn (ctx: the
 * cuco_llm_run, whose session must exist): asks the session (purpose
 * "novelty", prompt novelty_judge.md with the similarity, the line diff from
 * neighbour to candidate and the candidate's EVOLVE-BLOCKs) for a verdict in
 * the form cuco_llm_judge_parse() reads, and appends its reason to
 * reason. A failed call or an unusable answer gives *novel = 1 (the child is
 * evaluated); an unusable answer's reason is stored in that call's
 * llm_calls.error. CUCO_EBUDGET when the budget refused the call. */
int cuco_llm_run_judge(void *ctx, int64_t run_id, const char *candidate, const char *neighbour,
                       double similarity, int *novel, cuco_buf *reason, cuco_err *e);

/* 1 when one of names is an LLM mutator. */
int cuco_llm_run_needed(const char *const *names, size_t n);
/* Builds the session (prices, budget, recorder, keys checked before any
 * call: a missing key is CUCO_EINVAL here) and the mutators. r is filled
 * even on failure; free with cuco_llm_run_free(). */
int cuco_llm_run_init(cuco_llm_run *r, const cuco_llm_run_opts *o, cuco_err *e);
void cuco_llm_run_free(cuco_llm_run *r);

#endif
