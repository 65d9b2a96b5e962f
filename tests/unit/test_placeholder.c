/* test_placeholder.c: a manifest's placeholders are checked when it is
 * loaded: an unknown ('{nope}') or unclosed ('{out') placeholder, or an MPI
 * flags placeholder inside an argument, in build.command, run.mpirun_args,
 * run.env, verify.args or bench.args is "manifest:line: ..." naming the
 * offending entry, not a file named '{nope}' at build time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/workload.h"

static void check_ok(const char *arg, int whole_item)
{
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_workload_placeholder_check(arg, whole_item, &e);
    if (rc)
        fprintf(stderr, "'%s': %s\n", arg, cuco_err_msg(&e));
    assert_int_equal(rc, 0);
    cuco_err_clear(&e);
}

static void check_bad(const char *arg, int whole_item, const char *want)
{
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_placeholder_check(arg, whole_item, &e), CUCO_EINVAL);
    if (!strstr(cuco_err_msg(&e), want))
        fprintf(stderr, "'%s': got '%s', want '%s'\n", arg, cuco_err_msg(&e), want);
    assert_non_null(strstr(cuco_err_msg(&e), want));
    cuco_err_clear(&e);
}

static void test_check(void **state)
{
    (void)state;
    check_ok("plain", 1);
    check_ok("{out}", 1);
    check_ok("-I{repo}/device", 0);
    check_ok("{workload_dir}/{evolve_file}:{ranks}", 0);
    check_ok("{mpi_compile_flags}", 1);
    check_ok("", 1);
    check_bad("{nope}", 1, "unknown placeholder '{nope}'");
    check_bad("-o{outt}", 1, "unknown placeholder '{outt}'");
    check_bad("{}", 1, "unknown placeholder '{}'");
    check_bad("{out", 1, "unclosed placeholder '{out'");
    check_bad("x{", 1, "unclosed placeholder '{'");
    check_bad("{a{out}", 1, "unclosed placeholder '{a'");
    check_bad("{out}{", 1, "unclosed placeholder '{'");
    check_bad("-I{mpi_compile_flags}", 1, "must be a list item of its own");
    check_bad("{mpi_link_flags}", 0, "must be a list item of its own");
    check_bad("{mpi_link_flags}x", 1, "must be a list item of its own");
}

/* A workload folder in the test's temporary folder: main.c and a manifest
 * whose build command, env value and bench args are given. */
static char *write_workload(const char *build_cmd, const char *env_value, const char *bench_args)
{
    const char *tmp = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/placeholder.%ld", tmp ? tmp : "/tmp", (long)getpid());
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *src = cuco_path_join(dir, "main.c");
    assert_int_equal(cuco_fs_write(src, "int main(void) { return 0; }\n", 29, &e), 0);
    char *text = cuco_sprintf("name: ph\n"
                              "ranks: 1\n"
                              "sources: [main.c]\n"
                              "evolve_file: main.c\n"
                              "build:\n"
                              "  command: %s\n"
                              "  output: prog\n"
                              "run:\n"
                              "  env: {A: \"%s\"}\n"
                              "bench:\n"
                              "  args: %s\n",
                              build_cmd, env_value, bench_args);
    char *path = cuco_path_join(dir, "workload.yaml");
    assert_int_equal(cuco_fs_write(path, text, strlen(text), &e), 0);
    free(text);
    free(src);
    free(dir);
    return path;
}

static void expect_load(const char *build_cmd, const char *env_value, const char *bench_args,
                        int line, const char *want)
{
    char *path = write_workload(build_cmd, env_value, bench_args);
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_workload_load(path, &w, &e);
    if (!want) {
        if (rc)
            fprintf(stderr, "%s\n", cuco_err_msg(&e));
        assert_int_equal(rc, 0);
        cuco_workload_free(w);
    } else {
        assert_int_equal(rc, CUCO_EINVAL);
        assert_non_null(e.file);
        assert_true(cuco_str_ends_with(e.file, "workload.yaml"));
        if (e.line != line || !strstr(cuco_err_msg(&e), want))
            fprintf(stderr, "got line %d '%s', want %d '%s'\n", e.line, cuco_err_msg(&e), line,
                    want);
        assert_int_equal(e.line, line);
        assert_non_null(strstr(cuco_err_msg(&e), want));
    }
    cuco_err_clear(&e);
    free(path);
}

static void test_manifest(void **state)
{
    (void)state;
    const char *good_cmd = "[cc, -o, \"{out}\", \"{evolve_file}\"]";
    expect_load(good_cmd, "{nccl_lib}", "[--n, \"8\"]", 0, NULL);
    expect_load("[cc, -o, \"{nope}\", \"{evolve_file}\"]", "x", "[]", 6,
                "'build.command': unknown placeholder '{nope}'");
    expect_load("[cc, -o, \"{out\", \"{evolve_file}\"]", "x", "[]", 6,
                "'build.command': unclosed placeholder '{out'");
    expect_load("[cc,\n    \"-I{mpi_compile_flags}\"]", "x", "[]", 7,
                "'{mpi_compile_flags}' must be a list item of its own");
    expect_load(good_cmd, "{cuda_hom}", "[]", 9, "'run.env': unknown placeholder '{cuda_hom}'");
    expect_load(good_cmd, "x", "[--n, \"{rank}\"]", 11,
                "'bench.args': unknown placeholder '{rank}'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_manifest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
