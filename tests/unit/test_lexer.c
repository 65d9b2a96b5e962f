/* test_lexer.c: the tolerant CUDA C++ lexer: token kinds and positions,
 * literals, comments, continuations, diagnostics, and robustness on random
 * and truncated input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/fs.h"

static size_t count_kind(const cuco_lex *lx, enum cuco_tok_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < lx->ntoks; i++)
        n += lx->toks[i].kind == k;
    return n;
}

static void test_kinds_and_positions(void **state)
{
    (void)state;
    const char *src = "#include <nccl.h>\nint x = 0x1F + 1.5e-3f;\n  k<float, 4><<<g, b>>>(x >> 1);\n";
    cuco_lex lx;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_lex_run(&lx, src, strlen(src), &e), 0);
    assert_int_equal(lx.toks[0].kind, CUCO_TOK_PREPROC);
    assert_true(lx.toks[0].dir_len == 7 && !memcmp(src + lx.toks[0].dir_off, "include", 7));
    assert_int_equal(lx.toks[1].kind, CUCO_TOK_IDENT);
    assert_true(cuco_tok_is(&lx, &lx.toks[1], "int"));
    assert_int_equal(lx.toks[1].line, 2);
    assert_int_equal(lx.toks[1].col, 1);
    assert_true(cuco_tok_is(&lx, &lx.toks[4], "0x1F"));
    assert_true(cuco_tok_is(&lx, &lx.toks[6], "1.5e-3f"));
    assert_int_equal(lx.toks[6].kind, CUCO_TOK_NUMBER);
    int chevron_open = 0, chevron_close = 0, shift = 0;
    for (size_t i = 0; i < lx.ntoks; i++) {
        if (cuco_tok_is(&lx, &lx.toks[i], "<<<")) {
            chevron_open = 1;
            assert_int_equal(lx.toks[i].line, 3);
            assert_int_equal(lx.toks[i].col, 14);
            assert_int_equal(lx.toks[i].off, (size_t)(strstr(src, "<<<") - src));
        }
        chevron_close |= cuco_tok_is(&lx, &lx.toks[i], ">>>");
        shift |= cuco_tok_is(&lx, &lx.toks[i], ">>");
    }
    assert_true(chevron_open && chevron_close && shift);
    assert_int_equal(lx.ndiags, 0);
    cuco_lex_free(&lx);
}

static void test_literals_and_comments(void **state)
{
    (void)state;
    const char *src = "a = \"x\\\"y // not a comment\"; /* c1 \n */ b = 'q'; c = '\\''; // tail\n"
                      "d = R\"delim(raw \" )\" text)delim\"; e = u8\"u\"; f = L'w';\n"
                      "#define M(x) \\\n   ncclAllReduce(x)\ng;\n";
    cuco_lex lx;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_lex_run(&lx, src, strlen(src), &e), 0);
    assert_int_equal(count_kind(&lx, CUCO_TOK_COMMENT), 2);
    assert_int_equal(count_kind(&lx, CUCO_TOK_STRING), 3);
    assert_int_equal(count_kind(&lx, CUCO_TOK_CHAR), 3);
    assert_int_equal(count_kind(&lx, CUCO_TOK_PREPROC), 1);
    for (size_t i = 0; i < lx.ntoks; i++) {
        const cuco_tok *t = &lx.toks[i];
        if (t->kind == CUCO_TOK_STRING && src[t->off] == 'R')
            assert_true(cuco_tok_is(&lx, t, "R\"delim(raw \" )\" text)delim\""));
        if (t->kind == CUCO_TOK_PREPROC) { /* the continuation keeps the macro in one token */
            char *text = cuco_strndup(src + t->off, t->len);
            assert_non_null(strstr(text, "ncclAllReduce"));
            free(text);
        }
        if (cuco_tok_is(&lx, t, "g"))
            assert_int_equal(t->line, 6);
    }
    assert_int_equal(lx.ndiags, 0);
    cuco_lex_free(&lx);
}

static void test_unterminated_diagnostics(void **state)
{
    (void)state;
    const char *cases[] = {"x = \"abc\ny;", "c = 'a", "/* open", "r = R\"xx(never", "r = R\"toolongdelimiter_abc(x"};
    int lines[] = {1, 1, 1, 1, 1};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cuco_lex lx;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_lex_run(&lx, cases[c], strlen(cases[c]), &e), 0);
        assert_true(lx.ndiags >= 1);
        assert_int_equal(lx.diags[0].line, lines[c]);
        cuco_lex_free(&lx);
    }
}

/* Tokens never overlap and stay inside the input. */
static void check_sane(const char *src, size_t len)
{
    cuco_lex lx;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_lex_run(&lx, src, len, &e), 0);
    size_t prev_end = 0;
    for (size_t i = 0; i < lx.ntoks; i++) {
        assert_true(lx.toks[i].off >= prev_end);
        assert_true(lx.toks[i].len > 0);
        prev_end = lx.toks[i].off + lx.toks[i].len;
        assert_true(prev_end <= len);
    }
    cuco_lex_free(&lx);
}

static void test_random_bytes(void **state)
{
    (void)state;
    srand(12345);
    static const char alphabet[] = "\"'\\/*#R()<>\n\r\t u8Lx09.eE+-_;{}[]";
    for (int round = 0; round < 2000; round++) {
        size_t len = (size_t)(rand() % 200);
        char *buf = malloc(len + 1);
        assert_non_null(buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = round % 2 ? (char)(rand() % 256) : alphabet[rand() % (int)(sizeof alphabet - 1)];
        buf[len] = '\0';
        check_sane(buf, len);
        free(buf);
    }
}

static void test_truncated_real_files(void **state)
{
    (void)state;
    const char *data = getenv("CUCO_TEST_DATA");
    if (!data)
        skip();
    const char *names[] = {"analyze/launch_graph.cu", "analyze/macros_comments.cu", "analyze/p2p_groups.cu"};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char *path = cuco_path_join(data, names[n]);
        char *text = NULL;
        size_t len = 0;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_fs_read(path, &text, &len, &e), 0);
        for (size_t cut = 0; cut <= len; cut += 7) {
            char *copy = malloc(cut + 1); /* exact size so ASan sees any overread */
            memcpy(copy, text, cut);
            copy[cut] = '\0';
            check_sane(copy, cut);
            free(copy);
        }
        free(text);
        free(path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_and_positions),
        cmocka_unit_test(test_literals_and_comments),
        cmocka_unit_test(test_unterminated_diagnostics),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_truncated_real_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
