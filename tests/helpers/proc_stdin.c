/* proc_stdin.c: test helper reporting what its standard input is.
 * Prints "stdin: devnull" when fd 0 is /dev/null, else "stdin: other",
 * then copies standard input to standard output. */
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int main(void)
{
    struct stat in, null_dev;
    int is_null = fstat(0, &in) == 0 && stat("/dev/null", &null_dev) == 0 && S_ISCHR(in.st_mode) &&
                  in.st_rdev == null_dev.st_rdev;
    printf("stdin: %s\n", is_null ? "devnull" : "other");
    char chunk[4096];
    ssize_t n;
    while ((n = read(0, chunk, sizeof chunk)) > 0)
        fwrite(chunk, 1, (size_t)n, stdout);
    return 0;
}
