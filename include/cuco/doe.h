/* doe.h: the structured offline search over knobs (design of experiments)
 * and the effects table computed from a run's measured programs.
 *
 * The search (cuco_doe_next) is what the "knob" mutator proposes first:
 *   1. screen: a two-level fractional factorial over the reachable knobs,
 *      each at its starting level (low) and one alternative (high: the last
 *      legal value, or the first when the start is the last): resolution IV
 *      (odd-weight columns of a 2^m full factorial) for up to 8 knobs in 4,
 *      8 or 16 runs, resolution III (every column) in 16 or 32 runs beyond;
 *      run 0 is the start itself, already measured;
 *   2. refine around the best measured setting, in this order: for each of
 *      the (at most two) strongest clear interactions whose grid was not
 *      yet measured around any setting, the cross through its cell (every
 *      level of one knob with the other at its level of the pair) when the
 *      two are faster together, then every level pair of the two knobs
 *      ("paired moves"); every other level of each knob, strongest main
 *      effect first ("multi-level values"); then every two-knob change (the
 *      local exhaustive neighbourhood).
 * It never returns a setting already present in the run (any status). It is
 * a pure function of the run's history: deterministic and resume-safe.
 *
 * The effects (cuco_effects_compute) are least-squares fits of log time:
 * main effects are one coefficient per (knob, non-starting level); each
 * interaction is the same fit plus one product column for a pair of levels
 * of two knobs. Effects are reported as fractions of time (-0.11: 11%
 * faster) with their standard errors from the fit's residuals.
 */
#ifndef CUCO_DOE_H
#define CUCO_DOE_H

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/err.h"
#include "cuco/workload.h"
#include <stddef.h>
#include <stdint.h>

/* The knob space of a search (borrowed pointers). */
typedef struct cuco_doe_space {
    size_t n_knobs;
    const char *const *names;   /* knob names */
    const cuco_strlist *levels; /* per knob: its legal values, >= 1 */
    const size_t *start;        /* per knob: the starting level (the run's first program) */
    const int *active;          /* per knob: 0 = pruned, held at its starting level; NULL: all */
} cuco_doe_space;

/* The measured programs of a run: setting[i * n_knobs + k] is the level of
 * knob k of program i, time_ms[i] > 0 its time. */
typedef struct cuco_doe_history {
    size_t n_obs;
    const size_t *setting;
    const double *time_ms;
    /* Sets *seen when a program of the run (any status) has this setting. */
    int (*seen)(void *ctx, const size_t *setting, int *seen, cuco_err *e);
    void *seen_ctx;
} cuco_doe_history;

/* The next setting to measure into setting[0..n_knobs) and its phase
 * ("knob:screen", "knob:pair", "knob:level", "knob:local", static strings).
 * Returns 1 when found, 0 when the plan has nothing new, negative on error. */
int cuco_doe_next(const cuco_doe_space *s, const cuco_doe_history *h, size_t *setting,
                  const char **phase, cuco_err *e);

/* One effect: knob=value changes time by `alone` (others at their start);
 * for an interaction, by `with` when other=other_value too. Fractions of
 * time (-0.11: 11% faster); *_se their standard errors (NAN: unknown). */
typedef struct cuco_effect {
    char *name, *value;             /* owned */
    char *other_name, *other_value; /* owned; NULL for a main effect */
    size_t knob, level, other, other_level;
    double alone, alone_se;
    double with, with_se;
    double interaction, interaction_se; /* log-time product coefficient */
    size_t n_with;                      /* measured programs with both levels */
} cuco_effect;

typedef struct cuco_effects {
    size_t n_obs;       /* measured programs used */
    size_t df;          /* residual degrees of freedom of the main-effects fit */
    double sigma;       /* its residual sd of log time (NAN when df = 0) */
    cuco_effect *mains; /* knob order, then level order */
    size_t n_mains;
    cuco_effect *pairs; /* strongest |interaction| first, at most CUCO_EFFECTS_MAX_PAIRS */
    size_t n_pairs;
} cuco_effects;

#define CUCO_EFFECTS_MAX_PAIRS 6

/* Computes the effects of s's knobs from n_obs measured settings (layout as
 * in cuco_doe_history). *out: free with cuco_effects_free(). */
int cuco_effects_compute(const cuco_doe_space *s, const size_t *setting, const double *time_ms,
                         size_t n_obs, cuco_effects **out, cuco_err *e);
void cuco_effects_free(cuco_effects *fx);

/* The effects of a run's correct measured programs (knobs and starting
 * levels from the run's first program; levels as measured). *out NULL
 * when the run has no knobs or fewer than two measured programs. */
int cuco_effects_of_run(cuco_db *db, int64_t run_id, cuco_effects **out, cuco_err *e);

/* 1 when ps[i] is the same program as an earlier ps[j] (a copy or a
 * migration): counted once in the effects. */
int cuco_effects_repeat(const cuco_db_program *ps, size_t i);

/* Appends the table as text lines, each prefixed by `prefix`: one per
 * main effect ("NAME=V main effect -4.2% ± 1.3", from the main-effects
 * fit), then at most max_pairs interactions ("NAME=V alone +0.6% ± 0.4,
 * with OTHER=W -11.0% ± 0.5 (N measured)"). */
int cuco_effects_format(const cuco_effects *fx, const char *prefix, size_t max_pairs,
                        cuco_buf *out);

/* The effects table of run run_id in the database at db_path, as
 * cuco_effects_format lines with prefix (what `cuco report` and `cuco serve`
 * show). 0 with *n_obs the measured programs used and out empty when the run
 * has no knobs or too few measured programs; negative on a database error. */
int cuco_effects_lines_of_run(const char *db_path, int64_t run_id, const char *prefix,
                              size_t max_pairs, cuco_buf *out, size_t *n_obs, cuco_err *e);

#endif
