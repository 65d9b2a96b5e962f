/* doe.c: the structured offline search over knobs (see doe.h): a two-level
 * fractional factorial screen from the run's starting setting, then
 * refinement around the best measured setting along the strongest
 * interactions and effects, then its local neighbourhood. A pure function
 * of the run's history, so a resumed run goes on where it stopped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/doe.h"

/* An interaction is followed when it changes time by at least this (log)
 * and, when its spread is known, by this many standard errors. */
#define PAIR_MIN_LOG 0.01
#define PAIR_MIN_SE 2.0
#define MAX_PAIRS 2

typedef struct plan {
    const cuco_doe_space *s;
    const cuco_doe_history *h;
    size_t *cand; /* the candidate being tried */
    size_t *out;
    int found;
    cuco_err *e;
} plan;

static int active(const cuco_doe_space *s, size_t k)
{
    return s->levels[k].n > 1 && (!s->active || s->active[k]);
}

/* Tries plan->cand: 1 when it is new (copied to out), 0 when seen. */
static int plan_try(plan *p)
{
    int seen = 0;
    int rc = p->h->seen ? p->h->seen(p->h->seen_ctx, p->cand, &seen, p->e) : 0;
    if (rc < 0)
        return rc;
    if (seen)
        return 0;
    memcpy(p->out, p->cand, p->s->n_knobs * sizeof *p->out);
    p->found = 1;
    return 1;
}

/* ---- screen ------------------------------------------------------------------ */

static int popcount(unsigned v)
{
    int c = 0;
    for (; v; v &= v - 1)
        c++;
    return c;
}

/* The design's column (a subset of the m basic factors) of each of k
 * factors: odd-weight subsets (resolution IV) when 2^(m-1) >= k for m <= 4,
 * else every non-empty subset (resolution III), lightest first. Returns the
 * number of runs, 2^m; 0 when k > 31. */
static size_t screen_columns(size_t k, unsigned *cols)
{
    unsigned m = 1;
    int odd_only = k <= 8;
    if (k > 31)
        return 0;
    while (odd_only ? (1u << (m - 1)) < k : (1u << m) - 1 < k)
        m++;
    size_t n = 0;
    for (int w = 1; w <= (int)m && n < k; w++) {
        if (odd_only && w % 2 == 0)
            continue;
        for (unsigned sub = 1; sub < (1u << m) && n < k; sub++)
            if (popcount(sub) == w)
                cols[n++] = sub;
    }
    return (size_t)1 << m;
}

/* The screen's other level of knob k: the last value, or the first when the
 * start is the last. */
static size_t screen_high(const cuco_doe_space *s, size_t k)
{
    size_t n = s->levels[k].n;
    return s->start[k] + 1 < n ? n - 1 : 0;
}

static int plan_screen(plan *p)
{
    const cuco_doe_space *s = p->s;
    unsigned cols[32];
    size_t act[32], k = 0;
    for (size_t i = 0; i < s->n_knobs && k < 31; i++)
        if (active(s, i))
            act[k++] = i;
    size_t runs = k ? screen_columns(k, cols) : 0;
    for (size_t r = 1; r < runs; r++) {
        memcpy(p->cand, s->start, s->n_knobs * sizeof *p->cand);
        for (size_t f = 0; f < k; f++)
            if (popcount((unsigned)r & cols[f]) % 2)
                p->cand[act[f]] = screen_high(s, act[f]);
        int rc = plan_try(p);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- refinement -------------------------------------------------------------- */

/* Paired moves: every level pair of knobs a and b around best. */
static int plan_grid(plan *p, const size_t *best, size_t a, size_t b)
{
    for (size_t va = 0; va < p->s->levels[a].n; va++)
        for (size_t vb = 0; vb < p->s->levels[b].n; vb++) {
            memcpy(p->cand, best, p->s->n_knobs * sizeof *p->cand);
            p->cand[a] = va;
            p->cand[b] = vb;
            int rc = plan_try(p);
            if (rc != 0)
                return rc;
        }
    return 0;
}

/* Whether cand is a measured setting. */
static int measured(const plan *p, const size_t *cand)
{
    size_t n = p->s->n_knobs;
    for (size_t i = 0; i < p->h->n_obs; i++)
        if (!memcmp(p->h->setting + i * n, cand, n * sizeof *cand))
            return 1;
    return 0;
}

/* Whether every level pair of knobs a and b was measured around some
 * measured setting: then the pair's grid is known, and the levels and
 * local phases follow the best from there. */
static int pair_explored(plan *p, size_t a, size_t b)
{
    size_t n = p->s->n_knobs;
    for (size_t i = 0; i < p->h->n_obs; i++) {
        int all = 1;
        for (size_t va = 0; all && va < p->s->levels[a].n; va++)
            for (size_t vb = 0; all && vb < p->s->levels[b].n; vb++) {
                memcpy(p->cand, p->h->setting + i * n, n * sizeof *p->cand);
                p->cand[a] = va;
                p->cand[b] = vb;
                all = measured(p, p->cand);
            }
        if (all)
            return 1;
    }
    return 0;
}

/* A faster-together pair of levels first: every level of each knob with
 * the other at its level of the pair (the cross through that cell). */
static int plan_cross(plan *p, const size_t *best, const cuco_effect *ef)
{
    for (int side = 0; side < 2 && ef->interaction < 0; side++) {
        size_t k = side ? ef->other : ef->knob, o = side ? ef->knob : ef->other;
        size_t ov = side ? ef->level : ef->other_level;
        for (size_t v = 0; v < p->s->levels[k].n; v++) {
            memcpy(p->cand, best, p->s->n_knobs * sizeof *p->cand);
            p->cand[k] = v;
            p->cand[o] = ov;
            int rc = plan_try(p);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int pair_clear(const cuco_effect *ef)
{
    double c = fabs(ef->interaction);
    return c >= PAIR_MIN_LOG && !(c < PAIR_MIN_SE * ef->interaction_se);
}

static int plan_pairs(plan *p, const size_t *best, const cuco_effects *fx)
{
    size_t done[MAX_PAIRS][2], n_done = 0;
    for (size_t i = 0; fx && i < fx->n_pairs && n_done < MAX_PAIRS; i++) {
        const cuco_effect *ef = &fx->pairs[i];
        size_t a = ef->knob < ef->other ? ef->knob : ef->other;
        size_t b = ef->knob < ef->other ? ef->other : ef->knob;
        int dup = 0;
        for (size_t d = 0; d < n_done; d++)
            dup |= done[d][0] == a && done[d][1] == b;
        if (dup || !pair_clear(ef) || !active(p->s, a) || !active(p->s, b) ||
            pair_explored(p, a, b))
            continue;
        done[n_done][0] = a;
        done[n_done++][1] = b;
        int rc = plan_cross(p, best, ef);
        if (rc == 0)
            rc = plan_grid(p, best, a, b);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Knob order for multi-level moves: strongest main effect first. */
static void knob_order(const cuco_doe_space *s, const cuco_effects *fx, size_t *order)
{
    double *strength = calloc(s->n_knobs + 1, sizeof *strength);
    for (size_t k = 0; k < s->n_knobs; k++)
        order[k] = k;
    for (size_t i = 0; strength && fx && i < fx->n_mains; i++) {
        double v = fabs(log1p(fx->mains[i].alone));
        if (v > strength[fx->mains[i].knob])
            strength[fx->mains[i].knob] = v;
    }
    for (size_t i = 1; strength && i < s->n_knobs; i++)
        for (size_t j = i; j > 0 && strength[order[j]] > strength[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    free(strength);
}

static int plan_levels(plan *p, const size_t *best, const size_t *order)
{
    for (size_t i = 0; i < p->s->n_knobs; i++) {
        size_t k = order[i];
        for (size_t v = 0; active(p->s, k) && v < p->s->levels[k].n; v++) {
            memcpy(p->cand, best, p->s->n_knobs * sizeof *p->cand);
            p->cand[k] = v;
            int rc = plan_try(p);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int plan_local(plan *p, const size_t *best, const size_t *order)
{
    for (size_t i = 0; i < p->s->n_knobs; i++)
        for (size_t j = i + 1; j < p->s->n_knobs; j++) {
            if (!active(p->s, order[i]) || !active(p->s, order[j]))
                continue;
            int rc = plan_grid(p, best, order[i], order[j]);
            if (rc != 0)
                return rc;
        }
    return 0;
}

/* The measured setting with the lowest time (the first of equals). */
static const size_t *best_setting(const cuco_doe_space *s, const cuco_doe_history *h)
{
    size_t best = 0;
    for (size_t i = 1; i < h->n_obs; i++)
        if (h->time_ms[i] < h->time_ms[best])
            best = i;
    return h->n_obs ? h->setting + best * s->n_knobs : s->start;
}

static int plan_refine(plan *p, const char **phase)
{
    cuco_effects *fx = NULL;
    size_t *order = malloc((p->s->n_knobs + 1) * sizeof *order);
    if (!order)
        return cuco_err_set(p->e, CUCO_ENOMEM, "out of memory");
    int rc = 0;
    if (p->h->n_obs >= 2)
        rc = cuco_effects_compute(p->s, p->h->setting, p->h->time_ms, p->h->n_obs, &fx, p->e);
    const size_t *best = best_setting(p->s, p->h);
    knob_order(p->s, fx, order);
    if (rc == 0 && (rc = plan_pairs(p, best, fx)) > 0)
        *phase = "knob:pair";
    else if (rc == 0 && (rc = plan_levels(p, best, order)) > 0)
        *phase = "knob:level";
    else if (rc == 0 && (rc = plan_local(p, best, order)) > 0)
        *phase = "knob:local";
    cuco_effects_free(fx);
    free(order);
    return rc;
}

int cuco_doe_next(const cuco_doe_space *s, const cuco_doe_history *h, size_t *setting,
                  const char **phase, cuco_err *e)
{
    *phase = NULL;
    size_t *cand = malloc((s->n_knobs + 1) * sizeof *cand);
    if (!cand)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    plan p = {s, h, cand, setting, 0, e};
    int rc = plan_screen(&p);
    if (rc > 0)
        *phase = "knob:screen";
    else if (rc == 0)
        rc = plan_refine(&p, phase);
    free(cand);
    if (rc < 0)
        return cuco_err_prefix(e, "knob search plan");
    return p.found;
}
