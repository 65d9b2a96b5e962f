/* llm_budget.c: a run's spending limit. Calls are admitted against an upper
 * estimate of their cost before they are sent, so a run stops before the
 * call that could take it over the limit rather than after it; a reply that
 * claims to cost more than is left is not believed (see llm_client.c), so
 * the limit is a hard cap. */
#include "cuco/llm.h"

#include <math.h>

void cuco_llm_budget_init(cuco_llm_budget *b, double limit_usd)
{
    b->limit_usd = limit_usd;
    b->spent_usd = 0;
    b->reserved_usd = 0;
    b->calls = 0;
    b->refused = 0;
}

int cuco_llm_budget_reserve(cuco_llm_budget *b, double estimate_usd, cuco_err *e)
{
    if (b->limit_usd > 0 && b->spent_usd + b->reserved_usd + estimate_usd > b->limit_usd) {
        b->refused++;
        return cuco_err_set(e, CUCO_EBUDGET,
                            "budget: the next call may cost up to $%.6f but only $%.6f of $%.6f "
                            "is left",
                            estimate_usd, b->limit_usd - b->spent_usd - b->reserved_usd,
                            b->limit_usd);
    }
    b->reserved_usd += estimate_usd;
    return 0;
}

void cuco_llm_budget_commit(cuco_llm_budget *b, double estimate_usd, double cost_usd)
{
    b->reserved_usd -= estimate_usd;
    if (b->reserved_usd < 1e-12)
        b->reserved_usd = 0;
    b->spent_usd += cost_usd;
    b->calls++;
}

double cuco_llm_budget_left(const cuco_llm_budget *b)
{
    if (b->limit_usd <= 0)
        return INFINITY;
    return b->limit_usd - b->spent_usd - b->reserved_usd;
}

int cuco_llm_budget_fits(const cuco_llm_budget *b, double estimate_usd, double cost_usd)
{
    if (b->limit_usd <= 0)
        return 1;
    /* a hair of slack: sums of doubles need not come out exact */
    return b->spent_usd + b->reserved_usd - estimate_usd + cost_usd <= b->limit_usd + 1e-9;
}
