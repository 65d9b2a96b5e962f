/* proc.h: run external commands safely.
 *
 * A child is spawned from an argv array (never a shell string) in a new
 * process group, with stdout and stderr captured up to a cap (the head and
 * the tail are kept, the middle is dropped and counted), a wall-clock timeout,
 * and, on timeout or cancel, SIGTERM then SIGKILL to the whole group so that
 * grandchildren (mpirun's ranks, a build's compilers) die too.
 *
 * Output is read until both pipes close (a grandchild holding them keeps the
 * call waiting, up to the timeout). When the child has been reaped, whatever
 * is left of its process group is killed with SIGKILL, so nothing it started
 * outlives the call (a daemon must leave the group with setsid() to stay).
 * Descriptors of the caller never reach the child: every fd above 2 is made
 * close-on-exec in the child before exec.
 * Being in its own group, the child does not get the terminal's Ctrl-C;
 * instead it gets SIGTERM if the calling process dies (Linux
 * PR_SET_PDEATHSIG). A caller that wants Ctrl-C to stop its children sets
 * the cancel flag from its own handling of SIGINT.
 * No signal handlers are installed; the call waits on its own pid only, so
 * several threads may run commands at once.
 */
#ifndef CUCO_PROC_H
#define CUCO_PROC_H

#include "cuco/err.h"
#include <stddef.h>

struct cuco_confine;

typedef struct cuco_proc_opts {
    const char *const *argv;            /* NULL-terminated; argv[0] looked up in PATH */
    const char *cwd;                    /* NULL: inherit */
    const char *const *env_set;         /* extra "NAME=VALUE" entries, NULL-terminated, or NULL */
    const char *stdin_path;             /* NULL: /dev/null */
    double timeout_s;                   /* <= 0: no timeout */
    size_t capture_cap;                 /* bytes kept per stream; 0: default 1 MiB */
    int merge_stderr;                   /* 1: stderr goes into the stdout capture */
    double kill_grace_s;                /* between SIGTERM and SIGKILL; 0: default 2 s */
    const volatile int *cancel;         /* NULL, or a flag another thread sets to nonzero
                                           to stop the child as on timeout (checked
                                           every 50 ms) */
    int echo;                           /* 1: also copy the child's stdout/stderr to ours as it
                                         * arrives (live progress of a long step) */
    const struct cuco_confine *confine; /* NULL or not enabled: run unconfined; else in
                                           namespaces with a scrubbed environment
                                           (cuco/confine.h) */
    unsigned long long output_limit;    /* > 0: a child that writes more than this many
                                           bytes to stdout and stderr together is stopped
                                           as on timeout (output_exceeded) */
} cuco_proc_opts;

typedef struct cuco_proc_result {
    int exited; /* 1: exited normally, exit_code valid */
    int exit_code;
    int signaled; /* 1: killed by term_signal */
    int term_signal;
    int timed_out; /* 1: the timeout fired and the group was killed */
    double wall_s;
    char *out; /* captured stdout (NUL-terminated, owned) */
    size_t out_len;
    size_t out_total; /* bytes the child wrote in all */
    char *err;        /* captured stderr (owned; empty when merged) */
    size_t err_len;
    size_t err_total;
    int cancelled;                   /* 1: *opts->cancel was set and the group was killed */
    double timeout_s;                /* the timeout that applied (0: none) */
    int output_exceeded;             /* 1: it wrote more than output_limit; group killed */
    unsigned long long output_limit; /* the limit that applied (0: none) */
} cuco_proc_result;

/* Runs to completion (or timeout). Returns 0 if the child was started and
 * reaped, whatever its status; negative if it could not be started (e.g. the
 * program does not exist: CUCO_ENOTFOUND, message naming it; cwd or
 * stdin_path missing: CUCO_ENOTFOUND too; confinement asked for and not
 * possible here: CUCO_EUNSUPPORTED, naming the step). argv[0] is searched in this
 * process's PATH (env_set applies to the child only). When a stream wrote more
 * than capture_cap bytes, its capture holds the first cap/2 bytes, a line
 * "[... N bytes omitted ...]" and the last cap/2 bytes. On a negative return
 * res holds nothing to free; otherwise free it with cuco_proc_result_free(). */
int cuco_proc_run(const cuco_proc_opts *opts, cuco_proc_result *res, cuco_err *e);
void cuco_proc_result_free(cuco_proc_result *res);

/* One line describing how the child ended: "exit 0", "killed by SIGSEGV
 * (signal 11)", "timed out after 5.0 s (process group killed)", "cancelled
 * (process group killed)". Caller frees. */
char *cuco_proc_describe(const cuco_proc_result *res);

/* Joins argv into a printable command line with shell-style quoting, for
 * logs and reports only (never executed). Caller frees. */
char *cuco_proc_argv_string(const char *const *argv);

#endif
