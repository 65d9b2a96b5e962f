/* cli_common.c: what every command of the tool shares below main.c (which
 * only dispatches): the -h/--help test and the warning of unconfined runs. */
#include "commands.h"

#include "cuco/confine.h"

#include <stdio.h>
#include <string.h>

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return 0;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    }
    return 0;
}

int cli_unconfined(int no_confine_flag)
{
    if (no_confine_flag)
        fprintf(stderr, "warning: candidates run unconfined (--no-confine)\n");
    else if (!cuco_confine_default_enabled())
        fprintf(stderr, "warning: candidates run unconfined (CUCO_CONFINE=0)\n");
    return no_confine_flag || !cuco_confine_default_enabled();
}
