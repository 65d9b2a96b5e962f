/* test_redact.c: src/eval/redact.c: secrets in excerpts become
 * "[redacted]" (and text that only looks a bit like one stays), and the
 * compiler output of `#include "/outside/file"` from gcc, clang and nvcc
 * keeps the outside file's locations but none of its text, while the
 * diagnostics about the program's own files stay whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/redact.h"

static void expect_secrets(const char *in, const char *want)
{
    char *got = cuco_redact_secrets(in);
    assert_non_null(got);
    if (strcmp(got, want))
        fprintf(stderr, "in:   %s\ngot:  %s\nwant: %s\n", in, got, want);
    assert_string_equal(got, want);
    /* redacting again changes nothing */
    char *again = cuco_redact_secrets(got);
    assert_string_equal(again, got);
    free(again);
    free(got);
}

static void test_secrets(void **state)
{
    (void)state;
    expect_secrets("OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234\n", "OPENAI_API_KEY=[redacted]\n");
    expect_secrets("ANTHROPIC_API_KEY=test-key-1234 PATH=/bin",
                   "ANTHROPIC_API_KEY=[redacted] PATH=/bin");
    expect_secrets("got sk-ant-api03-AbCdEf0123456789xyz_-Q in the output",
                   "got [redacted] in the output");
    expect_secrets("Authorization: Bearer abc.def-123_456==", "Authorization: Bearer [redacted]");
    expect_secrets("curl -H 'authorization: bearer abcdefgh12'",
                   "curl -H 'authorization: bearer [redacted]'");
    expect_secrets("aws AKIAIOSFODNN7EXAMPLE end", "aws [redacted] end");
    expect_secrets("{\"api_key\": \"0123456789abcdef0123456789abcdef\", \"n\": 1}",
                   "{\"api_key\": \"[redacted]\", \"n\": 1}");
    expect_secrets("client_secret = dGhpcyBpcyBhIHNlY3JldDEyMw==;", "client_secret = [redacted];");
    expect_secrets("access_token: ghp_abcdefghijklmnopqrstuvwxyz0123", "access_token: [redacted]");
    expect_secrets("PASSWORD=correcthorse9battery", "PASSWORD=[redacted]");
    expect_secrets("x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA PRIVATE "
                   "KEY-----\ny",
                   "x\n[redacted]\ny");
    /* not secrets */
    static const char *const keep[] = {
        "main.c:3:5: error: expected ';' before ':' token",
        "int key = 3; int token = 42;",
        "sk-short and sk-",
        "task-1234567890123456789012 (no boundary before sk-)",
        "the keyboard and tokens: 12",
        "password: hunter2",
        "key = compute_the_value_of_x(y)",
        "Bearer of bad news",
        "time_ms 12.5 CUCO_RESULT {\"time_ms\": 12.5, \"iters\": 10}",
        "",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        expect_secrets(keep[i], keep[i]);
    char *none = cuco_redact_secrets(NULL);
    assert_string_equal(none, "");
    free(none);
}

/* A build folder with main.c and an outside folder with a "passwd" whose
 * text must not come through. */
typedef struct tree {
    char *root, *build, *outside, *passwd;
} tree;

static void tree_make(tree *t)
{
    const char *tmp = getenv("CUCO_TEST_TMP");
    cuco_err e = CUCO_ERR_INIT;
    t->root = cuco_sprintf("%s/redact.%ld", tmp ? tmp : "/tmp", (long)getpid());
    t->build = cuco_path_join(t->root, "build");
    t->outside = cuco_path_join(t->root, "outside");
    t->passwd = cuco_path_join(t->outside, "passwd");
    assert_int_equal(cuco_fs_mkdirs(t->build, &e), 0);
    assert_int_equal(cuco_fs_mkdirs(t->outside, &e), 0);
    char *main_c = cuco_path_join(t->build, "main.c");
    static const char text[] = "root:x:0:0:root:/root:/bin/bash\n";
    assert_int_equal(cuco_fs_write(main_c, "int main(void) { return x; }\n", 29, &e), 0);
    assert_int_equal(cuco_fs_write(t->passwd, text, sizeof text - 1, &e), 0);
    free(main_c);
}

static void tree_free(tree *t)
{
    char *main_c = cuco_path_join(t->build, "main.c");
    remove(main_c);
    remove(t->passwd);
    rmdir(t->build);
    rmdir(t->outside);
    rmdir(t->root);
    free(main_c);
    free(t->root);
    free(t->build);
    free(t->outside);
    free(t->passwd);
}

/* log with every "@" replaced by the outside file's path */
static char *with_path(const char *log, const char *path)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (const char *p = log; *p; p++)
        if (*p == '@')
            cuco_buf_puts(&b, path);
        else
            cuco_buf_putc(&b, *p);
    return cuco_buf_detach(&b);
}

static char *redact_log(const tree *t, const char *log, const char *extra_root)
{
    char *text = with_path(log, t->passwd);
    const char *roots[] = {t->build, extra_root};
    char *out = cuco_redact_compiler_output(text, t->build, roots, extra_root ? 2 : 1);
    assert_non_null(out);
    free(text);
    return out;
}

static void expect_in(const char *out, const char *want)
{
    if (!strstr(out, want))
        fprintf(stderr, "missing '%s' in:\n%s\n", want, out);
    assert_non_null(strstr(out, want));
}

static void expect_out(const char *out, const char *unwanted)
{
    if (strstr(out, unwanted))
        fprintf(stderr, "'%s' came through in:\n%s\n", unwanted, out);
    assert_null(strstr(out, unwanted));
}

/* gcc 13, clang 14 and nvcc 12 on `#include "/outside/passwd"` */
static const char gcc_log[] =
    "In file included from main.c:2:\n"
    "@:1:5: error: expected '=', ',', ';', 'asm' or '__attribute__' before ':' token\n"
    "    1 | root:x:0:0:root:/root:/bin/bash\n"
    "      |     ^\n"
    "main.c:1:25: error: 'x' undeclared (first use in this function)\n"
    "    1 | int main(void) { return x; }\n"
    "      |                         ^\n";
static const char clang_log[] =
    "In file included from main.c:2:\n"
    "@:1:1: warning: type specifier missing, defaults to 'int' [-Wimplicit-int]\n"
    "root:x:0:0:root:/root:/bin/bash\n"
    "^\n"
    "@:1:5: error: expected ';' after top level declarator\n"
    "root:x:0:0:root:/root:/bin/bash\n"
    "    ^\n"
    "    ;\n"
    "1 warning and 1 error generated.\n";
static const char nvcc_log[] = "@(1): error: this declaration has no storage class or type "
                               "specifier\n"
                               "  root:x:0:0:root:/root:/bin/bash\n"
                               "  ^\n"
                               "\n"
                               "2 errors detected in the compilation of \"main.c\".\n";

static void test_compiler_output(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    char *loc = cuco_sprintf("%s:1:5: error: [withheld", t.passwd);

    char *out = redact_log(&t, gcc_log, NULL);
    expect_in(out, "In file included from main.c:2:\n");
    expect_in(out, loc);
    expect_out(out, "root");
    expect_out(out, "asm");
    /* the program's own diagnostic is whole, quote and caret included */
    expect_in(out, "main.c:1:25: error: 'x' undeclared (first use in this function)\n"
                   "    1 | int main(void) { return x; }\n"
                   "      |                         ^\n");
    free(out);

    out = redact_log(&t, clang_log, NULL);
    expect_out(out, "root");
    expect_out(out, "declarator");
    expect_in(out, loc);
    expect_in(out, ":1:1: warning: [withheld");
    expect_in(out, "1 warning and 1 error generated.\n");
    free(out);

    out = redact_log(&t, nvcc_log, NULL);
    expect_out(out, "root");
    expect_out(out, "storage class");
    char *nv = cuco_sprintf("%s(1): error: [withheld", t.passwd);
    expect_in(out, nv);
    expect_in(out, "2 errors detected in the compilation of \"main.c\".\n");
    free(nv);
    free(out);

    /* a relative path that leads out of the build folder is outside too */
    out = cuco_redact_compiler_output("../outside/passwd:1:5: error: bad\n    1 | root:x\n",
                                      t.build, (const char *const[]){t.build}, 1);
    expect_in(out, "../outside/passwd:1:5: error: [withheld");
    expect_out(out, "root");
    expect_out(out, "bad");
    free(out);

    /* a folder among the roots (an include folder of the build) is inside */
    out = redact_log(&t, gcc_log, t.outside);
    expect_in(out, "    1 | root:x:0:0:root:/root:/bin/bash\n");
    free(out);

    /* a quoted line shaped like a location whose path is no file is still
     * withheld, and a file that does not exist counts as outside */
    out = cuco_redact_compiler_output("/nonexistent/h:3:1: error: x\nsecret:1:2: text\n"
                                      "main.c:1:1: note: here\n",
                                      t.build, (const char *const[]){t.build}, 1);
    expect_out(out, "secret");
    expect_in(out, "/nonexistent/h:3:1: error: [withheld");
    expect_in(out, "main.c:1:1: note: here\n");
    free(out);

    free(loc);
    tree_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secrets),
        cmocka_unit_test(test_compiler_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
