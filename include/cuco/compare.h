/* compare.h: several programs of one workload timed side by side.
 *
 * A search measures each candidate once, at whatever moment it runs, so its
 * speedups carry the noise of single measurements (a baseline measured while
 * the GPU was still clocking up inflates every speedup after it). A
 * comparison runs the programs in interleaved rounds (round r: each program
 * once, the order rotated by one per round), each run through the whole
 * cascade (built once thanks to the build cache, verified and benchmarked
 * every round), and reports per program the median of its rounds.
 */
#ifndef CUCO_COMPARE_H
#define CUCO_COMPARE_H

#include <stddef.h>

#include "cuco/err.h"
#include "cuco/eval.h"
#include "cuco/workload.h"

typedef struct cuco_compare_entry {
    /* in */
    const char *label;        /* e.g. "seed", "gen_0", "best" (not owned) */
    const char *program_text; /* NULL: the workload's own evolve file (not owned) */
    const char *frozen_ref;   /* the text whose frozen part it must keep; NULL: the seed's
                                 (a transformed program and its descendants pass gen_0's) */
    /* out */
    cuco_eval_status status; /* ok, or the first failure (later rounds then skip it) */
    char program_hash[17];
    double *times_ms; /* one per round that benchmarked (owned) */
    int n_times;
    double median_ms, min_ms, max_ms; /* over times_ms; -1 when none */
    double spread;                    /* (max - min) / median; 0 with fewer than 2 times */
    char *metrics_json; /* CUCO_RESULT of its last benchmarked round (owned) or NULL */
    char *excerpt;      /* why it failed (owned) or NULL */
} cuco_compare_entry;

/* Rates named after nccl-tests' columns, for one entry: bytes each rank
 * moves per step (the CUCO_RESULT key "bytes", else "bytes_recv_per_rank",
 * "bytes_sent_per_rank_max" or "cache_bytes_per_pair"; -1 when none),
 * algbw = bytes / median step time (what the whole step sustains) and
 * busbw = bytes / the program's own communication-only time ("comm_ms"):
 * with bytes = what one rank receives, nccl-tests' bus bandwidth of ring
 * collectives. Both in GB/s (-1 when unknown). wrong: 1 when a round failed
 * verification (later rounds then skip the program), else 0. */
typedef struct cuco_compare_rates {
    double bytes, algbw_gbps, busbw_gbps;
    int wrong;
} cuco_compare_rates;
void cuco_compare_rates_of(const cuco_compare_entry *c, cuco_compare_rates *r);

/* Progress for each run: "round R/N: LABEL TIME ms" or "... LABEL STATUS". */
typedef void (*cuco_compare_progress)(void *ctx, const char *line);

/* Runs `rounds` interleaved rounds over entries[0..n). `o` gives the work
 * folder, launcher and build cache (its max_level and repeats are ignored:
 * every run is a full cascade with one benchmark repeat). Returns 0 when the
 * comparison ran, whatever the programs' statuses; negative only when cuco
 * itself could not evaluate (see cuco_eval_program). Free the entries' outputs
 * with cuco_compare_entries_clear() either way. */
int cuco_compare_programs(const cuco_workload *w, cuco_compare_entry *entries, size_t n, int rounds,
                          const cuco_eval_opts *o, cuco_compare_progress progress,
                          void *progress_ctx, cuco_err *e);
void cuco_compare_entries_clear(cuco_compare_entry *entries, size_t n);

/* The comparison as JSON text (caller frees):
 * {"version":1, "workload", "rounds", "programs":[{"label", "status",
 *  "program_hash", "times_ms", "median_ms", "min_ms", "max_ms", "spread",
 *  "metrics", "excerpt"}], "speedups": {"LABEL_vs_LABEL0": x, ...}, "bound"}
 * where speedups are each ok entry's median against the first entry's
 * (the reference, e.g. the host-driven seed) and, when both are ok, the last
 * entry's against the second's; and "bound": {"compute_ms", "comm_ms",
 * "bound_ms", "ceiling", "gap_closed": {LABEL: share}} from the reference's
 * own compute_ms / comm_ms (null without them): ceiling = reference median /
 * max(compute, comm), gap closed = (reference - program) / (reference -
 * bound). NULL on out of memory. */
char *cuco_compare_json(const cuco_workload *w, const cuco_compare_entry *entries, size_t n,
                        int rounds);

#endif
