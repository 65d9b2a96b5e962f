/* outcome.c: what an evaluator reports for one program (cuco/evolve.h),
 * shared by the engine and the re-timing, neither of which owns it. */
#include "cuco/config.h"
#include "cuco/evolve.h"
#include "cuco/mutate.h"

#include <stdlib.h>
#include <string.h>

void cuco_eval_outcome_free(cuco_eval_outcome *o)
{
    free(o->metrics_json);
    free(o->error);
    memset(o, 0, sizeof *o);
}
