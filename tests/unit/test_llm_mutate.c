/* test_llm_mutate.c: the LLM mutators behind the engine's mutator interface,
 * against the replay server: a good diff becomes a child with its model and
 * explanation, an edit outside the EVOLVE-BLOCK and prose without an edit fail
 * with the patch engine's reason, the parent and the failures reach the
 * prompt, and an unknown kind or a missing session is refused. */
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuco/fs.h"
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"

extern char **environ;

static const char *seed = "int frozen;\n"
                          "// EVOLVE-BLOCK-START\n"
                          "#define CHUNK 4  // cuco:knob 1 2 4 8\n"
                          "// EVOLVE-BLOCK-END\n"
                          "int main(void) { return 0; }\n";

static void test_llm_mutator(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    const char *src = getenv("CUCO_SRC") ? getenv("CUCO_SRC") : CUCO_SOURCE_DIR;
    const char *tmp = getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp";
    char *dir = cuco_sprintf("%s/llm-mutate-%d", tmp, (int)getpid());
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    char *script_path = cuco_path_join(dir, "script.json");
    char *port_path = cuco_path_join(dir, "port");
    char *log_path = cuco_path_join(dir, "log.jsonl");
    const char *script =
        "{\"openai\": ["
        "{\"text\": \"Double it.\\n<<<<<<< SEARCH\\n#define CHUNK 4  // cuco:knob 1 2 4 "
        "8\\n=======\\n"
        "#define CHUNK 8  // cuco:knob 1 2 4 8\\n>>>>>>> REPLACE\\n\", \"usage\": {\"input\": 5, "
        "\"output\": 5}},"
        "{\"text\": \"<<<<<<< SEARCH\\nint frozen;\\n=======\\nint thawed;\\n>>>>>>> REPLACE\\n\","
        " \"usage\": {\"input\": 5, \"output\": 5}},"
        "{\"text\": \"I would rather not.\", \"usage\": {\"input\": 5, \"output\": 5}}]}";
    assert_int_equal(cuco_fs_write(script_path, script, strlen(script), &e), 0);
    char *server = cuco_sprintf("%s/tests/replay/replay_server.py", src);
    char *argv[] = {"python3", server, script_path, port_path, log_path, NULL};
    pid_t pid;
    assert_int_equal(posix_spawnp(&pid, "python3", NULL, NULL, argv, environ), 0);
    char *port = NULL;
    for (int i = 0; i < 200 && !port; i++) {
        if (cuco_fs_exists(port_path))
            cuco_fs_read(port_path, &port, NULL, &e);
        else
            usleep(25000);
    }
    assert_non_null(port);
    char *base = cuco_sprintf("http://127.0.0.1:%d", atoi(port));

    const char *models[] = {"openai:local-coder", NULL};
    cuco_llm_session_opts so;
    memset(&so, 0, sizeof so);
    so.models = models;
    so.temperature = -1;
    so.client.openai_base_url = base;
    so.client.max_retries = -1;
    cuco_llm_session *s = NULL;
    assert_int_equal(cuco_llm_session_new(&so, &s, &e), 0);
    const char *summary = "Chunk 4 was the best so far.";
    cuco_llm_mutator_opts mo = {s, &summary, "2x test GPU"};
    cuco_mutator *m = NULL;
    assert_int_equal(cuco_llm_mutator_create("nope", &mo, &m, &e), CUCO_ENOTFOUND);
    cuco_llm_mutator_opts no_session = {NULL, NULL, NULL};
    assert_int_equal(cuco_llm_mutator_create("llm_diff", &no_session, &m, &e), CUCO_EINVAL);
    assert_int_equal(cuco_llm_mutator_create("llm_diff", &mo, &m, &e), 0);
    assert_string_equal(m->name, "llm_diff");

    cuco_db_program parent;
    memset(&parent, 0, sizeof parent);
    parent.code = (char *)seed;
    parent.score = 1.0;
    cuco_db_program failure;
    memset(&failure, 0, sizeof failure);
    failure.status = "compile_error";
    failure.error = "main.c:3: error: CHUNK redefined";
    cuco_mutate_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.seed_text = seed;
    ctx.parent = &parent;
    ctx.failures = &failure;
    ctx.n_failures = 1;

    cuco_mutation out;
    assert_int_equal(m->propose(m, &ctx, &out, &e), 0);
    assert_non_null(strstr(out.text, "#define CHUNK 8"));
    assert_non_null(strstr(out.text, "int frozen;"));
    assert_string_equal(out.patch_type, "knob:diff"); /* only a knob value changed */
    assert_string_equal(out.description, "openai:local-coder: Double it.");
    cuco_mutation_free(&out);

    assert_true(m->propose(m, &ctx, &out, &e) < 0);
    assert_non_null(strstr(cuco_err_msg(&e), "outside the EVOLVE-BLOCKs"));
    assert_null(out.text);
    assert_true(m->propose(m, &ctx, &out, &e) < 0);
    assert_non_null(strstr(cuco_err_msg(&e), "llm_diff (openai:local-coder)"));

    char *log = NULL;
    assert_int_equal(cuco_fs_read(log_path, &log, NULL, &e), 0);
    assert_non_null(strstr(log, "CHUNK redefined"));
    assert_non_null(strstr(log, "Chunk 4 was the best so far."));
    assert_non_null(strstr(log, "2x test GPU"));
    free(log);

    cuco_mutator_free(m);
    cuco_llm_session_free(s);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    cuco_fs_remove_tree(dir, &e);
    cuco_err_clear(&e);
    free(base);
    free(port);
    free(server);
    free(script_path);
    free(port_path);
    free(log_path);
    free(dir);
}

int main(void)
{
    char *py = cuco_which("python3");
    if (!py) {
        fprintf(stderr, "test_llm_mutate: python3 not found, skipping\n");
        return 77;
    }
    free(py);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llm_mutator)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
