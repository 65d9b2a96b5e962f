/* proc_hang.c: test helper that never ends on its own.
 * Usage: proc_hang [--ignore-term] [PIDFILE]
 * Writes its pid to PIDFILE (if given), prints "hanging", and sleeps forever;
 * with --ignore-term it ignores SIGTERM so only SIGKILL stops it. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int argi = 1;
    if (argi < argc && strcmp(argv[argi], "--ignore-term") == 0) {
        signal(SIGTERM, SIG_IGN);
        argi++;
    }
    if (argi < argc) {
        FILE *f = fopen(argv[argi], "w");
        if (!f)
            return 2;
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    printf("hanging\n");
    fflush(stdout);
    for (;;)
        pause();
}
