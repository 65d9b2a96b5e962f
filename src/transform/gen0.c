/* gen0.c: the fast path end to end for one workload. Transforms the seed
 * with the rules, checks the result statically, builds / runs / verifies /
 * times the seed and the result through the evaluation cascade, and writes
 * WORKSPACE/gen_0/ (program, program.diff, transform_report.md/.json) and
 * the database root of the search (WORKSPACE/runs.db).
 */
#include "cuco/semantics.h"
#include "cuco/transform.h"
#include "tx_common.h"
#include "tx_headers.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/patch.h"
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
 * it includes that was not inlined (headers.c), stay host-driven (the rules
 * edit the evolve file only): each is refused with its file and line, and
 * the rules' "nothing to transform" (about the evolve file alone) goes. */
/* Whether src is a source compiled on its own (a .cu, .cpp ... other than
 * the evolve file), not a header. */
static int compiled_alone(const cuco_workload *w, const char *src)
{
    static const char *const ext[] = {".cu", ".cpp", ".cc", ".cxx", ".c", NULL};
    if (strcmp(src, w->evolve_file) == 0)
        return 0;
    for (const char *const *x = ext; *x; x++)
        if (cuco_str_ends_with(src, *x))
            return 1;
    return 0;
}

static int refuse_other_sources(const cuco_workload *w, const cuco_tx_headers *inlined,
                                cuco_tx_result *tr, cuco_err *e)
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
            if (cuco_tx_headers_has(inlined, file) && !compiled_alone(w, src))
                continue; /* a header rewritten inside the evolve file (headers.c) */
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
                                  "the evolve file %s and the headers it includes; a source "
                                  "compiled on its own would need its rewritten copy in the "
                                  "build): make that file the evolve_file, or move the call into "
                                  "%s or a header it includes",
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

/* The static check reads the generated program, which is not kept when it
 * fails: its notes (from first on) are moved to the seed's lines, and a
 * line the transform inserted is named in GEN0/rejected/FILE, written then. */
static int check_lines_to_seed(const char *seed, const char *program, const char *gen0,
                               const char *file, cuco_tx_notes *notes, size_t first, int passed,
                               cuco_err *e)
{
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    int *map = NULL, nlines = 0, inserted = 0;
    int rc = cuco_tx_line_map(seed, program, &map, &nlines, e);
    for (size_t i = first; rc == 0 && i < notes->n; i++) {
        cuco_tx_note *n = &notes->items[i];
        if (n->line <= 0)
            continue;
        int at = n->line <= nlines ? map[n->line] : 0;
        if (at > 0) {
            n->line = at;
            continue;
        }
        char *text = cuco_sprintf("%s (at line %d of the generated program rejected/%s, a line "
                                  "that is not the seed's)",
                                  n->text, n->line, base);
        if (!text) {
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            break;
        }
        free(n->text);
        n->text = text;
        n->line = 0;
        inserted = 1;
    }
    free(map);
    char *dir = cuco_path_join(gen0, "rejected");
    char *path = dir ? cuco_path_join(dir, base) : NULL;
    if (rc == 0 && !path)
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rc == 0)
        remove(path); /* an older run's rejected program is not this one's */
    int keep = rc == 0 && (!passed || inserted);
    if (keep && ((rc = cuco_fs_mkdirs(dir, e)) != 0 ||
                 (rc = cuco_fs_write(path, program, strlen(program), e)) != 0))
        keep = 0;
    if (keep)
        rc = cuco_tx_notes_add(notes, 0, "note",
                               "the program that failed the static check is kept as %s (its "
                               "errors above cite the lines of %s they come from)",
                               path, file);
    free(dir);
    free(path);
    return rc;
}

/* Whether the build runs a host compiler, which cannot build CUDA device
 * code; 0 for nvcc and for what is not a compiler (make, cmake, a script). */
static int host_compiler(const char *base)
{
    static const char *const host_only[] = {"g++",   "c++",    "clang++", "mpicxx", "mpic++",
                                            "mpiCC", "mpig++", "gcc",     "cc",     "clang",
                                            "icpx",  "icpc",   "mpicc",   "icx",    NULL};
    for (const char *const *h = host_only; *h; h++)
        if (strcmp(base, *h) == 0)
            return 1;
    return 0;
}

/* A C or C++ evolve file gets CUDA device code from the transform. nvcc
 * builds a C++ one as CUDA ("-x cu", added when the workload is read); a C
 * one only when the build says -x cu already (C is not always C++), and a
 * host compiler cannot: both are refused, saying what to change. */
static int host_language_build(const cuco_workload *w, cuco_tx_result *tr)
{
    const char *lang = cuco_workload_host_language(w->evolve_file);
    if (!lang || w->build_command.n == 0)
        return 0;
    const char *cc = w->build_command.items[0];
    const char *base = strrchr(cc, '/') ? strrchr(cc, '/') + 1 : cc;
    int nvcc = strcmp(base, "nvcc") == 0;
    if (nvcc && cuco_workload_builds_as_cuda(w))
        return cuco_tx_notes_add(&tr->notes, 0, "note",
                                 "%s is %s: the transformed program holds CUDA device code, so "
                                 "nvcc builds it as CUDA (-x cu, %s build.command for the seed "
                                 "and every candidate)",
                                 w->evolve_file, lang,
                                 strcmp(lang, "C++") == 0 ? "added to" : "given in");
    if (!nvcc && !host_compiler(base)) /* what compiles the file is not known here */
        return cuco_tx_notes_add(&tr->notes, 0, "note",
                                 "%s is %s and the transform puts CUDA device code into it: the "
                                 "build (%s) must compile it as CUDA (nvcc -x cu)",
                                 w->evolve_file, lang, base);
    tr->refused = 1;
    if (strcmp(lang, "C") == 0 && cuco_workload_is_program_path(w->manifest_path))
        return cuco_tx_notes_add(&tr->notes, 0, "refused",
                                 "%s is C, and the transform puts CUDA C++ device code into it, "
                                 "which nvcc builds as C: rename it to .cu (the program must then "
                                 "be valid C++: a malloc result needs its cast)",
                                 w->manifest_path);
    if (strcmp(lang, "C") == 0)
        return cuco_tx_notes_add(&tr->notes, 0, "refused",
                                 "%s/workload.yaml: %s is C, and the transform puts CUDA C++ "
                                 "device code into it, which %s builds as C: rename it to .cu "
                                 "or add -x cu after nvcc in build.command (the program must "
                                 "then be valid C++: a malloc result needs its cast)",
                                 w->dir, w->evolve_file, base);
    return cuco_tx_notes_add(&tr->notes, 0, "refused",
                             "%s/workload.yaml: build.command compiles %s with %s, which cannot "
                             "compile the CUDA device code the transform puts into it: build it "
                             "with nvcc (cuco adds -x cu for a C++ file), or rename it to .cu",
                             w->dir, w->evolve_file, base);
}

/* 1 when text, or a local header it includes ("...", found beside the
 * workload), may print the verification line: it names "Verification", or
 * includes a header not found there (e.g. a harness on the -I path). */
static int may_verify(const cuco_workload *w, const char *text, int depth)
{
    if (strstr(text, "Verification"))
        return 1;
    for (const char *p = strstr(text, "#include"); p; p = strstr(p + 8, "#include")) {
        const char *q = p + 8;
        while (*q == ' ' || *q == '\t')
            q++;
        const char *end = *q == '"' ? strchr(q + 1, '"') : NULL;
        if (!end || memchr(q, '\n', (size_t)(end - q)))
            continue;
        char *name = cuco_strndup(q + 1, (size_t)(end - q - 1));
        char *path = name ? cuco_path_join(w->dir, name) : NULL;
        char *inc = NULL;
        size_t len = 0;
        cuco_err ie = CUCO_ERR_INIT;
        int found = path && cuco_fs_read(path, &inc, &len, &ie) == 0;
        cuco_err_clear(&ie);
        int yes = !found || depth > 4 || may_verify(w, inc, depth + 1);
        free(name);
        free(path);
        free(inc);
        if (yes)
            return 1;
    }
    return 0;
}

/* A seed that prints no "Verification:" line can be built and run, never
 * verified. cuco offers a check (cuco_tx_self_check: the device collectives
 * compared with host NCCL on the same inputs) where every rewritten call has
 * a host twin; otherwise the program is only built, and the report names the
 * received buffers (from the symmetric notes) that a check should compare.
 * Returns 0 (the seed prints its line), 1 (the check was added), 2 (not
 * verifiable) or negative on cuco's own failure. */
static int no_verification_line(const cuco_workload *w, const char *seed, cuco_tx_result *tr,
                                cuco_err *e)
{
    if (may_verify(w, seed, 0))
        return 0;
    for (size_t i = 0; i < w->sources.n; i++) {
        char *path = cuco_path_join(w->dir, w->sources.items[i]), *text = NULL;
        size_t len = 0;
        cuco_err ie = CUCO_ERR_INIT;
        int yes = !path || cuco_fs_read(path, &text, &len, &ie) != 0 || may_verify(w, text, 0);
        cuco_err_clear(&ie);
        free(path);
        free(text);
        if (yes)
            return 0;
    }
    int added = 0, rc = cuco_tx_self_check(&tr->program, &added, e);
    if (rc != 0)
        return rc;
    /* the symmetric buffers, less a reduce-scatter's: its input */
    cuco_buf b = CUCO_BUF_INIT;
    for (size_t i = 0; i < tr->notes.n; i++) {
        const char *for_ = strstr(tr->notes.items[i].text, " for '");
        if (strcmp(tr->notes.items[i].kind, "symmetric") == 0 && for_ &&
            !strstr(for_, " of ncclReduceScatter "))
            cuco_buf_printf(&b, "%s%s", b.len ? "; " : "", for_ + 5);
    }
    if (added)
        rc = cuco_tx_notes_add(
            &tr->notes, 0, "verify",
            "%s prints no 'Verification: PASS|FAIL' line: cuco added a check (cuco_tx::checked_*, "
            "CUCO_TX_SELF_CHECK): the first 4 device collectives (received buffers: %s) are "
            "compared with host NCCL on the same inputs, and each rank prints the verdict at "
            "exit. It checks the communication, not the program's own results: print a line of "
            "your own to check those",
            w->evolve_file, b.len ? cuco_buf_str(&b) : "(none found)");
    else
        rc = cuco_tx_notes_add(
            &tr->notes, 0, "verify",
            "%s prints no 'Verification: PASS|FAIL' line, so no run can be verified and the "
            "program is only built (cuco's own check covers collectives with a host NCCL twin, "
            "not point-to-point calls nor a GEMM routed through a split's glue). The received "
            "buffers a check should compare with a "
            "reference (e.g. the same computation with host NCCL, or known values): %s. Print "
            "the line from that comparison, then run cuco transform again",
            w->evolve_file, b.len ? cuco_buf_str(&b) : "(none found)");
    cuco_buf_free(&b);
    return rc != 0 ? CUCO_ENOMEM : added ? 1 : 2;
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

/* Whether name occurs in text as a whole identifier. */
static int names_identifier(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); n && p; p = strstr(p + 1, name)) {
        int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

/* The manifest's declared semantics in the report: what each admits, which
 * schedule uses it (or that it is a strategy note for the LLM mutators),
 * and a declaration naming something the program does not have. */
static int declared_notes(const cuco_workload *w, const char *seed, cuco_tx_notes *notes)
{
    for (size_t i = 0; i < w->n_semantics; i++) {
        const cuco_semantic *s = &w->semantics[i];
        const char *name = s->kernel ? s->kernel : s->call;
        cuco_buf b = CUCO_BUF_INIT;
        cuco_semantics_describe(s, 1, "", &b);
        if (b.len && b.data[b.len - 1] == '\n')
            b.data[--b.len] = '\0';
        int rc = cuco_tx_notes_add(notes, 0, "declared", "workload.yaml:%d: %s%s", s->line,
                                   cuco_buf_str(&b),
                                   names_identifier(seed, name)
                                       ? ""
                                       : " (the program has no such name: check the declaration)");
        cuco_buf_free(&b);
        if (rc)
            return rc;
    }
    return 0;
}

/* One transform of a workload: what each step reads and leaves for the next. */
typedef struct tx_job {
    const cuco_workload *w;
    const cuco_transform_opts *o;
    char *seed, *ws, *gen0, *prog_path, *seed_copy, *work;
    char *flat; /* the seed with its NCCL-calling headers inlined (headers.c) */
    cuco_tx_headers hdrs;
    cuco_tx_result tr;
    cuco_eval_result seed_r, prog_r;
    int have_seed_r, have_prog_r;
    int passed, transformed, unverifiable;
    const char *route_status, *verification;
    int64_t run_id, prog_id;
    double t0;
} tx_job;

static const char *job_seed(const tx_job *j)
{
    return j->flat ? j->flat : j->seed;
}

static int job_paths(tx_job *j, cuco_err *e)
{
    const cuco_transform_opts *o = j->o;
    j->ws = o->workspace ? cuco_strdup(o->workspace) : cuco_sprintf("cuco-out/%s", j->w->name);
    cuco_eval_default_build_cache(j->ws);
    j->gen0 = j->ws ? cuco_path_join(j->ws, "gen_0") : NULL;
    j->prog_path = j->gen0 ? cuco_path_join(j->gen0, j->w->evolve_file) : NULL;
    j->seed_copy = j->gen0 ? cuco_path_join(j->gen0, "seed.orig") : NULL;
    j->work =
        o->work_dir ? cuco_strdup(o->work_dir) : (j->ws ? cuco_path_join(j->ws, "eval") : NULL);
    if (!j->prog_path || !j->seed_copy || !j->work)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = cuco_fs_mkdirs(j->gen0, e);
    if (rc == 0)
        remove(j->prog_path); /* a refused run must not leave an older program claimed */
    return rc;
}

/* The rules, then the checks: the seed's frozen text, the static
 * device-initiated check, errors moved to the seed's lines. */
static int job_rules_and_check(tx_job *j, int *verify_line, cuco_err *e)
{
    const cuco_workload *w = j->w;
    cuco_tx_result *tr = &j->tr;
    int rc;
    progress(j->o, "applying the transform rules");
    char *macros = NULL;
    if ((rc = cuco_tx_headers_inline(w, j->seed, &j->flat, &j->hdrs, e)) != 0 ||
        (rc = cuco_tx_header_macros(w, j->seed, &macros, e)) != 0)
        return rc;
    cuco_tx_input in = {.file_name = w->evolve_file,
                        .text = job_seed(j),
                        .sem = w->semantics,
                        .n_sem = w->n_semantics,
                        .header_macros = macros};
    rc = cuco_transform_rules_in(&in, tr, e);
    free(macros);
    if (rc != 0 || (rc = refuse_other_sources(w, &j->hdrs, tr, e)) != 0)
        return rc;
    if (host_language_build(w, tr) != 0)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (tr->refused) {
        free(tr->program);
        tr->program = NULL;
        return cuco_tx_notes_unapply(&tr->notes);
    }
    if ((*verify_line = no_verification_line(w, j->seed, tr, e)) < 0)
        return *verify_line;
    if (declared_notes(w, job_seed(j), &tr->notes) != 0)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    progress(j->o, "static device-initiated check");
    size_t first_check_note = tr->notes.n;
    if ((rc = cuco_tx_check_seed(w->evolve_file, job_seed(j), tr->program, &j->passed, &tr->notes,
                                 e)) != 0)
        return rc;
    /* a seed with blocks is edited only inside them: prove it */
    cuco_err fe = CUCO_ERR_INIT;
    cuco_block *sb = NULL;
    size_t nsb = 0;
    if (cuco_program_blocks(j->seed, &sb, &nsb, &fe) == 0 && nsb > 0 &&
        cuco_program_check_frozen(j->seed, tr->program, &fe) != 0) {
        cuco_tx_notes_add(&tr->notes, fe.line, "error", "frozen text changed: %s",
                          cuco_err_msg(&fe));
        j->passed = 0;
    }
    free(sb);
    cuco_err_clear(&fe);
    /* a search takes gen_0 as its root: its blocks must pass the block guard
     * (none closes a brace of the frozen code) */
    if (j->passed && cuco_patch_guard_blocks(tr->program, tr->program, NULL, &fe) != 0) {
        cuco_tx_notes_add(&tr->notes, fe.line, "error",
                          "the EVOLVE-BLOCKs of the program fail the block guard: %s",
                          cuco_err_msg(&fe));
        j->passed = 0;
    }
    cuco_err_clear(&fe);
    /* the errors above cite the generated program's lines: move them to the seed's */
    return check_lines_to_seed(job_seed(j), tr->program, j->gen0, w->evolve_file, &tr->notes,
                               first_check_note, j->passed, e);
}

/* gen_0/FILE, its headers and program.diff. */
static int job_write_program(tx_job *j, cuco_err *e)
{
    const char *prog = j->tr.program;
    char *diff = NULL, *dpath = NULL;
    int rc;
    if ((rc = cuco_fs_write(j->prog_path, prog, strlen(prog), e)) != 0 ||
        (rc = cuco_fs_write(j->seed_copy, j->seed, strlen(j->seed), e)) != 0 ||
        (rc = cuco_tx_make_diff(j->seed_copy, j->prog_path, j->w->evolve_file, &diff, e)) != 0)
        goto out;
    remove(j->seed_copy);
    if ((rc = cuco_tx_headers_write(&j->hdrs, prog, j->gen0, e)) != 0)
        goto out;
    dpath = cuco_path_join(j->gen0, "program.diff");
    rc = dpath ? cuco_fs_write(dpath, diff, strlen(diff), e) : CUCO_ENOMEM;
out:
    free(dpath);
    free(diff);
    return rc;
}

/* Build, verify and time the program (where a GPU is visible), then the
 * seed for the time comparison. */
static int job_evaluate(tx_job *j, cuco_transform_outcome *outcome, cuco_err *e)
{
    const cuco_transform_opts *o = j->o;
    int gpu = (cuco_tx_have_gpu() || !j->w->gpu) && !j->unverifiable;
    cuco_eval_opts eo;
    memset(&eo, 0, sizeof(eo));
    eo.work_dir = j->work;
    eo.progress = o->progress;
    eo.progress_ctx = o->progress_ctx;
    eo.max_level = gpu ? 3 : 1;
    eo.frozen_ref = j->tr.program; /* the seed's frozen text was checked before */
    int rc = cuco_fs_mkdirs(j->work, e);
    if (rc != 0)
        return rc;
    progress(o, gpu ? "evaluating the transformed program (build, verify, bench)"
                    : "building the transformed program (no GPU: not run)");
    if ((rc = cuco_eval_program(j->w, j->tr.program, &eo, &j->prog_r, e)) != 0)
        return rc;
    j->have_prog_r = 1;
    if (j->prog_r.status != CUCO_EVAL_OK) {
        j->verification =
            j->prog_r.level >= 1 ? "built, failed verification or run" : "did not build";
        *outcome = CUCO_TX_REFUSED;
        return 0;
    }
    if (j->unverifiable) {
        j->verification = "built, not verifiable: the program prints no Verification line";
        *outcome = CUCO_TX_UNVERIFIED;
        return 0;
    }
    if (!gpu) {
        j->verification = "built, not verified: no GPU";
        *outcome = CUCO_TX_UNVERIFIED;
        return 0;
    }
    j->verification = "built, ran and verified";
    *outcome = CUCO_TX_VERIFIED;
    progress(o, "evaluating the seed for the time comparison");
    eo.frozen_ref = NULL;
    if ((rc = cuco_eval_program(j->w, NULL, &eo, &j->seed_r, e)) != 0)
        return rc;
    j->have_seed_r = 1;
    return 0;
}

static int job_register(tx_job *j, cuco_transform_outcome outcome, cuco_err *e)
{
    char *rel = cuco_path_join("gen_0", j->w->evolve_file);
    double seed_ms = j->have_seed_r && j->seed_r.status == CUCO_EVAL_OK ? j->seed_r.time_ms : -1;
    double ms = j->have_prog_r ? j->prog_r.time_ms : -1;
    int rc = rel ? register_root(j->ws, j->w, rel, j->tr.program,
                                 outcome == CUCO_TX_VERIFIED ? "ok" : "pending", seed_ms, ms,
                                 j->have_prog_r ? j->prog_r.metrics_json : NULL, &j->run_id,
                                 &j->prog_id, e)
                 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(rel);
    return rc;
}

static int job_speedup_known(const tx_job *j)
{
    return j->have_seed_r && j->have_prog_r && j->seed_r.status == CUCO_EVAL_OK &&
           j->prog_r.time_ms > 0;
}

static json_t *job_report_json(const tx_job *j, cuco_transform_outcome outcome)
{
    json_t *rep = json_object();
    json_object_set_new(rep, "workload", json_string(j->w->name));
    json_object_set_new(rep, "route", json_string("rules"));
    json_object_set_new(rep, "iterations", json_integer(1));
    json_object_set_new(rep, "evolve_file", json_string(j->w->evolve_file));
    json_object_set_new(rep, "transformed", json_boolean(j->transformed));
    json_object_set_new(rep, "program", j->transformed ? json_string(j->prog_path) : json_null());
    json_object_set_new(rep, "static_check", json_string(j->route_status));
    json_object_set_new(rep, "verification", json_string(j->verification));
    json_object_set_new(rep, "outcome", json_integer((int)outcome));
    json_object_set_new(rep, "notes", notes_json(&j->tr.notes, j->w->evolve_file));
    if (j->have_prog_r)
        json_object_set_new(rep, "eval", cuco_tx_eval_json(&j->prog_r));
    if (j->have_seed_r)
        json_object_set_new(rep, "seed_eval", cuco_tx_eval_json(&j->seed_r));
    if (job_speedup_known(j))
        json_object_set_new(rep, "speedup", json_real(j->seed_r.time_ms / j->prog_r.time_ms));
    json_object_set_new(rep, "registered",
                        j->prog_id ? json_pack("{s:I, s:I}", "run_id", (json_int_t)j->run_id,
                                               "program_id", (json_int_t)j->prog_id)
                                   : json_null());
    json_object_set_new(rep, "seconds", json_real(cuco_tx_now_s() - j->t0));
    return rep;
}

static void job_report_md(const tx_job *j, cuco_buf *md)
{
    const cuco_workload *w = j->w;
    cuco_buf_printf(md, "# Transform report: %s\n\n", w->name);
    cuco_buf_printf(md, "- route: rules (1 iteration)\n- file: `%s`\n- result: %s\n",
                    w->evolve_file, j->transformed ? "transformed" : "not transformed");
    cuco_buf_printf(md, "- static check: %s\n- verification: %s\n", j->route_status,
                    j->verification);
    if (job_speedup_known(j))
        cuco_buf_printf(md, "- time: %.4f ms (seed %.4f ms, speedup %.3fx)\n", j->prog_r.time_ms,
                        j->seed_r.time_ms, j->seed_r.time_ms / j->prog_r.time_ms);
    if (j->have_prog_r && j->prog_r.status != CUCO_EVAL_OK)
        cuco_buf_printf(md, "- evaluation: %s\n\n```\n%s\n```\n",
                        cuco_eval_status_name(j->prog_r.status),
                        j->prog_r.excerpt ? j->prog_r.excerpt : "");
    if (j->prog_id)
        cuco_buf_printf(md, "- registered: run %lld, program %lld (generation 0) in runs.db\n",
                        (long long)j->run_id, (long long)j->prog_id);
    else
        cuco_buf_puts(md, "- registered: no (only a verified program, or one taken with "
                          "--no-verify, becomes the root)\n");
    static const char *const kinds[][2] = {{"refused", "Not transformed"},
                                           {"error", "Static check errors"},
                                           {"rewrite", "Rewritten calls"},
                                           {"kept", "Left host NCCL"},
                                           {"symmetric", "Symmetric buffers"},
                                           {"schedule", "Schedules"},
                                           {"verify", "Verification"},
                                           {"declared", "Declared semantics"},
                                           {"setup", "Setup"},
                                           {"teardown", "Teardown"},
                                           {"not applied", "Planned, not applied"},
                                           {"note", "Notes"}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (cuco_tx_notes_count(&j->tr.notes, kinds[k][0]) == 0)
            continue;
        cuco_buf_printf(md, "\n## %s\n\n", kinds[k][1]);
        md_notes(md, &j->tr.notes, w->evolve_file, kinds[k][0]);
    }
}

/* Reports, at the lines of the seed and its headers. */
static int job_write_reports(tx_job *j, cuco_transform_outcome outcome, char **report_json,
                             cuco_err *e)
{
    cuco_tx_headers_notes(&j->hdrs, &j->tr.notes, 0);
    json_t *rep = job_report_json(j, outcome);
    cuco_buf md = CUCO_BUF_INIT;
    job_report_md(j, &md);
    int rc = cuco_tx_write_report(j->gen0, rep, cuco_buf_str(&md), report_json, e);
    json_decref(rep);
    cuco_buf_free(&md);
    return rc;
}

static void job_free(tx_job *j)
{
    if (j->have_prog_r)
        cuco_eval_result_free(&j->prog_r);
    if (j->have_seed_r)
        cuco_eval_result_free(&j->seed_r);
    cuco_tx_result_free(&j->tr);
    cuco_tx_headers_free(&j->hdrs);
    free(j->flat);
    free(j->seed);
    free(j->ws);
    free(j->gen0);
    free(j->prog_path);
    free(j->seed_copy);
    free(j->work);
}

int cuco_transform_workload(const cuco_workload *w, const cuco_transform_opts *o,
                            cuco_transform_outcome *outcome, char **report_json, cuco_err *e)
{
    tx_job j;
    memset(&j, 0, sizeof(j));
    j.w = w;
    j.o = o;
    j.t0 = cuco_tx_now_s();
    j.verification = "not run";
    int verify_line = 0, rc;

    *outcome = CUCO_TX_REFUSED;
    if (report_json)
        *report_json = NULL;
    if ((rc = cuco_workload_read_seed(w, &j.seed, e)) != 0 || (rc = job_paths(&j, e)) != 0 ||
        (rc = job_rules_and_check(&j, &verify_line, e)) != 0)
        goto out;
    j.transformed = !j.tr.refused && j.passed;
    j.unverifiable = j.transformed && verify_line == 2;
    if (!j.transformed && (rc = cuco_tx_notes_unapply(&j.tr.notes)) != 0)
        goto out;
    j.route_status = j.tr.refused ? "refused"
                     : j.passed   ? "static check passed"
                                  : "static check failed";
    if (j.transformed && (rc = job_write_program(&j, e)) != 0)
        goto out;
    if (j.transformed && o->no_verify) {
        j.verification = "not verified (--no-verify)";
        *outcome = CUCO_TX_NOT_BUILT;
    } else if (j.transformed && (rc = job_evaluate(&j, outcome, e)) != 0) {
        goto out;
    }
    if ((*outcome == CUCO_TX_VERIFIED || *outcome == CUCO_TX_NOT_BUILT) &&
        (rc = job_register(&j, *outcome, e)) != 0)
        goto out;
    rc = job_write_reports(&j, *outcome, report_json, e);
out:
    job_free(&j);
    return rc;
}
