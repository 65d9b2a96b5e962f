/* proc.c: spawning external commands with captured output, a timeout and
 * process-group kill (contract in include/cuco/proc.h).
 *
 * The child is forked into its own process group and exec'd from an argv
 * array. Everything that allocates (the environment, buffers) is prepared
 * before fork(), because the child of a multi-threaded process may only call
 * async-signal-safe functions until exec. An exec failure is reported back
 * through a close-on-exec pipe: EOF on it means exec succeeded.
 *
 * The parent reads stdout and stderr with poll() so that a child filling one
 * pipe never blocks on the other, and watches the child through a pidfd
 * (falling back to a short poll tick where pidfds are missing) so that the
 * leader's exit is noticed even while a grandchild holds the pipes open.
 * No SIGCHLD handler is installed and only our own pid is waited for, which
 * keeps concurrent calls from different threads independent.
 */
#define _GNU_SOURCE
#include "cuco/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/confine.h"

extern char **environ;

#define PROC_DEFAULT_CAP ((size_t)1 << 20)
#define PROC_DEFAULT_GRACE_S 2.0
#define PROC_READ_CHUNK ((size_t)1 << 20)
/* Poll tick when something must be checked without an fd to wake us. */
#define PROC_TICK_MS 50
/* After SIGKILL, how long pipes held by processes outside the group may
 * stay open before we stop reading them. */
#define PROC_DRAIN_AFTER_KILL_S 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- capture: head kept as is, tail in a ring buffer ---- */

typedef struct capture {
    size_t head_cap;
    size_t tail_cap;
    cuco_buf head;
    char *ring;      /* tail_cap bytes once the head is full */
    size_t ring_pos; /* next write position */
    size_t ring_len; /* bytes held (<= tail_cap) */
    size_t total;
} capture;

static void capture_init(capture *c, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->head_cap = cap / 2;
    c->tail_cap = cap - c->head_cap;
}

static int capture_add(capture *c, const char *data, size_t n)
{
    c->total += n;
    if (c->head.len < c->head_cap) {
        size_t take = c->head_cap - c->head.len;
        if (take > n)
            take = n;
        if (cuco_buf_append(&c->head, data, take) != 0)
            return -1;
        data += take;
        n -= take;
    }
    if (n == 0 || c->tail_cap == 0)
        return 0;
    if (!c->ring) {
        c->ring = malloc(c->tail_cap);
        if (!c->ring)
            return -1;
    }
    if (n >= c->tail_cap) {
        memcpy(c->ring, data + (n - c->tail_cap), c->tail_cap);
        c->ring_pos = 0;
        c->ring_len = c->tail_cap;
        return 0;
    }
    size_t first = c->tail_cap - c->ring_pos;
    if (first > n)
        first = n;
    memcpy(c->ring + c->ring_pos, data, first);
    memcpy(c->ring, data + first, n - first);
    c->ring_pos = (c->ring_pos + n) % c->tail_cap;
    c->ring_len = c->ring_len + n > c->tail_cap ? c->tail_cap : c->ring_len + n;
    return 0;
}

/* Hands the captured text to the caller (malloc'd, NUL-terminated). */
static char *capture_finish(capture *c, size_t *len)
{
    cuco_buf out = CUCO_BUF_INIT;
    int rc = cuco_buf_append(&out, c->head.data ? c->head.data : "", c->head.len);
    size_t kept = c->head.len + c->ring_len;
    if (rc == 0 && c->total > kept)
        rc = cuco_buf_printf(&out, "%s[... %zu bytes omitted ...]\n",
                             (c->head.len && c->head.data[c->head.len - 1] != '\n') ? "\n" : "",
                             c->total - kept);
    if (rc == 0 && c->ring_len) {
        /* Oldest byte is at ring_pos once the ring has wrapped, else at 0. */
        size_t start = c->ring_len == c->tail_cap ? c->ring_pos : 0;
        size_t first = c->tail_cap - start;
        if (first > c->ring_len)
            first = c->ring_len;
        rc = cuco_buf_append(&out, c->ring + start, first);
        if (rc == 0)
            rc = cuco_buf_append(&out, c->ring, c->ring_len - first);
    }
    cuco_buf_free(&c->head);
    free(c->ring);
    c->ring = NULL;
    if (rc != 0) {
        cuco_buf_free(&out);
        *len = 0;
        return NULL;
    }
    *len = out.len;
    return cuco_buf_detach(&out);
}

static void capture_free(capture *c)
{
    cuco_buf_free(&c->head);
    free(c->ring);
    c->ring = NULL;
}

/* ---- environment for the child ---- */

/* Returns a NULL-terminated array of pointers into environ and env_set (the
 * strings are not copied; only the array is malloc'd), or NULL on error.
 * A confined child's environment is scrubbed of secrets. */
static char **build_env(const char *const *env_set, const cuco_confine *confine, cuco_err *e)
{
    static const char *const no_entries[] = {NULL};
    if (!env_set)
        env_set = no_entries;
    size_t n_env = 0, n_set = 0;
    while (environ && environ[n_env])
        n_env++;
    while (env_set[n_set])
        n_set++;
    char **env = calloc(n_env + n_set + 1, sizeof *env);
    if (!env) {
        cuco_err_set(e, CUCO_ENOMEM, "out of memory building the environment");
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++)
        env[n++] = environ[i];
    for (size_t i = 0; i < n_set; i++) {
        const char *eq = strchr(env_set[i], '=');
        if (!eq || eq == env_set[i]) {
            cuco_err_set(e, CUCO_EINVAL, "env_set entry '%s' is not NAME=VALUE", env_set[i]);
            free(env);
            return NULL;
        }
        size_t name_len = (size_t)(eq - env_set[i]) + 1; /* with '=' */
        size_t j = 0;
        while (j < n && strncmp(env[j], env_set[i], name_len) != 0)
            j++;
        env[j] = (char *)env_set[i];
        if (j == n)
            n++;
    }
    env[n] = NULL;
    if (confine)
        cuco_confine_env_scrub(env, confine->secret_names);
    return env;
}

/* ---- the child side (async-signal-safe calls only) ---- */

enum child_stage { STAGE_CHDIR = 1, STAGE_DUP = 2, STAGE_EXEC = 3, STAGE_CONFINE = 4 };

/* One write on the report pipe; confine.c writes the same struct. */
typedef cuco_confine_failure child_failure;

static void child_fail(int report_fd, int stage)
{
    child_failure f;
    memset(&f, 0, sizeof f);
    f.stage = stage;
    f.err = errno;
    ssize_t w = write(report_fd, &f, sizeof f);
    (void)w;
    _exit(127);
}

/* fd itself when above 2, else a close-on-exec copy above 2. */
static int fd_above_stdio(int fd)
{
    return fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static void child_run(const cuco_proc_opts *opts, const cuco_confine_plan *plan, char **env,
                      int in_fd, int out_fd, int err_fd, int report_fd, pid_t parent)
{
    setpgid(0, 0);
    /* Our own group no longer gets the terminal's Ctrl-C, so tie the child
     * to the caller's life instead: if the caller dies, the child is told
     * to stop. The calling thread blocks until the child is reaped, so the
     * thread-exit trigger of PDEATHSIG cannot fire early. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(127);
    /* The parent's signal mask and ignored signals would otherwise be
     * inherited through exec (an ignored SIGPIPE breaks pipelines). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);

    /* A caller running with a closed standard stream may have been given
     * fds 0-2 for our pipes: move everything above 2 first, so that the
     * dup2() calls below neither clobber a source nor leave FD_CLOEXEC set
     * on a target. */
    int merged = err_fd == out_fd;
    report_fd = fd_above_stdio(report_fd);
    in_fd = fd_above_stdio(in_fd);
    out_fd = fd_above_stdio(out_fd);
    err_fd = merged ? out_fd : fd_above_stdio(err_fd);
    if (report_fd < 0 || in_fd < 0 || out_fd < 0 || err_fd < 0)
        child_fail(report_fd >= 0 ? report_fd : 2, STAGE_DUP);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        child_fail(report_fd, STAGE_DUP);
    /* Nothing the caller holds open (the database, a listening socket)
     * reaches the program; the report pipe is close-on-exec already and
     * stays usable until exec. */
    cuco_confine_cloexec_from(3);
    if (plan)
        cuco_confine_enter(plan, report_fd, STAGE_CONFINE);
    if (opts->cwd && chdir(opts->cwd) != 0)
        child_fail(report_fd, STAGE_CHDIR);
    execvpe(opts->argv[0], (char *const *)opts->argv, env);
    child_fail(report_fd, STAGE_EXEC);
}

/* ---- the parent side ---- */

static int pidfd_for(pid_t pid)
{
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return (int)fd;
    }
#endif
    (void)pid;
    return -1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Copies a chunk to the caller's echo fd; a failed echo never fails the run. */
static void echo_write(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        data += w;
        n -= (size_t)w;
    }
}

/* Reads what is available on *fd into c (and echoes it when echo_fd >= 0); closes *fd at EOF or
 * error. */
static int drain_fd(int *fd, capture *c, char *chunk, int echo_fd)
{
    for (;;) {
        ssize_t n = read(*fd, chunk, PROC_READ_CHUNK);
        if (n > 0) {
            if (capture_add(c, chunk, (size_t)n) != 0)
                return -1;
            if (echo_fd >= 0)
                echo_write(echo_fd, chunk, (size_t)n);
            if ((size_t)n < PROC_READ_CHUNK)
                return 0;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        close_fd(fd);
        return 0;
    }
}

/* Kills whatever is left of the group, then reaps the leader. */
static void reap_group(pid_t pid, int *status)
{
    kill(-pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
}

static void record_status(cuco_proc_result *res, int status)
{
    if (WIFEXITED(status)) {
        res->exited = 1;
        res->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        res->signaled = 1;
        res->term_signal = WTERMSIG(status);
    }
}

static int make_pipe(int fds[2], cuco_err *e)
{
    if (pipe2(fds, O_CLOEXEC) != 0)
        return cuco_err_errno(e, "pipe");
    return 0;
}

/* One call of cuco_proc_run: what its steps share. */
typedef struct spawn {
    const cuco_proc_opts *opts;
    const char *prog;
    double grace, timeout;
    int in_fd, out_p[2], err_p[2], report_p[2], pidfd;
    char **env;
    cuco_confine_plan *plan;
    char *chunk;
    capture cap_out, cap_err;
    pid_t pid;
    double start;
    /* the watch: the leader is only reaped at the very end */
    int ended, status, term_sent, kill_sent;
    double term_at, kill_at;
} spawn;

/* stdin, the pipes, the environment, the confinement plan, the read
 * buffer: everything that allocates, before fork(). */
static int spawn_prepare(spawn *s, cuco_err *e)
{
    const cuco_proc_opts *opts = s->opts;
    const char *in_path = opts->stdin_path ? opts->stdin_path : "/dev/null";
    int rc;
    s->in_fd = open(in_path, O_RDONLY | O_CLOEXEC);
    if (s->in_fd < 0)
        return errno == ENOENT
                   ? cuco_err_set(e, CUCO_ENOTFOUND, "stdin file %s does not exist", in_path)
                   : cuco_err_errno(e, "cannot open stdin file %s", in_path);
    if ((rc = make_pipe(s->out_p, e)) != 0 || (rc = make_pipe(s->report_p, e)) != 0)
        return rc;
    if (!opts->merge_stderr && (rc = make_pipe(s->err_p, e)) != 0)
        return rc;
    /* A larger pipe means fewer wake-ups for chatty children; best effort. */
    fcntl(s->out_p[0], F_SETPIPE_SZ, (int)PROC_READ_CHUNK);
    if (s->err_p[0] >= 0)
        fcntl(s->err_p[0], F_SETPIPE_SZ, (int)PROC_READ_CHUNK);
    const cuco_confine *confine = opts->confine && opts->confine->enabled ? opts->confine : NULL;
    int own_env = opts->env_set || confine;
    s->env = own_env ? build_env(opts->env_set, confine, e) : NULL;
    if (own_env && !s->env)
        return e && e->code ? e->code : CUCO_ENOMEM;
    if (confine && (rc = cuco_confine_plan_new(confine, s->env, &s->plan, e)) != 0)
        return rc;
    s->chunk = malloc(PROC_READ_CHUNK);
    return s->chunk ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

/* The error of a child that reported a failure before exec. */
static int child_failure_error(const spawn *s, const child_failure *failure, cuco_err *e)
{
    errno = failure->err;
    if (failure->stage == STAGE_EXEC && (failure->err == ENOENT || failure->err == ENOTDIR))
        return cuco_err_set(e, CUCO_ENOTFOUND, "program not found: %s", s->prog);
    if (failure->stage == STAGE_EXEC)
        return cuco_err_errno(e, "cannot run %s", s->prog);
    if (failure->stage == STAGE_CHDIR && failure->err == ENOENT)
        return cuco_err_set(e, CUCO_ENOTFOUND, "working folder %s does not exist (running %s)",
                            s->opts->cwd, s->prog);
    if (failure->stage == STAGE_CHDIR)
        return cuco_err_errno(e, "cannot enter %s to run %s", s->opts->cwd, s->prog);
    if (failure->stage == STAGE_CONFINE)
        return cuco_err_set(e, CUCO_EUNSUPPORTED,
                            "confinement unavailable: %.*s: %s; run with --no-confine to run "
                            "candidates unconfined",
                            (int)sizeof failure->step, failure->step, strerror(failure->err));
    return cuco_err_errno(e, "cannot set up the standard streams of %s", s->prog);
}

/* Forks and execs the child in its own process group; waits for exec (EOF
 * on the report pipe) or the child's report of why it could not. */
static int spawn_start(spawn *s, cuco_err *e)
{
    const cuco_proc_opts *opts = s->opts;
    s->start = now_s();
    pid_t parent = getpid();
    s->pid = fork();
    if (s->pid < 0)
        return cuco_err_errno(e, "fork for %s", s->prog);
    if (s->pid == 0)
        child_run(opts, s->plan, s->env ? s->env : environ, s->in_fd, s->out_p[1],
                  opts->merge_stderr ? s->out_p[1] : s->err_p[1], s->report_p[1], parent);
    /* Both sides set the group, so that whichever runs first, a kill(-pid)
     * from here never reaches a group that does not exist yet. */
    setpgid(s->pid, s->pid);
    close_fd(&s->in_fd);
    close_fd(&s->out_p[1]);
    close_fd(&s->err_p[1]);
    close_fd(&s->report_p[1]);
    child_failure failure;
    ssize_t got;
    do
        got = read(s->report_p[0], &failure, sizeof failure);
    while (got < 0 && errno == EINTR);
    close_fd(&s->report_p[0]);
    if (got == (ssize_t)sizeof failure) {
        int status;
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
            ;
        return child_failure_error(s, &failure, e);
    }
    fcntl(s->out_p[0], F_SETFL, fcntl(s->out_p[0], F_GETFL) | O_NONBLOCK);
    if (s->err_p[0] >= 0)
        fcntl(s->err_p[0], F_SETFL, fcntl(s->err_p[0], F_GETFL) | O_NONBLOCK);
    s->pidfd = pidfd_for(s->pid);
    return 0;
}

/* Timeout, cancel and output limit: SIGTERM to the group, SIGKILL after the
 * grace. Returns 1 when the pipes have been drained long enough after
 * SIGKILL (whoever still holds them is outside the group: stop reading). */
static int enforce_limits(spawn *s, cuco_proc_result *res, double t)
{
    const cuco_proc_opts *opts = s->opts;
    int stop = 0;
    if (!s->term_sent && s->timeout > 0 && t - s->start >= s->timeout) {
        res->timed_out = 1;
        stop = 1;
    }
    if (!s->term_sent && opts->cancel && *opts->cancel) {
        res->cancelled = 1;
        stop = 1;
    }
    if (!s->term_sent && opts->output_limit &&
        s->cap_out.total + s->cap_err.total > opts->output_limit) {
        res->output_exceeded = 1;
        stop = 1;
    }
    if (stop) {
        kill(-s->pid, SIGTERM);
        s->term_sent = 1;
        s->term_at = t;
    }
    if (s->term_sent && !s->kill_sent && t - s->term_at >= s->grace) {
        kill(-s->pid, SIGKILL);
        s->kill_sent = 1;
        s->kill_at = t;
    }
    if (s->kill_sent && t - s->kill_at >= PROC_DRAIN_AFTER_KILL_S) {
        close_fd(&s->out_p[0]);
        close_fd(&s->err_p[0]);
        return 1;
    }
    return 0;
}

/* How long poll may sleep: until the next moment something must happen
 * without an fd waking us (-1: none). */
static int next_wait_ms(const spawn *s, double t)
{
    int has_wake = 1;
    double wake = 0;
    if (!s->term_sent && s->timeout > 0)
        wake = s->start + s->timeout - t;
    else if (s->term_sent && !s->kill_sent)
        wake = s->term_at + s->grace - t;
    else if (s->kill_sent)
        wake = s->kill_at + PROC_DRAIN_AFTER_KILL_S - t;
    else
        has_wake = 0;
    if (wake < 0)
        wake = 0;
    if (wake > 60.0)
        wake = 60.0; /* recomputed on the next turn; keeps the int small */
    int wait_ms = has_wake ? (int)(wake * 1000.0) + 1 : -1;
    if ((!s->ended && s->pidfd < 0) || (s->opts->cancel && !s->term_sent))
        wait_ms = (wait_ms < 0 || wait_ms > PROC_TICK_MS) ? PROC_TICK_MS : wait_ms;
    return wait_ms;
}

/* Waits up to wait_ms for output or the leader's exit and reads what came. */
static int poll_outputs(spawn *s, int wait_ms, cuco_err *e)
{
    struct pollfd pfd[3];
    int np = 0, i_out = -1, i_err = -1;
    if (s->out_p[0] >= 0) {
        i_out = np;
        pfd[np++] = (struct pollfd){.fd = s->out_p[0], .events = POLLIN};
    }
    if (s->err_p[0] >= 0) {
        i_err = np;
        pfd[np++] = (struct pollfd){.fd = s->err_p[0], .events = POLLIN};
    }
    if (!s->ended && s->pidfd >= 0)
        pfd[np++] = (struct pollfd){.fd = s->pidfd, .events = POLLIN};
    if (np == 0) {
        /* Pipes closed, leader alive and no pidfd: sleep one tick. */
        struct timespec ts = {0, (long)(wait_ms < 0 ? PROC_TICK_MS : wait_ms) * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    if (poll(pfd, (nfds_t)np, wait_ms) < 0)
        return errno == EINTR ? 0 : cuco_err_errno(e, "poll on the output of %s", s->prog);
    int echo = s->opts->echo;
    if (i_out >= 0 && pfd[i_out].revents &&
        drain_fd(&s->out_p[0], &s->cap_out, s->chunk, echo ? 1 : -1) != 0)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory capturing the output of %s", s->prog);
    if (i_err >= 0 && pfd[i_err].revents &&
        drain_fd(&s->err_p[0], &s->cap_err, s->chunk, echo ? 2 : -1) != 0)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory capturing the errors of %s", s->prog);
    return 0;
}

/* Reads the child's output until the leader has ended and the pipes are
 * closed, enforcing the limits. While the leader is a zombie its pid, which
 * is also the group id, cannot be reused, so every kill(-pid) reaches our
 * group and nobody else's. */
static int spawn_watch(spawn *s, cuco_proc_result *res, cuco_err *e)
{
    for (;;) {
        if (!s->ended) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == s->pid) {
                s->ended = 1;
                close_fd(&s->pidfd); /* stays readable from now on */
            }
        }
        if (s->ended && s->out_p[0] < 0 && s->err_p[0] < 0)
            return 0;
        double t = now_s();
        if (enforce_limits(s, res, t))
            return 0;
        int rc = poll_outputs(s, next_wait_ms(s, t), e);
        if (rc != 0) {
            reap_group(s->pid, &s->status);
            return rc;
        }
    }
}

/* The exit status and the captured output, into res. */
static int spawn_collect(spawn *s, cuco_proc_result *res, cuco_err *e)
{
    /* Leftovers of the group (a grandchild that let go of the pipes) must
     * not outlive the call. */
    reap_group(s->pid, &s->status);
    record_status(res, s->status);
    res->wall_s = now_s() - s->start;
    res->out = capture_finish(&s->cap_out, &res->out_len);
    res->out_total = s->cap_out.total;
    res->err = capture_finish(&s->cap_err, &res->err_len);
    res->err_total = s->cap_err.total;
    if (res->out && res->err)
        return 0;
    cuco_proc_result_free(res);
    return cuco_err_set(e, CUCO_ENOMEM, "out of memory capturing the output of %s", s->prog);
}

static void spawn_free(spawn *s)
{
    close_fd(&s->in_fd);
    for (int i = 0; i < 2; i++) {
        close_fd(&s->out_p[i]);
        close_fd(&s->err_p[i]);
        close_fd(&s->report_p[i]);
    }
    close_fd(&s->pidfd);
    capture_free(&s->cap_out);
    capture_free(&s->cap_err);
    free(s->env);
    cuco_confine_plan_free(s->plan);
    free(s->chunk);
}

int cuco_proc_run(const cuco_proc_opts *opts, cuco_proc_result *res, cuco_err *e)
{
    memset(res, 0, sizeof *res);
    if (!opts || !opts->argv || !opts->argv[0] || !opts->argv[0][0])
        return cuco_err_set(e, CUCO_EINVAL, "cuco_proc_run: empty argv");
    spawn s;
    memset(&s, 0, sizeof s);
    s.opts = opts;
    s.prog = opts->argv[0];
    s.grace = opts->kill_grace_s > 0 ? opts->kill_grace_s : PROC_DEFAULT_GRACE_S;
    s.timeout = opts->timeout_s > 0 ? opts->timeout_s : 0;
    s.in_fd = s.pidfd = -1;
    for (int i = 0; i < 2; i++)
        s.out_p[i] = s.err_p[i] = s.report_p[i] = -1;
    size_t cap = opts->capture_cap ? opts->capture_cap : PROC_DEFAULT_CAP;
    capture_init(&s.cap_out, cap);
    capture_init(&s.cap_err, cap);
    int rc = spawn_prepare(&s, e);
    if (rc == 0)
        rc = spawn_start(&s, e);
    if (rc == 0) {
        res->timeout_s = s.timeout;
        res->output_limit = opts->output_limit;
        rc = spawn_watch(&s, res, e);
    }
    if (rc == 0)
        rc = spawn_collect(&s, res, e);
    spawn_free(&s);
    if (rc != 0)
        memset(res, 0, sizeof *res);
    return rc;
}

void cuco_proc_result_free(cuco_proc_result *res)
{
    if (!res)
        return;
    free(res->out);
    free(res->err);
    memset(res, 0, sizeof *res);
}

static const char *signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
        {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

char *cuco_proc_describe(const cuco_proc_result *res)
{
    if (res->timed_out)
        return cuco_sprintf("timed out after %.1f s (process group killed)", res->timeout_s);
    if (res->cancelled)
        return cuco_strdup("cancelled (process group killed)");
    if (res->output_exceeded)
        return cuco_sprintf("wrote more than %llu MiB of output (process group killed)",
                            res->output_limit >> 20);
    if (res->signaled) {
        const char *name = signal_name(res->term_signal);
        if (name)
            return cuco_sprintf("killed by %s (signal %d)", name, res->term_signal);
        return cuco_sprintf("killed by signal %d", res->term_signal);
    }
    if (res->exited)
        return cuco_sprintf("exit %d", res->exit_code);
    return cuco_strdup("not run");
}

/* Characters that never need quoting in a POSIX shell word. */
static int shell_safe(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_@%+=:,./-", c) != NULL;
}

char *cuco_proc_argv_string(const char *const *argv)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (size_t i = 0; argv && argv[i]; i++) {
        const char *a = argv[i];
        if (i)
            cuco_buf_putc(&b, ' ');
        int safe = *a != '\0';
        for (const char *p = a; *p && safe; p++)
            safe = shell_safe(*p);
        if (safe) {
            cuco_buf_puts(&b, a);
            continue;
        }
        cuco_buf_putc(&b, '\'');
        for (const char *p = a; *p; p++) {
            if (*p == '\'')
                cuco_buf_puts(&b, "'\\''");
            else
                cuco_buf_putc(&b, *p);
        }
        cuco_buf_putc(&b, '\'');
    }
    return cuco_buf_detach(&b);
}
