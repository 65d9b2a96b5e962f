/* cli_common.c: what every command of the tool shares below main.c (which
 * only dispatches) and the option tables (cli_options.c) do not hold: the
 * warning of unconfined runs. */
#include "commands.h"

#include "cuco/confine.h"

#include <stdio.h>

int cli_unconfined(int no_confine_flag)
{
    if (no_confine_flag)
        fprintf(stderr, "warning: candidates run unconfined (--no-confine)\n");
    else if (!cuco_confine_default_enabled())
        fprintf(stderr, "warning: candidates run unconfined (CUCO_CONFINE=0)\n");
    return no_confine_flag || !cuco_confine_default_enabled();
}
