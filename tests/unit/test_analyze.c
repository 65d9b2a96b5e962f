/* test_analyze.c: the extractor on small tricky programs under
 * tests/data/analyze/, compared field by field with the golden
 * NAME.expect.json next to each; plus spans, folders and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/fs.h"

static char *data_path(const char *name)
{
    const char *d = getenv("CUCO_TEST_DATA");
    char *dir = d ? cuco_strdup(d) : cuco_sprintf("%s/tests/data", CUCO_SOURCE_DIR);
    char *p = cuco_sprintf("%s/analyze/%s", dir, name);
    free(dir);
    return p;
}

static json_t *analyze_one(const char *name)
{
    char *path = data_path(name);
    const char *paths[] = {path};
    json_t *an = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_analyze_paths(paths, 1, &an, &e);
    if (rc)
        fprintf(stderr, "%s: %s\n", name, cuco_err_msg(&e));
    assert_int_equal(rc, 0);
    cuco_err_clear(&e);
    free(path);
    return an;
}

/* Value at a dotted path ("fields.sendbuff.base"); NULL when absent. */
static json_t *at(json_t *o, const char *path)
{
    char *copy = cuco_strdup(path), *save = NULL;
    for (char *p = strtok_r(copy, ".", &save); p && o; p = strtok_r(NULL, ".", &save))
        o = json_object_get(o, p);
    free(copy);
    return o;
}

static void expect_equal(const char *where, const char *key, json_t *want, json_t *got)
{
    json_t *g = got ? got : json_null();
    if (!json_equal(want, g)) {
        char *w = json_dumps(want, JSON_ENCODE_ANY), *v = json_dumps(g, JSON_ENCODE_ANY);
        fprintf(stderr, "%s: %s: want %s, got %s\n", where, key, w, v);
        free(w);
        free(v);
        fail();
    }
}

/* Compares each golden object's keys in section with the analysis array. */
static void compare_section(const char *name, json_t *an, const json_t *gold, const char *section,
                            const char *actual_path, const char *src)
{
    json_t *want = json_object_get(gold, section), *got = at(an, actual_path);
    if (json_array_size(want) != json_array_size(got)) {
        fprintf(stderr, "%s: %s: want %zu entries, got %zu\n", name, section, json_array_size(want),
                json_array_size(got));
        fail();
    }
    size_t i;
    json_t *w;
    json_array_foreach(want, i, w)
    {
        json_t *g = json_array_get(got, i);
        char *where = cuco_sprintf("%s %s[%zu]", name, section, i);
        if (json_is_array(w)) { /* edges: [from, to, kind, via] */
            json_t *as = json_pack("[O,O,O,O]", json_object_get(g, "from"), json_object_get(g, "to"),
                                   json_object_get(g, "kind"), json_object_get(g, "via"));
            expect_equal(where, "edge", w, as);
            json_decref(as);
        } else {
            const char *k;
            json_t *v;
            json_object_foreach(w, k, v)
            {
                if (!strcmp(k, "statement_text")) {
                    size_t s = (size_t)json_integer_value(at(g, "statement.start"));
                    size_t e = (size_t)json_integer_value(at(g, "statement.end"));
                    json_t *t = json_stringn(src + s, e - s);
                    expect_equal(where, k, v, t);
                    json_decref(t);
                } else {
                    expect_equal(where, k, v, at(g, k));
                }
            }
        }
        free(where);
    }
}

/* Compares the analysis of source cu (relative to tests/data/analyze) with
 * the golden gold_name there. */
static void check_golden_of(const char *name, const char *cu_rel, const char *gold_rel)
{
    char *cu = cuco_strdup(cu_rel), *gold_name = cuco_strdup(gold_rel);
    char *gold_path = data_path(gold_name), *src_path = data_path(cu);
    json_error_t jerr;
    json_t *gold = json_load_file(gold_path, 0, &jerr);
    assert_non_null(gold);
    char *src = NULL;
    size_t len = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(src_path, &src, &len, &e), 0);
    json_t *an = analyze_one(cu);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(gold, "counts"), k, v)
    {
        json_t *n = json_integer((json_int_t)json_array_size(json_object_get(an, k)));
        expect_equal(name, k, v, n);
        json_decref(n);
    }
    compare_section(name, an, gold, "collectives", "collectives", src);
    compare_section(name, an, gold, "groups", "groups", src);
    compare_section(name, an, gold, "allocations", "allocations", src);
    compare_section(name, an, gold, "launches", "launches", src);
    compare_section(name, an, gold, "communicators", "communicators", src);
    compare_section(name, an, gold, "edges", "graph.edges", src);
    json_decref(an);
    json_decref(gold);
    free(src);
    free(cu);
    free(gold_name);
    free(gold_path);
    free(src_path);
}

static void check_golden(const char *name)
{
    char *cu = cuco_sprintf("%s.cu", name), *gold = cuco_sprintf("%s.expect.json", name);
    check_golden_of(name, cu, gold);
    free(cu);
    free(gold);
}

/* The host-driven programs of tests/data/transform written in other styles
 * (helpers that rename buffers, arrays of layer structs, ternary and swapped
 * pointers, pointer arithmetic on shards, a communicator class with methods,
 * pointer tables, dtype traits templates and explicit template calls, split
 * communicators, plugin-style pointer arrays, one process driving several
 * GPUs, a halo exchange on a second stream, thrust containers): buffers,
 * counts, dtypes, peers, streams, groups filled by helpers and the data
 * edges through pointer aliases and method calls. */
static void test_foreign_programs(void **state)
{
    (void)state;
    const char *names[] = {"tp_mlp_allreduce",    "pipeline_stages",      "ring_pass",
                           "reduce_scatter_grad", "class_comm_allreduce", "llmc_grad_avg",
                           "ddp_buckets",         "split_tp_dp",          "plugin_allgather",
                           "init_all_single",     "jacobi_halo",          "thrust_overlap"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *cu = cuco_sprintf("../transform/%s/%s.cu", names[i], names[i]);
        char *gold = cuco_sprintf("foreign_%s.expect.json", names[i]);
        check_golden_of(names[i], cu, gold);
        free(cu);
        free(gold);
    }
}

/* A pointer alias ("float *my_params = params + rank * shard") joins the
 * writer under one name to the reader under the other. */
static void test_alias_edges(void **state)
{
    (void)state;
    json_t *an = analyze_one("../transform/reduce_scatter_grad/reduce_scatter_grad.cu");
    /* sgd_update writes my_params = params + rank * shard; the all-gather reads params */
    int found = 0;
    size_t i;
    json_t *edge;
    json_array_foreach(at(an, "graph.edges"), i, edge)
    {
        if (json_integer_value(json_object_get(edge, "from")) == 2 && json_integer_value(json_object_get(edge, "to")) == 3 &&
            !strcmp(json_string_value(json_object_get(edge, "kind")), "data"))
            found = 1;
    }
    assert_true(found);
    json_decref(an);
}

/* Variables of the same name in two functions are two buffers: the
 * reference solver's kernels (d_cur, d_next, d_sum of solve_reference) feed
 * no collective; the all-reduce's data edges come from solve_distributed. */
static void test_scoped_edges(void **state)
{
    (void)state;
    json_t *an = analyze_one("../transform/ref_solver_scopes/ref_solver_scopes.cu");
    json_t *nodes = at(an, "graph.nodes");
    json_int_t coll = json_integer_value(at(json_array_get(at(an, "collectives"), 0), "node"));
    int into = 0;
    size_t i;
    json_t *edge;
    json_array_foreach(at(an, "graph.edges"), i, edge)
    {
        json_t *from = json_array_get(nodes, (size_t)json_integer_value(json_object_get(edge, "from")));
        json_t *to = json_array_get(nodes, (size_t)json_integer_value(json_object_get(edge, "to")));
        assert_string_equal(json_string_value(json_object_get(from, "function")),
                            json_string_value(json_object_get(to, "function")));
        if (json_integer_value(json_object_get(edge, "to")) == coll &&
            !strcmp(json_string_value(json_object_get(edge, "kind")), "data")) {
            assert_string_equal(json_string_value(json_object_get(from, "function")), "solve_distributed");
            into++;
        }
    }
    assert_true(into > 0);
    json_decref(an);
}

static void test_macros_and_comments(void **state)
{
    (void)state;
    check_golden("macros_comments");
    json_t *an = analyze_one("macros_comments.cu");
    /* the wrapper macro is recorded, and the call's span is the call itself */
    json_t *c = json_array_get(json_object_get(an, "collectives"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "wrapper")), "NCCLCHECK");
    json_t *macros = json_object_get(an, "macros");
    assert_int_equal(json_array_size(macros), 2);
    assert_string_equal(json_string_value(at(json_array_get(macros, 0), "name")), "NCCLCHECK");
    assert_string_equal(json_string_value(at(json_array_get(macros, 1), "name")), "ALLREDUCE_SUM");
    /* a macro that hides the collective is a note at its use */
    json_t *n = json_array_get(json_object_get(an, "notes"), 0);
    assert_non_null(n);
    assert_int_equal(json_integer_value(json_object_get(n, "line")), 21);
    assert_non_null(strstr(json_string_value(json_object_get(n, "message")), "ALLREDUCE_SUM"));
    json_decref(an);
}

static void test_multi_comm_loops(void **state)
{
    (void)state;
    check_golden("multi_comm_loops");
    /* the helper's all-reduce is traced to its call site in main */
    json_t *an = analyze_one("multi_comm_loops.cu");
    json_t *f = json_array_get(json_object_get(an, "functions"), 0);
    assert_string_equal(json_string_value(json_object_get(f, "name")), "reduce_grads");
    json_t *site = json_array_get(json_object_get(f, "called_from"), 0);
    assert_non_null(site);
    assert_string_equal(json_string_value(json_object_get(site, "function")), "main");
    assert_int_equal(json_integer_value(json_object_get(site, "line")), 29);
    json_decref(an);
}

static void test_p2p_groups(void **state)
{
    (void)state;
    check_golden("p2p_groups");
}

static void test_launch_graph(void **state)
{
    (void)state;
    check_golden("launch_graph");
    json_t *an = analyze_one("launch_graph.cu");
    json_t *l = json_array_get(json_object_get(an, "launches"), 0);
    /* the template launch keeps its full name and its config arguments */
    assert_string_equal(json_string_value(json_object_get(l, "api")), "scale<float, 4>");
    assert_string_equal(json_string_value(at(l, "config.grid.text")), "g");
    assert_string_equal(json_string_value(at(l, "config.smem.text")), "0");
    /* the launch through a function pointer is a note, not a crash */
    int found = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(an, "notes"), i, n)
    {
        if (json_integer_value(json_object_get(n, "line")) == 31)
            found = 1;
    }
    assert_true(found);
    json_decref(an);
}

static void test_control_flow(void **state)
{
    (void)state;
    check_golden("control_flow");
}

static void test_no_nccl(void **state)
{
    (void)state;
    check_golden("no_nccl");
}

static void test_unterminated_is_tolerated(void **state)
{
    (void)state;
    json_t *an = analyze_one("unterminated.cu");
    assert_int_equal(json_array_size(json_object_get(an, "collectives")), 1);
    assert_true(json_array_size(json_object_get(an, "notes")) >= 2);
    json_decref(an);
}

static void test_folder_follows_includes(void **state)
{
    (void)state;
    char *main_cu = data_path("folder/main.cu");
    const char *paths[] = {main_cu};
    json_t *an = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_analyze_paths(paths, 1, &an, &e), 0);
    assert_int_equal(json_array_size(json_object_get(an, "files")), 2);
    json_t *c = json_array_get(json_object_get(an, "collectives"), 0);
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "kind")), "reduce_scatter");
    assert_string_equal(json_string_value(json_object_get(c, "function")), "run_step");
    assert_string_equal(json_string_value(json_object_get(c, "stream")), "default");
    assert_true(cuco_str_ends_with(json_string_value(json_object_get(c, "file")), "comm_step.cuh"));
    json_decref(an);
    free(main_cu);
}

static void test_unreadable_file(void **state)
{
    (void)state;
    const char *paths[] = {"/nonexistent/cuco/prog.cu"};
    json_t *an = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_analyze_paths(paths, 1, &an, &e), CUCO_EIO);
    assert_null(an);
    assert_string_equal(e.file, "/nonexistent/cuco/prog.cu");
    cuco_err_clear(&e);
}

/* Every prefix (in steps) of every test program, and shuffled token soup,
 * must analyze without crashing (ASan checks the memory). */
static void test_truncated_inputs(void **state)
{
    (void)state;
    const char *tmp = getenv("CUCO_TEST_TMP");
    char *dir = cuco_sprintf("%s/analyze_fuzz", tmp ? tmp : "/tmp");
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *out = cuco_path_join(dir, "cut.cu");
    const char *names[] = {"launch_graph.cu", "macros_comments.cu", "multi_comm_loops.cu", "p2p_groups.cu"};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char *path = data_path(names[n]);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(cuco_fs_read(path, &text, &len, &e), 0);
        for (size_t cut = 0; cut <= len; cut += 11) {
            assert_int_equal(cuco_fs_write(out, text, cut, &e), 0);
            const char *paths[] = {out};
            json_t *an = NULL;
            assert_int_equal(cuco_analyze_paths(paths, 1, &an, &e), 0);
            json_decref(an);
        }
        free(text);
        free(path);
    }
    srand(7);
    static const char *const soup[] = {"ncclSend", "ncclGroupStart", "ncclGroupEnd", "(", ")", "{", "}", ";", ",",
                                       "<<<", ">>>", "<", ">", "for", "while", "do", "k", "&", "*", "cudaMalloc",
                                       "ncclAllReduce", "new", "=", "__global__", "cudaEventRecord",
                                       "cudaStreamWaitEvent", "[", "]", "\"", "#define M ncclAllReduce(\n", "x",
                                       "static_cast", "::", ".", "->", "cublasSgemm", "if", "else"};
    for (int round = 0; round < 150; round++) {
        cuco_buf b = CUCO_BUF_INIT;
        int n = rand() % 80;
        for (int i = 0; i < n; i++)
            cuco_buf_printf(&b, "%s ", soup[rand() % (int)(sizeof soup / sizeof soup[0])]);
        assert_int_equal(cuco_fs_write(out, cuco_buf_str(&b), b.len, &e), 0);
        const char *paths[] = {out};
        json_t *an = NULL;
        assert_int_equal(cuco_analyze_paths(paths, 1, &an, &e), 0);
        json_decref(an);
        cuco_buf_free(&b);
    }
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
    free(out);
    free(dir);
}

static void test_workloads(void **state)
{
    (void)state;
    /* kind and buffers of each workload's collectives, as its README describes */
    struct {
        const char *dir, *api, *kind, *send, *recv;
    } want[] = {
        {"gemm_allgather", "ncclAllGather", "all_gather", "p.x_shard", "s.gathered"},
        {"kv_transfer", "ncclSend", "send", "p.cache", NULL},
        {"flash_attn_cp", "ncclAllGather", "all_gather", "p.k", "s.k_all"},
        {"moe_dispatch_combine", "ncclSend", "send", "s.send_rows", NULL},
    };
    int ran = 0;
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        /* the seed alone: the folder also holds the expert program */
        char *dir = cuco_sprintf("%s/workloads/%s/%s.cu", CUCO_SOURCE_DIR, want[w].dir, want[w].dir);
        if (!cuco_fs_exists(dir)) {
            free(dir);
            continue;
        }
        ran++;
        const char *paths[] = {dir};
        json_t *an = NULL;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_analyze_paths(paths, 1, &an, &e), 0);
        int found = 0;
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(an, "collectives"), i, c)
        {
            if (strcmp(json_string_value(json_object_get(c, "api")), want[w].api))
                continue;
            found = 1;
            assert_string_equal(json_string_value(json_object_get(c, "kind")), want[w].kind);
            assert_string_equal(json_string_value(at(c, "fields.sendbuff.base") ? at(c, "fields.sendbuff.base")
                                                                                 : at(c, "fields.recvbuff.base")),
                                want[w].send);
            if (want[w].recv)
                assert_string_equal(json_string_value(at(c, "fields.recvbuff.base")), want[w].recv);
            break;
        }
        if (!found)
            fprintf(stderr, "%s: no %s found\n", want[w].dir, want[w].api);
        assert_true(found);
        json_decref(an);
        free(dir);
    }
    if (!ran)
        skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_macros_and_comments),
        cmocka_unit_test(test_multi_comm_loops),
        cmocka_unit_test(test_p2p_groups),
        cmocka_unit_test(test_foreign_programs),
        cmocka_unit_test(test_alias_edges),
        cmocka_unit_test(test_scoped_edges),
        cmocka_unit_test(test_launch_graph),
        cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_no_nccl),
        cmocka_unit_test(test_unterminated_is_tolerated),
        cmocka_unit_test(test_folder_follows_includes),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_truncated_inputs),
        cmocka_unit_test(test_workloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
