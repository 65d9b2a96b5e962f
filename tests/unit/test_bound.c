/* test_bound.c: 'cuco bound' pieces that need no GPU: interval unions and
 * overlaps, the per-rank figures from a synthetic two-rank timeline (busy
 * times, overlap, bound, ceiling, waiting, critical rank, top kernels), a
 * malformed timeline named by file:line, the variant builder (collectives,
 * launches with template arguments, cuBLAS calls; EVOLVE-BLOCKs respected),
 * the static verification audit on small programs and on the shipped
 * workloads, and the advice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/analyze.h"
#include "cuco/bound.h"
#include "cuco/buf.h"
#include "cuco/fs.h"

static char *data_path(const char *name)
{
    const char *d = getenv("CUCO_TEST_DATA");
    char *base = cuco_sprintf("%s/bound", d ? d : CUCO_SOURCE_DIR "/tests/data");
    char *p = cuco_path_join(base, name);
    free(base);
    return p;
}

static void test_interval_union(void **state)
{
    (void)state;
    cuco_interval iv[] = {{50, 60}, {0, 10}, {5, 20}, {20, 30}, {55, 58}, {100, 100}};
    assert_int_equal(cuco_interval_union(iv, 6), 30 + 10);
    assert_int_equal(cuco_interval_union(NULL, 0), 0);
    cuco_interval a[] = {{0, 100}, {200, 300}}, b[] = {{50, 250}, {290, 400}};
    assert_int_equal(cuco_interval_overlap(a, 2, b, 2), 50 + 50 + 10);
    cuco_interval c[] = {{0, 10}}, d[] = {{10, 20}};
    assert_int_equal(cuco_interval_overlap(c, 1, d, 1), 0);
}

static void test_comm_kernel_names(void **state)
{
    (void)state;
    assert_true(cuco_bound_is_comm_kernel("ncclDevKernel_AllGather_RING_LL", NULL));
    assert_true(cuco_bound_is_comm_kernel("ncclKernel_SendRecv", NULL));
    assert_true(cuco_bound_is_comm_kernel("_Z14my_NCCL_helperv", NULL));
    assert_false(cuco_bound_is_comm_kernel("sm90_xmma_gemm_bf16", NULL));
    const char *extra[] = {"pack_halo", NULL};
    assert_true(cuco_bound_is_comm_kernel("_Z9pack_haloPfi", extra));
    assert_false(cuco_bound_is_comm_kernel("unpack", extra));
}

static void test_timeline_two_ranks(void **state)
{
    (void)state;
    char *dir = data_path("timeline_two_ranks");
    cuco_bound_timeline tl;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_timeline_load(dir, NULL, 4, &tl, &e), 0);
    assert_int_equal(tl.n_files, 2);
    assert_int_equal(tl.n_ranks, 2);
    assert_int_equal(tl.dropped, 2);
    const cuco_bound_rank *r0 = &tl.ranks[0], *r1 = &tl.ranks[1];
    assert_int_equal(r0->rank, 0);
    assert_int_equal(r1->rank, 1);
    assert_int_equal(r1->device, 1);
    /* rank 0: compute [0,100] u [50,150] = 150 ms; comm [140,240] = 100;
     * overlapped 10; copy 10; serial 250; bound 150; ceiling 5/3. */
    assert_true(fabs(r0->compute_ms - 150) < 1e-9);
    assert_true(fabs(r0->comm_ms - 100) < 1e-9);
    assert_true(fabs(r0->overlap_ms - 10) < 1e-9);
    assert_true(fabs(r0->copy_ms - 10) < 1e-9);
    assert_true(fabs(r0->busy_ms - 240) < 1e-9);
    assert_true(fabs(r0->bound_ms - 150) < 1e-9);
    assert_true(fabs(r0->ceiling - 250.0 / 150.0) < 1e-9);
    assert_true(fabs(r0->span_ms - 240) < 1e-9);
    /* The all-gather took 100 ms on rank 0, 80 on rank 1: rank 0 waited 20. */
    assert_true(fabs(r0->wait_ms - 20) < 1e-9);
    assert_true(fabs(r1->wait_ms) < 1e-9);
    /* rank 1: comm = nccl [100,180] u peer copy [170,190] = 90. */
    assert_true(fabs(r1->comm_ms - 90) < 1e-9);
    assert_true(fabs(r1->compute_ms - 80) < 1e-9);
    assert_int_equal(tl.critical, 0);
    assert_int_equal(r0->n_top, 2);
    assert_string_equal(r0->top[0].name, "gemm_tile");
    assert_int_equal(r0->top[0].count, 2);
    assert_true(fabs(r0->top[0].total_ms - 200) < 1e-9);
    assert_false(r0->top[0].comm);
    assert_true(r0->top[1].comm);
    cuco_bound_timeline_free(&tl);
    free(dir);
}

/* The program's own timed intervals: grouped by what ran, medians per step. */
static void test_timeline_timed(void **state)
{
    (void)state;
    char *dir = data_path("timeline_timed");
    cuco_bound_timeline tl;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_timeline_load(dir, NULL, 4, &tl, &e), 0);
    assert_int_equal(tl.n_ranks, 2); /* one process, two devices */
    const cuco_bound_rank *r = &tl.ranks[0], *d1 = &tl.ranks[1];
    assert_int_equal(r->device, 0);
    assert_int_equal(r->n_timed, 9); /* the empty interval and device 1's are not here */
    const cuco_bound_timed *full = &r->timed[CUCO_TIMED_FULL],
                           *comp = &r->timed[CUCO_TIMED_COMPUTE_ONLY],
                           *comm = &r->timed[CUCO_TIMED_COMM_ONLY];
    assert_int_equal(full->n, 3);
    assert_true(fabs(full->compute_ms - 10) < 1e-9);
    assert_true(fabs(full->comm_ms - 2) < 1e-9);
    assert_true(fabs(full->span_ms - 13) < 1e-9); /* 10 + 1 ms gap + 2 */
    assert_true(fabs(full->event_ms - 13.1) < 1e-9);
    assert_int_equal(comp->n, 3);
    assert_true(fabs(comp->compute_ms - 10) < 1e-9);
    assert_true(fabs(comp->comm_ms) < 1e-9);
    assert_true(fabs(comp->event_ms - 10.05) < 1e-9);
    assert_int_equal(comm->n, 3);
    assert_true(fabs(comm->comm_ms - 2) < 1e-9);
    assert_true(fabs(comm->compute_ms) < 1e-9);
    /* The untimed verification step counts in the whole-run figures only. */
    assert_true(fabs(r->compute_ms - (50 + 30 + 32)) < 1e-9);
    assert_int_equal(d1->device, 1);
    assert_int_equal(d1->n_timed, 1);
    assert_int_equal(d1->timed[CUCO_TIMED_COMPUTE_ONLY].n, 1);
    assert_true(fabs(d1->timed[CUCO_TIMED_COMPUTE_ONLY].compute_ms - 30) < 1e-9);
    cuco_bound_timeline_free(&tl);
    /* Files without timed records (older library) give no per-step figures. */
    char *two = data_path("timeline_two_ranks");
    assert_int_equal(cuco_bound_timeline_load(two, NULL, 4, &tl, &e), 0);
    assert_int_equal(tl.ranks[0].n_timed, 0);
    assert_int_equal(tl.ranks[0].timed[CUCO_TIMED_FULL].n, 0);
    cuco_bound_timeline_free(&tl);
    free(two);
    free(dir);
}

static void test_timeline_errors(void **state)
{
    (void)state;
    char *dir = data_path("timeline_bad");
    cuco_bound_timeline tl;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_timeline_load(dir, NULL, 4, &tl, &e), CUCO_EINVAL);
    assert_int_equal(e.line, 3);
    assert_non_null(strstr(e.file, "timeline.7.jsonl"));
    cuco_err_clear(&e);
    free(dir);
    char *empty = data_path("."); /* tests/data/bound itself holds no timeline files */
    assert_int_equal(cuco_bound_timeline_load(empty, NULL, 4, &tl, &e), CUCO_ENOTFOUND);
    cuco_err_clear(&e);
    free(empty);
}

static const char program[] =
    "#include <nccl.h>\n"
    "void setup(ncclComm_t c, float *a, cudaStream_t s) {\n"
    "    ncclAllReduce(a, a, 4, ncclFloat, ncclSum, c, s); // outside: kept\n"
    "}\n"
    "// EVOLVE-BLOCK-START\n"
    "void step(ncclComm_t c, float *a, float *b, cudaStream_t s, cublasHandle_t h) {\n"
    "    CHECK(ncclAllGather(a, b, 4, ncclFloat, c, s));\n"
    "    ncclResult_t r = ncclSend(a, 4, ncclFloat, 1, c, s);\n"
    "    ns::tile<float, 4><<<dim3(2, 2), 128, 0, s>>>(a, b);\n"
    "    plain<<<1, 32>>>(b);\n"
    "    CHECK_BLAS(cublasGemmEx(h, 1, 2, 3));\n"
    "    cublasSetStream(h, s);\n"
    "    const char *msg = \"ncclAllGather(a) in a string\";\n"
    "    // ncclAllGather(a, b) in a comment\n"
    "}\n"
    "// EVOLVE-BLOCK-END\n";

static void test_variant_no_comm(void **state)
{
    (void)state;
    char *out = NULL;
    int n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_variant(program, "p.cu", CUCO_VARIANT_NO_COMM, &out, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_non_null(strstr(out, "CHECK(ncclSuccess);"));
    assert_non_null(strstr(out, "ncclResult_t r = ncclSuccess;"));
    assert_non_null(strstr(out, "ncclAllReduce(a, a, 4")); /* outside the block */
    assert_non_null(strstr(out, "\"ncclAllGather(a) in a string\""));
    assert_non_null(strstr(out, "// ncclAllGather(a, b) in a comment"));
    assert_non_null(strstr(out, "plain<<<1, 32>>>(b);"));
    free(out);
}

/* A program cuco transform wrote: its glue (namespace cuco_tx, with NCCL
 * calls of its own) inside the block, the program's communication through
 * cuco_tx::all_gather and co. The variant without communication removes
 * the program's glue calls, not the glue's transport. */
static const char transformed[] =
    "// EVOLVE-BLOCK-START\n"
    "namespace cuco_tx {\n"
    "inline ncclResult_t all_gather(const void* s, void* r, size_t n, ncclDataType_t t,\n"
    "                               ncclComm_t c, cudaStream_t st) {\n"
    "  return ::ncclAllGather(s, r, n, t, c, st);\n"
    "}\n"
    "template <class K> void part(K k, cudaStream_t st) { k<<<1, 32, 0, st>>>(); }\n"
    "}  // namespace cuco_tx\n"
    "void step(float *a, float *b, ncclComm_t comm, cudaStream_t st) {\n"
    "    CHECK(cuco_tx::group_start());\n"
    "    CHECK(cuco_tx::all_gather(cuco_tx::split_site(0, CUCO_SPLIT_0), a, b, 4, ncclFloat,\n"
    "                              comm, cuco_tx::early_start(0, CUCO_EARLY_0, st)));\n"
    "    CHECK(cuco_tx::group_end());\n"
    "    CHECK(cuco_tx::checked_all_reduce(b, b, 8, ncclFloat, ncclSum, comm, st));\n"
    "    CHECK(cuco_tx::symm_malloc(&a, 64));\n"
    "    cuco_tx::early_wait(0, CUCO_EARLY_0);\n"
    "}\n"
    "// EVOLVE-BLOCK-END\n";

static void test_variant_no_comm_transformed(void **state)
{
    (void)state;
    char *out = NULL;
    int n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_variant(transformed, "t.cu", CUCO_VARIANT_NO_COMM, &out, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_non_null(strstr(out, "  return ::ncclAllGather(s, r, n, t, c, st);")); /* the glue kept */
    assert_non_null(strstr(out, "    CHECK(ncclSuccess\n);\n    CHECK(cuco_tx::group_end());"));
    assert_non_null(strstr(out, "    CHECK(ncclSuccess);\n    CHECK(cuco_tx::symm_malloc(&a, 64));"));
    assert_non_null(strstr(out, "cuco_tx::early_wait(0, CUCO_EARLY_0);"));
    assert_non_null(strstr(out, "k<<<1, 32, 0, st>>>();")); /* the glue's launch kept */
    free(out);
    /* without computation: the glue's launch (a split kernel's part) goes,
     * its communication stays */
    assert_int_equal(cuco_bound_variant(transformed, "t.cu", CUCO_VARIANT_NO_COMPUTE, &out, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_null(strstr(out, "<<<"));
    assert_non_null(strstr(out, "CHECK(cuco_tx::checked_all_reduce(b, b, 8"));
    free(out);
}

static void test_variant_no_compute(void **state)
{
    (void)state;
    char *out = NULL;
    int n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_variant(program, "p.cu", CUCO_VARIANT_NO_COMPUTE, &out, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_non_null(strstr(out, "    ((void)0);\n    ((void)0);\n"));
    assert_null(strstr(out, "<<<"));
    assert_non_null(strstr(out, "CHECK_BLAS(CUBLAS_STATUS_SUCCESS);"));
    assert_non_null(strstr(out, "cublasSetStream(h, s);"));
    assert_non_null(strstr(out, "CHECK(ncclAllGather(a, b, 4"));
    /* Line count kept. */
    int lines_in = 0, lines_out = 0;
    for (const char *p = program; *p; p++)
        lines_in += *p == '\n';
    for (const char *p = out; *p; p++)
        lines_out += *p == '\n';
    assert_int_equal(lines_in, lines_out);
    free(out);
    /* Without blocks every call changes. */
    const char *bare = "int main(){ k<<<1,1>>>(); ncclBroadcast(a,b,1,ncclInt,0,c,s); }\n";
    assert_int_equal(cuco_bound_variant(bare, "b.cu", CUCO_VARIANT_NO_COMM, &out, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(out, "ncclSuccess;"));
    free(out);
}

/* Calls from an analysis join the scanner's; a call both found changes once;
 * an analysis entry whose span does not start with its name is ignored. */
static void test_variant_from_analysis(void **state)
{
    (void)state;
    const char *text = "void f() {\n"
                       "    ncclAllGather(a, b, 1, ncclInt, c, s);\n"
                       "    launch_via_table(k, args);\n"
                       "}\n";
    size_t ag = (size_t)(strstr(text, "ncclAllGather") - text);
    size_t lv = (size_t)(strstr(text, "launch_via_table") - text);
    size_t lv_end = (size_t)(strstr(text, "args)") - text) + 5;
    char *json = cuco_sprintf(
        "{\"collectives\": [{\"api\": \"ncclAllGather\", \"file\": \"dir/v.cu\", "
        "\"span\": {\"start\": %zu, \"end\": %zu}}],"
        " \"launches\": [{\"api\": \"launch_via_table\", \"launch\": \"api\", \"file\": \"v.cu\", "
        "\"span\": {\"start\": %zu, \"end\": %zu}},"
        " {\"api\": \"other\", \"launch\": \"api\", \"file\": \"v.cu\", "
        "\"span\": {\"start\": %zu, \"end\": %zu}}]}",
        ag, ag + 38, lv, lv_end, lv, lv_end);
    json_t *analysis = json_loads(json, 0, NULL);
    assert_non_null(analysis);
    char *out = NULL;
    int n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_variant_from(text, "v.cu", analysis, CUCO_VARIANT_NO_COMM, &out, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(out, "    ncclSuccess;\n"));
    free(out);
    assert_int_equal(cuco_bound_variant_from(text, "v.cu", analysis, CUCO_VARIANT_NO_COMPUTE, &out, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(out, "    cudaSuccess;\n"));
    free(out);
    /* Another file's entries are not applied. */
    assert_int_equal(cuco_bound_variant_from(text, "w.cu", analysis, CUCO_VARIANT_NO_COMPUTE, &out, &n, &e), 0);
    assert_int_equal(n, 0);
    free(out);
    json_decref(analysis);
    free(json);
}

/* Kernels launched from another file of the program through wrapper
 * functions (kernels.cu: launch_fill returns void, launch_scale a
 * cudaError_t and calls another wrapper): the computation-removed variant
 * replaces the wrapper calls by their neutral values and keeps the rest. */
static void test_variant_follows_wrappers(void **state)
{
    (void)state;
    const char *d = getenv("CUCO_TEST_DATA");
    char *path = cuco_sprintf("%s/transform/wrapper_launch/wrapper_launch.cu",
                              d ? d : CUCO_SOURCE_DIR "/tests/data");
    char *text = NULL;
    size_t len = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(path, &text, &len, &e), 0);
    const char *paths[] = {path};
    json_t *analysis = NULL;
    assert_int_equal(cuco_analyze_paths(paths, 1, &analysis, &e), 0);
    char *out = NULL;
    int n = 0;
    assert_int_equal(cuco_bound_variant_from(text, "wrapper_launch.cu", analysis, CUCO_VARIANT_NO_COMPUTE,
                                             &out, &n, &e),
                     0);
    assert_int_equal(n, 2);
    assert_null(strstr(out, "launch_fill(x, n, rank, s)"));
    assert_non_null(strstr(out, "OK_CUDA(cudaSuccess);"));
    assert_non_null(strstr(out, "ncclAllReduce(x, x, n"));
    free(out);
    /* without the analysis (no folder to look in) nothing is known of them */
    assert_int_equal(cuco_bound_variant(text, "wrapper_launch.cu", CUCO_VARIANT_NO_COMPUTE, &out, &n, &e), 0);
    assert_int_equal(n, 0);
    free(out);
    json_decref(analysis);
    free(text);
    free(path);
}

static void audit_one(const char *name, cuco_audit_verdict want, int finding)
{
    char *p = data_path(name);
    cuco_audit a;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_audit_static(p, NULL, &a, &e), 0);
    assert_int_equal(a.n_sites, 1);
    if (a.sites[0].verdict != want)
        fprintf(stderr, "%s: %s: %s\n", name, cuco_audit_verdict_name(a.sites[0].verdict),
                a.sites[0].why);
    assert_int_equal(a.sites[0].verdict, want);
    assert_int_equal(a.finding, finding);
    assert_non_null(a.summary);
    cuco_audit_free(&a);
    free(p);
}

static void test_audit_small_programs(void **state)
{
    (void)state;
    audit_one("audit_unconditional.cu", CUCO_AUDIT_UNCONDITIONAL, 1);
    audit_one("audit_constant.cu", CUCO_AUDIT_CONSTANT, 1);
    audit_one("audit_rank_only.cu", CUCO_AUDIT_UNRELATED, 1);
    audit_one("audit_compare.cu", CUCO_AUDIT_CHECKED, 0);
    audit_one("audit_compare_else.cu", CUCO_AUDIT_CHECKED, 0);
    audit_one("audit_ternary_other.cu", CUCO_AUDIT_UNCONDITIONAL, 1);
    audit_one("audit_method.cu", CUCO_AUDIT_CHECKED, 0);
    audit_one("audit_helper.cu", CUCO_AUDIT_CHECKED, 0);
    audit_one("audit_print_helper.cu", CUCO_AUDIT_CHECKED, 0);
    audit_one("audit_early_return.cu", CUCO_AUDIT_CHECKED, 0);
    /* The hollow GPU program's PASS is decided by a real comparison, but of
     * data the all-reduce never touched: the communication check finds it. */
    audit_one("hollow_allreduce.cu", CUCO_AUDIT_CHECKED, 1);
    /* This one reads the all-reduced data but never compares it: only the
     * dynamic audit (on a GPU) can see that. */
    audit_one("hollow_readback.cu", CUCO_AUDIT_CHECKED, 0);
}

/* The communication check: name the receiving calls and whether their
 * output is read. want_read[k] for the k-th receiving call. */
static void comm_one(const char *name, size_t n_calls, const int *want_read, int finding)
{
    char *p = data_path(name);
    cuco_audit a;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_bound_audit_static(p, NULL, &a, &e), 0);
    if (a.n_comm != n_calls)
        fprintf(stderr, "%s: %zu receiving calls\n", name, a.n_comm);
    assert_int_equal(a.n_comm, n_calls);
    for (size_t k = 0; k < n_calls; k++) {
        if (a.comm[k].read != want_read[k])
            fprintf(stderr, "%s: %s into %s: read=%d at %s\n", name, a.comm[k].call,
                    a.comm[k].buffer, a.comm[k].read, a.comm[k].read_at ? a.comm[k].read_at : "-");
        assert_int_equal(a.comm[k].read, want_read[k]);
        assert_true(a.comm[k].line > 0);
        assert_int_equal(a.comm[k].read_at != NULL, want_read[k]);
    }
    assert_int_equal(a.comm_finding, finding);
    assert_int_equal(a.finding, finding);
    if (finding)
        assert_non_null(strstr(a.summary, "nothing reads"));
    cuco_audit_free(&a);
    free(p);
}

static void test_audit_comm(void **state)
{
    (void)state;
    const int unread[] = {0}, read[] = {1};
    comm_one("hollow_allreduce.cu", 1, unread, 1);
    comm_one("audit_comm_read.cu", 1, read, 0);
    comm_one("hollow_readback.cu", 1, read, 0);
    comm_one("audit_comm_inplace.cu", 1, unread, 1);
    const int forwarded[] = {1, 0}; /* all-gather read by the broadcast; broadcast unread */
    comm_one("audit_comm_forward.cu", 2, forwarded, 1);
    comm_one("audit_compare.cu", 0, NULL, 0);

    /* The hollow program with its result copied back and compared is fine. */
    char *p = data_path("hollow_allreduce.cu");
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(p, &text, NULL, &e), 0);
    const char *from = "got.data(), x, n";
    char *at = strstr(text, from);
    assert_non_null(at);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_append(&b, text, (size_t)(at - text));
    cuco_buf_puts(&b, "got.data(), y, n");
    cuco_buf_puts(&b, at + strlen(from));
    char *tmp = cuco_sprintf("%s/bound-comm-%d",
                             getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp", (int)getpid());
    assert_int_equal(cuco_fs_mkdirs(tmp, &e), 0);
    char *fixed = cuco_path_join(tmp, "fixed_allreduce.cu");
    assert_int_equal(cuco_fs_write(fixed, b.data, b.len, &e), 0);
    cuco_audit a;
    assert_int_equal(cuco_bound_audit_static(fixed, NULL, &a, &e), 0);
    assert_int_equal(a.n_comm, 1);
    assert_true(a.comm[0].read);
    assert_false(a.comm_finding);
    cuco_audit_free(&a);
    cuco_fs_remove_tree(tmp, NULL);
    free(fixed);
    free(tmp);
    cuco_buf_free(&b);
    free(text);
    free(p);
}

/* Every shipped workload's own verification must pass the audit; and the same
 * program with its check's result thrown away must not. */
static void test_audit_workloads(void **state)
{
    (void)state;
    const char *src = getenv("CUCO_SRC") ? getenv("CUCO_SRC") : CUCO_SOURCE_DIR;
    char *wdir = cuco_path_join(src, "workloads");
    char *common = cuco_path_join(wdir, "common");
    const char *dirs[] = {common, NULL};
    DIR *d = opendir(wdir);
    assert_non_null(d);
    struct dirent *de;
    int audited = 0;
    while ((de = readdir(d))) {
        char *folder = cuco_path_join(wdir, de->d_name);
        char *manifest = cuco_path_join(folder, "workload.yaml");
        cuco_workload *w = NULL;
        cuco_err e = CUCO_ERR_INIT;
        if (de->d_name[0] != '.' && cuco_fs_exists(manifest) &&
            cuco_workload_load(folder, &w, &e) == 0) {
            char *prog = cuco_path_join(folder, w->evolve_file);
            cuco_audit a;
            assert_int_equal(cuco_bound_audit_static(prog, dirs, &a, &e), 0);
            if (a.finding)
                fprintf(stderr, "%s: %s\n", w->name, a.summary);
            assert_false(a.finding);
            assert_true(a.n_sites >= 1);
            cuco_audit_free(&a);
            free(prog);
            audited++;
        }
        cuco_err_clear(&e);
        cuco_workload_free(w);
        free(manifest);
        free(folder);
    }
    closedir(d);
    assert_true(audited >= 3);

    /* gemm_allgather with the verdict it reports replaced by a constant (the
     * checks still run; their results are thrown away). */
    char *gemm = cuco_path_join(wdir, "gemm_allgather/gemm_allgather.cu");
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(gemm, &text, NULL, &e), 0);
    const char *from = "hx_report_verification(c, vouch, ok && timed_ok,";
    char *at = strstr(text, from);
    assert_non_null(at);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_append(&b, text, (size_t)(at - text));
    cuco_buf_puts(&b, "hx_report_verification(c, vouch, true,");
    cuco_buf_puts(&b, at + strlen(from));
    char *tmp = cuco_sprintf("%s/bound-hollow-%d", getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp",
                             (int)getpid());
    assert_int_equal(cuco_fs_mkdirs(tmp, &e), 0);
    char *hollow = cuco_path_join(tmp, "gemm_allgather.cu");
    assert_int_equal(cuco_fs_write(hollow, b.data, b.len, &e), 0);
    cuco_audit a;
    assert_int_equal(cuco_bound_audit_static(hollow, dirs, &a, &e), 0);
    assert_true(a.finding);
    assert_int_equal(a.sites[0].verdict, CUCO_AUDIT_UNRELATED);
    cuco_audit_free(&a);
    cuco_fs_remove_tree(tmp, NULL);
    free(hollow);
    free(tmp);
    cuco_buf_free(&b);
    free(text);
    free(gemm);
    free(common);
    free(wdir);
}

static void test_read_warning(void **state)
{
    (void)state;
    char *ws = cuco_sprintf("%s/bound-ws-%d",
                            getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp", (int)getpid());
    cuco_err e = CUCO_ERR_INIT;
    char *msg = NULL;
    assert_int_equal(cuco_fs_mkdirs(ws, &e), 0);
    assert_int_equal(cuco_bound_read_warning(ws, &msg, &e), 0); /* no bound.json */
    assert_null(msg);
    char *path = cuco_path_join(ws, "bound.json");
    const char *hollow = "{\"verification_audit\": {\"warning\": true, \"static\": "
                         "{\"finding\": false, \"summary\": \"ok\"}, \"dynamic\": "
                         "{\"finding\": true}}}";
    assert_int_equal(cuco_fs_write(path, hollow, strlen(hollow), &e), 0);
    assert_int_equal(cuco_bound_read_warning(ws, &msg, &e), 1);
    assert_non_null(strstr(msg, "communication removed"));
    free(msg);
    const char *fine = "{\"verification_audit\": {\"warning\": false}}";
    assert_int_equal(cuco_fs_write(path, fine, strlen(fine), &e), 0);
    assert_int_equal(cuco_bound_read_warning(ws, &msg, &e), 0);
    assert_null(msg);
    assert_int_equal(cuco_fs_write(path, "{broken", 7, &e), 0);
    assert_int_equal(cuco_bound_read_warning(ws, &msg, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
    cuco_fs_remove_tree(ws, NULL);
    free(path);
    free(ws);
}

static void test_advice(void **state)
{
    (void)state;
    char *low = cuco_bound_advice(0.007, 1.007, "sm90_gemm", 0.98, 0);
    assert_non_null(strstr(low, "0.7%"));
    assert_non_null(strstr(low, "1.007x"));
    assert_non_null(strstr(low, "optimize computation first"));
    assert_non_null(strstr(low, "sm90_gemm"));
    assert_non_null(strstr(low, "98% of the time is kernel sm90_gemm: optimize computation first"));
    char *high = cuco_bound_advice(0.38, 1.6, NULL, 0, 0);
    assert_non_null(strstr(high, "Communication is 38.0%"));
    assert_non_null(strstr(high, "ceiling 1.600x: worth searching"));
    assert_null(strstr(high, "optimize computation first"));
    char *mid = cuco_bound_advice(0.12, 1.13, "ncclDevKernel_AllGather", 0.4, 1);
    assert_non_null(strstr(mid, "gain a little"));
    assert_non_null(strstr(mid, "communication kernel ncclDevKernel_AllGather"));
    /* the top kernel is not named as computation to optimize when it is communication */
    char *low_comm = cuco_bound_advice(0.01, 1.01, "ncclDevKernel_AllGather", 0.9, 1);
    assert_null(strstr(low_comm, "ncclDevKernel"));
    assert_non_null(strstr(low_comm, "optimize computation first"));
    free(low);
    free(high);
    free(mid);
    free(low_comm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interval_union),   cmocka_unit_test(test_comm_kernel_names),
        cmocka_unit_test(test_timeline_two_ranks), cmocka_unit_test(test_timeline_errors),
        cmocka_unit_test(test_timeline_timed),
        cmocka_unit_test(test_variant_no_comm),
        cmocka_unit_test(test_variant_no_comm_transformed),  cmocka_unit_test(test_variant_no_compute),
        cmocka_unit_test(test_audit_small_programs), cmocka_unit_test(test_audit_workloads),
        cmocka_unit_test(test_audit_comm),
        cmocka_unit_test(test_variant_from_analysis),
        cmocka_unit_test(test_variant_follows_wrappers),
        cmocka_unit_test(test_advice),         cmocka_unit_test(test_read_warning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
