/* test_transform.c: the rule route (src/transform/rules.c) and the static
 * device-initiated check (check.c) on small in-memory programs: what is
 * rewritten, that frozen text is untouched, what is refused and where, and
 * that the check rejects leftover host communication. */
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

static const char *const block_program =
    "#include <nccl.h>\n"
    "// EVOLVE-BLOCK-START\n"
    "struct Step { float *buf = nullptr; };\n"
    "static void setup(Step &s, size_t n) { cudaMalloc((void **)&s.buf, n * 4); }\n"
    "static void run(Step &s, size_t n, ncclComm_t comm, cudaStream_t st) {\n"
    "    ncclAllReduce(s.buf, s.buf, n, ncclFloat32, ncclSum, comm, st);\n"
    "}\n"
    "static void done(Step &s) { cudaFree(s.buf); }\n"
    "// EVOLVE-BLOCK-END\n"
    "int main() { /* frozen harness */ return 0; }\n";

/* frees inside a macro's text and a free named as a deleter go through the
 * glue's free; a string that names cudaFree and frozen code stay */
static void test_frees_in_macros_and_deleters(void **state)
{
    (void)state;
    static const char prog[] =
        "#include <nccl.h>\n"
        "#include <memory>\n"
        "#define SAFE_FREE(p) do { if (p) { cudaFree(p); (p) = NULL; } } while (0)\n"
        "#define FREE_NAME \"cudaFree\"\n"
        "int main() { ncclComm_t c; cudaStream_t s; float *a, *b;\n"
        "  cudaMalloc(&a, 64); cudaMalloc(&b, 64);\n"
        "  std::unique_ptr<float, decltype(&cudaFree)> o(b, &cudaFree);\n"
        "  ncclAllReduce(a, a, 16, ncclFloat, ncclSum, c, s);\n"
        "  SAFE_FREE(a); return 0; }\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", prog, &r, &e), 0);
    assert_non_null(r.program);
    /* the #define line is the edit's statement: inside a block of its own */
    assert_non_null(strstr(r.program, "// EVOLVE-BLOCK-START\n#define SAFE_FREE(p) do { if (p) { "
                                      "cuco_tx::symm_free(p); (p) = NULL; } } while (0)\n"
                                      "// EVOLVE-BLOCK-END"));
    assert_non_null(strstr(r.program, "#define FREE_NAME \"cudaFree\""));
    assert_non_null(strstr(r.program, "std::unique_ptr<float, decltype(&cuco_tx::symm_free)> "
                                      "o(b, &cuco_tx::symm_free);"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* what the free rewrite leaves: a macro that stands for a free itself, a
 * declarator and a macro argument named cudaFree; a globally qualified
 * call goes through the glue too */
static void test_frees_left_alone(void **state)
{
    (void)state;
    static const char prog[] =
        "#include <nccl.h>\n"
        "#define cudaFree(p) (fprintf(stderr, \"free\\n\"), cudaFree(p))\n"
        "#define LOAD(f) api.f = nullptr\n"
        "struct Api { cudaError_t (*cudaFree)(void *); };\n"
        "int main() { ncclComm_t c; cudaStream_t s; float *a; Api api;\n"
        "  LOAD(cudaFree);\n"
        "  cudaMalloc(&a, 64);\n"
        "  ncclAllReduce(a, a, 16, ncclFloat, ncclSum, c, s);\n"
        "  ::cudaFree(a); return 0; }\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", prog, &r, &e), 0);
    assert_non_null(r.program);
    assert_non_null(strstr(r.program, "#define cudaFree(p) (fprintf(stderr, \"free\\n\"), cudaFree(p))"));
    assert_non_null(strstr(r.program, "struct Api { cudaError_t (*cudaFree)(void *); };"));
    assert_non_null(strstr(r.program, "  LOAD(cudaFree);"));
    assert_non_null(strstr(r.program, "::cuco_tx::symm_free(a);"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* a free inside a frozen macro is not rewritten: the report says so */
static void test_frozen_macro_free_noted(void **state)
{
    (void)state;
    static const char prog[] = "#include <nccl.h>\n"
                               "#define SAFE_FREE(p) do { cudaFree(p); (p) = NULL; } while (0)\n"
                               "int main() {\n"
                               "  ncclComm_t c; cudaStream_t s; float *a;\n"
                               "// EVOLVE-BLOCK-START\n"
                               "  cudaMalloc(&a, 64);\n"
                               "  ncclAllReduce(a, a, 16, ncclFloat, ncclSum, c, s);\n"
                               "  SAFE_FREE(a);\n"
                               "// EVOLVE-BLOCK-END\n"
                               "  return 0;\n"
                               "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", prog, &r, &e), 0);
    assert_true(tx_has_note(&r.notes, "note", 2, "macro SAFE_FREE frees with cudaFree in frozen code"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static void test_allreduce_in_block(void **state)
{
    (void)state;
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", block_program, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(r.program);
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce(s.buf, s.buf, n, ncclFloat32, ncclSum, comm, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc((void **)&s.buf"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_free(s.buf)"));
    assert_non_null(strstr(r.program, "#include \"cuco_device.cuh\""));
    /* the call is rewritten; NCCL is left only inside the glue (its fallback) */
    assert_null(strstr(r.program, "    ncclAllReduce(s.buf"));
    /* only the block changed, and the knobs are declared in it */
    assert_int_equal(cuco_program_check_frozen(block_program, r.program, &e), 0);
    cuco_knob *k = NULL;
    size_t nk = 0;
    assert_int_equal(cuco_program_knobs(r.program, &k, &nk, &e), 0);
    int ctas = 0;
    for (size_t i = 0; i < nk; i++)
        ctas += strcmp(k[i].name, "CUCO_COMM_CTAS") == 0 && k[i].value_in_choices;
    assert_int_equal(ctas, 1);
    cuco_knobs_free(k, nk);
    assert_true(tx_has_note(&r.notes, "rewrite", 6, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "symmetric", 4, "s.buf"));
    int passed = 0;
    assert_int_equal(cuco_transform_check("p.cu", r.program, &passed, &r.notes, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static void test_wraps_program_without_blocks(void **state)
{
    (void)state;
    const char *src = "#include <nccl.h>\n"
                      "int main() {\n"
                      "    float *a, *b; ncclComm_t c; cudaStream_t s; size_t n = 4;\n"
                      "    cudaMalloc(&a, n * 4);\n"
                      "    cudaMalloc(&b, 2 * n * 4);\n"
                      "    ncclAllGather(a, b, n, ncclFloat32, c, s);\n"
                      "    printf(\"Verification: PASS\\n\");\n"
                      "    return 0;\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("ag.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    cuco_block *b = NULL;
    size_t nb = 0;
    assert_int_equal(cuco_program_blocks(r.program, &b, &nb, &e), 0);
    assert_true(nb >= 2); /* the glue, and the rewritten statements */
    /* the receive buffer became symmetric, the send buffer did not */
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&b"));
    assert_non_null(strstr(r.program, "cudaMalloc(&a"));
    /* the harness line stays outside every block */
    const char *v = strstr(r.program, "printf(\"Verification");
    assert_non_null(v);
    for (size_t i = 0; i < nb; i++)
        assert_false((size_t)(v - r.program) >= b[i].body_start && (size_t)(v - r.program) < b[i].body_end);
    free(b);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static void test_refusals(void **state)
{
    (void)state;
    struct {
        const char *src, *needle;
        int line;
    } cases[] = {
        /* calls the device path cannot take, where they cannot stay host NCCL:
         * in a group with point-to-point calls, or (through a macro) in a
         * file with groups */
        {"#include <nccl.h>\nvoid f(float *x, ncclComm_t c) {\n  ncclGroupStart(); ncclReduce(x, x, 4, ncclFloat32, ncclSum, 0, c, 0);\n"
         "  ncclSend(x, 4, ncclFloat32, 1, c, 0);\n  ncclGroupEnd();\n}\n",
         "ncclReduce: device/ has no device-side ncclReduce; inside ncclGroupStart/ncclGroupEnd with "
         "the point-to-point call of line 4, which runs at the group's end on the device",
         3},
        {"#define AR(b) ncclAllReduce(b, b, 4, ncclFloat32, ncclSum, comm, 0)\nvoid f(float *x) { ncclGroupStart(); AR(x); ncclGroupEnd(); }\n",
         "preprocessor", 1},
        {"void f(float *x, ncclComm_t c) {\n  ncclGroupStart(); ncclAllReduce(x, x, 4, ncclFloat32, ncclMax, c, 0);\n"
         "  ncclRecv(x, 4, ncclFloat32, 1, c, 0); ncclGroupEnd();\n}\n",
         "ncclSum", 2},
        {"void f(float *x, ncclComm_t c) {\n  auto s = ncclSend;\n}\n", "used but not called", 2},
        {"void f(float *x, ncclComm_t c) {\n  ncclAllReduce(x, x, 4, ncclFloat32, ncclMax, c, 0);\n}\n",
         "every NCCL call stays host NCCL", 0},
        {"void f(float *x, ncclComm_t c) {\n  ncclRecv(x, 4, ncclFloat32, 1, c, 0);\n}\n",
         "cannot find the cudaMalloc", 2},
        {"// EVOLVE-BLOCK-START\n#define K 1\n// EVOLVE-BLOCK-END\nvoid f(ncclComm_t c) {\n  float *x; cudaMalloc(&x, 4);\n"
         "  ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, c, 0);\n}\n",
         "outside the EVOLVE-BLOCKs", 6},
        {"void f(float *x, ncclComm_t c) {\n  ncclBcast(x, 4, ncclFloat32, 0, c);\n}\n", "expected its 6 arguments", 2},
        {"int main() { return 0; }\n", "nothing to transform", 0},
        {"void f(int *x, ncclComm_t c) {\n  ncclGroupStart(); ncclReduceScatter(x, x, 4, ncclInt32, ncclAvg, c, 0);\n"
         "  ncclBroadcast(x, x, 4, ncclInt32, 0, c, 0); ncclGroupEnd();\n}\n",
         "ncclAvg of data type 'ncclInt32'", 2},
        {"void f(ncclComm_t c) {\n  float *x;\n  cudaMallocManaged(&x, 64);\n"
         "  ncclGroupStart(); ncclBroadcast(x, x, 4, ncclFloat32, 0, c, 0); ncclGroupEnd();\n}\n",
         "comes from cudaMallocManaged at line 3", 4},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cuco_tx_result r;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_transform_rules("x.cu", cases[i].src, &r, &e), 0);
        if (!r.refused || !tx_has_note(&r.notes, "refused", cases[i].line, cases[i].needle))
            fail_msg("case %zu: expected a refusal at line %d about '%s'", i, cases[i].line, cases[i].needle);
        assert_null(r.program);
        cuco_tx_result_free(&r);
        cuco_err_clear(&e);
    }
}

/* A group that holds point-to-point calls and a call the device does not
 * implement stays NCCL's own, whole; every point-to-point call of the
 * program then stays host NCCL (a send and its receive take one path),
 * and the other collectives go to the device. */
static void test_kept_p2p_group(void **state)
{
    (void)state;
    const char *src = "#include <nccl.h>\n"
                      "void f(float *x, float *y, float *m, int peer, ncclComm_t c, cudaStream_t s) {\n"
                      "  ncclGroupStart();\n"
                      "  ncclAllReduce(m, m, 1, ncclFloat, ncclMax, c, s);\n"
                      "  ncclSend(x, 4, ncclFloat, peer, c, s);\n"
                      "  ncclRecv(y, 4, ncclFloat, peer, c, s);\n"
                      "  ncclGroupEnd();\n"
                      "  ncclSend(y, 4, ncclFloat, peer, c, s);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s);\n"
                      "}\n"
                      "int main() { float *x, *y, *m; ncclComm_t c; cudaStream_t s;\n"
                      "  cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&m, 64);\n"
                      "  f(x, y, m, 1, c, s); return 0; }\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("g.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "kept", 3, "it stays NCCL's own group"));
    assert_true(tx_has_note(&r.notes, "kept", 3, "reduction 'ncclMax'"));
    assert_true(tx_has_note(&r.notes, "kept", 5, "inside the NCCL group"));
    assert_true(tx_has_note(&r.notes, "kept", 8, "every point-to-point call stays host NCCL"));
    assert_true(tx_has_note(&r.notes, "rewrite", 9, "cuco_tx::all_reduce"));
    assert_non_null(strstr(r.program, "  ncclGroupStart();\n"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclRecv(y, 4"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclSend(y, 4"));
    assert_null(strstr(r.program, "cuco_tx::group_start()"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
    /* sends and receives on two communicators: the same second pass */
    const char *two = "#include <nccl.h>\n"
                      "void f(float *x, float *y, int peer, ncclComm_t a, ncclComm_t b, cudaStream_t s) {\n"
                      "  ncclSend(x, 4, ncclFloat, peer, b, s);\n"
                      "  ncclRecv(y, 4, ncclFloat, peer, a, s);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, a, s);\n"
                      "}\n"
                      "int main() { float *x, *y; ncclComm_t a, b; cudaStream_t s;\n"
                      "  cudaMalloc(&x, 64); cudaMalloc(&y, 64); f(x, y, 1, a, b, s); return 0; }\n";
    assert_int_equal(cuco_transform_rules("two.cu", two, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "kept", 3, "every point-to-point call stays host NCCL"));
    assert_true(tx_has_note(&r.notes, "rewrite", 5, "cuco_tx::all_reduce"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclRecv(y, 4"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Collectives the device path cannot take (ncclReduce, a reduction other
 * than a sum, a call through a pointer, a call in a macro's body, a buffer
 * that cannot be a window) stay host NCCL: each has a "kept" note at its line and the
 * marker before it, the other calls are rewritten, and the static check
 * passes the program with the kept calls in it. */
static void test_kept_calls(void **state)
{
    (void)state;
    const char *src =
        "#define MAXALL(b) ncclAllReduce(b, b, 1, ncclFloat, ncclMax, comm, 0)\n"
        "typedef ncclResult_t (*coll_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,\n"
        "                               ncclComm_t, cudaStream_t);\n"
        "void f(ncclComm_t comm) {\n"
        "  float *x; cudaMalloc(&x, 64);\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, 0);\n"
        "  ncclReduce(x, x, 4, ncclFloat, ncclSum, 0, comm, 0);\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclProd, comm, 0);\n"
        "  coll_fn fn = ncclAllReduce;\n"
        "  fn(x, x, 4, ncclFloat, ncclSum, comm, 0);\n"
        "  MAXALL(x);\n"
        "  float *m; cudaMallocManaged(&m, 64);\n"
        "  ncclBroadcast(m, m, 4, ncclFloat, 0, comm, 0);\n"
        "  ncclAllGather(x, pool_get(), 4, ncclFloat, comm, 0);\n"
        "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("kept.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "rewrite", 6, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "kept", 1, "inside a preprocessor directive"));
    assert_true(tx_has_note(&r.notes, "kept", 7, "no device-side ncclReduce; it stays host NCCL"));
    assert_true(tx_has_note(&r.notes, "kept", 8, "ncclProd"));
    assert_true(tx_has_note(&r.notes, "kept", 9, "used but not called"));
    assert_true(tx_has_note(&r.notes, "kept", 13, "comes from cudaMallocManaged at line 12"));
    assert_true(tx_has_note(&r.notes, "kept", 14, "cannot find the cudaMalloc of buffer 'pool_get()'"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclReduce(x, x, 4"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclAllReduce(x, x, 4, ncclFloat, ncclProd"));
    assert_non_null(strstr(r.program, "#define MAXALL(b) /* cuco:kept */ ncclAllReduce(b"));
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce(x, x, 4, ncclFloat, ncclSum"));
    int passed = 0;
    cuco_tx_notes checked = {0};
    assert_int_equal(cuco_transform_check("kept.cu", r.program, &passed, &checked, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_notes_free(&checked);
    /* the same host call without the marker fails the check */
    char *bare = cuco_strdup(r.program);
    char *mark = strstr(bare, "/* cuco:kept */ ncclReduce(");
    memset(mark, ' ', strlen("/* cuco:kept */"));
    assert_int_equal(cuco_transform_check("kept.cu", bare, &passed, &checked, &e), 0);
    assert_int_equal(passed, 0);
    int line = 1;
    for (const char *q = bare; q < mark; q++)
        line += *q == '\n';
    assert_true(tx_has_note(&checked, "error", line, "host collective ncclReduce is still called"));
    cuco_tx_notes_free(&checked);
    free(bare);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A local named like the member it copies (float *grad = t.grad) is traced
 * to the member's allocation, made anywhere in the file; a name met again
 * while it is being resolved (p = q; q = p) finds nothing, so a buffer whose
 * only sources form such a cycle stays host NCCL; a member set in a
 * constructor's initialiser list is traced through it, and elements
 * allocated in a range-for over their container are found. */
static void test_buffer_names(void **state)
{
    (void)state;
    static const char *const src =
        "#include <nccl.h>\n"
        "struct T { float *grad; ncclComm_t comm; cudaStream_t s; };\n"
        "void setup(T &t) { ncclMemAlloc((void **)&t.grad, 64); }\n"
        "void step(T &t) {\n"
        "  float *grad = t.grad;\n"
        "  ncclAllReduce(grad, grad, 16, ncclFloat, ncclSum, t.comm, t.s);\n"
        "}\n"
        "void loop(float *q, ncclComm_t comm) {\n"
        "  float *p = q;\n"
        "  q = p;\n"
        "  ncclAllReduce(p, p, 16, ncclFloat, ncclSum, comm, 0);\n"
        "}\n"
        "static float *make(size_t n) { float *m; cudaMalloc(&m, n); return m; }\n"
        "class L {\n"
        "public:\n"
        "  L(size_t n) : buf_(make(n)), n_(n) {}\n"
        "  void sum(ncclComm_t comm) { ncclAllReduce(buf_, buf_, n_, ncclFloat, ncclSum, comm, 0); }\n"
        "private:\n"
        "  float *buf_;\n"
        "  size_t n_;\n"
        "};\n"
        "void buckets(ncclComm_t comm) {\n"
        "  std::array<float *, 2> g;\n"
        "  for (auto &p : g) cudaMalloc(&p, 64);\n"
        "  for (int b = 0; b < 2; b++) ncclAllReduce(g[b], g[b], 16, ncclFloat, ncclSum, comm, 0);\n"
        "}\n"
        "void sum_buckets(std::array<float *, 2> &a, std::array<float *, 2> &b, ncclComm_t comm) {\n"
        "  ncclAllReduce(b[0], b[0], 16, ncclFloat, ncclSum, comm, 0);\n"
        "}\n"
        "void setup_buckets(ncclComm_t comm) {\n"
        "  std::array<float *, 2> x, y;\n"
        "  for (auto &u : x) cudaMalloc(&u, 64);\n"
        "  for (auto &w : y) cudaMalloc(&w, 64);\n"
        "  sum_buckets(x, y, comm);\n"
        "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("names.cu", src, &r, &e), 0);
    assert_true(tx_has_note(&r.notes, "symmetric", 3, "ncclMemAlloc -> cuco_tx::symm_mem_alloc"));
    assert_true(tx_has_note(&r.notes, "rewrite", 6, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "kept", 11, "cannot find the cudaMalloc of buffer 'p'"));
    /* a member set in a constructor's initialiser list from an allocator */
    assert_true(tx_has_note(&r.notes, "symmetric", 13, "cudaMalloc -> cuco_tx::symm_malloc"));
    assert_true(tx_has_note(&r.notes, "rewrite", 17, "cuco_tx::all_reduce"));
    /* elements allocated in a range-for over the container */
    assert_true(tx_has_note(&r.notes, "symmetric", 24, "cudaMalloc -> cuco_tx::symm_malloc"));
    assert_true(tx_has_note(&r.notes, "rewrite", 25, "cuco_tx::all_reduce"));
    /* a parameter after one whose type has template arguments with a
     * comma: the caller's second argument, not its first */
    assert_true(tx_has_note(&r.notes, "symmetric", 33, "cudaMalloc -> cuco_tx::symm_malloc"));
    assert_false(tx_has_note(&r.notes, "symmetric", 32, "cudaMalloc -> cuco_tx::symm_malloc"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* In a group without point-to-point calls a kept collective goes through
 * cuco_tx::kept_in_group (ordered after the group's earlier members), marked,
 * beside the group's device collectives; the static check passes it. */
static void test_kept_in_group(void **state)
{
    (void)state;
    const char *src = "void f(ncclComm_t comm, cudaStream_t s, cudaStream_t side) {\n"
                      "  float *x; cudaMalloc(&x, 64);\n"
                      "  ncclGroupStart();\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, s);\n"
                      "  CHECK(ncclAllReduce(x + 4, x + 4, 1, ncclFloat, ncclMax, comm, side));\n"
                      "  ncclReduce(x + 5, x + 5, 1, ncclFloat, ncclSum, 0, comm, s);\n"
                      "  ncclGroupEnd();\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("group.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "rewrite", 4, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "kept", 5,
                            "'ncclMax' is not the literal ncclSum or ncclAvg (device/ only sums); it "
                            "stays host NCCL (inside ncclGroupStart/ncclGroupEnd: issued where it "
                            "stands, after the group's earlier calls)"));
    assert_true(tx_has_note(&r.notes, "kept", 6, "no device-side ncclReduce"));
    assert_non_null(strstr(r.program, "CHECK(/* cuco:kept */ cuco_tx::kept_in_group(ncclAllReduce, "
                                      "x + 4, x + 4, 1, ncclFloat, ncclMax, comm, side));"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ cuco_tx::kept_in_group(ncclReduce, x + 5,"));
    assert_non_null(strstr(r.program, "cuco_tx::group_start();"));
    int passed = 0;
    cuco_tx_notes checked = {0};
    assert_int_equal(cuco_transform_check("group.cu", r.program, &passed, &checked, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_notes_free(&checked);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* In #define bodies only whole names are calls, each one kept and marked;
 * an #include's path naming a collective is left alone, and the static
 * check does not take a longer name for a collective. */
static void test_macro_names(void **state)
{
    (void)state;
    const char *src = "#include \"ncclAllReduce.h\"\n"
                      "#define X1 myncclAllReduce(a)\n"
                      "#define X2 ncclAllReduce2(a)\n"
                      "#define TWO(b) ncclAllReduce(b, b, 1, ncclFloat, ncclMax, c, 0); "
                      "ncclAllReduce(b, b, 1, ncclFloat, ncclSum, c, 0)\n"
                      "void f(ncclComm_t c) {\n  float *x; cudaMalloc(&x, 4);\n"
                      "  ncclAllReduce(x, x, 1, ncclFloat, ncclSum, c, 0);\n  TWO(x);\n}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("m.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_int_equal((int)cuco_tx_notes_count(&r.notes, "kept"), 2);
    assert_true(tx_has_note(&r.notes, "kept", 4, "inside a preprocessor directive"));
    assert_non_null(strstr(r.program, "#include \"ncclAllReduce.h\"\n"));
    assert_non_null(strstr(r.program, "#define X1 myncclAllReduce(a)\n#define X2 ncclAllReduce2(a)\n"));
    assert_int_equal(count_of(r.program, "/* cuco:kept */ ncclAllReduce(b, b, 1"), 2);
    int passed = 0;
    cuco_tx_notes checked = {0};
    assert_int_equal(cuco_transform_check("m.cu", r.program, &passed, &checked, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_notes_free(&checked);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* With calls on several communicators the device calls take one: the one
 * of the point-to-point calls, else the one with the most calls; the other
 * communicators' collectives stay host NCCL (marked), inside a group they
 * refuse the program, and sends on two communicators refuse it too. */
static void test_several_comms(void **state)
{
    (void)state;
    const char *two =
        "struct G { ncclComm_t world, tp; } g;\n"
        "void f(float *x, float *y) {\n"
        "  cudaMalloc(&x, 64); cudaMalloc(&y, 64);\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, g.tp, 0);\n"
        "  ncclBroadcast(y, y, 4, ncclFloat, 0, g.world, 0);\n"
        "  ncclAllGather(x, y, 2, ncclFloat, g.tp, 0);\n"
        "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("two.cu", two, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "rewrite", 4, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "rewrite", 6, "cuco_tx::all_gather"));
    assert_true(tx_has_note(&r.notes, "kept", 5,
                            "ncclBroadcast on communicator 'world': the device calls use 'tp'"));
    assert_non_null(strstr(r.program, "/* cuco:kept */ ncclBroadcast(y, y, 4"));
    cuco_tx_result_free(&r);

    /* the sends' communicator wins over the one with more collectives */
    const char *p2p = "void f(float *x, float *y, ncclComm_t pp, ncclComm_t dp) {\n"
                      "  cudaMalloc(&x, 64); cudaMalloc(&y, 64);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, dp, 0);\n"
                      "  ncclAllReduce(y, y, 4, ncclFloat, ncclSum, dp, 0);\n"
                      "  ncclSend(x, 4, ncclFloat, 1, pp, 0);\n"
                      "  ncclRecv(y, 4, ncclFloat, 1, pp, 0);\n"
                      "}\n";
    assert_int_equal(cuco_transform_rules("p2p.cu", p2p, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "kept", 3, "on communicator 'dp': the device calls use 'pp'"));
    assert_true(tx_has_note(&r.notes, "kept", 4, "on communicator 'dp'"));
    assert_true(tx_has_note(&r.notes, "rewrite", 5, "cuco_tx::send"));
    cuco_tx_result_free(&r);

    /* in a group: kept, through cuco_tx::kept_in_group */
    const char *grouped = "void f(float *x, ncclComm_t a, ncclComm_t b) {\n"
                          "  cudaMalloc(&x, 64);\n"
                          "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, a, 0);\n"
                          "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, a, 0);\n"
                          "  ncclGroupStart(); ncclAllReduce(x, x, 4, ncclFloat, ncclSum, b, 0); ncclGroupEnd();\n"
                          "}\n";
    assert_int_equal(cuco_transform_rules("grp.cu", grouped, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "kept", 5, "on communicator 'b': the device calls use 'a'"));
    assert_non_null(strstr(r.program, "cuco_tx::kept_in_group(ncclAllReduce, x, x, 4, ncclFloat, "
                                      "ncclSum, b, 0);"));
    cuco_tx_result_free(&r);

    /* point-to-point calls on two communicators: refused, naming both */
    const char *sends = "void f(float *x, ncclComm_t a, ncclComm_t b) {\n"
                        "  cudaMalloc(&x, 64);\n"
                        "  ncclRecv(x, 4, ncclFloat, 1, a, 0);\n"
                        "  ncclRecv(x, 4, ncclFloat, 1, b, 0);\n"
                        "}\n";
    assert_int_equal(cuco_transform_rules("snd.cu", sends, &r, &e), 0);
    assert_int_equal(r.refused, 1);
    assert_true(tx_has_note(&r.notes, "refused", 4, "collectives on 2 communicators, 'a' (line 3) and 'b' (line 4)"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A program that captures streams into a CUDA graph is transformed: the
 * report says captured calls go through NCCL's own, the glue checks the
 * stream at run time (cuco_tx::capturing), and no schedule is applied even
 * where one would be without the capture (the all-reduce's consumer below is
 * independent work an early start would move past). */
static void test_stream_capture(void **state)
{
    (void)state;
    const char *body = "void f(ncclComm_t c, cudaStream_t s, cudaGraph_t *g, float *y) {\n"
                       "  float *x; cudaMalloc(&x, 64);\n"
                       "  %s"
                       "  ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, s);\n"
                       "  scale<<<1, 32, 0, s>>>(y, 4);\n"
                       "  use<<<1, 32, 0, s>>>(x, 4);\n"
                       "  %s"
                       "}\n";
    char captured[600], plain[600];
    snprintf(captured, sizeof captured, body, "cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);\n",
             "cudaStreamEndCapture(s, g);\n");
    snprintf(plain, sizeof plain, body, "", "");
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("graph.cu", captured, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(r.program);
    assert_true(tx_has_note(&r.notes, "setup", 3, "stream capture into a CUDA graph"));
    assert_true(tx_has_note(&r.notes, "schedule", 4, "captures streams into CUDA graphs (line 3)"));
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce(x, x, 4"));
    assert_non_null(strstr(r.program, "inline bool capturing(cudaStream_t stream)"));
    assert_null(strstr(r.program, "#define CUCO_EARLY_"));
    cuco_tx_result_free(&r);
    /* the same program without the capture gets its schedule report as before */
    assert_int_equal(cuco_transform_rules("graph.cu", plain, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_false(tx_has_note(&r.notes, "schedule", 3, "captures streams"));
    assert_true(tx_has_note(&r.notes, "schedule", 3, "early_start_late_wait"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static void test_grouped_alltoall_destination(void **state)
{
    (void)state;
    const char *src = "void f(float *s, float *r, size_t n, int np, ncclComm_t comm, cudaStream_t st) {\n"
                      "  ncclGroupStart();\n"
                      "  for (int q = 0; q < np; q++) {\n"
                      "    ncclSend(s + q * n, n, ncclFloat32, q, comm, st);\n"
                      "    ncclRecv(r + q * n, n, ncclFloat32, q, comm, st);\n"
                      "  }\n"
                      "  ncclGroupEnd();\n"
                      "}\n"
                      "int main() { float *s, *r; cudaMalloc(&s, 64); cudaMalloc(&r, 64); return 0; }\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("a2a.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    /* sends keep their arguments: the receiver posts where the data goes */
    assert_non_null(strstr(r.program, "cuco_tx::send(s + q * n, n, ncclFloat32, q, comm, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::recv(r + q * n, n, ncclFloat32, q, comm, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::group_start()"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&r"));
    assert_non_null(strstr(r.program, "cudaMalloc(&s"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Receive offsets computed per peer from this rank's own data (MoE style)
 * and sends with no receive in sight are transformed: receivers post their
 * buffers at run time. Rooted collectives and the all-to-all too. */
static void test_data_dependent_offsets(void **state)
{
    (void)state;
    const char *src = "void f(float *s, float *r, size_t *off, int np, ncclComm_t c, cudaStream_t st) {\n"
                      "  ncclGroupStart();\n  for (int q = 0; q < np; q++) {\n    size_t ro = off[q];\n"
                      "    ncclSend(s, 4, ncclFloat32, q, c, st);\n    ncclRecv(r + ro, 4, ncclFloat32, q, c, st);\n"
                      "  }\n  ncclGroupEnd();\n  ncclAlltoAll(s, r, 4, ncclFloat32, c, st);\n"
                      "  ncclGather(s, r, 4, ncclFloat32, 0, c, st);\n}\n"
                      "int main() { float *r, *s; cudaMalloc(&r, 64); cudaMalloc(&s, 64); }\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("moe.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "cuco_tx::recv(r + ro, 4, ncclFloat32, q, c, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::all_to_all(s, r, 4, ncclFloat32, c, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::gather(s, r, 4, ncclFloat32, 0, c, st)"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&r"));
    /* the all-to-all's send buffer too: its consumer split pulls from it */
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&s"));
    assert_true(tx_has_note(&r.notes, "rewrite", 9, "cuco_tx::all_to_all"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* The check on a correct transformed program with one defect added. */
static void check_rejects(const char *defect, int defect_line_offset, const char *needle)
{
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", block_program, &r, &e), 0);
    assert_non_null(r.program);
    int lines = 0;
    for (const char *p = r.program; *p; p++)
        lines += *p == '\n';
    char *bad = cuco_sprintf("%s%s", r.program, defect);
    cuco_tx_notes notes = {NULL, 0};
    int passed = 1;
    assert_int_equal(cuco_transform_check("p.cu", bad, &passed, &notes, &e), 0);
    assert_int_equal(passed, 0);
    if (!tx_has_note(&notes, "error", defect_line_offset ? lines + defect_line_offset : 0, needle))
        fail_msg("no error about '%s' at line %d", needle, lines + defect_line_offset);
    cuco_tx_notes_free(&notes);
    free(bad);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

static void test_check_rejects_leftover_collective(void **state)
{
    (void)state;
    check_rejects("void g(float *x, ncclComm_t c) {\n  ncclAllGather(x, x, 1, ncclFloat32, c, 0);\n}\n", 2,
                  "ncclAllGather");
    check_rejects("void g(float *x) {\n  ncclSend(x, 1, ncclFloat32, 1, 0, 0);\n}\n", 2, "ncclSend");
}

static void test_check_rejects_host_copies(void **state)
{
    (void)state;
    check_rejects("void g(float *x, float *y) {\n  cudaMemcpyPeer(y, 1, x, 0, 4);\n}\n", 2, "cudaMemcpyPeer");
    check_rejects("void g(Step &s, float *y) {\n  cudaMemcpyAsync(s.buf, y, 4, cudaMemcpyDeviceToDevice, 0);\n}\n",
                  2, "into a received buffer stands in for communication");
}

/* Packing a send buffer and unpacking a received one are local copies. */
static void test_check_accepts_packing(void **state)
{
    (void)state;
    const char *src = "void f(float *s, float *r, float *in, float *out, ncclComm_t c) {\n"
                      "  ncclDevCommCreate(0, 0, 0);\n"
                      "  cudaMemcpyAsync(s + 4, in, 16, cudaMemcpyDeviceToDevice, 0);\n"
                      "  cuco_tx::all_to_all(s, r, 4, ncclFloat32, c, 0);\n"
                      "  cudaMemcpyAsync(out, r + 4, 16, cudaMemcpyDeviceToDevice, 0);\n"
                      "}\n";
    cuco_tx_notes notes = {NULL, 0};
    cuco_err e = CUCO_ERR_INIT;
    int passed = 0;
    assert_int_equal(cuco_transform_check("p.cu", src, &passed, &notes, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_notes_free(&notes);
    /* the same copy into the received buffer is not */
    char *bad = cuco_sprintf("%s", src);
    memcpy(strstr(bad, "(out, r + 4"), "(r + 4, out", 11);
    assert_int_equal(cuco_transform_check("p.cu", bad, &passed, &notes, &e), 0);
    assert_int_equal(passed, 0);
    assert_true(tx_has_note(&notes, "error", 5, "into a received buffer"));
    cuco_tx_notes_free(&notes);
    free(bad);
}

static void test_check_needs_device_comm(void **state)
{
    (void)state;
    cuco_tx_notes notes = {NULL, 0};
    cuco_err e = CUCO_ERR_INIT;
    int passed = 1;
    const char *src = "void f(float *x, ncclComm_t c) { cuco_tx::all_reduce(x, x, 1, ncclFloat32, ncclSum, c, 0); }\n";
    assert_int_equal(cuco_transform_check("d.cu", src, &passed, &notes, &e), 0);
    assert_int_equal(passed, 0);
    assert_true(tx_has_note(&notes, "error", 0, "device communicator"));
    cuco_tx_notes_free(&notes);
    /* a plain host program: no device communication at all */
    passed = 1;
    assert_int_equal(cuco_transform_check("d.cu", "int main() { ncclDevCommCreate(0, 0, 0); }\n", &passed, &notes, &e), 0);
    assert_int_equal(passed, 0);
    assert_true(tx_has_note(&notes, "error", 0, "no device-initiated communication"));
    cuco_tx_notes_free(&notes);
    /* a device function called with template arguments inside a kernel counts */
    passed = 0;
    const char *fused = "__global__ void k(cuco::SymmDev s, const float *x) {\n"
                        "  cuco::all_gather<cuco::Policy<ncclCoopCta, cuco::Sync::Lsa, 4>>(ncclCoopCta(), {0, 1}, s, x, 0, 64);\n}\n"
                        "int main() { ncclDevCommCreate(0, 0, 0); }\n";
    assert_int_equal(cuco_transform_check("f.cu", fused, &passed, &notes, &e), 0);
    assert_int_equal(passed, 1);
    cuco_tx_notes_free(&notes);
}

/* Counts occurrences of needle in hay. */

/* A double buffer whose halves swap roles (std::swap of the pointers, or a
 * temporary): the receive lands in either half, so both are symmetric; a
 * third buffer that only feeds a kernel is not. */
static void test_swapped_double_buffer(void **state)
{
    (void)state;
    const char *forms[] = {"    std::swap(cur, nxt);\n", "    float *t = cur; cur = nxt; nxt = t;\n"};
    for (size_t f = 0; f < 2; f++) {
        char *src = cuco_sprintf("void ring(float *a, float *b, size_t n, int to, int from, ncclComm_t c, cudaStream_t st) {\n"
                                 "  float *cur = a, *nxt = b;\n"
                                 "  for (int s = 1; s < 4; s++) {\n"
                                 "    ncclGroupStart();\n"
                                 "    ncclSend(cur, n, ncclFloat, to, c, st);\n"
                                 "    ncclRecv(nxt, n, ncclFloat, from, c, st);\n"
                                 "    ncclGroupEnd();\n"
                                 "%s"
                                 "  }\n"
                                 "}\n"
                                 "int main() { float *kv_a, *kv_b, *acc; cudaMalloc(&kv_a, 64); cudaMalloc(&kv_b, 64);\n"
                                 "  cudaMalloc(&acc, 64); ring(kv_a, kv_b, 16, 1, 1, 0, 0); }\n",
                                 forms[f]);
        cuco_tx_result r;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_transform_rules("ring.cu", src, &r, &e), 0);
        assert_int_equal(r.refused, 0);
        assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&kv_a"));
        assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&kv_b"));
        assert_non_null(strstr(r.program, "cudaMalloc(&acc"));
        cuco_tx_result_free(&r);
        cuco_err_clear(&e);
        free(src);
    }
}

/* Buffers reached through a helper's parameter under another name, a member
 * of an array element, an allocator template, and an allocator inside a
 * namespace. */
static void test_buffer_paths(void **state)
{
    (void)state;
    const char *src =
        "namespace mem {\n"
        "template <typename T> T *dev_alloc(size_t n) { T *p; cudaMalloc(&p, n * sizeof(T)); return p; }\n"
        "}\n"
        "struct Layer { float *w, *out; };\n"
        "static void alloc_layer(Layer *l, size_t n) {\n"
        "  cudaMalloc(&l->w, n * 4);\n"
        "  cudaMalloc(&l->out, n * 4);\n"
        "}\n"
        "static void reduce_tp(float *partial, size_t n, ncclComm_t c, cudaStream_t s) {\n"
        "  ncclAllReduce(partial, partial, n, ncclFloat, ncclSum, c, s);\n"
        "}\n"
        "static void gather(const float *mine, float *all, size_t n, ncclComm_t c) {\n"
        "  ncclAllGather(mine, all, n, ncclFloat, c, 0);\n"
        "}\n"
        "int main() {\n"
        "  Layer layers[2]; ncclComm_t comm; size_t n = 64;\n"
        "  for (int i = 0; i < 2; i++) alloc_layer(&layers[i], n);\n"
        "  float *table = mem::dev_alloc<float>(n * 2);\n"
        "  float *own; cudaMalloc(&own, n * 4);\n"
        "  for (int i = 0; i < 2; i++) reduce_tp(layers[i].out, n, comm, 0);\n"
        "  gather(own, table, n, comm);\n"
        "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("paths.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&l->out"));
    assert_non_null(strstr(r.program, "cudaMalloc(&l->w"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&p, n * sizeof(T))"));
    assert_non_null(strstr(r.program, "cudaMalloc(&own"));
    assert_int_equal(count_of(r.program, "cuco_tx::symm_malloc("), 2 + count_of(cuco_transform_runtime(), "cuco_tx::symm_malloc("));
    assert_true(tx_has_note(&r.notes, "symmetric", 7, "'partial' of ncclAllReduce at line 10"));
    assert_true(tx_has_note(&r.notes, "symmetric", 2, "'all' of ncclAllGather at line 13"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
    /* a parameter nobody passes a traceable buffer to stays host NCCL, with its
     * line; with nothing else to rewrite the program is refused */
    const char *lost = "static void reduce_tp(float *partial, size_t n, ncclComm_t c) {\n"
                       "  ncclAllReduce(partial, partial, n, ncclFloat, ncclSum, c, 0);\n"
                       "}\n"
                       "int main() { float *(*get)(void) = 0; reduce_tp(get(), 4, 0); }\n";
    assert_int_equal(cuco_transform_rules("lost.cu", lost, &r, &e), 0);
    assert_int_equal(r.refused, 1);
    assert_true(tx_has_note(&r.notes, "kept", 2, "cannot find the cudaMalloc of buffer 'partial'"));
    assert_true(tx_has_note(&r.notes, "refused", 0, "every NCCL call stays host NCCL"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* ncclAvg of a floating type: rewritten (the glue sums, then scales by 1/nranks). */
static void test_average(void **state)
{
    (void)state;
    const char *src = "int main() {\n  ncclComm_t c; float *g; __nv_bfloat16 *h;\n"
                      "  cudaMalloc(&g, 64); cudaMalloc(&h, 64);\n"
                      "  ncclAllReduce(g, g, 16, ncclFloat, ncclAvg, c, 0);\n"
                      "  ncclReduceScatter(h, h, 8, ncclBfloat16, ncclAvg, c, 0);\n}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("avg.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce(g, g, 16, ncclFloat, ncclAvg, c, 0)"));
    assert_non_null(strstr(r.program, "cuco_tx::reduce_scatter(h, h, 8, ncclBfloat16, ncclAvg, c, 0)"));
    assert_non_null(strstr(cuco_transform_runtime(), "scale_by_ranks"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* CUCO_TX_DTYPES: float plus the literal or macro types of the reductions
 * (a bf16 reduce-scatter: 0x5; only byte moves: 0x1; a macro naming half:
 * 0x3); none when a reduction's type is read from a variable, even one the
 * file assigns a literal (every type built) */
static void test_reduction_dtypes(void **state)
{
    (void)state;
    static const struct {
        const char *calls, *want;
    } cases[] = {
        {"  ncclAllReduce(g, g, 16, ncclFloat, ncclSum, c, 0);\n"
         "  ncclReduceScatter(h, h, 8, ncclBfloat16, ncclSum, c, 0);\n",
         "#define CUCO_TX_DTYPES 0x5\n"},
        {"  ncclAllGather(g, h, 4, ncclBfloat16, c, 0);\n", "#define CUCO_TX_DTYPES 0x1\n"},
        {"  ncclAllReduce(g, g, 16, ncclInt, ncclSum, c, 0);\n", "#define CUCO_TX_DTYPES 0x9\n"},
        {"  ncclAllReduce(g, g, 16, t, ncclSum, c, 0);\n", NULL},
        /* a variable given a literal somewhere may carry another type */
        {"  ncclDataType_t u = ncclHalf;\n  ncclAllReduce(g, g, 16, u, ncclSum, c, 0);\n", NULL},
        {"  ncclAllReduce(g, g, 16, DT, ncclSum, c, 0);\n", "#define CUCO_TX_DTYPES 0x3\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *src = cuco_sprintf("#define DT ncclHalf\nint main(int argc, char **argv) {\n  "
                                 "ncclComm_t c; float *g; "
                                 "__nv_bfloat16 *h;\n  ncclDataType_t t = argc > 1 ? ncclHalf : "
                                 "ncclFloat;\n  cudaMalloc(&g, 64); cudaMalloc(&h, 64);\n%s}\n",
                                 cases[i].calls);
        assert_non_null(src);
        cuco_tx_result r;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_transform_rules("dt.cu", src, &r, &e), 0);
        assert_int_equal(r.refused, 0);
        /* the transform's line, not the glue's default */
        const char *got = strstr(r.program, "goes through NCCL)\n#define CUCO_TX_DTYPES 0x");
        if (got)
            got = strchr(got, '\n') + 1;
        if (cases[i].want ? !got || strncmp(got, cases[i].want, strlen(cases[i].want)) : !!got)
            fail_msg("case %zu: %.40s", i, got ? got : "no CUCO_TX_DTYPES");
        cuco_tx_result_free(&r);
        cuco_err_clear(&e);
        free(src);
    }
}

/* Buffers reached through the ways user code passes them on: a method of a
 * class with a const qualifier called on an object, a template helper called
 * after "else" and with explicit template arguments, a table of pointers
 * ("void *outs[] = {y}"), and a table of pointer addresses filled by stores
 * through it ("*(ptrs[i]) = it" with ptrs = {&t->a, &t->b}). */
static void test_buffers_through_methods_and_tables(void **state)
{
    (void)state;
    const char *src = "struct Comm {\n"                                                     /* 1 */
                      "  ncclComm_t c; cudaStream_t s;\n"                                   /* 2 */
                      "  void sum(float *buf, size_t n) const {\n"                          /* 3 */
                      "    ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c, s);\n"         /* 4 */
                      "  }\n"                                                               /* 5 */
                      "};\n"                                                                /* 6 */
                      "template <typename T> void red(T *data, size_t n, ncclComm_t c) {\n" /* 7 */
                      "  ncclAllReduce(data, data, n, ncclFloat, ncclSum, c, 0);\n"         /* 8 */
                      "}\n"                                                                 /* 9 */
                      "void gather(void *const *outs, const void *in, ncclComm_t c) {\n"    /* 10 */
                      "  ncclAllGather(in, outs[0], 4, ncclFloat, c, 0);\n"                 /* 11 */
                      "}\n"                                                                 /* 12 */
                      "struct P { float *a, *b; };\n"                                       /* 13 */
                      "float *point(P *t) {\n"                                              /* 14 */
                      "  float *mem; cudaMalloc(&mem, 64);\n"                               /* 15 */
                      "  float **ptrs[] = {&t->a, &t->b};\n"                                /* 16 */
                      "  float *it = mem;\n"                                                /* 17 */
                      "  for (int i = 0; i < 2; i++) { *(ptrs[i]) = it; it += 8; }\n"       /* 18 */
                      "  return mem;\n"                                                     /* 19 */
                      "}\n"                                                                 /* 20 */
                      "int main(int argc, char **) {\n"                                     /* 21 */
                      "  Comm k; float *g, *x, *y, *z, *unused; P p;\n"                     /* 22 */
                      "  cudaMalloc(&g, 64); cudaMalloc(&x, 64); cudaMalloc(&y, 64);\n"     /* 23 */
                      "  cudaMalloc(&z, 64); cudaMalloc(&unused, 64); point(&p);\n"         /* 24 */
                      "  k.sum(g, 16);\n"                                                   /* 25 */
                      "  if (argc > 1) red<float>(x, 16, k.c); else red(z, 16, k.c);\n"     /* 26 */
                      "  void *outs[] = {y};\n"                                             /* 27 */
                      "  gather(outs, x, k.c);\n"                                           /* 28 */
                      "  float *tab[] = {p.a, p.b};\n"                                      /* 29 */
                      "  red(tab[1], 8, k.c);\n"                                            /* 30 */
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("t.cu", src, &r, &e), 0);
    for (size_t i = 0; i < r.notes.n; i++)
        if (!strcmp(r.notes.items[i].kind, "refused"))
            fprintf(stderr, "%d: %s\n", r.notes.items[i].line, r.notes.items[i].text);
    assert_int_equal(r.refused, 0);
    /* g (method), x and z (template helper), y (table), mem (pointer table) */
    assert_true(tx_has_note(&r.notes, "symmetric", 23, "'buf' of ncclAllReduce at line 4"));
    assert_true(tx_has_note(&r.notes, "symmetric", 15, "'data' of ncclAllReduce at line 8"));
    assert_true(tx_has_note(&r.notes, "symmetric", 23, "'outs[0]' of ncclAllGather at line 11"));
    assert_true(tx_has_note(&r.notes, "symmetric", 24, "'data' of ncclAllReduce at line 8"));
    assert_int_equal(count_of(r.program, "cuco_tx::symm_malloc(&"), 5);
    assert_non_null(strstr(r.program, "cudaMalloc(&unused, 64)"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A table's elements set to views of one flat buffer (DDP's layout), and a
 * struct member traced through the aggregates of its struct: the buffers
 * behind them become windows, the unrelated one does not. */
static void test_buffers_through_views_and_aggregates(void **state)
{
    (void)state;
    const char *src = "struct Bucket { float *grad; size_t n; };\n"                       /* 1 */
                      "static void sum(float *x, size_t n, ncclComm_t c) {\n"             /* 2 */
                      "  ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, 0);\n"             /* 3 */
                      "}\n"                                                               /* 4 */
                      "int main() {\n"                                                    /* 5 */
                      "  ncclComm_t c; float *flat, *own, *unused, *g[4];\n"              /* 6 */
                      "  cudaMalloc(&flat, 256);\n"                                       /* 7 */
                      "  cudaMalloc(&own, 64);\n"                                         /* 8 */
                      "  cudaMalloc(&unused, 64);\n"                                      /* 9 */
                      "  for (int b = 0; b < 4; b++) g[b] = flat + b * 16;\n"             /* 10 */
                      "  Bucket bk{own, 16};\n"                                           /* 11 */
                      "  Bucket other = Bucket{unused, 16};\n"                            /* 12 */
                      "  (void)other;\n"                                                  /* 13 */
                      "  sum(g[2], 16, c);\n"                                             /* 14 */
                      "  ncclAllReduce(bk.grad, bk.grad, bk.n, ncclFloat, ncclSum, c, 0);\n" /* 15 */
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("t.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "symmetric", 7, "'x' of ncclAllReduce at line 3"));
    assert_true(tx_has_note(&r.notes, "symmetric", 8, "'bk.grad' of ncclAllReduce at line 15"));
    /* members are matched by name: the other aggregate's buffer too */
    assert_true(tx_has_note(&r.notes, "symmetric", 9, "'bk.grad' of ncclAllReduce at line 15"));
    assert_int_equal(count_of(r.program, "cuco_tx::symm_malloc(&"), 3);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A helper called with two communicators stays host NCCL (the runtime
 * registers every buffer with one communicator, and its one call serves
 * both); one
 * communicator known under two paths ("a.comm", "cfg->comm") or through a
 * copy ("mine = a.comm") is one, and an accessor ("a.get()") is not counted. */
static void test_one_communicator(void **state)
{
    (void)state;
    const char *two = "static void reduce(float *b, ncclComm_t comm, cudaStream_t s) {\n"
                      "  ncclAllReduce(b, b, 4, ncclFloat, ncclSum, comm, s);\n"
                      "}\n"
                      "int main() {\n"
                      "  ncclComm_t world = nullptr, tp = NULL; float *x; cudaMalloc(&x, 64);\n"
                      "  ncclCommSplit(world, 0, 0, &tp, NULL);\n"
                      "  reduce(x, tp, 0);\n"
                      "  reduce(x, world, 0);\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("two.cu", two, &r, &e), 0);
    assert_int_equal(r.refused, 1);
    assert_null(r.program);
    /* the helper's one call serves both communicators: it stays host NCCL,
     * and nothing else is left to rewrite */
    assert_true(tx_has_note(&r.notes, "kept", 2,
                            "on communicator 'world': the device calls use 'tp'"));
    assert_true(tx_has_note(&r.notes, "refused", 0, "every NCCL call stays host NCCL"));
    cuco_tx_result_free(&r);

    const char *one = "struct Cfg { ncclComm_t comm; };\n"
                      "static void reduce(float *b, Cfg *cfg) {\n"
                      "  ncclAllReduce(b, b, 4, ncclFloat, ncclSum, cfg->comm, 0);\n"
                      "}\n"
                      "int main() {\n"
                      "  Cfg a; float *x; cudaMalloc(&x, 64);\n"
                      "  ncclAllGather(x, x, 1, ncclFloat, a.comm, 0);\n"
                      "  reduce(x, &a);\n"
                      "  ncclComm_t mine = a.comm;\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, mine, 0);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, a.get(), 0);\n"
                      "}\n";
    assert_int_equal(cuco_transform_rules("one.cu", one, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Data types and reductions named by macros or constants count as their
 * values: every #if branch of a macro (one branch with ncclDouble keeps the
 * call host NCCL, naming the macro, the value and its line), as does a
 * constant naming ncclMax; ncclFloat and ncclSum through names pass. */
static void test_reduce_names(void **state)
{
    (void)state;
    const char *ok = "#define REAL_T ncclFloat\n"
                     "static constexpr ncclRedOp_t kOp = ncclSum;\n"
                     "void f(float *x, ncclComm_t c) {\n  cudaMalloc(&x, 64);\n"
                     "  ncclAllReduce(x, x, 4, REAL_T, kOp, c, 0);\n}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("ok.cu", ok, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    cuco_tx_result_free(&r);

    const char *branches =
        "#ifdef USE_DOUBLE\n#define REAL_T ncclDouble\n#else\n#define REAL_T ncclFloat\n#endif\n"
        "const ncclRedOp_t op = ncclMax;\n"
        "void f(float *x, ncclComm_t c) {\n  cudaMalloc(&x, 64);\n"
        "  ncclAllReduce(x, x, 4, REAL_T, ncclSum, c, 0);\n"
        "  ncclReduceScatter(x, x, 1, ncclFloat, op, c, 0);\n}\n";
    assert_int_equal(cuco_transform_rules("br.cu", branches, &r, &e), 0);
    assert_int_equal(r.refused, 1); /* both stay host NCCL: nothing is left to rewrite */
    assert_true(tx_has_note(&r.notes, "kept", 9,
                         "data type REAL_T (ncclDouble at line 2) has no device reduction"));
    assert_true(tx_has_note(&r.notes, "kept", 10,
                         "reduction op (ncclMax at line 6) is not ncclSum or ncclAvg"));
    assert_true(tx_has_note(&r.notes, "refused", 0, "every NCCL call stays host NCCL"));
    cuco_tx_result_free(&r);

    /* ncclAvg needs a floating type, also through a name */
    const char *avg =
        "#define HALF_T ncclHalf\n"
        "void f(float *x, int *y, ncclComm_t c) {\n  cudaMalloc(&x, 64); cudaMalloc(&y, 64);\n"
        "  ncclAllReduce(x, x, 4, HALF_T, ncclAvg, c, 0);\n"
        "  ncclAllReduce(y, y, 4, ncclInt32, ncclAvg, c, 0);\n}\n";
    assert_int_equal(cuco_transform_rules("avg.cu", avg, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "rewrite", 4, "cuco_tx::all_reduce"));
    assert_true(tx_has_note(&r.notes, "kept", 5, "ncclAvg of data type 'ncclInt32'"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A non-blocking communicator (config.blocking = 0) answers ncclInProgress
 * where the device runtime expects completed calls: refused at the call that
 * makes it, naming the line of blocking = 0; a blocking one gets its setup
 * right after the call. */
static void test_nonblocking_config(void **state)
{
    (void)state;
    const char *src = "int main() {\n"
                      "  ncclComm_t comm; ncclUniqueId id; ncclResult_t st;\n"
                      "  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;\n"
                      "  config.blocking = 0;\n"
                      "  ncclCommInitRankConfig(&comm, 2, id, 0, &config);\n"
                      "  do { ncclCommGetAsyncError(comm, &st); } while (st == ncclInProgress);\n"
                      "  float *x; cudaMalloc(&x, 64);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, 0);\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("nb.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 1);
    assert_null(r.program);
    assert_true(
        tx_has_note(&r.notes, "refused", 5, "non-blocking communicator (blocking = 0 at line 4)"));
    cuco_tx_result_free(&r);

    char *blocking = cuco_strdup(src);
    char *zero = strstr(blocking, "blocking = 0");
    zero[strlen("blocking = ")] = '1';
    assert_int_equal(cuco_transform_rules("b.cu", blocking, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "cuco_tx::comm_setup(*(&comm));"));
    cuco_tx_result_free(&r);
    free(blocking);
    cuco_err_clear(&e);
}

/* A communicator made in a condition whose block handles the failure: its
 * setup wraps the call (on success, keeping its result) instead of going
 * into the failure's block, and the EVOLVE-BLOCK around the edit holds the
 * whole if statement (its braces balanced) */
static void test_init_in_condition(void **state)
{
    (void)state;
    const char *src = "int main() {\n"
                      "  ncclComm_t comm; ncclUniqueId id; float *x;\n"
                      "  if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess || !id.internal[0]) {\n"
                      "    fprintf(stderr, \"init failed\\n\");\n"
                      "    return 1;\n"
                      "  } else if (0) {\n"
                      "    return 2;\n"
                      "  }\n"
                      "  cudaMalloc(&x, 64);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, 0);\n"
                      "  return 0;\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("cond.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "if (cuco_tx::comm_made(ncclCommInitRank(&comm, 2, id, 0), "
                                      "(&comm)) != ncclSuccess || !id.internal[0]) {\n"));
    assert_null(strstr(r.program, "cuco_tx::comm_setup(*(&comm));"));
    const char *start = strstr(r.program, "// EVOLVE-BLOCK-START\n  if (cuco_tx::comm_made(");
    const char *end = start ? strstr(start, "// EVOLVE-BLOCK-END") : NULL;
    assert_non_null(start);
    assert_non_null(end);
    int depth = 0;
    for (const char *p = start; p < end; p++)
        depth += (*p == '{') - (*p == '}');
    assert_int_equal(depth, 0);
    /* the block holds the if statement, its else branch included */
    const char *else_end = strstr(start, "    return 2;\n  }\n");
    assert_non_null(else_end);
    assert_true(else_end < end);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Windows are registered at allocation (CUCO_TX_ONE_COMM) only where the
 * program makes one communicator, once: in main, or in a helper main calls
 * once (outside a loop). A second one made later (a split), or one made by a
 * helper called twice or in a loop, could own buffers allocated while the
 * first is the only one, so those keep registration at first use. */
static void test_one_comm_eager_windows(void **state)
{
    (void)state;
    const char *once = "int main() {\n"
                       "  ncclComm_t comm; ncclUniqueId id; float *x;\n"
                       "  ncclCommInitRank(&comm, 4, id, 0);\n"
                       "  cudaMalloc(&x, 64);\n"
                       "  ncclSend(x, 16, ncclFloat, 1, comm, 0);\n"
                       "}\n";
    const char *split = "int main() {\n"
                        "  ncclComm_t comm, tp; ncclUniqueId id; float *x;\n"
                        "  ncclCommInitRank(&comm, 4, id, 0);\n"
                        "  ncclCommSplit(comm, 0, 0, &tp, NULL);\n"
                        "  cudaMalloc(&x, 64);\n"
                        "  ncclSend(x, 16, ncclFloat, 1, tp, 0);\n"
                        "}\n";
    const char *helper = "static void make(ncclComm_t *c, ncclUniqueId id) {\n"
                         "  ncclCommInitRank(c, 4, id, 0);\n"
                         "}\n"
                         "int main() {\n"
                         "  ncclComm_t comm; ncclUniqueId id; float *x;\n"
                         "  make(&comm, id);\n"
                         "  cudaMalloc(&x, 64);\n"
                         "  ncclSend(x, 16, ncclFloat, 1, comm, 0);\n"
                         "}\n";
    const char *twice = "static void make(ncclComm_t *c, ncclUniqueId id) {\n"
                        "  ncclCommInitRank(c, 4, id, 0);\n"
                        "}\n"
                        "int main() {\n"
                        "  ncclComm_t comm, other; ncclUniqueId id; float *x;\n"
                        "  make(&comm, id);\n"
                        "  make(&other, id);\n"
                        "  cudaMalloc(&x, 64);\n"
                        "  ncclSend(x, 16, ncclFloat, 1, comm, 0);\n"
                        "}\n";
    const char *looped = "static void make(ncclComm_t *c, ncclUniqueId id) {\n"
                         "  ncclCommInitRank(c, 4, id, 0);\n"
                         "}\n"
                         "static void setup(ncclComm_t *c, ncclUniqueId id) { make(c, id); }\n"
                         "int main() {\n"
                         "  ncclComm_t comm; ncclUniqueId id; float *x;\n"
                         "  for (int i = 0; i < 2; i++) setup(&comm, id);\n"
                         "  cudaMalloc(&x, 64);\n"
                         "  ncclSend(x, 16, ncclFloat, 1, comm, 0);\n"
                         "}\n";
    const char *lambda = "int main() {\n"
                         "  ncclComm_t comm; ncclUniqueId id; float *x;\n"
                         "  auto make = [&]() { ncclCommInitRank(&comm, 4, id, 0); };\n"
                         "  make(); make();\n"
                         "  cudaMalloc(&x, 64);\n"
                         "  ncclSend(x, 16, ncclFloat, 1, comm, 0);\n"
                         "}\n";
    const char *srcs[] = {once, helper, split, twice, looped, lambda};
    for (int k = 0; k < 6; k++) {
        cuco_tx_result r;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_transform_rules("o.cu", srcs[k], &r, &e), 0);
        assert_int_equal(r.refused, 0);
        const char *def = strstr(r.program, "#define CUCO_TX_ONE_COMM 1");
        if (k <= 1)
            assert_non_null(def);
        else
            assert_null(def);
        /* the report says when the windows are registered, and why */
        const char *said = k <= 1   ? "windows registered right after this setup"
                           : k == 2 ? "at their first use, so every rank must reach a rewritten "
                                      "call (the file makes 2 communicators); the calls of the "
                                      "communicator set up first take the device path"
                                    : "its communicator may be made more than once";
        /* the split (k 2): the world communicator, which no call names, is
         * not set up; the note is at the split's setup */
        int line = k == 1 || k == 3 ? 2 : k == 4 ? 2 : k == 2 ? 4 : 3;
        assert_true(tx_has_note(&r.notes, "setup", line, said));
        cuco_tx_result_free(&r);
        cuco_err_clear(&e);
    }
}

/* A symmetric buffer allocated under a branch that reads the rank (directly,
 * through a flag made from it, or in the else of such a branch) gets a note
 * naming the condition; one under a branch that does not read it, or
 * outside any branch, gets none. */
static void test_rank_branch_alloc(void **state)
{
    (void)state;
    const char *src = "int main() {\n"
                      "  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n"
                      "  ncclComm_t comm; ncclUniqueId id; float *x = 0, *y, *z, *w; int n = 4;\n"
                      "  ncclCommInitRank(&comm, 2, id, rank);\n"
                      "  int second = rank == 1;\n"
                      "  if (second) { cudaMalloc(&x, 64); }\n"
                      "  if (rank == 0) n = 8; else cudaMalloc(&z, 64);\n"
                      "  if (n > 2) cudaMalloc(&w, 64);\n"
                      "  cudaMalloc(&y, 64);\n"
                      "  if (second) ncclRecv(x, 16, ncclFloat, 0, comm, 0);\n"
                      "  ncclAllReduce(y, y, 16, ncclFloat, ncclSum, comm, 0);\n"
                      "  ncclAllReduce(z, z, 16, ncclFloat, ncclSum, comm, 0);\n"
                      "  ncclAllReduce(w, w, 16, ncclFloat, ncclSum, comm, 0);\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("rb.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "note", 6, "only where 'if (second)' (line 6) holds"));
    assert_true(tx_has_note(&r.notes, "note", 7, "only where 'if (rank == 0)' (line 7) holds"));
    assert_false(tx_has_note(&r.notes, "note", 8, "reads the rank"));
    assert_false(tx_has_note(&r.notes, "note", 9, "reads the rank"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);

    /* an if/else-if chain and a loop under an if end where their bodies end;
     * an early return leaves the rest of its block to the other ranks; a
     * result code of the init call and a computed rank argument name no rank */
    const char *more = "int main(int argc, char **argv) {\n"
                       "  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n"
                       "  ncclComm_t comm; ncclUniqueId id; float *a, *b, *c, *d; int n = 4;\n"
                       "  ncclResult_t res = ncclCommInitRank(&comm, 2, id, rank);\n"
                       "  if (rank == 0) { n = 1; } else if (rank == 1) { n = 2; }\n"
                       "  cudaMalloc(&a, 64);\n"
                       "  if (rank == 0) for (int i = 0; i < 2; i++) { n++; }\n"
                       "  cudaMalloc(&b, 64);\n"
                       "  if (res != ncclSuccess) n = 0;\n"
                       "  cudaMalloc(&c, 64);\n"
                       "  if (rank >= 2) { MPI_Finalize(); return 0; }\n"
                       "  cudaMalloc(&d, 64);\n"
                       "  ncclAllReduce(a, a, 16, ncclFloat, ncclSum, comm, 0);\n"
                       "  ncclAllReduce(b, b, 16, ncclFloat, ncclSum, comm, 0);\n"
                       "  ncclAllReduce(c, c, 16, ncclFloat, ncclSum, comm, 0);\n"
                       "  ncclAllReduce(d, d, 16, ncclFloat, ncclSum, comm, 0);\n"
                       "}\n";
    assert_int_equal(cuco_transform_rules("rb2.cu", more, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_false(tx_has_note(&r.notes, "note", 6, "reads the rank"));
    assert_false(tx_has_note(&r.notes, "note", 8, "reads the rank"));
    assert_false(tx_has_note(&r.notes, "note", 10, "reads the rank"));
    assert_true(tx_has_note(&r.notes, "note", 12, "'if (rank >= 2)' (line 11) does not hold"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);

    /* through a helper: flagged when every call of it is under a rank branch
     * (the note names the first call), not when one call runs everywhere */
    const char *helpers = "static float *x, *y;\n"
                          "static void make_recv(void) { cudaMalloc(&x, 64); }\n"
                          "static void make_both(void) { cudaMalloc(&y, 64); }\n"
                          "int main() {\n"
                          "  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n"
                          "  ncclComm_t comm; ncclUniqueId id;\n"
                          "  ncclCommInitRank(&comm, 2, id, rank);\n"
                          "  if (rank == 1) make_recv();\n"
                          "  if (rank == 0) make_both();\n"
                          "  make_both();\n"
                          "  if (rank == 1) ncclRecv(x, 16, ncclFloat, 0, comm, 0);\n"
                          "  ncclAllReduce(y, y, 16, ncclFloat, ncclSum, comm, 0);\n"
                          "}\n";
    assert_int_equal(cuco_transform_rules("rb3.cu", helpers, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "note", 2,
                            "'if (rank == 1)' (line 8) holds (it decides every call of its function, "
                            "the first at line 8)"));
    assert_false(tx_has_note(&r.notes, "note", 3, "reads the rank"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* A named lambda wrapping a collective is a helper like a function: its
 * buffer parameter is what its calls pass, and its communicator parameter
 * too (two communicators through one lambda are refused). */
static void test_lambda_helper(void **state)
{
    (void)state;
    const char *src = "int main() {\n"
                      "  ncclComm_t comm; cudaStream_t s; float *g, *h;\n"
                      "  cudaMalloc(&g, 64); cudaMalloc(&h, 64);\n"
                      "  auto allreduce = [&](float *buf, size_t n) {\n"
                      "    ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s);\n"
                      "  };\n"
                      "  allreduce(g, 16);\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("l.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&g, 64); cudaMalloc(&h, 64);"));
    cuco_tx_result_free(&r);

    const char *two = "int main() {\n"
                      "  ncclComm_t world, tp; float *g; cudaMalloc(&g, 64);\n"
                      "  auto sum = [](float *b, ncclComm_t c) {\n"
                      "    ncclAllReduce(b, b, 4, ncclFloat, ncclSum, c, 0);\n"
                      "  };\n"
                      "  sum(g, world);\n"
                      "  sum(g, tp);\n"
                      "}\n";
    assert_int_equal(cuco_transform_rules("l2.cu", two, &r, &e), 0);
    assert_int_equal(r.refused, 1); /* its one call serves both: it stays host NCCL */
    assert_true(tx_has_note(&r.notes, "kept", 4, "on communicator 'tp': the device calls use 'world'"));
    assert_true(tx_has_note(&r.notes, "refused", 0, "every NCCL call stays host NCCL"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Several GPUs per process with one rank each (NCCL's multi-device
 * example): communicators made in a loop inside a group, collectives on
 * comms[i]. Refused at both (the group of inits must stay NCCL's, and the
 * runtime keeps one device communicator per process). */
/* One process driving several GPUs (NCCL's own examples): communicators per
 * device in a group loop, arrays of communicators, ncclCommInitAll. Made for
 * one GPU per process, with a guard after the call that stops the program at
 * a second communicator, and a note that says why. */
static void test_devices_per_process(void **state)
{
    (void)state;
    const char *src = "int main() {\n"
                      "  ncclComm_t comms[2]; ncclUniqueId id; float *buf[2]; cudaStream_t s[2];\n"
                      "  for (int i = 0; i < 2; i++) cudaMalloc(buf + i, 64);\n"
                      "  ncclGroupStart();\n"
                      "  for (int i = 0; i < 2; i++) ncclCommInitRank(comms + i, 4, id, i);\n"
                      "  ncclGroupEnd();\n"
                      "  for (int i = 0; i < 2; i++)\n"
                      "    ncclAllReduce(buf[i], buf[i], 4, ncclFloat, ncclSum, comms[i], s[i]);\n"
                      "  for (int i = 0; i < 2; i++)\n"
                      "    ncclCommDestroy(comms[i]);\n"
                      "}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("md.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "note", 5, "one process drives several GPUs; transformed for one GPU"));
    assert_true(tx_has_note(&r.notes, "symmetric", 3, "'buf[i]' of ncclAllReduce"));
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce(buf[i], buf[i], 4, ncclFloat, ncclSum, comms[i], s[i])"));
    assert_non_null(strstr(r.program, "__sync_add_and_fetch(&cuco_tx_comms_made, 1) > 1"));
    /* no device communicator made inside the group: the first collective makes it */
    assert_null(strstr(r.program, "cuco_tx::comm_setup(*(comms + i))"));
    /* the group makes communicators only: it stays NCCL's own, so that the
     * inits complete together at its end and the guard can stop the program
     * (the device runtime's group would let the first init wait forever) */
    assert_true(tx_has_note(&r.notes, "setup", 4, "stays NCCL's own group"));
    assert_non_null(strstr(r.program, "\n  ncclGroupStart();\n"));
    assert_non_null(strstr(r.program, "\n  ncclGroupEnd();\n"));
    assert_null(strstr(r.program, "cuco_tx::group_start"));
    /* the loop's body gets braces: the guard counts each communicator */
    assert_non_null(strstr(r.program, "for (int i = 0; i < 2; i++) { ncclCommInitRank(comms + i, 4, id, i); { "
                                      "static int cuco_tx_comms_made"));
    /* the single-statement body of the destroy loop keeps its loop */
    assert_non_null(strstr(r.program, "{ cuco_tx::comm_teardown(comms[i]); ncclCommDestroy(comms[i]); }"));
    cuco_tx_result_free(&r);

    const char *all = "int main(int argc, char **argv) {\n"
                      "  int ndev = argc; ncclComm_t cs[8]; float *x; cudaMalloc(&x, 64);\n"
                      "  ncclCommInitAll(cs, ndev, 0);\n"
                      "  ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, cs[0], 0);\n}\n";
    assert_int_equal(cuco_transform_rules("all.cu", all, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "note", 3, "ncclCommInitAll: one process drives several GPUs"));
    assert_non_null(strstr(r.program, "ncclCommInitAll(cs, ndev, 0); if ((int)(ndev) > 1) {"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* Buffers are the variables of the function that declares them: a
 * reference solver with the same names in another function keeps plain
 * cudaMalloc; a caller's variable named like the callee's parameter is the
 * caller's own; a store through a pointer ("*s->p = v") is not a new value
 * of the pointer; a parameter of a function nothing calls is guessed to be
 * the same-named buffer, and the note says so. */
static void test_scoped_names(void **state)
{
    (void)state;
    const char *src = "void dist(ncclComm_t c, cudaStream_t s, int n) {\n"        /* 1 */
                      "  float *d_a, *d_b; cudaMalloc(&d_a, n); cudaMalloc(&d_b, n);\n" /* 2 */
                      "  ncclAllReduce(d_a, d_b, n, ncclFloat, ncclSum, c, s);\n"  /* 3 */
                      "}\n"                                                        /* 4 */
                      "void reference(int n) {\n"                                 /* 5 */
                      "  float *d_a, *d_b; cudaMalloc(&d_a, n); cudaMalloc(&d_b, n);\n" /* 6 */
                      "  cudaMemcpy(d_a, d_b, n, cudaMemcpyDeviceToDevice);\n"    /* 7 */
                      "}\n"                                                        /* 8 */
                      "struct Z { float *scalar; };\n"                             /* 9 */
                      "void sum(Z *z, float *g, float v, ncclComm_t c) {\n"       /* 10 */
                      "  *z->scalar = v;\n"                                        /* 11 */
                      "  ncclAllReduce(g, g, 1, ncclFloat, ncclSum, c, 0);\n"      /* 12 */
                      "}\n"                                                        /* 13 */
                      "int main() { Z z; float *g, *v; cudaMalloc(&g, 4); cudaMalloc(&v, 4);\n" /* 14 */
                      "  float *other; cudaMalloc(&other, 4); sum(&z, g, 1.0f, 0); }\n"; /* 15 */
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("ref.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "symmetric", 2, "'d_b' of ncclAllReduce at line 3"));
    assert_false(tx_has_note(&r.notes, "symmetric", 6, ""));
    assert_true(tx_has_note(&r.notes, "symmetric", 14, "'g' of ncclAllReduce at line 12"));
    assert_int_equal(count_of(r.program, "cuco_tx::symm_malloc("), 2);
    assert_non_null(strstr(r.program, "cudaMalloc(&v, 4)"));
    assert_false(tx_has_note(&r.notes, "note", 0, "guessed"));
    cuco_tx_result_free(&r);

    const char *uncalled = "void step(float *buf, ncclComm_t c) {\n"
                           "  ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, c, 0);\n}\n"
                           "int main() { float *buf; cudaMalloc(&buf, 16); }\n";
    assert_int_equal(cuco_transform_rules("u.cu", uncalled, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "note", 1, "guessed: 'buf' of step"));
    assert_true(tx_has_note(&r.notes, "symmetric", 4, "'buf' of ncclAllReduce at line 2"));
    cuco_tx_result_free(&r);

    /* a member named after a ',' in a call is a use, not a declaration: the
     * member's cudaMalloc in the constructor is found */
    const char *member = "struct L {\n"
                         "  L(int n) : n_(n) { cudaMalloc(&in_, n); cudaMalloc(&out_, n); }\n"
                         "  void run(ncclComm_t c) { ncclAllReduce(in_, out_, n_, ncclFloat, ncclSum, c, 0); }\n"
                         "  float *in_ = nullptr, *out_ = nullptr; int n_;\n"
                         "};\n";
    assert_int_equal(cuco_transform_rules("m.cu", member, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "symmetric", 2, "'out_' of ncclAllReduce at line 3"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* An all-reduce of managed memory (a scalar the host reads) runs through a
 * symmetric staging buffer of the glue; the managed allocation stays. */
static void test_managed_staged(void **state)
{
    (void)state;
    const char *src = "float total(float v, ncclComm_t c, cudaStream_t s) {\n"
                      "  static float *u = nullptr; if (!u) cudaMallocManaged(&u, sizeof(float));\n"
                      "  *u = v;\n"
                      "  ncclAllReduce(u, u, 1, ncclFloat, ncclSum, c, s);\n"
                      "  cudaStreamSynchronize(s); return *u;\n}\n";
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("m.cu", src, &r, &e), 0);
    assert_int_equal(r.refused, 0);
    assert_true(tx_has_note(&r.notes, "symmetric", 4, "comes from cudaMallocManaged at line 2"));
    assert_non_null(strstr(r.program, "cuco_tx::staged_all_reduce(u, u, 1, ncclFloat, ncclSum, c, s)"));
    assert_non_null(strstr(r.program, "inline ncclResult_t staged_all_reduce("));
    assert_non_null(strstr(r.program, "cudaMallocManaged(&u, sizeof(float))"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_in_block),
        cmocka_unit_test(test_frees_in_macros_and_deleters),
        cmocka_unit_test(test_frees_left_alone),
        cmocka_unit_test(test_frozen_macro_free_noted),
        cmocka_unit_test(test_wraps_program_without_blocks),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_kept_calls),
        cmocka_unit_test(test_buffer_names),
        cmocka_unit_test(test_kept_p2p_group),
        cmocka_unit_test(test_kept_in_group),
        cmocka_unit_test(test_several_comms),
        cmocka_unit_test(test_macro_names),
        cmocka_unit_test(test_stream_capture),
        cmocka_unit_test(test_grouped_alltoall_destination),
        cmocka_unit_test(test_data_dependent_offsets),
        cmocka_unit_test(test_check_rejects_leftover_collective),
        cmocka_unit_test(test_check_rejects_host_copies),
        cmocka_unit_test(test_check_accepts_packing),
        cmocka_unit_test(test_check_needs_device_comm),
        cmocka_unit_test(test_swapped_double_buffer),
        cmocka_unit_test(test_buffer_paths),
        cmocka_unit_test(test_average),
        cmocka_unit_test(test_reduction_dtypes),
        cmocka_unit_test(test_buffers_through_methods_and_tables),
        cmocka_unit_test(test_buffers_through_views_and_aggregates),
        cmocka_unit_test(test_one_communicator),
        cmocka_unit_test(test_reduce_names),
        cmocka_unit_test(test_nonblocking_config),
        cmocka_unit_test(test_init_in_condition),
        cmocka_unit_test(test_one_comm_eager_windows),
        cmocka_unit_test(test_rank_branch_alloc),
        cmocka_unit_test(test_lambda_helper),
        cmocka_unit_test(test_devices_per_process),
        cmocka_unit_test(test_scoped_names),
        cmocka_unit_test(test_managed_staged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
