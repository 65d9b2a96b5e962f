/* report.h: what is known about an evolution run, read from its database
 * without writing to it, and the report written from it.
 *
 * Used by 'cuco report' (report.md, report.html with SVG plots, best.<ext>)
 * and by the web UI (src/web), which serves the same summary as JSON.
 * Every reader opens the database read-only with a busy timeout, so it works
 * while 'cuco evolve' writes (the database is in WAL mode).
 */
#ifndef CUCO_REPORT_H
#define CUCO_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cuco/buf.h"
#include "cuco/err.h"

struct sqlite3;

/* Opens db_path read-only (busy timeout 5 s) and checks that it holds a cuco
 * schema this build reads. Close with report_db_close(). */
int report_db_open(const char *db_path, struct sqlite3 **out, cuco_err *e);
void report_db_close(struct sqlite3 *h);

/* Finds the database named by a workspace argument: a folder holding
 * runs.db, or a database file (its folder is then the workspace). arg NULL:
 * the current folder when it has runs.db, else the only ./cuco-out/NAME/
 * that has one. *workspace and *db_path are malloc'd (caller frees). */
int report_workspace_find(const char *arg, char **workspace, char **db_path, cuco_err *e);

/* Resolves a run id: *run_id 0 means the latest run (CUCO_ENOTFOUND when the
 * database has none, or when the given id does not exist). */
int report_run_resolve(struct sqlite3 *h, int64_t *run_id, cuco_err *e);

/* The summary of a run as a new JSON object (caller json_decref's *out):
 *   run {id, workload, status, seed, started_at, ended_at, config},
 *   baseline_ms, programs {total, by_status {...}},
 *   fast_path {id, time_ms, score} | null   (the first 'ok' generation-0 program),
 *   root_id (the first program of the run, the seed of the search) | null,
 *   best {id, time_ms, score, island, generation, mutator} | null,
 *   bound {compute_ms, comm_ms, bound_ms, ceiling, gap_closed, source} | null,
 *   failures [{status, reason, count, example_id}] (most frequent first),
 *   spend_usd, llm_calls, warnings [strings] (from workspace files such as
 *   bound.json; workspace may be NULL).
 * The overlap bound is max(compute_ms, comm_ms) of the baseline, taken from
 * workspace/bound.json ('cuco bound': its timeline's critical rank, else the
 * program's breakdown, else the two variants) when it has them, else from
 * the root program's metrics; ceiling = baseline / bound, gap_closed =
 * (baseline - best) / (baseline - bound), not clamped. A verification audit
 * finding in bound.json (verification_audit.warning true: its message) and
 * any strings in its "warnings" array become warnings. */
int report_summary(struct sqlite3 *h, int64_t run_id, const char *workspace, json_t **out,
                   cuco_err *e);

typedef struct cuco_report_opts {
    const char *workspace; /* folder holding runs.db (and bound.json, if any) */
    const char *db_path;   /* NULL: workspace/runs.db */
    const char *out_dir;   /* NULL: workspace */
    int64_t run_id;        /* 0: latest run */
    int no_gnuplot;        /* 1: always use the built-in SVG plots */
} cuco_report_opts;

typedef struct cuco_report_result {
    char *md_path, *html_path, *best_path; /* owned; best_path NULL without a best */
    int used_gnuplot;                      /* 1: plots made by gnuplot */
} cuco_report_result;
void report_result_free(cuco_report_result *r);

/* Writes report.md, report.html (self-contained: inline CSS and SVG, no
 * external reference) and best.<ext> into out_dir. */
int report_write(const cuco_report_opts *opts, cuco_report_result *res, cuco_err *e);

/* SVG plots, appended to out as a complete <svg> element. gnuplot: 1 to try
 * gnuplot's svg terminal first (*used_gnuplot set to 1 when it was used).
 * curve: best score so far over evaluations; lineage: programs by
 * generation (x) and island (lanes), edges from parents. */
int report_plot_curve(struct sqlite3 *h, int64_t run_id, int gnuplot, cuco_buf *out,
                      int *used_gnuplot, cuco_err *e);
int report_plot_lineage(struct sqlite3 *h, int64_t run_id, int gnuplot, cuco_buf *out,
                        int *used_gnuplot, cuco_err *e);

#endif
