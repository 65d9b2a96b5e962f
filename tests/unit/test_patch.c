/* test_patch.c: the patch engine on tests/data/patch/: SEARCH/REPLACE (exact,
 * whitespace-tolerant, missing and ambiguous matches naming the block, an
 * unclosed block), full EVOLVE-BLOCK rewrites (with markers and fences, bare
 * body, wrong block count) and the frozen guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/patch.h"

static char *data(const char *name)
{
    const char *d = getenv("CUCO_TEST_DATA");
    assert_non_null(d);
    char *p = cuco_sprintf("%s/patch/%s", d, name);
    char *text = NULL;
    size_t len;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(p, &text, &len, &e), 0);
    free(p);
    return text;
}

static void test_diff_exact(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ok.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "int y = x * 4;"));
    assert_null(strstr(out, "int y = x * 2;"));
    assert_non_null(strstr(out, "#define CUCO_BLOCK 16 //"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(base), free(resp), free(out);
}

static void test_diff_whitespace_tolerant(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ws.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "    int y = x << 1;\n    return y + 1;\n}\n"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(base), free(resp), free(out);
}

static void test_diff_missing_names_block(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_missing.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_null(out);
    assert_non_null(strstr(cuco_err_msg(&e), "block 2"));
    assert_non_null(strstr(cuco_err_msg(&e), "not found"));
    assert_non_null(strstr(cuco_err_msg(&e), "int z = nothing();"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_diff_ambiguous(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ambiguous.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "block 1"));
    assert_non_null(strstr(cuco_err_msg(&e), "more than once"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_diff_unclosed_and_empty(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_unclosed.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "not closed"));
    assert_int_equal(e.line, 1);
    cuco_err_clear(&e);
    assert_int_equal(cuco_patch_apply_diff(base, "just prose, no edit\n", &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "no SEARCH/REPLACE block"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_guard_refuses_outside_edit(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_outside.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_int_equal(cuco_patch_guard(base, out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "outside the EVOLVE-BLOCKs"));
    cuco_err_clear(&e);
    free(base), free(resp), free(out);
}

static void test_rewrite(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("rewrite.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_rewrite(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "return 2 * x + 1;"));
    assert_null(strstr(out, "```"));
    assert_non_null(strstr(out, "int main(void)"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(out);
    free(resp);
    resp = data("rewrite_bare.txt");
    assert_int_equal(cuco_patch_apply_rewrite(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "// EVOLVE-BLOCK-START\n#define CUCO_BLOCK 16"));
    assert_non_null(strstr(out, "x + x + 1; }\n// EVOLVE-BLOCK-END\n"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(out);
    /* two blocks in the answer, one in the program */
    const char *two = "// EVOLVE-BLOCK-START\na\n// EVOLVE-BLOCK-END\n"
                      "// EVOLVE-BLOCK-START\nb\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_patch_apply_rewrite(base, two, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "2 EVOLVE-BLOCKs"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_exact),
        cmocka_unit_test(test_diff_whitespace_tolerant),
        cmocka_unit_test(test_diff_missing_names_block),
        cmocka_unit_test(test_diff_ambiguous),
        cmocka_unit_test(test_diff_unclosed_and_empty),
        cmocka_unit_test(test_guard_refuses_outside_edit),
        cmocka_unit_test(test_rewrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
