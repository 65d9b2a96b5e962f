/* cmd_report.c: 'cuco report' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_report(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco report: not available in this build\n");
    return 2;
}
