/* test_kernel_split.c: schedule (b) on a kernel launch, through
 * cuco_transform_rules_declared: an all-gather whose first consumer launches
 * a kernel the manifest declares rows_independent (rows=, args=) gets the
 * split (cuco_tx::kernel_split with the row count's position and the row
 * arguments' bits, split_site on the all-gather, the CUCO_SPLIT knob, no
 * cuBLAS glue, the wait after the launch); each missing piece of the
 * declaration or of the program leaves the launch whole with its reason. A
 * declared kernel right before an in-place all-reduce of one of its row
 * arguments, or a reduce-scatter of one, takes producer_split
 * (cuco_tx::kernel_produce). A receive whose first consumer launches a
 * declared kernel on the received rows takes consume_as_received
 * (cuco_tx::kernel_recv_split, recv_site on the receive); a GEMM, or a
 * receive inside a group, stays whole with its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/transform.h"
#include "tx_test.h"

/* A rows_independent declaration of kernel, with rows= and args= (either
 * may be NULL: left out). */
typedef struct decl {
    cuco_semantic s;
    char *keys[3], *values[3];
} decl;

static void decl_make(decl *d, const char *kernel, const char *rows, const char *args)
{
    memset(d, 0, sizeof *d);
    d->s.kernel = (char *)kernel;
    d->s.term = (char *)"rows_independent";
    d->s.keys = d->keys;
    d->s.values = d->values;
    d->s.line = 12;
    if (rows) {
        d->keys[d->s.n_params] = (char *)"rows";
        d->values[d->s.n_params++] = (char *)rows;
    }
    if (args) {
        d->keys[d->s.n_params] = (char *)"args";
        d->values[d->s.n_params++] = (char *)args;
    }
}

static void transform_declared(const char *text, const decl *d, cuco_tx_result *r)
{
    tx_transform_declared(text, &d->s, 1, r);
}

/* line 9: the all-gather; line 10: the norm reading g (row arguments x and
 * y, rows at position 3); lines 11-12: kernels that do not read g */
static const char *const prog =
    "#include <nccl.h>\n"
    "__global__ void norm(const float *x, const float *w, float *y, int rows, int dim)\n"
    "{ int r = blockIdx.x; if (r < rows) y[r * dim] = x[r * dim] * w[0]; }\n"
    "__global__ void other(float *a, int n) { a[0] = (float)n; }\n"
    "__global__ void use(const float *a, int n) {}\n"
    "static void step(float *l, float *g, float *w, float *y, float *z, int rows, int dim,\n"
    "                 ncclComm_t c, cudaStream_t s)\n"
    "{\n"
    "    ncclAllGather(l, g, 16, ncclFloat, c, s);\n"
    "    norm<<<rows, 256, 0, s>>>(g, w, y, rows, dim);\n"
    "    other<<<1, 32, 0, s>>>(z, 4);\n"
    "    use<<<1, 32, 0, s>>>(y, 4);\n"
    "}\n"
    "int main() {\n"
    "    float *l, *g, *w, *y, *z; ncclComm_t c; cudaStream_t s;\n"
    "    cudaMalloc(&l, 64); cudaMalloc(&g, 128); cudaMalloc(&w, 4); cudaMalloc(&y, 128);\n"
    "    cudaMalloc(&z, 4);\n"
    "    step(l, g, w, y, z, 8, 4, c, s);\n"
    "    return 0;\n"
    "}\n";

static void test_kernel_split_applies(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, "norm", "rows", "x, y");
    cuco_tx_result r;
    transform_declared(prog, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{3, "
                                      "0x5UL, 1}, norm, rows, 256, 0, s, g, w, y, rows, dim);"));
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::split_site(0, CUCO_SPLIT_0), "
                                      "l, g"));
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_0 1 // cuco:knob run 0 1"));
    assert_non_null(strstr(r.program, "CUCO_SPLIT_CHUNKS 4 // cuco:knob"));
    /* no GEMM: the glue's cuBLAS part stays out */
    assert_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT"));
    /* the launch no longer consumes g and nothing after it reads g: the wait
     * goes to the end of the block, after the other two kernels */
    const char *split = strstr(r.program, "cuco_tx::kernel_split(");
    const char *use = strstr(r.program, "use<<<");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0");
    assert_non_null(wait);
    assert_true(split < use && use < wait);
    assert_true(tx_has_schedule_note(&r.notes, 9, "wait moved to the end of its block (line 13)"));
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "consumer_split_by_source: kernel norm at line 10 consumes "
                                     "ncclAllGather at line 9 per source rank (own rows first; "
                                     "declared rows_independent at workload.yaml line 12)"));
    cuco_tx_result_free(&r);
    /* a grid written as a cast of the row count is still one block a row;
     * an expression over it is not */
    static const char *const grids[][2] = {{"(unsigned)rows", "1}, norm, (unsigned)rows,"},
                                           {"(unsigned int)rows", "1}, norm, (unsigned int)rows,"},
                                           {"(unsigned)(rows + 1)", "0}, norm, (unsigned)(rows + 1),"}};
    for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) {
        char *launch = cuco_sprintf("norm<<<%s, 256, 0, s>>>", grids[i][0]);
        char *text = tx_replaced(prog, "norm<<<rows, 256, 0, s>>>", launch);
        transform_declared(text, &d, &r);
        char *want = cuco_sprintf("cuco_tx::RowSpec{3, 0x5UL, %s", grids[i][1]);
        assert_non_null(strstr(r.program, want));
        cuco_tx_result_free(&r);
        free(want);
        free(text);
        free(launch);
    }
}

/* a namespaced template kernel launched without smem and stream */
static void test_kernel_split_template(void **state)
{
    (void)state;
    static const char *const tprog =
        "#include <nccl.h>\n"
        "namespace ops {\n"
        "template <typename T>\n"
        "__global__ void __launch_bounds__(256) scale(T *out, const T *in, long n)\n"
        "{ long i = blockIdx.x * 256L + threadIdx.x; if (i < n) out[i] = in[i] * 2; }\n"
        "}\n"
        "static void step(float *l, float *g, float *y, long n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllGather(l, g, 16, ncclFloat, c, s);\n"
        "    ops::scale<float><<<(n + 255) / 256, 256>>>(y, g, n);\n"
        "}\n"
        "int main() {\n"
        "    float *l, *g, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&l, 64); cudaMalloc(&g, 128); cudaMalloc(&y, 128);\n"
        "    step(l, g, y, 32, c, s);\n"
        "    return 0;\n"
        "}\n";
    decl d;
    decl_make(&d, "scale", "n", "in out");
    cuco_tx_result r;
    transform_declared(tprog, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{2, "
                                      "0x3UL, 0}, ops::scale<float>, (n + 255) / 256, 256, 0, 0, "
                                      "y, g, n);"));
    assert_true(tx_has_schedule_note(&r.notes, 10, "consumer_split_by_source: kernel scale"));
    cuco_tx_result_free(&r);
}

/* Transforms prog with d and checks that the launch stays whole and the
 * report says why. */
static void assert_whole(const decl *d, const char *why)
{
    cuco_tx_result r;
    transform_declared(prog, d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_split("));
    assert_null(strstr(r.program, "#define CUCO_SPLIT_0"));
    if (!tx_has_schedule_note(&r.notes, 9, why)) {
        for (size_t i = 0; i < r.notes.n; i++)
            print_message("note %d: %s\n", r.notes.items[i].line, r.notes.items[i].text);
        fail_msg("no note holds: %s", why);
    }
    cuco_tx_result_free(&r);
}

static void test_kernel_split_refused(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, "other", "n", "a");
    assert_whole(&d, "launches kernel norm, which the manifest does not declare "
                     "rows_independent");
    decl_make(&d, "norm", "rows", NULL);
    assert_whole(&d, "lacks args= (the parameters indexed by row)");
    decl_make(&d, "norm", NULL, "x y");
    assert_whole(&d, "lacks rows= (the row count's parameter)");
    decl_make(&d, "norm", "count", "x y");
    assert_whole(&d, "names rows=count, which is not one of its parameters");
    decl_make(&d, "norm", "rows", "x, out");
    assert_whole(&d, "names args=out, which is not one of its parameters");
    decl_make(&d, "norm", "rows", "x:width y");
    assert_whole(&d, "names args=width, which is not one of its parameters");
    /* g reaches x, which args= does not list */
    decl_make(&d, "norm", "rows", "y");
    assert_whole(&d, "reads the gathered buffer through a parameter its declaration's args= "
                     "does not list");
}

/* the kernel's definition is elsewhere (another file, a library): its
 * __global__ declaration here gives the parameters' positions; with no
 * declaration either (a header's) the launch stays whole, unless the
 * manifest's declaration lists the parameters (params=) */
static void test_kernel_split_no_definition(void **state)
{
    (void)state;
    static const char *const hprog =
        "#include <nccl.h>\n"
        "__global__ void norm(const float *x, float *y, int rows);\n"
        "static void step(float *l, float *g, float *y, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllGather(l, g, 16, ncclFloat, c, s);\n"
        "    norm<<<8, 256, 0, s>>>(g, y, 8);\n"
        "}\n"
        "int main() {\n"
        "    float *l, *g, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&l, 64); cudaMalloc(&g, 128); cudaMalloc(&y, 128);\n"
        "    step(l, g, y, c, s);\n"
        "    return 0;\n"
        "}\n";
    decl d;
    decl_make(&d, "norm", "rows", "x y");
    cuco_tx_result r;
    transform_declared(hprog, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{2, "
                                      "0x3UL, 1}, norm, 8, 256, 0, s, g, y, 8);"));
    cuco_tx_result_free(&r);
    /* the same without the declaration */
    char *bare =
        tx_replaced(hprog, "__global__ void norm(const float *x, float *y, int rows);\n", "");
    transform_declared(bare, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_split("));
    assert_true(tx_has_schedule_note(&r.notes, 4,
                                     "which is neither defined nor declared __global__ in this "
                                     "file"));
    cuco_tx_result_free(&r);
    /* ... unless the declaration lists the parameters' names */
    d.keys[d.s.n_params] = (char *)"params";
    d.values[d.s.n_params++] = (char *)"x, y, rows";
    transform_declared(bare, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{2, "
                                      "0x3UL, 1}, norm, 8, 256, 0, s, g, y, 8);"));
    cuco_tx_result_free(&r);
    d.values[d.s.n_params - 1] = (char *)"x y";
    transform_declared(bare, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_split("));
    assert_true(tx_has_schedule_note(&r.notes, 4,
                                     "with 3 arguments for its 2 parameters (its declaration's "
                                     "params=)"));
    cuco_tx_result_free(&r);
    free(bare);
}

/* line 8: a row-parallel kernel writing y (rows at 3, row arguments x and
 * y); line 9: the in-place all-reduce of y */
static const char *const prog_produce =
    "#include <nccl.h>\n"
    "__global__ void partial(const float *x, const float *w, float *y, int rows, int din, int "
    "dout)\n"
    "{ int r = blockIdx.x; if (r < rows) y[r * dout] = x[r * din] * w[0]; }\n"
    "static void step(float *x, float *w, float *y, int rows, int din, int dout, ncclComm_t c,\n"
    "                 cudaStream_t s)\n"
    "{\n"
    "    float *out = y;\n"
    "    partial<<<rows, 128, 0, s>>>(x, w, out, rows, din, dout);\n"
    "    ncclAllReduce(y, y, (size_t)rows * dout, ncclFloat, ncclSum, c, s);\n"
    "}\n"
    "int main() {\n"
    "    float *x, *w, *y; ncclComm_t c; cudaStream_t s;\n"
    "    cudaMalloc(&x, 64); cudaMalloc(&w, 64); cudaMalloc(&y, 64);\n"
    "    step(x, w, y, 4, 4, 4, c, s);\n"
    "    return 0;\n"
    "}\n";

/* the kernel that writes the all-reduce's buffer (through an alias) runs in
 * ranges of rows, each reduced as it is made */
static void test_kernel_produce_applies(void **state)
{
    (void)state;
    decl d;
    /* x has din elements per row, y dout: parameters 4 and 5 */
    decl_make(&d, "partial", "rows", "x:din, y:dout");
    cuco_tx_result r;
    transform_declared(prog_produce, &d, &r);
    assert_non_null(strstr(r.program,
                           "cuco_tx::kernel_produce(0, CUCO_PSPLIT_0, cuco_tx::RowSpec{3, "
                           "0x5UL, 1, {5, 0, 6}}, 2, "
                           "(size_t)((size_t)rows * dout), ncclFloat, partial, rows, "
                           "128, 0, s, x, w, out, rows, din, dout);"));
    assert_non_null(strstr(r.program,
                           "cuco_tx::all_reduce(cuco_tx::produce_site(0, CUCO_PSPLIT_0), "
                           "y, y"));
    assert_non_null(strstr(r.program, "#define CUCO_PSPLIT_0 1 // cuco:knob run 0 1")); /* on for a kernel */
    assert_non_null(strstr(r.program, "#define CUCO_PSPLIT_CE 1 // cuco:knob run 0 1 when CUCO_PSPLIT_0=1\n"));
    assert_null(strstr(r.program, "#define CUCO_TX_GEMM_SPLIT"));
    assert_true(tx_has_schedule_note(&r.notes, 8,
                                     "producer_split: kernel partial at line 8 makes the input of "
                                     "ncclAllReduce at line 9: the kernel runs in "
                                     "CUCO_PSPLIT_PIECES ranges of rows"));
    cuco_tx_result_free(&r);
    /* y is not among the row arguments: the kernel stays whole */
    decl_make(&d, "partial", "rows", "x");
    transform_declared(prog_produce, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_produce("));
    assert_null(strstr(r.program, "#define CUCO_PSPLIT_0"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "the statement before it (line 8) launches a kernel with no "
                                     "row argument (args=) naming the collective's input "
                                     "buffer"));
    cuco_tx_result_free(&r);
}

/* line 9: a kernel writing L->part from L->x (both members of one struct);
 * line 10: the reduce-scatter of L->part into L->shard */
static const char *const prog_rs =
    "#include <nccl.h>\n"
    "struct layer { float *x, *part, *shard; int tokens, din, dout; };\n"
    "__global__ void partial(const float *x, float *part, int tokens, int din, int dout)\n"
    "{ int t = blockIdx.x; if (t < tokens) part[t * dout] = x[t * din]; }\n"
    "static void step(struct layer *L, size_t per, ncclComm_t comm, cudaStream_t s)\n"
    "{\n"
    "    int n = L->tokens;\n"
    "    (void)n;\n"
    "    partial<<<L->tokens, 128, 0, s>>>(L->x, L->part, L->tokens, L->din, L->dout);\n"
    "    ncclReduceScatter(L->part, L->shard, per, ncclFloat, ncclSum, comm, s);\n"
    "}\n"
    "int main() {\n"
    "    struct layer L; ncclComm_t c; cudaStream_t s;\n"
    "    cudaMalloc(&L.x, 64); cudaMalloc(&L.part, 64); cudaMalloc(&L.shard, 64);\n"
    "    step(&L, 8, c, s);\n"
    "    return 0;\n"
    "}\n";

/* a kernel before a reduce-scatter: its reduced argument is the one spelled
 * as the reduce-scatter's input (not L->x, which names the same struct), its
 * count the per-rank count times the communicator's size; off in gen_0 */
static void test_kernel_produce_reduce_scatter(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, "partial", "tokens", "x:din, part:dout");
    cuco_tx_result r;
    transform_declared(prog_rs, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_produce(0, CUCO_PSPLIT_0, cuco_tx::RowSpec{2, "
                                      "0x3UL, 1, {4, 5}}, 1, (size_t)(per) * "
                                      "cuco_tx::comm_size(comm), ncclFloat, partial,"));
    assert_non_null(strstr(r.program, "cuco_tx::reduce_scatter(cuco_tx::produce_site(0, "
                                      "CUCO_PSPLIT_0), L->part, L->shard"));
    assert_non_null(strstr(r.program, "#define CUCO_PSPLIT_0 0 // cuco:knob run 0 1"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "producer_split: kernel partial at line 9 makes the input of "
                                     "ncclReduceScatter at line 10"));
    cuco_tx_result_free(&r);
    /* both row arguments name the struct, neither is spelled as the input */
    static const char *const other = "    ncclReduceScatter(L->shard, L->part, per, ncclFloat, ";
    char *text = strdup(prog_rs);
    assert_non_null(text);
    char *at = strstr(text, "    ncclReduceScatter(L->part, L->shard, per, ncclFloat, ");
    assert_non_null(at);
    memcpy(at, other, strlen(other));
    transform_declared(text, &d, &r);
    assert_null(strstr(r.program ? r.program : "", "cuco_tx::kernel_produce("));
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "launches a kernel with several row arguments that may name "
                                     "the collective's buffers, none spelled as its input"));
    cuco_tx_result_free(&r);
    free(text);
}

/* the launch sits in a helper called once, whose body is plain host code
 * and the launch: the split goes into the helper, with the helper's names */
static void test_kernel_split_helper(void **state)
{
    (void)state;
    static const char *const hprog =
        "#include <nccl.h>\n"
        "__global__ void act(const float *in, float *out, int n, int d)\n"
        "{ int r = blockIdx.x; if (r < n) out[r * d] = in[r * d] > 0 ? in[r * d] : 0; }\n"
        "static void act_rows(const float *in, float *out, int n, int d, cudaStream_t st)\n"
        "{\n"
        "    int blocks = n;\n"
        "    act<<<blocks, 128, 0, st>>>(in, out, n, d);\n"
        "}\n"
        "static void step(float *l, float *g, float *y, int rows, int dim, ncclComm_t c,\n"
        "                 cudaStream_t s)\n"
        "{\n"
        "    ncclAllGather(l, g, 16, ncclFloat, c, s);\n"
        "    act_rows(g, y, rows, dim, s);\n"
        "}\n"
        "int main() {\n"
        "    float *l, *g, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&l, 64); cudaMalloc(&g, 128); cudaMalloc(&y, 128);\n"
        "    step(l, g, y, 8, 4, c, s);\n"
        "    return 0;\n"
        "}\n";
    decl d;
    decl_make(&d, "act", "n", "in out");
    cuco_tx_result r;
    transform_declared(hprog, &d, &r);
    /* the grid is a local, not the row count's argument: grid_rows 0 */
    assert_non_null(strstr(r.program, "cuco_tx::kernel_split(0, CUCO_SPLIT_0, cuco_tx::RowSpec{2, "
                                      "0x3UL, 0}, act, blocks, 128, 0, st, in, out, n, d);"));
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::split_site(0, CUCO_SPLIT_0), "
                                      "l, g"));
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "consumer_split_by_source: kernel act at line 7 consumes "
                                     "ncclAllGather at line 12 per source rank (own rows first; "
                                     "declared rows_independent at workload.yaml line 12), in "
                                     "the helper its first consumer calls"));
    cuco_tx_result_free(&r);
}

/* line 9: the receive; line 10: the norm over the received rows; line 11:
 * another kernel, independent of them */
static const char *const prog_recv =
    "#include <nccl.h>\n"
    "__global__ void norm(const float *x, const float *w, float *y, int rows, int dim)\n"
    "{ int r = blockIdx.x; if (r < rows) y[r * dim] = x[r * dim] * w[0]; }\n"
    "__global__ void other(float *a, int n) { a[0] = (float)n; }\n"
    "__global__ void use(const float *a, int n) {}\n"
    "static void stage(float *in, float *w, float *y, float *z, int rows, int dim, int prev,\n"
    "                  ncclComm_t c, cudaStream_t s)\n"
    "{\n"
    "    ncclRecv(in, (size_t)rows * dim, ncclFloat, prev, c, s);\n"
    "    norm<<<rows, 256, 0, s>>>(in, w, y, rows, dim);\n"
    "    other<<<1, 32, 0, s>>>(z, 4);\n"
    "}\n"
    "int main() {\n"
    "    float *in, *w, *y, *z; ncclComm_t c; cudaStream_t s;\n"
    "    cudaMalloc(&in, 128); cudaMalloc(&w, 4); cudaMalloc(&y, 128); cudaMalloc(&z, 4);\n"
    "    stage(in, w, y, z, 8, 4, 0, c, s);\n"
    "    return 0;\n"
    "}\n";

static void test_kernel_recv_split(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, "norm", "rows", "x:dim y:dim");
    cuco_tx_result r;
    transform_declared(prog_recv, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::kernel_recv_split(0, CUCO_SPLIT_0, "
                                      "cuco_tx::RowSpec{3, 0x5UL, 1, {5, 0, 5}}, norm, rows, 256, 0, "
                                      "s, in, w, y, rows, dim);"));
    assert_non_null(strstr(r.program, "cuco_tx::recv(cuco_tx::recv_site(0, CUCO_SPLIT_0), in, "));
    assert_non_null(strstr(r.program, "cuco_tx::early_start(0, CUCO_EARLY_0, s)"));
    assert_non_null(strstr(r.program, "#define CUCO_SPLIT_0 1 // cuco:knob run 0 1"));
    /* the pieces the receive moves in; no gather, so no gather parts */
    assert_non_null(strstr(r.program, "#define CUCO_P2P_PIECES 8 // cuco:knob"));
    assert_null(strstr(r.program, "CUCO_SPLIT_CHUNKS 4 // cuco:knob"));
    const char *split = strstr(r.program, "cuco_tx::kernel_recv_split(");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0");
    assert_non_null(wait);
    assert_true(split < wait);
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "consume_as_received: kernel norm at line 10 consumes ncclRecv "
                                     "at line 9 piece by piece as it lands (declared "
                                     "rows_independent at workload.yaml line 12)"));
    cuco_tx_result_free(&r);
    /* without the received argument's width the rows it holds are unknown */
    decl_make(&d, "norm", "rows", "x y");
    transform_declared(prog_recv, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_recv_split("));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "launches kernel norm, whose declaration gives no width to the "
                                     "argument that reads the received buffer (args= NAME:WIDTH)"));
    cuco_tx_result_free(&r);
    /* the received buffer reaches a parameter args= does not list */
    decl_make(&d, "norm", "rows", "y:dim");
    transform_declared(prog_recv, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::kernel_recv_split("));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "consume_as_received does not apply to ncclRecv: its first "
                                     "consumer (line 10) launches kernel norm, which reads the "
                                     "received buffer through a parameter"));
    cuco_tx_result_free(&r);
    /* a GEMM consuming the receive stays whole */
    char *gemm = tx_replaced(prog_recv, "    norm<<<rows, 256, 0, s>>>(in, w, y, rows, dim);\n",
                             "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, rows, dim, w, w, dim, "
                             "in, dim, w, y, dim);\n");
    decl_make(&d, "norm", "rows", "x:dim y:dim");
    transform_declared(gemm, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::recv_site("));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "is a GEMM: a receive is consumed piece by piece only by a "
                                     "kernel declared rows_independent"));
    cuco_tx_result_free(&r);
    free(gemm);
    /* inside a group the receive is issued with the group */
    char *grouped = tx_replaced(prog_recv, "    ncclRecv(in, (size_t)rows * dim, ncclFloat, prev, c, s);\n",
                                "    ncclGroupStart();\n"
                                "    ncclRecv(in, (size_t)rows * dim, ncclFloat, prev, c, s);\n"
                                "    ncclGroupEnd();\n");
    transform_declared(grouped, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::recv_site("));
    assert_true(tx_has_schedule_note(&r.notes, 10, "consume_as_received does not apply to ncclRecv: "
                                                   "inside ncclGroupStart/ncclGroupEnd"));
    cuco_tx_result_free(&r);
    free(grouped);
    /* a receive that ends its function, in an if/else: the report says its
     * consumer would be in a caller */
    char *ends = tx_replaced(prog_recv,
                             "    ncclRecv(in, (size_t)rows * dim, ncclFloat, prev, c, s);\n"
                             "    norm<<<rows, 256, 0, s>>>(in, w, y, rows, dim);\n"
                             "    other<<<1, 32, 0, s>>>(z, 4);\n",
                             "    if (prev < 0) { other<<<1, 32, 0, s>>>(z, 4); }\n"
                             "    else { ncclRecv(in, (size_t)rows * dim, ncclFloat, prev, c, s); }\n");
    transform_declared(ends, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::recv_site("));
    assert_true(tx_has_schedule_note(&r.notes, 10,
                                     "no later statement of its block reads the received buffer: "
                                     "the call ends function stage, and a consumer in its callers "
                                     "is not looked for"));
    cuco_tx_result_free(&r);
    free(ends);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_split_applies),
        cmocka_unit_test(test_kernel_split_template),
        cmocka_unit_test(test_kernel_split_refused),
        cmocka_unit_test(test_kernel_split_no_definition),
        cmocka_unit_test(test_kernel_split_helper),
        cmocka_unit_test(test_kernel_produce_applies),
        cmocka_unit_test(test_kernel_produce_reduce_scatter),
        cmocka_unit_test(test_kernel_recv_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
