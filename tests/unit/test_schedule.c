/* test_schedule.c: schedule (a) early start / late wait. The placement
 * (cuco_sched_place_call) on synthetic dependency graphs: a start is never
 * before its producer, a wait never after a consumer, also through aliases,
 * across streams, at a host synchronisation and in a loop body; and the text
 * scan (cuco_sched_scan, through cuco_transform_rules) on small programs. */
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

#define NAMES(...)                                                                                 \
    ((const char *const[]){__VA_ARGS__}), (sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *))
#define NONE NULL, 0

static cuco_sched_node node(cuco_sched_kind k, const char *stream, const char *const *r, size_t nr,
                            const char *const *w, size_t nw)
{
    cuco_sched_node n = {k, stream, r, nr, w, nw, 0};
    return n;
}

static cuco_sched_place place(const cuco_sched_node *nodes, size_t n, size_t call,
                              const char *const *a, const char *const *b, size_t naliases)
{
    cuco_sched_graph g = {nodes, n, a, b, naliases, NULL, NULL, 0};
    cuco_sched_place p;
    memset(&p, 0xff, sizeof(p));
    assert_int_equal(cuco_sched_place_call(&g, call, &p), 0);
    return p;
}

/* produce(x) on s; allreduce(x -> y) on s; two independent launches; read(y) */
static void test_wait_before_consumer(void **state)
{
    (void)state;
    cuco_sched_node g[] = {
        node(CUCO_SCHED_WORK, "s", NONE, NAMES("x")),
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
        node(CUCO_SCHED_WORK, "s", NAMES("b"), NAMES("c")),
        node(CUCO_SCHED_WORK, "s", NAMES("y", "c"), NAMES("z")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("d")),
    };
    cuco_sched_place p = place(g, 6, 1, NULL, NULL, 0);
    assert_int_equal(p.issue, 1); /* never before its producer */
    assert_int_equal(p.wait, 4);  /* before the reader of y, not after */
    assert_int_equal(p.independent, 2);
    assert_int_equal(p.same_stream, 2);
    assert_int_equal(p.knob_default, 1);
}

/* independent work before the call lets it start earlier, but not before
 * the producer of what it sends nor before a reader of what it receives */
static void test_start_after_producer(void **state)
{
    (void)state;
    cuco_sched_node g[] = {
        node(CUCO_SCHED_WORK, "s", NONE, NAMES("x")),       /* producer of the send buffer */
        node(CUCO_SCHED_WORK, "s", NAMES("x"), NAMES("q")), /* reads x: no conflict */
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
    };
    cuco_sched_place p = place(g, 4, 3, NULL, NULL, 0);
    assert_int_equal(p.issue, 1);
    assert_int_equal(p.wait, 4); /* the end of the scope */
    assert_int_equal(p.independent, 0);
    assert_int_equal(p.knob_default, 0);
    g[1] = node(CUCO_SCHED_WORK, "s", NAMES("y"), NAMES("q")); /* reads the receive buffer */
    p = place(g, 4, 3, NULL, NULL, 0);
    assert_int_equal(p.issue, 2);
}

/* the consumer reads the received buffer through an alias (view = y + off)
 * and writes the send buffer through another (w = x): both keep their order */
static void test_consumer_through_alias(void **state)
{
    (void)state;
    cuco_sched_node g[] = {
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
        node(CUCO_SCHED_WORK, "s", NAMES("view"), NAMES("out")),
    };
    const char *const a[] = {"view"}, *const b[] = {"y"};
    cuco_sched_place p = place(g, 3, 0, a, b, 1);
    assert_int_equal(p.wait, 2);
    assert_int_equal(p.independent, 1);
    /* without the alias the reader would look independent */
    p = place(g, 3, 0, NULL, NULL, 0);
    assert_int_equal(p.wait, 3);
    /* a chain of aliases: w -> t -> x, a write of the send buffer */
    cuco_sched_node h[] = {
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
        node(CUCO_SCHED_WORK, "s", NONE, NAMES("w")),
    };
    const char *const a2[] = {"w", "t"}, *const b2[] = {"t", "x"};
    p = place(h, 3, 0, a2, b2, 2);
    assert_int_equal(p.wait, 2);
}

/* a consumer on another stream still gets the wait before it; independent
 * work on another stream does not make the knob default to 1 */
static void test_other_stream(void **state)
{
    (void)state;
    cuco_sched_node g[] = {
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_WORK, "aux", NAMES("a"), NAMES("b")),
        node(CUCO_SCHED_WORK, "aux", NAMES("y"), NAMES("c")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("d")),
    };
    cuco_sched_place p = place(g, 4, 0, NULL, NULL, 0);
    assert_int_equal(p.wait, 2);
    assert_int_equal(p.independent, 1);
    assert_int_equal(p.same_stream, 0);
    assert_int_equal(p.knob_default, 0);
}

/* a host synchronisation, another collective, an exit and an opaque call are
 * consumers even when they name no buffer */
static void test_barriers(void **state)
{
    (void)state;
    const cuco_sched_kind kinds[] = {CUCO_SCHED_SYNC, CUCO_SCHED_COMM, CUCO_SCHED_EXIT,
                                     CUCO_SCHED_UNKNOWN};
    for (size_t k = 0; k < 4; k++) {
        cuco_sched_node g[] = {
            node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
            node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
            node(kinds[k], NULL, NONE, NONE),
            node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("c")),
        };
        cuco_sched_place p = place(g, 4, 0, NULL, NULL, 0);
        assert_int_equal(p.wait, 2);
        assert_int_equal(p.knob_default, 1);
    }
    /* plain host code that names no buffer is not a consumer */
    cuco_sched_node g[] = {
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_PLAIN, NULL, NAMES("n"), NAMES("n")),
        node(CUCO_SCHED_PLAIN, NULL, NAMES("y"), NONE),
    };
    cuco_sched_place p = place(g, 3, 0, NULL, NULL, 0);
    assert_int_equal(p.wait, 2);
    assert_int_equal(p.independent, 0);
    assert_int_equal(p.knob_default, 0);
}

/* one iteration of a loop body: nothing after the call reads y, so the wait
 * is at the end of the iteration (before the next iteration's producer) */
static void test_loop_body(void **state)
{
    (void)state;
    cuco_sched_node g[] = {
        node(CUCO_SCHED_WORK, "s", NAMES("y"), NAMES("x")),
        node(CUCO_SCHED_COMM, "s", NAMES("x"), NAMES("y")),
        node(CUCO_SCHED_WORK, "s", NAMES("a"), NAMES("b")),
    };
    cuco_sched_place p = place(g, 3, 1, NULL, NULL, 0);
    assert_int_equal(p.issue, 1);
    assert_int_equal(p.wait, 3);
    assert_int_equal(p.independent, 1);
    assert_int_equal(p.knob_default, 1);
}

static void test_bad_input(void **state)
{
    (void)state;
    cuco_sched_node g[] = {node(CUCO_SCHED_WORK, "s", NONE, NONE)};
    cuco_sched_graph gr = {g, 1, NULL, NULL, 0, NULL, NULL, 0};
    cuco_sched_place p;
    assert_int_equal(cuco_sched_place_call(&gr, 0, &p), CUCO_EINVAL);
    assert_int_equal(cuco_sched_place_call(&gr, 1, &p), CUCO_EINVAL);
}

static const char *const prog_alias =
    "#include <nccl.h>\n"
    "__global__ void k(float *a, size_t n);\n"
    "static void step(float *x, float *y, float *a, float *b, size_t n, ncclComm_t c, cudaStream_t "
    "s)\n"
    "{\n"
    "    for (int i = 0; i < 3; i++) {\n"
    "        k<<<1, 32, 0, s>>>(x, n);\n"
    "        ncclAllGather(x, y, n, ncclFloat, c, s);\n"
    "        float *view = y + 4;\n"
    "        k<<<1, 32, 0, s>>>(a, n);\n"
    "        k<<<1, 32, 0, s>>>(b, n);\n"
    "        k<<<1, 32, 0, s>>>(view, n);\n"
    "        k<<<1, 32, 0, s>>>(a, n);\n"
    "    }\n"
    "}\n"
    "int main() {\n"
    "    float *x, *y, *a, *b; ncclComm_t c; cudaStream_t s;\n"
    "    cudaMalloc(&x, 64); cudaMalloc(&y, 256); cudaMalloc(&a, 64); cudaMalloc(&b, 64);\n"
    "    step(x, y, a, b, 16, c, s);\n"
    "    cudaStreamSynchronize(s);\n"
    "    return 0;\n"
    "}\n";

/* the text route: the stream argument goes through early_start, the wait
 * goes right before the launch that reads y through 'view', the knob is
 * declared with default 1; that launch, a kernel no split takes, may read
 * y after a read pass (warm_read, its own knob) */
static void test_scan_alias_program(void **state)
{
    (void)state;
    cuco_tx_result r;
    tx_transform(prog_alias, &r);
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::warm_site(0, CUCO_WARM_0), "
                                      "x, y, n, ncclFloat, c, "
                                      "cuco_tx::early_start(0, CUCO_EARLY_0, s))"));
    /* k's body is not in the text: the pass is offered, off */
    assert_non_null(strstr(r.program, "#define CUCO_WARM_0 0 // cuco:knob run 0 1"));
    assert_true(tx_has_schedule_note(&r.notes, 11,
                                     "warm_read: offered to kernel k at line 11, which reads the "
                                     "gathered buffer of ncclAllGather at line 7"));
    const char *w = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    const char *consumer = strstr(r.program, "k<<<1, 32, 0, s>>>(view, n);");
    const char *before = strstr(r.program, "k<<<1, 32, 0, s>>>(b, n);");
    assert_non_null(w);
    assert_true(before < w && w < consumer);
    assert_non_null(strstr(r.program, "#define CUCO_EARLY_0 1 // cuco:knob run 0 1"));
    assert_true(
        tx_has_schedule_note(&r.notes, 7, "early_start_late_wait: ncclAllGather at line 7"));
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "before the statement at line 11 (2 independent launches"));
    cuco_knob *k = NULL;
    size_t nk = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_knobs(r.program, &k, &nk, &e), 0);
    int early = 0;
    for (size_t i = 0; i < nk; i++)
        early += strcmp(k[i].name, "CUCO_EARLY_0") == 0 && k[i].value_in_choices;
    assert_int_equal(early, 1);
    cuco_knobs_free(k, nk);
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
}

/* the same program with x and y passed as one buffer: the helper's two
 * pointer parameters may alias, so the first launch that names a is a
 * consumer: no independent work before it, no knob */
static void test_scan_params_alias(void **state)
{
    (void)state;
    char *text = cuco_strdup(prog_alias);
    char *call = strstr(text, "step(x, y, a, b");
    assert_non_null(call);
    memcpy(call, "step(a, y, a, b", 15);
    cuco_tx_result r;
    tx_transform(text, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "does not apply to ncclAllGather: no independent work "
                                     "between the call and its first consumer (line 9)"));
    assert_null(strstr(r.program, "CUCO_EARLY_0"));
    cuco_tx_result_free(&r);
    free(text);
}

/* a host sync of the stream, a call inside a condition, an unknown function
 * that takes the buffer, and a group */
static void test_scan_not_applied(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void use(float *p);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    use(y);\n"
        "    if (ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s) != ncclSuccess) use(x);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    cudaStreamSynchronize(s);\n"
        "    ncclGroupStart();\n"
        "    ncclSend(x, n, ncclFloat, 1, c, s);\n"
        "    ncclGroupEnd();\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    /* the unknown call use(y) is the consumer, after one independent launch */
    assert_true(tx_has_schedule_note(&r.notes, 6,
                                     "wait moved before the statement at line 8 (1 independent"));
    /* a call in an if's condition whose body does not leave */
    assert_true(tx_has_schedule_note(&r.notes, 9, "not a statement of its own"));
    assert_true(tx_has_schedule_note(
        &r.notes, 10, "no independent work between the call and its first consumer (line 11)"));
    assert_true(tx_has_schedule_note(&r.notes, 13, "inside ncclGroupStart/ncclGroupEnd"));
    cuco_tx_result_free(&r);
}

/* a consumer on another stream: the wait names that stream too; a method
 * call is a consumer (its object may hold the buffers); with a buffer that is
 * not a local (a global), any unknown call is one */
static void test_scan_streams_and_calls(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "struct Model { void step(); };\n"
        "float *g_buf;\n"
        "void helper(int n);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s,\n"
        "              cudaStream_t s2, Model &m)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, s2>>>(y, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    m.step();\n"
        "    ncclAllReduce(g_buf, g_buf, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    helper(3);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s; Model m;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64); cudaMalloc(&g_buf, 64);\n"
        "    f(x, y, a, 16, c, s, s, m); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "wait moved before the statement at line 11 (1 independent"));
    assert_non_null(strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0, s2);\n"
                                      "    k<<<1, 32, 0, s2>>>(y, n);"));
    assert_true(tx_has_schedule_note(&r.notes, 12,
                                     "wait moved before the statement at line 14 (1 independent"));
    assert_true(tx_has_schedule_note(&r.notes, 15,
                                     "wait moved before the statement at line 17 (1 independent"));
    assert_non_null(strstr(r.program, "#define CUCO_EARLY_2 1 // cuco:knob run 0 1"));
    cuco_tx_result_free(&r);
}

/* consumers the text reaches only through a table of pointers: a launch
 * that takes its arguments as void ** reads any buffer (the wait sits before
 * it), and a table filled with the buffer (an initialiser, an element
 * store) is the buffer for the calls that take it; a scalar in the same
 * table (the count) joins no buffer, so the launches that take it stay
 * independent */
static void test_scan_tables_and_indirect_launches(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void run_table(float **t);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    void *args[] = {&y, &n};\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    cudaLaunchKernel((const void *)k, dim3(1), dim3(32), args, 0, s);\n"
        "    float *tab[2];\n"
        "    tab[1] = y;\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    run_table(tab);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "wait moved before the statement at line 10 (2 independent"));
    assert_true(tx_has_schedule_note(&r.notes, 13,
                                     "wait moved before the statement at line 15 (1 independent"));
    cuco_tx_result_free(&r);
}

/* consumers hidden from a plain reading of the statement: a lambda that
 * captures the buffer, an object-like macro whose text launches on it, a
 * wrapper declared with the buffer in brackets (thrust's device_ptr), a
 * vector of buffers built in braces; the stream and the count inside them
 * join no buffer, so the launch on `a` before each stays independent */
static void test_scan_hidden_consumers(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <vector>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void launch_all(std::vector<float *> &v, cudaStream_t s);\n"
        "#define USE_Y k<<<1, 32, 0, s>>>(y, n)\n"
        "static float f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    auto run = [&]() { k<<<1, 32, 0, s>>>(y, n); };\n"
        "    thrust::device_ptr<float> p(y);\n"
        "    std::vector<float *> bufs{x, y};\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    run();\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    USE_Y;\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    float r = thrust::reduce(p, p + n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    launch_all(bufs, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    return r;\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    static const int call_line[] = {11, 14, 17, 20}, consumer_line[] = {13, 16, 19, 22};
    for (int k = 0; k < 4; k++) {
        char want[96];
        snprintf(want, sizeof want, "wait moved before the statement at line %d (1 independent",
                 consumer_line[k]);
        assert_true(tx_has_schedule_note(&r.notes, call_line[k], want));
    }
    cuco_tx_result_free(&r);
}

/* a macro of the program's own header (cuco_tx_input.header_macros) that
 * launches on y is a reader of y: the wait stays before its use; without the
 * header's text the macro reads nothing the scan can see */
static void test_scan_header_macros(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include \"launch.h\"\n"
        "__global__ void k(float *a, size_t n);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    USE_H;\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_input in = {.file_name = "p.cu",
                        .text = prog,
                        .header_macros = "#define USE_H k<<<1, 32, 0, s>>>(y, n)\n"};
    cuco_tx_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules_in(&in, &r, &e), 0);
    assert_true(tx_has_schedule_note(&r.notes, 6,
                                     "wait moved before the statement at line 8 (1 independent"));
    cuco_tx_result_free(&r);
    tx_transform(prog, &r);
    assert_false(tx_has_schedule_note(&r.notes, 6, "before the statement at line 8"));
    cuco_tx_result_free(&r);
}

/* a parameter struct filled from a buffer and a size: the size, a scalar
 * nothing is assigned to, joins the struct to nothing, so a launch that
 * takes the size stays independent; an integer that takes a buffer's
 * address still carries it */
static void test_scan_inert_scalars(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <cstdint>\n"
        "struct Params { float *ptr; size_t n; };\n"
        "__global__ void k(float *a, size_t n);\n"
        "__global__ void kp(Params p);\n"
        "__global__ void ka(uint64_t addr, size_t n);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    Params p;\n"
        "    p.ptr = y;\n"
        "    p.n = n;\n"
        "    kp<<<1, 32, 0, s>>>(p);\n"
        "}\n"
        "static void g(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    uint64_t addr = (uint64_t)y;\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    ka<<<1, 32, 0, s>>>(addr, n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); g(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "wait moved before the statement at line 11 (1 independent"));
    assert_true(tx_has_schedule_note(&r.notes, 19,
                                     "wait moved before the statement at line 21 (1 independent"));
    cuco_tx_result_free(&r);
}

/* objects that hold buffers: a struct holding y and a (brace, members, a
 * reference parameter of a function of the file or elsewhere, a vector)
 * makes its launch a consumer of y while a launch on a alone stays
 * independent; a store through a pointer loaded from a holder (pp->in = y)
 * joins every object it may reach; a reference to the struct and a member
 * read through it stay with it */
static void test_scan_objects_hold(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <vector>\n"
        "struct Pair { float *in; float *out; };\n"
        "struct Holder { Pair *ptr; };\n"
        "__global__ void k(float *a, size_t n);\n"
        "__global__ void kp(Pair q, size_t n);\n"
        "__global__ void kt(float *const *t, size_t n);\n"
        "static void bind(Pair &p, float *in, float *out) { p.in = in; p.out = out; }\n"
        "void bind_elsewhere(Pair &p, float *in, float *out);\n"
        "static void f1(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Pair q = {y, a};\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kp<<<1, 32, 0, s>>>(q, n);\n"
        "}\n"
        "static void f2(float *x, float *y, float *a, float *b, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Pair q;\n"
        "    bind(q, y, b);\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kp<<<1, 32, 0, s>>>(q, n);\n"
        "}\n"
        "static void f3(float *x, float *y, float *a, float *b, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Pair q;\n"
        "    bind_elsewhere(q, y, b);\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kp<<<1, 32, 0, s>>>(q, n);\n"
        "}\n"
        "static void f4(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Pair q;\n"
        "    q.out = a;\n"
        "    Holder h;\n"
        "    h.ptr = &q;\n"
        "    Pair *pp = h.ptr;\n"
        "    pp->in = y;\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kp<<<1, 32, 0, s>>>(q, n);\n"
        "}\n"
        "static void f5(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    std::vector<float *> bufs;\n"
        "    bufs.push_back(y);\n"
        "    bufs.push_back(a);\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kt<<<1, 32, 0, s>>>(bufs.data(), n);\n"
        "}\n"
        "static void f6(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Pair q = {y, a};\n"
        "    Pair &r = q;\n"
        "    float *z = r.out;\n"
        "    ncclAllGather(x, y, n, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, s>>>(z, n);\n"
        "    kp<<<1, 32, 0, s>>>(q, n);\n"
        "}\n"
        "int main() { float *x, *y, *a, *b; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64); cudaMalloc(&b, 64);\n"
        "    f1(x, y, a, 16, c, s); f2(x, y, a, b, 16, c, s); f3(x, y, a, b, 16, c, s);\n"
        "    f4(x, y, a, 16, c, s); f5(x, y, a, 16, c, s); f6(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    static const int wait_at[][2] = {{13, 15}, {21, 23}, {29, 31}, {50, 52}, {59, 61}};
    for (size_t i = 0; i < sizeof(wait_at) / sizeof(wait_at[0]); i++) {
        char want[96];
        snprintf(want, sizeof(want), "wait moved before the statement at line %d (1 independent",
                 wait_at[i][1]);
        assert_true(tx_has_schedule_note(&r.notes, wait_at[i][0], want));
    }
    assert_true(tx_has_schedule_note(
        &r.notes, 41, "no independent work between the call and its first consumer (line 42)"));
    cuco_tx_result_free(&r);
}

/* a struct given to a function of the file by reference: one that only
 * reads its members (a condition, a launch configuration, a kernel's
 * argument) sets nothing, so the struct does not take the other argument;
 * where one overload sets it, the call may set it, whichever the file
 * defines first */
static void test_scan_callee_reads(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "struct Cfg { float *buf; cudaStream_t s; size_t n; };\n"
        "__global__ void k(float *a, size_t n);\n"
        "__global__ void kc(Cfg c);\n"
        "static void launch_with(Cfg &c, float *a) { if (c.n) k<<<1, 32, 0, c.s>>>(a, c.n); }\n"
        "static void rebind(Cfg &c, int unused) { if (c.n > (size_t)unused) return; }\n"
        "static void rebind(Cfg &c, float *b) { c.buf = b; }\n"
        "static void g1(float *x, float *y, float *a, size_t n, ncclComm_t comm, cudaStream_t s)\n"
        "{\n"
        "    Cfg c = {a, s, n};\n"
        "    launch_with(c, y);\n"
        "    ncclAllGather(x, y, n, ncclFloat, comm, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kc<<<1, 32, 0, s>>>(c);\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "}\n"
        "static void g2(float *x, float *y, float *a, size_t n, ncclComm_t comm, cudaStream_t s)\n"
        "{\n"
        "    Cfg c = {a, s, n};\n"
        "    rebind(c, y);\n"
        "    ncclAllGather(x, y, n, ncclFloat, comm, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    kc<<<1, 32, 0, s>>>(c);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t comm; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    g1(x, y, a, 16, comm, s); g2(x, y, a, 16, comm, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 12,
                                     "wait moved before the statement at line 15 (2 independent"));
    assert_true(tx_has_schedule_note(&r.notes, 21,
                                     "wait moved before the statement at line 23 (1 independent"));
    cuco_tx_result_free(&r);
}

/* names a statement reaches that its text does not show, and names that
 * only sit beside a buffer: a macro using a macro that reads y, a
 * structured binding, an out-parameter, a container's push_back, a macro
 * that may return (the wait stays before it); a macro quoting its
 * argument (#x), a struct passed to a pointer-to-const parameter, cuBLAS's
 * &alpha/&beta and a size beside y in a pair alias nothing */
static void test_scan_macros_and_bindings(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "#include <utility>\n"
        "#include <vector>\n"
        "__global__ void k(float *a, size_t n);\n"
        "struct Dims { size_t n; };\n"
        "void view_of(float **p, float *y);\n"
        "void launch_all(std::vector<float *> &v, cudaStream_t s);\n"
        "static void fill(const Dims *d, const float *y) { (void)d; (void)y; }\n"
        "#define USE_Z k<<<1, 32, 0, s>>>(y, n)\n"
        "#define USE2 USE_Z\n"
        "#define TRY(x) if ((x) != 0) return 1\n"
        "#define CHECK(x) ((x) == 0 || fail(#x))\n"
        "static int f(float *x, float *y, float *a, size_t n, ncclComm_t c, cublasHandle_t h, cudaStream_t s)\n"
        "{\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    Dims d{n};\n"
        "    auto [p, q] = std::make_pair(y, n);\n"
        "    float *p2 = nullptr;\n"
        "    std::vector<float *> v;\n"
        "    fill(&d, y);\n"
        "    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, y, 1, y, 1, &zero, y, 1);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    USE2;\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, s>>>(p, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    view_of(&p2, y);\n"
        "    k<<<1, 32, 0, s>>>(p2, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    v.push_back(y);\n"
        "    launch_all(v, s);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    TRY(cudaGetLastError());\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    CHECK(cudaGetLastError());\n"
        "    k<<<1, 32, 0, s>>>(a, d.n);\n"
        "    k<<<1, 32, 0, s>>>(a, (size_t)zero);\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "    return 0;\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cublasHandle_t h; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    return f(x, y, a, 16, c, h, s); }\n"
        ;
    cuco_tx_result r;
    tx_transform(prog, &r);
    static const int call_line[] = {22, 25, 28, 32, 36, 40},
                     wait_line[] = {24, 27, 30, 34, 38, 44};
    for (int k = 0; k < 6; k++) {
        char want[96];
        snprintf(want, sizeof want, "wait moved before the statement at line %d (%d independent",
                 wait_line[k], k == 5 ? 2 : 1);
        assert_true(tx_has_schedule_note(&r.notes, call_line[k], want));
    }
    cuco_tx_result_free(&r);
}

/* the wait names its consumer's stream again right before it: never an
 * expression with a call (evaluated twice), a loop's own variable
 * (streams[i] out of its scope), or two streams besides the call's (one
 * wait covers one); a plain element or a second stream that is the
 * call's own is fine */
static void test_scan_consumer_streams(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "cudaStream_t next_stream();\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s, cudaStream_t *streams, cudaStream_t s2)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, next_stream()>>>(y, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    for (int i = 0; i < 2; i++)\n"
        "        k<<<1, 32, 0, streams[i]>>>(y, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    {\n"
        "        k<<<1, 32, 0, s2>>>(a, n);\n"
        "        k<<<1, 32, 0, s>>>(y, n);\n"
        "    }\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    {\n"
        "        k<<<1, 32, 0, s2>>>(a, n);\n"
        "        k<<<1, 32, 0, streams[0]>>>(y, n);\n"
        "    }\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, streams[1]>>>(y, n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s, ss[2];\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s, ss, s); return 0; }\n"
        ;
    cuco_tx_result r;
    tx_transform(prog, &r);
    static const int refused_line[] = {6, 9, 19}, applied_line[] = {13, 25};
    for (int k = 0; k < 3; k++)
        assert_true(tx_has_schedule_note(&r.notes, refused_line[k],
                                         "runs on a stream the wait cannot name"));
    for (int k = 0; k < 2; k++)
        assert_true(tx_has_schedule_note(&r.notes, applied_line[k], "issued on a side stream"));
    assert_non_null(strstr(r.program, "cuco_tx::early_wait(2, CUCO_EARLY_2, s2);"));
    assert_non_null(strstr(r.program, "cuco_tx::early_wait(4, CUCO_EARLY_4, streams[1]);"));
    cuco_tx_result_free(&r);
}

/* pointer parameters whose caller's arguments share one head (b.y,
 * b.flags) may alias, unless their types cannot be one object: a struct of
 * the file and a float buffer are apart, a char buffer is not (and what a
 * char buffer may also be is not the float buffer's). b.flags and b.raw are
 * made by no allocation here, so the two-members rule
 * (test_scan_c_struct_step) does not part them from b.y. */
static void test_scan_param_types(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "struct Stats { int hits; };\n"
        "__global__ void k(float *a, size_t n);\n"
        "__global__ void count(Stats *flags, size_t n);\n"
        "__global__ void bytes(char *raw, size_t n);\n"
        "void step(float *x, float *y, Stats *flags, char *raw, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    count<<<1, 32, 0, s>>>(flags, n);\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    bytes<<<1, 32, 0, s>>>(raw, n);\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "}\n"
        "struct Bufs { float *x, *y; Stats *flags; char *raw; };\n"
        "int main() { Bufs b; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&b.x, 64); cudaMalloc(&b.y, 64); b.flags = 0; b.raw = 0;\n"
        "    step(b.x, b.y, b.flags, b.raw, 16, c, s); return 0; }\n"
        ;
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 8, "wait moved before the statement at line 10"));
    assert_true(tx_has_schedule_note(&r.notes, 11, "no independent work between the call and its "
                                                   "first consumer (line 12)"));
    cuco_tx_result_free(&r);

    /* C's typedef of a struct, with or without a tag, is a struct of the
     * file too; a union is not (a float pointer may be one of its views) */
    static const struct {
        const char *type;
        int apart;
    } types[] = {{"typedef struct { int hits; } Stats;", 1},
                 {"typedef struct stats_tag { int hits; } Stats;", 1},
                 {"typedef union { float *p; int hits; } Stats;", 0}};
    const char *at = strstr(prog, "struct Stats { int hits; };");
    assert_non_null(at);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char *c_prog = cuco_sprintf("%.*s%s%s", (int)(at - prog), prog, types[i].type,
                                    at + strlen("struct Stats { int hits; };"));
        assert_non_null(c_prog);
        tx_transform(c_prog, &r);
        assert_int_equal(tx_has_schedule_note(&r.notes, 8,
                                              "wait moved before the statement at line 10"),
                         types[i].apart);
        assert_int_equal(tx_has_schedule_note(&r.notes, 8,
                                              "no independent work between the call and its "
                                              "first consumer (line 9)"),
                         !types[i].apart);
        cuco_tx_result_free(&r);
        free(c_prog);
    }
}

/* a preprocessor conditional between the call and its consumer: the call
 * under #ifdef, its reader in the #else (compiled without it) or after the
 * #endif; no schedule applies (nor the producer split across one); the same
 * code without the directives gets its wait */
static void test_scan_conditional(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void step(float *x, float *y, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "#ifdef MULTI_GPU\n"
        "    ncclAllReduce(y, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(x, n);\n"
        "#else\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "#endif\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "}\n"
        "int main() { float *x, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); step(x, y, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    /* the wait goes ahead of the #else, in the call's own branch */
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "wait moved before the preprocessor conditional at line 9 "
                                     "(1 independent launch"));
    assert_true(tx_has_schedule_note(&r.notes, 7, "is apart from it by a preprocessor "
                                                  "conditional (line 6)"));
    const char *w = strstr(r.program, "cuco_tx::early_wait(");
    assert_non_null(w);
    const char *x_launch = strstr(r.program, "k<<<1, 32, 0, s>>>(x, n);");
    const char *els = strstr(r.program, "#else");
    assert_true(x_launch && els && x_launch < w && w < els);
    cuco_tx_result_free(&r);

    /* a whole group in between (#ifdef ... #endif) changes nothing; a
     * consumer inside a group that opens after the call: the wait goes
     * ahead of the #ifdef */
    static const char *const groups =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void step(float *x, float *y, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(y, y, n, ncclFloat, ncclSum, c, s);\n"
        "#ifdef TRACE\n"
        "    k<<<1, 32, 0, s>>>(x, n);\n"
        "#endif\n"
        "    k<<<1, 32, 0, s>>>(x, n);\n"
        "#if defined(CHECK)\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "#endif\n"
        "    k<<<1, 32, 0, s>>>(y, n);\n"
        "}\n"
        "int main() { float *x, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); step(x, y, 16, c, s); return 0; }\n";
    tx_transform(groups, &r);
    assert_true(tx_has_schedule_note(&r.notes, 5,
                                     "wait moved before the preprocessor conditional at line 10 "
                                     "(2 independent launches"));
    w = strstr(r.program, "cuco_tx::early_wait(");
    assert_true(w && w < strstr(r.program, "#if defined(CHECK)") &&
                w > strstr(r.program, "#endif"));
    cuco_tx_result_free(&r);

    /* without the directives (blank lines keep the numbering) */
    char *plain = cuco_strdup(prog);
    assert_non_null(plain);
    const char *const dirs[] = {"#ifdef MULTI_GPU", "#else", "#endif"};
    for (size_t i = 0; i < 3; i++) {
        char *d = strstr(plain, dirs[i]);
        assert_non_null(d);
        memset(d, ' ', strlen(dirs[i]));
    }
    tx_transform(plain, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7, "wait moved before the statement at line 10"));
    cuco_tx_result_free(&r);
    free(plain);
}

/* A call right after a switch's label ("case 0:") and a call in a braced
 * case ("case 1: { ... }") are scheduled: each wait goes before its
 * consumer in the same case, never past a break or the next label; the
 * EVOLVE-BLOCK around the call starts after the label. */
static void test_scan_switch_cases(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "void step(int op, float *x, float *y, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    switch (op) {\n"
        "    case 0:\n"
        "        ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, s);\n"
        "        k<<<1, 32, 0, s>>>(y, n);\n"
        "        k<<<1, 32, 0, s>>>(x, n);\n"
        "        break;\n"
        "    case 1: {\n"
        "        ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, s);\n"
        "        k<<<1, 32, 0, s>>>(y, n);\n"
        "        break;\n"
        "    }\n"
        "    default:\n"
        "        ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, s);\n"
        "        k<<<1, 32, 0, s>>>(y, n);\n"
        "    case 3:\n"
        "        k<<<1, 32, 0, s>>>(x, n);\n"
        "    }\n"
        "}\n"
        "int main() { float *x, *y; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); step(0, x, y, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7, "wait moved before the statement at line 9"));
    assert_true(tx_has_schedule_note(&r.notes, 12, "wait moved before the statement at line 14"));
    /* falls through into case 3: the wait goes before the label */
    assert_true(tx_has_schedule_note(&r.notes, 17, "wait moved before the statement at line 19"));
    assert_non_null(strstr(r.program, "    case 0:\n// EVOLVE-BLOCK-START\n"));
    assert_non_null(strstr(r.program, "    default:\n// EVOLVE-BLOCK-START\n"));
    cuco_tx_result_free(&r);
}

/* C-style steps on one struct's members (the goto-cleanup style): sizes
 * from its scalar members and number macros (later declarators too), its
 * buffers allocated through a cast ((void **)&m.x), handed to a function
 * of the file that keeps them in place, and the collective checked in an
 * if whose body jumps to the cleanup: the launch on other members
 * overlaps. A helper that stores its parameter, or a size that carries a
 * pointer member's value, keeps the struct whole. */
static void test_scan_c_struct_step(void **state)
{
    (void)state;
    static const struct {
        const char *helper, *sizes;
        int apart;
    } cases[] = {
        {"static int helper(float *p, float *q, cudaStream_t s) { k<<<1, 32, 0, s>>>(p, q); "
         "if (!p) return 1; return 0; }",
         "const size_t n = m->cfg.n, rows = n / COLS;", 1},
        {"static float *kept; static int helper(float *p, float *q, cudaStream_t s) { kept = p; "
         "(void)q; (void)s; return 0; }",
         "const size_t n = m->cfg.n, rows = n / COLS;", 0},
        {"static int helper(float *p, float *q, cudaStream_t s) { k<<<1, 32, 0, s>>>(p, q); "
         "return 0; }",
         "const size_t n = m->cfg.n, rows = (size_t)m->a;", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "#define COLS 64\n"
            "struct cfg_t { size_t n; int rounds; };\n"
            "struct mlp { float *x, *h, *shard, *a, *b; struct cfg_t cfg; size_t count; "
            "ncclComm_t comm; cudaStream_t s; };\n"
            "__global__ void k(float *a, float *b);\n"
            "%s\n"
            "static int step(struct mlp *m)\n"
            "{\n"
            "    %s\n"
            "    k<<<1, 32, 0, m->s>>>(m->x, m->h);\n"
            "    if (ncclReduceScatter(m->h, m->shard, m->count, ncclFloat, ncclSum, m->comm, "
            "m->s) != ncclSuccess)\n"
            "        goto fail;\n"
            "    k<<<(unsigned)rows, 32, 0, m->s>>>(m->a, m->b);\n"
            "    k<<<1, 32, 0, m->s>>>(m->shard, m->b);\n"
            "    return 0;\n"
            "fail:\n"
            "    return 1;\n"
            "}\n"
            "int main() { struct mlp m; cudaMalloc((void **)&m.x, 64); "
            "cudaMalloc((void **)&m.h, 64); cudaMalloc((void **)&m.shard, 64); "
            "cudaMalloc((void **)&m.a, 64); cudaMalloc((void **)&m.b, 64); "
            "helper(m.h, m.a, m.s); step(&m); return 0; }\n",
            cases[i].helper, cases[i].sizes);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        const char *want = cases[i].apart
                               ? "wait moved before the statement at line 14 (1 independent"
                               : "no independent work between the call and its first consumer "
                                 "(line 13)";
        if (!tx_has_schedule_note(&r.notes, 11, want))
            fail_msg("case %zu: no note '%s' at line 11", i, want);
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* the buffers as separate pointer parameters, every caller passing two
     * members of one object, each its own allocation: apart; one member
     * set from another pointer (m.a = m.h) makes them one */
    for (int joined = 0; joined < 2; joined++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "struct mlp { float *h, *shard, *a, *b; ncclComm_t comm; cudaStream_t s; };\n"
            "__global__ void k(float *a, float *b);\n"
            "static void step(float *h, float *shard, float *a, float *b, ncclComm_t c, "
            "cudaStream_t s)\n"
            "{\n"
            "    ncclReduceScatter(h, shard, 16, ncclFloat, ncclSum, c, s);\n"
            "    k<<<1, 32, 0, s>>>(a, b);\n"
            "    k<<<1, 32, 0, s>>>(shard, b);\n"
            "}\n"
            "int main() { struct mlp m; cudaMalloc((void **)&m.h, 64); "
            "cudaMalloc((void **)&m.shard, 64); cudaMalloc((void **)&m.a, 64); "
            "cudaMalloc((void **)&m.b, 64); %s"
            "step(m.h, m.shard, m.a, m.b, m.comm, m.s); return 0; }\n",
            joined ? "m.a = m.h; " : "");
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        const char *want =
            joined ? "no independent work between the call and its first consumer (line 7)"
                   : "wait moved before the statement at line 8 (1 independent";
        if (!tx_has_schedule_note(&r.notes, 6, want))
            fail_msg("joined %d: no note '%s' at line 6", joined, want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* A collective on a member of the class (no `this->`) beside a launch on a
 * pointer parameter: the parameter may be that member when the member
 * leaves its place anywhere (a getter returns it, so a caller may pass
 * it), and the launch then waits; a member that stays in place is apart. */
static void test_scan_member_vs_params(void **state)
{
    (void)state;
    static const char *const getters[] = {"", "float *buf() { return buf_; }",
                                          "void keep(float **p) { *p = buf_; }"};
    for (size_t i = 0; i < sizeof getters / sizeof getters[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, float *b);\n"
            "class Layer {\n"
            "public:\n"
            "    void forward(float *out, cudaStream_t s);\n"
            "    %s\n"
            "private:\n"
            "    float *buf_ = nullptr, *src_ = nullptr;\n"
            "    ncclComm_t comm_;\n"
            "public:\n"
            "    Layer() { cudaMalloc(&buf_, 64); cudaMalloc(&src_, 64); }\n"
            "};\n"
            "void Layer::forward(float *out, cudaStream_t s)\n"
            "{\n"
            "    ncclAllReduce(buf_, buf_, 16, ncclFloat, ncclSum, comm_, s);\n"
            "    k<<<1, 32, 0, s>>>(src_, out);\n"
            "    k<<<1, 32, 0, s>>>(buf_, out);\n"
            "}\n"
            "int main() { Layer l; float *o; cudaMalloc(&o, 64); cudaStream_t s; "
            "l.forward(o, s); return 0; }\n",
            getters[i]);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        const char *want = i == 0 ? "wait moved before the statement at line 17 (1 independent"
                                  : "no independent work between the call and its first "
                                    "consumer (line 16)";
        if (!tx_has_schedule_note(&r.notes, 15, want))
            fail_msg("case %zu: no note '%s' at line 15", i, want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* Buffers held in std::unique_ptr with a deleter, made by a factory that
 * cudaMallocs and returns the pointer: `.get()` reaches the factory's
 * allocation (made symmetric), reads only its object, and members set from
 * the factory stay apart; a factory that may return another pointer does
 * not make fresh buffers. */
static void test_scan_unique_ptr_factory(void **state)
{
    (void)state;
    static const char *const returns[] = {"", "    if (!p) return std::unique_ptr<T, CudaFree>(g_pool);\n"};
    for (size_t i = 0; i < 2; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "#include <memory>\n"
            "struct CudaFree { void operator()(void *p) const { cudaFree(p); } };\n"
            "static float *g_pool;\n"
            "template <class T> std::unique_ptr<T, CudaFree> make_device(size_t n)\n"
            "{\n"
            "    T *p = nullptr;\n"
            "    cudaMalloc(reinterpret_cast<void **>(&p), n * sizeof(T));\n"
            "%s"
            "    return std::unique_ptr<T, CudaFree>(p);\n"
            "}\n"
            "struct Workspace {\n"
            "    std::unique_ptr<float, CudaFree> x, y, z;\n"
            "    ncclComm_t comm;\n"
            "    cudaStream_t s;\n"
            "};\n"
            "__global__ void k(float *a, float *b);\n"
            "static void step(Workspace &ws)\n"
            "{\n"
            "    ncclAllReduce(ws.x.get(), ws.x.get(), 16, ncclFloat, ncclSum, ws.comm, ws.s);\n"
            "    k<<<1, 32, 0, ws.s>>>(ws.y.get(), ws.z.get());\n"
            "    k<<<1, 32, 0, ws.s>>>(ws.x.get(), ws.z.get());\n"
            "}\n"
            "int main() { Workspace ws; ws.x = make_device<float>(16); ws.y = make_device<float>(16);\n"
            "    ws.z = make_device<float>(16); step(ws); return 0; }\n",
            returns[i]);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        int call = 19 + (int)i;
        assert_true(tx_has_note(&r.notes, "symmetric", 8, "cudaMalloc -> cuco_tx::symm_malloc"));
        char *want = i == 0 ? cuco_sprintf("wait moved before the statement at line %d (1 independent",
                                           call + 2)
                            : cuco_sprintf("no independent work between the call and its first "
                                           "consumer (line %d)",
                                           call + 1);
        if (!tx_has_schedule_note(&r.notes, call, want))
            fail_msg("case %zu: no note '%s' at line %d", i, want, call);
        free(want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* A collective that ends a wrapper: it starts early in the wrapper and each
 * call of the wrapper gets the wait before its own first consumer, with
 * the caller's names; every call must take one (a call in a loop's
 * unbraced body, or the wrapper's address taken, refuses). */
/* Whether the transform of prog has a schedule note at line holding
 * needle. */
static int schedule_note_of(const char *prog, int line, const char *needle)
{
    cuco_tx_result r;
    tx_transform(prog, &r);
    int has = tx_has_schedule_note(&r.notes, line, needle);
    cuco_tx_result_free(&r);
    return has;
}

/* Schedule prefetch_next: an all-gather at the top of a counted loop whose
 * send buffer is the iteration's element gathers the next iteration's
 * input beside the body's work, unless the body may touch that input
 * (directly, through a macro), leave early, or the call or the header is
 * not one the schedule reads. */
/* prefetch_next's reads in place: each later use of the receive buffer in
 * the body written cuco_tx::prefetched(0, full), only where the body
 * reaches the buffer by that name alone */
static void test_scan_prefetch_reads(void **state)
{
    (void)state;
    static const struct {
        const char *pre, *before, *after, *why; /* why: NULL when read in place */
    } cases[] = {
        {"", "", "cudaMemsetAsync(full, 0, 4, s);", NULL},
        {"", "", "CHECK(cudaMemsetAsync(full, 0, 4, s));", NULL},
        {"", "k<<<1, 32, 0, s>>>(full, n);", "", "the body touches its receive buffer before the call"},
        {"", "", "float *w = full; k<<<1, 32, 0, s>>>(w, n);",
         "the body reaches its receive buffer through another name"},
        {"", "", "k<<<1, 32, 0, s>>>(net.full, n);",
         "the body reaches its receive buffer through another name"},
        /* the lambda holds the buffer: another name */
        {"", "", "auto g = [&] { k<<<1, 32, 0, s>>>(full, n); };",
         "the body reaches its receive buffer through another name"},
        /* one made before the loop, called in the body */
        {"auto g = [=] { k<<<1, 32, 0, s>>>(full, n); };", "", "g();",
         "the body reaches its receive buffer through another name"},
        /* a copy declared with a braced initialiser */
        {"float *w{full};", "", "k<<<1, 32, 0, s>>>(w, n);",
         "the body reaches its receive buffer through another name"},
        {"", "", "KF(n);", "a macro's text names it"},
        {"float *spare = nullptr;", "", "SWAP(full, spare);",
         "a macro takes it as an argument that it sets or pastes"},
        {"", "", "k<<<1, 32, 0, s>>>(&full[1], n);", "the body takes its address, sets it or declares"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, size_t n);\n"
            "#define KF(n) k<<<1, 32, 0, s>>>(full, n)\n"
            "#define SWAP(a, b) do { float *t_ = (a); (a) = (b); (b) = t_; } while (0)\n"
            "#define CHECK(x) do { if ((x) != cudaSuccess) fprintf(stderr, \"%%s\\n\", #x); } while (0)\n"
            "struct Net { float *full; float *act; };\n"
            "static void fwd(float **shard, float *full, Net &net, size_t n, int L, ncclComm_t c,\n"
            "                cudaStream_t s) {\n"
            "  %s\n"
            "  for (int l = 0; l < L; l++) {\n"
            "    %s\n"
            "    ncclAllGather(shard[l], full, n, ncclFloat, c, s);\n"
            "    k<<<1, 32, 0, s>>>(full, n);\n"
            "    %s\n"
            "  }\n"
            "}\n"
            "int main() { float *sh[4]; Net net; ncclComm_t c; cudaStream_t s;\n"
            "  for (int i = 0; i < 4; i++) cudaMalloc(&sh[i], 64);\n"
            "  cudaMalloc(&net.full, 128); cudaMalloc(&net.act, 64);\n"
            "  fwd(sh, net.full, net, 16, 4, c, s); return 0; }\n",
            cases[i].pre, cases[i].before, cases[i].after);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        char *want = cases[i].why ? cuco_sprintf("(not read in place: %s", cases[i].why)
                                  : cuco_strdup("which the rest of the next iteration's body "
                                                "reads in place (cuco_tx::prefetched;");
        assert_non_null(want);
        if (!tx_has_schedule_note(&r.notes, 12, want))
            fail_msg("case %zu: no note '%s' at line 12", i, want);
        int reads = r.program && strstr(r.program, "k<<<1, 32, 0, s>>>(cuco_tx::prefetched(0, "
                                                   "full), n);") &&
                    strstr(r.program, ": 0, CUCO_PREF_0 > 1), shard[l], full, n,") &&
                    strstr(r.program, "  } cuco_tx::prefetch_settle(0, CUCO_PREF_0);");
        if (reads != !cases[i].why)
            fail_msg("case %zu: reads in place %s", i, reads ? "written" : "missing");
        free(want);
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* the call's own statement names the buffer beside the call */
    static const char *const comma =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static void fwd(float **shard, float *full, size_t n, int L, ncclComm_t c,\n"
        "                cudaStream_t s) {\n"
        "  for (int l = 0; l < L; l++) {\n"
        "    ncclAllGather(shard[l], full, n, ncclFloat, c, s), k<<<1, 32, 0, s>>>(full, n);\n"
        "    k<<<1, 32, 0, s>>>(full, n);\n"
        "  }\n"
        "}\n"
        "int main() { float *sh[4], *full; ncclComm_t c; cudaStream_t s;\n"
        "  for (int i = 0; i < 4; i++) cudaMalloc(&sh[i], 64);\n"
        "  cudaMalloc(&full, 128); fwd(sh, full, 16, 4, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(comma, &r);
    assert_true(tx_has_schedule_note(&r.notes, 6, "(not read in place: the call's own statement names"));
    assert_null(r.program ? strstr(r.program, "cuco_tx::prefetched(0, full)") : NULL);
    cuco_tx_result_free(&r);
}

/* prefetch_next through a function's calls: the gather in a per-layer
 * function, its calls in the layer loops pass their counter through
 * cuco_tx::prefetch_hint; only where nothing between two calls may touch
 * the next layer's shard */
static void test_scan_prefetch_caller(void **state)
{
    (void)state;
    static const struct {
        const char *fn_pre, *fn_post, *loops, *why; /* why: NULL when it applies */
    } cases[] = {
        {"", "k<<<1, 32, 0, m->s>>>(m->bias[l], m->n);",
         "for (int l = 0; l < m->L; l++)\n    if (layer(m, l, x) != 0)\n      return -1;", NULL},
        {"", "", "for (int l = 0; l < m->L; ++l) {\n    k<<<1, 32, 0, m->s>>>(x, m->n);\n"
                 "    layer(m, l, x);\n  }", NULL},
        /* forward and backward: each call passes its own next counter */
        {"", "", "for (int l = 0; l < m->L; l++) layer(m, l, x);\n"
                 "  for (int l = m->L - 1; l >= 0; l--) layer(m, l, x);", NULL},
        {"", "", "for (int l = 0; l < m->L; ++l) {\n    layer(m, l, x);\n"
                 "    k<<<1, 32, 0, m->s>>>(m->shard[l + 1], m->n);\n  }",
         "of its function's call at line 16 may touch its send buffer"},
        {"", "k<<<1, 32, 0, m->s>>>(m->shard[l], m->n);",
         "for (int l = 0; l < m->L; l++) layer(m, l, x);", "of its function layer may touch"},
        {"", "", "for (int l = 0; l < m->L; l++) layer(m, l + 1, x);",
         "passes its loop's counter"},
        {"", "", "layer(m, 0, x);", "is no statement of a counted `for` loop's body"},
        {"if (!x) return -1;", "", "for (int l = 0; l < m->L; l++) layer(m, l, x);",
         "its function may leave before the call"},
        {"", "", "for (int l = 0; l < m->L; l++) {\n    layer(m, l, x);\n    if (m->n == 0) break;\n  }",
         "may leave an iteration early"},
        /* the statement of the call does more: another call that writes
         * the next shard, a parameter of the function given the next shard,
         * a return whose value writes it */
        {"", "", "for (int l = 0; l < m->L; l++)\n    if (layer(m, l, x) != 0 || bump(m, l) != 0)\n"
                 "      return -1;",
         "the statement of its function's call at line 16 calls more"},
        {"", "", "for (int l = 0; l < m->L; l++) layer(m, l, m->shard[l + 1]);",
         "names or passes what may hold its send buffer"},
        {"", "if (m->n == 0) return bump(m, l);", "for (int l = 0; l < m->L; l++) layer(m, l, x);",
         "of its function layer may touch"},
        {"", "return cudaStreamSynchronize(m->s) == cudaSuccess ? 0 : -1;",
         "for (int l = 0; l < m->L; l++) layer(m, l, x);", "(or it synchronises"},
        {"", "", "for (int l = 0; l < m->L; ++l) {\n    layer(m, l, x);\n    bump(m, l);\n  }",
         "may touch its send buffer"},
        /* the bias table copied out, and an element set through the copy */
        {"", "k<<<1, 32, 0, m->s>>>(m->bias[l], m->n);",
         "float **a = m->bias;\n  a[1] = m->shard[2];\n"
         "  for (int l = 0; l < m->L; l++) layer(m, l, x);",
         "of its function layer may touch"},
        /* a call inside an argument of the call runs in the loop's body */
        {"", "", "for (int l = 0; l < m->L; l++) layer(m, l, x + bump(m, l));",
         "the statement of its function's call at line 15 calls more"},
        /* counters narrower than int, in the header or declared before */
        {"", "", "for (unsigned short l = m->L - 1; l < m->L; l--) layer(m, l, x);",
         "and an i no narrower than int"},
        {"", "", "unsigned char l;\n  for (l = 0; l < m->L; l++) layer(m, l, x);",
         "and an i no narrower than int"},
        {"", "", "int l;\n  for (l = 0; l < m->L; l++) layer(m, l, x);", NULL},
        /* the bias table handed whole to a call, which may copy the shards'
         * pointers into it: its elements are no longer apart */
        {"", "k<<<1, 32, 0, m->s>>>(m->bias[l], m->n);",
         "cudaMemcpy(m->bias, m->shard, 4 * sizeof(float *), cudaMemcpyHostToHost);\n"
         "  for (int l = 0; l < m->L; l++) layer(m, l, x);",
         "of its function layer may touch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, size_t n);\n"
            "struct M { float **shard; float **bias; float *full; size_t n; int L;\n"
            "           ncclComm_t c; cudaStream_t s; };\n"
            "static int bump(M *m, int l) { k<<<1, 32, 0, m->s>>>(m->shard[l + 1], m->n); return 0; }\n"
            "static int layer(M *m, int l, float *x) {\n"
            "  %s\n"
            "  ncclAllGather(m->shard[l], m->full, m->n, ncclFloat, m->c, m->s);\n"
            "  k<<<1, 32, 0, m->s>>>(m->full, m->n);\n"
            "  k<<<1, 32, 0, m->s>>>(x, m->n);\n"
            "  %s\n"
            "  return 0;\n"
            "}\n"
            "static int forward(M *m, float *x) {\n"
            "  %s\n"
            "  return 0;\n"
            "}\n"
            "int main() { M m; float *x;\n"
            "  m.shard = (float **)calloc(4, sizeof(float *));\n"
            "  m.bias = (float **)calloc(4, sizeof(float *));\n"
            "  if (!m.shard || m.bias == NULL) return 1;\n"
            "  for (int i = 0; i < 4; i++) { cudaMalloc(&m.shard[i], 64); cudaMalloc(&m.bias[i], 64); }\n"
            "  cudaMalloc(&m.full, 128); cudaMalloc(&x, 64);\n"
            "  return forward(&m, x); }\n",
            cases[i].fn_pre, cases[i].fn_post, cases[i].loops);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        const char *want = cases[i].why ? cases[i].why
                                        : "prefetch_next: ncclAllGather at line 8 gathers the "
                                          "input of its function layer's next call";
        if (!tx_has_schedule_note(&r.notes, 8, want))
            fail_msg("case %zu: no note '%s' at line 8", i, want);
        int edited = r.program &&
                     strstr(r.program, "cuco_tx::prefetch_site(0, CUCO_PREF_0, "
                                       "cuco_tx::prefetch_hinted(0, l) ? (const void "
                                       "*)(m->shard[cuco_tx::prefetch_hint_next(0)]) : nullptr, "
                                       "cuco_tx::prefetch_hinted(0, l) ? (size_t)(m->n) : 0, 0), ") &&
                     strstr(r.program, "cuco_tx::prefetch_drop(0, CUCO_PREF_0);\n  for (");
        if (edited != !cases[i].why)
            fail_msg("case %zu: prefetch_site %s", i, edited ? "added" : "missing");
        const char *hints[] = {
            "layer(m, cuco_tx::prefetch_hint(0, CUCO_PREF_0, ((l + 1) < m->L), (l + 1), l), x)",
            "layer(m, cuco_tx::prefetch_hint(0, CUCO_PREF_0, ((l - 1) >= 0), (l - 1), l), x)"};
        if (!cases[i].why && !strstr(r.program, hints[0]))
            fail_msg("case %zu: no hint '%s'", i, hints[0]);
        if (i == 2 && !strstr(r.program, hints[1]))
            fail_msg("case %zu: no hint '%s'", i, hints[1]);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

static void test_scan_prefetch_next(void **state)
{
    (void)state;
    static const struct {
        const char *header, *call, *after, *why; /* why: NULL when it applies */
    } cases[] = {
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", NULL},
        {"int l = 0; l < L; ++l", "ncclAllGather(lay[l].w, full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(lay[l].b, n);", NULL},
        /* the next iteration writes its own element's send member before
         * its call, after this iteration's prefetch read it */
        {"int l = 0; l < L; ++l", "ncclAllGather(lay[l].w, full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(lay[l].w, n);", "may touch its send buffer"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(shard[l + 1], n);", "may touch its send buffer"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(NEXT(l), n);", "may touch its send buffer"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "if (n == 0) break;", "may leave the iteration early"},
        {"int l = 0; l < L && !n; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", NULL},
        {"int l = 0; l < f(L); l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", "no statement of a counted `for` loop's braced body"},
        /* strided and backward loops: the next iteration is one step on */
        {"int l = 0; l < L; l += 2", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", NULL},
        {"int l = L - 1; l >= 0; l--", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", NULL},
        {"int l = L - 1; l >= 0; l -= (int)n", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", NULL},
        /* a step the body changes */
        {"int l = 0; l < L; l += n", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "n++;", "is not `i = ...; COND; STEP`"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, cs[l], s);",
         "k<<<1, 32, 0, s>>>(act, n);", "communicator or stream changes with its loop's counter"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[0], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", "does not change with its loop's counter"},
        {"int l = 0; l < L; l++", "n && ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "k<<<1, 32, 0, s>>>(act, n);", "does not run in every iteration"},
        /* a collective on other buffers runs beside the prefetch; one on
         * the send buffer, or through a helper or MPI, does not */
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "ncclAllReduce(act, act, n, ncclFloat, ncclSum, c, s);", NULL},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "CHECK(ncclAllReduce(act, act, n, ncclFloat, ncclSum, c, s));", NULL},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "ncclAllReduce(shard[l + 1], act, n, ncclFloat, ncclSum, c, s);",
         "may touch its send buffer"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "reduce_all(act, n, c, s);", "is more than NCCL calls that move data"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "MPI_Barrier(MPI_COMM_WORLD);", "is more than NCCL calls that move data"},
        {"int l = 0; l < L; l++", "ncclAllGather(shard[l], full, n, ncclFloat, c, s);",
         "if (cudaStreamSynchronize(s) == 0) ncclAllReduce(act, act, n, ncclFloat, ncclSum, c, s);",
         "(or it synchronises"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, size_t n);\n"
            "#define NEXT(l) shard[(l) + 1]\n"
            "#define CHECK(x) do { if ((x) != ncclSuccess) return; } while (0)\n"
            "struct Lay { float *w; float *b; };\n"
            "static void reduce_all(float *x, size_t n, ncclComm_t c, cudaStream_t s) {\n"
            "  ncclAllReduce(x, x, n, ncclFloat, ncclSum, c, s);\n"
            "}\n"
            "static void fwd(float **shard, Lay *lay, float *full, float *act, size_t n, int L,\n"
            "                ncclComm_t c, ncclComm_t *cs, cudaStream_t s) {\n"
            "  for (%s) {\n"
            "    %s\n"
            "    k<<<1, 32, 0, s>>>(full, n);\n"
            "    %s\n"
            "  }\n"
            "}\n"
            "int main() { float *sh[4], *full, *act; Lay lay[4]; ncclComm_t c; cudaStream_t s;\n"
            "  for (int i = 0; i < 4; i++) { cudaMalloc(&sh[i], 64); cudaMalloc(&lay[i].w, 64);\n"
            "    cudaMalloc(&lay[i].b, 64); }\n"
            "  cudaMalloc(&full, 128); cudaMalloc(&act, 64);\n"
            "  fwd(sh, lay, full, act, 16, 4, c, &c, s); return 0; }\n",
            cases[i].header, cases[i].call, cases[i].after);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        const char *want = cases[i].why ? cases[i].why : "prefetch_next: ncclAllGather at line 12";
        if (!tx_has_schedule_note(&r.notes, 12, want))
            fail_msg("case %zu: no note '%s' at line 12", i, want);
        int edited = r.program && strstr(r.program, "cuco_tx::prefetch_site(0, CUCO_PREF_0, ") &&
                     strstr(r.program, "#define CUCO_PREF_0 ");
        if (edited != !cases[i].why)
            fail_msg("case %zu: prefetch_site %s", i, edited ? "added" : "missing");
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* the next iteration's arguments: the counter one up, under the header's
     * condition with the counter one up */
    static const char *const one =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main() { float *sh[4], *full, *act; ncclComm_t c; cudaStream_t s; int L = 4;\n"
        "  for (int i = 0; i < 4; i++) cudaMalloc(&sh[i], 64);\n"
        "  cudaMalloc(&full, 128); cudaMalloc(&act, 64);\n"
        "  for (int l = 0; l < L; l++) {\n"
        "    ncclAllGather(sh[l], full, 16, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(full, 16);\n"
        "  }\n"
        "  return 0; }\n";
    cuco_tx_result r;
    tx_transform(one, &r);
    assert_non_null(strstr(r.program, "cuco_tx::prefetch_site(0, CUCO_PREF_0, ((l + 1) < L) ? "
                                      "(const void *)(sh[(l + 1)]) : nullptr, ((l + 1) < L) ? "
                                      "(size_t)(16) : 0, CUCO_PREF_0 > 1), sh[l], full, 16"));
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "early_start_late_wait does not apply to "
                                     "ncclAllGather: the call is prefetch_next's"));
    /* a prefetch an earlier run of the loop left is dropped at its entry */
    assert_non_null(strstr(r.program, "  cuco_tx::prefetch_drop(0, CUCO_PREF_0);\n"
                                      "  for (int l = 0; l < L; l++) {"));
    cuco_tx_result_free(&r);
    /* a backward loop: the next iteration's counter is one down, under the
     * header's condition for it */
    char *back = cuco_strdup(one);
    assert_non_null(back);
    char *hdr = strstr(back, "for (int l = 0; l < L; l++)");
    assert_non_null(hdr);
    memcpy(hdr, "for (int l = L; --l >= 0;)", strlen("for (int l = L; --l >= 0;)"));
    memset(hdr + strlen("for (int l = L; --l >= 0;)"), ' ',
           strlen("for (int l = 0; l < L; l++)") - strlen("for (int l = L; --l >= 0;)"));
    tx_transform(back, &r);
    /* a condition that steps the counter is no header schedule (a) reads */
    assert_null(r.program ? strstr(r.program, "cuco_tx::prefetch_site(0") : NULL);
    cuco_tx_result_free(&r);
    free(back);
    static const char *const down =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main() { float *sh[4], *full; ncclComm_t c; cudaStream_t s; int L = 4;\n"
        "  for (int i = 0; i < 4; i++) cudaMalloc(&sh[i], 64);\n"
        "  cudaMalloc(&full, 128);\n"
        "  for (int l = L - 1; l >= 0; --l) {\n"
        "    ncclAllGather(sh[l], full, 16, ncclFloat, c, s);\n"
        "    k<<<1, 32, 0, s>>>(full, 16);\n"
        "  }\n"
        "  return 0; }\n";
    tx_transform(down, &r);
    assert_non_null(strstr(r.program, "cuco_tx::prefetch_site(0, CUCO_PREF_0, ((l - 1) >= 0) ? "
                                      "(const void *)(sh[(l - 1)]) : nullptr, ((l - 1) >= 0) ? "
                                      "(size_t)(16) : 0, CUCO_PREF_0 > 1), sh[l], full, 16"));
    cuco_tx_result_free(&r);
}

/* Where the edits land in the text: a wait before a statement that a
 * #pragma binds to goes before the pragma (and the EVOLVE-BLOCK around it
 * too); the glue goes after the includes that come before the first code,
 * after the #endif of an include inside a conditional, and before code
 * that an include after it would follow. */
static void test_edit_places(void **state)
{
    (void)state;
    static const char *const pragma =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main() { float *x, *o; ncclComm_t c; cudaStream_t s;\n"
        "  cudaMalloc(&x, 64); cudaMalloc(&o, 64);\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "#pragma omp parallel for\n"
        "  for (int i = 0; i < 4; i++)\n"
        "    k<<<1, 32, 0, s>>>(x + i, 1);\n"
        "  return 0; }\n";
    cuco_tx_result r;
    tx_transform(pragma, &r);
    const char *w = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    const char *p = strstr(r.program, "#pragma omp parallel for\n  for");
    assert_non_null(w);
    assert_non_null(p);
    assert_true(w < p);
    cuco_tx_result_free(&r);
    static const char *const late =
        "#include <nccl.h>\n"
        "#ifdef USE_NVTX\n"
        "#include <nvtx3/nvToolsExt.h>\n"
        "#endif\n"
        "static void sum(float *x, ncclComm_t c, cudaStream_t s) {\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s); }\n"
        "#include <vector>\n"
        "int main() { float *x; ncclComm_t c; cudaStream_t s; cudaMalloc(&x, 64);\n"
        "  sum(x, c, s); return 0; }\n";
    tx_transform(late, &r);
    const char *glue = strstr(r.program, "namespace cuco_tx");
    const char *endif = strstr(r.program, "#endif\n");
    const char *code = strstr(r.program, "static void sum(");
    assert_non_null(glue);
    assert_non_null(endif);
    assert_non_null(code);
    assert_true(endif < glue && glue < code);
    cuco_tx_result_free(&r);
}

/* A pointer parameter may be a global its callers set from the argument
 * they pass: a later statement naming that global touches the buffer. */
static void test_scan_param_globals(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static float *g_grad;\n"
        "static void step(float *grad, float *o, ncclComm_t c, cudaStream_t s) {\n"
        "  ncclAllReduce(grad, grad, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  k<<<1, 32, 0, s>>>(g_grad, 4);\n"
        "}\n"
        "int main() { float *x, *o; ncclComm_t c; cudaStream_t s;\n"
        "  cudaMalloc(&x, 64); cudaMalloc(&o, 64); g_grad = x;\n"
        "  step(x, o, c, s); return 0; }\n";
    assert_true(schedule_note_of(prog, 5, "wait moved before the statement at line 7"));
    /* two callers up: main passes the global to run, which passes it on */
    static const char *const twice =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static float *g_a;\n"
        "static void step(float *grad, float *o, ncclComm_t c, cudaStream_t s) {\n"
        "  ncclAllReduce(grad, grad, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  k<<<1, 32, 0, s>>>(g_a, 4);\n"
        "}\n"
        "static void run(float *p, float *o, ncclComm_t c, cudaStream_t s) { step(p, o, c, s); }\n"
        "int main() { float *o; ncclComm_t c; cudaStream_t s;\n"
        "  cudaMalloc(&g_a, 64); cudaMalloc(&o, 64); run(g_a, o, c, s); return 0; }\n";
    assert_true(schedule_note_of(twice, 5, "wait moved before the statement at line 7"));
    /* a struct parameter that holds the buffer parameter: its caller passes
     * net.full and net, so a read of net.full reads the gathered buffer */
    static const char *const holder =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "struct Net { float *full; float *x; };\n"
        "static void step(const float *sh, float *full, const Net &net, ncclComm_t c,\n"
        "                 cudaStream_t s, float *o) {\n"
        "  ncclAllGather(sh, full, 4, ncclFloat, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  k<<<1, 32, 0, s>>>(net.full, 4);\n"
        "  k<<<1, 32, 0, s>>>(full, 4);\n"
        "}\n"
        "int main() { float *sh, *o; Net net; ncclComm_t c; cudaStream_t s;\n"
        "  cudaMalloc(&sh, 64); cudaMalloc(&o, 64); cudaMalloc(&net.full, 128);\n"
        "  step(sh, net.full, net, c, s, o); return 0; }\n";
    assert_true(schedule_note_of(holder, 6, "wait moved before the statement at line 8"));
    /* a capture begun through the driver API turns the schedules off */
    static const char *const captured =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main() {\n"
        "  float *x, *o; ncclComm_t c; cudaStream_t s; cudaGraph_t g;\n"
        "  cudaMalloc(&x, 64); cudaMalloc(&o, 64);\n"
        "  cuStreamBeginCapture((CUstream)s, CU_STREAM_CAPTURE_MODE_GLOBAL);\n"
        "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  k<<<1, 32, 0, s>>>(x, 4);\n"
        "  cuStreamEndCapture((CUstream)s, (CUgraph *)&g);\n"
        "  return 0;\n"
        "}\n";
    assert_true(schedule_note_of(captured, 7, "the program captures streams into CUDA graphs"));
    /* a struct of pointers passed by value may hold the global */
    static const char *const table =
        "#include <nccl.h>\n"
        "struct Ptrs { float *p[2]; };\n"
        "__global__ void k(float *a, size_t n);\n"
        "__global__ void kp(Ptrs ps, size_t n);\n"
        "static float *g_x;\n"
        "static void step(Ptrs ps, ncclComm_t c, cudaStream_t s) {\n"
        "  float *o; cudaMalloc(&o, 64);\n"
        "  ncclAllReduce(g_x, g_x, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  kp<<<1, 32, 0, s>>>(ps, 4);\n"
        "}\n"
        "int main() {\n"
        "  Ptrs ps; ncclComm_t c; cudaStream_t s;\n"
        "  cudaMalloc(&g_x, 64);\n"
        "  ps.p[0] = g_x;\n"
        "  step(ps, c, s);\n"
        "  return 0;\n"
        "}\n";
    assert_true(schedule_note_of(table, 8, "wait moved before the statement at line 10"));
    /* a loop's macro that names another iteration's element */
    static const char *const looped =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, const float *b, size_t n);\n"
        "#define SUMMED(l) grads[(l) + 1]\n"
        "int main() { float *grads[4]; ncclComm_t c; cudaStream_t s;\n"
        "  for (int b = 0; b < 4; b++) cudaMalloc(&grads[b], 64);\n"
        "  for (int b = 2; b >= 0; --b) {\n"
        "    k<<<1, 32, 0, s>>>(grads[b], SUMMED(b), 4);\n"
        "    ncclAllReduce(grads[b], grads[b], 4, ncclFloat, ncclSum, c, s);\n"
        "  }\n"
        "  return 0; }\n";
    assert_true(schedule_note_of(looped, 8,
                                 "nor across the iterations of its loop (line 6): the "
                                 "statement at line 7 of its body may touch the buffer"));
}

/* What joins a stream or reaches a buffer out of sight: a helper that
 * records and waits on events is a synchronisation (the wait goes before
 * it); a kernel that takes a table of pointers reads every buffer; a
 * container filled with aggregates holds their values; a number parsed
 * from a string, a file-scope constant and a macro number hold no buffer */
static void test_scan_hidden_joins(void **state)
{
    (void)state;
    /* each case: declarations at file scope, locals, and the statements
     * after the call (one a line); the wait goes before the second */
    static const struct {
        const char *decls, *locals, *after;
    } cases[] = {
        /* the join in a helper */
        {"static void join(cudaStream_t a, cudaStream_t b, cudaEvent_t e) {\n"
         "  cudaEventRecord(e, b); cudaStreamWaitEvent(a, e, 0); }\n",
         "cudaStream_t t; cudaEvent_t e;",
         "k<<<1, 32, 0, s>>>(o, 4);\n  join(t, s, e);\n  k<<<1, 32, 0, t>>>(x, 4);\n"},
        /* a kernel reading through a device table of pointers */
        {"__global__ void via(float *out, float *const *tab, size_t n);\n", "float **tab;",
         "k<<<1, 32, 0, s>>>(o, 4);\n  via<<<1, 32, 0, s>>>(o, tab, 4);\n"},
        /* a kernel given a device table of structs that hold pointers */
        {"struct slot { float *p; };\n__global__ void viaslot(const struct slot *t, size_t n);\n",
         "struct slot *ds;", "k<<<1, 32, 0, s>>>(o, 4);\n  viaslot<<<1, 32, 0, s>>>(ds, 4);\n"},
        /* a call through a table of functions: it may touch anything */
        {"static void (*hooks[1])(size_t);\n", "",
         "k<<<1, 32, 0, s>>>(o, 4);\n  hooks[0](4);\n"},
        /* a lambda that captures x: calling it touches x */
        {"", "auto probe = [&](int j) { k<<<1, 32, 0, s>>>(x, (size_t)j); };",
         "k<<<1, 32, 0, s>>>(o, 4);\n  probe(0);\n"},
        /* an aggregate pushed into a vector: the vector holds x */
        {"struct B { float *g; size_t n; };\n", "std::vector<B> bs; bs.push_back(B{x, 4});",
         "k<<<1, 32, 0, s>>>(o, 4);\n  k<<<1, 32, 0, s>>>(bs[0].g, 4);\n"},
        /* a texture object made from x reads it */
        {"__global__ void lookup(cudaTextureObject_t t, float *o, size_t n);\n",
         "cudaTextureObject_t tex; cudaResourceDesc rd; rd.res.linear.devPtr = x; "
         "cudaCreateTextureObject(&tex, &rd, nullptr, nullptr);",
         "k<<<1, 32, 0, s>>>(o, 4);\n  lookup<<<1, 32, 0, s>>>(tex, o, 4);\n"},
        /* a cuSPARSE vector descriptor made from x */
        {"",
         "cusparseHandle_t h; cusparseDnVecDescr_t vx, vy; cusparseSpMatDescr_t A; "
         "cusparseCreateDnVec(&vx, 4, x, CUDA_R_32F);",
         "k<<<1, 32, 0, s>>>(o, 4);\n  cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, nullptr, "
         "A, "
         "vx, nullptr, vy, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, nullptr);\n"},
        /* the driver API's synchronisation */
        {"", "", "k<<<1, 32, 0, s>>>(o, 4);\n  cuStreamSynchronize((CUstream)s);\n"},
        /* a synchronisation through a function pointer */
        {"static cudaError_t (*sync_fn)(cudaStream_t) = cudaStreamSynchronize;\n", "",
         "k<<<1, 32, 0, s>>>(o, 4);\n  sync_fn(s);\n"},
        /* a helper that issues another collective (two device collectives
         * of one communicator must not run at once) */
        {"static void sum(float *b, ncclComm_t c, cudaStream_t t) {\n"
         "  ncclAllReduce(b, b, 4, ncclFloat, ncclSum, c, t); }\n",
         "", "k<<<1, 32, 0, s>>>(o, 4);\n  sum(o, c, s);\n"},
        /* a constructor that records an event */
        {"struct Work { cudaEvent_t e; Work(cudaStream_t t) { cudaEventRecord(e, t); } };\n", "",
         "k<<<1, 32, 0, s>>>(o, 4);\n  Work w(s);\n"},
        /* a macro that calls a function of the file */
        {"static float *g;\nstatic void smooth(void) { k<<<1, 32, 0, 0>>>(g, 4); }\n"
         "#define SMOOTH() smooth()\n",
         "g = x;", "k<<<1, 32, 0, s>>>(o, 4);\n  SMOOTH();\n"},
        /* a macro defined twice: which one is compiled is not known */
        {"#define POST() k<<<1, 32, 0, s>>>(o, 4)\n#undef POST\n"
         "#define POST() k<<<1, 32, 0, s>>>(x, 4)\n",
         "", "k<<<1, 32, 0, s>>>(o, 4);\n  POST();\n"},
        /* a macro that synchronises */
        {"#define SYNC() cudaStreamSynchronize(s)\n", "", "k<<<1, 32, 0, s>>>(o, 4);\n  SYNC();\n"},
        /* x captured by a hook that a helper keeps, and the hooks run */
        {"#include <functional>\nstatic std::vector<std::function<void()>> hooks;\n"
         "static void reg(std::function<void()> f) { hooks.push_back(f); }\n"
         "static void run_hooks() { for (auto &h : hooks) h(); }\n",
         "reg([=] { k<<<1, 32, 0, s>>>(x, 4); });", "k<<<1, 32, 0, s>>>(o, 4);\n  run_hooks();\n"},
        /* x handed to a function defined elsewhere, which may keep it */
        {"void keep(float *p);\nvoid use_kept(void);\n", "keep(x);",
         "k<<<1, 32, 0, s>>>(o, 4);\n  use_kept();\n"},
        /* x kept by a setter in a global struct that a kernel takes */
        {"struct Args { float *p; };\nstatic Args g_args;\n"
         "static void setup(float *p) { g_args.p = p; }\n__global__ void use(Args a);\n",
         "setup(x);", "k<<<1, 32, 0, s>>>(o, 4);\n  use<<<1, 32, 0, s>>>(g_args);\n"},
        /* a struct of values in device memory: its member's address is in x */
        {"struct Metrics { float loss; float tokens; };\n", "Metrics *m = (Metrics *)x;",
         "k<<<1, 32, 0, s>>>(o, 4);\n  cudaMemsetAsync(&m->tokens, 0, 4, s);\n"},
        /* digit separators in a macro do not hide the rest of its text */
        {"#define ZERO() k<<<1'024 / 256, 32, 0, s>>>(x, 1'024)\n", "",
         "k<<<1, 32, 0, s>>>(o, 4);\n  ZERO();\n"},
        /* x kept through a local of the helper it is handed to */
        {"void reg_ext(float *p);\nvoid run_ext(void);\n"
         "static void enq(float *p) { float *q; q = p; reg_ext(q); }\n",
         "enq(x);", "k<<<1, 32, 0, s>>>(o, 4);\n  run_ext();\n"},
        /* a kernel given an untyped pointer, which it may cast to a table */
        {"__global__ void viavoid(const void *ctx);\n", "void *ctx;",
         "k<<<1, 32, 0, s>>>(o, 4);\n  viavoid<<<1, 32, 0, s>>>(ctx);\n"},
        /* a batched GEMM: device arrays of pointers */
        {"", "cublasHandle_t h; float **tab; const float one = 1;",
         "k<<<1, 32, 0, s>>>(o, 4);\n  cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, "
         "&one, tab, 2, tab, 2, &one, tab, 2, 1);\n"},
        /* a device variable reached through a template device function */
        {"__device__ float *g_view;\n"
         "template <typename T> __device__ T &at(size_t i) { return ((T *)g_view)[i]; }\n"
         "__global__ void clip(size_t n) { at<float>(0) = 1.0f; }\n"
         "__global__ void k2(float *a, size_t n) { a[0] = 0.0f; }\n",
         "", "k2<<<1, 32, 0, s>>>(o, 4);\n  clip<<<1, 32, 0, s>>>(4);\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf("#include <nccl.h>\n"
                                  "#include <vector>\n"
                                  "__global__ void k(float *a, size_t n);\n"
                                  "%s"
                                  "int main(int argc, char **argv) {\n"
                                  "  ncclComm_t c; cudaStream_t s; float *x, *o; %s\n"
                                  "  cudaMalloc(&x, 64); cudaMalloc(&o, 64);\n"
                                  "  ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s);\n"
                                  "  %s"
                                  "  return 0;\n"
                                  "}\n",
                                  cases[i].decls, cases[i].locals, cases[i].after);
        assert_non_null(prog);
        int lines = 0; /* the declarations' lines */
        for (const char *q = cases[i].decls; *q; q++)
            lines += *q == '\n';
        char *note = cuco_sprintf("wait moved before the statement at line %d (1 independent "
                                  "launch",
                                  9 + lines);
        assert_non_null(note);
        if (!schedule_note_of(prog, 7 + lines, note))
            fail_msg("case %zu: no note '%s' at line %d", i, note, 7 + lines);
        free(note);
        free(prog);
    }
    /* later declarators of one declaration are locals too */
    /* (not a pointer parameter's, as a buffer that is no local would be: a
     * size read from argv would then join it) */
    static const char *const later =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main(int argc, char **argv) {\n"
        "  ncclComm_t c; cudaStream_t s; float *p1, *g, *o2; size_t n = 4;\n"
        "  n = strlen(argv[1]); n += (size_t)argc;\n"
        "  cudaMalloc(&g, 64); cudaMalloc(&o2, 64); p1 = 0;\n"
        "  ncclAllReduce(g, g, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o2, n);\n"
        "  k<<<1, 32, 0, s>>>(g, 4);\n"
        "  return 0; }\n";
    assert_true(schedule_note_of(later, 7, "wait moved before the statement at line 9"));
    /* a wrapper that sets its buffer parameter takes no waits in its
     * callers: their argument is not what it reduces */
    static const char *const setparam =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static float *g_grad;\n"
        "static void sum(float *buf, ncclComm_t c, cudaStream_t s) {\n"
        "  if (!buf) buf = g_grad;\n"
        "  ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, c, s);\n"
        "}\n"
        "int main() { ncclComm_t c; cudaStream_t s; float *o;\n"
        "  cudaMalloc(&o, 64); cudaMalloc(&g_grad, 64);\n"
        "  sum(0, c, s);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "  k<<<1, 32, 0, s>>>(g_grad, 4);\n"
        "  return 0; }\n";
    assert_true(schedule_note_of(setparam, 6, "its buffer parameter is set in its function"));
    /* two pointer parameters that the caller's own caller passes the same
     * buffer for: they may be one buffer */
    static const char *const chain =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static void inner(float *g, float *x, float *o, ncclComm_t c, cudaStream_t s) {\n"
        "  ncclAllReduce(g, g, 4, ncclFloat, ncclSum, c, s);\n"
        "  k<<<1, 32, 0, s>>>(x, 4);\n"
        "  k<<<1, 32, 0, s>>>(o, 4);\n"
        "}\n"
        "static void outer(float *g, float *x, float *o, ncclComm_t c, cudaStream_t s) {\n"
        "  inner(g, x, o, c, s);\n"
        "}\n"
        "int main() { ncclComm_t c; cudaStream_t s; float *a, *o; cudaMalloc(&a, 64);\n"
        "  cudaMalloc(&o, 64); outer(a, a, o, c, s); return 0; }\n";
    assert_true(schedule_note_of(chain, 4, "no independent work between the call and its first "
                                           "consumer (line 5)"));
    /* a class whose constructor fills its buckets with views of one flat
     * buffer (in another function than the collective's), and a product
     * of a size and an element (`(size_t)i * bs_[i].n`, no declaration):
     * the flat buffer's clear after the loop is a consumer */
    static const char *const views =
        "#include <nccl.h>\n"
        "#include <vector>\n"
        "__global__ void k(float *a, size_t n);\n"
        "struct B { float *g; size_t n; };\n"
        "class R {\n"
        " public:\n"
        "  R() { cudaMalloc(&flat_, 256); cudaMalloc(&o_, 64);\n"
        "    for (int b = 0; b < 2; ++b) bs_.push_back(B{flat_ + b * 16, 16}); }\n"
        "  void step() {\n"
        "    for (int i = 1; i >= 0; --i) {\n"
        "      k<<<1, 32, 0, s_>>>(bs_[i].g, (size_t)i * bs_[i].n);\n"
        "      ncclAllReduce(bs_[i].g, bs_[i].g, bs_[i].n, ncclFloat, ncclSum, c_, s_);\n"
        "    }\n"
        "    k<<<1, 32, 0, s_>>>(o_, 4);\n"
        "    cudaMemsetAsync(flat_, 0, 256, s_);\n"
        "  }\n"
        " private:\n"
        "  ncclComm_t c_; cudaStream_t s_; float *flat_, *o_; std::vector<B> bs_;\n"
        "};\n"
        "int main() { R r; r.step(); return 0; }\n";
    assert_true(schedule_note_of(views, 12, "its wait moved after the loop, before the statement "
                                            "at line 15 (1 independent launch"));
    /* sizes parsed from the command line, file-scope constants and macro
     * numbers hold no pointer: they join neither argv nor the containers
     * they size */
    static const struct {
        const char *size, *use;
    } sizes[] = {{"n", "r"}, {"kL", "kL"}, {"NL", "NL"}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "#include <vector>\n"
            "__global__ void k(float *a, size_t n);\n"
            "constexpr int kL = 4;\n"
            "#define NL 2\n"
            "int main(int argc, char **argv) {\n"
            "  ncclComm_t c; cudaStream_t s; float *x, *o; int r = 1, n = 2;\n"
            "  r = atoi(argv[1]); n = std::stoi(argv[2]);\n"
            "  std::vector<float *> t(%s), u(%s);\n"
            "  cudaMalloc(&x, 64); cudaMalloc(&o, 64); t[0] = x; u[0] = o;\n"
            "  ncclAllReduce(t[0], t[0], 4, ncclFloat, ncclSum, c, s);\n"
            "  k<<<1, 32, 0, s>>>(u[0], %s);\n"
            "  k<<<1, 32, 0, s>>>(t[0], 4);\n"
            "  return 0;\n"
            "}\n",
            sizes[i].size, sizes[i].size, sizes[i].use);
        assert_non_null(prog);
        if (!schedule_note_of(prog, 11, "wait moved before the statement at line 13"))
            fail_msg("size %s: its launch taken for a consumer", sizes[i].size);
        free(prog);
    }
}

/* schedule (a) across a loop's iterations: a collective that ends its
 * loop's body on its iteration's own element starts early, the later
 * iterations run beside it, and its wait goes after the loop; any body
 * statement that may reach another iteration's element keeps the wait in
 * the body */
static void test_scan_loop_iterations(void **state)
{
    (void)state;
    static const struct {
        const char *before, *body, *note;
        int applies;
    } cases[] = {
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n);",
         "beside the later iterations of its loop (line 6: 1 independent launch each), its wait "
         "moved after the loop, before the statement at line 11 (1 independent launch in between)",
         1},
        {"", "k<<<1, 32, 0, s>>>(g[b + 1], act, n);",
         "nor across the iterations of its loop (line 6): the statement at line 7 of its body may "
         "touch the buffer",
         0},
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n); g[b] = act;", "the statement at line 7", 0},
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n); cudaStreamSynchronize(s);",
         "the statement at line 7", 0},
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n); if (n > 4) return;", "the statement at line 7", 0},
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n); if (n > 4) break;", "its wait moved after the loop",
         1},
        {"", "k<<<1, 32, 0, s>>>(g[b], act, n); b -= 0;", "the body sets the loop's variable", 0},
        {"", "float *x = g[b]; k<<<1, 32, 0, s>>>(x, act, n);", "the statement at line 7", 0},
        {"ncclGroupStart();", "k<<<1, 32, 0, s>>>(g[b], act, n);",
         "an NCCL group is open around the loop", 0},
        {"", "size_t m = n; k<<<1, 32, 0, s>>>(g[b], act, m);", "its wait moved after the loop",
         1},
        {"", "", "its body launches no other work", 0},
        {"", "k<<<1, 32, 0, (cudaStream_t)1>>>(g[b], act, n);",
         "its body launches on another stream than the call's", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, float *b, size_t n);\n"
            "static void step(float **g, float *act, float *in, size_t n, ncclComm_t c,\n"
            "                 cudaStream_t s)\n"
            "{\n"
            "    %s for (int b = 3; b >= 0; --b) {\n"
            "        %s\n"
            "        ncclAllReduce(g[b], g[b], n, ncclFloat, ncclSum, c, s);\n"
            "    }\n"
            "    k<<<1, 32, 0, s>>>(in, act, n);\n"
            "    k<<<1, 32, 0, s>>>(g[0], act, n);\n"
            "}\n"
            "int main() { float *g[4], *a, *i; for (int b = 0; b < 4; b++) cudaMalloc(&g[b], 64);\n"
            "    cudaMalloc(&a, 64); cudaMalloc(&i, 64); step(g, a, i, 16, (ncclComm_t)0, "
            "(cudaStream_t)0); return 0; }\n",
            cases[i].before, cases[i].body);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        if (!tx_has_schedule_note(&r.notes, 8, cases[i].note))
            fail_msg("case %zu: no note '%s' at line 8", i, cases[i].note);
        assert_int_equal(strstr(r.program, "cuco_tx::loop_guard(0, CUCO_EARLY_0, g[b], g[b], n, "
                                           "ncclFloat, c, 0, 0);\n        ") != NULL,
                         cases[i].applies);
        assert_int_equal(strstr(r.program, "    cuco_tx::early_wait(0, CUCO_EARLY_0);\n"
                                           "    k<<<1, 32, 0, s>>>(g[0], act, n);") != NULL,
                         cases[i].applies);
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* a range-for over structs, launches through a lambda, a stream of
     * the iteration's own */
    static const struct {
        const char *stream, *note;
        int applies;
    } ranges[] = {
        {"s", "beside the later iterations of its loop (line 10: 1 independent launch each)", 1},
        {"x.s", "its stream names what the loop declares or sets", 0},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "#include <vector>\n"
            "__global__ void k(float *a, size_t n);\n"
            "struct Bucket { float *grad; size_t n; cudaStream_t s; };\n"
            "static void step(std::vector<Bucket> &bs, float *act, ncclComm_t c, "
            "cudaStream_t s)\n"
            "{\n"
            "    auto launch = [&](auto kernel, auto... args) { kernel<<<1, 32, 0, s>>>(args...); "
            "};\n"
            "    (void)launch;\n"
            "    int b = 0;\n"
            "    for (Bucket &x : bs) {\n"
            "        launch(k, x.grad, x.n);\n"
            "        ncclAllReduce(x.grad, x.grad, x.n, ncclFloat, ncclSum, c, %s);\n"
            "        b++;\n"
            "    }\n"
            "    launch(k, act, (size_t)16);\n"
            "    for (Bucket &x : bs) launch(k, x.grad, x.n);\n"
            "}\n"
            "int main() { std::vector<Bucket> bs(2); float *a; cudaMalloc(&a, 64);\n"
            "    for (Bucket &x : bs) cudaMalloc(&x.grad, 64);\n"
            "    step(bs, a, (ncclComm_t)0, (cudaStream_t)0); return 0; }\n",
            ranges[i].stream);
        assert_non_null(prog);
        cuco_tx_result r;
        tx_transform(prog, &r);
        if (!tx_has_schedule_note(&r.notes, 12, ranges[i].note))
            fail_msg("range case %zu: no note '%s' at line 12", i, ranges[i].note);
        assert_int_equal(strstr(r.program, "cuco_tx::loop_guard(0, CUCO_EARLY_0, x.grad, x.grad, "
                                           "x.n, ncclFloat, c, 0, 0);") != NULL,
                         ranges[i].applies);
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* another member of the element: one that keeps its own allocation
     * (w) is apart from every element's gradient; one set to the previous
     * bucket's gradient (up) is not */
    static const struct {
        const char *use, *note;
    } members[] = {
        {"x.w", "beside the later iterations of its loop"},
        {"x.up", "the statement at line 8 of its body may touch the buffer"},
    };
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "#include <vector>\n"
            "__global__ void k(float *a, const float *b, size_t n);\n"
            "struct Bucket { float *grad, *w, *up; size_t n; };\n"
            "static void step(std::vector<Bucket> &bs, ncclComm_t c, cudaStream_t s)\n"
            "{\n"
            "    for (Bucket &x : bs) {\n"
            "        k<<<1, 32, 0, s>>>(x.grad, %s, x.n);\n"
            "        ncclAllReduce(x.grad, x.grad, x.n, ncclFloat, ncclSum, c, s);\n"
            "    }\n"
            "}\n"
            "int main() { std::vector<Bucket> bs(2);\n"
            "    for (Bucket &x : bs) { cudaMalloc(&x.grad, 64); cudaMalloc(&x.w, 64); }\n"
            "    bs[1].up = bs[0].grad;\n"
            "    step(bs, (ncclComm_t)0, (cudaStream_t)0); return 0; }\n",
            members[i].use);
        assert_non_null(prog);
        if (!schedule_note_of(prog, 9, members[i].note))
            fail_msg("member case %zu: no note '%s' at line 9", i, members[i].note);
        free(prog);
    }
    /* a bucket skipped with `continue` (or the loop left with `break`):
     * the wait after the loop still follows every start */
    static const char *const skip =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "int main() { float *g[4]; int frozen[4] = {0}; ncclComm_t c; cudaStream_t s;\n"
        "    for (int b = 0; b < 4; b++) cudaMalloc(&g[b], 64);\n"
        "    for (int b = 3; b >= 0; --b) {\n"
        "        if (frozen[b]) continue;\n"
        "        k<<<1, 32, 0, s>>>(g[b], 4);\n"
        "        ncclAllReduce(g[b], g[b], 4, ncclFloat, ncclSum, c, s);\n"
        "    }\n"
        "    k<<<1, 32, 0, s>>>(g[0], 4);\n"
        "    return 0; }\n";
    assert_true(schedule_note_of(skip, 8, "its wait moved after the loop, before the statement "
                                          "at line 10"));
}

static void test_scan_wrapper_callers(void **state)
{
    (void)state;
    static const struct {
        const char *more, *note;
        int applies;
    } cases[] = {
        {"", "its wait moved after each of the 1 call of reduce_tp, before the first consumer "
             "there (1 independent launch in between in all)",
         1},
        {"reduce_tp(o, 16);", "after each of the 2 calls of reduce_tp", 1},
        {"while (0) reduce_tp(o, 16);", "at its call at line 16, the call is not a statement", 0},
        {"void (*fp)(float *, size_t) = reduce_tp; (void)fp;",
         "its function is used at line 16 other than by a call", 0},
    };
    /* a framework's tensor: a getter through a cast with template
     * arguments (t.ptr<float>()) names only its object, and the model's
     * stream and communicator members (handles, taken by address in main)
     * join no buffer */
    static const char *const tensor =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, float *b);\n"
        "struct Tensor { void *data; size_t numel; template <class T> T *ptr() const { return "
        "static_cast<T *>(data); } };\n"
        "static void all_reduce_(Tensor &t, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(t.data, t.data, t.numel, ncclFloat, ncclSum, c, s);\n"
        "}\n"
        "struct Model {\n"
        "    Tensor grad, act, in;\n"
        "    ncclComm_t comm;\n"
        "    cudaStream_t stream;\n"
        "    void step()\n"
        "    {\n"
        "        k<<<1, 32, 0, stream>>>(grad.ptr<float>(), grad.ptr<float>());\n"
        "        all_reduce_(grad, comm, stream);\n"
        "        k<<<1, 32, 0, stream>>>(in.ptr<float>(), act.ptr<float>());\n"
        "        k<<<1, 32, 0, stream>>>(grad.ptr<float>(), act.ptr<float>());\n"
        "    }\n"
        "};\n"
        "int main() { Model m; cudaMalloc(&m.grad.data, 64); cudaMalloc(&m.act.data, 64); "
        "cudaMalloc(&m.in.data, 64); cudaStreamCreate(&m.stream); m.step(); return 0; }\n";
    cuco_tx_result r;
    tx_transform(tensor, &r);
    assert_true(tx_has_schedule_note(&r.notes, 6, "its wait moved after each of the 1 call of "
                                                  "all_reduce_"));
    assert_non_null(strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);\n"
                                      "        k<<<1, 32, 0, stream>>>(grad.ptr<float>()"));
    cuco_tx_result_free(&r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, size_t n);\n"
            "static cudaStream_t g_s;\n"
            "static ncclComm_t g_c;\n"
            "static void reduce_tp(float *x, size_t n)\n"
            "{\n"
            "    ncclAllReduce(x, x, n, ncclFloat, ncclSum, g_c, g_s);\n"
            "}\n"
            "static void layer(float *out, float *mask, size_t n)\n"
            "{\n"
            "    k<<<1, 32, 0, g_s>>>(out, n);\n"
            "    reduce_tp(out, n);\n"
            "    k<<<1, 32, 0, g_s>>>(mask, n);\n"
            "    k<<<1, 32, 0, g_s>>>(out, n);\n"
            "}\n"
            "int main() { float *o, *m; cudaMalloc(&o, 64); cudaMalloc(&m, 64); layer(o, m, 16); "
            "%s return 0; }\n",
            cases[i].more);
        assert_non_null(prog);
        tx_transform(prog, &r);
        if (!tx_has_schedule_note(&r.notes, 7, cases[i].note))
            fail_msg("case %zu: no note '%s' at line 7", i, cases[i].note);
        const char *wait = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);\n"
                                             "    k<<<1, 32, 0, g_s>>>(out, n);");
        assert_int_equal(wait != NULL, cases[i].applies);
        assert_int_equal(strstr(r.program, "cuco_tx::early_start(0, CUCO_EARLY_0, g_s)") != NULL,
                         cases[i].applies);
        cuco_tx_result_free(&r);
        free(prog);
    }
    /* a buffer that is a local of the wrapper: the callers have no name
     * for it */
    static const char *const local =
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "static cudaStream_t g_s;\n"
        "static ncclComm_t g_c;\n"
        "static void reduce_tp(float *x, size_t n)\n"
        "{\n"
        "    float *p = x + 0;\n"
        "    ncclAllReduce(p, p, n, ncclFloat, ncclSum, g_c, g_s);\n"
        "}\n"
        "int main() { float *o, *m; cudaMalloc(&o, 64); cudaMalloc(&m, 64); reduce_tp(o, 16);\n"
        "    k<<<1, 32, 0, g_s>>>(m, 16); k<<<1, 32, 0, g_s>>>(o, 16); return 0; }\n";
    tx_transform(local, &r);
    assert_true(tx_has_schedule_note(&r.notes, 8, "its buffer is a local of its function"));
    assert_null(strstr(r.program, "cuco_tx::early_wait(0"));
    cuco_tx_result_free(&r);
    /* a call the view does not show (in a macro's text), or one another
     * file may make (not static, no main here), refuses */
    static const char *const hidden[][2] = {
        {"#define RT(p) reduce_tp(p, 16)\nstatic void reduce_tp", "named in a macro's text"},
        {"void reduce_tp", "another file may call it"}};
    for (size_t i = 0; i < 2; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "__global__ void k(float *a, size_t n);\n"
            "static cudaStream_t g_s;\n"
            "static ncclComm_t g_c;\n"
            "%s(float *x, size_t n)\n"
            "{\n"
            "    ncclAllReduce(x, x, n, ncclFloat, ncclSum, g_c, g_s);\n"
            "}\n"
            "void layer(float *out, float *mask, size_t n)\n"
            "{\n"
            "    reduce_tp(out, n);\n"
            "    k<<<1, 32, 0, g_s>>>(mask, n);\n"
            "    k<<<1, 32, 0, g_s>>>(out, n);\n"
            "}\n"
            "int run() { float *o, *m; cudaMalloc(&o, 64); cudaMalloc(&m, 64); layer(o, m, 16); "
            "return 0; }\n",
            hidden[i][0]);
        assert_non_null(prog);
        tx_transform(prog, &r);
        if (!tx_has_schedule_note(&r.notes, 7 + (int)(i == 0), hidden[i][1]))
            fail_msg("hidden %zu: no note '%s'", i, hidden[i][1]);
        assert_null(strstr(r.program, "cuco_tx::early_wait(0"));
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* RAII buffers reached through a getter (`T *data() { return ptr_; }`):
 * the constructor's cudaMalloc becomes symmetric, the destructor's free
 * too; a launch on another object's data() is independent work (a getter
 * only names its object), also through reference parameters whose
 * function only calls getters, and objects sized by a scalar member of an
 * options struct stay apart. A getter of a static member is no getter: the
 * objects share it, and the call stays host NCCL. */
static void test_scan_raii_buffers(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "template <typename T> class DeviceBuffer {\n"
        "public:\n"
        "    explicit DeviceBuffer(size_t n) : n_(n) { cudaMalloc(&ptr_, n * sizeof(T)); }\n"
        "    ~DeviceBuffer() { cudaFree(ptr_); }\n"
        "    T *data() { return ptr_; }\n"
        "    const T *data() const { return this->ptr_; }\n"
        "    size_t size() const { return n_; }\n"
        "private:\n"
        "    T *ptr_ = nullptr;\n"
        "    size_t n_ = 0;\n"
        "};\n"
        "struct Options { size_t n = 64, m = 32; int steps = 2; };\n"
        "class Stream { public: cudaStream_t get() const { return s_; } private: cudaStream_t s_; };\n"
        "__global__ void k(const float *x, float *y, size_t n);\n"
        "static void step(ncclComm_t c, const Stream &st, DeviceBuffer<float> &grad,\n"
        "                 const DeviceBuffer<float> &in, DeviceBuffer<float> &act)\n"
        "{\n"
        "    cudaStream_t s = st.get();\n"
        "    ncclAllReduce(grad.data(), grad.data(), grad.size(), ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(in.data(), act.data(), act.size());\n"
        "    k<<<1, 32, 0, s>>>(grad.data(), act.data(), act.size());\n"
        "}\n"
        "int main() {\n"
        "    ncclComm_t c; Stream st; Options o;\n"
        "    DeviceBuffer<float> grad(o.n), in(o.m), act(o.m);\n"
        "    step(c, st, grad, in, act);\n"
        "    return 0;\n"
        "}\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&ptr_, n * sizeof(T))"));
    assert_non_null(strstr(r.program, "cuco_tx::symm_free(ptr_)"));
    assert_true(tx_has_schedule_note(&r.notes, 20, "wait moved before the statement at line 22 "
                                                   "(1 independent launch in between"));
    cuco_tx_result_free(&r);

    /* a static member: every object's data() is one pointer */
    char *shared = cuco_strdup(prog);
    assert_non_null(shared);
    char *decl = strstr(shared, "    T *ptr_ = nullptr;\n");
    assert_non_null(decl);
    memcpy(decl, "static T *ptr_;      ", strlen("static T *ptr_;      "));
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_transform_rules("p.cu", shared, &r, &e), 0);
    assert_int_equal(r.refused, 1); /* nothing left to transform */
    assert_true(tx_has_note(&r.notes, "kept", 20, "cannot find the cudaMalloc of buffer "
                                                  "'grad.data()'"));
    cuco_tx_result_free(&r);
    cuco_err_clear(&e);
    free(shared);
}

/* a later declarator of a declaration list holds what its brackets name
 * (`Span<float> p(w), q(y);`: q holds y, and a launch on q.ptr reads the
 * sum); objects declared one by one, sized by a scalar member of an options
 * struct (`DeviceBuffer<float> in(o.m);`), stay apart */
static void test_scan_declarators(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "template <typename T> struct Span { T *ptr; size_t n; Span(T *p) : ptr(p), n(0) {} };\n"
        "__global__ void k(float *a, size_t n);\n"
        "void step(float *y, float *z, float *w, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    Span<float> p(w), q(y);\n"
        "    ncclAllReduce(y, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(w, n);\n"
        "    k<<<1, 32, 0, s>>>(q.ptr, n);\n"
        "}\n"
        "int main() { float *y, *z, *w; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&y, 64); cudaMalloc(&z, 64); cudaMalloc(&w, 64);\n"
        "    step(y, z, w, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7, "wait moved before the statement at line 9"));
    cuco_tx_result_free(&r);

    /* the same with brace initialisers: std::vector<float *> p{w}, q{y} */
    char *braces = cuco_strdup(prog);
    assert_non_null(braces);
    char *decl = strstr(braces, "    Span<float> p(w), q(y);\n");
    char *use = strstr(braces, "(q.ptr, n)");
    assert_non_null(decl);
    assert_non_null(use);
    memcpy(decl, "    Span<float> p{w}, q{y};\n", strlen("    Span<float> p{w}, q{y};\n"));
    tx_transform(braces, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7, "wait moved before the statement at line 9"));
    cuco_tx_result_free(&r);
    free(braces);

    static const char *const sized =
        "#include <nccl.h>\n"
        "template <typename T> class DeviceBuffer {\n"
        "public:\n"
        "    explicit DeviceBuffer(size_t n) { cudaMalloc(&ptr_, n * sizeof(T)); }\n"
        "    T *data() { return ptr_; }\n"
        "private:\n"
        "    T *ptr_;\n"
        "};\n"
        "struct Options { size_t n = 64, m = 32; };\n"
        "__global__ void k(const float *x, float *y, size_t n);\n"
        "static void step(ncclComm_t c, cudaStream_t s, float *grad, const float *in, float *act)\n"
        "{\n"
        "    ncclAllReduce(grad, grad, 64, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(in, act, 32);\n"
        "    k<<<1, 32, 0, s>>>(grad, act, 32);\n"
        "}\n"
        "int main() {\n"
        "    ncclComm_t c; cudaStream_t s; Options o;\n"
        "    DeviceBuffer<float> grad(o.n);\n"
        "    DeviceBuffer<float> in(o.m);\n"
        "    DeviceBuffer<float> act(o.m);\n"
        "    step(c, s, grad.data(), in.data(), act.data());\n"
        "    return 0;\n"
        "}\n";
    tx_transform(sized, &r);
    assert_non_null(strstr(r.program, "cuco_tx::symm_malloc(&ptr_, n * sizeof(T))"));
    assert_true(tx_has_schedule_note(&r.notes, 13, "wait moved before the statement at line 15"));
    cuco_tx_result_free(&r);
}

/* C with global buffers: a call of a function of the file that touches no
 * memory (a grid-size helper) names only its arguments, so the launch that
 * uses it on other buffers is independent work; a helper that writes a
 * global, takes or returns a pointer, or launches is not pure, and the
 * launch calling it waits */
static void test_scan_pure_helpers(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "static ncclComm_t g_comm;\n"
        "static cudaStream_t g_stream;\n"
        "static float *d_grad, *d_act, *d_in;\n"
        "static size_t g_n = 1024;\n"
        "__global__ void fwd(const float *x, float *y, size_t n);\n"
        "static int blocks(size_t n) { int b = (int)((n + 255) / 256); return b < 1 ? 1 : b; }\n"
        "static void step(void)\n"
        "{\n"
        "    ncclAllReduce(d_grad, d_grad, g_n, ncclFloat, ncclSum, g_comm, g_stream);\n"
        "    fwd<<<blocks(g_n), 256, 0, g_stream>>>(d_in, d_act, g_n);\n"
        "    fwd<<<blocks(g_n), 256, 0, g_stream>>>(d_grad, d_act, g_n);\n"
        "}\n"
        "int main() {\n"
        "    cudaMalloc(&d_grad, 4096); cudaMalloc(&d_act, 4096); cudaMalloc(&d_in, 4096);\n"
        "    step(); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 10, "wait moved before the statement at line 12"));
    cuco_tx_result_free(&r);

    static const char *const impure[] = {
        "static int blocks(size_t n) { g_n++; return (int)((n + 255) / 256); }\n",
        "static int blocks(size_t n) { d_grad[0] = 0.0f; return (int)((n + 255) / 256); }\n",
        "static int blocks(const float *p) { return p ? 4 : 1; }\n",
        "static int blocks(size_t n) { cudaMemsetAsync(d_grad, 0, n, 0); return 4; }\n",
        "static int blocks(size_t n) { fwd<<<1, 1>>>(d_in, d_grad, n); return 4; }\n",
    };
    const char *at = strstr(prog, "static int blocks(");
    const char *after = strstr(at, "\n") + 1;
    for (size_t i = 0; i < sizeof impure / sizeof impure[0]; i++) {
        char *variant =
            cuco_sprintf("%.*s%s%s", (int)(at - prog), prog, impure[i], after);
        assert_non_null(variant);
        tx_transform(variant, &r);
        assert_true(tx_has_schedule_note(&r.notes, 10, "no independent work between the call and "
                                                       "its first consumer (line 11)"));
        cuco_tx_result_free(&r);
        free(variant);
    }
}

/* a pointer set in another function: a member a method sets from another
 * member (view_ = y_), a global a setup function sets from its parameter
 * (g_view = y + 4, which may then be any buffer); a launch reading it is a
 * consumer */
static void test_scan_set_elsewhere(void **state)
{
    (void)state;
    static const char *const progs[] = {
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "struct Layer {\n"
        "    float *x_, *y_, *view_, *other_;\n"
        "    size_t n_;\n"
        "    ncclComm_t comm_;\n"
        "    cudaStream_t s_;\n"
        "    void init() { view_ = y_; }\n"
        "    void forward()\n"
        "    {\n"
        "        ncclAllReduce(x_, y_, n_, ncclFloat, ncclSum, comm_, s_);\n"
        "        k<<<1, 32, 0, s_>>>(other_, n_);\n"
        "        k<<<1, 32, 0, s_>>>(view_, n_);\n"
        "        k<<<1, 32, 0, s_>>>(other_, n_);\n"
        "    }\n"
        "};\n"
        "int main() { Layer L;\n"
        "    cudaMalloc(&L.x_, 64); cudaMalloc(&L.y_, 64); cudaMalloc(&L.other_, 64);\n"
        "    L.init(); L.forward(); return 0; }\n"
        ,
        "#include <nccl.h>\n"
        "__global__ void k(float *a, size_t n);\n"
        "float *g_view;\n"
        "static void setup_views(float *y) { g_view = y + 4; }\n"
        "static void step(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    k<<<1, 32, 0, s>>>(g_view, n);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    setup_views(y); step(x, y, a, 16, c, s); return 0; }\n"
        };
    static const int call_line[] = {11, 7}, wait_line[] = {13, 9};
    for (int k = 0; k < 2; k++) {
        cuco_tx_result r;
        tx_transform(progs[k], &r);
        char want[64];
        snprintf(want, sizeof want, "wait moved before the statement at line %d", wait_line[k]);
        assert_true(tx_has_schedule_note(&r.notes, call_line[k], want));
        cuco_tx_result_free(&r);
    }
}

/* members of one context object: a gather of c->x into c->g does not wait
 * for a launch that names c->y and c->z only, unless the object may be reached
 * another way (an alias of it, a member of the call that escapes or is set
 * from a named value, another member handed to a function of the file), the
 * call's buffers are members of two objects, or one of them is the object
 * itself; a plain name beside the member keeps its own order */
static void test_scan_members_apart(void **state)
{
    (void)state;
    static const struct {
        const char *extra, *args, *other_launch;
        int apart;
    } cases[] = {
        {"", "c->x, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        {"", "c->x, c->g", "ctx *d = c; k<<<1, 32, 0, c->s>>>(d->y, c->z);", 0},
        {"float *view(ctx *c) { return c->g; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void reset(ctx *c, float *p) { c->g = p; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void helper(float *p);\n", "c->x, c->g", "helper(c->z);", 0},
        {"", "c->x, e->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"", "w, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        {"", "c, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"", "w, c->g", "k<<<1, 32, 0, c->s>>>(c->y, w);", 0},
        {"void use(float *p);\nvoid pass(ctx *c) { use(c->y); }\n", "w, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* several names in the buffer argument */
        {"", "c->x, c->g + 16 * (size_t)c->y[0]", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* an element's address kept, a member's member read */
        {"void keep(ctx *c) { float *p = &(c->g[0]); (void)p; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* objects of the type made whole: a brace initialiser, a constructor */
        {"ctx make(float *p) { ctx c{p, p, p, p}; return c; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* another member never made by a call (set by an initialiser the text
         * does not spell as that member) */
        {"", "c->x, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->u);", 0},
        {"", "c->x, c->g", "k<<<1, 32, 0, c->s>>>(c->g, c->z);", 0},
        /* objects of the type written whole elsewhere: a copy through a
         * pointer, an assignment, a memcpy into one, a call the file does
         * not define that may fill one, an element of an array of them */
        {"void copy(ctx *c, const ctx *d) { *c = *d; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void set(ctx *c, ctx *d) { ctx t; t = *d; (void)t; (void)c; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void load(ctx *c, const void *p) { memcpy(c, p, sizeof *c); }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void lib_fill(ctx *c);\nvoid made(ctx *c) { lib_fill(c); }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        {"void pick(ctx *all, ctx *d) { all[1] = *d; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* a scalar member set from a named value names no buffer */
        {"void set_n(ctx *c, size_t m) { c->n = m; }\n", "c->x, c->g",
         "k<<<(unsigned)c->n, 32, 0, c->s>>>(c->y, c->z);", 1},
        /* another struct's scalar member of the same name (o.y of an
         * Opt parameter) is not the ctx's y */
        {"struct Opt { int y; };\nint read_opt(const Opt &o) { int k = 0; k = o.y; return k; }\n",
         "c->x, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        {"struct Opt { float *y; };\nfloat *read_opt(const Opt &o) { float *k = 0; k = o.y; "
         "return k; }\n",
         "c->x, c->g", "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 0},
        /* a member in a launch's configuration is read (step(&c, &e, w)
         * hands step's objects nothing) */
        {"", "c->x, c->g", "k<<<c->n, 32, 0, c->s>>>(c->y, c->z);", 1},
        /* read whole: compared, sized, handed to a function of the file */
        {"int same(ctx *c, ctx *d) { return c == d || sizeof(*c) == 0; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        /* cleared by memset: no other object's pointer comes in */
        {"void clear(ctx *c) { memset(c, 0, sizeof *c); }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        /* members tested for null or compared keep their value */
        {"int ok(ctx *c) { return !c->z || c->y == NULL; }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->z);", 1},
        /* a member made by a host allocation, through a cast */
        {"void mk(ctx *c) { c->u = (float *)malloc(64); }\n", "c->x, c->g",
         "k<<<1, 32, 0, c->s>>>(c->y, c->u);", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *prog = cuco_sprintf(
            "#include <nccl.h>\n"
            "struct ctx { float *x, *y, *z, *g, *u; float **h; size_t n; ncclComm_t comm;\n"
            "             cudaStream_t s; };\n"
            "__global__ void k(float *a, float *b);\n"
            "%s"
            "static void step(ctx *c, ctx *e, float *w)\n"
            "{\n"
            "    ncclAllGather(%s, 16, ncclFloat, c->comm, c->s);\n"
            "    %s\n"
            "    k<<<1, 32, 0, c->s>>>(c->g, c->y);\n"
            "}\n"
            "int main() { ctx c, e; cudaMalloc(&c.x, 64); cudaMalloc(&c.y, 64); "
            "cudaMalloc(&c.z, 64); cudaMalloc(&c.g, 64); cudaMalloc(&e.g, 64); cudaStreamCreate(&c.s); "
            "float *w; cudaMalloc(&w, 64); step(&c, &e, w); return 0; }\n",
            cases[i].extra, cases[i].args, cases[i].other_launch);
        assert_non_null(prog);
        int call = 7;
        for (const char *q = cases[i].extra; *q; q++)
            call += *q == '\n';
        cuco_tx_result r;
        tx_transform(prog, &r);
        char *want = cases[i].apart
                         ? cuco_sprintf("wait moved before the statement at line %d", call + 2)
                         : cuco_sprintf("no independent work between the call and its first "
                                        "consumer (line %d)",
                                        call + 1);
        if (!tx_has_schedule_note(&r.notes, call, want))
            fail_msg("case %zu: no note '%s' at line %d", i, want, call);
        free(want);
        cuco_tx_result_free(&r);
        free(prog);
    }
}

/* a call's buffer that is an element of a member (`c->h[l]`, an array of
 * device buffers) counts as that member: a launch on the object's other
 * members overlaps the call */
static void test_scan_member_element(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "struct ctx { float *g, *y, *z; float **h; size_t n; ncclComm_t comm; cudaStream_t s; };\n"
        "__global__ void k(float *a, float *b);\n"
        "static void step(ctx *c, int l)\n"
        "{\n"
        "    ncclReduceScatter(c->g, c->h[l], 16, ncclFloat, ncclSum, c->comm, c->s);\n"
        "    k<<<1, 32, 0, c->s>>>(c->y, c->z);\n"
        "    k<<<1, 32, 0, c->s>>>(c->h[l], c->y);\n"
        "}\n"
        "int main() { ctx c; c.h = (float **)calloc(2, sizeof(float *));\n"
        "  for (int i = 0; i < 2; i++) cudaMalloc(&c.h[i], 64);\n"
        "  cudaMalloc(&c.g, 64); cudaMalloc(&c.y, 64); cudaMalloc(&c.z, 64);\n"
        "  cudaStreamCreate(&c.s); step(&c, 1); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 6, "wait moved before the statement at line 8"));
    cuco_tx_result_free(&r);
}

/* the same through a reference, C++ style: an all-reduce of L.part in
 * place overlaps a launch on L.x and L.db, and waits before the launch that
 * reads L.part */
static void test_scan_members_by_reference(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "struct Layer { float *x, *part, *out, *db; ncclComm_t comm; cudaStream_t s; };\n"
        "__global__ void k(float *a, float *b);\n"
        "static void step(Layer &L)\n"
        "{\n"
        "    k<<<1, 32, 0, L.s>>>(L.x, L.part);\n"
        "    ncclAllReduce(L.part, L.part, 16, ncclFloat, ncclSum, L.comm, L.s);\n"
        "    k<<<1, 32, 0, L.s>>>(L.x, L.db);\n"
        "    k<<<1, 32, 0, L.s>>>(L.part, L.out);\n"
        "}\n"
        "int main() { Layer L; cudaMalloc(&L.x, 64); cudaMalloc(&L.part, 64); "
        "cudaMalloc(&L.out, 64); cudaMalloc(&L.db, 64); cudaStreamCreate(&L.s); step(L); "
        "return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    assert_true(tx_has_schedule_note(&r.notes, 7,
                                     "wait moved before the statement at line 9 (1 independent"));
    cuco_tx_result_free(&r);
}

/* kernels that reach memory no argument names: one whose body reads a
 * __device__ pointer, one that reads a __constant__ one through a helper,
 * one defined in another file of a program that sets symbols; a kernel
 * that names no symbol stays independent work */
static void test_scan_device_symbols(void **state)
{
    (void)state;
    static const char *const prog =
        "#include <nccl.h>\n"
        "__device__ float *d_sum;\n"
        "__constant__ float *c_sum;\n"
        "__global__ void k(float *a, size_t n) { a[0] = 1; }\n"
        "__device__ float first() { return c_sum[0]; }\n"
        "__global__ void read_symbol(size_t n) { if (d_sum[0] != 1.0f) __trap(); }\n"
        "__global__ void read_const(size_t n) { if (first() != 1.0f) __trap(); }\n"
        "extern __global__ void elsewhere(size_t n);\n"
        "static void f(float *x, float *y, float *a, size_t n, ncclComm_t c, cudaStream_t s)\n"
        "{\n"
        "    cudaMemcpyToSymbol(d_sum, &y, sizeof(y));\n"
        "    cudaMemcpyToSymbol(c_sum, &y, sizeof(y));\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    read_symbol<<<1, 1, 0, s>>>(n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    read_const<<<1, 1, 0, s>>>(n);\n"
        "    ncclAllReduce(x, y, n, ncclFloat, ncclSum, c, s);\n"
        "    k<<<1, 32, 0, s>>>(a, n);\n"
        "    elsewhere<<<1, 1, 0, s>>>(n);\n"
        "}\n"
        "int main() { float *x, *y, *a; ncclComm_t c; cudaStream_t s;\n"
        "    cudaMalloc(&x, 64); cudaMalloc(&y, 64); cudaMalloc(&a, 64);\n"
        "    f(x, y, a, 16, c, s); return 0; }\n";
    cuco_tx_result r;
    tx_transform(prog, &r);
    for (int line = 13; line <= 19; line += 3) {
        char want[96];
        snprintf(want, sizeof want, "wait moved before the statement at line %d (1 independent",
                 line + 2);
        assert_true(tx_has_schedule_note(&r.notes, line, want));
    }
    cuco_tx_result_free(&r);
}

/* ---- random graphs against an independent oracle ---------------------- */

#define RND_NAMES 8 /* buffer names n0..n7; n6 and n7 appear only as aliases */
#define RND_NODES 12

static const char *const rnd_name[RND_NAMES] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};
static const char *const rnd_stream[3] = {"s", "t", NULL};

static unsigned rnd_next(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return (*state >> 16) & 0x7fff;
}

/* same[i][j]: names i and j may reach one buffer: what each touches meets.
 * What a name touches: the names alias pairs join to it (both ways) and
 * what holds pairs take it to (holder to held only), transitively; by
 * repeated passes over a reachability matrix rather than union-find. */
static void rnd_closure(unsigned char same[RND_NAMES][RND_NAMES], const size_t *a, const size_t *b,
                        size_t n, const size_t *ha, const size_t *hb, size_t nh)
{
    unsigned char reach[RND_NAMES][RND_NAMES];
    memset(reach, 0, sizeof(reach));
    for (size_t i = 0; i < RND_NAMES; i++)
        reach[i][i] = 1;
    for (size_t k = 0; k < n; k++)
        reach[a[k]][b[k]] = reach[b[k]][a[k]] = 1;
    for (size_t k = 0; k < nh; k++)
        reach[ha[k]][hb[k]] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < RND_NAMES; i++)
            for (size_t j = 0; j < RND_NAMES; j++)
                for (size_t k = 0; k < RND_NAMES; k++)
                    if (reach[i][k] && reach[k][j] && !reach[i][j])
                        reach[i][j] = changed = 1;
    }
    for (size_t i = 0; i < RND_NAMES; i++)
        for (size_t j = 0; j < RND_NAMES; j++) {
            same[i][j] = 0;
            for (size_t k = 0; k < RND_NAMES; k++)
                same[i][j] |= reach[i][k] && reach[j][k];
        }
}

typedef struct rnd_node {
    cuco_sched_kind kind;
    size_t reads[3], writes[2], nreads, nwrites;
    int stream;
} rnd_node;

static int rnd_shares(unsigned char same[RND_NAMES][RND_NAMES], const size_t *x, size_t nx,
                      const size_t *y, size_t ny)
{
    for (size_t i = 0; i < nx; i++)
        for (size_t j = 0; j < ny; j++)
            if (same[x[i]][y[j]])
                return 1;
    return 0;
}

static int rnd_barrier(cuco_sched_kind k)
{
    return k == CUCO_SCHED_COMM || k == CUCO_SCHED_SYNC || k == CUCO_SCHED_EXIT ||
           k == CUCO_SCHED_UNKNOWN;
}

/* p may not run after the call's start: it writes what the call reads, or
 * touches what the call writes, or is a barrier */
static int rnd_holds_start(unsigned char same[RND_NAMES][RND_NAMES], const rnd_node *p,
                           const rnd_node *c)
{
    return rnd_barrier(p->kind) || rnd_shares(same, p->writes, p->nwrites, c->reads, c->nreads) ||
           rnd_shares(same, p->writes, p->nwrites, c->writes, c->nwrites) ||
           rnd_shares(same, p->reads, p->nreads, c->writes, c->nwrites);
}

/* q may not run before the call's wait: it touches what the call reads or
 * writes, or is a barrier */
static int rnd_holds_wait(unsigned char same[RND_NAMES][RND_NAMES], const rnd_node *q,
                          const rnd_node *c)
{
    return rnd_barrier(q->kind) || rnd_shares(same, q->reads, q->nreads, c->reads, c->nreads) ||
           rnd_shares(same, q->reads, q->nreads, c->writes, c->nwrites) ||
           rnd_shares(same, q->writes, q->nwrites, c->reads, c->nreads) ||
           rnd_shares(same, q->writes, q->nwrites, c->writes, c->nwrites);
}

static void rnd_graph(unsigned *st, rnd_node *r, size_t n, size_t call)
{
    static const cuco_sched_kind kinds[] = {CUCO_SCHED_WORK, CUCO_SCHED_WORK,  CUCO_SCHED_WORK,
                                            CUCO_SCHED_WORK, CUCO_SCHED_PLAIN, CUCO_SCHED_COMM,
                                            CUCO_SCHED_SYNC, CUCO_SCHED_EXIT,  CUCO_SCHED_UNKNOWN};
    for (size_t i = 0; i < n; i++) {
        /* barriers are rarer than work, so that most scopes have room to move */
        unsigned pick = rnd_next(st) % 24;
        r[i].kind = i == call ? CUCO_SCHED_COMM : kinds[pick < 16 ? pick % 5 : 5 + pick % 4];
        r[i].nreads = rnd_next(st) % 4;
        r[i].nwrites = (i == call ? 1 : 0) + rnd_next(st) % 2;
        for (size_t k = 0; k < r[i].nreads; k++)
            r[i].reads[k] = rnd_next(st) % 6;
        for (size_t k = 0; k < r[i].nwrites; k++)
            r[i].writes[k] = rnd_next(st) % 6;
        r[i].stream = (int)(rnd_next(st) % 3);
    }
}

/* 3000 random scopes (kinds, reads, writes, streams, aliases and objects
 * holding names, also through names that no node uses): the start and the wait are the farthest legal places,
 * and the counts are those of the work between, by an oracle that shares no
 * code with the placement. */
static void test_place_random(void **state)
{
    (void)state;
    unsigned st = 12345;
    for (int round = 0; round < 3000; round++) {
        size_t n = 2 + rnd_next(&st) % (RND_NODES - 1), call = rnd_next(&st) % n;
        rnd_node r[RND_NODES];
        rnd_graph(&st, r, n, call);
        size_t na = rnd_next(&st) % 4, aa[4], ab[4];
        const char *alias_a[4], *alias_b[4];
        for (size_t k = 0; k < na; k++) {
            aa[k] = rnd_next(&st) % RND_NAMES;
            ab[k] = rnd_next(&st) % RND_NAMES;
            alias_a[k] = rnd_name[aa[k]];
            alias_b[k] = rnd_name[ab[k]];
        }
        size_t nh = rnd_next(&st) % 4, ha[4], hb[4];
        const char *holds_a[4], *holds_b[4];
        for (size_t k = 0; k < nh; k++) {
            ha[k] = rnd_next(&st) % RND_NAMES;
            hb[k] = rnd_next(&st) % RND_NAMES;
            holds_a[k] = rnd_name[ha[k]];
            holds_b[k] = rnd_name[hb[k]];
        }
        unsigned char same[RND_NAMES][RND_NAMES];
        rnd_closure(same, aa, ab, na, ha, hb, nh);
        cuco_sched_node g[RND_NODES];
        const char *reads[RND_NODES][3], *writes[RND_NODES][2];
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < r[i].nreads; k++)
                reads[i][k] = rnd_name[r[i].reads[k]];
            for (size_t k = 0; k < r[i].nwrites; k++)
                writes[i][k] = rnd_name[r[i].writes[k]];
            g[i] = node(r[i].kind, rnd_stream[r[i].stream], reads[i], r[i].nreads, writes[i],
                        r[i].nwrites);
        }
        cuco_sched_graph gr = {g, n, alias_a, alias_b, na, holds_a, holds_b, nh};
        cuco_sched_place p;
        assert_int_equal(cuco_sched_place_call(&gr, call, &p), 0);
        const rnd_node *c = &r[call];
        assert_true(p.issue <= call);
        for (size_t i = p.issue; i < call; i++)
            assert_false(rnd_holds_start(same, &r[i], c));
        assert_true(p.issue == 0 || rnd_holds_start(same, &r[p.issue - 1], c));
        assert_true(p.wait > call && p.wait <= n);
        size_t work = 0, on_stream = 0;
        for (size_t i = call + 1; i < p.wait; i++) {
            assert_false(rnd_holds_wait(same, &r[i], c));
            work += r[i].kind == CUCO_SCHED_WORK;
            on_stream += r[i].kind == CUCO_SCHED_WORK &&
                         (r[i].stream == 2 || c->stream == 2 || r[i].stream == c->stream);
        }
        assert_true(p.wait == n || rnd_holds_wait(same, &r[p.wait], c));
        assert_int_equal(p.independent, work);
        assert_int_equal(p.same_stream, on_stream);
        assert_int_equal(p.knob_default, on_stream > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_before_consumer),
        cmocka_unit_test(test_start_after_producer),
        cmocka_unit_test(test_consumer_through_alias),
        cmocka_unit_test(test_other_stream),
        cmocka_unit_test(test_barriers),
        cmocka_unit_test(test_loop_body),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_place_random),
        cmocka_unit_test(test_scan_alias_program),
        cmocka_unit_test(test_scan_members_apart),
        cmocka_unit_test(test_scan_member_element),
        cmocka_unit_test(test_scan_members_by_reference),
        cmocka_unit_test(test_scan_params_alias),
        cmocka_unit_test(test_scan_not_applied),
        cmocka_unit_test(test_scan_streams_and_calls),
        cmocka_unit_test(test_scan_tables_and_indirect_launches),
        cmocka_unit_test(test_scan_hidden_consumers),
        cmocka_unit_test(test_scan_device_symbols),
        cmocka_unit_test(test_scan_macros_and_bindings),
        cmocka_unit_test(test_scan_header_macros),
        cmocka_unit_test(test_scan_inert_scalars),
        cmocka_unit_test(test_scan_objects_hold),
        cmocka_unit_test(test_scan_callee_reads),
        cmocka_unit_test(test_scan_consumer_streams),
        cmocka_unit_test(test_scan_param_types),
        cmocka_unit_test(test_scan_conditional),
        cmocka_unit_test(test_scan_switch_cases),
        cmocka_unit_test(test_scan_c_struct_step),
        cmocka_unit_test(test_scan_member_vs_params),
        cmocka_unit_test(test_scan_unique_ptr_factory),
        cmocka_unit_test(test_scan_wrapper_callers),
        cmocka_unit_test(test_scan_loop_iterations),
        cmocka_unit_test(test_scan_hidden_joins),
        cmocka_unit_test(test_scan_prefetch_next),
        cmocka_unit_test(test_scan_prefetch_caller),
        cmocka_unit_test(test_scan_prefetch_reads),
        cmocka_unit_test(test_scan_param_globals),
        cmocka_unit_test(test_edit_places),
        cmocka_unit_test(test_scan_raii_buffers),
        cmocka_unit_test(test_scan_declarators),
        cmocka_unit_test(test_scan_pure_helpers),
        cmocka_unit_test(test_scan_set_elsewhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
