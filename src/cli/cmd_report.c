/* cmd_report.c: 'cuco report': writes report.md, report.html and best.<ext>
 * for a run of a workspace; with --json, also the run's summary as one JSON
 * object on stdout. */
#include "cli_options.h"
#include "cli_summary.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/report.h"

static const cli_command report_command = {
    "report",
    "[WORKSPACE] [OPTIONS]",
    "Writes report.md, a self-contained report.html (inline CSS and SVG plots)\n"
    "and best.<ext> (the best program's code) for a run of WORKSPACE (a folder\n"
    "with runs.db, or the database file; default: ./runs.db or the only\n"
    "./cuco-out/NAME/). Shows the baseline, the fast-path result, the best\n"
    "program and its speedup, the overlap bound and how much of the gap was\n"
    "closed, warnings from bound.json, the search curve, the lineage, failures,\n"
    "LLM spend and the diff from the baseline program to the best. It can run\n"
    "while 'cuco evolve' is still writing: it reports the run as it stands.\n",
    "With --json, stdout holds one JSON object: the files written (md, html,\n"
    "best), the plotter, and the run's summary, the figures of report.md: run,\n"
    "baseline_ms, best, bound, programs, failures, retiming, spend_usd.\n"
    "\n"
    "Exit status: 0 written, 1 it could not be written, 2 bad usage or no run\n"
    "database found.\n",
    "WORKSPACE",
    0,
    1,
    0};

/* What --json prints: the files and the summary of the run; caller frees. */
static char *report_json(const cuco_report_result *res, const char *workspace, const char *db_path,
                         long long run_id, cuco_err *e)
{
    json_t *summary = cli_summary_load(workspace, db_path, run_id, e);
    if (!summary)
        return NULL;
    json_t *root = json_pack("{s:s, s:s, s:s?, s:s, s:o}", "md", res->md_path, "html",
                             res->html_path, "best", res->best_path, "plots",
                             res->used_gnuplot ? "gnuplot" : "svg", "summary", summary);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text)
        cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    return text;
}

int cmd_report(int argc, char **argv)
{
    const char *out_dir = NULL;
    long run_id = 0;
    int no_gnuplot = 0, json = 0;
    const cli_option options[] = {
        CLI_OPT_STRING("out", 0, &out_dir, "DIR", "where to write (default: the workspace)"),
        CLI_OPT_LONG("run", 0, &run_id, "ID", "which run (default: the latest)", 1, 1e15),
        CLI_OPT_FLAG("no-gnuplot", 0, &no_gnuplot,
                     "draw the plots with the built-in SVG writer even when\ngnuplot is installed"),
        CLI_OPT_FLAG("json", 0, &json,
                     "print the files written and the run's summary as one JSON\nobject"),
        CLI_OPT_END};
    cli_args args;
    int code = cli_parse(&report_command, options, argc, argv, &args);
    cuco_err e = CUCO_ERR_INIT;
    char *workspace = NULL, *db_path = NULL, *text = NULL;
    cuco_report_result res = {0};
    if (code != CLI_CONTINUE)
        goto out;
    code = CLI_EXIT_FAILED;
    if (report_workspace_find(args.n_pos ? args.pos[0] : NULL, &workspace, &db_path, &e) < 0) {
        cuco_err_print(&e, "cuco report", stderr);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    cuco_report_opts opts = {workspace, db_path, out_dir, run_id, no_gnuplot};
    if (report_write(&opts, &res, &e) < 0) {
        cuco_err_print(&e, "cuco report", stderr);
        code = e.code == CUCO_ENOTFOUND ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
        goto out;
    }
    if (json) {
        text = report_json(&res, workspace, db_path, run_id, &e);
        if (!text) {
            cuco_err_print(&e, "cuco report", stderr);
            goto out;
        }
        printf("%s\n", text);
    } else {
        printf("wrote %s\nwrote %s\n", res.md_path, res.html_path);
        if (res.best_path)
            printf("wrote %s\n", res.best_path);
        printf("plots: %s\n", res.used_gnuplot ? "gnuplot" : "built-in SVG");
    }
    code = CLI_EXIT_OK;
out:
    report_result_free(&res);
    free(workspace);
    free(db_path);
    free(text);
    cuco_err_clear(&e);
    cli_args_free(&args);
    return code;
}
