/* cmd_confine_exec.c: 'cuco confine-exec [OPTIONS] -- ARGV...', a hidden
 * subcommand: runs ARGV confined as a local evaluation would be
 * (cuco/confine.h) and exits with its status. The Slurm launcher's batch
 * scripts start the program through it, so that runs on compute nodes are
 * confined too. Not listed in `cuco --help`: only cuco writes these lines. */
#include "commands.h"
#include "cuco/confine.h"
#include "cuco/err.h"
#include "cuco/proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFINE_EXEC_MAX_LIST 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cuco confine-exec [OPTIONS] -- PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM confined (namespaces, read-only file system, no network, no\n"
            "secrets in the environment, rlimits; docs/launch.md) and exits with its\n"
            "status. Used by the batch scripts of the Slurm launcher.\n"
            "\n"
            "Options:\n"
            "  --write DIR     DIR stays writable (repeatable)\n"
            "  --secret NAME   also drop the variable NAME from the environment (repeatable)\n"
            "  --net           keep the host's network\n"
            "  --host-tmp      keep the host's /tmp and /dev/shm (writable) instead of fresh ones\n"
            "  --as BYTES      cap the address space (not for GPU programs)\n"
            "  -h, --help      this text\n");
}

/* Exits the way the program ended: its code, or its signal. */
static int exit_like(const cuco_proc_result *r)
{
    if (r->signaled) {
        signal(r->term_signal, SIG_DFL);
        fflush(NULL);
        raise(r->term_signal);
        return 128 + r->term_signal;
    }
    return r->exited ? r->exit_code : 1;
}

static int push(const char **list, int *n, const char *value)
{
    if (*n >= CONFINE_EXEC_MAX_LIST - 1) {
        fprintf(stderr, "cuco confine-exec: too many --write or --secret options\n");
        return -1;
    }
    list[(*n)++] = value;
    list[*n] = NULL;
    return 0;
}

/* Parses the options before "--" into c; returns the index of ARGV, or -1. */
static int parse(int argc, char **argv, cuco_confine *c, const char **writable,
                 const char **secrets)
{
    int n_write = 0, n_secret = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--"))
            return i + 1 < argc ? i + 1 : -1;
        if (!strcmp(a, "--net")) {
            c->allow_network = 1;
        } else if (!strcmp(a, "--host-tmp")) {
            c->host_tmp = 1;
        } else if (!strcmp(a, "--write") && has_value) {
            if (push(writable, &n_write, argv[++i]) != 0)
                return -1;
        } else if (!strcmp(a, "--secret") && has_value) {
            if (push(secrets, &n_secret, argv[++i]) != 0)
                return -1;
        } else if (!strcmp(a, "--as") && has_value) {
            char *end = NULL;
            c->as_bytes = strtoull(argv[++i], &end, 10);
            if (!*argv[i] || *end || !c->as_bytes) {
                fprintf(stderr, "cuco confine-exec: --as needs a byte count, not '%s'\n", argv[i]);
                return -1;
            }
        } else {
            fprintf(stderr, "cuco confine-exec: unknown option or missing value: %s\n", a);
            return -1;
        }
    }
    return -1;
}

int cmd_confine_exec(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *writable[CONFINE_EXEC_MAX_LIST] = {NULL};
    const char *secrets[CONFINE_EXEC_MAX_LIST] = {NULL};
    cuco_confine c = {.enabled = 1, .writable = writable, .secret_names = secrets};
    int first = parse(argc, argv, &c, writable, secrets);
    if (first < 0) {
        usage(stderr);
        return 2;
    }
    char cwd[4096];
    /* the working folder stays in sight where the private /tmp would hide
     * it (a job started from a folder under /tmp) */
    const char *visible[] = {getcwd(cwd, sizeof cwd), NULL};
    c.visible = visible;
    cuco_proc_opts o = {.argv = (const char *const *)argv + first,
                        .cwd = visible[0],
                        .capture_cap = 64 * 1024,
                        .echo = 1,
                        .confine = &c};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_proc_run(&o, &r, &e) != 0) {
        fprintf(stderr, "cuco confine-exec: %s\n", cuco_err_msg(&e));
        cuco_err_clear(&e);
        return 127;
    }
    int code = exit_like(&r);
    cuco_proc_result_free(&r);
    return code;
}
