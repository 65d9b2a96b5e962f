/* test_doe.c: the structured knob search and the effects table (doe.h):
 *  - the screen over four two-level knobs is a resolution IV half fraction
 *    (7 new runs, balanced, no main effect aliased with a two-knob
 *    interaction) and a pruned knob stays at its start;
 *  - on the planted model of tests/data/search_planted (+-2% noise), 30
 *    measurements reach the best cell for each of 20 seeds, never measuring
 *    a setting twice;
 *  - main effects of an exact multiplicative model are recovered exactly,
 *    and the planted interaction is the strongest pair, with its table line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/doe.h"
#include "cuco/mutate.h"

#define MAX_OBS 128

/* A run in memory: every setting proposed so far, with its time. */
typedef struct fake_run {
    size_t n_knobs, n;
    size_t setting[MAX_OBS * 8];
    double time[MAX_OBS];
} fake_run;

static int fake_seen(void *ctx, const size_t *setting, int *seen, cuco_err *e)
{
    (void)e;
    fake_run *r = ctx;
    *seen = 0;
    for (size_t i = 0; i < r->n && !*seen; i++)
        *seen = !memcmp(r->setting + i * r->n_knobs, setting, r->n_knobs * sizeof *setting);
    return 0;
}

static cuco_strlist list_of(char **items, size_t n)
{
    cuco_strlist l = {items, n};
    return l;
}

/* Proposes the next setting of r into r's next row; returns the phase. */
static const char *propose(const cuco_doe_space *s, fake_run *r)
{
    cuco_doe_history h = {r->n, r->setting, r->time, fake_seen, r};
    const char *phase = NULL;
    cuco_err e = CUCO_ERR_INIT;
    size_t next[8];
    int rc = cuco_doe_next(s, &h, next, &phase, &e);
    assert_true(rc >= 0);
    if (rc == 0)
        return NULL;
    int seen = 1;
    fake_seen(r, next, &seen, &e);
    assert_false(seen);
    memcpy(r->setting + r->n * r->n_knobs, next, r->n_knobs * sizeof *next);
    return phase;
}

static void test_screen_resolution_iv(void **state)
{
    (void)state;
    static char *two[] = {"0", "1"};
    const char *names[] = {"A", "B", "C", "D", "P"};
    cuco_strlist levels[5];
    for (int k = 0; k < 5; k++)
        levels[k] = list_of(two, 2);
    size_t start[5] = {0, 0, 0, 0, 0};
    int active[5] = {1, 1, 1, 1, 0};
    cuco_doe_space s = {5, names, levels, start, active};
    fake_run r;
    memset(&r, 0, sizeof r);
    r.n_knobs = 5;
    r.n = 1; /* the start, measured */
    r.time[0] = 10;
    while (r.n < 8) {
        const char *phase = propose(&s, &r);
        assert_non_null(phase);
        assert_string_equal(phase, "knob:screen");
        r.time[r.n++] = 10;
    }
    /* the next one is no longer screening */
    const char *phase = propose(&s, &r);
    assert_non_null(phase);
    assert_string_not_equal(phase, "knob:screen");
    int x[8][4];
    for (int i = 0; i < 8; i++) {
        assert_int_equal(r.setting[i * 5 + 4], 0); /* pruned knob held */
        for (int k = 0; k < 4; k++)
            x[i][k] = r.setting[i * 5 + k] ? 1 : -1;
    }
    for (int a = 0; a < 4; a++) {
        int sum = 0;
        for (int i = 0; i < 8; i++)
            sum += x[i][a];
        assert_int_equal(sum, 0); /* balanced */
        for (int b = a + 1; b < 4; b++) {
            int dot = 0;
            for (int i = 0; i < 8; i++)
                dot += x[i][a] * x[i][b];
            assert_int_equal(dot, 0); /* orthogonal */
            for (int c = 0; c < 4; c++) {
                if (c == a || c == b)
                    continue;
                int alias = 0;
                for (int i = 0; i < 8; i++)
                    alias += x[i][a] * x[i][b] * x[i][c];
                assert_int_equal(alias, 0); /* a main effect is no two-knob interaction */
            }
        }
    }
}

/* The model of tests/data/search_planted/planted.c (levels as indices). */
static double planted_ms(const size_t *s)
{
    static const double tf[] = {1.05, 1.0, 0.95}, df[] = {1.0, 0.95, 0.99},
                        cf[] = {1.0, 0.99, 1.005, 1.02}, lf_cf[] = {1.0, 0.99, 0.88, 0.95};
    double t = 10.0 * tf[s[0]] * df[s[1]] * cf[s[2]];
    return s[3] ? t * 1.006 * lf_cf[s[2]] : t;
}

static char *threads_v[] = {"128", "256", "512"}, *depth_v[] = {"1", "2", "3"},
            *chunks_v[] = {"1", "2", "4", "8"}, *lf_v[] = {"0", "1"}, *trace_v[] = {"0", "1"};
static const char *planted_names[] = {"THREADS", "DEPTH", "CHUNKS", "LOCAL_FIRST", "TRACE"};

static cuco_doe_space planted_space(cuco_strlist *levels, size_t *start, int *active)
{
    levels[0] = list_of(threads_v, 3);
    levels[1] = list_of(depth_v, 3);
    levels[2] = list_of(chunks_v, 4);
    levels[3] = list_of(lf_v, 2);
    levels[4] = list_of(trace_v, 2);
    const size_t st[5] = {1, 0, 0, 0, 0};
    memcpy(start, st, sizeof st);
    for (int k = 0; k < 5; k++)
        active[k] = k < 4;
    cuco_doe_space s = {5, planted_names, levels, start, active};
    return s;
}

static void test_planted_found_in_30(void **state)
{
    (void)state;
    cuco_strlist levels[5];
    size_t start[5];
    int active[5];
    cuco_doe_space s = planted_space(levels, start, active);
    const size_t best[5] = {2, 1, 2, 1, 0};
    for (uint64_t seed = 1; seed <= 20; seed++) {
        cuco_rng rng;
        cuco_rng_seed(&rng, seed);
        fake_run r;
        memset(&r, 0, sizeof r);
        r.n_knobs = 5;
        memcpy(r.setting, start, sizeof start);
        r.time[0] = planted_ms(start) * (1 + 0.02 * (2 * cuco_rng_uniform(&rng) - 1));
        r.n = 1;
        int found = 0;
        while (r.n < 30 && propose(&s, &r)) {
            const size_t *set = r.setting + r.n * 5;
            found |= !memcmp(set, best, sizeof best);
            r.time[r.n++] = planted_ms(set) * (1 + 0.02 * (2 * cuco_rng_uniform(&rng) - 1));
        }
        if (!found)
            fail_msg("seed %u: the best cell was not measured in 30", (unsigned)seed);
    }
}

static void test_effects_exact_mains(void **state)
{
    (void)state;
    static char *a_v[] = {"x", "y", "z"}, *b_v[] = {"0", "1"};
    const char *names[] = {"A", "B"};
    cuco_strlist levels[2] = {list_of(a_v, 3), list_of(b_v, 2)};
    size_t start[2] = {0, 0}, setting[12];
    double time[6];
    const double fa[] = {1.0, 0.9, 1.2}, fb[] = {1.0, 1.05};
    size_t n = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 2; b++, n++) {
            setting[n * 2] = a;
            setting[n * 2 + 1] = b;
            time[n] = 10 * fa[a] * fb[b];
        }
    cuco_doe_space s = {2, names, levels, start, NULL};
    cuco_effects *fx;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_effects_compute(&s, setting, time, n, &fx, &e), 0);
    assert_int_equal(fx->n_mains, 3);
    assert_string_equal(fx->mains[0].name, "A");
    assert_string_equal(fx->mains[0].value, "y");
    assert_true(fabs(fx->mains[0].alone - (-0.10)) < 1e-9);
    assert_true(fabs(fx->mains[1].alone - 0.20) < 1e-9);
    assert_true(fabs(fx->mains[2].alone - 0.05) < 1e-9);
    assert_int_equal(fx->df, 2);
    assert_true(fx->sigma < 1e-9);
    for (size_t i = 0; i < fx->n_pairs; i++)
        assert_true(fabs(fx->pairs[i].interaction) < 1e-9);
    cuco_effects_free(fx);
}

static void test_effects_planted_pair(void **state)
{
    (void)state;
    cuco_strlist levels[5];
    size_t start[5];
    int active[5];
    cuco_doe_space s = planted_space(levels, start, active);
    static size_t setting[72 * 5];
    double time[72];
    size_t n = 0;
    for (size_t t = 0; t < 3; t++)
        for (size_t d = 0; d < 3; d++)
            for (size_t c = 0; c < 4; c++)
                for (size_t l = 0; l < 2; l++, n++) {
                    size_t *row = setting + n * 5;
                    row[0] = t, row[1] = d, row[2] = c, row[3] = l, row[4] = 0;
                    time[n] = planted_ms(row);
                }
    cuco_effects *fx;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_effects_compute(&s, setting, time, n, &fx, &e), 0);
    assert_true(fx->n_pairs >= 1);
    const cuco_effect *top = &fx->pairs[0];
    int lf_chunks4 = (!strcmp(top->name, "LOCAL_FIRST") && !strcmp(top->other_value, "4")) ||
                     (!strcmp(top->other_name, "LOCAL_FIRST") && !strcmp(top->value, "4"));
    assert_true(lf_chunks4);
    assert_true(fabs(top->alone) < 0.03);
    assert_true(top->with < -0.08);
    assert_true(isfinite(top->with_se) && top->with_se < 0.02);
    cuco_buf b = CUCO_BUF_INIT;
    assert_int_equal(cuco_effects_format(fx, "- ", 1, &b), 0);
    assert_non_null(strstr(cuco_buf_str(&b), "- THREADS=512 main effect -"));
    assert_non_null(strstr(cuco_buf_str(&b), ", with "));
    cuco_buf_free(&b);
    cuco_effects_free(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_screen_resolution_iv),
        cmocka_unit_test(test_planted_found_in_30),
        cmocka_unit_test(test_effects_exact_mains),
        cmocka_unit_test(test_effects_planted_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
