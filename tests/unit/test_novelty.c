/* test_novelty.c: MinHash similarity ignores comments and whitespace, tells
 * different programs apart, and parent selection behaves per strategy
 * (hill climbing in exploit takes the best; power law in exploit prefers the
 * best more than in explore; fitness weighs by score). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "cuco/config.h"
#include "cuco/evolve.h"
#include "cuco/mutate.h"
#include "cuco/novelty.h"

static const char a[] = "int f(int x) {\n  int y = x * 2; // double\n  return y + 1;\n}\n"
                        "int g(int z) { return f(z) - f(z + 1) * 3; }\n";
static const char a_ws[] = "/* header */ int f(int x){ int y=x*2;\n\n return y+1; }\n"
                           "int g(int z)\n{\n    return f(z) - f(z + 1) * 3;\n}\n";
static const char b[] = "double h(double *v, long n) { double s = 0; for (long i = 0; i < n; "
                        "i++) s += v[i] * v[i]; return s; }\n";

static void test_minhash(void **state)
{
    (void)state;
    cuco_minhash ma, mw, mb;
    cuco_minhash_of(a, &ma);
    cuco_minhash_of(a_ws, &mw);
    cuco_minhash_of(b, &mb);
    assert_true(cuco_minhash_similarity(&ma, &mw) == 1.0);
    assert_true(cuco_minhash_similarity(&ma, &mb) < 0.2);
    assert_true(cuco_minhash_similarity(&mb, &mb) == 1.0);
}

static void test_selection(void **state)
{
    (void)state;
    double scores[5] = {2.0, 1.5, 1.2, 1.1, 1.0};
    cuco_rng r;
    cuco_rng_seed(&r, 3);
    int hill = 0, pl_explore = 0, pl_exploit = 0, fit = 0;
    for (int i = 0; i < 2000; i++) {
        hill += cuco_select_parent(CUCO_SEL_HILL_CLIMB, scores, 5, 1, &r) == 0;
        pl_explore += cuco_select_parent(CUCO_SEL_POWER_LAW, scores, 5, 0, &r) == 0;
        pl_exploit += cuco_select_parent(CUCO_SEL_POWER_LAW, scores, 5, 1, &r) == 0;
        fit += cuco_select_parent(CUCO_SEL_FITNESS, scores, 5, 0, &r) == 0;
    }
    assert_int_equal(hill, 2000);
    assert_true(pl_exploit > pl_explore);
    /* power law explore: weight 1 / H(5) = 0.438 for the best */
    assert_true(pl_explore > 700 && pl_explore < 1050);
    /* fitness explore: 2 / 6.8 = 0.294 */
    assert_true(fit > 480 && fit < 700);
    assert_int_equal(cuco_select_parent(CUCO_SEL_FITNESS, scores, 1, 0, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minhash),
        cmocka_unit_test(test_selection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
