/* proc_echo_env.c: test helper printing environment variables.
 * Usage: proc_echo_env NAME...   prints "NAME=VALUE" or "NAME unset" per line. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *v = getenv(argv[i]);
        if (v)
            printf("%s=%s\n", argv[i], v);
        else
            printf("%s unset\n", argv[i]);
    }
    return 0;
}
