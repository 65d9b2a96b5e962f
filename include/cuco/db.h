/* db.h: the candidate database of an evolution run (SQLite, WAL mode).
 *
 * One writer (the evolve engine's main thread) and any number of read-only
 * readers (report, web UI) that work while a run writes. The schema is
 * versioned in table schema_version(version) and upgraded by ordered
 * migrations when opened for writing.
 *
 * Schema (version 2):
 *   runs(id INTEGER PK, workload TEXT, config TEXT (JSON), seed INTEGER,
 *        baseline_ms REAL (NULL until the baseline is measured),
 *        started_at REAL, ended_at REAL, status TEXT 'running'|'done'|'failed')
 *   programs(id INTEGER PK, run_id, parent_id, second_parent_id, island,
 *        generation, code TEXT, code_hash TEXT, mutator TEXT, patch_type TEXT,
 *        description TEXT, status TEXT (an eval status name from eval.h, or
 *        'pending', 'rejected_duplicate', 'rejected_novelty', 'patch_failed';
 *        a child whose LLM call failed is 'infra_error' with code NULL),
 *        score REAL (baseline/time, NULL unless ok), time_ms REAL,
 *        metrics TEXT (JSON), error TEXT (excerpt), novelty REAL,
 *        knobs TEXT (JSON object name -> value), cached INTEGER (1: result taken
 *        from the evaluation cache), created_at REAL)
 *   evaluations(workload TEXT, code_hash TEXT, status TEXT, time_ms REAL,
 *        metrics TEXT, error TEXT, created_at REAL, PRIMARY KEY(workload, code_hash))
 *   llm_calls(id, run_id, program_id, model, input_tokens, output_tokens,
 *        cached_tokens, cost_usd, latency_s, prompt_hash, status, created_at,
 *        purpose TEXT ('diff', 'full', 'cross', 'meta', 'novelty', ...; version 2),
 *        error TEXT (why the call or its answer failed; version 2))
 *        program_id: the child a mutation call produced, or the candidate a
 *        novelty call judged (NULL: none, e.g. meta summaries)
 *   meta_summaries(id, run_id, generation, text, created_at)
 *   timings(id, run_id, code_hash, time_ms, source TEXT ('eval': the
 *        candidate's own evaluation; 'cache': taken from the evaluation cache;
 *        'retime': a re-timing round), retiming_id, created_at)  (version 5)
 *   retimings(id, run_id, generation, challenger_id, champion_id, claimed_ms
 *        (the challenger's time before), challenger_ms, champion_ms (medians
 *        of all their timings after), rounds, runs (evaluations it cost,
 *        failed ones included), held (1: the challenger is the
 *        run's new best), note TEXT (a failure on re-timing), created_at)
 *        (version 5)
 *   view run_champions(run_id, challenger_id (the challenger of the run's
 *        latest re-timing that held and is still 'ok', NULL when none),
 *        root_id (the run's first program)): with re-timing the run's best
 *        is coalesce(challenger_id, root_id)  (version 6)
 * Times are seconds since the epoch (REAL).
 *
 * The run lock is an flock() on a lock file beside the database
 * (db_lock_acquire): the OS releases it when the holder dies, even by kill -9.
 */
#ifndef CUCO_DB_H
#define CUCO_DB_H

#include "cuco/err.h"
#include <stdint.h>

#define CUCO_DB_SCHEMA_VERSION 6

typedef struct cuco_db cuco_db; /* opaque */

/* Opens (creating when writable) the database at path. readonly: open
 * read-only, no migration (fails with CUCO_EDB if the schema is newer than
 * this build or missing). Close with db_close(). */
int db_open(const char *path, int readonly, cuco_db **out, cuco_err *e);
void db_close(cuco_db *db);
/* The schema version stored in the file. */
int db_schema_version(cuco_db *db, int *version, cuco_err *e);

/* Run lock: takes an exclusive flock on lock_path (created). CUCO_EBUSY with a
 * clear message when another process holds it. *fd receives the descriptor;
 * db_lock_release(fd) closes it. */
int db_lock_acquire(const char *lock_path, int *fd, cuco_err *e);
void db_lock_release(int fd);

typedef struct cuco_db_run {
    int64_t id;
    char *workload;
    char *config_json;
    uint64_t seed;
    double baseline_ms; /* < 0 when not measured yet */
    double started_at, ended_at;
    char *status;
} cuco_db_run;
void db_run_free(cuco_db_run *r);

int db_run_create(cuco_db *db, const char *workload, const char *config_json, uint64_t seed,
                  int64_t *id, cuco_err *e);
/* Latest run of the workload; CUCO_ENOTFOUND if none. r filled (db_run_free). */
int db_run_find(cuco_db *db, const char *workload, cuco_db_run *r, cuco_err *e);
int db_run_set_baseline(cuco_db *db, int64_t run_id, double baseline_ms, cuco_err *e);
int db_run_set_status(cuco_db *db, int64_t run_id, const char *status, cuco_err *e);
/* The verification audit's warning of the run (NULL clears it). */
int db_run_set_warning(cuco_db *db, int64_t run_id, const char *warning, cuco_err *e);

typedef struct cuco_db_program {
    int64_t id, run_id, parent_id, second_parent_id; /* parents: 0 when none */
    int island, generation;
    char *code, *code_hash, *mutator, *patch_type, *description, *status;
    double score;   /* < 0 when none */
    double time_ms; /* < 0 when none */
    char *metrics_json, *error, *knobs_json;
    double novelty; /* highest similarity to an earlier program of the run */
    int cached;     /* 1 when the result came from the evaluation cache */
    double created_at;
} cuco_db_program;
void db_program_free(cuco_db_program *p);

/* Inserts p (id ignored, set in *id). Strings may be NULL. */
int db_program_insert(cuco_db *db, const cuco_db_program *p, int64_t *id, cuco_err *e);
/* Updates status, score, time_ms, metrics, error, cached of program id. */
int db_program_update(cuco_db *db, int64_t id, const char *status, double score, double time_ms,
                      const char *metrics_json, const char *error, int cached, cuco_err *e);
/* Counts the run's programs that cost a real evaluation (finished, with
 * code, not cached, mutator not 'copy'/'migration'). */
int db_run_evaluations(cuco_db *db, int64_t run_id, long *evaluations, long *cached, cuco_err *e);
int db_program_get(cuco_db *db, int64_t id, cuco_db_program *p, cuco_err *e);
/* Programs of a run in id order, optionally filtered by status (NULL: all).
 * *out malloc'd array (db_programs_free). */
int db_programs_list(cuco_db *db, int64_t run_id, const char *status, cuco_db_program **out,
                     size_t *n, cuco_err *e);
/* The best n 'ok' programs of a run (island < 0: all islands), best score first. */
int db_programs_top(cuco_db *db, int64_t run_id, int island, size_t n, cuco_db_program **out,
                    size_t *nout, cuco_err *e);
void db_programs_free(cuco_db_program *ps, size_t n);
/* 1 if a program of the run has this code hash (any status), 0 if not. */
int db_program_hash_seen(cuco_db *db, int64_t run_id, const char *code_hash, int *seen,
                         cuco_err *e);
/* 1 if a program of the run has exactly this knobs JSON (any status but
 * patch_failed), 0 if not. */
int db_program_knobs_seen(cuco_db *db, int64_t run_id, const char *knobs_json, int *seen,
                          cuco_err *e);

/* Evaluation cache keyed by (workload, code_hash). lookup: *found = 0 if
 * absent, else fields filled (strings owned by caller, may be NULL). */
typedef struct cuco_db_eval {
    char *status;
    double time_ms;
    char *metrics_json;
    char *error;
} cuco_db_eval;
void db_eval_free(cuco_db_eval *v);
int db_eval_lookup(cuco_db *db, const char *workload, const char *code_hash, int *found,
                   cuco_db_eval *v, cuco_err *e);
int db_eval_store(cuco_db *db, const char *workload, const char *code_hash, const cuco_db_eval *v,
                  cuco_err *e);

typedef struct cuco_db_llm_call {
    int64_t run_id, program_id; /* program_id 0: none */
    const char *model;
    int64_t input_tokens, output_tokens, cached_tokens;
    double cost_usd, latency_s;
    const char *prompt_hash, *status;
} cuco_db_llm_call;
int db_llm_call_insert(cuco_db *db, const cuco_db_llm_call *c, int64_t *id, cuco_err *e);
/* Sets the purpose and the error text of call id (NULL: left as is). */
int db_llm_call_describe(cuco_db *db, int64_t id, const char *purpose, const char *error,
                         cuco_err *e);
/* The highest llm_calls id of the run (0: none). */
int db_llm_call_last_id(cuco_db *db, int64_t run_id, int64_t *id, cuco_err *e);
/* Links the run's calls with id > after_id and no program yet to program_id:
 * the engine notes db_llm_call_last_id() before proposing a child and links
 * the calls made for it (mutation, novelty judge) once the child is stored. */
int db_llm_calls_link(cuco_db *db, int64_t run_id, int64_t after_id, int64_t program_id,
                      cuco_err *e);
/* Sum of cost_usd over the run's llm_calls. */
int db_run_cost(cuco_db *db, int64_t run_id, double *usd, cuco_err *e);

int db_meta_insert(cuco_db *db, int64_t run_id, int generation, const char *text, cuco_err *e);

/* Marks the run's 'pending' programs (left by a crash); returns them in id
 * order so the engine can re-queue them (db_programs_free). */
int db_programs_pending(cuco_db *db, int64_t run_id, cuco_db_program **out, size_t *n, cuco_err *e);

/* ---- timings and re-timings (schema version 5) --------------------------
 * A program's time_ms is the median of every timing of its code in the run:
 * its own evaluation, then the rounds in which it was re-timed. */
int db_timing_add(cuco_db *db, int64_t run_id, const char *code_hash, double time_ms,
                  const char *source, int64_t retiming_id, cuco_err *e);
/* Median and count of the run's timings of code_hash (*median -1, *n 0 when
 * none). */
int db_timing_median(cuco_db *db, int64_t run_id, const char *code_hash, double *median, int *n,
                     cuco_err *e);
/* Sets time_ms (and score = baseline_ms / time_ms when baseline_ms > 0) of
 * the run's 'ok' programs with code_hash. */
int db_programs_set_time(cuco_db *db, int64_t run_id, const char *code_hash, double time_ms,
                         double baseline_ms, cuco_err *e);
/* Marks the run's programs with code_hash as failed (status, error; no score
 * or time). */
int db_programs_set_failed(cuco_db *db, int64_t run_id, const char *code_hash, const char *status,
                           const char *error, cuco_err *e);
/* Sets the run's baseline and every 'ok' program's score = baseline / time. */
int db_run_rescore(cuco_db *db, int64_t run_id, double baseline_ms, cuco_err *e);

typedef struct cuco_db_retiming {
    int64_t run_id, challenger_id, champion_id;
    int generation, rounds, runs, held;
    double claimed_ms, challenger_ms, champion_ms; /* < 0: none */
    const char *note;                              /* may be NULL */
} cuco_db_retiming;
int db_retiming_insert(cuco_db *db, const cuco_db_retiming *r, int64_t *id, cuco_err *e);
int db_retiming_finish(cuco_db *db, int64_t id, const cuco_db_retiming *r, cuco_err *e);
/* The run's champion (view run_champions): the challenger of its latest
 * re-timing that held and is still 'ok', else its first program when 'ok'.
 * *program_id and *code_hash (caller frees); 0 and NULL when there is none. */
int db_run_champion(cuco_db *db, int64_t run_id, int64_t *program_id, char **code_hash,
                    cuco_err *e);
/* Counts of the run's re-timings: how many, how many held, and how many
 * evaluations they cost. */
int db_run_retimings(cuco_db *db, int64_t run_id, long *retimings, long *held, long *runs,
                     cuco_err *e);

/* Transactions (BEGIN IMMEDIATE: the one writer takes the lock at once).
 * Every error path after db_begin() calls db_rollback(), which ends the
 * transaction when one is open (a no-op otherwise); a failed db_commit()
 * rolls back itself. */
int db_begin(cuco_db *db, cuco_err *e);
int db_commit(cuco_db *db, cuco_err *e);
void db_rollback(cuco_db *db);

#endif
