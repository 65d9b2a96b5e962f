/* doe_effects.c: the effects table (see doe.h): least-squares fits of log
 * time over a run's measured knob settings, main effects and the strongest
 * two-knob interactions with their spread, and the table as text for
 * `cuco report` and the LLM mutators' prompt. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/doe.h"

/* ---- least squares -------------------------------------------------------- */

/* Inverts the r x r symmetric positive definite a in place (Gauss-Jordan);
 * -1 when singular. */
static int invert(double *a, size_t r)
{
    for (size_t c = 0; c < r; c++) {
        double piv = a[c * r + c];
        if (!(fabs(piv) > 1e-300))
            return -1;
        a[c * r + c] = 1.0;
        for (size_t j = 0; j < r; j++)
            a[c * r + j] /= piv;
        for (size_t i = 0; i < r; i++) {
            if (i == c)
                continue;
            double f = a[i * r + c];
            a[i * r + c] = 0.0;
            for (size_t j = 0; j < r; j++)
                a[i * r + j] -= f * a[c * r + j];
        }
    }
    return 0;
}

/* A fit of y over the columns of x (n rows x p, row-major): keep[j] = 0 for
 * a column within rounding of the span of the kept ones before it; beta[j]
 * its coefficient (0 when dropped), cov[j*p+k] the unscaled covariance
 * (X'X)^-1 over the kept columns. */
typedef struct lsq {
    size_t n, p, rank;
    int *keep;
    double *beta, *cov, rss;
} lsq;

static void lsq_free(lsq *f)
{
    free(f->keep);
    free(f->beta);
    free(f->cov);
    memset(f, 0, sizeof *f);
}

/* Marks the independent columns (Gram-Schmidt on a copy). */
static int lsq_select(const double *x, size_t n, size_t p, int *keep, size_t *rank)
{
    double *q = malloc((n * p + 1) * sizeof *q), *v = malloc((n + 1) * sizeof *v);
    if (!q || !v) {
        free(q);
        free(v);
        return -1;
    }
    size_t r = 0;
    for (size_t j = 0; j < p; j++) {
        double norm0 = 0, norm = 0;
        for (size_t i = 0; i < n; i++) {
            v[i] = x[i * p + j];
            norm0 += v[i] * v[i];
        }
        for (size_t b = 0; b < r; b++) {
            double d = 0;
            for (size_t i = 0; i < n; i++)
                d += q[b * n + i] * v[i];
            for (size_t i = 0; i < n; i++)
                v[i] -= d * q[b * n + i];
        }
        for (size_t i = 0; i < n; i++)
            norm += v[i] * v[i];
        keep[j] = norm0 > 0 && norm > 1e-18 * norm0 && norm > 1e-20;
        if (keep[j]) {
            for (size_t i = 0; i < n; i++)
                q[r * n + i] = v[i] / sqrt(norm);
            r++;
        }
    }
    free(q);
    free(v);
    *rank = r;
    return 0;
}

static int lsq_fit(const double *x, size_t n, size_t p, const double *y, lsq *f)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->p = p;
    f->keep = calloc(p + 1, sizeof *f->keep);
    f->beta = calloc(p + 1, sizeof *f->beta);
    f->cov = calloc(p * p + 1, sizeof *f->cov);
    size_t *col = malloc((p + 1) * sizeof *col);
    double *a = NULL;
    if (!f->keep || !f->beta || !f->cov || !col || lsq_select(x, n, p, f->keep, &f->rank) < 0)
        goto fail;
    size_t r = 0;
    for (size_t j = 0; j < p; j++)
        if (f->keep[j])
            col[r++] = j;
    a = calloc(r * r + 1, sizeof *a);
    if (!a)
        goto fail;
    for (size_t s = 0; s < r; s++)
        for (size_t t = 0; t < r; t++)
            for (size_t i = 0; i < n; i++)
                a[s * r + t] += x[i * p + col[s]] * x[i * p + col[t]];
    if (invert(a, r) < 0)
        goto fail;
    for (size_t s = 0; s < r; s++) {
        double b = 0;
        for (size_t t = 0; t < r; t++) {
            double xty = 0;
            for (size_t i = 0; i < n; i++)
                xty += x[i * p + col[t]] * y[i];
            b += a[s * r + t] * xty;
            f->cov[col[s] * p + col[t]] = a[s * r + t];
        }
        f->beta[col[s]] = b;
    }
    for (size_t i = 0; i < n; i++) {
        double fit = 0;
        for (size_t j = 0; j < p; j++)
            fit += x[i * p + j] * f->beta[j];
        f->rss += (y[i] - fit) * (y[i] - fit);
    }
    free(a);
    free(col);
    return 0;
fail:
    free(a);
    free(col);
    lsq_free(f);
    return -1;
}

/* Residual sd of a fit (NAN without degrees of freedom). */
static double lsq_sigma(const lsq *f)
{
    return f->n > f->rank ? sqrt(f->rss / (double)(f->n - f->rank)) : NAN;
}

/* ---- the design matrix ------------------------------------------------------ */

/* Column j > 0 of the main-effects matrix is (knob[j], level[j]), a level
 * other than the knob's start that some measured program has; column 0 is
 * the intercept. */
typedef struct columns {
    size_t n, *knob, *level;
} columns;

static int columns_build(const cuco_doe_space *s, const size_t *setting, size_t n_obs, columns *c)
{
    size_t cap = 1;
    for (size_t k = 0; k < s->n_knobs; k++)
        cap += s->levels[k].n;
    c->n = 1;
    c->knob = calloc(cap, sizeof *c->knob);
    c->level = calloc(cap, sizeof *c->level);
    if (!c->knob || !c->level)
        return -1;
    for (size_t k = 0; k < s->n_knobs; k++)
        for (size_t v = 0; v < s->levels[k].n; v++) {
            int used = 0;
            for (size_t i = 0; i < n_obs && !used && v != s->start[k]; i++)
                used = setting[i * s->n_knobs + k] == v;
            if (used) {
                c->knob[c->n] = k;
                c->level[c->n++] = v;
            }
        }
    return 0;
}

/* Fills the n_obs x (c->n + extra) matrix; the extra column, when asked, is
 * the product of knob ka at level va and knob kb at level vb. */
static double *design(const cuco_doe_space *s, const size_t *setting, size_t n_obs,
                      const columns *c, int extra, size_t ka, size_t va, size_t kb, size_t vb)
{
    size_t p = c->n + (extra ? 1 : 0);
    double *x = calloc(n_obs * p + 1, sizeof *x);
    for (size_t i = 0; x && i < n_obs; i++) {
        const size_t *row = setting + i * s->n_knobs;
        x[i * p] = 1.0;
        for (size_t j = 1; j < c->n; j++)
            x[i * p + j] = row[c->knob[j]] == c->level[j];
        if (extra)
            x[i * p + c->n] = row[ka] == va && row[kb] == vb;
    }
    return x;
}

/* ---- the effects ------------------------------------------------------------ */

static double frac(double b)
{
    return expm1(b);
}
static double frac_se(double b, double se)
{
    return exp(b) * se;
}

static int effect_names(const cuco_doe_space *s, cuco_effect *ef, int pair)
{
    ef->name = cuco_strdup(s->names[ef->knob]);
    ef->value = cuco_strdup(s->levels[ef->knob].items[ef->level]);
    if (!pair)
        return ef->name && ef->value ? 0 : -1;
    ef->other_name = cuco_strdup(s->names[ef->other]);
    ef->other_value = cuco_strdup(s->levels[ef->other].items[ef->other_level]);
    return ef->name && ef->value && ef->other_name && ef->other_value ? 0 : -1;
}

static int mains_fill(const cuco_doe_space *s, const columns *c, const lsq *f, cuco_effects *fx)
{
    double sigma = lsq_sigma(f);
    fx->mains = calloc(c->n, sizeof *fx->mains);
    if (!fx->mains)
        return -1;
    for (size_t j = 1; j < c->n; j++) {
        if (!f->keep[j])
            continue;
        cuco_effect *ef = &fx->mains[fx->n_mains++];
        ef->knob = c->knob[j];
        ef->level = c->level[j];
        ef->other = (size_t)-1;
        double b = f->beta[j], se = sigma * sqrt(f->cov[j * f->p + j]);
        ef->alone = frac(b);
        ef->alone_se = frac_se(b, se);
        ef->with = ef->with_se = ef->interaction = ef->interaction_se = NAN;
        if (effect_names(s, ef, 0) < 0)
            return -1;
    }
    fx->df = f->n - f->rank;
    fx->sigma = sigma;
    return 0;
}

/* Index of the main-effects column of (knob, level), 0 when none. */
static size_t column_of(const columns *c, size_t knob, size_t level)
{
    for (size_t j = 1; j < c->n; j++)
        if (c->knob[j] == knob && c->level[j] == level)
            return j;
    return 0;
}

/* The interaction of (ka=va, kb=vb): the main-effects fit plus its product
 * column. Returns 1 with *ef filled, 0 when it cannot be estimated. */
static int pair_fit(const cuco_doe_space *s, const size_t *setting, const double *y, size_t n_obs,
                    const columns *c, size_t ka, size_t va, size_t kb, size_t vb, cuco_effect *ef)
{
    size_t ja = column_of(c, ka, va), jb = column_of(c, kb, vb), n_with = 0;
    for (size_t i = 0; i < n_obs; i++)
        n_with += setting[i * s->n_knobs + ka] == va && setting[i * s->n_knobs + kb] == vb;
    if (!ja || !jb || !n_with)
        return 0;
    double *x = design(s, setting, n_obs, c, 1, ka, va, kb, vb);
    lsq f;
    if (!x || lsq_fit(x, n_obs, c->n + 1, y, &f) < 0) {
        free(x);
        return -1;
    }
    free(x);
    size_t p = f.p, jc = c->n;
    int ok = f.keep[jc] && f.keep[ja] && f.keep[jb];
    if (ok) {
        /* the subject: the knob whose change alone matters less */
        size_t js = fabs(f.beta[ja]) <= fabs(f.beta[jb]) ? ja : jb;
        double sigma = lsq_sigma(&f), bs = f.beta[js], bc = f.beta[jc];
        double var_with = f.cov[js * p + js] + f.cov[jc * p + jc] + 2 * f.cov[js * p + jc];
        memset(ef, 0, sizeof *ef);
        ef->knob = c->knob[js];
        ef->level = c->level[js];
        ef->other = js == ja ? kb : ka;
        ef->other_level = js == ja ? vb : va;
        ef->alone = frac(bs);
        ef->alone_se = frac_se(bs, sigma * sqrt(f.cov[js * p + js]));
        ef->with = frac(bs + bc);
        ef->with_se = frac_se(bs + bc, sigma * sqrt(var_with > 0 ? var_with : 0));
        ef->interaction = bc;
        ef->interaction_se = sigma * sqrt(f.cov[jc * p + jc]);
        ef->n_with = n_with;
    }
    lsq_free(&f);
    return ok;
}

/* Keeps ef among the CUCO_EFFECTS_MAX_PAIRS strongest, strongest first. */
static void pairs_insert(cuco_effects *fx, const cuco_effect *ef)
{
    size_t at = fx->n_pairs;
    while (at > 0 && fabs(fx->pairs[at - 1].interaction) < fabs(ef->interaction))
        at--;
    if (at >= CUCO_EFFECTS_MAX_PAIRS)
        return;
    size_t last = fx->n_pairs < CUCO_EFFECTS_MAX_PAIRS ? fx->n_pairs : fx->n_pairs - 1;
    memmove(&fx->pairs[at + 1], &fx->pairs[at], (last - at) * sizeof *fx->pairs);
    fx->pairs[at] = *ef;
    if (fx->n_pairs < CUCO_EFFECTS_MAX_PAIRS)
        fx->n_pairs++;
}

static int pairs_fill(const cuco_doe_space *s, const size_t *setting, const double *y, size_t n_obs,
                      const columns *c, cuco_effects *fx)
{
    fx->pairs = calloc(CUCO_EFFECTS_MAX_PAIRS, sizeof *fx->pairs);
    if (!fx->pairs)
        return -1;
    for (size_t a = 1; a < c->n; a++)
        for (size_t b = a + 1; b < c->n; b++) {
            if (c->knob[a] == c->knob[b])
                continue;
            cuco_effect ef;
            int rc = pair_fit(s, setting, y, n_obs, c, c->knob[a], c->level[a], c->knob[b],
                              c->level[b], &ef);
            if (rc < 0)
                return -1;
            if (rc > 0)
                pairs_insert(fx, &ef);
        }
    for (size_t i = 0; i < fx->n_pairs; i++)
        if (effect_names(s, &fx->pairs[i], 1) < 0)
            return -1;
    return 0;
}

int cuco_effects_compute(const cuco_doe_space *s, const size_t *setting, const double *time_ms,
                         size_t n_obs, cuco_effects **out, cuco_err *e)
{
    *out = NULL;
    columns c = {0, NULL, NULL};
    double *y = malloc((n_obs + 1) * sizeof *y), *x = NULL;
    cuco_effects *fx = calloc(1, sizeof *fx);
    lsq f;
    memset(&f, 0, sizeof f);
    int rc = -1;
    if (!y || !fx || columns_build(s, setting, n_obs, &c) < 0)
        goto out;
    for (size_t i = 0; i < n_obs; i++) {
        if (!(time_ms[i] > 0)) {
            rc = cuco_err_set(e, CUCO_EINVAL, "effects: program %zu has no time", i);
            goto out;
        }
        y[i] = log(time_ms[i]);
    }
    fx->n_obs = n_obs;
    fx->sigma = NAN;
    if (n_obs == 0) {
        rc = 0;
        goto out;
    }
    x = design(s, setting, n_obs, &c, 0, 0, 0, 0, 0);
    if (!x || lsq_fit(x, n_obs, c.n, y, &f) < 0 || mains_fill(s, &c, &f, fx) < 0 ||
        pairs_fill(s, setting, y, n_obs, &c, fx) < 0)
        goto out;
    rc = 0;
out:
    if (rc == -1)
        rc = cuco_err_set(e, CUCO_ENOMEM, "effects: out of memory");
    if (rc == 0)
        *out = fx;
    else
        cuco_effects_free(fx);
    lsq_free(&f);
    free(x);
    free(y);
    free(c.knob);
    free(c.level);
    return rc;
}

static void effect_free(cuco_effect *ef)
{
    free(ef->name);
    free(ef->value);
    free(ef->other_name);
    free(ef->other_value);
}

void cuco_effects_free(cuco_effects *fx)
{
    if (!fx)
        return;
    for (size_t i = 0; i < fx->n_mains; i++)
        effect_free(&fx->mains[i]);
    for (size_t i = 0; i < fx->n_pairs; i++)
        effect_free(&fx->pairs[i]);
    free(fx->mains);
    free(fx->pairs);
    free(fx);
}

/* ---- the table as text ------------------------------------------------------- */

/* "+0.6% ± 0.4" (the spread "?" when unknown). */
static void put_change(cuco_buf *b, double f, double se)
{
    cuco_buf_printf(b, "%+.1f%%", 100.0 * f);
    if (isfinite(se))
        cuco_buf_printf(b, " ± %.1f", 100.0 * se);
    else
        cuco_buf_puts(b, " ± ?");
}

int cuco_effects_format(const cuco_effects *fx, const char *prefix, size_t max_pairs, cuco_buf *out)
{
    int rc = 0;
    for (size_t i = 0; fx && i < fx->n_mains && rc == 0; i++) {
        const cuco_effect *ef = &fx->mains[i];
        cuco_buf_printf(out, "%s%s=%s main effect ", prefix, ef->name, ef->value);
        put_change(out, ef->alone, ef->alone_se);
        rc = cuco_buf_putc(out, '\n');
    }
    for (size_t i = 0; fx && i < fx->n_pairs && i < max_pairs && rc == 0; i++) {
        const cuco_effect *ef = &fx->pairs[i];
        cuco_buf_printf(out, "%s%s=%s alone ", prefix, ef->name, ef->value);
        put_change(out, ef->alone, ef->alone_se);
        cuco_buf_printf(out, ", with %s=%s ", ef->other_name, ef->other_value);
        put_change(out, ef->with, ef->with_se);
        rc = cuco_buf_printf(out, " (%zu measured)\n", ef->n_with);
    }
    return rc < 0 ? rc : 0;
}

/* ---- from a run's database ------------------------------------------------- */

int cuco_effects_repeat(const cuco_db_program *ps, size_t i)
{
    for (size_t j = 0; j < i && ps[i].code_hash; j++)
        if (ps[j].code_hash && !strcmp(ps[j].code_hash, ps[i].code_hash))
            return 1;
    return 0;
}

/* A run's knob levels as measured: names from the first program with knobs,
 * its values as the start (level 0), the others in order of appearance. */
typedef struct run_space {
    size_t n;
    char **names;
    cuco_strlist *levels;
    size_t *start;
} run_space;

static void run_space_free(run_space *rs)
{
    for (size_t k = 0; k < rs->n; k++) {
        free(rs->names[k]);
        for (size_t v = 0; rs->levels && v < rs->levels[k].n; v++)
            free(rs->levels[k].items[v]);
        if (rs->levels)
            free(rs->levels[k].items);
    }
    free(rs->names);
    free(rs->levels);
    free(rs->start);
}

/* Level index of value v of knob k, added when new; (size_t)-1 on failure. */
static size_t run_space_level(run_space *rs, size_t k, const char *v)
{
    cuco_strlist *l = &rs->levels[k];
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->items[i], v))
            return i;
    char **grown = realloc(l->items, (l->n + 1) * sizeof *grown);
    if (!grown)
        return (size_t)-1;
    l->items = grown;
    if (!(l->items[l->n] = cuco_strdup(v)))
        return (size_t)-1;
    return l->n++;
}

static int run_space_init(run_space *rs, json_t *first)
{
    size_t n = json_object_size(first);
    rs->names = calloc(n + 1, sizeof *rs->names);
    rs->levels = calloc(n + 1, sizeof *rs->levels);
    rs->start = calloc(n + 1, sizeof *rs->start);
    if (!rs->names || !rs->levels || !rs->start)
        return -1;
    const char *key;
    json_t *val;
    json_object_foreach(first, key, val)
    {
        if (!(rs->names[rs->n] = cuco_strdup(key)))
            return -1;
        rs->n++;
        const char *v = json_string_value(val);
        if (run_space_level(rs, rs->n - 1, v ? v : "") == (size_t)-1)
            return -1;
    }
    return 0;
}

/* Appends program p's setting when it is measured and has every knob. */
static int run_obs_add(run_space *rs, const cuco_db_program *p, size_t **setting, double **time,
                       size_t *n_obs)
{
    if (!p->status || strcmp(p->status, "ok") || !(p->time_ms > 0) || !p->knobs_json)
        return 0;
    json_t *o = json_loads(p->knobs_json, 0, NULL);
    if (!o)
        return 0;
    size_t *s = realloc(*setting, (*n_obs + 1) * (rs->n + 1) * sizeof *s);
    double *t = realloc(*time, (*n_obs + 1) * sizeof *t);
    if (s)
        *setting = s;
    if (t)
        *time = t;
    int rc = s && t ? 0 : -1, whole = 1;
    for (size_t k = 0; k < rs->n && rc == 0 && whole; k++) {
        const char *v = json_string_value(json_object_get(o, rs->names[k]));
        size_t at = v ? run_space_level(rs, k, v) : (size_t)-2;
        if (at == (size_t)-1)
            rc = -1;
        whole = at != (size_t)-2;
        s[*n_obs * rs->n + k] = at;
    }
    json_decref(o);
    if (rc == 0 && whole)
        t[(*n_obs)++] = p->time_ms;
    return rc;
}

int cuco_effects_of_run(cuco_db *db, int64_t run_id, cuco_effects **out, cuco_err *e)
{
    *out = NULL;
    cuco_db_program *ps = NULL;
    size_t np = 0, n_obs = 0, *setting = NULL;
    double *time = NULL;
    run_space rs;
    memset(&rs, 0, sizeof rs);
    int rc = db_programs_list(db, run_id, NULL, &ps, &np, e);
    if (rc < 0)
        return cuco_err_prefix(e, "effects of run %lld", (long long)run_id);
    json_t *first = NULL;
    for (size_t i = 0; i < np && !first; i++)
        first = ps[i].knobs_json ? json_loads(ps[i].knobs_json, 0, NULL) : NULL;
    if (!first || json_object_size(first) == 0)
        goto out;
    if (run_space_init(&rs, first) < 0)
        rc = -1;
    for (size_t i = 0; i < np && rc == 0; i++)
        if (!cuco_effects_repeat(ps, i))
            rc = run_obs_add(&rs, &ps[i], &setting, &time, &n_obs);
    if (rc < 0) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "effects of run %lld: out of memory", (long long)run_id);
        goto out;
    }
    if (n_obs >= 2) {
        cuco_doe_space s = {rs.n, (const char *const *)rs.names, rs.levels, rs.start, NULL};
        rc = cuco_effects_compute(&s, setting, time, n_obs, out, e);
    }
out:
    json_decref(first);
    run_space_free(&rs);
    free(setting);
    free(time);
    db_programs_free(ps, np);
    return rc;
}

int cuco_effects_lines_of_run(const char *db_path, int64_t run_id, const char *prefix,
                              size_t max_pairs, cuco_buf *out, size_t *n_obs, cuco_err *e)
{
    cuco_db *db = NULL;
    cuco_effects *fx = NULL;
    *n_obs = 0;
    int rc = db_open(db_path, 1, &db, e);
    if (rc == 0)
        rc = cuco_effects_of_run(db, run_id, &fx, e);
    if (rc == 0 && fx && fx->n_mains) {
        *n_obs = fx->n_obs;
        rc = cuco_effects_format(fx, prefix, max_pairs, out);
    }
    cuco_effects_free(fx);
    db_close(db);
    return rc;
}
