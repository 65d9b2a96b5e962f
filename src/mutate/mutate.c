/* mutate.c: the seeded PRNG, the UCB1 bandit, and the built-in mutators:
 * the offline knob mutator and two test-only mutators (see mutate.h). */
#include "cuco/mutate.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/doe.h"
#include "cuco/patch.h"
#include "cuco/program.h"

/* ---- PRNG ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cuco_rng_seed(cuco_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t cuco_rng_next(cuco_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cuco_rng_uniform(cuco_rng *r)
{
    return (double)(cuco_rng_next(r) >> 11) * 0x1.0p-53;
}

size_t cuco_rng_below(cuco_rng *r, size_t n)
{
    return n ? (size_t)(cuco_rng_next(r) % n) : 0;
}

size_t cuco_ucb1_pick(const double *reward_sum, const int *pulls, size_t n, double c)
{
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        if (pulls[i] == 0)
            return i;
        total += pulls[i];
    }
    size_t best = 0;
    double bv = -1e300;
    for (size_t i = 0; i < n; i++) {
        double v = reward_sum[i] / pulls[i] + c * sqrt(2.0 * log((double)total) / pulls[i]);
        if (v > bv) {
            bv = v;
            best = i;
        }
    }
    return best;
}

void cuco_mutation_free(cuco_mutation *m)
{
    free(m->text);
    free(m->patch_type);
    free(m->description);
    memset(m, 0, sizeof *m);
}

int cuco_knobs_json(const char *text, char **json, cuco_err *e)
{
    cuco_knob *k;
    size_t n;
    *json = NULL;
    int rc = cuco_program_knobs(text, &k, &n, e);
    if (rc < 0)
        return rc;
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        json_object_set_new(o, k[i].name, json_string(k[i].value));
    cuco_knobs_free(k, n);
    *json = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return *json ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

/* ---- the knob mutator ---------------------------------------------------- */

enum { MOVE_NEIGHBOUR, MOVE_RANDOM, MOVE_MULTI, MOVE_CROSSOVER, N_MOVES };
static const char *const move_names[N_MOVES] = {"knob:neighbour", "knob:random", "knob:multi",
                                                "knob:crossover"};

/* Rebuilds the bandit from the run's finished knob children ps[0..n) (the
 * run's programs in id order): reward 1 when the child beat its parent's
 * score. */
static void bandit_rebuild(const cuco_db_program *ps, size_t n, double *sum, int *pulls)
{
    memset(pulls, 0, N_MOVES * sizeof *pulls);
    memset(sum, 0, N_MOVES * sizeof *sum);
    for (size_t i = 0; i < n; i++) {
        if (!ps[i].patch_type || !ps[i].status || !strcmp(ps[i].status, "pending"))
            continue;
        int mv = -1;
        for (int k = 0; k < N_MOVES; k++)
            if (!strcmp(ps[i].patch_type, move_names[k]))
                mv = k;
        if (mv < 0)
            continue;
        double parent_score = -1;
        for (size_t j = 0; j < i; j++)
            if (ps[j].id == ps[i].parent_id)
                parent_score = ps[j].score;
        pulls[mv]++;
        if (ps[i].score > 0 && ps[i].score > parent_score)
            sum[mv] += 1.0;
    }
}

/* Legal values of knob k (the workload's space dim of the same name wins). */
static const cuco_strlist *knob_choices(const cuco_mutate_ctx *c, const cuco_knob *k)
{
    if (c->workload)
        for (size_t i = 0; i < c->workload->n_space; i++)
            if (!strcmp(c->workload->space[i].name, k->name) && c->workload->space[i].values.n)
                return &c->workload->space[i].values;
    return &k->choices;
}

static size_t index_of(const cuco_strlist *l, const char *v)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->items[i], v))
            return i;
    return (size_t)-1;
}

/* Builds the child text from the parent with setting idx[] (knob order). */
static int apply_setting(const char *parent, cuco_knob *k, size_t n, const cuco_mutate_ctx *c,
                         const size_t *idx, char **out, cuco_err *e)
{
    char *cur = cuco_strdup(parent);
    if (!cur)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const cuco_strlist *ch = knob_choices(c, &k[i]);
        const char *v = ch->items[idx[i]];
        if (!strcmp(v, k[i].value))
            continue;
        char *next;
        int rc = cuco_program_set_knob(cur, k[i].name, v, &next, e);
        free(cur);
        if (rc < 0)
            return rc;
        cur = next;
    }
    *out = cur;
    return 0;
}

/* Knobs JSON of setting idx (same form as cuco_knobs_json). */
static char *setting_json(cuco_knob *k, size_t n, const cuco_mutate_ctx *c, const size_t *idx)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        json_object_set_new(o, k[i].name, json_string(knob_choices(c, &k[i])->items[idx[i]]));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static int setting_seen(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const size_t *idx,
                        int *seen, cuco_err *e)
{
    *seen = 0;
    if (!c->db)
        return 0;
    char *j = setting_json(k, n, c, idx);
    if (!j)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = db_program_knobs_seen(c->db, c->run_id, j, seen, e);
    free(j);
    return rc;
}

/* Whether v is one of the comma-separated values of list. */
static int value_listed(const char *list, const char *v)
{
    size_t len = strlen(v);
    for (const char *p = list; p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && !strncmp(p, v, len))
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* Whether every condition of knob i ("NAME=V1,V2" after 'when') holds at
 * setting idx: the named knob's value there is one listed. A condition on a
 * knob the program does not declare holds. */
static int knob_conditions_hold(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, size_t i,
                                const size_t *idx)
{
    for (size_t w = 0; w < k[i].when.n; w++) {
        const char *cond = k[i].when.items[w], *eq = strchr(cond, '=');
        size_t len = (size_t)(eq - cond);
        for (size_t j = 0; j < n; j++)
            if (strlen(k[j].name) == len && !strncmp(k[j].name, cond, len) &&
                !value_listed(eq + 1, knob_choices(c, &k[j])->items[idx[j]]))
                return 0;
    }
    return 1;
}

/* Coverage of the run so far: tried[i] is a bitmap (one byte per choice) of
 * the values of knob i that some program of the run, ps[0..np) (any
 * status), has had; the parent's own setting base[] counts as tried, and so
 * does every value of a knob moot at base (its 'when' conditions fail
 * there). Used so that with a small budget every knob that matters is
 * varied before any is varied twice. tried[i] is NULL for a knob with one
 * choice. */
static int knob_coverage(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const size_t *base,
                         const cuco_db_program *ps, size_t np, unsigned char **tried, cuco_err *e)
{
    for (size_t i = 0; i < n; i++) {
        size_t nc = knob_choices(c, &k[i])->n;
        tried[i] = nc > 1 ? calloc(nc, 1) : NULL;
        if (nc > 1 && !tried[i])
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        if (tried[i] && base[i] < nc)
            tried[i][base[i]] = 1;
    }
    for (size_t p = 0; p < np; p++) {
        json_t *o = ps[p].knobs_json ? json_loads(ps[p].knobs_json, 0, NULL) : NULL;
        for (size_t i = 0; o && i < n; i++) {
            const char *v = json_string_value(json_object_get(o, k[i].name));
            size_t at = v ? index_of(knob_choices(c, &k[i]), v) : (size_t)-1;
            if (tried[i] && at != (size_t)-1)
                tried[i][at] = 1;
        }
        json_decref(o);
    }
    for (size_t i = 0; i < n; i++)
        if (tried[i] && !knob_conditions_hold(c, k, n, i, base))
            memset(tried[i], 1, knob_choices(c, &k[i])->n);
    return 0;
}

/* A knob moot at setting idx keeps its value in base (settings that differ
 * only in moot knobs are the same program in effect). */
static void hold_moot_knobs(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const size_t *base,
                            size_t *idx)
{
    for (size_t i = 0; i < n; i++)
        if (!knob_conditions_hold(c, k, n, i, idx))
            idx[i] = base[i];
}

static size_t untried_count(const unsigned char *tried, size_t nc)
{
    size_t u = 0;
    for (size_t v = 0; tried && v < nc; v++)
        u += !tried[v];
    return u;
}

/* The knob a move changes first: at random among the knobs with the fewest
 * values tried in the run that still have an untried one, so that with a
 * small budget every knob is varied before any is varied again; uniform
 * once every value of every knob has been tried. */
static size_t pick_knob(const cuco_mutate_ctx *c, cuco_knob *k, size_t n,
                        unsigned char *const *tried)
{
    size_t fewest = (size_t)-1, ties = 0, which = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nc = knob_choices(c, &k[i])->n, u = untried_count(tried[i], nc);
        if (!u)
            continue;
        if (nc - u < fewest) {
            fewest = nc - u;
            ties = 0;
        }
        if (nc - u == fewest && cuco_rng_below(c->rng, ++ties) == 0)
            which = i;
    }
    return fewest != (size_t)-1 ? which : cuco_rng_below(c->rng, n);
}

/* An untried value of knob i at random, or any value when all were tried. */
static size_t pick_value(const cuco_mutate_ctx *c, const unsigned char *tried, size_t nc)
{
    size_t u = untried_count(tried, nc);
    if (!u)
        return cuco_rng_below(c->rng, nc);
    size_t nth = cuco_rng_below(c->rng, u);
    for (size_t v = 0; v < nc; v++)
        if (!tried[v] && nth-- == 0)
            return v;
    return 0;
}

/* One move from the parent's setting base[] into idx[]. */
static void make_move(int mv, const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const size_t *base,
                      const size_t *second, unsigned char *const *tried, size_t *idx)
{
    memcpy(idx, base, n * sizeof *idx);
    size_t which = pick_knob(c, k, n, tried);
    size_t nc = knob_choices(c, &k[which])->n;
    switch (mv) {
    case MOVE_NEIGHBOUR:
        if (idx[which] == 0)
            idx[which] = nc > 1 ? 1 : 0;
        else if (idx[which] + 1 >= nc)
            idx[which] = idx[which] - 1;
        else
            idx[which] += cuco_rng_below(c->rng, 2) ? 1 : (size_t)-1;
        break;
    case MOVE_RANDOM:
        idx[which] = pick_value(c, tried[which], nc);
        break;
    case MOVE_MULTI:
        for (size_t i = 0; i < n; i++)
            if (i == which || cuco_rng_below(c->rng, 2))
                idx[i] = i == which ? pick_value(c, tried[i], nc)
                                    : cuco_rng_below(c->rng, knob_choices(c, &k[i])->n);
        break;
    case MOVE_CROSSOVER:
        for (size_t i = 0; i < n; i++)
            if (second && cuco_rng_below(c->rng, 2))
                idx[i] = second[i];
        if (!second || !memcmp(idx, base, n * sizeof *idx))
            idx[which] = cuco_rng_below(c->rng, nc);
        break;
    }
}

/* Parent's setting as choice indices (a value outside the choices maps to 0). */
static void setting_of(const cuco_mutate_ctx *c, const char *text, cuco_knob *k, size_t n,
                       size_t *idx)
{
    cuco_knob *pk;
    size_t pn;
    cuco_err e = CUCO_ERR_INIT;
    for (size_t i = 0; i < n; i++)
        idx[i] = index_of(knob_choices(c, &k[i]), k[i].value);
    if (text && cuco_program_knobs(text, &pk, &pn, &e) == 0) {
        for (size_t i = 0; i < n && i < pn; i++)
            if (!strcmp(pk[i].name, k[i].name))
                idx[i] = index_of(knob_choices(c, &k[i]), pk[i].value);
        cuco_knobs_free(pk, pn);
    }
    cuco_err_clear(&e);
    for (size_t i = 0; i < n; i++)
        if (idx[i] == (size_t)-1)
            idx[i] = 0;
}

/* ---- the structured search (doe.h) ------------------------------------------ */

static int ident_char(char ch)
{
    return ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
}

/* Length of the comment, string or character literal at p (0: none). */
static size_t skip_len(const char *p)
{
    const char *q = p;
    if (p[0] == '/' && p[1] == '/') {
        while (*q && *q != '\n')
            q++;
    } else if (p[0] == '/' && p[1] == '*') {
        q = strstr(p + 2, "*/");
        q = q ? q + 2 : p + strlen(p);
    } else if (*p == '"' || *p == '\'') {
        for (q = p + 1; *q && *q != *p && *q != '\n'; q++)
            if (*q == '\\' && q[1])
                q++;
        q += *q == *p;
    }
    return (size_t)(q - p);
}

/* Whether the program can read knob name: its macro appears, as code (not
 * in a comment or string), somewhere other than its own #define; a workload
 * space dim of that name counts as read, since the harness may pass it.
 * Whether a read knob matters under the others' values is
 * knob_conditions_hold's question. */
static int knob_reachable(const cuco_mutate_ctx *c, const char *text, const char *name)
{
    if (c->workload)
        for (size_t i = 0; i < c->workload->n_space; i++)
            if (!strcmp(c->workload->space[i].name, name))
                return 1;
    size_t len = strlen(name), uses = 0;
    for (const char *p = text; *p;) {
        size_t skip = skip_len(p);
        if (skip) {
            p += skip;
        } else if (ident_char(*p)) {
            const char *q = p;
            while (ident_char(*q))
                q++;
            uses += (size_t)(q - p) == len && !strncmp(p, name, len);
            p = q;
        } else {
            p++;
        }
    }
    return uses >= 2;
}

/* Setting of a program's knobs JSON as choice indices; 0 when a knob is
 * missing or has a value outside its choices. */
static int setting_of_json(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const char *json,
                           size_t *idx)
{
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    int whole = o != NULL;
    for (size_t i = 0; i < n; i++) {
        const char *v = o ? json_string_value(json_object_get(o, k[i].name)) : NULL;
        idx[i] = v ? index_of(knob_choices(c, &k[i]), v) : (size_t)-1;
        if (idx[i] == (size_t)-1) {
            idx[i] = 0;
            whole = 0;
        }
    }
    json_decref(o);
    return whole;
}

typedef struct doe_seen_ctx {
    const cuco_mutate_ctx *c;
    cuco_knob *k;
    size_t n;
} doe_seen_ctx;

static int doe_seen(void *ctx, const size_t *setting, int *seen, cuco_err *e)
{
    doe_seen_ctx *d = ctx;
    return setting_seen(d->c, d->k, d->n, setting, seen, e);
}

/* The next setting of the structured search into idx (1), or 0 when its
 * plan has nothing new (the moves below take over). */
static int doe_propose(const cuco_mutate_ctx *c, cuco_knob *k, size_t n, const cuco_db_program *ps,
                       size_t np, size_t *idx, const char **phase, cuco_err *e)
{
    const char **names = calloc(n, sizeof *names);
    cuco_strlist *levels = calloc(n, sizeof *levels);
    size_t *start = calloc(n, sizeof *start), *setting = calloc(n * (np + 1), sizeof *setting);
    double *time = calloc(np + 1, sizeof *time);
    int *act = calloc(n, sizeof *act), rc = 0, have_start = 0;
    size_t n_obs = 0;
    if (!names || !levels || !start || !setting || !time || !act) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = k[i].name;
        levels[i] = *knob_choices(c, &k[i]);
        act[i] = knob_reachable(c, c->parent->code, k[i].name);
    }
    setting_of(c, c->parent->code, k, n, start);
    for (size_t i = 0; i < np; i++) {
        if (!have_start && ps[i].knobs_json) {
            setting_of_json(c, k, n, ps[i].knobs_json, start);
            have_start = 1;
        }
        if (ps[i].status && !strcmp(ps[i].status, "ok") && ps[i].time_ms > 0 &&
            !cuco_effects_repeat(ps, i) &&
            setting_of_json(c, k, n, ps[i].knobs_json, setting + n_obs * n))
            time[n_obs++] = ps[i].time_ms;
    }
    /* a conditional knob moot at the start is held there, like an unread one */
    for (size_t i = 0; i < n; i++)
        act[i] = act[i] && knob_conditions_hold(c, k, n, i, start);
    cuco_doe_space s = {n, names, levels, start, act};
    doe_seen_ctx sc = {c, k, n};
    cuco_doe_history h = {n_obs, setting, time, doe_seen, &sc};
    rc = cuco_doe_next(&s, &h, idx, phase, e);
out:
    free(names);
    free(levels);
    free(start);
    free(setting);
    free(time);
    free(act);
    return rc;
}

static int knob_propose(cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out, cuco_err *e)
{
    (void)m;
    memset(out, 0, sizeof *out);
    cuco_knob *k;
    size_t n;
    int rc = cuco_program_knobs(c->parent->code, &k, &n, e);
    if (rc < 0)
        return rc;
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        size_t nc = knob_choices(c, &k[i])->n;
        if (nc == 0) {
            cuco_knobs_free(k, n);
            return cuco_err_set(e, CUCO_EINVAL, "knob %s has no legal values", k[i].name);
        }
        total = total > ((size_t)1 << 40) / nc ? ((size_t)1 << 40) : total * nc;
    }
    if (n == 0) {
        cuco_knobs_free(k, n);
        out->exhausted = 1;
        return cuco_err_set(e, CUCO_ENOTFOUND, "the program declares no knobs");
    }
    size_t *base = calloc(n, sizeof *base), *sec = calloc(n, sizeof *sec),
           *idx = calloc(n, sizeof *idx);
    unsigned char **tried = calloc(n, sizeof *tried);
    cuco_db_program *ps = NULL; /* the run's programs: for the bandit and the coverage */
    size_t np = 0;
    double sum[N_MOVES];
    int pulls[N_MOVES];
    int mv = 0, found = 0, seen = 0;
    if (!base || !sec || !idx || !tried) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    setting_of(c, c->parent->code, k, n, base);
    if (c->second)
        setting_of(c, c->second->code, k, n, sec);
    if (c->db && (rc = db_programs_list(c->db, c->run_id, NULL, &ps, &np, e)) < 0)
        goto out;
    const char *phase = NULL;
    if ((rc = doe_propose(c, k, n, ps, np, idx, &phase, e)) < 0)
        goto out;
    found = rc > 0;
    rc = 0;
    bandit_rebuild(ps, np, sum, pulls);
    if ((rc = knob_coverage(c, k, n, base, ps, np, tried, e)) < 0)
        goto out;
    if (!c->second)
        pulls[MOVE_CROSSOVER] = pulls[MOVE_CROSSOVER] ? pulls[MOVE_CROSSOVER] : 1;
    mv = (int)cuco_ucb1_pick(sum, pulls, c->second ? N_MOVES : N_MOVES - 1, c->exploit ? 0.5 : 1.5);
    for (int attempt = 0; attempt < 64 && !found; attempt++) {
        make_move(mv, c, k, n, base, c->second ? sec : NULL, tried, idx);
        hold_moot_knobs(c, k, n, base, idx);
        if ((rc = setting_seen(c, k, n, idx, &seen, e)) < 0)
            goto out;
        found = !seen;
    }
    if (!found && total <= 1000000) {
        /* systematic scan from a random start: any unseen setting */
        size_t start = cuco_rng_below(c->rng, total);
        for (size_t t = 0; t < total && !found; t++) {
            size_t code = (start + t) % total;
            for (size_t i = 0; i < n; i++) {
                size_t nc = knob_choices(c, &k[i])->n;
                idx[i] = code % nc;
                code /= nc;
            }
            hold_moot_knobs(c, k, n, base, idx);
            if ((rc = setting_seen(c, k, n, idx, &seen, e)) < 0)
                goto out;
            found = !seen;
        }
        mv = MOVE_RANDOM;
        if (!found) {
            out->exhausted = 1;
            rc = cuco_err_set(e, CUCO_ENOTFOUND, "space exhausted: all %zu knob settings tried",
                              total);
            goto out;
        }
    } else if (!found) {
        rc = cuco_err_set(e, CUCO_ENOTFOUND, "no new knob setting found in 64 tries");
        goto out;
    }
    if ((rc = apply_setting(c->parent->code, k, n, c, idx, &out->text, e)) < 0)
        goto out;
    cuco_buf d = CUCO_BUF_INIT;
    for (size_t i = 0; i < n; i++)
        cuco_buf_printf(&d, "%s%s=%s", i ? " " : "", k[i].name,
                        knob_choices(c, &k[i])->items[idx[i]]);
    out->description = cuco_buf_detach(&d);
    out->patch_type = cuco_strdup(phase ? phase : move_names[mv]);
out:
    db_programs_free(ps, np);
    for (size_t i = 0; tried && i < n; i++)
        free(tried[i]);
    free(tried);
    free(base);
    free(sec);
    free(idx);
    cuco_knobs_free(k, n);
    if (rc < 0) {
        int ex = out->exhausted;
        cuco_mutation_free(out);
        out->exhausted = ex;
    }
    return rc;
}

/* ---- test-only mutators --------------------------------------------------- */

static int garbage_propose(cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out,
                           cuco_err *e)
{
    (void)m;
    memset(out, 0, sizeof *out);
    /* an answer with no usable edit, as a confused model might give */
    static const char answer[] = "I think the code is fine.\n<<<<<<< SEARCH\nno such line\n";
    int rc = cuco_patch_apply_diff(c->parent->code, answer, &out->text, e);
    if (rc == 0) {
        cuco_mutation_free(out);
        return cuco_err_set(e, CUCO_EINVAL, "test_garbage: the garbage applied");
    }
    return rc;
}

static int outside_propose(cuco_mutator *m, const cuco_mutate_ctx *c, cuco_mutation *out,
                           cuco_err *e)
{
    (void)m;
    memset(out, 0, sizeof *out);
    char *s = cuco_sprintf("/* edited outside the blocks %llu */\n%s",
                           (unsigned long long)cuco_rng_next(c->rng), c->parent->code);
    if (!s)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    out->text = s;
    out->patch_type = cuco_strdup("rewrite");
    out->description = cuco_strdup("test_outside: a comment above the first line");
    return 0;
}

int cuco_mutator_create(const char *name, cuco_mutator **out, cuco_err *e)
{
    *out = NULL;
    int (*fn)(cuco_mutator *, const cuco_mutate_ctx *, cuco_mutation *, cuco_err *) = NULL;
    const char *nm = NULL;
    if (!strcmp(name, "knob")) {
        fn = knob_propose;
        nm = "knob";
    } else if (!strcmp(name, "test_garbage")) {
        fn = garbage_propose;
        nm = "test_garbage";
    } else if (!strcmp(name, "test_outside")) {
        fn = outside_propose;
        nm = "test_outside";
    } else {
        return cuco_err_set(e, CUCO_ENOTFOUND,
                            "unknown mutator '%s' (built in: knob, test_garbage, test_outside)",
                            name);
    }
    cuco_mutator *m = calloc(1, sizeof *m);
    if (!m)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    m->name = nm;
    m->propose = fn;
    *out = m;
    return 0;
}

void cuco_mutator_free(cuco_mutator *m)
{
    if (!m)
        return;
    if (m->destroy)
        m->destroy(m);
    free(m);
}
