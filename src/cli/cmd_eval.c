/* cmd_eval.c: 'cuco eval' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_eval(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco eval: not available in this build\n");
    return 2;
}
