/* test_patch.c: the patch engine on tests/data/patch/: SEARCH/REPLACE (exact,
 * whitespace-tolerant, missing and ambiguous matches naming the block, an
 * unclosed block), full EVOLVE-BLOCK rewrites (with markers and fences, bare
 * body, wrong block count), the frozen guard, and the block guard on
 * cpu_demo's seed with hostile lines put into its EVOLVE-BLOCK (each refused
 * with its line) and legal knobs (accepted), and the real seeds under
 * workloads/ with their headers (accepted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/patch.h"

static char *data(const char *name)
{
    const char *d = getenv("CUCO_TEST_DATA");
    assert_non_null(d);
    char *p = cuco_sprintf("%s/patch/%s", d, name);
    char *text = NULL;
    size_t len;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(p, &text, &len, &e), 0);
    free(p);
    return text;
}

static void test_diff_exact(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ok.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "int y = x * 4;"));
    assert_null(strstr(out, "int y = x * 2;"));
    assert_non_null(strstr(out, "#define CUCO_BLOCK 16 //"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(base), free(resp), free(out);
}

static void test_diff_whitespace_tolerant(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ws.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "    int y = x << 1;\n    return y + 1;\n}\n"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(base), free(resp), free(out);
}

static void test_diff_missing_names_block(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_missing.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_null(out);
    assert_non_null(strstr(cuco_err_msg(&e), "block 2"));
    assert_non_null(strstr(cuco_err_msg(&e), "not found"));
    assert_non_null(strstr(cuco_err_msg(&e), "int z = nothing();"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_diff_ambiguous(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_ambiguous.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "block 1"));
    assert_non_null(strstr(cuco_err_msg(&e), "more than once"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_diff_unclosed_and_empty(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_unclosed.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "not closed"));
    assert_int_equal(e.line, 1);
    cuco_err_clear(&e);
    assert_int_equal(cuco_patch_apply_diff(base, "just prose, no edit\n", &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "no SEARCH/REPLACE block"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

static void test_guard_refuses_outside_edit(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("diff_outside.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_diff(base, resp, &out, &e), 0);
    assert_int_equal(cuco_patch_guard(base, out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "outside the EVOLVE-BLOCKs"));
    cuco_err_clear(&e);
    free(base), free(resp), free(out);
}

static void test_rewrite(void **state)
{
    (void)state;
    char *base = data("base.c"), *resp = data("rewrite.txt"), *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_apply_rewrite(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "return 2 * x + 1;"));
    assert_null(strstr(out, "```"));
    assert_non_null(strstr(out, "int main(void)"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(out);
    free(resp);
    resp = data("rewrite_bare.txt");
    assert_int_equal(cuco_patch_apply_rewrite(base, resp, &out, &e), 0);
    assert_non_null(strstr(out, "// EVOLVE-BLOCK-START\n#define CUCO_BLOCK 16"));
    assert_non_null(strstr(out, "x + x + 1; }\n// EVOLVE-BLOCK-END\n"));
    assert_int_equal(cuco_patch_guard(base, out, &e), 0);
    free(out);
    /* two blocks in the answer, one in the program */
    const char *two = "// EVOLVE-BLOCK-START\na\n// EVOLVE-BLOCK-END\n"
                      "// EVOLVE-BLOCK-START\nb\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_patch_apply_rewrite(base, two, &out, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "2 EVOLVE-BLOCKs"));
    cuco_err_clear(&e);
    free(base), free(resp);
}

/* cpu_demo's seed (the workload as shipped). Caller frees. */
static char *cpu_demo_seed(void)
{
    const char *src = getenv("CUCO_SRC");
    assert_non_null(src);
    char *p = cuco_sprintf("%s/workloads/cpu_demo/main.c", src);
    char *text = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_fs_read(p, &text, NULL, &e), 0);
    free(p);
    return text;
}

/* seed with lines put at the top of its first EVOLVE-BLOCK (or, with
 * at_end, just before its END marker). Caller frees. */
static char *with_block_lines(const char *seed, const char *lines, int at_end)
{
    const char *marker = at_end ? "// EVOLVE-BLOCK-END\n" : "// EVOLVE-BLOCK-START\n";
    const char *at = strstr(seed, marker);
    assert_non_null(at);
    size_t cut = (size_t)(at - seed) + (at_end ? 0 : strlen(marker));
    return cuco_sprintf("%.*s%s%s", (int)cut, seed, lines, seed + cut);
}

/* The 1-based line where lines start in with_block_lines(seed, .., 0). */
static int block_first_line(const char *seed)
{
    const char *at = strstr(seed, "// EVOLVE-BLOCK-START\n");
    int line = 2;
    for (const char *p = seed; p < at; p++)
        line += *p == '\n';
    return line;
}

static const struct hostile {
    const char *lines;
    const char *reason; /* a part of the message */
} hostile[] = {
    {"#define fabs(x) 0.0\n", "#define fabs: the frozen code uses 'fabs'"},
    /* C: the same static declared first in the block is the frozen one */
    {"static unsigned char nonce_masked[64], nonce_key[64];\n", "declares 'nonce_masked'"},
    {"static size_t nonce_len;\n", "declares 'nonce_len'"},
    {"static double fake_clock(void) { return 1.0; }\n#define MPI_Wtime fake_clock\n",
     "#define MPI_Wtime"},
    {"#define return return 0;\n", "#define return"},
    {"#  undef MPI_COMM_WORLD\n", "#undef MPI_COMM_WORLD"},
    {"#define printf(...) 0\n", "#define printf"},
    {"#define __builtin_memcmp(a, b, n) 0\n", "reserved identifier"},
    {"#define _Verify 1\n", "reserved identifier"},
    {"#line 1 \"other.c\"\n", "#line"},
    {"# 1 \"other.c\"\n", "#line"},
    {"#assert machine(cuco)\n", "#assert is not allowed"},
    {"#pragma push_macro(\"fabs\")\n", "#pragma push_macro"},
    {"#pragma GCC optimize(\"fast-math\")\n", "#pragma GCC optimize"},
    {"_Pragma(\"pop_macro(\\\"fabs\\\")\")\n", "_Pragma"},
    {"#include \"/etc/hostname\"\n", "#include: includes belong to the frozen part"},
    {"#include <tgmath.h>\n", "#include: includes belong to the frozen part"},
    {"static const char *cuco_key = \"CUCO_NONCE\";\n", "CUCO_NONCE"},
    {"#define CUCO_NONCE_COPY CUCO_NONCE\n", "CUCO_NONCE"},
    {"extern char **environ;\n", "environ"},
    {"__attribute__((constructor)) static void early(void) {}\n", "constructor"},
    {"__attribute__((destructor)) static void late(void) {}\n", "destructor"},
    {"#define CUCO_LATE destructor\n", "destructor"},
    {"__attribute__((section(\".init_array\"))) static void (*f)(void) = 0;\n", ".init_array"},
    {"double MPI_Wtime(void) { return 0.0; }\n", "defines a function named 'MPI_Wtime'"},
    {"extern \"C\" {\ndouble MPI_Wtime(void) { return 0.0; }\n}\n", "named 'MPI_Wtime'"},
    {"double cuco_clock(void) __asm__(\"MPI_Wtime\");\n", "asm outside a function body"},
    {"auto MPI_Wtime() -> double { return 0.0; }\n", "defines a function named 'MPI_Wtime'"},
    {"namespace std {\nint cuco_x;\n}\n", "opens namespace std"},
    {"template <> struct std::hash<int *> { };\n", "specializes a std:: template"},
    {"template <> inline void std::swap<int>(int &a, int &b) { }\n", "specializes a std::"},
    {"template <> void std::swap<std::vector<int>>(std::vector<int> &a, std::vector<int> &b) {}\n",
     "specializes a std::"},
    {"#if 0\n", "#if opened in the block is not closed"},
    {"}\n", "closes a brace of the frozen code"},
    {"#endif\n", "#endif closes an #if of the frozen code"},
    {"#else\n", "#else belongs to an #if of the frozen code"},
    {"?\?=define fabs(x) 0.0\n", "trigraph"},
    {"%:define fabs(x) 0.0\n", "'#' or '%:'"},
    {"#\\\ndefine fabs(x) 0.0\n", "#define fabs"},
};

static void test_block_guard_refuses_hostile_lines(void **state)
{
    (void)state;
    char *seed = cpu_demo_seed();
    int line = block_first_line(seed);
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        char *cand = with_block_lines(seed, hostile[i].lines, 0);
        cuco_err e = CUCO_ERR_INIT;
        int rc = cuco_patch_guard(seed, cand, &e);
        if (rc != CUCO_EINVAL || !strstr(cuco_err_msg(&e), hostile[i].reason))
            fail_msg("case %zu (%s): rc %d, message '%s'", i, hostile[i].lines, rc,
                     cuco_err_msg(&e));
        if (e.line < line || e.line > line + 1)
            fail_msg("case %zu: line %d, not %d or %d", i, e.line, line, line + 1);
        assert_non_null(strstr(cuco_err_msg(&e), "inside an EVOLVE-BLOCK"));
        cuco_err_clear(&e);
        free(cand);
    }
    free(seed);
}

static void test_block_guard_refuses_what_escapes_the_block(void **state)
{
    (void)state;
    char *seed = cpu_demo_seed();
    const char *tails[] = {"/* an open comment swallows the frozen text\n",
                           "#define CUCO_TAIL 1 \\\n", "static const char *cuco_s = R\"(\n",
                           "struct cuco_wrap {\n"};
    const char *why[] = {"runs past the block's end", "runs past the block's end",
                         "runs past the block's end", "'{' opened in the block is not closed"};
    for (size_t i = 0; i < 4; i++) {
        char *cand = with_block_lines(seed, tails[i], 1);
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_patch_guard(seed, cand, &e), CUCO_EINVAL);
        if (!strstr(cuco_err_msg(&e), why[i]))
            fail_msg("tail %zu: %s", i, cuco_err_msg(&e));
        cuco_err_clear(&e);
        free(cand);
    }
    free(seed);
}

/* A block may include a header the frozen text already includes before it
 * (a transformed program's glue includes <cublas_v2.h> again), not one the
 * frozen text includes only after it, nor one it never includes. */
static void test_block_guard_frozen_includes(void **state)
{
    (void)state;
    const char *seed = "#include <cublas_v2.h>\n// EVOLVE-BLOCK-START\nint f(void);\n"
                       "// EVOLVE-BLOCK-END\n#include <zlib.h>\nint main(void) { return 0; }\n";
    const char *again = "#include <cublas_v2.h>\n// EVOLVE-BLOCK-START\n#include <cublas_v2.h>\n"
                        "int f(void);\n// EVOLVE-BLOCK-END\n#include <zlib.h>\n"
                        "int main(void) { return 0; }\n";
    const char *later = "#include <cublas_v2.h>\n// EVOLVE-BLOCK-START\n#include <zlib.h>\n"
                        "int f(void);\n// EVOLVE-BLOCK-END\n#include <zlib.h>\n"
                        "int main(void) { return 0; }\n";
    const char *other = "#include <cublas_v2.h>\n// EVOLVE-BLOCK-START\n#include <unistd.h>\n"
                        "int f(void);\n// EVOLVE-BLOCK-END\n#include <zlib.h>\n"
                        "int main(void) { return 0; }\n";
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_patch_guard(seed, again, &e) != 0)
        fail_msg("re-including a frozen header refused: %s", cuco_err_msg(&e));
    assert_int_equal(cuco_patch_guard(seed, later, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "#include"));
    cuco_err_clear(&e);
    assert_int_equal(cuco_patch_guard(seed, other, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_block_guard_accepts_knobs(void **state)
{
    (void)state;
    char *seed = cpu_demo_seed();
    const char *legal =
        "#define CUCO_TILE 4 // cuco:knob 2 4 8\n"
        "#define cuco_min(a, b) ((a) < (b) ? (a) : (b))\n"
        "#undef CUCO_TILE\n#define CUCO_TILE 8\n"
        "#if CUCO_TILE > 2\n#define CUCO_WIDE 1\n#else\n#define CUCO_WIDE 0\n#endif\n"
        "#include <cstdio>\n#  include \"cuco_device.cuh\"\n"
        "#pragma GCC diagnostic ignored \"-Wunused-function\"\n"
        "namespace cuco_lib {\nstatic int printf(int x) { return x; }\n}\n"
        "static int cuco_twice(int x)\n{\n#pragma unroll\n"
        "    for (int i = 0; i < 1; i++)\n        x += x;\n"
        "    __asm__ volatile(\"\" ::: \"memory\");\n    return cuco_min(x, CUCO_WIDE);\n}\n"
        /* parameters named like frozen variables declare nothing at file scope */
        "extern int cuco_link(const char *nonce_len, const char *nonce_key);\n"
        /* a specialization of the block's own template */
        "template <> inline float cuco_conv<float>(float x) { return x; }\n"
        "template <> struct cuco_is_ok<float> : std::true_type {};\n"
        "template <> std::size_t cuco_bytes<std::vector<int>>(int n) { return n; }\n";
    char *cand = with_block_lines(seed, legal, 0);
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_patch_guard(seed, cand, &e) != 0)
        fail_msg("legal block refused: %s", cuco_err_msg(&e));
    /* a knob the frozen code reads, defined by the seed's block too, may
     * change; another frozen name may not */
    const char *knob_seed = "// EVOLVE-BLOCK-START\n#define SCALE 1\n// EVOLVE-BLOCK-END\n"
                            "int main(void) { return SCALE - 1; }\n";
    const char *knob_cand = "// EVOLVE-BLOCK-START\n#define SCALE 2\n// EVOLVE-BLOCK-END\n"
                            "int main(void) { return SCALE - 1; }\n";
    const char *main_cand = "// EVOLVE-BLOCK-START\n#define SCALE 1\n#define main other\n"
                            "// EVOLVE-BLOCK-END\nint main(void) { return SCALE - 1; }\n";
    assert_int_equal(cuco_patch_guard(knob_seed, knob_cand, &e), 0);
    assert_int_equal(cuco_patch_guard(knob_seed, main_cand, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "#define main"));
    assert_int_equal(e.line, 3);
    cuco_err_clear(&e);
    assert_int_equal(cuco_patch_guard_blocks(NULL, knob_cand, NULL, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
    /* the block's own hooks (cuco_step, defined by the seed's block too) */
    assert_int_equal(cuco_patch_guard_blocks(seed, seed, NULL, &e), 0);
    free(cand);
    free(seed);
}

static void test_defined_functions(void **state)
{
    (void)state;
    const char *text = "static int a(int x) { return x; }\n"
                       "struct S { void m() const {} };\n"
                       "int b(void);\n"
                       "auto c(int x) -> int { if (x) { return x; } return 0; }\n"
                       "auto d(int x) -> decltype(x + 1) { return x + 1; }\n";
    cuco_strlist names = {0};
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_defined_functions(text, &names, &e), 0);
    assert_int_equal(names.n, 4);
    assert_string_equal(names.items[0], "a");
    assert_string_equal(names.items[1], "m");
    assert_string_equal(names.items[2], "c");
    assert_string_equal(names.items[3], "d");
    cuco_strlist_free(&names);
}

static void test_block_guard_reads_the_headers(void **state)
{
    (void)state;
    char *seed = cpu_demo_seed();
    char *cand = with_block_lines(seed, "#define hx_timer_now() 0.0\n", 0);
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_patch_guard_blocks(seed, cand, NULL, &e), 0);
    const char *header = "common/harness.cuh\n40\n#define HX_NOW() hx_timer_now()\n";
    assert_int_equal(cuco_patch_guard_blocks(seed, cand, header, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "hx_timer_now"));
    cuco_err_clear(&e);
    free(cand);
    free(seed);
}

/* Every shipped seed passes the guard with its own headers. */
static void test_block_guard_accepts_the_seeds(void **state)
{
    (void)state;
    static const char *const names[] = {"cpu_demo", "gemm_allgather", "flash_attn_cp",
                                        "kv_transfer", "moe_dispatch_combine"};
    const char *src = getenv("CUCO_SRC");
    assert_non_null(src);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *dir = cuco_sprintf("%s/workloads/%s", src, names[i]);
        cuco_workload *w = NULL;
        char *seed = NULL, *context = NULL;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_workload_load(dir, &w, &e), 0);
        assert_int_equal(cuco_workload_read_seed(w, &seed, &e), 0);
        assert_int_equal(cuco_eval_frozen_context(w, &context, &e), 0);
        if (strcmp(names[i], "cpu_demo"))
            assert_non_null(strstr(context, "harness.cuh"));
        if (cuco_patch_guard_blocks(seed, seed, context, &e) != 0)
            fail_msg("%s: %s", names[i], cuco_err_msg(&e));
        free(context);
        free(seed);
        cuco_workload_free(w);
        free(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_exact),
        cmocka_unit_test(test_diff_whitespace_tolerant),
        cmocka_unit_test(test_diff_missing_names_block),
        cmocka_unit_test(test_diff_ambiguous),
        cmocka_unit_test(test_diff_unclosed_and_empty),
        cmocka_unit_test(test_guard_refuses_outside_edit),
        cmocka_unit_test(test_rewrite),
        cmocka_unit_test(test_block_guard_refuses_hostile_lines),
        cmocka_unit_test(test_block_guard_refuses_what_escapes_the_block),
        cmocka_unit_test(test_block_guard_accepts_knobs),
        cmocka_unit_test(test_block_guard_frozen_includes),
        cmocka_unit_test(test_block_guard_reads_the_headers),
        cmocka_unit_test(test_defined_functions),
        cmocka_unit_test(test_block_guard_accepts_the_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
