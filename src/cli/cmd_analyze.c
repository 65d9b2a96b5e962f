/* cmd_analyze.c: 'cuco analyze PROGRAM... [-o FILE] [--json]':
 * runs the extractor, writes analysis.json and prints a summary. */
#include "cli_options.h"
#include "commands.h"
#include "cuco/analyze.h"
#include "cuco/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_command analyze_command = {
    "analyze",
    "PROGRAM... [OPTIONS]",
    "Finds NCCL communicators, collectives and send/recv groups, allocations,\n"
    "kernel and library launches, streams and events in CUDA C++ sources, and\n"
    "their dependency graph. PROGRAM is a file or a folder (every .cu/.cuh/.cpp/\n"
    ".cc/.c/.h in it); local #include \"...\" files are followed.\n",
    "Exit status: 0 ok, 2 bad arguments or an unreadable file.\n",
    "PROGRAM",
    1,
    -1,
    0};

int cmd_analyze(int argc, char **argv)
{
    const char *out_path = NULL;
    int print_json = 0;
    const cli_option options[] = {
        CLI_OPT_STRING(
            "output", 'o', &out_path, "FILE",
            "write the analysis JSON to FILE (default: analysis.json,\nunless --json is given)"),
        CLI_OPT_FLAG(
            "json", 0, &print_json,
            "print the JSON on stdout instead of the summary; no file is\nwritten unless -o names "
            "one"),
        CLI_OPT_END};
    cli_args args;
    int rc = cli_parse(&analyze_command, options, argc, argv, &args);
    json_t *an = NULL;
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    cuco_buf sum = CUCO_BUF_INIT;
    if (rc != CLI_CONTINUE)
        goto out;
    rc = CLI_EXIT_USAGE;
    /* --json alone prints and writes nothing: it must not overwrite a file
     * the user did not name. */
    if (!out_path && !print_json)
        out_path = "analysis.json";
    if (cuco_analyze_paths(args.pos, (size_t)args.n_pos, &an, &e)) {
        cuco_err_print(&e, "cuco analyze", stderr);
        goto out;
    }
    text = json_dumps(an, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
        fprintf(stderr, "cuco analyze: out of memory\n");
        goto out;
    }
    if (out_path && cuco_fs_write(out_path, text, strlen(text), &e)) {
        cuco_err_print(&e, "cuco analyze", stderr);
        goto out;
    }
    if (print_json) {
        fputs(text, stdout);
        fputc('\n', stdout);
    } else {
        cuco_analyze_summary(an, &sum);
        fputs(cuco_buf_str(&sum), stdout);
        printf("\nwrote %s\n", out_path);
    }
    rc = 0;
out:
    free(text);
    json_decref(an);
    cuco_buf_free(&sum);
    cuco_err_clear(&e);
    cli_args_free(&args);
    return rc;
}
