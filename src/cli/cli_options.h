/* cli_options.h: one table of options per command drives the parsing of its
 * arguments (the C library's getopt_long: --opt=value, --opt value and short
 * aliases), its --help text and every message of bad usage, in one format
 * for all commands (the model: curl's tool_getparam.c, git's parse-options).
 * -h/--help, -q/--quiet and -v/--verbose belong to every command and are
 * added here. */
#ifndef CUCO_CLI_OPTIONS_H
#define CUCO_CLI_OPTIONS_H

#include <stdio.h>

/* The exit statuses of every command (documented in 'cuco --help'). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILED = 1, /* the work failed (a step, a candidate, a run) */
    CLI_EXIT_USAGE = 2,  /* bad usage or bad input (manifest, config), before any work */
    CLI_EXIT_NO_GPU = 3, /* built but not verified: no GPU visible here */
    CLI_EXIT_BUSY = 4,   /* the workspace is in use by another cuco process */
};

enum cli_kind {
    CLI_FLAG,        /* dst: int *, set to 1 */
    CLI_STRING,      /* dst: const char **, the last one given wins */
    CLI_INT,         /* dst: int *, a whole number in [min, max] */
    CLI_LONG,        /* dst: long *, a whole number in [min, max] */
    CLI_DOUBLE,      /* dst: double *, a number in [min, max] */
    CLI_LIST,        /* dst: cuco_strlist *, every value in order (repeatable) */
    CLI_LONG_TEXT,   /* dst: const char **: checked as CLI_LONG, kept as text (passed on) */
    CLI_DOUBLE_TEXT, /* dst: const char **: checked as CLI_DOUBLE, kept as text */
    CLI_CALL,        /* call(cmd, dst, value): returns 0, or CLI_EXIT_USAGE after cli_usage_error */
};

typedef struct cli_option {
    const char *name; /* long name without "--"; NULL ends the table */
    int short_name;   /* 'o', or 0 */
    enum cli_kind kind;
    void *dst;
    const char *value; /* the value's name in --help ("N", "DIR"); NULL for a flag */
    const char *help;  /* '\n' starts another line of it */
    double min, max;   /* range of CLI_INT, CLI_LONG and CLI_DOUBLE */
    int (*call)(const char *cmd, void *dst, const char *value);
} cli_option;

/* The entries of a table, one macro per kind (every field set, as -Wextra
 * wants); CLI_OPT_END ends the table. */
#define CLI_OPT_FLAG(name, short_name, dst, help)                                                  \
    {                                                                                              \
        name, short_name, CLI_FLAG, dst, NULL, help, 0, 0, NULL                                    \
    }
#define CLI_OPT_STRING(name, short_name, dst, value, help)                                         \
    {                                                                                              \
        name, short_name, CLI_STRING, dst, value, help, 0, 0, NULL                                 \
    }
#define CLI_OPT_LIST(name, short_name, dst, value, help)                                           \
    {                                                                                              \
        name, short_name, CLI_LIST, dst, value, help, 0, 0, NULL                                   \
    }
#define CLI_OPT_INT(name, short_name, dst, value, help, min, max)                                  \
    {                                                                                              \
        name, short_name, CLI_INT, dst, value, help, min, max, NULL                                \
    }
#define CLI_OPT_LONG(name, short_name, dst, value, help, min, max)                                 \
    {                                                                                              \
        name, short_name, CLI_LONG, dst, value, help, min, max, NULL                               \
    }
#define CLI_OPT_DOUBLE(name, short_name, dst, value, help, min, max)                               \
    {                                                                                              \
        name, short_name, CLI_DOUBLE, dst, value, help, min, max, NULL                             \
    }
#define CLI_OPT_LONG_TEXT(name, short_name, dst, value, help, min, max)                            \
    {                                                                                              \
        name, short_name, CLI_LONG_TEXT, dst, value, help, min, max, NULL                          \
    }
#define CLI_OPT_DOUBLE_TEXT(name, short_name, dst, value, help, min, max)                          \
    {                                                                                              \
        name, short_name, CLI_DOUBLE_TEXT, dst, value, help, min, max, NULL                        \
    }
#define CLI_OPT_CALL(name, short_name, dst, value, help, call)                                     \
    {                                                                                              \
        name, short_name, CLI_CALL, dst, value, help, 0, 0, call                                   \
    }
#define CLI_OPT_END                                                                                \
    {                                                                                              \
        NULL, 0, CLI_FLAG, NULL, NULL, NULL, 0, 0, NULL                                            \
    }

typedef struct cli_command {
    const char *name;     /* "eval" */
    const char *synopsis; /* after "usage: cuco eval " */
    const char *about;    /* what it does: the paragraphs before the options */
    const char *after;    /* after the options: more keys, environment, exit status */
    const char *operand;  /* what a positional argument is, for messages ("WORKLOAD") */
    int min_args;         /* positional arguments wanted */
    int max_args;         /* at most; -1: any number */
    int rest;             /* 1: what follows "--" is kept apart (cli_args.rest); 0: operands */
} cli_command;

typedef struct cli_args {
    const char **pos; /* positional arguments, in order (into argv; the array malloc'd) */
    int n_pos;
    char **rest; /* what follows "--" (cli_command.rest), into argv */
    int n_rest;
    int quiet;   /* -q: only errors and the final result */
    int verbose; /* -v: the debug log (CUCO_LOG=debug) */
} cli_args;

#define CLI_CONTINUE (-1)

/* Parses argv (argv[0] the command's name) by the table opts (ended by a
 * {NULL} entry). Returns CLI_CONTINUE when the command is to run, else the
 * exit status to return: 0 after --help printed the help on stdout (-h
 * anywhere before "--" wins over any error), 2 after a message of bad usage
 * on stderr. Sets the log level for -q / -v (and CUCO_LOG for the
 * subprocesses). Free out with cli_args_free (it is already freed when the
 * command is not to run). */
int cli_parse(const cli_command *cmd, const cli_option *opts, int argc, char **argv, cli_args *out);
void cli_args_free(cli_args *a);

/* The help text of a command, made from its table. */
void cli_help(const cli_command *cmd, const cli_option *opts, FILE *out);

/* "cuco CMD: MESSAGE" and "Try 'cuco CMD --help'." on stderr; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A CLI_CALL for --ranks N (1..65536, as cuco_workload_parse_ranks): dst is
 * a const char ** that keeps the text. */
int cli_opt_ranks(const char *cmd, void *dst, const char *value);
/* A CLI_CALL for --slots N|auto (N from 1 to 256): dst is a const char **. */
int cli_opt_slots(const char *cmd, void *dst, const char *value);

#endif
