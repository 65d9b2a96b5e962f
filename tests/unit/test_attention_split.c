/* test_attention_split.c: schedule (b) on a kernel the manifest declares
 * attention, through cuco_transform_rules_declared. K and V gathered by two
 * ncclAllGather in one group (inside an if, as a step's communication
 * part), the kernel launched from a helper that declares its grid: the
 * launch goes through cuco_tx::attention_split with the key count's, first
 * key's, output's and log-sum-exp's positions and the output's shape
 * written in the launch's own arguments; both all-gathers get split_site,
 * the second joins the first's split; the knob of the parts per peer is
 * there. A declaration that lacks what the split needs, and a group that
 * holds a point-to-point call, leave everything whole with the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/transform.h"
#include "tx_test.h"

typedef struct decl {
    cuco_semantic s;
    char *keys[16], *values[16];
} decl;

static void decl_add(decl *d, const char *k, const char *v)
{
    d->keys[d->s.n_params] = (char *)k;
    d->values[d->s.n_params++] = (char *)v;
}

/* The full declaration of kernel attn less the parameter `without` (NULL:
 * none left out). */
static void decl_make(decl *d, const char *without)
{
    static const char *const kv[][2] = {
        {"over", "keys"}, {"merge", "log_sum_exp"},   {"keys", "nk"},
        {"args", "k v"},  {"first_key", "k0"},        {"out", "o"},
        {"lse", "lse"},   {"out_rows", "nq * HEADS"}, {"out_width", "width"}};
    memset(d, 0, sizeof *d);
    d->s.kernel = (char *)"attn";
    d->s.term = (char *)"attention";
    d->s.keys = d->keys;
    d->s.values = d->values;
    d->s.line = 30;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (!without || strcmp(without, kv[i][0]))
            decl_add(d, kv[i][0], kv[i][1]);
}

/* line 16: the group's first all-gather; line 9: the launch in the helper */
static const char *const prog =
    "#include <nccl.h>\n"
    "#define HEADS 4\n"
    "__global__ void attn(const float *q, const float *k, const float *v, int nq, int nk,\n"
    "                     long k0, float *o, float *lse, int width) {}\n"
    "struct St { float *k_all, *v_all; };\n"
    "static void attend(const float *q, St &s, float *o, int nq, int nk, cudaStream_t st)\n"
    "{\n"
    "    dim3 grid(nq, HEADS);\n"
    "    attn<<<grid, 128, 0, st>>>(q, s.k_all, s.v_all, nq, nk, 0, o, nullptr, 64);\n"
    "}\n"
    "static void step(float *k, float *v, float *q, float *o, St &s, int nq, int nk,\n"
    "                 ncclComm_t c, cudaStream_t st, int parts)\n"
    "{\n"
    "    if (parts & 1) {\n"
    "        ncclGroupStart();\n"
    "        ncclAllGather(k, s.k_all, 16, ncclFloat, c, st);\n"
    "        ncclAllGather(v, s.v_all, 16, ncclFloat, c, st);\n"
    "        ncclGroupEnd();\n"
    "    }\n"
    "    if (parts & 2)\n"
    "        attend(q, s, o, nq, nk, st);\n"
    "}\n"
    "int main() {\n"
    "    float *k, *v, *q, *o; St s; ncclComm_t c; cudaStream_t st;\n"
    "    cudaMalloc(&k, 64); cudaMalloc(&v, 64); cudaMalloc(&q, 64); cudaMalloc(&o, 64);\n"
    "    cudaMalloc(&s.k_all, 128); cudaMalloc(&s.v_all, 128);\n"
    "    step(k, v, q, o, s, 4, 8, c, st, 3);\n"
    "    return 0;\n"
    "}\n";

static void transform_declared(const char *text, const decl *d, cuco_tx_result *r)
{
    tx_transform_declared(text, &d->s, 1, r);
}

static void print_notes(const cuco_tx_result *r)
{
    for (size_t i = 0; i < r->notes.n; i++)
        print_message("note %d: %s\n", r->notes.items[i].line, r->notes.items[i].text);
}

static void test_attention_split_applies(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, NULL);
    cuco_tx_result r;
    transform_declared(prog, &d, &r);
    const char *want = "cuco_tx::attention_split(0, CUCO_SPLIT_0, cuco_tx::AttnSpec{"
                       "cuco_tx::RowSpec{4, 0x6UL, 0}, 5, 6, 7, {-1, -1, -1, -1, 0x0UL}}, "
                       "(size_t)((nq) * HEADS), (size_t)((64)), (size_t)(0), attn, grid, 128, 0, "
                       "st, ";
    if (!strstr(r.program, want)) {
        print_notes(&r);
        fail_msg("no attention_split launch in:\n%s", strstr(r.program, "static void attend"));
    }
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::split_site(0, CUCO_SPLIT_0), "
                                      "k, s.k_all"));
    assert_non_null(strstr(r.program, "cuco_tx::all_gather(cuco_tx::split_site(1, CUCO_SPLIT_1), "
                                      "v, s.v_all"));
    assert_non_null(strstr(r.program, "#define CUCO_ATTN_CHUNKS 1 // cuco:knob run 1 2 4"));
    /* one rewrite of the launch, both all-gathers started early, both
     * waits after the consumer */
    const char *first = strstr(r.program, "cuco_tx::attention_split(");
    assert_null(strstr(first + 1, "cuco_tx::attention_split("));
    const char *call = strstr(r.program, "attend(q, s, o, nq, nk, st);");
    const char *w0 = strstr(r.program, "cuco_tx::early_wait(0, CUCO_EARLY_0);");
    const char *w1 = strstr(r.program, "cuco_tx::early_wait(1, CUCO_EARLY_1);");
    assert_non_null(call);
    assert_true(w0 && w1 && call < w0 && call < w1);
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "consumer_split_by_source: kernel attn at line 9 consumes "
                                     "ncclAllGather at line 16 per source rank (own keys first, "
                                     "the parts merged by log-sum-exp; declared attention at "
                                     "workload.yaml line 30), in the helper"));
    assert_true(tx_has_schedule_note(&r.notes, 9,
                                     "joins the attention split of the kernel at "
                                     "line 9"));
    cuco_tx_result_free(&r);
}

static void assert_whole(const char *text, const decl *d, const char *why);

/* The queries declared too: their positions (queries=nq 3, first_query=k0
 * 5, causal written as true -2, grid x 0, q the only query argument) and
 * their width in the launch's arguments; the report says the ranks may
 * trade queries, and that they may not when query_grid= is missing. */
static void test_attention_lend_declared(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, NULL);
    decl_add(&d, "queries", "nq");
    decl_add(&d, "first_query", "k0");
    decl_add(&d, "query_args", "q");
    decl_add(&d, "query_width", "HEADS * width");
    decl_add(&d, "causal", "true");
    cuco_tx_result r;
    transform_declared(prog, &d, &r);
    assert_non_null(strstr(r.program, "5, 6, 7, {-1, 5, -2, -1, 0x0UL}}, (size_t)((nq) * HEADS), "
                                      "(size_t)((64)), (size_t)(0), attn,"));
    assert_true(tx_has_schedule_note(&r.notes, 9, "no queries move between ranks (the declaration "
                                                  "lacks queries=, first_query="));
    assert_null(strstr(r.program, "#define CUCO_ATTN_LEND 1 // cuco:knob"));
    cuco_tx_result_free(&r);
    decl_add(&d, "query_grid", "x");
    d.values[d.s.n_params - 2] = (char *)"false"; /* causal= */
    transform_declared(prog, &d, &r);
    assert_true(tx_has_schedule_note(&r.notes, 9, "no queries move between ranks (no mask declared"));
    assert_null(strstr(r.program, "#define CUCO_ATTN_LEND 1 // cuco:knob"));
    cuco_tx_result_free(&r);
    d.values[d.s.n_params - 2] = (char *)"true";
    transform_declared(prog, &d, &r);
    if (!strstr(r.program, "5, 6, 7, {3, 5, -2, 0, 0x1UL}}, (size_t)((nq) * HEADS), "
                           "(size_t)((64)), (size_t)(HEADS * (64)), attn,")) {
        print_notes(&r);
        fail_msg("no lend spec in:\n%s", strstr(r.program, "static void attend"));
    }
    assert_true(tx_has_schedule_note(&r.notes, 9, "lends its last queries to the least busy rank "
                                                  "(CUCO_ATTN_LEND)"));
    assert_non_null(strstr(r.program, "#define CUCO_ATTN_LEND 1 // cuco:knob run 0 1"));
    cuco_tx_result_free(&r);
    d.values[d.s.n_params - 4] = (char *)"qq"; /* query_args= */
    assert_whole(prog, &d, "names query_args=qq, which is not one of its parameters");
}

/* Transforms prog with d: no attention_split, the report says why. */
static void assert_whole(const char *text, const decl *d, const char *why)
{
    cuco_tx_result r;
    transform_declared(text, d, &r);
    assert_null(strstr(r.program, "cuco_tx::attention_split("));
    assert_null(strstr(r.program, "cuco_tx::split_site("));
    if (!tx_has_schedule_note(&r.notes, 0, why)) {
        print_notes(&r);
        fail_msg("no note holds: %s", why);
    }
    cuco_tx_result_free(&r);
}

static void test_attention_split_refused(void **state)
{
    (void)state;
    decl d;
    decl_make(&d, "lse");
    assert_whole(prog, &d, "whose attention declaration (workload.yaml line 30) lacks lse=");
    decl_make(&d, "out_rows");
    assert_whole(prog, &d, "lacks out_rows=");
    decl_make(&d, NULL);
    d.values[5] = (char *)"result"; /* out= */
    assert_whole(prog, &d, "names out=result, which is not one of its parameters");
    /* no producer split for an attention kernel: it is no rows_independent one */
}

/* A group that holds a point-to-point call is issued as one: nothing of it
 * is scheduled. */
static void test_group_with_p2p(void **state)
{
    (void)state;
    char *grown = tx_replaced(prog, "        ncclGroupEnd();\n",
                              "        ncclSend(k, 16, ncclFloat, 0, c, st);\n"
                              "        ncclGroupEnd();\n");
    decl d;
    decl_make(&d, NULL);
    cuco_tx_result r;
    transform_declared(grown, &d, &r);
    assert_null(strstr(r.program, "cuco_tx::attention_split("));
    assert_null(strstr(r.program, "cuco_tx::early_start("));
    assert_true(tx_has_schedule_note(&r.notes, 16,
                                     "inside ncclGroupStart/ncclGroupEnd with "
                                     "point-to-point calls"));
    cuco_tx_result_free(&r);
    free(grown);
}

/* A declaration with direct initialisation is no call: `dim3 grid(...)`
 * leaves the helper plain code and one launch (the split above), and a
 * kernel split still sees through a namespaced type. */
static void test_declared_name_is_no_call(void **state)
{
    (void)state;
    char *changed =
        tx_replaced(prog, "    dim3 grid(nq, HEADS);\n", "    ::dim3 grid(nq, HEADS);\n");
    decl d;
    decl_make(&d, NULL);
    cuco_tx_result r;
    transform_declared(changed, &d, &r);
    assert_non_null(strstr(r.program, "cuco_tx::attention_split(0, CUCO_SPLIT_0"));
    cuco_tx_result_free(&r);
    free(changed);
}

/* The consumer written in the block of an if (the grid declared there, a
 * check after the launch): the launch in the block is split. */
static void test_attention_split_guarded(void **state)
{
    (void)state;
    char *changed = tx_replaced(
        prog, "    if (parts & 2)\n        attend(q, s, o, nq, nk, st);\n",
        "    if (parts & 2) {\n        dim3 grid(nq, HEADS);\n"
        "        attn<<<grid, 128, 0, st>>>(q, s.k_all, s.v_all, nq, nk, 0, o, nullptr, 64);\n"
        "        CHECK_LAUNCH();\n    }\n");
    decl d;
    decl_make(&d, NULL);
    cuco_tx_result r;
    transform_declared(changed, &d, &r);
    if (!strstr(r.program, "cuco_tx::attention_split(0, CUCO_SPLIT_0, cuco_tx::AttnSpec{")) {
        print_notes(&r);
        fail_msg("the launch in the if's block is not split");
    }
    const char *split = strstr(r.program, "cuco_tx::attention_split(0");
    const char *check = strstr(split, "CHECK_LAUNCH();");
    const char *wait = strstr(r.program, "cuco_tx::early_wait(1, CUCO_EARLY_1);");
    assert_true(check && wait && check < wait);
    cuco_tx_result_free(&r);
    free(changed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_split_applies),
        cmocka_unit_test(test_attention_lend_declared),
        cmocka_unit_test(test_attention_split_refused),
        cmocka_unit_test(test_group_with_p2p),
        cmocka_unit_test(test_declared_name_is_no_call),
        cmocka_unit_test(test_attention_split_guarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
