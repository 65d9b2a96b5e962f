/* gen0.c: the fast path end to end for one workload. Transforms the seed
 * with the rules, checks the result statically, builds / runs / verifies /
 * times the seed and the result through the evaluation cascade, and writes
 * WORKSPACE/gen_0/ (program, program.diff, transform_report.md/.json) and
 * the database root of the search (WORKSPACE/runs.db).
 */
#include "cuco/transform.h"
#include "tx_common.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/proc.h"
#include "cuco/program.h"

static void progress(const cuco_transform_opts *o, const char *line)
{
    if (o->progress)
        o->progress(o->progress_ctx, line);
}

static json_t *notes_json(const cuco_tx_notes *l, const char *file)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(a,
                              json_pack("{s:s, s:s, s:i, s:s}", "kind", l->items[i].kind, "file",
                                        file, "line", l->items[i].line, "text", l->items[i].text));
    return a;
}

static void md_notes(cuco_buf *md, const cuco_tx_notes *l, const char *file, const char *kind)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->items[i].kind, kind) != 0)
            continue;
        if (l->items[i].line > 0)
            cuco_buf_printf(md, "- `%s:%d` %s\n", file, l->items[i].line, l->items[i].text);
        else
            cuco_buf_printf(md, "- %s\n", l->items[i].text);
    }
}

/* Collectives in a source other than the evolve file, or in a local header
 * it includes, stay host-driven (the rules edit the evolve file only): each
 * is refused with its file and line, and the rules' "nothing to transform"
 * (about the evolve file alone) goes. */
static int refuse_other_sources(const cuco_workload *w, cuco_tx_result *tr, cuco_err *e)
{
    size_t found = 0;
    cuco_strlist seen = {0};
    for (size_t i = 0; i < w->sources.n; i++) {
        /* every source, the evolve file too: the analysis follows its local includes */
        const char *src = w->sources.items[i];
        char *path = cuco_path_join(w->dir, src);
        if (!path)
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        const char *paths[] = {path};
        json_t *an = NULL;
        cuco_err ae = CUCO_ERR_INIT;
        int rc = cuco_analyze_paths(paths, 1, &an, &ae);
        cuco_err_clear(&ae);
        free(path);
        if (rc == CUCO_ENOMEM)
            return cuco_err_set(e, rc, "out of memory");
        size_t k;
        json_t *c;
        json_array_foreach(rc == 0 ? json_object_get(an, "collectives") : NULL, k, c)
        {
            const char *file = json_string_value(json_object_get(c, "file"));
            size_t dl = strlen(w->dir), fl = file ? strlen(file) : 0, el = strlen(w->evolve_file);
            const char *base =
                file && strncmp(file, w->dir, dl) == 0 && file[dl] == '/' ? file + dl + 1 : file;
            if (!base || (fl >= el && strcmp(file + fl - el, w->evolve_file) == 0 &&
                          (fl == el || file[fl - el - 1] == '/')))
                continue; /* the evolve file, analyzed directly or through an include */
            int line = (int)json_integer_value(json_object_get(c, "line"));
            char *where = cuco_sprintf("%s:%d", base, line);
            int dup = 0;
            for (size_t q = 0; where && q < seen.n; q++)
                dup |= strcmp(seen.items[q], where) == 0;
            int pushed = !where ? CUCO_ENOMEM : !dup ? cuco_strlist_push(&seen, where) : 0;
            free(where);
            if (dup)
                continue;
            tr->refused = 1;
            found++;
            if (pushed != 0 ||
                cuco_tx_notes_add(&tr->notes, 0, "refused",
                                  "%s:%d: %s is in %s, which the rules do not edit (they rewrite "
                                  "the evolve file %s only): make that file the evolve_file, or "
                                  "move the call into %s",
                                  base, line, json_string_value(json_object_get(c, "api")), base,
                                  w->evolve_file, w->evolve_file) != 0) {
                json_decref(an);
                cuco_strlist_free(&seen);
                return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            }
        }
        json_decref(an);
    }
    cuco_strlist_free(&seen);
    for (size_t i = 0; found && i < tr->notes.n; i++) {
        cuco_tx_note *n = &tr->notes.items[i];
        if (n->line == 0 && strcmp(n->kind, "refused") == 0 &&
            strncmp(n->text, "no NCCL", 7) == 0) {
            free(n->kind);
            free(n->text);
            memmove(n, n + 1, (tr->notes.n - i - 1) * sizeof(*n));
            tr->notes.n--;
            break;
        }
    }
    return 0;
}

static int register_root(const char *ws, const cuco_workload *w, const char *prog_rel,
                         const char *program, const char *status, double seed_ms, double time_ms,
                         const char *metrics, int64_t *run_id, int64_t *prog_id, cuco_err *e)
{
    char *dbpath = cuco_path_join(ws, "runs.db");
    cuco_db *db = NULL;
    int rc = dbpath ? db_open(dbpath, 0, &db, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rc != 0)
        goto out;
    json_t *cfg =
        json_pack("{s:s, s:s, s:s}", "source", "transform", "route", "rules", "init", prog_rel);
    char *cfg_text = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    rc = db_run_create(db, w->name, cfg_text, 0, run_id, e);
    free(cfg_text);
    if (rc != 0)
        goto out;
    if (seed_ms > 0 && (rc = db_run_set_baseline(db, *run_id, seed_ms, e)) != 0)
        goto out;
    cuco_tx_root root = {.run_id = *run_id,
                         .program = program,
                         .mutator = "transform_rules",
                         .patch_type = "full",
                         .status = status,
                         .metrics_json = metrics,
                         .description =
                             "fast path: rule-based device-initiated rewrite of the seed",
                         .seed_ms = seed_ms,
                         .time_ms = time_ms};
    rc = cuco_tx_insert_root(db, &root, prog_id, e);
out:
    if (db)
        db_close(db);
    free(dbpath);
    return rc;
}

int cuco_transform_workload(const cuco_workload *w, const cuco_transform_opts *o,
                            cuco_transform_outcome *outcome, char **report_json, cuco_err *e)
{
    char *seed = NULL, *ws = NULL, *gen0 = NULL, *prog_path = NULL, *seed_copy = NULL, *diff = NULL;
    char *work = NULL;
    cuco_tx_result tr;
    cuco_eval_result seed_r, prog_r;
    int have_seed_r = 0, have_prog_r = 0;
    memset(&tr, 0, sizeof(tr));
    json_t *rep = json_object();
    cuco_buf md = CUCO_BUF_INIT;
    double t0 = cuco_tx_now_s();
    const char *verification = "not run";
    int64_t run_id = 0, prog_id = 0;
    int rc;

    *outcome = CUCO_TX_REFUSED;
    if (report_json)
        *report_json = NULL;
    if ((rc = cuco_workload_read_seed(w, &seed, e)) != 0)
        goto out;
    ws = o->workspace ? cuco_strdup(o->workspace) : cuco_sprintf("cuco-out/%s", w->name);
    cuco_eval_default_build_cache(ws);
    gen0 = ws ? cuco_path_join(ws, "gen_0") : NULL;
    prog_path = gen0 ? cuco_path_join(gen0, w->evolve_file) : NULL;
    seed_copy = gen0 ? cuco_path_join(gen0, "seed.orig") : NULL;
    work = o->work_dir ? cuco_strdup(o->work_dir) : (ws ? cuco_path_join(ws, "eval") : NULL);
    if (!prog_path || !seed_copy || !work) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = cuco_fs_mkdirs(gen0, e)) != 0)
        goto out;
    remove(prog_path); /* a refused run must not leave an older program claimed */

    progress(o, "applying the transform rules");
    if ((rc = cuco_transform_rules(w->evolve_file, seed, &tr, e)) != 0 ||
        (rc = refuse_other_sources(w, &tr, e)) != 0)
        goto out;
    if (tr.refused) {
        free(tr.program);
        tr.program = NULL;
    }
    int passed = 0;
    if (!tr.refused) {
        progress(o, "static device-initiated check");
        if ((rc = cuco_transform_check(w->evolve_file, tr.program, &passed, &tr.notes, e)) != 0)
            goto out;
        /* a seed with blocks is edited only inside them: prove it */
        cuco_err fe = CUCO_ERR_INIT;
        cuco_block *sb = NULL;
        size_t nsb = 0;
        if (cuco_program_blocks(seed, &sb, &nsb, &fe) == 0 && nsb > 0 &&
            cuco_program_check_frozen(seed, tr.program, &fe) != 0) {
            cuco_tx_notes_add(&tr.notes, fe.line, "error", "frozen text changed: %s",
                              cuco_err_msg(&fe));
            passed = 0;
        }
        free(sb);
        cuco_err_clear(&fe);
    }
    int transformed = !tr.refused && passed;
    const char *route_status = tr.refused ? "refused"
                               : passed   ? "static check passed"
                                          : "static check failed";

    if (transformed) {
        if ((rc = cuco_fs_write(prog_path, tr.program, strlen(tr.program), e)) != 0 ||
            (rc = cuco_fs_write(seed_copy, seed, strlen(seed), e)) != 0)
            goto out;
        if ((rc = cuco_tx_make_diff(seed_copy, prog_path, w->evolve_file, &diff, e)) != 0)
            goto out;
        remove(seed_copy);
        char *dpath = cuco_path_join(gen0, "program.diff");
        rc = dpath ? cuco_fs_write(dpath, diff, strlen(diff), e) : CUCO_ENOMEM;
        free(dpath);
        if (rc != 0)
            goto out;
    }

    if (transformed && o->no_verify) {
        verification = "not verified (--no-verify)";
        *outcome = CUCO_TX_NOT_BUILT;
    } else if (transformed) {
        int gpu = cuco_tx_have_gpu() || !w->gpu;
        cuco_eval_opts eo;
        memset(&eo, 0, sizeof(eo));
        eo.work_dir = work;
        eo.progress = o->progress;
        eo.progress_ctx = o->progress_ctx;
        eo.max_level = gpu ? 3 : 1;
        eo.frozen_ref = tr.program; /* the seed's frozen text was checked above */
        if ((rc = cuco_fs_mkdirs(work, e)) != 0)
            goto out;
        progress(o, gpu ? "evaluating the transformed program (build, verify, bench)"
                        : "building the transformed program (no GPU: not run)");
        if ((rc = cuco_eval_program(w, tr.program, &eo, &prog_r, e)) != 0)
            goto out;
        have_prog_r = 1;
        if (prog_r.status != CUCO_EVAL_OK) {
            verification =
                prog_r.level >= 1 ? "built, failed verification or run" : "did not build";
            *outcome = CUCO_TX_REFUSED;
        } else if (!gpu) {
            verification = "built, not verified: no GPU";
            *outcome = CUCO_TX_UNVERIFIED;
        } else {
            verification = "built, ran and verified";
            *outcome = CUCO_TX_VERIFIED;
            progress(o, "evaluating the seed for the time comparison");
            eo.frozen_ref = NULL;
            if ((rc = cuco_eval_program(w, NULL, &eo, &seed_r, e)) != 0)
                goto out;
            have_seed_r = 1;
        }
    }

    if (*outcome == CUCO_TX_VERIFIED || *outcome == CUCO_TX_NOT_BUILT) {
        char *rel = cuco_path_join("gen_0", w->evolve_file);
        double seed_ms = have_seed_r && seed_r.status == CUCO_EVAL_OK ? seed_r.time_ms : -1;
        double ms = have_prog_r ? prog_r.time_ms : -1;
        rc = rel ? register_root(ws, w, rel, tr.program,
                                 *outcome == CUCO_TX_VERIFIED ? "ok" : "pending", seed_ms, ms,
                                 have_prog_r ? prog_r.metrics_json : NULL, &run_id, &prog_id, e)
                 : CUCO_ENOMEM;
        free(rel);
        if (rc != 0)
            goto out;
    }

    /* reports */
    json_object_set_new(rep, "workload", json_string(w->name));
    json_object_set_new(rep, "route", json_string("rules"));
    json_object_set_new(rep, "iterations", json_integer(1));
    json_object_set_new(rep, "evolve_file", json_string(w->evolve_file));
    json_object_set_new(rep, "transformed", json_boolean(transformed));
    json_object_set_new(rep, "program", transformed ? json_string(prog_path) : json_null());
    json_object_set_new(rep, "static_check", json_string(route_status));
    json_object_set_new(rep, "verification", json_string(verification));
    json_object_set_new(rep, "outcome", json_integer((int)*outcome));
    json_object_set_new(rep, "notes", notes_json(&tr.notes, w->evolve_file));
    if (have_prog_r)
        json_object_set_new(rep, "eval", cuco_tx_eval_json(&prog_r));
    if (have_seed_r)
        json_object_set_new(rep, "seed_eval", cuco_tx_eval_json(&seed_r));
    if (have_seed_r && have_prog_r && seed_r.status == CUCO_EVAL_OK && prog_r.time_ms > 0)
        json_object_set_new(rep, "speedup", json_real(seed_r.time_ms / prog_r.time_ms));
    json_object_set_new(rep, "registered",
                        prog_id ? json_pack("{s:I, s:I}", "run_id", (json_int_t)run_id,
                                            "program_id", (json_int_t)prog_id)
                                : json_null());
    json_object_set_new(rep, "seconds", json_real(cuco_tx_now_s() - t0));

    cuco_buf_printf(&md, "# Transform report: %s\n\n", w->name);
    cuco_buf_printf(&md, "- route: rules (1 iteration)\n- file: `%s`\n- result: %s\n",
                    w->evolve_file, transformed ? "transformed" : "not transformed");
    cuco_buf_printf(&md, "- static check: %s\n- verification: %s\n", route_status, verification);
    if (have_seed_r && have_prog_r && seed_r.status == CUCO_EVAL_OK && prog_r.time_ms > 0)
        cuco_buf_printf(&md, "- time: %.4f ms (seed %.4f ms, speedup %.3fx)\n", prog_r.time_ms,
                        seed_r.time_ms, seed_r.time_ms / prog_r.time_ms);
    if (have_prog_r && prog_r.status != CUCO_EVAL_OK)
        cuco_buf_printf(&md, "- evaluation: %s\n\n```\n%s\n```\n",
                        cuco_eval_status_name(prog_r.status), prog_r.excerpt ? prog_r.excerpt : "");
    if (prog_id)
        cuco_buf_printf(&md, "- registered: run %lld, program %lld (generation 0) in runs.db\n",
                        (long long)run_id, (long long)prog_id);
    else
        cuco_buf_puts(&md, "- registered: no (only a verified program, or one taken with "
                           "--no-verify, becomes the root)\n");
    static const char *const kinds[][2] = {
        {"refused", "Not transformed"}, {"error", "Static check errors"},
        {"rewrite", "Rewritten calls"}, {"symmetric", "Symmetric buffers"},
        {"schedule", "Schedules"},      {"setup", "Setup"},
        {"teardown", "Teardown"},       {"note", "Notes"}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (cuco_tx_notes_count(&tr.notes, kinds[k][0]) == 0)
            continue;
        cuco_buf_printf(&md, "\n## %s\n\n", kinds[k][1]);
        md_notes(&md, &tr.notes, w->evolve_file, kinds[k][0]);
    }
    rc = cuco_tx_write_report(gen0, rep, cuco_buf_str(&md), report_json, e);
out:
    if (have_prog_r)
        cuco_eval_result_free(&prog_r);
    if (have_seed_r)
        cuco_eval_result_free(&seed_r);
    cuco_tx_result_free(&tr);
    json_decref(rep);
    cuco_buf_free(&md);
    free(seed);
    free(ws);
    free(gen0);
    free(prog_path);
    free(seed_copy);
    free(diff);
    free(work);
    return rc;
}
