/* test_util.c: the error context, buffers, hashing and fs helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/err.h"
#include "cuco/fs.h"
#include "cuco/hash.h"
#include "cuco/num.h"
#include "cuco/stats.h"

/* "5m" must not quietly become 5: every character counts, and the range too. */
static void test_num_strict(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    long l = -1;
    double d = -1;
    assert_int_equal(cuco_parse_long("--n", " 42 ", 0, 100, &l, &e), 0);
    assert_int_equal(l, 42);
    assert_int_equal(cuco_parse_long("--n", "12abc", 0, 100, &l, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "'12abc' is not an integer"));
    assert_int_equal(cuco_parse_long("--n", "101", 0, 100, &l, &e), CUCO_EINVAL);
    assert_int_equal(cuco_parse_long("--n", "", 0, 100, &l, &e), CUCO_EINVAL);
    assert_int_equal(cuco_parse_long("--n", "99999999999999999999999", 0, 100, &l, &e),
                     CUCO_EINVAL);
    assert_int_equal(l, 42);
    assert_int_equal(cuco_parse_double("T", "2.5", 0, 10, &d, &e), 0);
    assert_true(d == 2.5);
    assert_int_equal(cuco_parse_double("T", "5m", 0, 1e9, &d, &e), CUCO_EINVAL);
    assert_int_equal(cuco_parse_double("T", "nan", 0, 1e9, &d, &e), CUCO_EINVAL);
    assert_int_equal(cuco_parse_double("T", "inf", 0, 1e300, &d, &e), CUCO_EINVAL);
    setenv("CUCO_TEST_NUM", "5m", 1);
    assert_int_equal(cuco_env_double("CUCO_TEST_NUM", 0, 1e9, &d, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "CUCO_TEST_NUM"));
    unsetenv("CUCO_TEST_NUM");
    d = 7;
    assert_int_equal(cuco_env_double("CUCO_TEST_NUM", 0, 1e9, &d, &e), 0);
    assert_true(d == 7);
    cuco_err_clear(&e);
}

static void test_err_prefix_and_location(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_err_set_at(&e, CUCO_EINVAL, "w.yaml", 7, "bad %s", "ranks"), CUCO_EINVAL);
    cuco_err_prefix(&e, "loading");
    assert_string_equal(e.msg, "loading: bad ranks");
    assert_string_equal(e.file, "w.yaml");
    assert_int_equal(e.line, 7);
    cuco_err_clear(&e);
    assert_null(e.msg);
    assert_int_equal(e.code, 0);
}

static void test_buf_grows(void **state)
{
    (void)state;
    cuco_buf b = CUCO_BUF_INIT;
    for (int i = 0; i < 10000; i++)
        cuco_buf_printf(&b, "%d,", i);
    assert_true(b.len > 40000);
    assert_true(cuco_str_starts_with(b.data, "0,1,2,"));
    assert_true(cuco_str_ends_with(b.data, "9999,"));
    char *s = cuco_buf_detach(&b);
    assert_null(b.data);
    free(s);
    char t[] = "  x y \n";
    assert_string_equal(cuco_str_trim(t), "x y");
}

static void test_hash_stable(void **state)
{
    (void)state;
    char a[17], b[17];
    cuco_hash_hex("abc", 3, a);
    cuco_hash_hex("abc", 3, b);
    assert_string_equal(a, b);
    assert_int_equal(strlen(a), 16);
    cuco_hash_hex("abd", 3, b);
    assert_string_not_equal(a, b);
}

static void test_fs_roundtrip(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    char tmpl[] = "/tmp/cuco-test-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *dir = cuco_path_join(tmpl, "a/b/c");
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *f = cuco_path_join(dir, "x.txt");
    assert_int_equal(cuco_fs_write(f, "hello", 5, &e), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(cuco_fs_read(f, &text, &len, &e), 0);
    assert_int_equal(len, 5);
    assert_string_equal(text, "hello");
    free(text);
    assert_int_equal(cuco_fs_read("/nonexistent/zzz", &text, &len, &e), CUCO_ESYS);
    assert_non_null(strstr(e.msg, "/nonexistent/zzz"));
    assert_int_equal(cuco_fs_remove_tree(tmpl, &e), 0);
    assert_false(cuco_fs_exists(tmpl));
    char *d = cuco_path_dirname("/a/b/c.txt");
    assert_string_equal(d, "/a/b");
    free(d);
    free(f);
    free(dir);
    cuco_err_clear(&e);
}

/* 'cuco analyze -o /dev/null' must not turn /dev/null into a regular file:
 * a FIFO (standing in for any special file) is written in place, and a
 * symbolic link stays a link while its target gets the new content. */
static void test_fs_write_special_and_links(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    char tmpl[] = "/tmp/cuco-test-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *fifo = cuco_path_join(tmpl, "fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* so that the writer's open does not block */
    assert_true(rd >= 0);
    assert_int_equal(cuco_fs_write(fifo, "through", 7, &e), 0);
    char got[16] = {0};
    assert_int_equal(read(rd, got, sizeof got - 1), 7);
    assert_string_equal(got, "through");
    close(rd);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));

    char *target = cuco_path_join(tmpl, "target.txt");
    char *link = cuco_path_join(tmpl, "link.txt");
    assert_int_equal(cuco_fs_write(target, "old", 3, &e), 0);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(cuco_fs_write(link, "new", 3, &e), 0);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char *text = NULL;
    assert_int_equal(cuco_fs_read(target, &text, NULL, &e), 0);
    assert_string_equal(text, "new");
    free(text);
    assert_int_equal(cuco_fs_remove_tree(tmpl, &e), 0);
    free(fifo);
    free(target);
    free(link);
    cuco_err_clear(&e);
}

static void test_median(void **state)
{
    (void)state;
    double odd[] = {3.0, 1.0, 2.0}, even[] = {4.0, 1.0, 3.0, 2.0};
    assert_true(cuco_median(odd, 3) == 2.0);
    assert_true(odd[0] == 1.0 && odd[2] == 3.0); /* sorted in place */
    assert_true(cuco_median(even, 4) == 2.5);
    assert_true(cuco_median(NULL, 0) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_fs_write_special_and_links),
        cmocka_unit_test(test_err_prefix_and_location),
        cmocka_unit_test(test_buf_grows),
        cmocka_unit_test(test_hash_stable),
        cmocka_unit_test(test_fs_roundtrip),
        cmocka_unit_test(test_num_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
