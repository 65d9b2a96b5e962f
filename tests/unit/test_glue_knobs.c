/* test_glue_knobs.c: the knobs a transformed program declares are the ones
 * its rewritten calls read (src/transform/glue_knobs.c). A program of sends
 * and receives gets the point-to-point knobs and the kernels' threads, not
 * the collectives' CTAs, chunk, all-gather copy engine or staging
 * threshold; an all-reduce program the reverse; an all-gather beside a send
 * both. A pruned knob keeps its #define, so the glue still builds. A knob
 * only all-gathers read carries the condition under which it matters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/program.h"
#include "cuco/transform.h"
#include "tx_test.h"

/* Whether the transformed program declares knob name (a cuco:knob line). */
static int declares(const char *program, const char *name)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_knob *k = NULL;
    size_t n = 0;
    assert_int_equal(cuco_program_knobs(program, &k, &n, &e), 0);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(k[i].name, name) == 0;
    cuco_knobs_free(k, n);
    cuco_err_clear(&e);
    return found;
}

/* The #define of name is still in the program (annotated or not). */
static int defined(const char *program, const char *name)
{
    char *needle = cuco_sprintf("#define %s ", name);
    int found = strstr(program, needle) != NULL;
    free(needle);
    return found;
}

/* The conditions of knob name, joined by spaces ("" when it has none). */
static const char *condition_of(const char *program, const char *name)
{
    static char text[256];
    cuco_err e = CUCO_ERR_INIT;
    cuco_knob *k = NULL;
    size_t n = 0;
    assert_int_equal(cuco_program_knobs(program, &k, &n, &e), 0);
    text[0] = '\0';
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; !strcmp(k[i].name, name) && j < k[i].when.n; j++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", j ? " " : "",
                     k[i].when.items[j]);
    cuco_knobs_free(k, n);
    return text;
}

static char *program_with(const char *calls)
{
    return cuco_sprintf("#include <nccl.h>\n"
                        "int main() {\n"
                        "    ncclComm_t comm; cudaStream_t s; float *a, *b;\n"
                        "    cudaMalloc(&a, 1 << 20); cudaMalloc(&b, 1 << 22);\n"
                        "%s"
                        "    cudaStreamSynchronize(s);\n"
                        "    return 0;\n"
                        "}\n",
                        calls);
}

static const char *const collective_knobs[] = {"CUCO_COMM_CTAS", "CUCO_CHUNK_BYTES", NULL};
static const char *const p2p_knobs[] = {"CUCO_P2P_CTAS", "CUCO_P2P_NCCL_FROM", "CUCO_P2P_CE", NULL};

static void expect_all(const char *program, const char *const *names, int want)
{
    for (const char *const *n = names; *n; n++) {
        if (declares(program, *n) != want)
            fail_msg("%s: declared %d, expected %d", *n, !want, want);
        if (strcmp(*n, "CUCO_P2P_CE") != 0)
            assert_true(defined(program, *n)); /* the glue still defines it */
    }
}

static void test_sends_only(void **state)
{
    (void)state;
    char *text = program_with("    ncclSend(a, 1024, ncclFloat, 1, comm, s);\n"
                              "    ncclRecv(b, 1024, ncclFloat, 1, comm, s);\n");
    cuco_tx_result r;
    tx_transform(text, &r);
    expect_all(r.program, p2p_knobs, 1);
    expect_all(r.program, collective_knobs, 0);
    assert_true(declares(r.program, "CUCO_COMM_THREADS")); /* the send kernel's threads */
    assert_false(declares(r.program, "CUCO_COPY_ENGINE"));
    assert_false(declares(r.program, "CUCO_STAGED_NCCL_FROM"));
    assert_non_null(strstr(r.program, "#define CUCO_COPY_ENGINE 0        // no rewritten call"));
    cuco_tx_result_free(&r);
    free(text);
}

static void test_all_reduce_only(void **state)
{
    (void)state;
    char *text = program_with("    ncclAllReduce(a, a, 1024, ncclFloat, ncclSum, comm, s);\n");
    cuco_tx_result r;
    tx_transform(text, &r);
    expect_all(r.program, collective_knobs, 1);
    expect_all(r.program, p2p_knobs, 0);
    assert_true(declares(r.program, "CUCO_STAGED_NCCL_FROM"));
    assert_true(declares(r.program, "CUCO_AR_NCCL_UPTO")); /* small ones through NCCL */
    assert_false(declares(r.program, "CUCO_AG_NCCL_UPTO")); /* no all-gather here */
    assert_false(declares(r.program, "CUCO_COPY_ENGINE"));
    assert_string_equal(condition_of(r.program, "CUCO_COMM_CTAS"), ""); /* no copy engine here */
    cuco_tx_result_free(&r);
    free(text);
}

static void test_gather_and_send(void **state)
{
    (void)state;
    char *text = program_with("    ncclAllGather(a, b, 1024, ncclFloat, comm, s);\n"
                              "    ncclSend(a, 1024, ncclFloat, 1, comm, s);\n"
                              "    ncclRecv(b, 1024, ncclFloat, 1, comm, s);\n");
    cuco_tx_result r;
    tx_transform(text, &r);
    expect_all(r.program, collective_knobs, 1);
    expect_all(r.program, p2p_knobs, 1);
    assert_true(declares(r.program, "CUCO_COPY_ENGINE"));
    assert_false(declares(r.program, "CUCO_STAGED_NCCL_FROM"));
    assert_false(declares(r.program, "CUCO_AR_NCCL_UPTO"));
    assert_true(declares(r.program, "CUCO_AG_NCCL_UPTO"));
    /* only the all-gather reads the CTAs: moot under its copy engine; the
     * send kernel reads the threads too: no condition */
    assert_string_equal(condition_of(r.program, "CUCO_COMM_CTAS"), "CUCO_COPY_ENGINE=0");
    assert_string_equal(condition_of(r.program, "CUCO_COMM_THREADS"), "");
    assert_string_equal(condition_of(r.program, "CUCO_COPY_ENGINE"), "");
    cuco_tx_result_free(&r);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sends_only),
        cmocka_unit_test(test_all_reduce_only),
        cmocka_unit_test(test_gather_and_send),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
