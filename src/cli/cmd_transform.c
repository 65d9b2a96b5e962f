/* cmd_transform.c: 'cuco transform' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_transform(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco transform: not available in this build\n");
    return 2;
}
