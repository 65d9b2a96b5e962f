/* proc_exit.c: test helper that exits with a given code.
 * Usage: proc_exit CODE
 * Writes "out CODE" to stdout and "err CODE" to stderr, then exits CODE. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int code = argc > 1 ? atoi(argv[1]) : 0;
    printf("out %d\n", code);
    fprintf(stderr, "err %d\n", code);
    return code;
}
