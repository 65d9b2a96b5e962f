/* cli_summary.h: the result of a run as the commands print it at the end:
 * the run's summary (report_summary, the one reading of "best", "bound" and
 * "baseline") loaded from a workspace, and the final lines of 'cuco run'. */
#ifndef CUCO_CLI_SUMMARY_H
#define CUCO_CLI_SUMMARY_H

#include <jansson.h>
#include <stdio.h>

#include "cuco/err.h"

/* The summary of run run_id (0: the latest) of the database db_path in
 * workspace, as report_summary gives it; NULL with e set when there is
 * none. Caller json_decref's it. */
json_t *cli_summary_load(const char *workspace, const char *db_path, long long run_id, cuco_err *e);

/* The figures of the final line, from a summary (NULL: none): the speedup
 * and times side by side from confirm.json when it timed the best program,
 * else the search's own. A new object (caller json_decref's it). */
json_t *cli_summary_result(const json_t *summary);

/* "cuco run: WORKLOAD: 1.624x (5.4700 ms -> 3.3680 ms, side by side);
 * ceiling 1.90x; 42 programs, 5 failed; 7m22s" from cli_summary_result's
 * object and the wall time. */
void cli_summary_print(FILE *out, const char *workload, const json_t *result, double wall_s);

#endif
