/* test_program.c: program text utilities: EVOLVE-BLOCK finding (balanced,
 * unbalanced, nested, CRLF), the frozen check and the line it names, and
 * knobs (parsing, a knob without choices, a value outside its choices,
 * setting a value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/program.h"

static const char seed[] = "#include <stdio.h>\n"                             /* 1 */
                           "// EVOLVE-BLOCK-START\n"                          /* 2 */
                           "#define CUCO_TILE 32   // cuco:knob 8 16 32 64\n" /* 3 */
                           "#define OTHER 5\n"                                /* 4 */
                           "static int f(int x) { return x * CUCO_TILE; }\n"  /* 5 */
                           "  // EVOLVE-BLOCK-END (indented marker)\n"        /* 6 */
                           "int check(void) { return 1; }\n"                  /* 7 */
                           "// EVOLVE-BLOCK-START second\n"                   /* 8 */
                           "# define CUCO_CHUNK 4 // cuco:knob 1 2 4 8\n"     /* 9 */
                           "// EVOLVE-BLOCK-END\n"                            /* 10 */
                           "int main(void) { return f(1) != 32; }\n";         /* 11 */

static void test_blocks_found(void **state)
{
    (void)state;
    cuco_block *b = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_blocks(seed, &b, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(b[0].start_line, 2);
    assert_int_equal(b[0].end_line, 6);
    assert_int_equal(b[1].start_line, 8);
    assert_int_equal(b[1].end_line, 10);
    assert_true(!strncmp(seed + b[0].body_start, "#define CUCO_TILE", 17));
    assert_true(!strncmp(seed + b[0].body_end, "  // EVOLVE-BLOCK-END", 21));
    assert_true(!strncmp(seed + b[1].body_start, "# define CUCO_CHUNK", 19));
    free(b);
    assert_int_equal(cuco_program_blocks("int x;\n", &b, &n, &e), 0);
    assert_int_equal(n, 0);
    free(b);
}

static void expect_blocks_error(const char *text, const char *needle)
{
    cuco_block *b = (cuco_block *)1;
    size_t n = 7;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_blocks(text, &b, &n, &e), CUCO_EINVAL);
    assert_null(b);
    assert_int_equal(n, 0);
    if (!strstr(e.msg, needle))
        print_error("message '%s' lacks '%s'\n", e.msg, needle);
    assert_non_null(strstr(e.msg, needle));
    cuco_err_clear(&e);
}

static void test_unbalanced_and_nested_markers(void **state)
{
    (void)state;
    /* START without END is a block to the end only when no END exists at all */
    expect_blocks_error(
        "a\n// EVOLVE-BLOCK-START\nb\n// EVOLVE-BLOCK-END\n// EVOLVE-BLOCK-START\nc\n",
        "line 5: EVOLVE-BLOCK-START is never closed");
    expect_blocks_error("a\nb\n// EVOLVE-BLOCK-END\n", "line 3: EVOLVE-BLOCK-END without");
    expect_blocks_error("// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n"
                        "// EVOLVE-BLOCK-END\n",
                        "line 2: EVOLVE-BLOCK-START inside the block opened at line 1");
}

/* The layout of other evolution tools: START markers only, each block
 * running to the next START or the end of the file. */
static void test_start_only_markers(void **state)
{
    (void)state;
    const char *text = "a\n// EVOLVE-BLOCK-START\nb\n// EVOLVE-BLOCK-START\nc\nd\n";
    cuco_block *b = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_blocks(text, &b, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(b[0].start_line, 2);
    assert_int_equal(b[0].end_line, 4);
    assert_true(!strncmp(text + b[0].body_start, "b\n", 2) && b[0].body_end - b[0].body_start == 2);
    assert_int_equal(b[1].start_line, 4);
    assert_true(!strcmp(text + b[1].body_start, "c\nd\n"));
    assert_int_equal((int)b[1].body_end, (int)strlen(text));
    free(b);
    /* the frozen text is what precedes the first START, and the markers */
    assert_int_equal(cuco_program_check_frozen(text,
                                               "a\n// EVOLVE-BLOCK-START\nB\n// "
                                               "EVOLVE-BLOCK-START\nC\n",
                                               &e),
                     0);
    assert_int_equal(cuco_program_check_frozen(text,
                                               "A\n// EVOLVE-BLOCK-START\nb\n// "
                                               "EVOLVE-BLOCK-START\nc\nd\n",
                                               &e),
                     CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_marker_needs_line_comment(void **state)
{
    (void)state;
    /* A string or code mentioning the marker is not a marker. */
    const char *text = "const char *s = \"// EVOLVE-BLOCK-START\";\n/* EVOLVE-BLOCK-END */\n";
    cuco_block *b = NULL;
    size_t n = 9;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_blocks(text, &b, &n, &e), 0);
    assert_int_equal(n, 0);
    free(b);
}

static void test_crlf_line_endings(void **state)
{
    (void)state;
    const char *text = "int a;\r\n// EVOLVE-BLOCK-START\r\n#define K 2 // cuco:knob 1 2\r\n"
                       "// EVOLVE-BLOCK-END\r\nint b;\r\n";
    cuco_block *b = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_blocks(text, &b, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(b[0].start_line, 2);
    assert_int_equal(b[0].end_line, 4);
    free(b);
    cuco_knob *k = NULL;
    assert_int_equal(cuco_program_knobs(text, &k, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(k[0].value, "2");
    assert_int_equal(k[0].choices.n, 2);
    assert_string_equal(k[0].choices.items[1], "2"); /* no '\r' kept */
    assert_int_equal(k[0].value_in_choices, 1);
    cuco_knobs_free(k, n);
    char *out = NULL;
    assert_int_equal(cuco_program_set_knob(text, "K", "1", &out, &e), 0);
    assert_non_null(strstr(out, "#define K 1 // cuco:knob 1 2\r\n"));
    assert_int_equal(cuco_program_check_frozen(text, out, &e), 0);
    free(out);
    /* The same program with LF endings differs in its frozen bytes. */
    const char *lf = "int a;\n// EVOLVE-BLOCK-START\n#define K 2 // cuco:knob 1 2\n"
                     "// EVOLVE-BLOCK-END\nint b;\n";
    assert_int_equal(cuco_program_check_frozen(text, lf, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 1 "));
    cuco_err_clear(&e);
}

/* Run knobs: two programs that differ only in a run knob's value stage to the
 * same text, the value goes to the environment, and a run knob whose values
 * are not integers stays a build knob. */
static void test_run_knobs_stage(void **state)
{
    (void)state;
    const char *a = "int x;\n// EVOLVE-BLOCK-START\n#define R 4 // cuco:knob run 1 4 16\n"
                    "#define B 2 // cuco:knob 1 2\n#define S fast // cuco:knob run fast slow\n"
                    "int y = R;\n// EVOLVE-BLOCK-END\n";
    cuco_err e = CUCO_ERR_INIT;
    cuco_knob *k = NULL;
    size_t n = 0;
    assert_int_equal(cuco_program_knobs(a, &k, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(k[0].run, 1);
    assert_string_equal(k[0].choices.items[0], "1"); /* "run" is not a choice */
    assert_int_equal(k[0].choices.n, 3);
    assert_int_equal(k[1].run, 0);
    assert_int_equal(k[2].run, 0); /* not integers: built in */
    cuco_knobs_free(k, n);
    char *b = NULL, *sa = NULL, *sb = NULL;
    assert_int_equal(cuco_program_set_knob(a, "R", "16", &b, &e), 0);
    cuco_strlist ea = {0}, eb = {0};
    assert_int_equal(cuco_program_stage_run_knobs(a, &sa, &ea, &e), 0);
    assert_int_equal(cuco_program_stage_run_knobs(b, &sb, &eb, &e), 0);
    assert_non_null(sa);
    assert_string_equal(sa, sb);
    assert_non_null(strstr(sa, "#define R cuco_run_knob(\"CUCO_KNOB_R\", 1) // cuco:knob run"));
    assert_non_null(strstr(sa, "#define B 2 //"));
    assert_non_null(strstr(sa, "#line 1\nint x;\n"));
    assert_int_equal(ea.n, 1);
    assert_string_equal(ea.items[0], "CUCO_KNOB_R=4");
    assert_string_equal(eb.items[0], "CUCO_KNOB_R=16");
    /* a program without run knobs is built as it is */
    char *none = NULL;
    cuco_strlist en = {0};
    assert_int_equal(cuco_program_stage_run_knobs(seed, &none, &en, &e), 0);
    assert_null(none);
    assert_int_equal(en.n, 0);
    free(b);
    free(sa);
    free(sb);
    cuco_strlist_free(&ea);
    cuco_strlist_free(&eb);
}

static void test_frozen_check(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_check_frozen(seed, seed, &e), 0);

    /* Anything may change inside the blocks, including their length. */
    cuco_buf cand = CUCO_BUF_INIT;
    const char *body = strstr(seed, "static int f");
    cuco_buf_append(&cand, seed, (size_t)(body - seed));
    cuco_buf_puts(
        &cand, "static int helper(void) { return 2; }\nstatic int f(int x) { return x * 32; }\n");
    cuco_buf_puts(&cand, strstr(seed, "  // EVOLVE-BLOCK-END"));
    assert_int_equal(cuco_program_check_frozen(seed, cand.data, &e), 0);
    cuco_buf_free(&cand);

    /* An edit after the first block is reported at its line in the candidate. */
    char *edited = cuco_strdup(seed);
    char *check = strstr(edited, "return 1;");
    check[7] = '0';
    assert_int_equal(cuco_program_check_frozen(seed, edited, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 7 of the candidate"));
    assert_non_null(strstr(e.msg, "int check(void) { return 0; }"));
    cuco_err_clear(&e);
    free(edited);

    /* Line numbers follow the candidate when its block grew. */
    cuco_buf grown = CUCO_BUF_INIT;
    cuco_buf_append(&grown, seed, (size_t)(body - seed));
    cuco_buf_puts(&grown, "int extra1;\nint extra2;\n");
    cuco_buf_puts(&grown, body);
    char *tail = strstr(grown.data, "int main(void)");
    tail[4] = 'M';
    assert_int_equal(cuco_program_check_frozen(seed, grown.data, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 13 of the candidate"));
    cuco_err_clear(&e);
    cuco_buf_free(&grown);

    /* Removing a block changes the frozen text. */
    const char *one_block = "#include <stdio.h>\n// EVOLVE-BLOCK-START\n  // EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_check_frozen(seed, one_block, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "it has 1 EVOLVE-BLOCKs, the seed 2"));
    cuco_err_clear(&e);

    /* A candidate with broken markers is rejected with the reason. */
    assert_int_equal(
        cuco_program_check_frozen(
            seed, "// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n// EVOLVE-BLOCK-START\n", &e),
        CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "candidate program: line 3: EVOLVE-BLOCK-START is never closed"));
    cuco_err_clear(&e);

    /* Text appended at the end is frozen too. */
    char *appended = cuco_sprintf("%sint more;\n", seed);
    assert_int_equal(cuco_program_check_frozen(seed, appended, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 12 of the candidate"));
    cuco_err_clear(&e);
    free(appended);
}

static void test_knobs(void **state)
{
    (void)state;
    cuco_knob *k = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_knobs(seed, &k, &n, &e), 0);
    assert_int_equal(n, 2); /* OTHER has no cuco:knob tag */
    assert_string_equal(k[0].name, "CUCO_TILE");
    assert_string_equal(k[0].value, "32");
    assert_int_equal(k[0].line, 3);
    assert_int_equal(k[0].choices.n, 4);
    assert_string_equal(k[0].choices.items[3], "64");
    assert_int_equal(k[0].value_in_choices, 1);
    assert_string_equal(k[1].name, "CUCO_CHUNK");
    assert_int_equal(k[1].line, 9);
    cuco_knobs_free(k, n);

    /* Knob lines outside the blocks are not knobs. */
    const char *outside =
        "#define X 1 // cuco:knob 1 2\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_knobs(outside, &k, &n, &e), 0);
    assert_int_equal(n, 0);
    free(k);
}

static void test_knob_without_choices(void **state)
{
    (void)state;
    const char *text = "// EVOLVE-BLOCK-START\n#define A 1 // cuco:knob 1 2\n"
                       "#define B 4   // cuco:knob\n// EVOLVE-BLOCK-END\n";
    cuco_knob *k = (cuco_knob *)1;
    size_t n = 5;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_knobs(text, &k, &n, &e), CUCO_EINVAL);
    assert_null(k);
    assert_int_equal(n, 0);
    assert_non_null(strstr(e.msg, "line 3: knob B lists no choices"));
    cuco_err_clear(&e);
    const char *no_value =
        "// EVOLVE-BLOCK-START\n#define C // cuco:knob 1 2\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_knobs(no_value, &k, &n, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 2: knob C has no value"));
    cuco_err_clear(&e);
    const char *twice =
        "// EVOLVE-BLOCK-START\n#define D 1 // cuco:knob 1 2\n#define D 2 // cuco:knob 1 2\n"
        "// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_knobs(twice, &k, &n, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 3: knob D is already declared at line 2"));
    cuco_err_clear(&e);
}

/* 'when NAME=V[,V]' after the choices: conditions, not choices; one that
 * is not NAME=VALUE, or 'when' with none after it, is refused at its line. */
static void test_knob_conditions(void **state)
{
    (void)state;
    const char *text = "// EVOLVE-BLOCK-START\n#define CE 0 // cuco:knob 0 1\n"
                       "#define CTAS 8 // cuco:knob 8 16 when CE=0 MODE=a,b\n// EVOLVE-BLOCK-END\n";
    cuco_knob *k = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_knobs(text, &k, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(k[0].when.n, 0);
    assert_int_equal(k[1].choices.n, 2);
    assert_int_equal(k[1].when.n, 2);
    assert_string_equal(k[1].when.items[0], "CE=0");
    assert_string_equal(k[1].when.items[1], "MODE=a,b");
    cuco_knobs_free(k, n);
    const char *bad =
        "// EVOLVE-BLOCK-START\n#define X 1 // cuco:knob 1 2 when CE\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_knobs(bad, &k, &n, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 2: knob X has a condition that is not NAME=VALUE"));
    cuco_err_clear(&e);
    const char *none =
        "// EVOLVE-BLOCK-START\n#define X 1 // cuco:knob 1 2 when\n// EVOLVE-BLOCK-END\n";
    assert_int_equal(cuco_program_knobs(none, &k, &n, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "line 2: knob X has 'when' and no condition"));
    cuco_err_clear(&e);
}

static void test_value_not_among_choices_is_kept(void **state)
{
    (void)state;
    const char *text =
        "// EVOLVE-BLOCK-START\n#define T 48 // cuco:knob 16 32 64\n// EVOLVE-BLOCK-END\n";
    cuco_knob *k = NULL;
    size_t n = 0;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_knobs(text, &k, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(k[0].value, "48");
    assert_int_equal(k[0].value_in_choices, 0);
    assert_int_equal(k[0].choices.n, 3);
    cuco_knobs_free(k, n);
}

static void test_set_knob(void **state)
{
    (void)state;
    char *out = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_program_set_knob(seed, "CUCO_TILE", "128", &out, &e), 0);
    assert_non_null(strstr(out, "#define CUCO_TILE 128   // cuco:knob 8 16 32 64\n"));
    assert_int_equal(strlen(out), strlen(seed) + 1);
    assert_int_equal(cuco_program_check_frozen(seed, out, &e), 0);
    cuco_knob *k = NULL;
    size_t n = 0;
    assert_int_equal(cuco_program_knobs(out, &k, &n, &e), 0);
    assert_string_equal(k[0].value, "128");
    assert_int_equal(k[0].value_in_choices, 0);
    assert_string_equal(k[1].value, "4");
    cuco_knobs_free(k, n);
    free(out);

    assert_int_equal(cuco_program_set_knob(seed, "CUCO_CHUNK", "8", &out, &e), 0);
    assert_non_null(strstr(out, "# define CUCO_CHUNK 8 // cuco:knob 1 2 4 8\n"));
    free(out);

    assert_int_equal(cuco_program_set_knob(seed, "OTHER", "6", &out, &e), CUCO_ENOTFOUND);
    assert_null(out);
    assert_non_null(strstr(e.msg, "no knob named OTHER"));
    assert_int_equal(cuco_program_set_knob(seed, "CUCO_TILE", "1 2", &out, &e), CUCO_EINVAL);
    assert_int_equal(cuco_program_set_knob(seed, "CUCO_TILE", "", &out, &e), CUCO_EINVAL);
    assert_null(out);
    cuco_err_clear(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_found),
        cmocka_unit_test(test_unbalanced_and_nested_markers),
        cmocka_unit_test(test_start_only_markers),
        cmocka_unit_test(test_marker_needs_line_comment),
        cmocka_unit_test(test_crlf_line_endings),
        cmocka_unit_test(test_frozen_check),
        cmocka_unit_test(test_knobs),
        cmocka_unit_test(test_run_knobs_stage),
        cmocka_unit_test(test_knob_without_choices),
        cmocka_unit_test(test_knob_conditions),
        cmocka_unit_test(test_value_not_among_choices_is_kept),
        cmocka_unit_test(test_set_knob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
