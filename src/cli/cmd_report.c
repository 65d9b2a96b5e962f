/* cmd_report.c: 'cuco report': writes report.md, report.html and best.<ext>
 * for a run of a workspace. */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/report.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: cuco report [WORKSPACE] [--out DIR] [--run ID] [--no-gnuplot]\n"
                 "\n"
                 "Writes report.md, a self-contained report.html (inline CSS and SVG plots)\n"
                 "and best.<ext> (the best program's code) for a run of WORKSPACE (a folder\n"
                 "with runs.db, or the database file; default: ./runs.db or the only\n"
                 "./cuco-out/NAME/). Shows the baseline, the fast-path result, the best\n"
                 "program and its speedup, the overlap bound and how much of the gap was\n"
                 "closed, warnings from bound.json, the search curve, the lineage, failures,\n"
                 "LLM spend and the diff from the baseline program to the best. It can run\n"
                 "while 'cuco evolve' is still writing: it reports the run as it stands.\n"
                 "\n"
                 "Options:\n"
                 "  --out DIR      where to write (default: the workspace)\n"
                 "  --run ID       which run (default: the latest)\n"
                 "  --no-gnuplot   draw the plots with the built-in SVG writer even when\n"
                 "                 gnuplot is installed\n"
                 "  -h, --help     this help\n");
}

int cmd_report(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *workspace_arg = NULL, *out_dir = NULL;
    long long run_id = 0;
    int no_gnuplot = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--out") || !strcmp(argv[i], "--run")) && i + 1 >= argc) {
            fprintf(stderr, "cuco report: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--out"))
            out_dir = argv[++i];
        else if (!strcmp(argv[i], "--run")) {
            char *end;
            run_id = strtoll(argv[++i], &end, 10);
            if (*end || end == argv[i] || run_id <= 0) {
                fprintf(stderr, "cuco report: bad run id '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--no-gnuplot"))
            no_gnuplot = 1;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "cuco report: unknown option %s\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!workspace_arg)
            workspace_arg = argv[i];
        else {
            fprintf(stderr, "cuco report: one workspace only\n");
            return 2;
        }
    }
    cuco_err e = CUCO_ERR_INIT;
    char *workspace = NULL, *db_path = NULL;
    cuco_report_result res = {0};
    int code = 1;
    if (report_workspace_find(workspace_arg, &workspace, &db_path, &e) < 0) {
        cuco_err_print(&e, "cuco report", stderr);
        code = 2;
        goto out;
    }
    cuco_report_opts opts = {workspace, db_path, out_dir, run_id, no_gnuplot};
    if (report_write(&opts, &res, &e) < 0) {
        cuco_err_print(&e, "cuco report", stderr);
        code = e.code == CUCO_ENOTFOUND ? 2 : 1;
        goto out;
    }
    printf("wrote %s\nwrote %s\n", res.md_path, res.html_path);
    if (res.best_path)
        printf("wrote %s\n", res.best_path);
    printf("plots: %s\n", res.used_gnuplot ? "gnuplot" : "built-in SVG");
    code = 0;
out:
    report_result_free(&res);
    free(workspace);
    free(db_path);
    cuco_err_clear(&e);
    return code;
}
