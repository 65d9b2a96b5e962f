/* test_split.c: schedule (b), consumer split by source, through
 * cuco_transform_rules on small programs: an all-gather whose first consumer
 * is a cuBLAS GEMM reading the gathered buffer (directly, through an alias,
 * as the body of an unbraced if) gets the split (GEMM glue, split_site on the
 * all-gather, the CUCO_SPLIT knob, the wait after the GEMM); a GEMM that is
 * not the first reader, or that reads neither operand from the buffer, does
 * not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/program.h"
#include "cuco/transform.h"
#include "tx_test.h"

/* Whether the program declares knob name among its knobs. */
static int has_knob(const char *program, const char *name)
{
    cuco_err e = CUCO_ERR_INIT;
    cuco_knob *k = NULL;
    size_t nk = 0;
    assert_int_equal(cuco_program_knobs(program, &k, &nk, &e), 0);
    int found = 0;
    for (size_t i = 0; i < nk; i++)
        found += strcmp(k[i].name, name) == 0 && k[i].value_in_choices;
    cuco_knobs_free(k, nk);
    cuco_err_clear(&e);
    return found == 1;
}

#define PROG_HEAD                                                                                  \
    "#include <nccl.h>\n"                                                                          \
    "#include <cublas_v2.h>\n"                                                                     \
    "__global__ void k(float *a, size_t n);\n"                                                     \
    "static void step(cublasHandle_t h, float *x, float *g, float *w, float *y, int m, int kk,\n"  \
    "                 ncclComm_t c, cudaStream_t s)\n"                                             \
    "{\n"                                                                                          \
    "    const float one = 1.0f, zero = 0.0f;\n"
#define PROG_TAIL                                                                                  \
    "    k<<<1, 32, 0, s>>>(g, 4);\n"                                                              \
    "}\n"                                                                                          \
    "int main() {\n"                                                                               \
    "    float *x, *g, *w, *y; ncclComm_t c; cudaStream_t s; cublasHandle_t h;\n"                  \
    "    cudaMalloc(&x, 64); cudaMalloc(&g, 256); cudaMalloc(&w, 64); cudaMalloc(&y, 64);\n"       \
    "    step(h, x, g, w, y, 16, 4, c, s);\n"                                                      \
    "    cudaStreamSynchronize(s);\n"                                                              \
    "    return 0;\n"                                                                              \
    "}\n"

/* line 8: the all-gather; line 9: the GEMM reading g as operand B; line 11:
 * the next reader of g */
static const char *const prog_direct =
    PROG_HEAD "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
              "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, g,\n"
              "                 CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
              "                 CUBLAS_GEMM_DEFAULT);\n" PROG_TAIL;

static void test_split_direct(void **state)
{
    (void)state;
    cuco_tx_result r;
    tx_transform(prog_direct, &r);
    const char *ag = strstr(r.program, "cuco_tx::all_gather(cuco_tx::split_site(0, CUCO_SPLIT_0), "
                                       "x, g, 16, ncclFloat, c, "
                                       "cuco_tx::early_start(0, CUCO_EARLY_0, s))");
    const char *gemm = strstr(r.program, "cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0, h, CUBLAS_OP_N");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    const char *next = strstr(r.program, "k<<<1, 32, 0, s>>>(g, 4);");
    assert_non_null(ag);
    assert_non_null(gemm);
    assert_non_null(wait);
    /* the wait is after the GEMM, before the next reader of g */
    assert_true(ag < gemm && gemm < wait && wait < next);
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT 1"));
    /* no cuBLASLt call: not its glue, nor its #include */
    assert_null(strstr(r.program, "#define CUCO_TX_GEMM_LT"));
    assert_null(strstr(r.program, "cublasLt.h"));
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_0 1 // cuco:knob run 0 1"));
    /* one split site: its chunk count matters only while the split is on */
    assert_non_null(strstr(
        r.program, "#define CUCO_SPLIT_CHUNKS 4 // cuco:knob run 1 2 4 when CUCO_SPLIT_0=1\n"));
    assert_true(has_knob(r.program, "CUCO_SPLIT_0"));
    assert_true(has_knob(r.program, "CUCO_EARLY_0"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "consumer_split_by_source: cublasGemmEx at line 9 consumes "
                                     "ncclAllGather at line 8 per source rank (own rows first) "
                                     "(knob CUCO_SPLIT_0)"));
    assert_true(tx_has_schedule_note(&r.notes, 8, "wait moved before the statement at line 12"));
    assert_true(tx_has_schedule_note(&r.notes, 8,
                                     "warm_read does not apply to ncclAllGather: its first "
                                     "consumer (line 9) is consumer_split_by_source's"));
    assert_null(strstr(r.program, "cuco_tx::warm_site("));
    cuco_tx_result_free(&r);
}

/* a GEMM that writes its output into the all-gather's own send buffer is
 * left whole: split, its first part would run while peers still read x */
static void test_split_output_in_send(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
                  "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, 8, g, kk, "
                  "&zero, x, 8);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_null(strstr(r.program, "cuco_tx::sgemm_split("));
    assert_true(tx_has_schedule_note(&r.notes, 8, "writes its output into the gathered or the sent "
                                                  "buffer"));
    /* a GEMM left whole gets no read pass before it either */
    assert_true(tx_has_schedule_note(&r.notes, 8,
                                     "warm_read does not apply to ncclAllGather: the "
                                     "statement its wait goes before (line 9) is no kernel "
                                     "launch"));
    assert_null(strstr(r.program, "cuco_tx::warm_site("));
    cuco_tx_result_free(&r);
}

/* C-style error checks that return: the GEMM inside `TRY(...)`, whose text
 * returns on failure, is still one GEMM call and is split (the wait after
 * it); a statement that returns in its own text is not */
static void test_split_in_returning_check(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <cublas_v2.h>\n"
        "#define TRY(x) if ((x) != 0) { fprintf(stderr, \"failed\\n\"); return -1; }\n"
        "__global__ void k(float *a, size_t n);\n"
        "static int step(cublasHandle_t h, float *x, float *g, float *w, float *y, int m,\n"
        "                ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    TRY(ncclAllGather(x, g, 16, ncclFloat, c, s));\n"
        "    TRY(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, 4, &one, w, 8, g, 4, &zero, y, "
        "8));\n"
        "    k<<<1, 32, 0, s>>>(g, 4);\n"
        "    return 0;\n"
        "}\n"
        "int main() {\n"
        "    float *x, *g, *w, *y; ncclComm_t c; cudaStream_t s; cublasHandle_t h;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&g, 256); cudaMalloc(&w, 64); cudaMalloc(&y, 64);\n"
        "    step(h, x, g, w, y, 16, c, s);\n"
        "    cudaStreamSynchronize(s);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    const char *gemm = strstr(r.program, "TRY(cuco_tx::sgemm_split(0, CUCO_SPLIT_0, h, ");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    const char *next = strstr(r.program, "k<<<1, 32, 0, s>>>(g, 4);");
    assert_non_null(gemm);
    assert_non_null(wait);
    assert_true(gemm < wait && wait < next);
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "consumer_split_by_source: cublasSgemm at line 10 consumes "
                                     "ncclAllGather at line 9 per source rank"));
    cuco_tx_result_free(&r);

    /* the same GEMM with a return of its own in the statement stays whole */
    const char *at = strstr(prog, "    TRY(cublasSgemm(");
    char *with_return = cuco_sprintf("%.*s    if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, 4, "
                                     "&one, w, 8, g, 4, &zero, y, 8)) return -1;\n%s",
                                     (int)(at - prog), prog, strstr(at, "    k<<<"));
    assert_non_null(with_return);
    tx_transform(with_return, &r);
    assert_null(strstr(r.program, "cuco_tx::sgemm_split("));
    assert_true(tx_has_schedule_note(&r.notes, 9, "is a GEMM inside a larger statement"));
    cuco_tx_result_free(&r);
    free(with_return);
}

/* warm_read: a kernel launch right after the all-gather (nothing to overlap:
 * early_start_late_wait does not apply) is still offered a read pass; so is
 * the first consumer of an all-to-all; a receive's is not */
static void test_warm_read(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
                  "    k<<<1, 32, 0, s>>>(g, 4);\n"
                  "    ncclAllToAll(x, g, 4, ncclFloat, c, s);\n"
                  "    cudaMemsetAsync(y, 0, 64, s);\n"
                  "    k<<<1, 32, 0, s>>>(g, 4);\n"
                  "    ncclRecv(g, 16, ncclFloat, 0, c, s);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::warm_site(0, CUCO_WARM_0), "
                                      "x, g, 16, ncclFloat, c, s)"));
    assert_true(tx_has_schedule_note(&r.notes, 8, "no independent work between the call and its "
                                                  "first consumer (line 9)"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "warm_read: offered to kernel k at line 9, which reads the "
                                     "gathered buffer of ncclAllGather at line 8"));
    assert_non_null(strstr(r.program, "cuco_tx::all_to_all(cuco_tx::warm_site(1, CUCO_WARM_1), "
                                      "x, g, 4, ncclFloat, c, "
                                      "cuco_tx::early_start(1, CUCO_EARLY_1, s))"));
    assert_true(tx_has_schedule_note(&r.notes, 12,
                                     "warm_read: offered to kernel k at line 12, which reads the "
                                     "all-to-all buffer of ncclAllToAll at line 10"));
    assert_true(has_knob(r.program, "CUCO_WARM_1"));
    assert_null(strstr(r.program, "CUCO_WARM_2"));
    /* k is declared, not defined: its loops are not seen, the pass is off */
    assert_non_null(strstr(r.program, "#define CUCO_WARM_0 0 // cuco:knob run 0 1"));
    assert_true(tx_has_schedule_note(&r.notes, 9, "off by default: no loop of its blocks walks"));
    cuco_tx_result_free(&r);
}

/* warm_read through a helper the consumer statement calls (plain host code
 * and one launch): the helper's parameter given the gathered buffer is
 * followed to the launch, and the kernel's loops give the default */
static void test_warm_helper(void **state)
{
    (void)state;
    static const struct {
        const char *loop;
        int on;
    } cases[] = {
        {"for (size_t k = threadIdx.x; k < n; k += blockDim.x) s += keys[k];", 1},
        {"for (size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; "
         "k += gridDim.x * blockDim.x) s += keys[k];",
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void use(const float *keys, float *o, size_t n) { float s = 0; %s "
            "o[blockIdx.x] = s; }\n"
            "static void attend(const float *k, float *out, size_t n, cudaStream_t st)\n"
            "{\n"
            "    use<<<8, 32, 0, st>>>(k, out, n);\n"
            "}\n"
            "static void step(float *x, float *g, float *y, ncclComm_t c, cudaStream_t s)\n"
            "{\n"
            "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
            "    attend(g, y, 32, s);\n"
            "}\n"
            "int main() {\n"
            "    float *x, *g, *y; ncclComm_t c; cudaStream_t s;\n"
            "    cudaMalloc(&x, 64); cudaMalloc(&g, 256); cudaMalloc(&y, 64);\n"
            "    step(x, g, y, c, s);\n"
            "    return 0;\n"
            "}\n",
            cases[i].loop);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        char *want = cuco_sprintf("#define CUCO_WARM_0 %d // cuco:knob run 0 1", cases[i].on);
        if (!strstr(r.program, want))
            fail_msg("case %zu: no '%s'", i, want);
        assert_true(tx_has_schedule_note(&r.notes, 10, "kernel use (launched by attend at line 10)"));
        free(want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* warm_read's default from the consumer kernel's text: on when each block
 * loops over the gathered buffer (directly, through a struct member, tile by
 * tile), off for a grid-stride loop, a loop over the block's own row (an
 * index set from blockIdx), a loop inside a grid-stride loop, and a loop
 * that reads only another argument */
static void test_warm_default(void **state)
{
    (void)state;
    static const struct {
        const char *params, *body, *args;
        int on;
    } cases[] = {
        {"const float *g, float *o, size_t n",
         "float s = 0; for (size_t k = threadIdx.x; k < n; k += blockDim.x) s += g[k]; "
         "o[blockIdx.x] = s;",
         "g, y, 16", 1},
        {"P p, float *o, size_t n",
         "float s = 0; for (size_t k = threadIdx.x; k < n; k += blockDim.x) s += p.keys[k]; "
         "o[blockIdx.x] = s;",
         "prm, y, 16", 1},
        {"const float *g, float *o, size_t n",
         "__shared__ float t[64]; for (int kt = 0; kt < (int)n; kt += 64) { "
         "t[threadIdx.x] = g[kt + threadIdx.x]; __syncthreads(); o[blockIdx.x] += t[0]; }",
         "g, y, 16", 1},
        {"const float *g, float *o, size_t n",
         "for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; "
         "i += gridDim.x * blockDim.x) o[i] = g[i];",
         "g, y, 16", 0},
        {"const float *g, float *o, size_t n",
         "size_t row = blockIdx.x; float s = 0; "
         "for (size_t k = threadIdx.x; k < n; k += blockDim.x) s += g[row * n + k]; o[row] = s;",
         "g, y, 16", 0},
        {"const float *g, float *o, size_t n",
         "for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; "
         "i += gridDim.x * blockDim.x) { for (int j = 0; j < 4; j++) o[i] += g[i * 4 + j]; }",
         "g, y, 16", 0},
        {"const float *g, const float *w, float *o, size_t n",
         "float s = 0; for (int j = 0; j < 4; j++) s += w[j]; "
         "o[blockIdx.x] = s + g[blockIdx.x];",
         "g, w, y, 16", 0},
        /* each key row handed to a device function, in every block */
        {"const float *g, float *o, size_t n",
         "float s = 0; for (size_t j = 0; j < n / 4; j++) s += dot4(o, g + j * 4); "
         "o[blockIdx.x] = s;",
         "g, y, 16", 1},
        /* the block's own rows only */
        {"const float *g, float *o, size_t n",
         "float s = 0; for (size_t j = 0; j < 4; j++) s += dot4(o, g + (blockIdx.x * 4 + j) * 4); "
         "o[blockIdx.x] = s;",
         "g, y, 16", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "struct P { const float *keys; };\n"
            "__device__ float dot4(const float *a, const float *b);\n"
            "__global__ void use(%s) { %s }\n"
            "static void step(float *x, float *g, float *w, float *y, ncclComm_t c, "
            "cudaStream_t s)\n"
            "{\n"
            "    P prm;\n"
            "    prm.keys = g;\n"
            "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
            "    use<<<8, 32, 0, s>>>(%s);\n"
            "}\n"
            "int main() {\n"
            "    float *x, *g, *w, *y; ncclComm_t c; cudaStream_t s;\n"
            "    cudaMalloc(&x, 64); cudaMalloc(&g, 256); cudaMalloc(&w, 64); "
            "cudaMalloc(&y, 64);\n"
            "    step(x, g, w, y, c, s);\n"
            "    return 0;\n"
            "}\n",
            cases[i].params, cases[i].body, cases[i].args);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        char *want = cuco_sprintf("#define CUCO_WARM_0 %d // cuco:knob run 0 1", cases[i].on);
        if (!strstr(r.program, want))
            fail_msg("case %zu: no '%s'", i, want);
        free(want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* two split all-gathers: either switch reads the chunk count, which then
 * has no condition (conditions are 'and') */
static void test_split_two_sites(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
                  "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, 8, g, kk, "
                  "&zero, y, 8);\n"
                  "    ncclAllGather(y, g, 16, ncclFloat, c, s);\n"
                  "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, 8, g, kk, "
                  "&zero, x, 8);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_0 1 // cuco:knob run 0 1"));
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_1 1 // cuco:knob run 0 1"));
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_CHUNKS 4 // cuco:knob run 1 2 4\n"));
    assert_true(has_knob(r.program, "CUCO_SPLIT_CHUNKS"));
    cuco_tx_result_free(&r);
}

/* cublasLtMatmul (shape in its descriptors, D its output): line 10 consumes
 * the all-gather of line 9, line 12 makes the all-reduce's input */
static void test_split_lt(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <cublasLt.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static void step(cublasLtHandle_t lt, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t "
        "la,\n"
        "                 cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, float *x, float "
        "*g,\n"
        "                 float *w, float *y, void *ws, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
        "    cublasLtMatmul(lt, op, &one, w, la, g, lb, &zero, y, ld, y, ld, NULL, ws, 0, s);\n"
        "    k<<<1, 32, 0, s>>>(y, 4);\n"
        "    cublasLtMatmul(lt, op, &one, w, la, y, lb, &zero, x, ld, x, ld, NULL, ws, 0, s);\n"
        "    ncclAllReduce(x, x, 16, ncclFloat, ncclSum, c, s);\n"
        "}\n"
        "int main() {\n"
        "    float *x, *g, *w, *y; void *ws; ncclComm_t c; cudaStream_t s; cublasLtHandle_t lt;\n"
        "    cublasLtMatmulDesc_t op; cublasLtMatrixLayout_t la, lb, ld;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&g, 256); cudaMalloc(&w, 64); cudaMalloc(&y, 64);\n"
        "    step(lt, op, la, lb, ld, x, g, w, y, ws, c, s);\n"
        "    cudaStreamSynchronize(s);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(
        strstr(r.program, "cuco_tx::lt_matmul_split(0, CUCO_SPLIT_0, lt, op, &one, w, la, g"));
    assert_non_null(
        strstr(r.program, "cuco_tx::lt_matmul_produce(1, CUCO_PSPLIT_1, lt, op, &one, w, la, y"));
    assert_non_null(
        strstr(r.program, "cuco_tx::all_reduce(cuco_tx::produce_site(1, CUCO_PSPLIT_1), x, x"));
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT 1\n"));
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_LT 1\n"));
    assert_non_null(strstr(r.program, "#include <cublasLt.h>\n#endif  // CUCO_TX_GEMM_LT\n"));
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "consumer_split_by_source: cublasLtMatmul at line 10 consumes "
                                     "ncclAllGather at line 9 per source rank"));
    assert_true(tx_has_schedule_note(&r.notes, 12,
                                     "producer_split: cublasLtMatmul at line 12 makes the input of "
                                     "ncclAllReduce at line 13"));
    cuco_tx_result_free(&r);
}

/* the GEMM reads the gathered buffer through an alias (float *rows = g) */
static void test_split_alias(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
                  "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, 8, rows, kk, "
                  "&zero, y, 8);\n" PROG_TAIL;
    char *text = cuco_sprintf("%s", prog);
    assert_non_null(text);
    /* declare the alias before the all-gather */
    char *at = strstr(text, "    ncclAllGather");
    assert_non_null(at);
    char *full = cuco_sprintf("%.*s    float *rows = g;\n%s", (int)(at - text), text, at);
    assert_non_null(full);
    cuco_tx_result r;
    tx_transform(full, &r);
    assert_non_null(strstr(r.program, "cuco_tx::sgemm_split(0, CUCO_SPLIT_0, h,"));
    assert_true(
        tx_has_schedule_note(&r.notes, 10, "consumer_split_by_source: cublasSgemm at line 10"));
    cuco_tx_result_free(&r);
    free(full);
    free(text);
}

/* the workloads' style: both calls are bodies of unbraced ifs, in macros */
static void test_split_unbraced_if(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    if (m > 0) CHECK(ncclAllGather(x, g, 16, ncclFloat, c, s));\n"
                  "    if (kk > 0)\n"
                  "        CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, "
                  "CUDA_R_32F, 8,\n"
                  "                           g, CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, "
                  "CUBLAS_COMPUTE_32F,\n"
                  "                           CUBLAS_GEMM_DEFAULT));\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "CHECK(cuco_tx::all_gather(cuco_tx::split_site(0, "
                                      "CUCO_SPLIT_0), x, g, 16, ncclFloat, c, "
                                      "cuco_tx::early_start(0, CUCO_EARLY_0, s)));"));
    const char *gemm = strstr(r.program, "CHECK(cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0, h,");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    assert_non_null(gemm);
    assert_non_null(wait);
    assert_true(gemm < wait);
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "consumer_split_by_source: cublasGemmEx at line 10 "
                                     "consumes ncclAllGather at line 8"));
    cuco_tx_result_free(&r);
}

/* an unbraced if as a plain schedule (a) issue point: a launch that does not
 * read the buffer runs in between; an if with an else is still refused */
static void test_unbraced_if_schedule(void **state)
{
    (void)state;
    static const char *const prog =
        PROG_HEAD "    if (m > 0) ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
                  "    k<<<1, 32, 0, s>>>(w, 4);\n"
                  "    if (m > 1) ncclAllGather(x, g, 16, ncclFloat, c, s); else k<<<1, 32, 0, "
                  "s>>>(w, 4);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(
        tx_has_schedule_note(&r.notes, 8, "early_start_late_wait: ncclAllGather at line 8"));
    assert_true(tx_has_schedule_note(&r.notes, 8, "wait moved before the statement at line 10"));
    assert_true(tx_has_schedule_note(&r.notes, 10, "not a statement of its own"));
    assert_true(tx_has_schedule_note(&r.notes, 10, "consumer_split_by_source does not apply"));
    cuco_tx_result_free(&r);
}

/* another statement reads the buffer before the GEMM: no split; a GEMM that
 * reads the buffer through neither operand: no split */
static void test_split_not_first(void **state)
{
    (void)state;
    static const char *const prog = PROG_HEAD
        "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(g, 4);\n"
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, g,\n"
        "                 CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n"
        "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, w,\n"
        "                 CUDA_R_32F, kk, &zero, g, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_null(strstr(r.program, "cuco_tx::gemm_ex_split("));
    assert_null(strstr(r.program, "#define CUCO_SPLIT_0"));
    assert_null(strstr(r.program, "CUCO_SPLIT_CHUNKS 4 // cuco:knob"));
    assert_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT"));
    assert_true(
        tx_has_schedule_note(&r.notes, 8,
                             "consumer_split_by_source does not apply to ncclAllGather: its first "
                             "consumer (line 9) launches kernel k, which the manifest does not "
                             "declare rows_independent"));
    assert_true(tx_has_schedule_note(&r.notes, 13,
                                     "consumer (line 14) does not read the gathered buffer "
                                     "through operand A or B"));
    cuco_tx_result_free(&r);
}

/* the GEMM sits in a helper called once, whose body is plain host code and
 * the GEMM; the all-gather is the only statement of a braced if */
static void test_split_helper(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <cublas_v2.h>\n"
        "struct St { cublasHandle_t h; float *x, *g, *w, *y; int m, kk; };\n"
        "static void gemm(St &s, cudaStream_t st)\n"
        "{\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    cublasSetStream(s.h, st);\n"
        "    cublasGemmEx(s.h, CUBLAS_OP_N, CUBLAS_OP_N, 8, s.m, s.kk, &one, s.w, CUDA_R_32F, 8,\n"
        "                 s.g, CUDA_R_32F, s.kk, &zero, s.y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n"
        "}\n"
        "static void run(St &s, unsigned parts, ncclComm_t c, cudaStream_t st)\n"
        "{\n"
        "    if (parts & 2) {\n"
        "        ncclAllGather(s.x, s.g, 16, ncclFloat, c, st);\n"
        "    }\n"
        "    if (parts & 1)\n"
        "        gemm(s, st);\n"
        "}\n"
        "int main() {\n"
        "    St s; ncclComm_t c; cudaStream_t st;\n"
        "    cudaMalloc(&s.x, 64); cudaMalloc(&s.g, 256);\n"
        "    run(s, 3, c, st);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    const char *gemm = strstr(r.program, "cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0, s.h,");
    const char *call = strstr(r.program, "        gemm(s, st);");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    assert_non_null(gemm);
    assert_non_null(call);
    assert_non_null(wait);
    assert_true(call < wait); /* the wait follows the helper's call */
    assert_true(tx_has_schedule_note(&r.notes, 8,
                                     "consumer_split_by_source: cublasGemmEx at line 8 consumes "
                                     "ncclAllGather at line 15 per source rank (own rows first), "
                                     "in the helper its first consumer calls"));
    cuco_tx_result_free(&r);
}

/* other collectives get no split line */
static void test_split_only_gathers(void **state)
{
    (void)state;
    static const char *const prog = PROG_HEAD
        "    ncclAllReduce(x, g, 16, ncclFloat, ncclSum, c, s);\n"
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, g,\n"
        "                 CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_false(tx_has_schedule_note(&r.notes, 0, "consumer_split_by_source"));
    assert_null(strstr(r.program, "cuco_tx::gemm_ex_split("));
    cuco_tx_result_free(&r);
}

/* producer_split: the GEMM right before an all-reduce writes its input
 * (line 8 the GEMM into g, line 11 the all-reduce of g): the GEMM goes
 * through its produce glue, the all-reduce gets produce_site, the knob is
 * declared off by default; edits are made though schedule (a) does not
 * apply (its consumer follows at once). */
static void test_produce_direct(void **state)
{
    (void)state;
    static const char *const prog = PROG_HEAD
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, x,\n"
        "                 CUDA_R_32F, kk, &zero, g, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n"
        "    ncclAllReduce(g, g, 8 * m, ncclFloat, ncclSum, c, s);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::gemm_ex_produce(0, CUCO_PSPLIT_0, h,"));
    assert_non_null(
        strstr(r.program, "cuco_tx::all_reduce(cuco_tx::produce_site(0, CUCO_PSPLIT_0), g, g,"));
    assert_non_null(strstr(r.program, "#define CUCO_PSPLIT_0 0 // cuco:knob run 0 1")); /* off for a GEMM */
    assert_true(has_knob(r.program, "CUCO_PSPLIT_PIECES"));
    assert_true(has_knob(r.program, "CUCO_PSPLIT_CE"));
    assert_non_null(strstr(
        r.program, "#define CUCO_PSPLIT_PIECES 8 // cuco:knob run 2 4 8 when CUCO_PSPLIT_0=1\n"));
    assert_false(has_knob(r.program, "CUCO_SPLIT_CHUNKS"));
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT 1"));
    assert_true(tx_has_schedule_note(&r.notes, 8,
                                     "producer_split: cublasGemmEx at line 8 makes the input of "
                                     "ncclAllReduce at line 11"));
    assert_true(tx_has_schedule_note(&r.notes, 11, "early_start_late_wait does not apply"));
    cuco_tx_result_free(&r);
}

/* Not applied: the statement before the all-reduce is a kernel; a GEMM that
 * writes another buffer; no GEMM glue then. */
static void test_produce_not(void **state)
{
    (void)state;
    static const char *const prog = PROG_HEAD
        "    k<<<1, 32, 0, s>>>(g, 4);\n"
        "    ncclAllReduce(g, g, 8 * m, ncclFloat, ncclSum, c, s);\n"
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, x,\n"
        "                 CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n"
        "    ncclAllReduce(g, g, 8 * m, ncclFloat, ncclSum, c, s);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_null(strstr(r.program, "cuco_tx::gemm_ex_produce(0"));
    assert_null(strstr(r.program, "cuco_tx::produce_site(0"));
    assert_null(strstr(r.program, "cuco_tx::produce_site(1"));
    assert_null(strstr(r.program, "#define CUCO_PSPLIT_0"));
    assert_null(strstr(r.program, "#define CUCO_PSPLIT_1"));
    assert_false(has_knob(r.program, "CUCO_PSPLIT_PIECES"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "producer_split does not apply to ncclAllReduce: the "
                                     "statement before it (line 8) launches kernel k, which the "
                                     "manifest does not declare rows_independent"));
    assert_true(tx_has_schedule_note(&r.notes, 13,
                                     "is a GEMM that does not write the collective's input buffer"));
    cuco_tx_result_free(&r);
}

/* A GEMM takes one split: the all-gather's consumer split rewrites it, so
 * the producer split of the all-reduce after it does not apply (both would
 * put their arguments in front of the one call). */
static void test_one_split_per_gemm(void **state)
{
    (void)state;
    static const char *const prog = PROG_HEAD
        "    ncclAllGather(x, g, 16, ncclFloat, c, s);\n"
        "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, m, kk, &one, w, CUDA_R_32F, 8, g,\n"
        "                 CUDA_R_32F, kk, &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F,\n"
        "                 CUBLAS_GEMM_DEFAULT);\n"
        "    ncclAllReduce(y, y, 8 * m, ncclFloat, ncclSum, c, s);\n" PROG_TAIL;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::gemm_ex_split(0, CUCO_SPLIT_0, h,"));
    assert_null(strstr(r.program, "CUCO_PSPLIT_1"));
    assert_null(strstr(r.program, "cuco_tx::produce_site(1"));
    assert_true(tx_has_schedule_note(&r.notes, 12,
                                     "producer_split does not apply to ncclAllReduce: the GEMM "
                                     "before it (line 9) is already split by "
                                     "consumer_split_by_source"));
    cuco_tx_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_direct),      cmocka_unit_test(test_split_two_sites),
        cmocka_unit_test(test_split_output_in_send),
        cmocka_unit_test(test_split_in_returning_check), cmocka_unit_test(test_warm_read),
        cmocka_unit_test(test_warm_default),
        cmocka_unit_test(test_warm_helper),
        cmocka_unit_test(test_split_lt),          cmocka_unit_test(test_split_alias),
        cmocka_unit_test(test_split_unbraced_if), cmocka_unit_test(test_unbraced_if_schedule),
        cmocka_unit_test(test_split_not_first),   cmocka_unit_test(test_produce_direct),
        cmocka_unit_test(test_produce_not),       cmocka_unit_test(test_split_only_gathers),
        cmocka_unit_test(test_split_helper),      cmocka_unit_test(test_one_split_per_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
