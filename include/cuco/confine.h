/* confine.h: confinement of the commands an evaluation runs (builds, runs,
 * benchmarks of candidates a search or a model wrote).
 *
 * A confined command runs in new Linux namespaces made with unshare(2), with
 * no external tool: a user namespace when cuco is not root, then PID, mount
 * and (unless the network is allowed) network namespaces. The first process
 * of the PID namespace is a small init that starts the command, reaps
 * zombies, and when the command exits reports on stderr how many processes
 * it left behind ("cuco: ended N processes the program left running") and
 * exits with the command's status; the kernel then kills everything left in
 * the namespace, setsid() daemons included. Inside:
 *   - every mount is read-only except the `writable` folders (and the
 *     command's $TMPDIR), a fresh tmpfs on /tmp and /dev/shm, and /dev;
 *   - the `hidden` folders are empty (a tmpfs over each), but for the
 *     `visible` and `writable` folders inside them, bound back;
 *   - /proc is the namespace's own (cuco's processes and their fds unseen);
 *   - the network is only a loopback, brought up for mpirun's PMIx;
 *   - the environment has no secrets (cuco_confine_env_keep);
 *   - rlimits cap CPU time, file size, processes, core dumps (and address
 *     space where the command needs no GPU: CUDA reserves huge ranges).
 * Every descriptor cuco holds is closed at exec, confined or not (proc.c).
 *
 * Used by src/proc (cuco_proc_opts.confine) in the forked child: the plan is
 * prepared before fork (it allocates), applied after (async-signal-safe only).
 * When a step fails (a host that forbids namespaces) the command does not run
 * at all: confinement is never silently dropped.
 */
#ifndef CUCO_CONFINE_H
#define CUCO_CONFINE_H

#include <stddef.h>

#include "cuco/err.h"

typedef struct cuco_confine {
    int enabled;                     /* 0: run as today, unconfined */
    const char *const *writable;     /* folders left writable (NULL-terminated) or NULL */
    const char *const *hidden;       /* folders replaced by an empty tmpfs (the user's home,
                                        cuco's tree and workspace: what a candidate has no
                                        business reading), NULL-terminated, or NULL */
    const char *const *visible;      /* folders that stay readable where /tmp, /dev/shm or a
                                        hidden folder would hide them (the workload, the
                                        build's include folders), NULL-terminated, or NULL;
                                        elsewhere everything is readable anyway */
    int allow_network;               /* 1: keep the host's network (no new net namespace) */
    int host_tmp;                    /* 1: /tmp and /dev/shm stay the host's, writable, instead
                                        of fresh ones (ranks confined one by one, under
                                        srun, must share them) */
    const char *const *secret_names; /* extra variable names to drop (the configured key
                                        names), NULL-terminated, or NULL */
    double cpu_s;                    /* RLIMIT_CPU seconds; 0: CUCO_CONFINE_CPU_S */
    unsigned long long fsize_bytes;  /* RLIMIT_FSIZE; 0: CUCO_CONFINE_FSIZE */
    unsigned long long as_bytes;     /* RLIMIT_AS; 0: none (GPU runs must leave it 0) */
    long nproc;                      /* RLIMIT_NPROC; 0: CUCO_CONFINE_NPROC */
} cuco_confine;

#define CUCO_CONFINE_CPU_S (4.0 * 3600.0)
#define CUCO_CONFINE_FSIZE (8ULL << 30)
#define CUCO_CONFINE_NPROC 16384L
/* Address space of runs that need no GPU (CUDA reserves huge virtual ranges,
 * so GPU runs get none). */
#define CUCO_CONFINE_CPU_AS (32ULL << 30)

/* 1 when the environment entry "NAME=VALUE" may reach a confined command:
 * 0 for names ending in _API_KEY, _TOKEN, _SECRET or _PASSWORD (any case)
 * and for the names in extra_names (NULL-terminated, or NULL). */
int cuco_confine_env_keep(const char *entry, const char *const *extra_names);

/* Filters env (NULL-terminated) in place with cuco_confine_env_keep and
 * returns how many entries were dropped. Nothing is freed or copied. */
size_t cuco_confine_env_scrub(char **env, const char *const *extra_names);

/* What the child needs after fork, prepared before it. Opaque. */
typedef struct cuco_confine_plan cuco_confine_plan;

/* Prepares a plan for c (which must stay alive while the plan is used):
 * resolves the writable folders (a missing one is an error naming it),
 * adds the child's $TMPDIR from env when it is a folder, formats the uid and
 * gid maps. Returns 0 and *out (free with cuco_confine_plan_free). */
int cuco_confine_plan_new(const cuco_confine *c, char *const *env, cuco_confine_plan **out,
                          cuco_err *e);
void cuco_confine_plan_free(cuco_confine_plan *p);

/* How a failure in the child is reported back: the step that failed and its
 * errno, sent through report_fd as one write. */
typedef struct cuco_confine_failure {
    int stage; /* the caller's code for "confinement", copied in */
    int err;
    char step[120];
} cuco_confine_failure;

/* In the forked child (async-signal-safe): enters the namespaces and the
 * init described above, and returns in the process that must exec the
 * command, with rlimits set and every fd above 2 close-on-exec; the caller
 * changes to the command's folder then (after the mounts, so that it sees
 * them) and may report its own failures through report_fd, still open. The processes above it never
 * return: they exit with the command's status (a signal is re-raised). On a failure it writes a
 * cuco_confine_failure with `stage` to report_fd and _exit(127)s. */
void cuco_confine_enter(const cuco_confine_plan *p, int report_fd, int stage);

/* Marks every fd from 3 up close-on-exec (close_range, or fcntl up to the fd
 * limit on kernels without it). Async-signal-safe. */
void cuco_confine_cloexec_from(int lowest);

/* Runs `true` confined (no writable folder). Returns 0 when confinement
 * works here; otherwise negative, with *why (caller frees) saying which step
 * failed. *why is also set on success: a short description of what is in
 * force ("namespaces: pid, mount, net, user"). */
int cuco_confine_probe(char **why);

/* 1 unless the environment says CUCO_CONFINE=0 (or "no", "off", "false"). */
int cuco_confine_default_enabled(void);

#endif
