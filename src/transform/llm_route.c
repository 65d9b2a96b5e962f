/* llm_route.c: the LLM route of the fast path (see transform_llm.h). A
 * staged loop of model edits, each applied, checked, built (and verified
 * when a GPU is here) with the errors fed back, then a judge and the static
 * check, then gen_0/ written like the rule route writes it. */
#include "cuco/transform_llm.h"
#include "tx_common.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/llm.h"
#include "cuco/patch.h"
#include "cuco/proc.h"
#include "cuco/program.h"
#include "cuco/toolchain.h"

/* Bytes of an error excerpt fed back to the model. */
#define FEEDBACK_MAX 6000

static const char *const stage_goal[2] = {
    "Add the infrastructure for device-initiated communication and nothing "
    "else: allocate the buffers that the collectives use as symmetric memory "
    "(ncclMemAlloc, or cuco::symm_create of the device library, which also "
    "registers the window and creates the device communicator), register the "
    "window (NCCL_WIN_COLL_SYMMETRIC), create the device communicator "
    "(ncclDevCommCreate) after the communicator is initialized, and release "
    "them in the right order before it is destroyed. Keep the existing host "
    "collectives for now: after this step the program must still build and "
    "produce the same results.",
    "Replace every host-driven NCCL collective or point-to-point call on the "
    "communication path by device-initiated communication: kernels that move "
    "the data themselves through the window (LSA pointers over NVLink, LSA "
    "barriers or signals for synchronization), using the device library's "
    "functions where they fit. Keep the results exactly as before. After this "
    "step no host collective may remain on the communication path.",
};

struct route {
    const cuco_workload *w;
    const cuco_transform_llm_opts *o;
    char *seed;
    char *system;
    char *llm_dir; /* gen_0/llm: prompts and answers */
    char *work;
    int gpu;
    int has_blocks;
    int n_calls;
    cuco_llm_session *session;
    json_t *calls; /* every call as recorded */
    json_t *steps; /* every attempt and what became of it */
    char *stop;    /* why the route stopped early (budget, calls failing), or NULL */
    /* the route's state, step by step (cuco_transform_llm) */
    char *ws, *gen0, *prog_path, *seed_copy, *diff, *program;
    char *fb_a, *fb_b, *judge_text, *judge_fail; /* the stages' last feedback, the judge's word */
    cuco_tx_notes notes;
    cuco_eval_result prog_r, seed_r;
    int have_prog_r, have_seed_r;
    int64_t run_id, prog_id;
    int att_a, att_b, done_a, done_b, judged, judge_pass, passed, transformed;
    const char *verification;
    double t0;
};

static void say(const struct route *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct route *r, const char *fmt, ...)
{
    if (!r->o->progress)
        return;
    cuco_buf line = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf_vprintf(&line, fmt, ap);
    va_end(ap);
    if (line.len)
        r->o->progress(r->o->progress_ctx, cuco_buf_str(&line));
    cuco_buf_free(&line);
}

static int record_call(void *ctx, const cuco_llm_call_record *rec, cuco_err *e)
{
    struct route *r = ctx;
    json_t *c =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:i, s:s}", "model", rec->model,
                  "purpose", rec->purpose, "status", rec->status, "input_tokens",
                  (json_int_t)rec->input_tokens, "cached_tokens", (json_int_t)rec->cached_tokens,
                  "cache_write_tokens", (json_int_t)rec->cache_write_tokens, "output_tokens",
                  (json_int_t)rec->output_tokens, "cost_usd", rec->cost_usd, "latency_s",
                  rec->latency_s, "attempts", rec->attempts, "prompt_hash", rec->prompt_hash);
    if (!c)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rec->error)
        json_object_set_new(c, "error", json_string(rec->error));
    json_array_append_new(r->calls, c);
    return 0;
}

static int write_transcript(struct route *r, const char *purpose, const char *kind,
                            const char *text, cuco_err *e)
{
    char *name = cuco_sprintf("%02d-%s.%s.md", r->n_calls, purpose, kind);
    char *path = name ? cuco_path_join(r->llm_dir, name) : NULL;
    int rc = path ? cuco_fs_write(path, text, strlen(text), e)
                  : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(name);
    free(path);
    return rc;
}

/* One call. 0 with *answer (caller frees), or 0 with *answer NULL and
 * *failure (caller frees) when the call failed in a way the next one may not;
 * r->stop is set (and 0 returned) when no further call should be made. */
static int ask(struct route *r, const char *purpose, const char *user, char **answer,
               char **failure, cuco_err *e)
{
    *answer = *failure = NULL;
    r->n_calls++;
    int rc = write_transcript(r, purpose, "prompt", user, e);
    if (rc)
        return rc;
    const char *systems[1] = {r->system}, *users[1] = {user};
    cuco_llm_reply reply;
    memset(&reply, 0, sizeof reply);
    cuco_err ce = CUCO_ERR_INIT;
    rc = cuco_llm_session_ask(r->session, purpose, systems, users, 1, &reply, &ce);
    if (rc == CUCO_EBUDGET) {
        r->stop = cuco_strdup(cuco_err_msg(&ce));
        rc = 0;
    } else if (rc) {
        cuco_err_set(e, rc, "%s", cuco_err_msg(&ce));
    } else if (reply.resp.status == CUCO_LLM_OK) {
        *answer = cuco_strdup(reply.resp.text ? reply.resp.text : "");
        rc = *answer ? write_transcript(r, purpose, "answer", *answer, e)
                     : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    } else if (cuco_llm_session_fatal(r->session)) {
        r->stop = cuco_sprintf("the LLM calls cannot work: %s", cuco_llm_session_fatal(r->session));
    } else {
        *failure =
            cuco_sprintf("the LLM call failed (%s): %s", cuco_llm_status_name(reply.resp.status),
                         reply.resp.error ? reply.resp.error : "no answer");
    }
    cuco_llm_response_free(&reply.resp);
    cuco_err_clear(&ce);
    return rc;
}

static char *cut(const char *text, size_t max)
{
    size_t n = strlen(text);
    if (n <= max)
        return cuco_strdup(text);
    /* the end of a log usually holds the error that stopped it */
    return cuco_sprintf("[... %zu bytes cut ...]\n%s", n - max, text + n - max);
}

static void step(struct route *r, char stage, int attempt, const char *result, const char *detail)
{
    char st[2] = {stage, 0};
    json_t *s = json_pack("{s:s, s:i, s:s}", "stage", st, "attempt", attempt, "result", result);
    if (s && detail)
        json_object_set_new(s, "detail", json_string(detail));
    if (s)
        json_array_append_new(r->steps, s);
}

/* The static check's errors as lines ("line N: text"); caller frees. */
static char *check_errors(const cuco_tx_notes *notes)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (size_t i = 0; i < notes->n; i++)
        if (!strcmp(notes->items[i].kind, "error"))
            cuco_buf_printf(&b, "line %d: %s\n", notes->items[i].line, notes->items[i].text);
    return cuco_buf_detach(&b);
}

/* Checks and evaluates one candidate of stage (0: A, 1: B). 0 with *feedback
 * NULL when it passed, or 0 with *feedback (caller frees) saying why not. */
static int try_candidate(struct route *r, int stage, const char *cand, char **feedback,
                         const char **result, cuco_err *e)
{
    *feedback = NULL;
    cuco_err ce = CUCO_ERR_INIT;
    int rc = 0;
    if (r->has_blocks && cuco_program_check_frozen(r->seed, cand, &ce)) {
        *result = "frozen text changed";
        *feedback = cuco_sprintf("Your edit changed text outside the EVOLVE-BLOCKs, which is "
                                 "frozen: %s. Make the change inside the blocks.",
                                 cuco_err_msg(&ce));
        goto out;
    }
    if (stage == 1) {
        cuco_tx_notes notes;
        memset(&notes, 0, sizeof notes);
        int passed = 0;
        if ((rc = cuco_transform_check(r->w->evolve_file, cand, &passed, &notes, e))) {
            cuco_tx_notes_free(&notes);
            goto out;
        }
        if (!passed) {
            char *errs = check_errors(&notes);
            *result = "static check failed";
            *feedback =
                cuco_sprintf("The static device-initiated check failed:\n%s", errs ? errs : "");
            free(errs);
        } else if (!r->has_blocks && cuco_llm_block_count(cand) == 0) {
            *result = "no EVOLVE-BLOCK";
            *feedback = cuco_strdup("The program has no EVOLVE-BLOCK: put // EVOLVE-BLOCK-START "
                                    "and // EVOLVE-BLOCK-END lines around the communication "
                                    "code you wrote.");
        }
        cuco_tx_notes_free(&notes);
        if (*feedback)
            goto out;
    }
    cuco_eval_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.work_dir = r->work;
    eo.max_level = r->gpu ? 2 : 1;
    eo.frozen_ref = cand; /* checked above against the seed where it has blocks */
    cuco_eval_result er;
    if ((rc = cuco_eval_program(r->w, cand, &eo, &er, e)))
        goto out;
    if (er.status != CUCO_EVAL_OK) {
        char *log = cut(er.excerpt ? er.excerpt : "", FEEDBACK_MAX);
        *result = cuco_eval_status_name(er.status);
        *feedback = cuco_sprintf("%s (%s):\n```\n%s\n```",
                                 er.level == 0 ? "The program did not build"
                                               : "The program built but failed when run",
                                 cuco_eval_status_name(er.status), log ? log : "");
        free(log);
    } else {
        *result = r->gpu ? "built and verified" : "built";
    }
    cuco_eval_result_free(&er);
out:
    cuco_err_clear(&ce);
    return rc;
}

/* Runs one stage on *program (replaced by the accepted edit). *done is 1 when
 * an edit passed; *attempts counts the edits asked for. */
static int run_stage(struct route *r, int stage, char **program, int *attempts, int *done,
                     char **last_feedback, cuco_err *e)
{
    char name = stage ? 'B' : 'A';
    const char *purpose = stage ? "transform_b" : "transform_a";
    int max = r->o->max_attempts > 0 ? r->o->max_attempts : 4;
    char *tmpl = NULL, *feedback = NULL;
    int rc = cuco_llm_template_load("transform_stage.md", &tmpl, e);
    *done = 0;
    *attempts = 0;
    for (int a = 1; rc == 0 && a <= max && !*done && !r->stop; a++) {
        char st[2] = {name, 0}, at[16], mx[16];
        snprintf(at, sizeof at, "%d", a);
        snprintf(mx, sizeof mx, "%d", max);
        cuco_llm_var vars[] = {{"program", *program},
                               {"stage", st},
                               {"attempt", at},
                               {"max_attempts", mx},
                               {"goal", stage_goal[stage]},
                               {"feedback", feedback}};
        cuco_buf user = CUCO_BUF_INIT;
        if ((rc = cuco_llm_template_fill(tmpl, "transform_stage.md", vars,
                                         sizeof vars / sizeof vars[0], &user, e))) {
            cuco_buf_free(&user);
            break;
        }
        say(r, "stage %c: asking for edit %d of %d", name, a, max);
        char *answer = NULL, *failure = NULL;
        rc = ask(r, purpose, cuco_buf_str(&user), &answer, &failure, e);
        cuco_buf_free(&user);
        if (rc || r->stop) {
            free(answer);
            free(failure);
            break;
        }
        (*attempts)++;
        free(feedback);
        feedback = NULL;
        if (!answer) {
            step(r, name, a, "llm call failed", failure);
            feedback = failure;
            continue;
        }
        char *cand = NULL;
        cuco_err pe = CUCO_ERR_INIT;
        if (cuco_patch_apply_diff(*program, answer, &cand, &pe)) {
            feedback = cuco_sprintf("Your edit did not apply: %s. Copy the SEARCH lines exactly "
                                    "from the current program.",
                                    cuco_err_msg(&pe));
            step(r, name, a, "edit did not apply", cuco_err_msg(&pe));
        } else {
            const char *result = NULL;
            say(r, "stage %c: checking and building edit %d", name, a);
            rc = try_candidate(r, stage, cand, &feedback, &result, e);
            if (!rc) {
                step(r, name, a, result, feedback);
                /* the next edit repairs this one (shown with its errors),
                 * unless it broke the frozen text, which no edit may keep */
                if (!feedback || strcmp(result, "frozen text changed")) {
                    free(*program);
                    *program = cand;
                    cand = NULL;
                }
                *done = !feedback;
            }
        }
        cuco_err_clear(&pe);
        free(cand);
        free(answer);
    }
    *last_feedback = feedback;
    free(tmpl);
    return rc;
}

/* The system prompt: workload, analysis, refusals, notes, device library.
 * The rules' refusals and the calls they left host NCCL are also added to
 * notes (kind "note"). */
static int build_system(struct route *r, cuco_tx_notes *notes, cuco_err *e)
{
    const cuco_workload *w = r->w;
    char *tmpl = NULL, *api = NULL, *strategies = NULL, *devdoc = NULL, *path = NULL;
    cuco_buf analysis = CUCO_BUF_INIT, refusals = CUCO_BUF_INIT, hw = CUCO_BUF_INIT;
    cuco_buf out = CUCO_BUF_INIT;
    json_t *aj = NULL;
    cuco_tx_result tr;
    memset(&tr, 0, sizeof tr);
    int rc;
    if ((rc = cuco_llm_template_load("transform_system.md", &tmpl, e)) ||
        (rc = cuco_llm_context_load("nccl_device_api.md", &api, e)) ||
        (rc = cuco_llm_context_load("strategies.md", &strategies, e)))
        goto out;
    /* what cuco analyze sees in the evolve file */
    path = cuco_path_join(w->dir, w->evolve_file);
    const char *paths[1] = {path};
    cuco_err ae = CUCO_ERR_INIT;
    if (path && cuco_analyze_paths(paths, 1, &aj, &ae) == 0)
        cuco_analyze_summary(aj, &analysis);
    else
        cuco_buf_printf(&analysis, "(the analysis failed: %s)\n", cuco_err_msg(&ae));
    cuco_err_clear(&ae);
    /* what the rules refused and why */
    if ((rc = cuco_transform_rules_declared(w->evolve_file, r->seed, w->semantics, w->n_semantics,
                                            &tr, e)))
        goto out;
    for (size_t i = 0; i < tr.notes.n; i++)
        if (!strcmp(tr.notes.items[i].kind, "refused") || !strcmp(tr.notes.items[i].kind, "kept")) {
            int kept = tr.notes.items[i].kind[0] == 'k';
            cuco_buf_printf(&refusals, "- %s:%d: %s%s\n", w->evolve_file, tr.notes.items[i].line,
                            kept ? "left host NCCL: " : "", tr.notes.items[i].text);
            if ((rc = cuco_tx_notes_add(notes, tr.notes.items[i].line, "note", "the rules %s: %s",
                                        kept ? "left host NCCL" : "refused",
                                        tr.notes.items[i].text))) {
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                goto out;
            }
        }
    /* the device library's notes, from the source tree the build uses */
    int known = 0;
    char *repo = cuco_workload_placeholder(w, NULL, "repo", &known);
    char *docpath = repo ? cuco_path_join(repo, "docs/device.md") : NULL;
    free(repo);
    cuco_err de = CUCO_ERR_INIT;
    if (docpath && cuco_fs_exists(docpath))
        cuco_fs_read(docpath, &devdoc, NULL, &de);
    cuco_err_clear(&de);
    free(docpath);
    cuco_toolchain tc;
    cuco_err te = CUCO_ERR_INIT;
    if (cuco_toolchain_detect(&tc, &te) == 0) {
        cuco_llm_format_hardware(&tc, NULL, &hw);
        cuco_toolchain_free(&tc);
    }
    cuco_err_clear(&te);
    cuco_llm_var vars[] = {
        {"workload", w->name},
        {"file", w->evolve_file},
        {"description", w->description},
        {"gpu", r->gpu ? "1" : NULL},
        {"has_blocks", r->has_blocks ? "1" : NULL},
        {"analysis", analysis.len ? cuco_buf_str(&analysis) : "(nothing found)"},
        {"refusals", refusals.len ? cuco_buf_str(&refusals) : NULL},
        {"hardware", hw.len ? cuco_buf_str(&hw) : NULL},
        {"api_notes", api},
        {"strategies", strategies},
        {"device_lib", devdoc},
    };
    if ((rc = cuco_llm_template_fill(tmpl, "transform_system.md", vars,
                                     sizeof vars / sizeof vars[0], &out, e)))
        goto out;
    r->system = cuco_buf_detach(&out);
    if (!r->system)
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
out:
    json_decref(aj);
    cuco_tx_result_free(&tr);
    cuco_buf_free(&analysis);
    cuco_buf_free(&refusals);
    cuco_buf_free(&hw);
    cuco_buf_free(&out);
    free(tmpl);
    free(api);
    free(strategies);
    free(devdoc);
    free(path);
    return rc;
}

int cuco_transform_llm_verdict(const char *answer, int *pass, cuco_err *e)
{
    const char *p = answer ? answer : "";
    while (*p && (isspace((unsigned char)*p) || *p == '*' || *p == '#' || *p == '_' || *p == '`'))
        p++;
    if (!strncasecmp(p, "PASS", 4) && !isalpha((unsigned char)p[4])) {
        *pass = 1;
        return 0;
    }
    if (!strncasecmp(p, "FAIL", 4) && !isalpha((unsigned char)p[4])) {
        *pass = 0;
        return 0;
    }
    return cuco_err_set(e, CUCO_EINVAL, "the judge's answer starts with neither PASS nor FAIL");
}

/* The verified program as the root of a new run, with the route's calls. */
static int register_root(struct route *r, const char *ws, const char *prog_rel, const char *program,
                         double seed_ms, const cuco_eval_result *pe, int64_t *run_id,
                         int64_t *prog_id, cuco_err *e)
{
    char *dbpath = cuco_path_join(ws, "runs.db");
    cuco_db *db = NULL;
    char *cfg_text = NULL;
    int rc = dbpath ? db_open(dbpath, 0, &db, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rc)
        goto out;
    json_t *models = json_array();
    for (size_t i = 0; r->o->models[i]; i++)
        json_array_append_new(models, json_string(r->o->models[i]));
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:o}", "source", "transform", "route", "llm", "init",
                            prog_rel, "models", models);
    cfg_text = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
    json_decref(cfg);
    if ((rc = db_begin(db, e)))
        goto out;
    /* one transaction: the root and its calls, or nothing */
    if ((rc = db_run_create(db, r->w->name, cfg_text ? cfg_text : "{}", 0, run_id, e)) ||
        (seed_ms > 0 && (rc = db_run_set_baseline(db, *run_id, seed_ms, e))))
        goto rollback;
    cuco_tx_root root = {.run_id = *run_id,
                         .program = program,
                         .mutator = "transform_llm",
                         .patch_type = "diff",
                         .status = "ok",
                         .metrics_json = pe->metrics_json,
                         .description =
                             "fast path: LLM staged device-initiated rewrite of the seed",
                         .seed_ms = seed_ms,
                         .time_ms = pe->time_ms};
    if ((rc = cuco_tx_insert_root(db, &root, prog_id, e)))
        goto rollback;
    size_t i;
    json_t *c;
    json_array_foreach(r->calls, i, c)
    {
        cuco_db_llm_call lc;
        memset(&lc, 0, sizeof lc);
        lc.run_id = *run_id;
        lc.program_id = *prog_id;
        lc.model = json_string_value(json_object_get(c, "model"));
        lc.input_tokens = json_integer_value(json_object_get(c, "input_tokens")) +
                          json_integer_value(json_object_get(c, "cache_write_tokens"));
        lc.output_tokens = json_integer_value(json_object_get(c, "output_tokens"));
        lc.cached_tokens = json_integer_value(json_object_get(c, "cached_tokens"));
        lc.cost_usd = json_real_value(json_object_get(c, "cost_usd"));
        lc.latency_s = json_real_value(json_object_get(c, "latency_s"));
        lc.prompt_hash = json_string_value(json_object_get(c, "prompt_hash"));
        lc.status = json_string_value(json_object_get(c, "status"));
        int64_t id;
        if ((rc = db_llm_call_insert(db, &lc, &id, e)))
            goto rollback;
    }
    rc = db_commit(db, e);
    goto out;
rollback:
    db_close(db); /* closing inside the transaction rolls it back */
    db = NULL;
out:
    db_close(db);
    free(dbpath);
    free(cfg_text);
    return rc;
}

static double calls_usd(const json_t *calls)
{
    double usd = 0;
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) usd += json_real_value(json_object_get(c, "cost_usd"));
    return usd;
}

/* The LLM route's paths, session and system prompt. */
static int route_setup(struct route *r, cuco_err *e)
{
    const cuco_workload *w = r->w;
    const cuco_transform_llm_opts *o = r->o;
    int rc;
    if (!o->models || !o->models[0])
        return cuco_err_set(e, CUCO_EINVAL, "the LLM route needs a model (--model)");
    if ((rc = cuco_workload_read_seed(w, &r->seed, e)))
        return rc;
    r->ws = o->workspace ? cuco_strdup(o->workspace) : cuco_sprintf("cuco-out/%s", w->name);
    r->gen0 = r->ws ? cuco_path_join(r->ws, "gen_0") : NULL;
    r->prog_path = r->gen0 ? cuco_path_join(r->gen0, w->evolve_file) : NULL;
    r->seed_copy = r->gen0 ? cuco_path_join(r->gen0, "seed.orig") : NULL;
    r->llm_dir = r->gen0 ? cuco_path_join(r->gen0, "llm") : NULL;
    r->work =
        o->work_dir ? cuco_strdup(o->work_dir) : (r->ws ? cuco_path_join(r->ws, "eval") : NULL);
    r->program = cuco_strdup(r->seed);
    if (!r->prog_path || !r->seed_copy || !r->llm_dir || !r->work || !r->program || !r->calls ||
        !r->steps)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    cuco_fs_remove_tree(r->llm_dir, e);
    cuco_err_clear(e);
    if ((rc = cuco_fs_mkdirs(r->llm_dir, e)) || (rc = cuco_fs_mkdirs(r->work, e)))
        return rc;
    remove(r->prog_path); /* a refused run must not leave an older program claimed */
    r->gpu = cuco_tx_have_gpu() || !w->gpu;
    r->has_blocks = cuco_llm_block_count(r->seed) > 0;

    cuco_llm_session_opts so;
    memset(&so, 0, sizeof so);
    so.models = o->models;
    so.budget_usd = o->budget_usd;
    so.max_tokens = o->max_tokens;
    so.temperature = -1;
    so.prices = o->prices;
    so.client.anthropic_base_url = o->base_url;
    so.client.openai_base_url = o->base_url;
    so.record = record_call;
    so.record_ctx = r;
    if ((rc = cuco_llm_session_new(&so, &r->session, e)) ||
        (rc = cuco_llm_session_check_keys(r->session, e)))
        return rc;
    if ((rc = build_system(r, &r->notes, e)))
        return rc;
    return write_transcript(r, "system", "prompt", r->system, e);
}

/* After both stages: the static check, then the model's review. */
static int route_judge(struct route *r, cuco_err *e)
{
    int rc = cuco_transform_check(r->w->evolve_file, r->program, &r->passed, &r->notes, e);
    if (rc)
        return rc;
    char *tmpl = NULL;
    cuco_buf user = CUCO_BUF_INIT;
    const char *build = r->gpu ? "It built, ran on the GPUs and passed its verification."
                               : "It built. (No GPU here: it was not run.)";
    cuco_llm_var vars[] = {{"seed", r->seed}, {"program", r->program}, {"build", build}};
    if ((rc = cuco_llm_template_load("transform_judge.md", &tmpl, e)) == 0)
        rc = cuco_llm_template_fill(tmpl, "transform_judge.md", vars, 3, &user, e);
    free(tmpl);
    if (rc == 0) {
        say(r, "judge: asking the model to review the result");
        rc = ask(r, "transform_judge", cuco_buf_str(&user), &r->judge_text, &r->judge_fail, e);
    }
    cuco_buf_free(&user);
    if (rc || !r->judge_text)
        return rc;
    cuco_err ve = CUCO_ERR_INIT;
    r->judged = cuco_transform_llm_verdict(r->judge_text, &r->judge_pass, &ve) == 0;
    if (!r->judged)
        r->judge_fail = cuco_strdup(cuco_err_msg(&ve));
    cuco_err_clear(&ve);
    return 0;
}

/* The accepted program: written as gen_0 with its diff, then (with a GPU)
 * benchmarked beside the seed and registered as a run's root. */
static int route_accept(struct route *r, cuco_transform_outcome *outcome, cuco_err *e)
{
    const cuco_workload *w = r->w;
    int rc;
    if ((rc = cuco_fs_write(r->prog_path, r->program, strlen(r->program), e)) ||
        (rc = cuco_fs_write(r->seed_copy, r->seed, strlen(r->seed), e)) ||
        (rc = cuco_tx_make_diff(r->seed_copy, r->prog_path, w->evolve_file, &r->diff, e)))
        return rc;
    remove(r->seed_copy);
    char *dpath = cuco_path_join(r->gen0, "program.diff");
    rc = dpath ? cuco_fs_write(dpath, r->diff, strlen(r->diff), e)
               : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(dpath);
    if (rc)
        return rc;
    if (!r->gpu) {
        r->verification = "built, not verified: no GPU";
        *outcome = CUCO_TX_UNVERIFIED;
        return 0;
    }
    cuco_eval_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.work_dir = r->work;
    eo.max_level = 3;
    eo.frozen_ref = r->program;
    eo.progress = r->o->progress;
    eo.progress_ctx = r->o->progress_ctx;
    say(r, "benchmarking the transformed program and the seed");
    if ((rc = cuco_eval_program(w, r->program, &eo, &r->prog_r, e)))
        return rc;
    r->have_prog_r = 1;
    if (r->prog_r.status != CUCO_EVAL_OK) {
        r->verification = "built, failed verification or run";
        return 0;
    }
    eo.frozen_ref = NULL;
    if ((rc = cuco_eval_program(w, NULL, &eo, &r->seed_r, e)))
        return rc;
    r->have_seed_r = 1;
    r->verification = "built, ran and verified";
    *outcome = CUCO_TX_VERIFIED;
    char *rel = cuco_path_join("gen_0", w->evolve_file);
    double seed_ms = r->seed_r.status == CUCO_EVAL_OK ? r->seed_r.time_ms : -1;
    rc = rel ? register_root(r, r->ws, rel, r->program, seed_ms, &r->prog_r, &r->run_id,
                             &r->prog_id, e)
             : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(rel);
    return rc;
}

/* Why it was not transformed, as notes like the rule route's. */
static void route_refusal_notes(struct route *r)
{
    cuco_tx_notes *notes = &r->notes;
    if (r->stop)
        cuco_tx_notes_add(notes, 0, "refused", "stopped: %s", r->stop);
    if (!r->done_a && !r->stop)
        cuco_tx_notes_add(notes, 0, "refused", "stage A did not succeed in %d attempts: %s",
                          r->att_a, r->fb_a ? r->fb_a : "no usable edit");
    if (r->done_a && !r->done_b && !r->stop)
        cuco_tx_notes_add(notes, 0, "refused", "stage B did not succeed in %d attempts: %s",
                          r->att_b, r->fb_b ? r->fb_b : "no usable edit");
    if (r->done_b && !r->judge_pass)
        cuco_tx_notes_add(notes, 0, "refused", "the judge did not pass it: %s",
                          r->judge_text   ? r->judge_text
                          : r->judge_fail ? r->judge_fail
                                          : "no answer");
    if (r->done_b && !r->passed)
        cuco_tx_notes_add(notes, 0, "refused", "the static device-initiated check failed");
}

static int route_has_speedup(const struct route *r)
{
    return r->have_seed_r && r->have_prog_r && r->seed_r.status == CUCO_EVAL_OK &&
           r->prog_r.time_ms > 0;
}

/* The report's stages, steps, judge and LLM calls. */
static void route_report_llm(const struct route *r, json_t *rep)
{
    json_object_set_new(rep, "stages",
                        json_pack("{s:{s:i, s:b}, s:{s:i, s:b}}", "A", "attempts", r->att_a, "done",
                                  r->done_a, "B", "attempts", r->att_b, "done", r->done_b));
    json_object_set_new(rep, "steps", json_incref(r->steps));
    json_object_set_new(rep, "judge",
                        json_pack("{s:s, s:s?}", "verdict",
                                  !r->done_b      ? "not asked"
                                  : !r->judged    ? "no verdict"
                                  : r->judge_pass ? "PASS"
                                                  : "FAIL",
                                  "text", r->judge_text ? r->judge_text : r->judge_fail));
    json_t *models = json_array();
    for (size_t i = 0; r->o->models[i]; i++)
        json_array_append_new(models, json_string(r->o->models[i]));
    json_object_set_new(rep, "llm",
                        json_pack("{s:o, s:f, s:i, s:O}", "models", models, "usd",
                                  calls_usd(r->calls), "calls_made", (int)json_array_size(r->calls),
                                  "calls", r->calls));
    if (r->stop)
        json_object_set_new(rep, "stopped", json_string(r->stop));
}

/* transform.json's object (caller json_decref's). */
static json_t *route_report_json(const struct route *r, cuco_transform_outcome outcome)
{
    const cuco_workload *w = r->w;
    json_t *rep = json_object();
    json_object_set_new(rep, "workload", json_string(w->name));
    json_object_set_new(rep, "route", json_string("llm"));
    json_object_set_new(rep, "iterations", json_integer(r->att_a + r->att_b));
    json_object_set_new(rep, "evolve_file", json_string(w->evolve_file));
    json_object_set_new(rep, "transformed", json_boolean(r->transformed));
    json_object_set_new(rep, "program", r->transformed ? json_string(r->prog_path) : json_null());
    json_object_set_new(rep, "static_check",
                        json_string(!r->done_b  ? "not run"
                                    : r->passed ? "static check passed"
                                                : "static check failed"));
    json_object_set_new(rep, "verification", json_string(r->verification));
    json_object_set_new(rep, "outcome", json_integer((int)outcome));
    json_t *nj = json_array();
    for (size_t i = 0; i < r->notes.n; i++)
        json_array_append_new(nj, json_pack("{s:s, s:s, s:i, s:s}", "kind", r->notes.items[i].kind,
                                            "file", w->evolve_file, "line", r->notes.items[i].line,
                                            "text", r->notes.items[i].text));
    json_object_set_new(rep, "notes", nj);
    route_report_llm(r, rep);
    if (r->have_prog_r)
        json_object_set_new(rep, "eval", cuco_tx_eval_json(&r->prog_r));
    if (r->have_seed_r)
        json_object_set_new(rep, "seed_eval", cuco_tx_eval_json(&r->seed_r));
    if (route_has_speedup(r))
        json_object_set_new(rep, "speedup", json_real(r->seed_r.time_ms / r->prog_r.time_ms));
    json_object_set_new(rep, "registered",
                        r->prog_id ? json_pack("{s:I, s:I}", "run_id", (json_int_t)r->run_id,
                                               "program_id", (json_int_t)r->prog_id)
                                   : json_null());
    json_object_set_new(rep, "seconds", json_real(cuco_tx_now_s() - r->t0));
    return rep;
}

/* transform.md from the report. */
static void route_report_md(const struct route *r, json_t *rep, cuco_buf *md)
{
    const cuco_workload *w = r->w;
    cuco_buf_printf(md, "# Transform report: %s\n\n", w->name);
    cuco_buf_printf(md,
                    "- route: llm (stage A: %d attempt%s%s, stage B: %d attempt%s%s)\n"
                    "- file: `%s`\n- result: %s\n",
                    r->att_a, r->att_a == 1 ? "" : "s", r->done_a ? ", done" : "", r->att_b,
                    r->att_b == 1 ? "" : "s", r->done_b ? ", done" : "", w->evolve_file,
                    r->transformed ? "transformed" : "not transformed");
    cuco_buf_printf(md, "- static check: %s\n- judge: %s\n- verification: %s\n",
                    json_string_value(json_object_get(rep, "static_check")),
                    json_string_value(json_object_get(json_object_get(rep, "judge"), "verdict")),
                    r->verification);
    cuco_buf_printf(md, "- LLM: %zu calls, $%.6f\n", json_array_size(r->calls),
                    calls_usd(r->calls));
    if (route_has_speedup(r))
        cuco_buf_printf(md, "- time: %.4f ms (seed %.4f ms, speedup %.3fx)\n", r->prog_r.time_ms,
                        r->seed_r.time_ms, r->seed_r.time_ms / r->prog_r.time_ms);
    if (r->prog_id)
        cuco_buf_printf(md, "- registered: run %lld, program %lld (generation 0) in runs.db\n",
                        (long long)r->run_id, (long long)r->prog_id);
    else
        cuco_buf_puts(md, "- registered: no (only a verified program becomes the root)\n");
    cuco_buf_puts(md, "\n## Steps\n\n");
    size_t si;
    json_t *sv;
    json_array_foreach(r->steps, si, sv)
    {
        cuco_buf_printf(md, "- stage %s, edit %d: %s\n",
                        json_string_value(json_object_get(sv, "stage")),
                        (int)json_integer_value(json_object_get(sv, "attempt")),
                        json_string_value(json_object_get(sv, "result")));
    }
    if (r->notes.n) {
        cuco_buf_puts(md, "\n## Notes\n\n");
        for (size_t i = 0; i < r->notes.n; i++)
            cuco_buf_printf(md, "- %s: %s\n", r->notes.items[i].kind, r->notes.items[i].text);
    }
}

static void route_free(struct route *r)
{
    if (r->have_prog_r)
        cuco_eval_result_free(&r->prog_r);
    if (r->have_seed_r)
        cuco_eval_result_free(&r->seed_r);
    cuco_tx_notes_free(&r->notes);
    cuco_llm_session_free(r->session);
    json_decref(r->calls);
    json_decref(r->steps);
    free(r->seed);
    free(r->system);
    free(r->llm_dir);
    free(r->work);
    free(r->stop);
    free(r->ws);
    free(r->gen0);
    free(r->prog_path);
    free(r->seed_copy);
    free(r->diff);
    free(r->program);
    free(r->fb_a);
    free(r->fb_b);
    free(r->judge_text);
    free(r->judge_fail);
}

int cuco_transform_llm(const cuco_workload *w, const cuco_transform_llm_opts *o,
                       cuco_transform_outcome *outcome, char **report_json, cuco_err *e)
{
    struct route r;
    memset(&r, 0, sizeof r);
    r.w = w;
    r.o = o;
    r.calls = json_array();
    r.steps = json_array();
    r.verification = "not run";
    r.t0 = cuco_tx_now_s();
    *outcome = CUCO_TX_REFUSED;
    if (report_json)
        *report_json = NULL;
    int rc = route_setup(&r, e);
    if (rc == 0)
        rc = run_stage(&r, 0, &r.program, &r.att_a, &r.done_a, &r.fb_a, e);
    if (rc == 0 && r.done_a)
        rc = run_stage(&r, 1, &r.program, &r.att_b, &r.done_b, &r.fb_b, e);
    if (rc == 0 && r.done_b)
        rc = route_judge(&r, e);
    if (rc)
        goto out;
    r.transformed = r.done_a && r.done_b && r.judge_pass && r.passed;
    if (r.transformed) {
        if ((rc = route_accept(&r, outcome, e)))
            goto out;
    } else if (r.done_a && r.done_b) {
        r.verification = r.gpu ? "built and verified, but not accepted" : "built, but not accepted";
    } else {
        r.verification = "did not converge";
    }
    route_refusal_notes(&r);
    json_t *rep = route_report_json(&r, *outcome);
    cuco_buf md = CUCO_BUF_INIT;
    route_report_md(&r, rep, &md);
    rc = cuco_tx_write_report(r.gen0, rep, cuco_buf_str(&md), report_json, e);
    json_decref(rep);
    cuco_buf_free(&md);
out:
    route_free(&r);
    return rc;
}
