/* cmd_analyze.c: 'cuco analyze PROGRAM... [-o analysis.json] [--json]':
 * runs the extractor, writes analysis.json and prints a summary. */
#include "commands.h"
#include "cuco/analyze.h"
#include "cuco/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: cuco analyze PROGRAM... [-o FILE] [--json]\n"
                 "\n"
                 "Finds NCCL communicators, collectives and send/recv groups, allocations,\n"
                 "kernel and library launches, streams and events in CUDA C++ sources, and\n"
                 "their dependency graph. PROGRAM is a file or a folder (every .cu/.cuh/.cpp/\n"
                 ".cc/.c/.h in it); local #include \"...\" files are followed.\n"
                 "\n"
                 "  -o FILE    write the analysis JSON to FILE (default: analysis.json,\n"
                 "             unless --json is given)\n"
                 "  --json     print the JSON on stdout instead of the summary; no file is\n"
                 "             written unless -o names one\n"
                 "  -h, --help this text\n"
                 "\n"
                 "Exit status: 0 ok, 2 bad arguments or an unreadable file.\n");
}

int cmd_analyze(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *out_path = NULL;
    int print_json = 0;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    size_t npaths = 0;
    int rc = 2;
    json_t *an = NULL;
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    cuco_buf sum = CUCO_BUF_INIT;
    if (!paths)
        return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cuco analyze: -o needs a file name\n");
                goto out;
            }
            out_path = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            print_json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "cuco analyze: unknown option '%s'\n", argv[i]);
            usage(stderr);
            goto out;
        } else {
            paths[npaths++] = argv[i];
        }
    }
    if (!npaths) {
        usage(stderr);
        goto out;
    }
    /* --json alone prints and writes nothing: it must not overwrite a file
     * the user did not name. */
    if (!out_path && !print_json)
        out_path = "analysis.json";
    if (cuco_analyze_paths(paths, npaths, &an, &e)) {
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
    free(paths);
    return rc;
}
