/* slurm.c: the Slurm launcher. One run is one batch job:
 *
 *   write BASE.sh  (cd, exports, mpirun/srun ARGV, then the exit status
 *                   written to BASE.rc by rename, so it is whole or absent)
 *   sbatch --parsable --output BASE.out --error BASE.err --ntasks R
 *          --time (timeout + grace) --no-requeue [--gres gpu:R] BASE.sh
 *   wait: BASE.rc is looked for often (a file check costs the controller
 *         nothing); squeue is asked at an interval that starts at poll_s and
 *         grows x1.5 up to poll_max_s, sacct once squeue no longer knows the job
 *   end:  BASE.rc holds the program's exit status -> the program's outcome;
 *         the job ended without it (NODE_FAIL, PREEMPTED, BOOT_FAIL, cancelled
 *         by someone else, vanished) or its node stopped responding while it
 *         ran -> infrastructure failure, submitted again up to `retries` times
 *   timeout: the run's own clock starts when the job starts running (queue
 *         time is not the program's); when it passes, scancel.
 *
 * BASE lies in the run's folder, which must be on a file system the compute
 * nodes share with this host. Jobs are never requeued by Slurm (cuco decides
 * about retries itself, so that a failure is recorded once). */
#include "launch_int.h"

#include "cuco/fs.h"
#include "cuco/log.h"
#include "cuco/workload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct slurm_state {
    char *partition;
    char *gres; /* "gpu", or a typed "gpu:h100" */
    cuco_strlist sbatch_args;
    int retries;
    double poll_s, poll_max_s, grace_s;
    int use_srun;
    pthread_mutex_t mu;
    unsigned long counter; /* names the job files of this process */
} slurm_state;

/* How one submission ended. */
typedef struct attempt {
    char *job_id;
    int infra;          /* 1: lost to the infrastructure */
    char *infra_reason; /* owned */
    int timed_out;      /* cuco's timeout fired (or Slurm's time limit) */
    int have_rc;
    int rc;
    char *state;  /* last Slurm state seen (owned) */
    double run_s; /* from RUNNING seen to the end */
} attempt;

static void attempt_free(attempt *a)
{
    free(a->job_id);
    free(a->infra_reason);
    free(a->state);
    memset(a, 0, sizeof *a);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Runs a Slurm client command; returns 0 and fills pr, or negative (not
 * found). Short timeout: a controller that does not answer is retried later. */
static int slurm_cmd(const char *const *argv, cuco_proc_result *pr, cuco_err *e)
{
    cuco_proc_opts po = {.argv = argv, .timeout_s = 30};
    return cuco_proc_run(&po, pr, e);
}

static int cmd_ok(const cuco_proc_result *pr)
{
    return pr->exited && pr->exit_code == 0;
}

/* The cuco binary's own path, which the compute nodes must see too (a shared
 * file system, as for the run's folder). Caller frees. */
static char *self_exe(cuco_err *e)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        cuco_err_errno(e, "cannot find the cuco binary (/proc/self/exe) for confine-exec");
        return NULL;
    }
    path[n] = '\0';
    return cuco_strdup(path);
}

/* Appends `CUCO confine-exec OPTIONS --`: the batch script applies the same
 * confinement as a local run. Under srun each task is confined on its own,
 * so the tasks keep the host's network (srun talks to slurmd) and share the
 * node's /tmp and /dev/shm (NCCL's and MPI's shared memory). */
static int push_confine_exec(cuco_strlist *cmd, const cuco_confine *c, int per_task, cuco_err *e)
{
    char *exe = self_exe(e);
    if (!exe)
        return CUCO_ESYS;
    cuco_strlist_push(cmd, exe);
    cuco_strlist_push(cmd, "confine-exec");
    free(exe);
    for (int i = 0; c->writable && c->writable[i]; i++) {
        cuco_strlist_push(cmd, "--write");
        cuco_strlist_push(cmd, c->writable[i]);
    }
    for (int i = 0; c->secret_names && c->secret_names[i]; i++) {
        cuco_strlist_push(cmd, "--secret");
        cuco_strlist_push(cmd, c->secret_names[i]);
    }
    if (c->allow_network || per_task)
        cuco_strlist_push(cmd, "--net");
    if (c->host_tmp || per_task)
        cuco_strlist_push(cmd, "--host-tmp");
    if (c->as_bytes) {
        char *as = cuco_sprintf("%llu", c->as_bytes);
        cuco_strlist_push(cmd, "--as");
        cuco_strlist_push(cmd, as);
        free(as);
    }
    cuco_strlist_push(cmd, "--");
    return 0;
}

static int write_script(const slurm_state *s, const cuco_launch_job *job, const char *path,
                        const char *rc_path, cuco_err *e)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "#!/bin/sh\n# cuco: one run of %s, submitted with sbatch\n",
                    job->name ? job->name : "a program");
    for (int i = 0; job->env_set && job->env_set[i]; i++) {
        char *q = cuco_launch_shell_quote(job->env_set[i]);
        cuco_buf_printf(&b, "export %s\n", q);
        free(q);
    }
    char *cwd = cuco_launch_shell_quote(job->cwd ? job->cwd : ".");
    cuco_buf_printf(&b, "cd %s || exit 97\n", cwd);
    free(cwd);
    cuco_strlist cmd = {0};
    char *np = cuco_sprintf("%d", job->ranks > 0 ? job->ranks : 1);
    int confined = job->confine && job->confine->enabled;
    if (job->mpi && s->use_srun) {
        char *nt = cuco_sprintf("--ntasks=%s", np);
        cuco_strlist_push(&cmd, "srun");
        cuco_strlist_push(&cmd, nt);
        free(nt);
        if (confined && push_confine_exec(&cmd, job->confine, 1, e) != 0)
            goto fail;
    } else {
        if (confined && push_confine_exec(&cmd, job->confine, 0, e) != 0)
            goto fail;
        if (job->mpi) {
            cuco_strlist_push(&cmd, "mpirun");
            cuco_strlist_push(&cmd, "-np");
            cuco_strlist_push(&cmd, np);
            if (geteuid() == 0)
                cuco_strlist_push(&cmd, "--allow-run-as-root");
            cuco_strlist_push(&cmd, "--bind-to");
            cuco_strlist_push(&cmd, "none");
            for (int i = 0; job->mpi_args && job->mpi_args[i]; i++)
                cuco_strlist_push(&cmd, job->mpi_args[i]);
        }
    }
    free(np);
    for (int i = 0; job->argv[i]; i++)
        cuco_strlist_push(&cmd, job->argv[i]);
    for (size_t i = 0; i < cmd.n; i++) {
        char *q = cuco_launch_shell_quote(cmd.items[i]);
        cuco_buf_printf(&b, "%s%s", i ? " " : "", q);
        free(q);
    }
    cuco_strlist_free(&cmd);
    char *rcq = cuco_launch_shell_quote(rc_path);
    char *tmp = cuco_sprintf("%s.tmp", rc_path);
    char *tmpq = cuco_launch_shell_quote(tmp);
    cuco_buf_printf(&b, "\nrc=$?\necho \"$rc\" > %s && mv %s %s\nexit \"$rc\"\n", tmpq, tmpq, rcq);
    free(rcq);
    free(tmp);
    free(tmpq);
    int rc = cuco_fs_write(path, b.data, b.len, e);
    cuco_buf_free(&b);
    return rc;
fail:
    free(np);
    cuco_strlist_free(&cmd);
    cuco_buf_free(&b);
    return e && e->code ? e->code : CUCO_ESYS;
}

/* "--time" in minutes:seconds, rounded up, at least one minute. */
static char *time_limit(double timeout_s, double grace_s)
{
    double t = timeout_s > 0 ? timeout_s + grace_s : 24 * 3600;
    long secs = (long)t + 1;
    if (secs < 60)
        secs = 60;
    return cuco_sprintf("--time=%ld:%02ld", secs / 60, secs % 60);
}

/* Submits; *job_id is the id (caller frees). Returns 0; on a failed sbatch
 * (controller down, refused) 0 with *job_id NULL and *why set (caller frees);
 * negative when sbatch cannot be started. */
static int submit(const slurm_state *s, const cuco_launch_job *job, const char *script,
                  const char *out_path, const char *err_path, char **job_id, char **why,
                  cuco_err *e)
{
    *job_id = NULL;
    *why = NULL;
    cuco_strlist argv = {0};
    char *name = cuco_sprintf("--job-name=cuco-%s", job->name ? job->name : "run");
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '/')
            *p = '_';
    char *out = cuco_sprintf("--output=%s", out_path), *err = cuco_sprintf("--error=%s", err_path);
    char *ntasks = cuco_sprintf("--ntasks=%d", job->ranks > 0 ? job->ranks : 1);
    char *chdir = cuco_sprintf("--chdir=%s", job->cwd ? job->cwd : ".");
    char *tl = time_limit(job->timeout_s, s->grace_s);
    char *gres =
        job->gpu ? cuco_sprintf("--gres=%s:%d", s->gres, job->ranks > 0 ? job->ranks : 1) : NULL;
    char *part = s->partition ? cuco_sprintf("--partition=%s", s->partition) : NULL;
    const char *fixed[] = {"sbatch", "--parsable", name, out,           err,
                           ntasks,   chdir,        tl,   "--no-requeue"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        cuco_strlist_push(&argv, fixed[i]);
    if (gres)
        cuco_strlist_push(&argv, gres);
    if (part)
        cuco_strlist_push(&argv, part);
    for (size_t i = 0; i < s->sbatch_args.n; i++)
        cuco_strlist_push(&argv, s->sbatch_args.items[i]);
    cuco_strlist_push(&argv, script);
    const char **v = calloc(argv.n + 1, sizeof *v);
    for (size_t i = 0; v && i < argv.n; i++)
        v[i] = argv.items[i];
    cuco_proc_result pr;
    int rc = v ? slurm_cmd(v, &pr, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(v);
    if (!rc) {
        if (cmd_ok(&pr) && pr.out && *pr.out) {
            char *id = cuco_strdup(pr.out);
            id[strcspn(id, ";\n\r ")] = '\0';
            if (*id)
                *job_id = id;
            else
                free(id);
        }
        if (!*job_id) {
            char *how = cuco_proc_describe(&pr);
            *why = cuco_sprintf("sbatch %s: %s", how, cuco_str_trim(pr.err ? pr.err : ""));
            free(how);
        }
        cuco_proc_result_free(&pr);
    }
    cuco_strlist_free(&argv);
    free(name);
    free(out);
    free(err);
    free(ntasks);
    free(chdir);
    free(tl);
    free(gres);
    free(part);
    return rc;
}

/* The job's state ("RUNNING", ...) and node list from squeue, or from sacct
 * once squeue no longer knows it. Returns 1 known, 0 the job is unknown to
 * both, -1 the controller did not answer. Caller frees *state, *nodes. */
static int job_state(const char *job_id, char **state, char **nodes)
{
    *state = *nodes = NULL;
    const char *sq[] = {"squeue", "-h", "-j", job_id, "--states=all", "-o", "%T|%N", NULL};
    cuco_proc_result pr;
    if (slurm_cmd(sq, &pr, NULL) != 0)
        return -1;
    int known = -1;
    if (cmd_ok(&pr) && pr.out && *cuco_str_trim(pr.out)) {
        char *bar = strchr(pr.out, '|');
        if (bar) {
            *bar = '\0';
            *nodes = cuco_strdup(cuco_str_trim(bar + 1));
        }
        *state = cuco_strdup(cuco_str_trim(pr.out));
        known = 1;
    } else if (cmd_ok(&pr) || (pr.err && strstr(pr.err, "Invalid job id"))) {
        known = 0;
    }
    cuco_proc_result_free(&pr);
    if (known != 0)
        return known;
    const char *sa[] = {"sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,NodeList", NULL};
    if (slurm_cmd(sa, &pr, NULL) == 0 && cmd_ok(&pr) && pr.out && *cuco_str_trim(pr.out)) {
        char *bar = strchr(pr.out, '|');
        if (bar) {
            *bar = '\0';
            *nodes = cuco_strdup(cuco_str_trim(bar + 1));
        }
        /* "CANCELLED by 0" -> "CANCELLED" */
        pr.out[strcspn(pr.out, " \n")] = '\0';
        *state = cuco_strdup(pr.out);
        known = 1;
    }
    if (pr.out || pr.err)
        cuco_proc_result_free(&pr);
    return known;
}

/* 1 when a node of the list is down or not responding (sinfo marks those
 * with a trailing '*'); 0 otherwise or when sinfo cannot tell. */
static int nodes_down(const char *nodes, char **desc)
{
    *desc = NULL;
    if (!nodes || !*nodes || !strcmp(nodes, "(null)"))
        return 0;
    const char *argv[] = {"sinfo", "-h", "-N", "-n", nodes, "-o", "%N %T", NULL};
    cuco_proc_result pr;
    if (slurm_cmd(argv, &pr, NULL) != 0)
        return 0;
    int down = 0;
    if (cmd_ok(&pr))
        for (char *p = pr.out; p && *p && !down;) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            char *st = strchr(p, ' ');
            if (st && (strchr(st, '*') || strstr(st, "down") || strstr(st, "fail"))) {
                down = 1;
                *desc = cuco_strdup(cuco_str_trim(p));
            }
            p = nl ? nl + 1 : p + strlen(p);
        }
    cuco_proc_result_free(&pr);
    return down;
}

static void cancel_job(const char *job_id)
{
    const char *argv[] = {"scancel", job_id, NULL};
    cuco_proc_result pr;
    if (slurm_cmd(argv, &pr, NULL) == 0)
        cuco_proc_result_free(&pr);
}

static int is_terminal(const char *st)
{
    static const char *const done[] = {"COMPLETED", "FAILED",       "CANCELLED", "TIMEOUT",
                                       "NODE_FAIL", "PREEMPTED",    "BOOT_FAIL", "OUT_OF_MEMORY",
                                       "DEADLINE",  "SPECIAL_EXIT", "REVOKED"};
    for (size_t i = 0; i < sizeof done / sizeof done[0]; i++)
        if (!strcmp(st, done[i]))
            return 1;
    return 0;
}

static int read_rc(const char *rc_path, int *rc)
{
    char *text = NULL;
    if (!cuco_fs_exists(rc_path) || cuco_fs_read(rc_path, &text, NULL, NULL) != 0)
        return 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    int ok = end != text;
    free(text);
    if (ok)
        *rc = (int)v;
    return ok;
}

/* Waits for a submitted job; fills a. */
static void wait_job(const slurm_state *s, const cuco_launch_job *job, const char *rc_path,
                     attempt *a)
{
    double submitted = now_s(), poll = s->poll_s, next_poll = submitted + poll, run_start = 0;
    double silent_since = 0; /* controller unreachable since */
    int not_responding = 0;
    const char *label = job->name ? job->name : "run";
    for (;;) {
        double t = now_s();
        if (read_rc(rc_path, &a->rc)) {
            a->have_rc = 1;
            break;
        }
        if (run_start > 0 && job->timeout_s > 0 && t - run_start > job->timeout_s) {
            launch_progress(job, "%s: job %s timed out after %.1f s: scancel", label, a->job_id,
                            t - run_start);
            cancel_job(a->job_id);
            a->timed_out = 1;
            break;
        }
        if (t < next_poll) {
            sleep_s(0.1);
            continue;
        }
        char *state = NULL, *nodes = NULL;
        int known = job_state(a->job_id, &state, &nodes);
        if (known < 0) {
            if (silent_since == 0)
                silent_since = t;
            double limit = (job->timeout_s > 0 ? job->timeout_s : 600) + s->grace_s;
            if (t - silent_since > limit) {
                a->infra = 1;
                a->infra_reason = cuco_sprintf("the Slurm controller did not answer for %.0f s",
                                               t - silent_since);
                cancel_job(a->job_id);
                break;
            }
        } else if (known == 0) {
            /* Gone from squeue and sacct: read the rc file once more (the job
             * may have ended between the two looks). */
            if (read_rc(rc_path, &a->rc)) {
                a->have_rc = 1;
            } else {
                a->infra = 1;
                a->infra_reason = cuco_sprintf(
                    "job %s is no longer known to Slurm and left no exit status", a->job_id);
            }
            break;
        } else {
            silent_since = 0;
            free(a->state);
            a->state = cuco_strdup(state);
            if (!strcmp(state, "RUNNING") || !strcmp(state, "COMPLETING")) {
                if (run_start == 0) {
                    /* A new phase: look again soon, then back off anew. */
                    run_start = t;
                    poll = s->poll_s / 1.5;
                }
                char *desc = NULL;
                not_responding = nodes_down(nodes, &desc) ? not_responding + 1 : 0;
                if (not_responding >= 2) {
                    a->infra = 1;
                    a->infra_reason =
                        cuco_sprintf("node %s of job %s went down while it ran", desc, a->job_id);
                    cancel_job(a->job_id);
                }
                free(desc);
            } else if (is_terminal(state) && !read_rc(rc_path, &a->rc)) {
                if (!strcmp(state, "TIMEOUT")) {
                    a->timed_out = 1;
                } else if (!strcmp(state, "OUT_OF_MEMORY")) {
                    a->have_rc = 1;
                    a->rc = 137;
                } else {
                    a->infra = 1;
                    a->infra_reason = cuco_sprintf("job %s ended %s without the program's exit "
                                                   "status",
                                                   a->job_id, state);
                }
            } else if (is_terminal(state)) {
                a->have_rc = 1;
            }
        }
        int stop = a->infra || a->timed_out || a->have_rc;
        free(state);
        free(nodes);
        if (stop)
            break;
        poll *= 1.5;
        if (poll > s->poll_max_s)
            poll = s->poll_max_s;
        next_poll = now_s() + poll;
    }
    if (a->have_rc == 0 && read_rc(rc_path, &a->rc) && !a->infra)
        a->have_rc = 1;
    /* A short job may end before it was ever seen running: then the time
     * since submission (queue time included) is the best bound we have. */
    a->run_s = now_s() - (run_start > 0 ? run_start : submitted);
}

static char *read_file_or_empty(const char *path, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    if (cuco_fs_read(path, &text, &n, NULL) != 0)
        text = cuco_strdup(""), n = 0;
    *len = n;
    return text;
}

static int slurm_run(const cuco_launcher *l, const cuco_launch_job *job, cuco_launch_result *r,
                     cuco_err *e)
{
    slurm_state *s = l->impl;
    const char *label = job->name ? job->name : "run";
    char *dir = cuco_path_abs(job->cwd ? job->cwd : ".");
    if (!dir)
        return cuco_err_set(e, CUCO_ENOTFOUND, "slurm: run folder %s does not exist",
                            job->cwd ? job->cwd : ".");
    int rc = 0, n_infra = 0;
    for (int attempt_no = 0; attempt_no <= s->retries; attempt_no++) {
        pthread_mutex_lock(&s->mu);
        unsigned long id = ++s->counter;
        pthread_mutex_unlock(&s->mu);
        char *base = cuco_sprintf("%s/cuco-slurm-%ld-%lu", dir, (long)getpid(), id);
        char *script = cuco_sprintf("%s.sh", base), *out = cuco_sprintf("%s.out", base);
        char *err = cuco_sprintf("%s.err", base), *rcp = cuco_sprintf("%s.rc", base);
        free(base);
        attempt a = {0};
        char *why = NULL;
        rc = write_script(s, job, script, rcp, e);
        if (!rc)
            rc = submit(s, job, script, out, err, &a.job_id, &why, e);
        if (rc) {
            free(script), free(out), free(err), free(rcp);
            attempt_free(&a);
            free(why);
            /* A later attempt that cannot even start keeps the last outcome. */
            if (attempt_no > 0) {
                cuco_err_clear(e);
                rc = 0;
            }
            break;
        }
        if (!a.job_id) {
            a.infra = 1;
            a.infra_reason = why;
            why = NULL;
        } else {
            launch_progress(job, "%s: submitted as Slurm job %s (attempt %d)", label, a.job_id,
                            attempt_no + 1);
            wait_job(s, job, rcp, &a);
        }
        free(why);
        cuco_launch_result_free(r);
        r->attempts = attempt_no + 1;
        r->job_id = cuco_strdup(a.job_id);
        r->proc.timeout_s = job->timeout_s;
        r->proc.wall_s = a.run_s;
        size_t n;
        r->proc.out = read_file_or_empty(out, &n);
        r->proc.out_len = r->proc.out_total = n;
        r->proc.err = read_file_or_empty(err, &n);
        r->proc.err_len = r->proc.err_total = n;
        if (a.timed_out) {
            r->proc.timed_out = 1;
            r->proc.signaled = 1;
            r->proc.term_signal = 9;
        } else if (a.have_rc) {
            r->proc.exited = 1;
            r->proc.exit_code = a.rc;
        }
        int infra = a.infra;
        n_infra += infra;
        r->infra_failures = n_infra;
        if (infra) {
            r->infra_failure = 1;
            r->infra_reason = cuco_strdup(a.infra_reason);
        }
        free(script), free(out), free(err), free(rcp);
        attempt_free(&a);
        if (!infra)
            break;
        if (attempt_no < s->retries) {
            launch_progress(job, "%s: infrastructure failure (%s); submitting again (%d of %d)",
                            label, r->infra_reason, attempt_no + 1, s->retries);
            cuco_warn("slurm: %s: infrastructure failure (%s); submitting again", label,
                      r->infra_reason);
            sleep_s(s->poll_s);
        } else {
            launch_progress(job, "%s: infrastructure failure (%s); no retries left", label,
                            r->infra_reason);
        }
    }
    free(dir);
    return rc;
}

static void slurm_destroy(cuco_launcher *l)
{
    slurm_state *s = l->impl;
    if (!s)
        return;
    free(s->partition);
    free(s->gres);
    cuco_strlist_free(&s->sbatch_args);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int cuco_launcher_slurm_new(const cuco_slurm_opts *o, cuco_launcher **out, cuco_err *e)
{
    *out = NULL;
    cuco_slurm_opts d = {.retries = -1};
    if (!o)
        o = &d;
    static const char *const tools[] = {"sbatch", "squeue", "scancel"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        char *path = cuco_which(tools[i]);
        if (!path)
            return cuco_err_set(e, CUCO_ENOTFOUND,
                                "launcher slurm: %s is not in PATH (is this a Slurm login node?)",
                                tools[i]);
        free(path);
    }
    cuco_launcher *l = calloc(1, sizeof *l);
    slurm_state *s = calloc(1, sizeof *s);
    if (!l || !s) {
        free(l);
        free(s);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    s->partition = cuco_strdup(o->partition);
    s->gres = cuco_strdup(o->gres && *o->gres ? o->gres : "gpu");
    for (int i = 0; o->sbatch_args && o->sbatch_args[i]; i++)
        cuco_strlist_push(&s->sbatch_args, o->sbatch_args[i]);
    s->retries = o->retries < 0 ? 2 : o->retries;
    s->poll_s = o->poll_s > 0 ? o->poll_s : 1.0;
    s->poll_max_s = o->poll_max_s > 0 ? o->poll_max_s : 15.0;
    if (s->poll_max_s < s->poll_s)
        s->poll_max_s = s->poll_s;
    s->grace_s = o->grace_s > 0 ? o->grace_s : 60.0;
    s->use_srun = o->use_srun;
    l->name = "slurm";
    l->slots = 0;
    l->run = slurm_run;
    l->destroy = slurm_destroy;
    l->impl = s;
    *out = l;
    return 0;
}
