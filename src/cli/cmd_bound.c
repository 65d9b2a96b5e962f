/* cmd_bound.c: 'cuco bound' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_bound(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco bound: not available in this build\n");
    return 2;
}
