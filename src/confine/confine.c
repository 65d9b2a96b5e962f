/* confine.c: namespaces, read-only mounts, rlimits and a scrubbed
 * environment for the commands an evaluation runs (contract in
 * include/cuco/confine.h).
 *
 * The process chain after proc.c's fork:
 *   relay  (in cuco's PID namespace, the process proc.c waits for) unshares
 *          the namespaces, forks init, forwards SIGTERM to it, and relays its
 *          status: exit code, or the command's signal re-raised;
 *   init   (PID 1 of the new namespace) sets up the mounts and loopback,
 *          forks the command, reaps orphans, and when the command exits
 *          counts what is left and exits; the kernel then kills the rest;
 *   command  rlimits, cwd, then returns to the caller, which execs.
 * Everything after fork is async-signal-safe: no malloc, no stdio; what
 * needs allocating is in the plan, made before fork.
 */
#define _GNU_SOURCE
#include "cuco/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuco/buf.h"

extern char **environ;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* After SIGTERM, how long the command gets before the relay gives up on it
 * (its death takes init and so the whole namespace with it). */
#define CONFINE_TERM_GRACE_S 5

/* Mount flags a read-only or writable remount must keep (a user namespace
 * may not drop them, and dropping them would loosen the host's choice). */
#define CONFINE_KEEP_FLAGS                                                                         \
    (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)

/* ---- the environment ---- */

static const char *const secret_suffixes[] = {"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"};

int cuco_confine_env_keep(const char *entry, const char *const *extra_names)
{
    const char *eq = strchr(entry, '=');
    size_t name_len = eq ? (size_t)(eq - entry) : strlen(entry);
    for (size_t i = 0; i < sizeof secret_suffixes / sizeof secret_suffixes[0]; i++) {
        size_t n = strlen(secret_suffixes[i]);
        if (name_len >= n && strncasecmp(entry + name_len - n, secret_suffixes[i], n) == 0)
            return 0;
    }
    for (size_t i = 0; extra_names && extra_names[i]; i++)
        if (strlen(extra_names[i]) == name_len && strncmp(entry, extra_names[i], name_len) == 0)
            return 0;
    return 1;
}

size_t cuco_confine_env_scrub(char **env, const char *const *extra_names)
{
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; env[i]; i++) {
        if (cuco_confine_env_keep(env[i], extra_names))
            env[kept++] = env[i];
        else
            dropped++;
    }
    env[kept] = NULL;
    return dropped;
}

/* ---- the plan (before fork) ---- */

struct cuco_confine_plan {
    const cuco_confine *c;
    char **writable; /* resolved, NULL-terminated */
    int n_writable;
    char **visible; /* resolved folders under /tmp, /dev/shm or a hidden one: bound back
                       read-only */
    int n_visible;
    char **hidden; /* resolved folders an empty tmpfs covers */
    int n_hidden;
    int need_userns;
    char uid_map[64];
    char gid_map[64];
    struct rlimit cpu, fsize, nproc, as;
};

void cuco_confine_plan_free(cuco_confine_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_writable; i++)
        free(p->writable[i]);
    free(p->writable);
    for (int i = 0; i < p->n_visible; i++)
        free(p->visible[i]);
    free(p->visible);
    for (int i = 0; i < p->n_hidden; i++)
        free(p->hidden[i]);
    free(p->hidden);
    free(p);
}

/* must_exist 0 (the child's $TMPDIR): a missing folder is skipped, and so
 * are / and the host's /tmp and /dev/shm, which would undo the read-only
 * root or the private /tmp. */
static int plan_add_writable(cuco_confine_plan *p, const char *dir, int must_exist, cuco_err *e)
{
    char *real = realpath(dir, NULL);
    struct stat st;
    if (!real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(real);
        if (!must_exist)
            return 0;
        return cuco_err_set(e, CUCO_ENOTFOUND, "confinement: writable folder %s is not a folder",
                            dir);
    }
    if (!must_exist && !p->c->host_tmp &&
        (!strcmp(real, "/") || !strcmp(real, "/tmp") || !strcmp(real, "/dev/shm"))) {
        free(real);
        return 0;
    }
    for (int i = 0; i < p->n_writable; i++)
        if (!strcmp(p->writable[i], real)) {
            free(real);
            return 0;
        }
    p->writable[p->n_writable++] = real;
    return 0;
}

/* Whether path is dir or inside it. */
static int is_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0' || n == 1);
}

/* A folder to hide: an existing one other than / and the system's own. */
static void plan_add_hidden(cuco_confine_plan *p, const char *dir)
{
    static const char *const never[] = {"/",     "/usr", "/etc", "/lib",  "/lib64", "/bin",
                                        "/sbin", "/opt", "/dev", "/proc", "/sys",   NULL};
    char *real = dir && *dir ? realpath(dir, NULL) : NULL;
    struct stat st;
    int ok = real && stat(real, &st) == 0 && S_ISDIR(st.st_mode);
    for (size_t i = 0; ok && never[i]; i++)
        ok = strcmp(real, never[i]) != 0;
    /* already out of sight: under the fresh /tmp, or under a hidden one */
    ok = ok && (p->c->host_tmp || (!is_within(real, "/tmp") && !is_within(real, "/dev/shm")));
    for (int i = 0; ok && i < p->n_hidden; i++)
        ok = !is_within(real, p->hidden[i]);
    if (!ok) {
        free(real);
        return;
    }
    /* one inside it is covered by it */
    int kept = 0;
    for (int i = 0; i < p->n_hidden; i++) {
        if (is_within(p->hidden[i], real))
            free(p->hidden[i]);
        else
            p->hidden[kept++] = p->hidden[i];
    }
    p->n_hidden = kept;
    p->hidden[p->n_hidden++] = real;
}

/* A folder to keep readable: only one under /tmp, /dev/shm or a hidden
 * folder needs binding back (elsewhere the read-only root shows it); a
 * missing one is skipped. */
static void plan_add_visible(cuco_confine_plan *p, const char *dir)
{
    char *real = realpath(dir, NULL);
    int hidden =
        real && !p->c->host_tmp && (is_within(real, "/tmp") || is_within(real, "/dev/shm"));
    for (int i = 0; real && !hidden && i < p->n_hidden; i++)
        hidden = is_within(real, p->hidden[i]);
    if (!hidden) {
        free(real);
        return;
    }
    p->visible[p->n_visible++] = real;
}

static void plan_limits(cuco_confine_plan *p, const cuco_confine *c)
{
    rlim_t cpu = (rlim_t)(c->cpu_s > 0 ? c->cpu_s : CUCO_CONFINE_CPU_S);
    rlim_t fsize = (rlim_t)(c->fsize_bytes ? c->fsize_bytes : CUCO_CONFINE_FSIZE);
    rlim_t nproc = (rlim_t)(c->nproc > 0 ? c->nproc : CUCO_CONFINE_NPROC);
    p->cpu = (struct rlimit){cpu, cpu};
    p->fsize = (struct rlimit){fsize, fsize};
    p->nproc = (struct rlimit){nproc, nproc};
    p->as = (struct rlimit){(rlim_t)c->as_bytes, (rlim_t)c->as_bytes};
}

int cuco_confine_plan_new(const cuco_confine *c, char *const *env, cuco_confine_plan **out,
                          cuco_err *e)
{
    *out = NULL;
    cuco_confine_plan *p = calloc(1, sizeof *p);
    size_t n = 0, n_visible = 0, n_hidden = 0;
    while (c->writable && c->writable[n])
        n++;
    while (c->visible && c->visible[n_visible])
        n_visible++;
    while (c->hidden && c->hidden[n_hidden])
        n_hidden++;
    if (p) {
        p->writable = calloc(n + 4, sizeof *p->writable);
        p->visible = calloc(n_visible + 1, sizeof *p->visible);
        p->hidden = calloc(n_hidden + 1, sizeof *p->hidden);
    }
    if (!p || !p->writable || !p->visible || !p->hidden) {
        cuco_confine_plan_free(p);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    p->c = c;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = plan_add_writable(p, c->writable[i], 1, e);
    for (size_t i = 0; i < n_hidden; i++)
        plan_add_hidden(p, c->hidden[i]);
    for (size_t i = 0; i < n_visible; i++)
        plan_add_visible(p, c->visible[i]);
    /* Compilers and mpirun keep their temporary files in $TMPDIR (the local
     * launcher gives each slot its own): it stays writable. */
    for (size_t i = 0; env && env[i] && rc == 0; i++)
        if (!strncmp(env[i], "TMPDIR=", 7) && env[i][7])
            rc = plan_add_writable(p, env[i] + 7, 0, e);
    if (c->host_tmp && rc == 0)
        rc = plan_add_writable(p, "/tmp", 1, e);
    if (c->host_tmp && rc == 0 && access("/dev/shm", F_OK) == 0)
        rc = plan_add_writable(p, "/dev/shm", 1, e);
    if (rc) {
        cuco_confine_plan_free(p);
        return rc;
    }
    p->need_userns = geteuid() != 0;
    snprintf(p->uid_map, sizeof p->uid_map, "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
    snprintf(p->gid_map, sizeof p->gid_map, "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
    plan_limits(p, c);
    *out = p;
    return 0;
}

/* ---- small async-signal-safe helpers (after fork) ---- */

static int fail_fd = -1;
static int fail_stage;

static void copy_str(char *dst, size_t cap, size_t *at, const char *src)
{
    while (*src && *at + 1 < cap)
        dst[(*at)++] = *src++;
    dst[*at] = '\0';
}

/* Reports "what[ path]" with errno through the failure pipe and ends this
 * process; the processes above it then end with 127 as well. */
static void fail(const char *what, const char *path)
{
    cuco_confine_failure f;
    memset(&f, 0, sizeof f);
    f.stage = fail_stage;
    f.err = errno;
    size_t at = 0;
    copy_str(f.step, sizeof f.step, &at, what);
    if (path) {
        copy_str(f.step, sizeof f.step, &at, " ");
        copy_str(f.step, sizeof f.step, &at, path);
    }
    ssize_t w = write(fail_fd >= 0 ? fail_fd : 2, &f, sizeof f);
    (void)w;
    _exit(127);
}

static size_t format_uint(char *dst, unsigned long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[n - 1 - i];
    dst[n] = '\0';
    return n;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    errno = saved;
    return w == (ssize_t)strlen(text) ? 0 : -1;
}

static void set_handler(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

void cuco_confine_cloexec_from(int lowest)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowest, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = (long)rl.rlim_cur;
    if (max > (1L << 20))
        max = 1L << 20;
    for (int fd = lowest; fd < max; fd++) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

/* Closes every fd from 3 up except keep: the relay and init never exec, so
 * close-on-exec would not take cuco's descriptors (the database) from them,
 * and the program could reach them through /proc/1/fd. */
static void close_all_but(int keep)
{
    long max = 65536;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = (long)rl.rlim_cur;
#ifdef SYS_close_range
    if ((keep <= 3 || syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) == 0) &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
        return;
#endif
    for (int fd = 3; fd < max && fd < (1 << 20); fd++)
        if (fd != keep)
            close(fd);
}

/* The relay and init are copies of cuco, and the program can read init's
 * /proc/1/environ (cuco's environment as it started): the values of secrets
 * are overwritten in this copy. The command's environment is built apart
 * (scrubbed before fork) and keeps no pointer to them. */
static void scrub_own_environment(const char *const *extra_names)
{
    for (char **entry = environ; entry && *entry; entry++) {
        if (cuco_confine_env_keep(*entry, extra_names))
            continue;
        char *value = strchr(*entry, '=');
        for (value = value ? value + 1 : NULL; value && *value; value++)
            *value = '*';
    }
}

/* Exits the way `status` (a wait status) says: same code, or same signal. */
static void exit_like(int status)
{
    if (WIFEXITED(status))
        _exit(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        set_handler(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    _exit(127);
}

/* ---- the mount namespace (in init) ---- */

static int under(const char *path, const char *top)
{
    size_t n = strlen(top);
    return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Decodes mountinfo's octal escapes (\040 for a blank) in place. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* Remounts one mount point read-only, keeping its other flags. /proc and
 * /dev stay as they are (device nodes and the new /proc); /sys is made
 * read-only where the kernel lets us. */
static void remount_readonly(char *line)
{
    char *field = line, *mnt = NULL;
    for (int i = 0; i < 4 && field; i++) {
        field = strchr(field, ' ');
        if (field)
            field++;
    }
    if (!field)
        return;
    mnt = field;
    char *end = strchr(mnt, ' ');
    if (end)
        *end = '\0';
    unescape(mnt);
    if (under(mnt, "/proc") || under(mnt, "/dev"))
        return;
    struct statfs sf;
    if (statfs(mnt, &sf) != 0) {
        if (errno == ENOENT || errno == EACCES)
            return; /* hidden under another mount: out of reach anyway */
        fail("statfs", mnt);
    }
    if (sf.f_flags & MS_RDONLY)
        return;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | (sf.f_flags & CONFINE_KEEP_FLAGS);
    if (mount(NULL, mnt, NULL, flags, NULL) != 0 && !under(mnt, "/sys"))
        fail("remount read-only", mnt);
}

static void remount_all_readonly(void)
{
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("open", "/proc/self/mountinfo");
    char buf[16384];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail("read", "/proc/self/mountinfo");
        if (n == 0)
            break;
        len += (size_t)n;
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', (size_t)(buf + len - start))) != NULL) {
            *nl = '\0';
            remount_readonly(start);
            start = nl + 1;
        }
        len = (size_t)(buf + len - start);
        memmove(buf, start, len);
        if (len == sizeof buf - 1) {
            errno = E2BIG;
            fail("a line too long in", "/proc/self/mountinfo");
        }
    }
    close(fd);
}

/* mkdir -p, for writable folders under the fresh /tmp or /dev/shm. */
static void make_dirs(const char *path)
{
    char dir[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof dir)
        return;
    memcpy(dir, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (dir[i] != '/' && dir[i] != '\0')
            continue;
        char saved = dir[i];
        dir[i] = '\0';
        mkdir(dir, 0755);
        dir[i] = saved;
    }
}

/* Binds a folder, opened before /tmp was replaced, onto its own path and
 * makes that mount writable again (or read-only, for a visible one). */
static void bind_back(int dir_fd, const char *path, int writable)
{
    char src[64] = "/proc/self/fd/";
    format_uint(src + strlen(src), (unsigned long)dir_fd);
    make_dirs(path);
    if (mount(src, path, NULL, MS_BIND | MS_REC, NULL) != 0)
        fail("bind-mount writable folder", path);
    struct statfs sf;
    if (statfs(path, &sf) != 0)
        fail("statfs", path);
    unsigned long flags = MS_REMOUNT | MS_BIND | (sf.f_flags & CONFINE_KEEP_FLAGS);
    if (!writable)
        flags |= MS_RDONLY;
    if (mount(NULL, path, NULL, flags, NULL) != 0)
        fail(writable ? "remount writable" : "remount read-only", path);
    close(dir_fd);
}

static void fresh_tmpfs(const char *path, int optional)
{
    if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0 &&
        !(optional && errno == ENOENT))
        fail("mount a tmpfs on", path);
}

static void setup_mounts(const cuco_confine_plan *p)
{
    int fds[64], vis_fds[64];
    if (p->n_writable > (int)(sizeof fds / sizeof fds[0]) ||
        p->n_visible > (int)(sizeof vis_fds / sizeof vis_fds[0])) {
        errno = E2BIG;
        fail("too many writable or visible folders", NULL);
    }
    /* Opened first: a folder under /tmp is hidden once the fresh tmpfs is
     * there, and is bound back from its fd. */
    for (int i = 0; i < p->n_writable; i++)
        if ((fds[i] = open(p->writable[i], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            fail("open writable folder", p->writable[i]);
    for (int i = 0; i < p->n_visible; i++)
        if ((vis_fds[i] = open(p->visible[i], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            fail("open visible folder", p->visible[i]);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        fail("make the mounts private", NULL);
    remount_all_readonly();
    if (!p->c->host_tmp) {
        fresh_tmpfs("/tmp", 0);
        fresh_tmpfs("/dev/shm", 1);
    }
    for (int i = 0; i < p->n_hidden; i++)
        if (mount("tmpfs", p->hidden[i], "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
            fail("mount a tmpfs to hide", p->hidden[i]);
    /* read-only ones first: a writable build folder inside a visible
     * workload folder must end up writable */
    for (int i = 0; i < p->n_visible; i++)
        bind_back(vis_fds[i], p->visible[i], 0);
    for (int i = 0; i < p->n_writable; i++)
        bind_back(fds[i], p->writable[i], 1);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        fail("mount a new proc on", "/proc");
}

/* A new network namespace starts with its loopback down; mpirun's PMIx
 * needs it up, and there is no `ip` command on the GPU hosts. */
static void loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail("socket for the loopback", NULL);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        fail("ioctl(SIOCGIFFLAGS) on", "lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        fail("ioctl(SIOCSIFFLAGS) to bring up", "lo");
    close(s);
}

/* ---- init: PID 1 of the namespace ---- */

/* Processes of the namespace other than init that have not exited. */
static int count_left(void)
{
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096];
    int left = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long at = 0; at < n;) {
            struct {
                unsigned long long ino;
                long long off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + at);
            at += d->reclen;
            if (d->name[0] < '1' || d->name[0] > '9' || !strcmp(d->name, "1"))
                continue;
            char path[64] = "/proc/", stat[512];
            size_t k = strlen(path);
            copy_str(path, sizeof path, &k, d->name);
            copy_str(path, sizeof path, &k, "/stat");
            int sfd = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t got = sfd >= 0 ? read(sfd, stat, sizeof stat - 1) : -1;
            if (sfd >= 0)
                close(sfd);
            if (got <= 0)
                continue;
            stat[got] = '\0';
            char *paren = strrchr(stat, ')');
            if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'))
                continue;
            left++;
        }
    }
    close(fd);
    return left;
}

static void report_left(int left)
{
    char line[96] = "cuco: ended ";
    size_t k = strlen(line);
    k += format_uint(line + k, (unsigned long)left);
    copy_str(line, sizeof line, &k,
             left == 1 ? " process the program left running\n"
                       : " processes the program left running\n");
    ssize_t w = write(2, line, k);
    (void)w;
}

static volatile pid_t init_command_pid;

/* Only the command is told: what it leaves behind is counted and reported
 * when it has gone, and ended by the kernel with init. */
static void init_on_term(int sig)
{
    (void)sig;
    kill(init_command_pid, SIGTERM);
}

/* Waits for the command, reaping orphans meanwhile; then reports and exits
 * with the command's status (also sent raw to the relay). */
static void init_wait(pid_t command, int status_fd)
{
    int status = 0, st;
    for (;;) {
        pid_t w = waitpid(-1, &st, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            status = 127 << 8;
            break;
        }
        if (w == command) {
            status = st;
            break;
        }
    }
    while (waitpid(-1, &st, WNOHANG) > 0)
        ;
    int left = count_left();
    if (left > 0)
        report_left(left);
    ssize_t w = write(status_fd, &status, sizeof status);
    (void)w;
    if (WIFEXITED(status))
        _exit(WEXITSTATUS(status));
    _exit(128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
}

static void set_limit(int resource, const struct rlimit *want)
{
    struct rlimit now, lim = *want;
    if (getrlimit(resource, &now) == 0 && now.rlim_max != RLIM_INFINITY &&
        now.rlim_max < lim.rlim_max)
        lim.rlim_cur = lim.rlim_max = now.rlim_max;
    setrlimit(resource, &lim);
}

/* Capabilities the command must not have even as root: they would undo the
 * confinement (remount read-write, leave the namespaces, open files by
 * handle, raw disk, ptrace of cuco, raise the rlimits) or reach the host
 * (modules, clock). */
static const int dropped_caps[] = {
    CAP_SYS_ADMIN,       CAP_SYS_MODULE,    CAP_SYS_RAWIO,    CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH,
    CAP_MKNOD,           CAP_NET_ADMIN,     CAP_NET_RAW,      CAP_SYS_BOOT,   CAP_SYS_TIME,
    CAP_SYSLOG,          CAP_MAC_ADMIN,     CAP_MAC_OVERRIDE, CAP_SYS_CHROOT, CAP_SETFCAP,
    CAP_LINUX_IMMUTABLE, CAP_AUDIT_CONTROL, CAP_SYS_RESOURCE,
};

static void command_setup(const cuco_confine_plan *p)
{
    set_handler(SIGTERM, SIG_DFL);
    /* Dropped from the bounding set, so that exec (even of a root or setuid
     * program) cannot get them back. */
    for (size_t i = 0; i < sizeof dropped_caps / sizeof dropped_caps[0]; i++)
        prctl(PR_CAPBSET_DROP, (unsigned long)dropped_caps[i], 0, 0, 0);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    set_limit(RLIMIT_CPU, &p->cpu);
    set_limit(RLIMIT_FSIZE, &p->fsize);
    set_limit(RLIMIT_NPROC, &p->nproc);
    if (p->as.rlim_max)
        set_limit(RLIMIT_AS, &p->as);
}

/* Returns in the command (to exec); init itself never returns. */
static void run_init(const cuco_confine_plan *p, int status_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setup_mounts(p);
    if (!p->c->allow_network)
        loopback_up();
    pid_t command = fork();
    if (command < 0)
        fail("fork the command in the namespace", NULL);
    if (command == 0) {
        close(status_fd);
        command_setup(p);
        return;
    }
    init_command_pid = command;
    set_handler(SIGTERM, init_on_term);
    close(fail_fd);
    init_wait(command, status_fd);
}

/* ---- the relay and the entry point ---- */

static volatile pid_t relay_init_pid;

static void relay_on_term(int sig)
{
    (void)sig;
    kill(relay_init_pid, SIGTERM);
    alarm(CONFINE_TERM_GRACE_S); /* SIGALRM ends the relay, and init with it */
}

static void relay(pid_t init, int status_fd)
{
    relay_init_pid = init;
    set_handler(SIGTERM, relay_on_term);
    set_handler(SIGALRM, SIG_DFL);
    int st = 0, status;
    while (waitpid(init, &st, 0) < 0 && errno == EINTR)
        ;
    ssize_t got;
    do
        got = read(status_fd, &status, sizeof status);
    while (got < 0 && errno == EINTR);
    exit_like(got == (ssize_t)sizeof status ? status : st);
}

static void enter_user_namespace(const cuco_confine_plan *p)
{
    if (unshare(CLONE_NEWUSER) != 0)
        fail("unshare(CLONE_NEWUSER)", NULL);
    if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT)
        fail("write", "/proc/self/setgroups");
    if (write_file("/proc/self/uid_map", p->uid_map) != 0)
        fail("write", "/proc/self/uid_map");
    if (write_file("/proc/self/gid_map", p->gid_map) != 0)
        fail("write", "/proc/self/gid_map");
}

void cuco_confine_enter(const cuco_confine_plan *p, int report_fd, int stage)
{
    fail_fd = report_fd;
    fail_stage = stage;
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* the relay may re-raise a SIGSEGV */
    close_all_but(report_fd);
    scrub_own_environment(p->c->secret_names);
    if (p->need_userns)
        enter_user_namespace(p);
    /* The relay and init are copies of cuco (its heap, its environment):
     * not dumpable, so the program cannot read their memory or descriptors
     * through /proc/1 (environ stays readable: scrubbed above); exec makes
     * the command dumpable again. After the uid map is written: /proc/self
     * of a process that is not dumpable belongs to root. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int flags = CLONE_NEWPID | CLONE_NEWNS | (p->c->allow_network ? 0 : CLONE_NEWNET);
    if (unshare(flags) != 0)
        fail(p->c->allow_network ? "unshare(CLONE_NEWPID|CLONE_NEWNS)"
                                 : "unshare(CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET)",
             NULL);
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0)
        fail("pipe", NULL);
    pid_t init = fork();
    if (init < 0)
        fail("fork the namespace's init", NULL);
    if (init == 0) {
        close(status_pipe[0]);
        run_init(p, status_pipe[1]);
        return;
    }
    close(status_pipe[1]);
    close(report_fd);
    relay(init, status_pipe[0]);
}

/* ---- probe and settings ---- */

int cuco_confine_default_enabled(void)
{
    const char *v = getenv("CUCO_CONFINE");
    if (!v)
        return 1;
    return !(!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
             !strcasecmp(v, "false"));
}

static char *probe_describe(const cuco_confine_plan *p)
{
    return cuco_sprintf("namespaces: pid, mount, net%s; read-only root, private /tmp; rlimits",
                        p->need_userns ? ", user" : "");
}

int cuco_confine_probe(char **why)
{
    *why = NULL;
    cuco_confine c = {.enabled = 1};
    cuco_confine_plan *p = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int report[2] = {-1, -1}, rc = -1;
    if (cuco_confine_plan_new(&c, environ, &p, &e) != 0 || pipe2(report, O_CLOEXEC) != 0) {
        *why = cuco_sprintf("%s", e.code ? cuco_err_msg(&e) : strerror(errno));
        goto out;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDWR);
        if (null_fd >= 0) {
            dup2(null_fd, 0);
            dup2(null_fd, 1);
            dup2(null_fd, 2);
        }
        cuco_confine_enter(p, report[1], 1);
        char *argv[] = {"true", NULL};
        execvp("true", argv);
        fail("exec", "true");
    }
    close(report[1]);
    report[1] = -1;
    cuco_confine_failure f;
    ssize_t got = pid < 0 ? -1 : read(report[0], &f, sizeof f);
    int status = 0;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    if (pid < 0)
        *why = cuco_sprintf("fork: %s", strerror(errno));
    else if (got == (ssize_t)sizeof f)
        *why = cuco_sprintf("%s: %s", f.step, strerror(f.err));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        *why = cuco_sprintf("a confined `true` did not exit 0 (wait status %d)", status);
    else
        rc = 0;
    if (rc == 0)
        *why = probe_describe(p);
out:
    if (report[0] >= 0)
        close(report[0]);
    if (report[1] >= 0)
        close(report[1]);
    cuco_confine_plan_free(p);
    cuco_err_clear(&e);
    return rc;
}
