/* cmd_confine_exec.c: 'cuco confine-exec [OPTIONS] -- ARGV...', a hidden
 * subcommand: runs ARGV confined as a local evaluation would be
 * (cuco/confine.h) and exits with its status. The Slurm launcher's batch
 * scripts start the program through it, so that runs on compute nodes are
 * confined too. Not listed in `cuco --help`: only cuco writes these lines. */
#include "cli_options.h"
#include "commands.h"
#include "cuco/confine.h"
#include "cuco/err.h"
#include "cuco/proc.h"
#include "cuco/workload.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_command confine_exec_command = {
    "confine-exec",
    "[OPTIONS] -- PROGRAM [ARGS...]",
    "Runs PROGRAM confined (namespaces, read-only file system, no network, no\n"
    "secrets in the environment, rlimits; docs/launch.md) and exits with its\n"
    "status. Used by the batch scripts of the Slurm launcher.\n",
    "Exit status: PROGRAM's (128 + N when signal N ended it), 127 when it could\n"
    "not start, 2 bad usage.\n",
    "PROGRAM",
    0,
    0,
    1};

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

/* The lists of --write and --secret as the NULL-terminated arrays of c. */
static int confine_lists(cuco_confine *c, const cuco_strlist *writable, const cuco_strlist *secrets)
{
    const char **w = calloc(writable->n + 1, sizeof *w);
    const char **s = calloc(secrets->n + 1, sizeof *s);
    if (!w || !s) {
        free(w);
        free(s);
        return -1;
    }
    for (size_t i = 0; i < writable->n; i++)
        w[i] = writable->items[i];
    for (size_t i = 0; i < secrets->n; i++)
        s[i] = secrets->items[i];
    c->writable = w;
    c->secret_names = s;
    return 0;
}

int cmd_confine_exec(int argc, char **argv)
{
    cuco_strlist writable = {0}, secrets = {0};
    long as = 0;
    cuco_confine c = {.enabled = 1};
    const cli_option options[] = {
        CLI_OPT_LIST("write", 0, &writable, "DIR", "DIR stays writable (repeatable)"),
        CLI_OPT_LIST("secret", 0, &secrets, "NAME",
                     "also drop the variable NAME from the environment (repeatable)"),
        CLI_OPT_FLAG("net", 0, &c.allow_network, "keep the host's network"),
        CLI_OPT_FLAG("host-tmp", 0, &c.host_tmp,
                     "keep the host's /tmp and /dev/shm (writable) instead of fresh ones"),
        CLI_OPT_LONG("as", 0, &as, "BYTES", "cap the address space (not for GPU programs)", 1,
                     9.2e18),
        CLI_OPT_END};
    cli_args args;
    int code = cli_parse(&confine_exec_command, options, argc, argv, &args);
    if (code == CLI_CONTINUE && args.n_rest == 0)
        code = cli_usage_error("confine-exec", "no PROGRAM given after '--'");
    if (code == CLI_CONTINUE && confine_lists(&c, &writable, &secrets) != 0) {
        fprintf(stderr, "cuco confine-exec: out of memory\n");
        code = CLI_EXIT_FAILED;
    }
    if (code != CLI_CONTINUE) {
        cuco_strlist_free(&writable);
        cuco_strlist_free(&secrets);
        cli_args_free(&args);
        return code;
    }
    c.as_bytes = (unsigned long long)as;
    char cwd[4096];
    /* the working folder stays in sight where the private /tmp would hide
     * it (a job started from a folder under /tmp) */
    const char *visible[] = {getcwd(cwd, sizeof cwd), NULL};
    c.visible = visible;
    cuco_proc_opts o = {.argv = (const char *const *)args.rest,
                        .cwd = visible[0],
                        .capture_cap = 64 * 1024,
                        .echo = 1,
                        .confine = &c};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_proc_run(&o, &r, &e) != 0) {
        fprintf(stderr, "cuco confine-exec: %s\n", cuco_err_msg(&e));
        cuco_err_clear(&e);
        code = 127;
    } else {
        code = exit_like(&r);
        cuco_proc_result_free(&r);
    }
    free((void *)c.writable);
    free((void *)c.secret_names);
    cuco_strlist_free(&writable);
    cuco_strlist_free(&secrets);
    cli_args_free(&args);
    return code;
}
