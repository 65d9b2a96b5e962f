/* run_view.h: the run-level concepts every reader of a run shares, each
 * defined once here over the run tables (cuco/db.h): the engine, cuco
 * report, the web API and both plotters ask this module, so "best" and
 * "held back" cannot mean two things in two views.
 *
 *   held back  a program whose code was re-timed beside the run's best and
 *              did not hold (the latest re-timing of that code in the run
 *              did not hold). Copies of it (migration, copy) share its code
 *              and are held back with it: a copy never inherits a score
 *              that did not hold.
 *   best       with re-timing (config retime_rounds > 0, view run_champions)
 *              the run's champion; otherwise the highest score among the
 *              'ok' programs that are not held back, the original before
 *              its copies.
 *   best so far  per program in id order: the highest score so far among
 *              the programs that count (ok, not held back).
 *   baseline, bound, gap  see run_view_baseline() and run_view_bound_of().
 *
 * Every function works on a read-only connection (report_db_open) and on
 * databases of older schemas (before re-timing nothing is held back). */
#ifndef CUCO_RUN_VIEW_H
#define CUCO_RUN_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "cuco/db.h"
#include "cuco/err.h"

struct sqlite3;

typedef struct run_view_program {
    int64_t id, parent_id, second_parent_id; /* parents: 0 when none */
    int island, generation;
    int ok;             /* status 'ok' with a score */
    int held_back;      /* see above */
    double score;       /* < 0 when none */
    double time_ms;     /* < 0 when none */
    double best_so_far; /* < 0 while no program counts yet */
    double created_at;
    char *status, *mutator; /* owned; may be NULL */
} run_view_program;

/* The run's programs that are not pending, in id order, each with its held
 * back mark and the best score so far. *out malloc'd (run_view_programs_free). */
int run_view_programs(struct sqlite3 *h, int64_t run_id, run_view_program **out, size_t *n,
                      cuco_err *e);
void run_view_programs_free(run_view_program *ps, size_t n);
/* The entry of program id in ps (id order, as run_view_programs gives), or NULL. */
const run_view_program *run_view_find(const run_view_program *ps, size_t n, int64_t id);

typedef struct run_view_best {
    int64_t id; /* 0: the run has no best yet */
    double score, time_ms;
} run_view_best;

/* The run's best (see above). */
int run_view_best_get(struct sqlite3 *h, int64_t run_id, run_view_best *best, cuco_err *e);
/* The same through the engine's connection. */
int db_run_best(cuco_db *db, int64_t run_id, run_view_best *best, cuco_err *e);
/* *held_back: 1 when program id is held back (see above), else 0. */
int db_program_held_back(cuco_db *db, int64_t id, int *held_back, cuco_err *e);

/* Where the baseline that speedups are over comes from. */
typedef enum run_view_baseline_source {
    RUN_VIEW_BASELINE_NONE,   /* nothing measured */
    RUN_VIEW_BASELINE_SEARCH, /* the search measured the host-driven program it started from */
    RUN_VIEW_BASELINE_BOUND,  /* cuco bound measured the host-driven program (bound.json) */
    RUN_VIEW_BASELINE_START   /* the search's start, the host-driven program not measured */
} run_view_baseline_source;

/* The baseline: the host-driven program's time. When the search started
 * from it (root_is_seed) that is the run's own measure (run_baseline_ms);
 * otherwise what cuco bound measured of it (host_ms) when known, else the
 * run's own start. Times <= 0: not measured. Returns the baseline (< 0: none). */
double run_view_baseline(int root_is_seed, double run_baseline_ms, double host_ms,
                         run_view_baseline_source *source);

typedef struct run_view_bound {
    double bound_ms;   /* max(compute, comm) */
    double ceiling;    /* baseline / bound; valid when has_ceiling */
    double gap_closed; /* (baseline - best) / (baseline - bound); valid when has_gap */
    int has_ceiling, has_gap;
    const char *note; /* static: why a figure does not apply; NULL when both do */
} run_view_bound;

/* The overlap bound of a baseline whose computation alone took compute_ms
 * and communication alone comm_ms, and the share of the gap to it that a
 * program of best_ms closes (best_ms <= 0: none). No ceiling when the
 * baseline is not slower than the bound (its timed parts took longer than
 * its step: clocks and power differ between them); no gap when the program
 * is faster than the bound (the computation changed, the bound does not
 * apply). */
void run_view_bound_of(double baseline_ms, double compute_ms, double comm_ms, double best_ms,
                       run_view_bound *b);

#endif
