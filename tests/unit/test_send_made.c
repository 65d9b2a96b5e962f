/* test_send_made.c: schedule send_as_produced through cuco_transform_rules
 * on small programs. A send whose buffer a loop of cuBLAS GEMMs makes gets
 * the schedule whether everything sits in one function (a local buffer) or
 * the GEMM and the send sit in helpers of one caller (a struct member), or
 * a helper gets the buffer plus an offset (a strided-batched GEMM);
 * each recording GEMM, the send's made_site argument, made_begin at the
 * maker's first statement and the knobs are there, also when the kernel that
 * reads the buffer is defined with __launch_bounds__. A memset of the buffer,
 * a kernel that may write it, an alias (also a second parameter bound to the
 * same object), a launch through void **, a kernel that writes a
 * __device__ pointer, a global buffer, a send in a group or no GEMM at all keep the send as it was, with a line that says why.
 * The copy-engine point-to-point knob is declared on (1) with the schedule,
 * off (0) for other sends, and not at all without sends or receives. */
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

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* one function: a local buffer made layer by layer, then sent */
static const char *const prog_main =
    "#include <nccl.h>\n"
    "#include <cublas_v2.h>\n"
    "__global__ void use(const float *a, float *out, size_t n);\n"
    "int main() {\n"
    "    ncclComm_t comm; cudaStream_t s; cublasHandle_t h; int rank = 0, L = 8, m = 64;\n"
    "    float *w, *x, *buf, *out;\n"
    "    cudaMalloc(&w, 4096); cudaMalloc(&x, 4096); cudaMalloc(&out, 4096);\n"
    "    cudaMalloc(&buf, (size_t)L * m * m * sizeof(float));\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    if (rank == 0) {\n"
    "        for (int l = 0; l < L; l++)\n"
    "            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, w, m, x, m, &zero,\n"
    "                        buf + (size_t)l * m * m, m);\n"
    "        ncclSend(buf, (size_t)L * m * m, ncclFloat, 1, comm, s);\n"
    "    } else {\n"
    "        ncclRecv(buf, (size_t)L * m * m, ncclFloat, 0, comm, s);\n"
    "        use<<<1, 32, 0, s>>>(buf, out, 4);\n"
    "    }\n"
    "    cudaStreamSynchronize(s);\n"
    "    cudaFree(buf);\n"
    "    return 0;\n"
    "}\n";

static void test_local_buffer(void **state)
{
    (void)state;
    cuco_tx_result r;
    tx_transform(prog_main, &r);
    assert_non_null(strstr(r.program, "cuco_tx::sgemm_record(0, CUCO_SENDP_0, h, "));
    assert_non_null(strstr(r.program, "cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), buf,"));
    const char *begin = strstr(r.program, "cuco_tx::made_begin(0);");
    const char *decl = strstr(r.program, "ncclComm_t comm; cudaStream_t s;");
    assert_non_null(begin);
    assert_true(begin < decl); /* the first statement of main */
    assert_non_null(strstr(r.program, "#define CUCO_SENDP_0 1 // cuco:knob run 0 1"));
    /* sends made piece by piece, no receive consumed so: 16 pieces */
    assert_non_null(strstr(r.program, "#define CUCO_P2P_PIECES 16 // cuco:knob run 1 2 4 8 16"));
    assert_non_null(strstr(r.program, "#define CUCO_P2P_CE 1 // cuco:knob run 0 1"));
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT 1"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "send_as_produced: ncclSend at line 14"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "by the copy engine (CUCO_P2P_CE)"));
    cuco_tx_result_free(&r);
}

/* the same with cublasLtMatmul (D, its 11th argument, is what it makes) */
static void test_local_buffer_lt(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <cublasLt.h>\n"
        "__global__ void use(const float *a, float *out, size_t n);\n"
        "int main() {\n"
        "    ncclComm_t comm; cudaStream_t s; cublasLtHandle_t lt; int rank = 0, L = 8, m = 64;\n"
        "    cublasLtMatmulDesc_t op; cublasLtMatrixLayout_t la, lb, ld; void *ws;\n"
        "    float *w, *x, *buf, *out;\n"
        "    cudaMalloc(&w, 4096); cudaMalloc(&x, 4096); cudaMalloc(&out, 4096);\n"
        "    cudaMalloc(&buf, (size_t)L * m * m * sizeof(float));\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    if (rank == 0) {\n"
        "        for (int l = 0; l < L; l++)\n"
        "            cublasLtMatmul(lt, op, &one, w, la, x, lb, &zero, buf + (size_t)l * m * m, "
        "ld,\n"
        "                           buf + (size_t)l * m * m, ld, NULL, ws, 0, s);\n"
        "        ncclSend(buf, (size_t)L * m * m, ncclFloat, 1, comm, s);\n"
        "    } else {\n"
        "        ncclRecv(buf, (size_t)L * m * m, ncclFloat, 0, comm, s);\n"
        "        use<<<1, 32, 0, s>>>(buf, out, 4);\n"
        "    }\n"
        "    cudaStreamSynchronize(s);\n"
        "    cudaFree(buf);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::lt_matmul_record(0, CUCO_SENDP_0, lt, op, "));
    assert_non_null(strstr(r.program, "cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), buf,"));
    assert_non_null(strstr(r.program, "#define CUCO_TX_GEMM_LT 1\n"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "send_as_produced: ncclSend at line 15"));
    cuco_tx_result_free(&r);
}

/* helpers of one caller, the buffer a member of a struct passed by reference
 * (the layout of a layer-wise KV transfer) */
static const char *const prog_helpers =
    "#include <nccl.h>\n"
    "#include <cublas_v2.h>\n"
    "struct P { float *cache, *x, *w; long layers, n; int role, peer; };\n"
    "__global__ void decode(const float *cache, float *out, long n);\n"
    "static void make_layer(cublasHandle_t h, const P &p, long l, cudaStream_t st) {\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    cublasSetStream(h, st);\n"
    "    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.n, (int)p.n, (int)p.n, &one, p.w,\n"
    "                 CUDA_R_32F, (int)p.n, p.x, CUDA_R_32F, (int)p.n, &zero,\n"
    "                 p.cache + l * p.n * p.n, CUDA_R_32F, (int)p.n, CUBLAS_COMPUTE_32F,\n"
    "                 CUBLAS_GEMM_DEFAULT);\n"
    "}\n"
    "static void move(ncclComm_t c, const P &p, cudaStream_t st) {\n"
    "    size_t count = (size_t)p.layers * p.n * p.n;\n"
    "    if (p.role == 0)\n"
    "        ncclSend(p.cache, count, ncclFloat, p.peer, c, st);\n"
    "    else\n"
    "        ncclRecv(p.cache, count, ncclFloat, p.peer, c, st);\n"
    "}\n"
    "static void run(cublasHandle_t h, ncclComm_t c, const P &p, float *out, cudaStream_t st) {\n"
    "    if (p.role == 1) {\n"
    "        move(c, p, st);\n"
    "        decode<<<1, 32, 0, st>>>(p.cache, out, p.n);\n"
    "        return;\n"
    "    }\n"
    "    for (long l = 0; l < p.layers; l++)\n"
    "        make_layer(h, p, l, st);\n"
    "    move(c, p, st);\n"
    "}\n"
    "int main() {\n"
    "    P p; ncclComm_t c; cudaStream_t st; cublasHandle_t h; float *out;\n"
    "    cudaMalloc(&p.cache, 1 << 24); cudaMalloc(&out, 64);\n"
    "    run(h, c, p, out, st);\n"
    "    cudaStreamSynchronize(st);\n"
    "    return 0;\n"
    "}\n";

static void test_helpers_member(void **state)
{
    (void)state;
    cuco_tx_result r;
    tx_transform(prog_helpers, &r);
    assert_non_null(strstr(r.program, "cuco_tx::gemm_ex_record(0, CUCO_SENDP_0, h, "));
    assert_non_null(
        strstr(r.program, "cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), p.cache,"));
    const char *run = strstr(r.program, "static void run(");
    const char *begin = strstr(r.program, "cuco_tx::made_begin(0);");
    assert_non_null(run);
    assert_non_null(begin);
    assert_true(run < begin && begin < strstr(run, "if (p.role == 1)"));
    assert_int_equal(count_of(r.program, "cuco_tx::made_begin("), 1);
    assert_true(tx_has_schedule_note(&r.notes, 0, "makes in run and the functions it calls"));
    cuco_tx_result_free(&r);
}

/* the reading kernel defined (not declared) with __launch_bounds__ between
 * its return type and its name: its const parameter is still found */
static void test_kernel_definition(void **state)
{
    (void)state;
    const char *decl = "__global__ void decode(const float *cache, float *out, long n);\n";
    const char *def = "__global__ void __launch_bounds__(128)\n"
                      "    decode(const float *cache, float *out, long n) { out[0] = cache[0]; }\n";
    char *text = cuco_strdup(prog_helpers);
    char *at = strstr(text, decl);
    assert_non_null(at);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "%.*s%s%s", (int)(at - text), text, def, at + strlen(decl));
    cuco_tx_result r;
    tx_transform(b.data, &r);
    assert_non_null(
        strstr(r.program, "cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), p.cache,"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "send_as_produced: ncclSend at line"));
    cuco_tx_result_free(&r);
    cuco_buf_free(&b);
    free(text);
}

/* text with its first `from` replaced by `to` (the caller frees it) */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    cuco_buf b = CUCO_BUF_INIT;
    assert_int_equal(
        cuco_buf_printf(&b, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)), 0);
    return cuco_buf_detach(&b);
}

/* the same program with changes (pairs from, to; NULL ends them): the
 * schedule does not apply, the send is an ordinary one, the report says why */
static void check_refused_all(const char *const *changes, const char *why)
{
    char *text = cuco_strdup(prog_helpers);
    assert_non_null(text);
    for (size_t i = 0; changes[i]; i += 2) {
        char *next = replaced(text, changes[i], changes[i + 1]);
        free(text);
        text = next;
    }
    cuco_tx_result r;
    tx_transform(text, &r);
    assert_null(strstr(r.program, "cuco_tx::made_site(0"));
    assert_null(strstr(r.program, "cuco_tx::gemm_ex_record(0"));
    assert_null(strstr(r.program, "CUCO_SENDP_0"));
    assert_non_null(strstr(r.program, "cuco_tx::send(p.cache,"));
    if (!tx_has_schedule_note(&r.notes, 0, why))
        fail_msg("no note with '%s'", why);
    assert_true(tx_has_schedule_note(&r.notes, 0, "send_as_produced does not apply to ncclSend"));
    cuco_tx_result_free(&r);
    free(text);
}

static void check_refused(const char *from, const char *to, const char *why)
{
    const char *const changes[] = {from, to, NULL};
    check_refused_all(changes, why);
}

static void test_refused(void **state)
{
    (void)state;
    /* a memset between the GEMMs and the send */
    check_refused("    move(c, p, st);\n}\n",
                  "    cudaMemsetAsync(p.cache, 0, 64, st);\n    move(c, p, st);\n}\n",
                  "goes to cudaMemsetAsync");
    /* a kernel that may write it */
    check_refused("__global__ void decode(const float *cache",
                  "__global__ void decode(float *cache", "through a pointer that is not const");
    /* an alias taken in the maker */
    check_refused(
        "    for (long l = 0; l < p.layers; l++)",
        "    float *alias = p.cache; (void)alias;\n    for (long l = 0; l < p.layers; l++)",
        "written or aliased");
    /* the struct passed on from a helper */
    check_refused("    cublasSetStream(h, st);\n", "    cublasSetStream(h, st);\n    touch(p);\n",
                  "used whole where the scan cannot follow it");
    /* no GEMM writes it */
    check_refused("p.cache + l * p.n * p.n", "p.x", "no cuBLAS GEMM writes its buffer");
    /* the sender called from two functions */
    check_refused("    run(h, c, p, out, st);\n",
                  "    run(h, c, p, out, st);\n    move(c, p, st);\n",
                  "called from several functions");
    /* a second parameter of the maker's that its caller binds to the same
     * object, written through that name */
    const char *const twice[] = {
        "const P &p, float *out, cudaStream_t st) {\n",
        "const P &p, P &q, float *out, cudaStream_t st) {\n",
        "    move(c, p, st);\n}\nint main",
        "    cudaMemsetAsync(q.cache, 0, 64, st);\n    move(c, p, st);\n}\nint main",
        "    run(h, c, p, out, st);\n",
        "    run(h, c, p, p, out, st);\n",
        NULL};
    check_refused_all(twice, "`q` may hold the same buffer as `p`");
    /* a launch whose arguments sit behind void ** */
    check_refused("    move(c, p, st);\n}\nint main",
                  "    void *args[] = {&out};\n"
                  "    cudaLaunchKernel((const void *)decode, 1, 32, args, 0, st);\n"
                  "    move(c, p, st);\n}\nint main",
                  "cudaLaunchKernel launches a kernel whose arguments the scan cannot read");
    /* a kernel that writes through a __device__ pointer (the reader is
     * defined here: it names no such variable) */
    const char *const symbol[] = {
        "__global__ void decode(const float *cache, float *out, long n);\n",
        "__device__ float *g_cache;\n"
        "__global__ void poke(long n) { g_cache[n] = 0; }\n"
        "__global__ void decode(const float *cache, float *out, long n) { out[0] = cache[0]; }\n",
        "    move(c, p, st);\n}\nint main",
        "    poke<<<1, 1, 0, st>>>(p.n);\n    move(c, p, st);\n}\nint main",
        NULL};
    check_refused_all(symbol, "kernel poke may write memory no argument names");
}

/* a buffer of file scope and a send in a group: not planned */
static void test_global_and_group(void **state)
{
    (void)state;
    char *text = cuco_strdup(prog_main);
    char *decl = strstr(text, "    float *w, *x, *buf, *out;\n");
    assert_non_null(decl);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "float *buf;\n%.*s    float *w, *x, *out;\n%s", (int)(decl - text), text,
                    decl + strlen("    float *w, *x, *buf, *out;\n"));
    cuco_tx_result r;
    tx_transform(b.data, &r);
    assert_null(strstr(r.program, "cuco_tx::made_site(0"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "not a variable of the function that sends it"));
    cuco_tx_result_free(&r);
    cuco_buf_free(&b);

    char *send = strstr(text, "        ncclSend(buf,");
    assert_non_null(send);
    cuco_buf_printf(&b, "%.*s        ncclGroupStart();\n%.*s        ncclGroupEnd();\n%s",
                    (int)(send - text), text, (int)(strchr(send, '\n') + 1 - send), send,
                    strchr(send, '\n') + 1);
    tx_transform(b.data, &r);
    assert_null(strstr(r.program, "cuco_tx::made_site(0"));
    assert_true(
        tx_has_schedule_note(&r.notes, 0, "send_as_produced does not apply to ncclSend: inside"));
    /* sends without the schedule: the copy-engine knob is there, off */
    assert_non_null(strstr(r.program, "#define CUCO_P2P_CE 0 // cuco:knob run 0 1"));
    cuco_tx_result_free(&r);
    cuco_buf_free(&b);
    free(text);
}

/* a helper called with the buffer plus an offset (one strided-batched GEMM
 * per step): the helper's body is read, with its parameter standing for the
 * buffer; a memset there refuses the schedule */
static const char *const prog_offset_helper =
    "#include <nccl.h>\n"
    "#include <cublas_v2.h>\n"
    "static void project(cublasHandle_t h, const float *w, const float *x, float *out, int b,\n"
    "                    int n, cudaStream_t st) {\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, w, CUDA_R_32F, n,\n"
    "        (long long)n * n, x, CUDA_R_32F, n, (long long)n * n, &zero, out, CUDA_R_32F, n,\n"
    "        (long long)n * n, b, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);\n"
    "}\n"
    "int main() {\n"
    "    ncclComm_t comm; cudaStream_t st; cublasHandle_t h; int rank = 0, S = 4, b = 8, n = 64;\n"
    "    float *w, *x, *out;\n"
    "    cudaMalloc(&w, 4096); cudaMalloc(&x, 4096);\n"
    "    cudaMalloc(&out, (size_t)S * b * n * n * sizeof(float));\n"
    "    for (int s = 0; s < S; s++)\n"
    "        project(h, w, x, out + (size_t)s * b * n * n, b, n, st);\n"
    "    if (rank == 0)\n"
    "        ncclSend(out, (size_t)S * b * n * n, ncclFloat, 1, comm, st);\n"
    "    else\n"
    "        ncclRecv(out, (size_t)S * b * n * n, ncclFloat, 0, comm, st);\n"
    "    cudaStreamSynchronize(st);\n"
    "    return 0;\n"
    "}\n";

static void test_offset_helper(void **state)
{
    (void)state;
    cuco_tx_result r;
    tx_transform(prog_offset_helper, &r);
    assert_non_null(
        strstr(r.program, "cuco_tx::gemm_strided_batched_ex_record(0, CUCO_SENDP_0, h,"));
    assert_non_null(strstr(r.program, "cuco_tx::send(cuco_tx::made_site(0, CUCO_SENDP_0), out,"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "makes in main and the functions it calls"));
    cuco_tx_result_free(&r);

    char *text = cuco_strdup(prog_offset_helper);
    char *gemm = strstr(text, "    cublasGemmStridedBatchedEx(");
    assert_non_null(gemm);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "%.*s    cudaMemsetAsync(out, 0, 64, st);\n%s", (int)(gemm - text), text,
                    gemm);
    tx_transform(b.data, &r);
    assert_null(strstr(r.program, "cuco_tx::made_site(0"));
    assert_true(tx_has_schedule_note(&r.notes, 0, "goes to cudaMemsetAsync"));
    cuco_tx_result_free(&r);
    cuco_buf_free(&b);
    free(text);
}

/* a program without sends or receives gets no copy-engine point-to-point knob */
static void test_ce_knob_needs_p2p(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "int main() {\n"
        "    ncclComm_t comm; cudaStream_t s; float *buf;\n"
        "    cudaMalloc(&buf, 4096);\n"
        "    ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, s);\n"
        "    cudaStreamSynchronize(s);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::all_reduce("));
    assert_null(strstr(r.program, "CUCO_P2P_CE 0 // cuco:knob"));
    assert_null(strstr(r.program, "CUCO_P2P_CE 1 // cuco:knob"));
    cuco_tx_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_buffer),      cmocka_unit_test(test_local_buffer_lt),
        cmocka_unit_test(test_helpers_member),    cmocka_unit_test(test_kernel_definition),
        cmocka_unit_test(test_refused),           cmocka_unit_test(test_global_and_group),
        cmocka_unit_test(test_ce_knob_needs_p2p), cmocka_unit_test(test_offset_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
