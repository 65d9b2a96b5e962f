/* test_include_deps.c: the include folders of a compiler command, and the
 * headers reached from a source: quoted ones beside the includer first,
 * angle ones through the folders only, nested ones, each header once (a
 * cycle ends), system headers left out, and a change in a nested header
 * changing the digest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/fs.h"
#include "cuco/include_deps.h"

static char *root;

static void put(const char *rel, const char *text)
{
    cuco_err e = CUCO_ERR_INIT;
    char *p = cuco_path_join(root, rel);
    char *dir = cuco_path_dirname(p);
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    assert_int_equal(cuco_fs_write(p, text, strlen(text), &e), 0);
    free(dir);
    free(p);
}

static void test_dirs(void **state)
{
    (void)state;
    const char *argv[] = {"nvcc",     "-Ia", "-I", "/abs/b", "--include-path=c",
                          "-isystem", "d",   "-o", "x",      "-Werror"};
    cuco_strlist dirs = {0};
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_include_dirs(argv, sizeof argv / sizeof argv[0], "/w", &dirs, &e), 0);
    assert_int_equal(dirs.n, 4);
    assert_string_equal(dirs.items[0], "/w/a");
    assert_string_equal(dirs.items[1], "/abs/b");
    assert_string_equal(dirs.items[2], "/w/c");
    assert_string_equal(dirs.items[3], "/w/d");
    cuco_strlist_free(&dirs);
}

static char *digest(void)
{
    char *src_dir = cuco_path_join(root, "src");
    char *inc = cuco_path_join(root, "inc");
    cuco_strlist srcs = {0}, dirs = {0};
    assert_int_equal(cuco_strlist_push(&srcs, "main.cu"), 0);
    assert_int_equal(cuco_strlist_push(&dirs, inc), 0);
    cuco_buf key = CUCO_BUF_INIT;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_include_digest(src_dir, &srcs, &dirs, &key, &e), 0);
    cuco_strlist_free(&srcs);
    cuco_strlist_free(&dirs);
    free(src_dir);
    free(inc);
    return cuco_buf_detach(&key);
}

static void test_digest(void **state)
{
    (void)state;
    const char *t = getenv("CUCO_TEST_TMP");
    root = cuco_sprintf("%s/test_include_deps.%ld", t ? t : "/tmp", (long)getpid());
    put("src/main.cu", "#include <stdio.h>\n  #  include \"local.h\"\n#include <lib.h>\n"
                       "// #include \"commented.h\" is followed too: a superset is safe\n"
                       "int main(void) { return 0; }\n");
    put("src/local.h", "#include \"deep/nested.h\"\n#define LOCAL 1\n");
    put("inc/lib.h", "#include \"lib.h\"\n#include \"nested.h\"\n#define LIB 1\n");
    put("inc/deep/nested.h", "#define NESTED 1\n");
    put("inc/nested.h", "#define OTHER 1\n");
    put("src/deep/nested.h", "#define BESIDE 1\n");
    char *k1 = digest();
    assert_non_null(strstr(k1, "#define LOCAL 1"));
    assert_non_null(strstr(k1, "#define LIB 1"));
    /* "deep/nested.h" from src/local.h: beside the includer first */
    assert_non_null(strstr(k1, "#define BESIDE 1"));
    assert_null(strstr(k1, "#define NESTED 1"));
    /* "nested.h" from inc/lib.h: beside it, inc/nested.h */
    assert_non_null(strstr(k1, "#define OTHER 1"));
    /* lib.h includes itself: once */
    char *first = strstr(k1, "#define LIB 1");
    assert_null(strstr(first + 1, "#define LIB 1"));
    /* the source itself and system headers are not in it */
    assert_null(strstr(k1, "int main"));
    assert_null(strstr(k1, "stdio.h\n"));
    put("src/deep/nested.h", "#define BESIDE 2\n");
    char *k2 = digest();
    assert_string_not_equal(k1, k2);
    char *k3 = digest();
    assert_string_equal(k2, k3);
    free(k1);
    free(k2);
    free(k3);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dirs),
        cmocka_unit_test(test_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
