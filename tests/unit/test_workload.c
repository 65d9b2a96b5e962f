/* test_workload.c: the manifest parser: a full and a minimal valid manifest,
 * and one bad manifest per kind of mistake (tests/data/manifests/), each of
 * which must fail with "path:line: what is wrong". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/llm.h"
#include "cuco/semantics.h"
#include "cuco/workload.h"

static char *manifest(const char *name)
{
    const char *data = getenv("CUCO_TEST_DATA");
    return cuco_sprintf("%s/manifests/%s", data ? data : "tests/data", name);
}

static void test_valid_full(void **state)
{
    (void)state;
    char *path = manifest("valid_full.yaml");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(path, &w, &e), 0);
    assert_string_equal(w->name, "valid_full");
    assert_string_equal(w->description, "a manifest that uses every key");
    assert_int_equal(w->ranks, 4);
    assert_int_equal(w->gpu, 0);
    assert_int_equal(w->sources.n, 2);
    assert_string_equal(w->sources.items[1], "sub/util.h");
    assert_string_equal(w->evolve_file, "main.c");
    assert_int_equal(w->build_command.n, 6);
    assert_string_equal(w->build_command.items[3], "{out}");
    assert_string_equal(w->build_output, "prog");
    assert_true(w->build_timeout_s == 12.5);
    assert_string_equal(w->launcher, "direct");
    assert_int_equal(w->mpirun_args.n, 3);
    assert_int_equal(w->n_env, 2);
    assert_string_equal(w->env[1].key, "LD_LIBRARY_PATH");
    assert_string_equal(w->env[1].value, "{nccl_lib}");
    assert_int_equal(w->verify.args.n, 2);
    assert_string_equal(w->verify.args.items[1], "64");
    assert_true(w->verify.timeout_s == 7);
    assert_int_equal(w->verify.repeats, 1);
    assert_int_equal(w->verify.line, 16);
    assert_true(w->bench.timeout_s == 90);
    assert_int_equal(w->bench.repeats, 5);
    assert_int_equal(w->n_space, 2);
    assert_string_equal(w->space[1].name, "chunk");
    assert_string_equal(w->space[1].values.items[1], "262144");
    assert_true(cuco_str_ends_with(w->manifest_path, "/manifests/valid_full.yaml"));
    assert_true(cuco_str_ends_with(w->dir, "/manifests"));
    char *seed = NULL;
    assert_int_equal(cuco_workload_read_seed(w, &seed, &e), 0);
    assert_non_null(strstr(seed, "int main(void)"));
    free(seed);
    cuco_workload_free(w);
    free(path);
}

static void test_valid_minimal_defaults(void **state)
{
    (void)state;
    char *path = manifest("valid_minimal.yaml");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(path, &w, &e), 0);
    assert_int_equal(w->gpu, 1);
    assert_string_equal(w->launcher, "mpirun");
    assert_true(w->build_timeout_s == 300);
    assert_true(w->verify.timeout_s > 0);
    assert_int_equal(w->bench.repeats, 3);
    assert_int_equal(w->verify.args.n, 0);
    assert_int_equal(w->vouch, 0);
    cuco_workload_free(w);
    free(path);
}

static void test_folder_and_cpu_demo(void **state)
{
    (void)state;
    const char *src = getenv("CUCO_SRC");
    char *dir = cuco_sprintf("%s/workloads/cpu_demo", src ? src : ".");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(dir, &w, &e), 0);
    assert_string_equal(w->name, "cpu_demo");
    assert_int_equal(w->ranks, 2);
    assert_int_equal(w->gpu, 0);
    assert_int_equal(w->vouch, 1);
    assert_true(cuco_str_ends_with(w->manifest_path, "/workload.yaml"));
    cuco_workload_free(w);
    free(dir);
}

/* Loads a bad manifest and checks the error's code, file, line and text. */
static void expect_bad(const char *name, int line, const char *needle)
{
    char *path = manifest(name);
    cuco_workload *w = (cuco_workload *)1;
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_workload_load(path, &w, &e);
    if (rc == 0 || !e.msg || !strstr(e.msg, needle) || e.line != line)
        print_error("%s: rc %d line %d msg '%s' (wanted line %d, '%s')\n", name, rc, e.line,
                    cuco_err_msg(&e), line, needle);
    assert_int_equal(rc, CUCO_EINVAL);
    assert_null(w);
    assert_non_null(e.file);
    assert_true(cuco_str_ends_with(e.file, name));
    assert_int_equal(e.line, line);
    assert_non_null(strstr(e.msg, needle));
    cuco_err_clear(&e);
    free(path);
}

static void test_missing_required_key(void **state)
{
    (void)state;
    expect_bad("missing_name.yaml", 1, "missing required key 'name'");
    expect_bad("missing_build_output.yaml", 6, "missing required key 'build.output'");
}

static void test_wrong_type(void **state)
{
    (void)state;
    expect_bad("ranks_not_integer.yaml", 2, "'ranks' must be an integer, not 'two'");
    expect_bad("build_command_not_list.yaml", 6, "'build.command' must be a list, not a scalar");
    expect_bad("not_a_mapping.yaml", 1, "the manifest must be a mapping, not a list");
    expect_bad("vouch_not_bool.yaml", 9, "'result.vouch' must be true or false, not 'maybe'");
    expect_bad("vouch_unknown_key.yaml", 9, "unknown key 'vouched' in result (valid keys: vouch)");
}

static void test_unknown_key_lists_valid_keys(void **state)
{
    (void)state;
    expect_bad("unknown_key.yaml", 5, "unknown key 'buidl' in the manifest (valid keys: name,");
    expect_bad("unknown_key.yaml", 5, "build, run, verify, bench, result, space");
    expect_bad("unknown_bench_key.yaml", 10,
               "unknown key 'repeat' in bench (valid keys: args, timeout_s, repeats)");
}

/* semantics: declarations in the vocabulary are kept with their lines and
 * described for reports and prompts; anything else is refused at its line. */
static void test_semantics(void **state)
{
    (void)state;
    char *path = manifest("semantics_valid.yaml");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(path, &w, &e), 0);
    assert_int_equal(w->n_semantics, 2);
    assert_string_equal(w->semantics[0].kernel, "attn_fwd");
    assert_string_equal(w->semantics[0].term, "attention");
    assert_string_equal(cuco_semantic_param(&w->semantics[0], "merge"), "log_sum_exp");
    assert_int_equal(w->semantics[0].line, 9);
    assert_string_equal(w->semantics[1].call, "ncclAlltoAll");
    cuco_buf b = CUCO_BUF_INIT;
    cuco_semantics_describe(w->semantics, w->n_semantics, "- ", &b);
    assert_non_null(strstr(cuco_buf_str(&b), "- kernel attn_fwd is attention (over=keys, "
                                             "merge=log_sum_exp): the kernel computes"));
    assert_non_null(strstr(cuco_buf_str(&b), "- call ncclAlltoAll is routing_permutation: "));
    assert_non_null(strstr(cuco_buf_str(&b), "a strategy note for the LLM mutators"));
    cuco_buf_free(&b);
    /* the LLM mutators' prompt carries them beside the design space */
    cuco_llm_format_space(w, &b);
    assert_non_null(strstr(cuco_buf_str(&b), "Semantics the workload's manifest declares"));
    assert_non_null(strstr(cuco_buf_str(&b), "- kernel attn_fwd is attention"));
    cuco_buf_free(&b);
    cuco_workload_free(w);
    free(path);
    expect_bad("semantics_unknown_term.yaml", 9,
               "semantics: unknown term 'atention' (the vocabulary: attention (kernel), "
               "routing_permutation (call)");
    expect_bad("semantics_bad_value.yaml", 9,
               "semantics: 'merge' of 'attention' must be log_sum_exp, not 'average'");
    expect_bad("semantics_wrong_target.yaml", 9,
               "semantics: 'attention' describes a kernel, not a call");
    expect_bad("semantics_not_list.yaml", 9,
               "'semantics' must be a list of declarations, not a mapping");
}

static void test_evolve_file_not_in_sources(void **state)
{
    (void)state;
    expect_bad("evolve_not_in_sources.yaml", 4,
               "evolve_file 'kernel.cu' is not one of the sources");
}

static void test_source_missing(void **state)
{
    (void)state;
    expect_bad("source_missing.yaml", 4, "source file 'not_there.c' not found");
    expect_bad("source_outside_folder.yaml", 3,
               "must be a relative path inside the workload folder");
}

/* `expert` names a file inside the folder; the GPU workloads name theirs. */
static void test_expert(void **state)
{
    (void)state;
    expect_bad("expert_missing.yaml", 5,
               "expert 'not_there.c' must be a file inside the workload folder");
    expect_bad("expert_outside_folder.yaml", 5, "must be a file inside the workload folder");
    const char *src = getenv("CUCO_SRC");
    char *dir = cuco_sprintf("%s/workloads/gemm_allgather", src ? src : ".");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(dir, &w, &e), 0);
    assert_non_null(w->expert);
    assert_string_equal(w->expert, "expert.cu");
    cuco_workload_free(w);
    free(dir);
}

/* A C++ evolve file built by nvcc is built as CUDA: "-x cu" after nvcc
 * (the transform puts device code into it); a .cu file is left alone. */
static void test_cxx_built_as_cuda(void **state)
{
    (void)state;
    const char *data = getenv("CUCO_TEST_DATA");
    char *dir = cuco_sprintf("%s/transform/cxx_allreduce", data ? data : "tests/data");
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load(dir, &w, &e), 0);
    assert_string_equal(w->build_command.items[0], "nvcc");
    assert_string_equal(w->build_command.items[1], "-x");
    assert_string_equal(w->build_command.items[2], "cu");
    assert_string_equal(w->build_command.items[3], "-std=c++17");
    cuco_workload_free(w);
    free(dir);
    dir = cuco_sprintf("%s/transform/alltoall_pack", data ? data : "tests/data");
    assert_int_equal(cuco_workload_load(dir, &w, &e), 0);
    assert_string_equal(w->build_command.items[1], "-std=c++17");
    assert_int_equal(cuco_workload_builds_as_cuda(w), 0);
    cuco_workload_free(w);
    free(dir);
    /* a bare C++ program too; a C one keeps its language (C is not C++) */
    char tmpl[] = "/tmp/cuco-bare-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *cpp = cuco_path_join(tmpl, "trainer.cpp"), *c = cuco_path_join(tmpl, "trainer.c");
    assert_int_equal(cuco_fs_write(cpp, "int main() { return 0; }\n", 25, &e), 0);
    assert_int_equal(cuco_fs_write(c, "int main() { return 0; }\n", 25, &e), 0);
    assert_int_equal(cuco_workload_from_program(cpp, NULL, &w, &e), 0);
    assert_string_equal(w->build_command.items[1], "-x");
    assert_int_equal(cuco_workload_builds_as_cuda(w), 1);
    cuco_workload_free(w);
    assert_int_equal(cuco_workload_from_program(c, NULL, &w, &e), 0);
    assert_int_equal(cuco_workload_builds_as_cuda(w), 0);
    cuco_workload_free(w);
    assert_int_equal(cuco_fs_remove_tree(tmpl, &e), 0);
    free(cpp);
    free(c);
    assert_string_equal(cuco_workload_host_language("a/b.cc"), "C++");
    assert_string_equal(cuco_workload_host_language("main.c"), "C");
    assert_null(cuco_workload_host_language("main.cu"));
    assert_null(cuco_workload_host_language(".c"));
}

static void test_ranks_below_one(void **state)
{
    (void)state;
    expect_bad("ranks_zero.yaml", 4, "'ranks' must be >= 1, not 0");
}

static void test_bad_yaml_syntax(void **state)
{
    (void)state;
    /* libyaml notices the unclosed flow sequence when the next key starts. */
    expect_bad("bad_syntax.yaml", 4, "YAML syntax error: did not find expected ',' or ']'");
    expect_bad("empty.yaml", 1, "the manifest is empty");
}

static void test_other_mistakes(void **state)
{
    (void)state;
    expect_bad("duplicate_key.yaml", 5, "duplicate key 'ranks' in the manifest (first at line 2)");
    expect_bad("bad_launcher.yaml", 9, "'run.launcher' must be mpirun or direct, not 'srun-maybe'");
}

static void test_no_manifest(void **state)
{
    (void)state;
    cuco_workload *w = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_workload_load("/nonexistent/cuco/workload", &w, &e), CUCO_ENOTFOUND);
    assert_null(w);
    assert_non_null(strstr(e.msg, "no workload manifest"));
    cuco_err_clear(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_full),
        cmocka_unit_test(test_valid_minimal_defaults),
        cmocka_unit_test(test_folder_and_cpu_demo),
        cmocka_unit_test(test_missing_required_key),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_unknown_key_lists_valid_keys),
        cmocka_unit_test(test_evolve_file_not_in_sources),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_source_missing),
        cmocka_unit_test(test_expert),
        cmocka_unit_test(test_ranks_below_one),
        cmocka_unit_test(test_bad_yaml_syntax),
        cmocka_unit_test(test_other_mistakes),
        cmocka_unit_test(test_no_manifest),
        cmocka_unit_test(test_cxx_built_as_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
