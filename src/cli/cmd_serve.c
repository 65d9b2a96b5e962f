/* cmd_serve.c: 'cuco serve' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco serve: not available in this build\n");
    return 2;
}
