/* retime.h: re-timing of apparent improvements (used by the engine).
 *
 * A candidate is measured once, at whatever moment it runs; on a GPU single
 * measurements of one program vary by several percent, so the best of many
 * single measurements is mostly the luckiest one. Before a candidate counts
 * as the run's best, it is re-timed side by side with the run's current best
 * (the champion) in retime_rounds interleaved rounds, each a full evaluation
 * (verification included); every program's time is then the median of all
 * its timings in the run. The champion is the initial program or a program
 * already re-timed. When the initial program is re-timed, the baseline (its
 * median) and every score follow. A program that fails verification or
 * crashes on re-timing is marked failed with that status (a race that passed
 * once is caught here); the initial program keeps its status and the
 * failure is noted. */
#ifndef CUCO_RETIME_H
#define CUCO_RETIME_H

#include <stdint.h>

#include "cuco/err.h"
#include "cuco/evolve.h"

/* One pass: brings every program's time to the median of its timings, then
 * re-times up to `cap` candidates (best claimed time first) whose single
 * timing beats the champion. *baseline is updated when the initial program's
 * median changes. When the evaluator itself cannot run (an infrastructure
 * failure, not the program's) the pass ends with a note on that re-timing and
 * nothing is marked. Returns 0, or negative on a database error. */
int cuco_evolve_retime(const cuco_evolve_opts *o, int64_t run_id, int generation, long cap,
                       double *baseline, cuco_err *e);

#endif
