/* llm_bandit.c: UCB1 over the models of a run. Each call pulls an arm; once
 * its child is evaluated the engine reports the improvement over the parent
 * and the call's cost. An arm's exploitation term is its improvement per
 * dollar scaled by the best arm's, so calls drift towards the model that buys
 * the most speedup for the money while the others are still tried now and
 * then. */
#include "cuco/llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cuco_llm_bandit_init(cuco_llm_bandit *b, const char *const *models, size_t n, cuco_err *e)
{
    memset(b, 0, sizeof *b);
    b->explore = 1.0;
    if (n == 0)
        return cuco_err_set(e, CUCO_EINVAL, "bandit: no models");
    b->arms = calloc(n, sizeof *b->arms);
    if (!b->arms)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->arms[i].model = cuco_strdup(models[i]);
        if (!b->arms[i].model) {
            cuco_llm_bandit_free(b);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
    }
    return 0;
}

void cuco_llm_bandit_free(cuco_llm_bandit *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->arms[i].model);
    free(b->arms);
    memset(b, 0, sizeof *b);
}

static double arm_rate(const cuco_llm_arm *a)
{
    if (a->improvement <= 0)
        return 0;
    /* a free call (local model) that improved gets a rate as if it cost a cent */
    return a->improvement / (a->cost_usd > 1e-9 ? a->cost_usd : 0.01);
}

double cuco_llm_bandit_value(const cuco_llm_bandit *b, size_t arm)
{
    const cuco_llm_arm *a = &b->arms[arm];
    if (a->pulls == 0)
        return INFINITY;
    double best = 0;
    for (size_t i = 0; i < b->n; i++) {
        double r = arm_rate(&b->arms[i]);
        if (r > best)
            best = r;
    }
    double exploit = best > 0 ? arm_rate(a) / best : 0;
    double total = b->total_pulls > 1 ? (double)b->total_pulls : 1.0;
    return exploit + b->explore * sqrt(2.0 * log(total) / (double)a->pulls);
}

size_t cuco_llm_bandit_choose(cuco_llm_bandit *b)
{
    size_t pick = 0;
    double best = -INFINITY;
    for (size_t i = 0; i < b->n; i++) {
        double v = cuco_llm_bandit_value(b, i);
        if (v > best) {
            best = v;
            pick = i;
        }
    }
    b->arms[pick].pulls++;
    b->total_pulls++;
    return pick;
}

void cuco_llm_bandit_update(cuco_llm_bandit *b, size_t arm, double improvement, double cost_usd)
{
    if (arm >= b->n)
        return;
    if (improvement > 0)
        b->arms[arm].improvement += improvement;
    if (cost_usd > 0)
        b->arms[arm].cost_usd += cost_usd;
}

long cuco_llm_bandit_find(const cuco_llm_bandit *b, const char *model)
{
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->arms[i].model, model))
            return (long)i;
    return -1;
}
