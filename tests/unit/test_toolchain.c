/* test_toolchain.c: toolchain detection against fake NCCL, CUDA and MPI
 * trees made under a temporary folder (NCCL_HOME, CUDA_HOME and PATH point
 * at them), and NCCL version codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/toolchain.h"

static char *tmp_dir;

/* Writes text to tmp_dir/rel, creating folders; mode applied after. */
static void put_file(const char *rel, const void *data, size_t len, mode_t mode)
{
    char *path = cuco_path_join(tmp_dir, rel);
    char *dir = cuco_path_dirname(path);
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    assert_int_equal(cuco_fs_write(path, data, len, &e), 0);
    assert_int_equal(chmod(path, mode), 0);
    free(dir);
    free(path);
}

static void put_text(const char *rel, const char *text)
{
    put_file(rel, text, strlen(text), 0644);
}

static void put_nccl_h(const char *rel, int major, int minor, int patch)
{
    char *text =
        cuco_sprintf("#ifndef NCCL_H_\n#define NCCL_H_\n"
                     "#define NCCL_MAJOR %d\n#define NCCL_MINOR %d\n#define NCCL_PATCH %d\n"
                     "#define NCCL_SUFFIX \"\"\n#endif\n",
                     major, minor, patch);
    put_text(rel, text);
    free(text);
}

/* A fake library: binary bytes around the version text NCCL embeds. */
static void put_nccl_lib(const char *rel, const char *version_text)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_append(&b,
                    "\x7f"
                    "ELF\x02\x01\x01\0\0\0",
                    10);
    for (int i = 0; i < 5000; i++)
        cuco_buf_append(&b, "\0\x01junk", 6);
    /* a format string first, as real libraries carry: must be skipped */
    cuco_buf_append(&b, "NCCL version %s\0", 16);
    cuco_buf_puts(&b, "NCCL version ");
    cuco_buf_puts(&b, version_text);
    cuco_buf_append(&b, "", 1);
    put_file(rel, b.data, b.len, 0755);
    cuco_buf_free(&b);
}

static char *tmp_path(const char *rel)
{
    return cuco_path_join(tmp_dir, rel);
}

static char *saved_path;

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp";
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_fs_mkdirs(base, &e) != 0)
        return -1;
    char *templ = cuco_sprintf("%s/toolchain-XXXXXX", base);
    if (!mkdtemp(templ)) {
        free(templ);
        return -1;
    }
    tmp_dir = templ;
    saved_path = cuco_strdup(getenv("PATH"));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_fs_remove_tree(tmp_dir, &e);
    cuco_err_clear(&e);
    free(tmp_dir);
    free(saved_path);
    return 0;
}

static void test_version_codes(void **state)
{
    (void)state;
    assert_int_equal(cuco_nccl_version_code(2, 8, 4), 2804);
    assert_int_equal(cuco_nccl_version_code(2, 9, 6), 20906);
    assert_int_equal(cuco_nccl_version_code(2, 28, 9), 22809);
    assert_int_equal(cuco_nccl_version_code(3, 0, 1), 30001);
    const int codes[] = {2804, 20906, 22809, 30001};
    const char *names[] = {"2.8.4", "2.9.6", "2.28.9", "3.0.1"};
    for (int i = 0; i < 4; i++) {
        char *s = cuco_nccl_version_string(codes[i]);
        assert_string_equal(s, names[i]);
        free(s);
    }
    char *s = cuco_nccl_version_string(0);
    assert_string_equal(s, "unknown");
    free(s);
}

static void test_nccl_home_with_device_api(void **state)
{
    (void)state;
    put_nccl_h("home228/include/nccl.h", 2, 28, 9);
    put_text("home228/include/nccl_device.h", "#pragma once\n");
    put_text("home228/include/nccl_device/gin.h", "#pragma once\n");
    put_nccl_lib("home228/lib/libnccl.so.2", "2.28.9+cuda13.0");
    char *home = tmp_path("home228");
    setenv("NCCL_HOME", home, 1);

    cuco_toolchain tc;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    char *inc = tmp_path("home228/include");
    char *lib = tmp_path("home228/lib");
    assert_string_equal(tc.nccl_include, inc);
    assert_string_equal(tc.nccl_lib, lib);
    assert_string_equal(tc.nccl_source, "NCCL_HOME");
    assert_int_equal(tc.nccl_version, 22809);
    assert_int_equal(tc.nccl_lib_version, 22809);
    assert_true(tc.nccl_device_api);
    assert_true(tc.nccl_gin);
    cuco_toolchain_free(&tc);
    assert_null(tc.nccl_include);
    free(inc);
    free(lib);
    free(home);
    unsetenv("NCCL_HOME");
}

static void test_old_nccl_and_mismatched_library(void **state)
{
    (void)state;
    put_nccl_h("home28/include/nccl.h", 2, 8, 4);
    put_nccl_lib("home28/lib64/libnccl.so.2", "2.18.1+cuda12.2");
    char *home = tmp_path("home28");
    setenv("NCCL_HOME", home, 1);

    cuco_toolchain tc;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    char *lib = tmp_path("home28/lib64");
    assert_string_equal(tc.nccl_source, "NCCL_HOME");
    assert_string_equal(tc.nccl_lib, lib);
    assert_int_equal(tc.nccl_version, 2804);
    assert_int_equal(tc.nccl_lib_version, 21801);
    assert_false(tc.nccl_device_api);
    assert_false(tc.nccl_gin);
    cuco_toolchain_free(&tc);
    free(lib);
    free(home);

    /* headers without a library next to them */
    put_nccl_h("headers-only/include/nccl.h", 2, 27, 3);
    home = tmp_path("headers-only");
    setenv("NCCL_HOME", home, 1);
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    assert_string_equal(tc.nccl_source, "NCCL_HOME");
    assert_int_equal(tc.nccl_version, 22703);
    assert_null(tc.nccl_lib);
    assert_int_equal(tc.nccl_lib_version, 0);
    cuco_toolchain_free(&tc);
    free(home);
    unsetenv("NCCL_HOME");
}

/* NCCL_HOME without nccl.h falls through to the CUDA toolkit, whose nvcc
 * is found and asked for its version. */
static void test_cuda_toolkit_and_nvcc(void **state)
{
    (void)state;
    char *empty = tmp_path("empty-home");
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(empty, &e), 0);
    put_nccl_h("cuda/include/nccl.h", 2, 27, 7);
    put_text("cuda/include/nccl_device.h", "#pragma once\n");
    put_nccl_lib("cuda/lib64/libnccl.so.2", "2.27.7+cuda12.9");
    const char *nvcc_script = "#!/bin/sh\n"
                              "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                              "echo 'Cuda compilation tools, release 12.9, V12.9.41'\n";
    put_file("cuda/bin/nvcc", nvcc_script, strlen(nvcc_script), 0755);
    char *cuda = tmp_path("cuda");
    setenv("NCCL_HOME", empty, 1);
    setenv("CUDA_HOME", cuda, 1);

    cuco_toolchain tc;
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    char *nvcc = tmp_path("cuda/bin/nvcc");
    char *inc = tmp_path("cuda/include");
    char *lib = tmp_path("cuda/lib64");
    assert_string_equal(tc.cuda_home, cuda);
    assert_string_equal(tc.nvcc, nvcc);
    assert_non_null(tc.nvcc_version);
    assert_string_equal(tc.nvcc_version, "12.9");
    assert_string_equal(tc.nccl_source, "CUDA toolkit");
    assert_string_equal(tc.nccl_include, inc);
    assert_string_equal(tc.nccl_lib, lib);
    assert_int_equal(tc.nccl_version, 22707);
    assert_int_equal(tc.nccl_lib_version, 22707);
    assert_true(tc.nccl_device_api);
    assert_false(tc.nccl_gin);
    cuco_toolchain_free(&tc);
    free(nvcc);
    free(inc);
    free(lib);
    free(cuda);
    free(empty);
    unsetenv("NCCL_HOME");
    unsetenv("CUDA_HOME");
}

static void test_mpi_from_path(void **state)
{
    (void)state;
    const char *script = "#!/bin/sh\nexit 0\n";
    put_file("mpi/bin/mpicc", script, strlen(script), 0755);
    put_file("mpi/bin/mpirun", script, strlen(script), 0755);
    char *bin = tmp_path("mpi/bin");
    char *path = cuco_sprintf("%s:%s", bin, saved_path ? saved_path : "/usr/bin:/bin");
    setenv("PATH", path, 1);

    cuco_toolchain tc;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    char *mpicc = tmp_path("mpi/bin/mpicc");
    char *mpirun = tmp_path("mpi/bin/mpirun");
    assert_string_equal(tc.mpicc, mpicc);
    assert_string_equal(tc.mpirun, mpirun);
    cuco_toolchain_free(&tc);

    /* none on PATH */
    setenv("PATH", bin, 1);
    assert_int_equal(chmod(mpicc, 0644), 0);
    assert_int_equal(cuco_toolchain_detect(&tc, &e), 0);
    assert_null(tc.mpicc);
    assert_string_equal(tc.mpirun, mpirun);
    cuco_toolchain_free(&tc);

    setenv("PATH", saved_path ? saved_path : "/usr/bin:/bin", 1);
    free(mpicc);
    free(mpirun);
    free(path);
    free(bin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_codes),
        cmocka_unit_test(test_nccl_home_with_device_api),
        cmocka_unit_test(test_old_nccl_and_mismatched_library),
        cmocka_unit_test(test_cuda_toolkit_and_nvcc),
        cmocka_unit_test(test_mpi_from_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
