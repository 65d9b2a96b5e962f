/* main.c: the cuco tool's entry point: finds the subcommand and hands over. */
#include "commands.h"
#include "cuco/version.h"

#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"doctor", cmd_doctor, "show what this machine has for cuco and what will not work"},
    {"analyze", cmd_analyze, "find collectives, buffers, kernels and their dependencies"},
    {"bound", cmd_bound, "measure what overlap can gain; audit the verification"},
    {"transform", cmd_transform, "fast path: rewrite into a verified device-initiated baseline"},
    {"eval", cmd_eval, "run the cascade (compile, run + verify, benchmark) on one program"},
    {"evolve", cmd_evolve, "slow path: evolutionary search over programs"},
    {"report", cmd_report, "write report.html / report.md and best.cu for a run"},
    {"serve", cmd_serve, "web UI over a run's database"},
    {"run", cmd_run, "analyze, transform, evolve and report in one go"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: cuco COMMAND [ARGS...]\n"
                 "\n"
                 "cuco turns host-driven CUDA + NCCL programs into device-initiated kernels\n"
                 "that overlap computation with communication, verifies them, and searches\n"
                 "for faster variants.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run 'cuco COMMAND --help' for a command's options. Options of every\n"
                 "command: -h/--help, -q/--quiet (only errors and the final result),\n"
                 "-v/--verbose (the debug log). A value may follow its option or be joined\n"
                 "to it: --workspace DIR or --workspace=DIR. 'cuco --version' prints the\n"
                 "version.\n"
                 "\n"
                 "Progress goes to stderr; results (tables, summaries, --json) to stdout.\n"
                 "\n"
                 "Exit status (every command):\n"
                 "  0  done\n"
                 "  1  the work failed (a step, the program, the run)\n"
                 "  2  bad usage or bad input (options, manifest, config), before any work\n"
                 "  3  built but not verified: no GPU visible here (cuco transform)\n"
                 "  4  the workspace is in use by another cuco process (cuco evolve, run)\n"
                 "\n"
                 "Environment: CUCO_LOG=error|warn|info|debug, NCCL_HOME (NCCL to build with),\n"
                 "CUCO_CONFINE=0 (build and run candidates unconfined, as --no-confine).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        if (argc > 2 && strcmp(argv[1], "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return commands[i].run(2, hargv);
                }
        }
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("cuco %s\n", CUCO_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    /* Not in the table: only cuco's own batch scripts call it. */
    if (!strcmp(argv[1], "confine-exec"))
        return cmd_confine_exec(argc - 1, argv + 1);
    fprintf(stderr, "cuco: unknown command '%s'\nTry 'cuco --help'.\n", argv[1]);
    return 2;
}
