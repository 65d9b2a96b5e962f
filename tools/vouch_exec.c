/* vouch_exec.c: 'cuco-vouch-exec NONCE_FILE|- -- PROGRAM [ARGS...]', the small
 * program (beside the cuco binary) that mpirun starts in place of each rank of
 * a candidate. It does two jobs that nothing else in the chain can do:
 *
 * The nonce. The frozen code of a program that vouches for its runs
 * (result.vouch, cuco/eval.h) takes its nonce from CUCO_NONCE, but a
 * variable that cuco put into mpirun's environment stays readable in
 * /proc/PID/environ of mpirun and its daemons, where a candidate can find it
 * and forge the vouch. So cuco writes the nonce to a file instead; on rank 0
 * this command reads it, deletes the file and starts PROGRAM with CUCO_NONCE
 * set, so that the only copy is in the rank's own environment, which its
 * frozen code reads and clears before any candidate code runs. Other ranks
 * (and "-" instead of a file) start PROGRAM without it.
 *
 * The leftovers. mpirun waits until every process holding a rank's output has
 * let go of it, so a background child that a rank leaves behind (one that
 * ignores SIGTERM, or calls setsid) would keep the whole run waiting until
 * its timeout. This command is a child subreaper: when PROGRAM exits, every
 * process it left behind, re-parented here whatever its session, is killed,
 * and the count is said on stderr; then it exits with PROGRAM's status.
 *
 * It links nothing of libcuco and no sanitizer runtime, so that it starts
 * under the address-space limit of a confined run. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { CUCO_NONCE_LEN = 32 }; /* as in cuco/eval.h */

/* The rank of this process from the launcher's environment; 0 when it runs
 * alone. */
static long own_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID", NULL};
    for (size_t i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        char *end = NULL;
        long rank = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && end && !*end)
            return rank;
    }
    return 0;
}

/* Reads the nonce from path (CUCO_NONCE_LEN lowercase hex digits) and
 * deletes the file. 0 on success. */
static int take_nonce_file(const char *path, char nonce[CUCO_NONCE_LEN + 1])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[CUCO_NONCE_LEN + 2];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    unlink(path);
    if (n < CUCO_NONCE_LEN || (n > CUCO_NONCE_LEN && buf[CUCO_NONCE_LEN] != '\n'))
        return -1;
    buf[CUCO_NONCE_LEN] = '\0';
    if (strspn(buf, "0123456789abcdef") != CUCO_NONCE_LEN)
        return -1;
    memcpy(nonce, buf, CUCO_NONCE_LEN + 1);
    return 0;
}

/* The signal a termination request forwards to PROGRAM. */
static volatile sig_atomic_t forward_to = 0;

static void forward_signal(int sig)
{
    if (forward_to > 0)
        kill((pid_t)forward_to, sig);
}

static void install_forwarding(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* Parent pid of a live (not yet exited) process from /proc/PID/stat; -1
 * when it cannot be read or the process is a zombie. */
static long parent_of(const char *pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold anything */
    char state;
    long ppid = -1;
    if (!paren || sscanf(paren + 1, " %c %ld", &state, &ppid) != 2 || state == 'Z')
        return -1;
    return ppid;
}

/* Whether pid is among seen[0..n); adds it (while there is room) when not. */
static int seen_before(pid_t *seen, size_t *n, size_t cap, pid_t pid)
{
    for (size_t i = 0; i < *n; i++)
        if (seen[i] == pid)
            return 1;
    if (*n < cap)
        seen[(*n)++] = pid;
    return 0;
}

/* Sends SIGKILL to every live child of this process; returns how many were
 * signalled, and counts the ones not signalled before into *ended. */
static int kill_children(pid_t *seen, size_t *n_seen, size_t cap, int *ended)
{
    DIR *d = opendir("/proc");
    int killed = 0;
    pid_t self = getpid();
    for (struct dirent *ent; d && (ent = readdir(d));) {
        if (ent->d_name[0] < '0' || ent->d_name[0] > '9' || parent_of(ent->d_name) != (long)self)
            continue;
        pid_t pid = (pid_t)strtol(ent->d_name, NULL, 10);
        if (kill(pid, SIGKILL) == 0) {
            killed++;
            if (!seen_before(seen, n_seen, cap, pid))
                (*ended)++;
        }
    }
    if (d)
        closedir(d);
    return killed;
}

/* Kills every child of this process (PROGRAM's leftovers, re-parented here)
 * and reaps them, until none is left; their own children come here in turn.
 * Returns how many processes were ended. */
static int end_leftovers(void)
{
    static pid_t seen[4096];
    size_t n_seen = 0;
    int ended = 0;
    for (int round = 0; round < 3000; round++) {
        int killed = kill_children(seen, &n_seen, sizeof seen / sizeof seen[0], &ended);
        pid_t w;
        while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (w < 0 && errno == ECHILD)
            break; /* no child left */
        /* children still exiting, or one not yet seen in /proc: look again */
        struct timespec pause = {0, (killed ? 1 : 10) * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return ended;
}

/* PROGRAM's status as an exit status of this process. */
static int status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        /* die of the same signal, so mpirun reports what PROGRAM did */
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: cuco-vouch-exec NONCE_FILE|- -- PROGRAM [ARGS...]\n"
                        "(started by cuco for each rank of a candidate)\n");
        return 2;
    }
    unsetenv("CUCO_NONCE");
    if (strcmp(argv[1], "-") && own_rank() == 0) {
        char nonce[CUCO_NONCE_LEN + 1];
        if (take_nonce_file(argv[1], nonce) == 0)
            setenv("CUCO_NONCE", nonce, 1);
        else
            fprintf(stderr, "cuco-vouch-exec: no nonce in %s: the run cannot be vouched for\n",
                    argv[1]);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    install_forwarding();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "cuco-vouch-exec: fork: %s\n", strerror(errno));
        return 127;
    }
    if (child == 0) {
        execvp(argv[3], argv + 3);
        fprintf(stderr, "cuco-vouch-exec: cannot run %s: %s\n", argv[3], strerror(errno));
        _exit(127);
    }
    forward_to = child;
    unsetenv("CUCO_NONCE");
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    forward_to = 0;
    int ended = end_leftovers();
    if (ended > 0)
        fprintf(stderr, "cuco: ended %d process%s the program left running (rank %ld)\n", ended,
                ended == 1 ? "" : "es", own_rank());
    return status_of(status);
}
