/* cmd_analyze.c: 'cuco analyze' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_analyze(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco analyze: not available in this build\n");
    return 2;
}
