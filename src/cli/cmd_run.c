/* cmd_run.c: 'cuco run' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco run: not available in this build\n");
    return 2;
}
