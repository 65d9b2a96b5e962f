/* proc_fork_hang.c: test helper whose grandchild outlives it.
 * Usage: proc_fork_hang MODE PIDFILE
 * Forks a child that writes its pid to PIDFILE and sleeps forever. MODE:
 *   exit      the parent exits 0 at once; the child keeps stdout/stderr open
 *   sleep     the parent sleeps forever too
 *   detached  the parent exits 0; the child first points its standard streams
 *             at /dev/null, so nothing holds the caller's pipes */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *mode = argv[1];
    int ready[2];
    if (pipe(ready) != 0)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        close(ready[0]);
        if (strcmp(mode, "detached") == 0) {
            int null_fd = open("/dev/null", O_RDWR);
            dup2(null_fd, 0);
            dup2(null_fd, 1);
            dup2(null_fd, 2);
            close(null_fd);
        }
        FILE *f = fopen(argv[2], "w");
        if (!f)
            _exit(2);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        /* Tell the parent the pid file is complete. */
        if (write(ready[1], "x", 1) != 1)
            _exit(2);
        close(ready[1]);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 3;
    printf("grandchild %d started\n", (int)pid);
    fflush(stdout);
    if (strcmp(mode, "sleep") == 0)
        for (;;)
            pause();
    return 0;
}
