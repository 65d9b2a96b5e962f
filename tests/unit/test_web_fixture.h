/* test_web_fixture.h: a small synthetic evolution run written through db.h
 * (two islands, four generations, an LLM crossover, failures of several
 * kinds with log excerpts, LLM calls of two models, a meta summary, a second
 * run), shared by the web and report tests. tests/data/web/run.sql is this
 * database dumped with sqlite3 (test_web --write-db PATH regenerates it). */
#ifndef CUCO_TEST_WEB_FIXTURE_H
#define CUCO_TEST_WEB_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "cuco/db.h"

#define FIXTURE_BASE_CODE                                                                          \
    "#include <cstdio>\n"                                                                          \
    "// EVOLVE-BLOCK-START\n"                                                                      \
    "#define CUCO_CHUNK_BYTES 1048576  // cuco:knob 65536 262144 1048576\n"                        \
    "__global__ void step(float *x) { x[threadIdx.x] *= 2.0f; }\n"                                 \
    "// EVOLVE-BLOCK-END\n"                                                                        \
    "int main() { std::printf(\"Verification: PASS\\n\"); return 0; }\n"

static int fixture_program(cuco_db *db, int64_t run, int64_t parent, int64_t parent2, int island,
                           int gen, const char *code, const char *mutator, const char *status,
                           double time_ms, double baseline, const char *metrics, const char *error,
                           int64_t *id)
{
    cuco_db_program p;
    memset(&p, 0, sizeof p);
    p.run_id = run;
    p.parent_id = parent;
    p.second_parent_id = parent2;
    p.island = island;
    p.generation = gen;
    p.code = (char *)code;
    p.code_hash = NULL;
    p.mutator = (char *)mutator;
    p.patch_type = (char *)(gen == 0 ? "full" : "diff");
    p.description = (char *)mutator;
    p.status = (char *)status;
    p.time_ms = time_ms;
    p.score = (time_ms > 0 && !strcmp(status, "ok")) ? baseline / time_ms : -1;
    p.metrics_json = (char *)metrics;
    p.error = (char *)error;
    p.knobs_json = (char *)"{\"CUCO_CHUNK_BYTES\": 1048576}";
    cuco_err e = CUCO_ERR_INIT;
    int rc = db_program_insert(db, &p, id, &e);
    if (rc < 0)
        fprintf(stderr, "fixture: %s\n", cuco_err_msg(&e));
    cuco_err_clear(&e);
    return rc;
}

/* Writes the run into a new database at path. Returns 0 or negative. */
static int fixture_write_db(const char *path)
{
    cuco_db *db = NULL;
    cuco_err e = CUCO_ERR_INIT;
    int64_t run, run2, id[10] = {0}, call;
    const double base = 10.0;
    const char *code2 = "#include <cstdio>\n"
                        "// EVOLVE-BLOCK-START\n"
                        "#define CUCO_CHUNK_BYTES 262144  // cuco:knob 65536 262144 1048576\n"
                        "__global__ void step(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                        "// EVOLVE-BLOCK-END\n"
                        "int main() { std::printf(\"Verification: PASS\\n\"); return 0; }\n";
    const char *code4 = "#include <cstdio>\n"
                        "// EVOLVE-BLOCK-START\n"
                        "#define CUCO_CHUNK_BYTES 262144  // cuco:knob 65536 262144 1048576\n"
                        "__global__ void step(float *x) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  x[i] *= 2.0f;\n"
                        "}\n"
                        "// EVOLVE-BLOCK-END\n"
                        "int main() { std::printf(\"Verification: PASS\\n\"); return 0; }\n";
    const char *code7 = "#include <cstdio>\n"
                        "// EVOLVE-BLOCK-START\n"
                        "#define CUCO_CHUNK_BYTES 65536  // cuco:knob 65536 262144 1048576\n"
                        "__global__ void step(float *x) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  x[i] = x[i] * 2.0f; // fused with the put\n"
                        "}\n"
                        "// EVOLVE-BLOCK-END\n"
                        "int main() { std::printf(\"Verification: PASS\\n\"); return 0; }\n";
    const char *cerr = "program.cu(4): error: identifier \"foo\" is undefined\n"
                       "1 error detected in the compilation of \"program.cu\".\n";
    remove(path);
    int rc = db_open(path, 0, &db, &e);
    if (rc < 0)
        goto out;
    if ((rc = db_run_create(db, "cpu_demo", "{\"islands\": 2, \"generations\": 4}", 7, &run, &e)) <
            0 ||
        (rc = db_run_set_baseline(db, run, base, &e)) < 0)
        goto out;
    if ((rc = fixture_program(db, run, 0, 0, 0, 0, FIXTURE_BASE_CODE, "fast_path", "ok", 8.0, base,
                              "{\"time_ms\": 8.0, \"compute_ms\": 4.5, \"comm_ms\": 4.0}", NULL,
                              &id[1])) < 0 ||
        (rc = fixture_program(db, run, id[1], 0, 0, 1, code2, "knob", "ok", 6.4, base,
                              "{\"time_ms\": 6.4}", NULL, &id[2])) < 0 ||
        (rc = fixture_program(db, run, id[1], 0, 1, 1, code2, "llm_diff", "compile_error", -1, base,
                              NULL, cerr, &id[3])) < 0 ||
        (rc = fixture_program(db, run, id[2], 0, 0, 2, code4, "llm_diff", "ok", 5.5, base,
                              "{\"time_ms\": 5.5}", NULL, &id[4])) < 0 ||
        (rc = fixture_program(db, run, id[1], 0, 1, 2, code4, "llm_full", "wrong_answer", -1, base,
                              NULL, "Verification: FAIL rank 1 mismatch at element 17\n", &id[5])) <
            0 ||
        (rc = fixture_program(db, run, id[1], 0, 1, 2, code4, "llm_diff", "compile_error", -1, base,
                              NULL, cerr, &id[6])) < 0 ||
        (rc = fixture_program(db, run, id[4], id[2], 1, 3, code7, "llm_cross", "ok", 5.0, base,
                              "{\"time_ms\": 5.0}", NULL, &id[7])) < 0 ||
        (rc = fixture_program(db, run, id[7], 0, 0, 3, code7, "knob", "timeout", -1, base, NULL,
                              "timed out after 5.0 s (process group killed)\n", &id[8])) < 0 ||
        (rc = fixture_program(db, run, id[7], 0, 1, 4, code7, "llm_diff", "pending", -1, base, NULL,
                              NULL, &id[9])) < 0)
        goto out;
    cuco_db_llm_call c1 = {run, id[3], "claude-test", 1200, 300, 0, 0.012, 2.5, "h1", "ok"};
    cuco_db_llm_call c2 = {run, id[7], "claude-test", 1500, 500, 1000, 0.020, 3.5, "h2", "ok"};
    cuco_db_llm_call c3 = {run, 0, "gpt-test", 800, 0, 0, 0.005, 1.0, "h3", "http_error"};
    if ((rc = db_llm_call_insert(db, &c1, &call, &e)) < 0 ||
        (rc = db_llm_call_insert(db, &c2, &call, &e)) < 0 ||
        (rc = db_llm_call_insert(db, &c3, &call, &e)) < 0 ||
        (rc = db_meta_insert(db, run, 2, "Smaller chunks help; 2 compile errors on foo.", &e)) < 0)
        goto out;
    cuco_db_eval ev = {"ok", 8.0, "{\"time_ms\": 8.0}", NULL};
    if ((rc = db_eval_store(db, "cpu_demo", "hash-root", &ev, &e)) < 0)
        goto out;
    cuco_db_eval ev2 = {"compile_error", -1, NULL, (char *)cerr};
    if ((rc = db_eval_store(db, "cpu_demo", "hash-bad", &ev2, &e)) < 0)
        goto out;
    if ((rc = db_run_set_status(db, run, "done", &e)) < 0)
        goto out;
    /* a second, newer run of another workload: the API's default run */
    if ((rc = db_run_create(db, "other_demo", "{}", 1, &run2, &e)) < 0 ||
        (rc = db_run_set_baseline(db, run2, 3.0, &e)) < 0 ||
        (rc = fixture_program(db, run2, 0, 0, 0, 0, FIXTURE_BASE_CODE, "fast_path", "ok", 3.0, 3.0,
                              NULL, NULL, &id[0])) < 0)
        goto out;
out:
    if (rc < 0)
        fprintf(stderr, "fixture: %s\n", cuco_err_msg(&e));
    cuco_err_clear(&e);
    db_close(db);
    return rc;
}

#endif
