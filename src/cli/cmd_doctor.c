/* cmd_doctor.c: 'cuco doctor' (not built yet in this tree). */
#include "commands.h"

#include <stdio.h>

int cmd_doctor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cuco doctor: not available in this build\n");
    return 2;
}
