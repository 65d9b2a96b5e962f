/* mutate.h: the mutator interface of the evolution engine, the seeded PRNG
 * the search uses, and the built-in mutators.
 *
 * A mutator proposes one child of a parent program. Built-in names:
 *   "knob"         the offline design-space mutator (default): first the
 *                  structured search of doe.h (screen, then refinement along
 *                  the measured effects), then moves of the
 *                  "#define NAME VALUE // cuco:knob ..." knobs of the program
 *                  (one knob to a neighbouring value, one knob to any value,
 *                  several knobs, crossover of two parents' settings), picks
 *                  the move type with a UCB1 bandit rewarded by child
 *                  improvement (rebuilt from the run's history in the
 *                  database), and never proposes a setting already present in
 *                  the run. When every setting has been tried it sets
 *                  exhausted.
 *   "test_garbage" for tests only: answers text that is no valid edit.
 *   "test_outside" for tests only: an edit outside the EVOLVE-BLOCKs.
 * LLM mutators plug in through the same struct.
 */
#ifndef CUCO_MUTATE_H
#define CUCO_MUTATE_H

#include "cuco/db.h"
#include "cuco/err.h"
#include "cuco/workload.h"
#include <stddef.h>
#include <stdint.h>

/* xoshiro256** seeded by splitmix64: deterministic for a given seed. */
typedef struct cuco_rng {
    uint64_t s[4];
} cuco_rng;
void cuco_rng_seed(cuco_rng *r, uint64_t seed);
uint64_t cuco_rng_next(cuco_rng *r);
double cuco_rng_uniform(cuco_rng *r);         /* [0, 1) */
size_t cuco_rng_below(cuco_rng *r, size_t n); /* [0, n), n > 0 */

typedef struct cuco_mutate_ctx {
    const char *seed_text;         /* the generation-0 program (frozen reference) */
    const cuco_workload *workload; /* may be NULL (tests) */
    const cuco_db_program *parent;
    const cuco_db_program *second; /* second parent or NULL */
    const cuco_db_program *top;    /* the island's best programs */
    size_t n_top;
    const cuco_db_program *failures; /* recent failed children */
    size_t n_failures;
    cuco_db *db; /* the run's history */
    int64_t run_id;
    cuco_rng *rng;
    int exploit; /* 0: explore phase, 1: exploit phase */
} cuco_mutate_ctx;

typedef struct cuco_mutation {
    char *text;        /* the child program (owned) */
    char *patch_type;  /* e.g. "knob:neighbour", "diff", "rewrite" (owned) */
    char *description; /* one line (owned) */
    int exhausted;     /* set with CUCO_ENOTFOUND: nothing new left to propose */
} cuco_mutation;
void cuco_mutation_free(cuco_mutation *m);

typedef struct cuco_mutator {
    const char *name;
    void *state;
    /* Fills out (0) or fails (negative; e says why; the engine records the
     * child as patch_failed, or as infra_error for CUCO_ENET: the mutator's
     * own service failed, e.g. an LLM call, not the candidate). CUCO_ENOTFOUND
     * with out->exhausted = 1: the space is exhausted. */
    int (*propose)(struct cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out,
                   cuco_err *e);
    void (*destroy)(struct cuco_mutator *m);
} cuco_mutator;

/* Creates a built-in mutator by name; CUCO_ENOTFOUND for an unknown name.
 * Free with cuco_mutator_free(). */
int cuco_mutator_create(const char *name, cuco_mutator **out, cuco_err *e);
void cuco_mutator_free(cuco_mutator *m);

/* Canonical JSON object of a program's knob settings ({"A":"8",...} in
 * declaration order); "{}" without knobs. Caller frees. */
int cuco_knobs_json(const char *text, char **json, cuco_err *e);

/* UCB1 choice among n arms: an untried arm first, else the arm maximizing
 * mean + c*sqrt(2 ln N / n_i). */
size_t cuco_ucb1_pick(const double *reward_sum, const int *pulls, size_t n, double c);

#endif
