/* cmd_evolve.c: 'cuco evolve' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_evolve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco evolve: not available in this build\n");
    return 2;
}
