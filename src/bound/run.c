/* run.c: the whole 'cuco bound' measurement of one workload: the static
 * audit, the program run at bench size with the CUPTI timeline library
 * loaded, the communication-removed and computation-removed variants built
 * through the cascade's compile step and run at bench size, the dynamic
 * audit (the communication-removed variant must fail verification), the
 * advice, and bound.json in the workspace (schema in docs/bound.md). */
#include "cuco/bound.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/confine.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/hash.h"
#include "cuco/proc.h"
#include "cuco/program.h"
#include "cuco/run_view.h"
#include "cuco/toolchain.h"

#define BOUND_TOP_KERNELS 8

static void say(const cuco_bound_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const cuco_bound_opts *o, const char *fmt, ...)
{
    if (!o->progress)
        return;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    o->progress(o->progress_ctx, cuco_buf_str(&b));
    cuco_buf_free(&b);
}

/* Expands the placeholders a run needs ({nccl_lib}, {ranks}, ...); an unknown
 * one, or one the machine lacks, stays as written. Caller frees. */
static char *expand(const cuco_workload *w, cuco_toolchain *tc, const char *arg)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (const char *p = arg; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (!close) {
            cuco_buf_putc(&b, *p++);
            continue;
        }
        char *name = cuco_strndup(p + 1, (size_t)(close - p - 1));
        int known = 0;
        char *v = name ? cuco_workload_placeholder(w, tc, name, &known) : NULL;
        free(name);
        if (v) {
            cuco_buf_puts(&b, v);
            p = close + 1;
        } else {
            cuco_buf_putc(&b, *p++);
        }
        free(v);
    }
    return cuco_buf_detach(&b);
}

/* The timeline library: opts, $CUCO_TIMELINE_LIB, beside the running cuco. */
static char *find_injection(const cuco_bound_opts *o)
{
    if (o->injection_lib)
        return cuco_path_abs(o->injection_lib);
    const char *env = getenv("CUCO_TIMELINE_LIB");
    if (env && *env)
        return cuco_path_abs(env);
    char *self = cuco_path_abs("/proc/self/exe");
    char *dir = self ? cuco_path_dirname(self) : NULL;
    char *lib = dir ? cuco_path_join(dir, "libcuco_timeline.so") : NULL;
    free(self);
    free(dir);
    if (lib && cuco_fs_exists(lib))
        return lib;
    free(lib);
    return NULL;
}

typedef struct measured {
    const char *what; /* "program", "comm_removed", "compute_removed" */
    int built, ran, n_removed;
    int has_verification, verified;
    double time_ms, compute_ms, comm_ms;
    double timeline_time_ms; /* the program's time_ms in the run with the timeline library */
    char *error;             /* owned */
} measured;

static double metric(const char *json, const char *key)
{
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    json_t *v = o ? json_object_get(o, key) : NULL;
    double d = json_is_number(v) ? json_number_value(v) : -1;
    json_decref(o);
    return d;
}

/* The key of a build: the program text, the build command, the output name
 * and the environment the toolchain reads. Caller frees. */
static char *build_key(const cuco_workload *w, const char *text)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "%s\n--build--\n", text);
    for (size_t i = 0; i < w->build_command.n; i++)
        cuco_buf_printf(&b, "%s\x1f", w->build_command.items[i]);
    const char *nccl = getenv("NCCL_HOME"), *path = getenv("PATH");
    cuco_buf_printf(&b, "\n%s\n%s\n%s\n", w->build_output, nccl ? nccl : "", path ? path : "");
    char hex[17];
    cuco_hash_hex(b.data ? b.data : "", b.len, hex);
    cuco_buf_free(&b);
    return cuco_strdup(hex);
}

/* A build left by an earlier 'cuco bound --build-only' in work/<what>/ for
 * this very text, or NULL. Caller frees. */
static char *prebuilt_dir(const cuco_workload *w, const char *dir, const char *key)
{
    char *path = cuco_path_join(dir, "prebuilt.json");
    json_t *j = cuco_fs_exists(path) ? json_load_file(path, 0, NULL) : NULL;
    free(path);
    const char *k = json_string_value(json_object_get(j, "key"));
    const char *bd = json_string_value(json_object_get(j, "build_dir"));
    char *out = NULL;
    if (k && bd && !strcmp(k, key)) {
        char *bin = cuco_path_join(bd, w->build_output);
        if (cuco_fs_exists(bin))
            out = cuco_strdup(bd);
        free(bin);
    }
    json_decref(j);
    return out;
}

/* Builds text through the cascade's compile step into work/<what>/ (or
 * reuses the build --build-only left there). *build_dir: the folder holding
 * the binary (caller frees), NULL with m->error set when the build failed. */
static int build_one(const cuco_workload *w, const char *text, const cuco_bound_opts *o,
                     const char *work, measured *m, char **build_dir, cuco_err *e)
{
    *build_dir = NULL;
    char *dir = cuco_path_join(work, m->what);
    char *key = build_key(w, text);
    char *reuse = prebuilt_dir(w, dir, key);
    if (reuse) {
        say(o, "%s: reusing the build in %s", m->what, reuse);
        m->built = 1;
        *build_dir = reuse;
        free(key);
        free(dir);
        return 0;
    }
    cuco_fs_remove_tree(dir, NULL);
    int rc = cuco_fs_mkdirs(dir, e);
    if (rc)
        goto out;
    /* The variants are cuco's own edits, made outside EVOLVE-BLOCKs too when
     * a program has none: the frozen-text guard (for mutators) does not
     * apply, so the text is its own reference. */
    cuco_eval_opts eo = {.work_dir = dir,
                         .max_level = 1,
                         .keep_build = 1,
                         .frozen_ref = text,
                         .no_confine = o->no_confine};
    cuco_eval_result r;
    say(o, "%s: building", m->what);
    if ((rc = cuco_eval_program(w, text, &eo, &r, e)))
        goto out;
    if (r.level < 1 || !r.build_dir) {
        m->error = cuco_sprintf("build failed (%s): %s", cuco_eval_status_name(r.status),
                                r.excerpt ? r.excerpt : "");
    } else {
        m->built = 1;
        *build_dir = cuco_path_abs(r.build_dir);
        json_t *j = json_pack("{s:s, s:s}", "key", key, "build_dir", *build_dir);
        char *path = cuco_path_join(dir, "prebuilt.json");
        if (!j || json_dump_file(j, path, JSON_INDENT(2)) != 0)
            say(o, "%s: could not record the build in %s", m->what, path);
        free(path);
        json_decref(j);
    }
    cuco_eval_result_free(&r);
out:
    free(key);
    free(dir);
    return rc;
}

/* A run of a workload whose frozen code vouches (result.vouch) that it did
 * not vouch for is no measurement: m->error says why. */
static void vouch_run(const cuco_workload *w, const cuco_proc_result *pr, const char *nonce,
                      int pass, int first, measured *m)
{
    char *why = NULL;
    if (!w->vouch || cuco_run_output_vouch(pr->out, nonce, &why) == CUCO_VOUCH_OK)
        return;
    if (!m->error)
        m->error = cuco_sprintf("%s%s", pass ? "with the timeline library: " : "", why);
    if (first)
        m->ran = 0;
    free(why);
}

/* The values the program's run knobs are written with, into env: the
 * cascade's build reads them from the environment (CUCO_KNOB_<NAME>, falling
 * back to each knob's first choice), so without them a run would measure
 * another program than the text. */
static int run_knob_env(const char *text, cuco_strlist *env, cuco_err *e)
{
    char *staged = NULL;
    cuco_strlist knobs = {0};
    int rc = cuco_program_stage_run_knobs(text, &staged, &knobs, e);
    for (size_t i = 0; rc == 0 && i < knobs.n; i++)
        rc = cuco_strlist_push(env, knobs.items[i]);
    free(staged);
    cuco_strlist_free(&knobs);
    return rc;
}

/* Builds text (or reuses its build) and runs it at bench size: as it is,
 * then with the timeline library loaded (or only the latter with
 * o->single_run). */
static int measure(const cuco_workload *w, const char *text, const cuco_bound_opts *o,
                   cuco_toolchain *tc, const char *work, const char *timeline_dir,
                   const char *inject, measured *m, cuco_err *e)
{
    m->time_ms = m->compute_ms = m->comm_ms = m->timeline_time_ms = -1;
    char *build_dir = NULL;
    int rc = build_one(w, text, o, work, m, &build_dir, e);
    if (rc || !build_dir)
        return rc;
    char *bin = cuco_path_join(build_dir, w->build_output);
    cuco_strlist argv = {0}, env = {0};
    if (!strcmp(w->launcher, "mpirun")) {
        char np[32];
        snprintf(np, sizeof np, "%d", w->ranks);
        const char *pre[] = {"mpirun", "-np", np, "--bind-to", "none", "--oversubscribe", NULL};
        for (size_t i = 0; pre[i]; i++)
            cuco_strlist_push(&argv, pre[i]);
        if (geteuid() == 0)
            cuco_strlist_push(&argv, "--allow-run-as-root");
        for (size_t i = 0; i < w->mpirun_args.n; i++) {
            char *a = expand(w, tc, w->mpirun_args.items[i]);
            cuco_strlist_push(&argv, a);
            free(a);
        }
    }
    cuco_strlist_push(&argv, bin);
    for (size_t i = 0; i < w->bench.args.n; i++) {
        char *a = expand(w, tc, w->bench.args.items[i]);
        cuco_strlist_push(&argv, a);
        free(a);
    }
    cuco_strlist_push(&env, "OMPI_ALLOW_RUN_AS_ROOT=1");
    cuco_strlist_push(&env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    cuco_strlist_push(&env, "NCCL_NVLS_ENABLE=0");
    for (size_t i = 0; i < w->n_env; i++) {
        char *v = expand(w, tc, w->env[i].value);
        char *kv = cuco_sprintf("%s=%s", w->env[i].key, v);
        cuco_strlist_push(&env, kv);
        free(kv);
        free(v);
    }
    if ((rc = run_knob_env(text, &env, e)) != 0) {
        free(bin);
        free(build_dir);
        cuco_strlist_free(&argv);
        cuco_strlist_free(&env);
        return rc;
    }
    /* Pass 0 times the program as it is; pass 1 (when a timeline is wanted)
     * runs it again with the CUPTI library loaded, whose tracing adds a
     * little to every launch. */
    cuco_err run_err = CUCO_ERR_INIT;
    int with_timeline = timeline_dir && inject;
    /* Confined like an evaluation's runs: it writes only its build folder
     * and the timeline's. */
    const char *writable[] = {build_dir, with_timeline ? timeline_dir : NULL, NULL};
    cuco_confine confine = {.enabled = !o->no_confine && cuco_confine_default_enabled(),
                            .writable = writable};
    int first = with_timeline && o->single_run ? 1 : 0;
    for (int pass = first; pass < (with_timeline ? 2 : 1); pass++) {
        if (pass == 1) {
            char *kv = cuco_sprintf("CUDA_INJECTION64_PATH=%s", inject);
            cuco_strlist_push(&env, kv);
            free(kv);
            kv = cuco_sprintf("CUCO_TIMELINE_DIR=%s", timeline_dir);
            cuco_strlist_push(&env, kv);
            free(kv);
        }
        const char **av = calloc(argv.n + 1, sizeof *av), **ev = calloc(env.n + 2, sizeof *ev);
        for (size_t i = 0; av && i < argv.n; i++)
            av[i] = argv.items[i];
        for (size_t i = 0; ev && i < env.n; i++)
            ev[i] = env.items[i];
        /* a fresh nonce for every run (the vouch protocol, cuco/eval.h) */
        char nonce[CUCO_NONCE_LEN + 1] = "", nonce_kv[CUCO_NONCE_LEN + 16];
        if (cuco_vouch_new_nonce(nonce, &run_err) == 0 && ev) {
            snprintf(nonce_kv, sizeof nonce_kv, "CUCO_NONCE=%s", nonce);
            ev[env.n] = nonce_kv;
        }
        char *shown = av ? cuco_proc_argv_string(av) : NULL;
        say(o, "%s%s: %s", m->what, pass ? " (timeline)" : "", shown ? shown : "");
        free(shown);
        cuco_proc_opts po = {.argv = av,
                             .cwd = build_dir,
                             .env_set = ev,
                             .timeout_s = w->bench.timeout_s > 0 ? w->bench.timeout_s : 300,
                             .confine = &confine};
        cuco_proc_result pr;
        if (!av || !ev) {
            m->error = cuco_strdup("out of memory");
        } else if (cuco_proc_run(&po, &pr, &run_err)) {
            if (!m->error)
                m->error = cuco_sprintf("cannot run: %s", cuco_err_msg(&run_err));
        } else {
            cuco_run_output out;
            cuco_run_output_parse(pr.out, &out);
            if (pass == first) {
                m->has_verification = out.has_verification;
                m->verified = out.verified;
                m->time_ms = out.time_ms;
                m->compute_ms = metric(out.result_json, "compute_ms");
                m->comm_ms = metric(out.result_json, "comm_ms");
                m->ran = 1;
            }
            if (pass == 1)
                m->timeline_time_ms = out.time_ms;
            if ((!pr.exited || pr.exit_code != 0) && !m->error) {
                char *how = cuco_proc_describe(&pr);
                const char *tail = pr.err && pr.err_len > 600 ? pr.err + pr.err_len - 600 : pr.err;
                m->error = cuco_sprintf("%s%s%s%s", pass ? "with the timeline library: " : "", how,
                                        tail && *tail ? ": " : "", tail ? tail : "");
                free(how);
                if (pass == first)
                    m->ran = pr.exited; /* a crash or timeout is not a measurement */
            }
            vouch_run(w, &pr, nonce, pass, pass == first, m);
            cuco_run_output_free(&out);
            cuco_proc_result_free(&pr);
        }
        free(av);
        free(ev);
    }
    cuco_err_clear(&run_err);
    free(bin);
    cuco_strlist_free(&argv);
    cuco_strlist_free(&env);
    free(build_dir);
    return 0;
}

static json_t *num_or_null(double v)
{
    return v >= 0 ? json_real(v) : json_null();
}

static json_t *rank_json(const cuco_bound_rank *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(r->rank));
    json_object_set_new(o, "pid", json_integer(r->pid));
    json_object_set_new(o, "device", json_integer(r->device));
    json_object_set_new(o, "kernels", json_integer(r->n_kernels));
    json_object_set_new(o, "copies", json_integer(r->n_copies));
    json_object_set_new(o, "span_ms", json_real(r->span_ms));
    json_object_set_new(o, "compute_ms", json_real(r->compute_ms));
    json_object_set_new(o, "comm_ms", json_real(r->comm_ms));
    json_object_set_new(o, "copy_ms", json_real(r->copy_ms));
    json_object_set_new(o, "overlap_ms", json_real(r->overlap_ms));
    json_object_set_new(o, "busy_ms", json_real(r->busy_ms));
    json_object_set_new(o, "serial_ms", json_real(r->serial_ms));
    json_object_set_new(o, "bound_ms", json_real(r->bound_ms));
    json_object_set_new(o, "ceiling", json_real(r->ceiling));
    json_object_set_new(o, "wait_ms", json_real(r->wait_ms));
    json_t *top = json_array();
    for (size_t k = 0; k < r->n_top; k++) {
        json_t *t = json_object();
        json_object_set_new(t, "name", json_string(r->top[k].name));
        json_object_set_new(t, "count", json_integer(r->top[k].count));
        json_object_set_new(t, "total_ms", json_real(r->top[k].total_ms));
        json_object_set_new(t, "share", json_real(r->top[k].share));
        json_object_set_new(t, "comm", json_boolean(r->top[k].comm));
        json_array_append_new(top, t);
    }
    json_object_set_new(o, "top_kernels", top);
    /* One step as the program timed it (cudaEventElapsedTime intervals). */
    static const char *const kinds[] = {"full", "compute_only", "comm_only"};
    json_t *timed = json_object();
    json_object_set_new(timed, "intervals", json_integer(r->n_timed));
    for (int k = 0; k < CUCO_TIMED_KINDS; k++) {
        const cuco_bound_timed *t = &r->timed[k];
        json_t *g = json_object();
        json_object_set_new(g, "n", json_integer(t->n));
        json_object_set_new(g, "compute_ms", t->n ? json_real(t->compute_ms) : json_null());
        json_object_set_new(g, "comm_ms", t->n ? json_real(t->comm_ms) : json_null());
        json_object_set_new(g, "span_ms", t->n ? json_real(t->span_ms) : json_null());
        json_object_set_new(g, "event_ms", t->n ? json_real(t->event_ms) : json_null());
        json_object_set_new(timed, kinds[k], g);
    }
    json_object_set_new(o, "timed", timed);
    return o;
}

static json_t *measured_json(const measured *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "built", json_boolean(m->built));
    json_object_set_new(o, "ran", json_boolean(m->ran));
    if (strcmp(m->what, "program"))
        json_object_set_new(o, "calls_removed", json_integer(m->n_removed));
    json_object_set_new(o, "verification",
                        json_string(!m->ran                ? "not_run"
                                    : !m->has_verification ? "none"
                                    : m->verified          ? "pass"
                                                           : "fail"));
    json_object_set_new(o, "time_ms", num_or_null(m->time_ms));
    json_object_set_new(o, "compute_ms", num_or_null(m->compute_ms));
    json_object_set_new(o, "comm_ms", num_or_null(m->comm_ms));
    if (!strcmp(m->what, "program"))
        json_object_set_new(o, "time_ms_with_timeline", num_or_null(m->timeline_time_ms));
    json_object_set_new(o, "error", m->error ? json_string(m->error) : json_null());
    return o;
}

static json_t *audit_json(const cuco_audit *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "finding", json_boolean(a->finding));
    json_object_set_new(o, "summary", json_string(a->summary ? a->summary : ""));
    json_t *sites = json_array();
    for (size_t k = 0; k < a->n_sites; k++) {
        json_t *s = json_object();
        json_object_set_new(s, "file", json_string(a->sites[k].file));
        json_object_set_new(s, "line", json_integer(a->sites[k].line));
        json_object_set_new(s, "text", json_string(a->sites[k].text));
        json_object_set_new(s, "verdict",
                            json_string(cuco_audit_verdict_name(a->sites[k].verdict)));
        json_object_set_new(s, "why", json_string(a->sites[k].why));
        json_array_append_new(sites, s);
    }
    json_object_set_new(o, "sites", sites);
    json_object_set_new(o, "comm_finding", json_boolean(a->comm_finding));
    json_t *comm = json_array();
    for (size_t k = 0; k < a->n_comm; k++) {
        const cuco_audit_comm *u = &a->comm[k];
        json_t *c = json_object();
        json_object_set_new(c, "file", json_string(u->file));
        json_object_set_new(c, "line", json_integer(u->line));
        json_object_set_new(c, "call", json_string(u->call));
        json_object_set_new(c, "buffer", json_string(u->buffer));
        json_object_set_new(c, "read", json_boolean(u->read));
        json_object_set_new(c, "read_at", u->read_at ? json_string(u->read_at) : json_null());
        json_array_append_new(comm, c);
    }
    json_object_set_new(o, "communication", comm);
    return o;
}

/* -I folders of the build command, for following the program's includes. */
static void include_dirs(const cuco_workload *w, cuco_toolchain *tc, cuco_strlist *dirs)
{
    for (size_t i = 0; i < w->build_command.n; i++) {
        const char *a = w->build_command.items[i];
        if (strncmp(a, "-I", 2) || strstr(a, "{nccl_include}"))
            continue;
        char *x = expand(w, tc, a + 2);
        cuco_strlist_push(dirs, x);
        free(x);
    }
}

/* The analysis of the evolve file, for the variant builder; NULL (and
 * *error set, caller frees) when it fails. */
static json_t *analyze_evolve(const cuco_workload *w, char **error)
{
    char *evolve_path = cuco_path_join(w->dir, w->evolve_file);
    const char *paths[] = {evolve_path};
    json_t *analysis = NULL;
    cuco_err ae = CUCO_ERR_INIT;
    if (cuco_analyze_paths(paths, 1, &analysis, &ae)) {
        *error = cuco_strdup(cuco_err_msg(&ae));
        analysis = NULL;
    }
    cuco_err_clear(&ae);
    free(evolve_path);
    return analysis;
}

int cuco_bound_build(const cuco_workload *w, const cuco_bound_opts *o, char **text_out, cuco_err *e)
{
    *text_out = NULL;
    unsigned parts = o->build_parts ? o->build_parts : 7u;
    char *seed = NULL, *analysis_error = NULL;
    char *work = cuco_path_join(o->workspace, "bound");
    json_t *analysis = NULL;
    cuco_buf text = CUCO_BUF_INIT;
    int failed = 0;
    int rc = cuco_fs_mkdirs(work, e);
    if (!rc)
        rc = cuco_workload_read_seed(w, &seed, e);
    if (!rc && (parts & 6u))
        analysis = analyze_evolve(w, &analysis_error);
    static const char *const names[] = {"program", "comm_removed", "compute_removed"};
    for (int v = 0; !rc && v < 3; v++) {
        if (!(parts & (1u << v)))
            continue;
        measured m = {.what = names[v]};
        char *vt = NULL;
        if (v > 0) {
            rc = cuco_bound_variant_from(seed, w->evolve_file, analysis,
                                         v == 1 ? CUCO_VARIANT_NO_COMM : CUCO_VARIANT_NO_COMPUTE,
                                         &vt, &m.n_removed, e);
            if (rc)
                break;
            if (m.n_removed == 0) {
                /* cuco_bound_run() does not run it either */
                cuco_buf_printf(&text, "%s: no call to remove, nothing to build\n", names[v]);
                free(vt);
                continue;
            }
        }
        char *build_dir = NULL;
        rc = build_one(w, v ? vt : seed, o, work, &m, &build_dir, e);
        if (!rc) {
            if (build_dir)
                cuco_buf_printf(&text, "%s: built in %s\n", names[v], build_dir);
            else
                cuco_buf_printf(&text, "%s: %.400s\n", names[v], m.error ? m.error : "not built");
            failed |= !build_dir;
        }
        free(build_dir);
        free(m.error);
        free(vt);
    }
    if (!rc)
        *text_out = cuco_buf_detach(&text);
    cuco_buf_free(&text);
    json_decref(analysis);
    free(analysis_error);
    free(seed);
    free(work);
    return rc ? rc : failed;
}

/* One 'cuco bound' of a workload: what its steps share. */
typedef struct bound_job {
    const cuco_workload *w;
    const cuco_bound_opts *o;
    cuco_toolchain tc;
    cuco_audit audit;
    cuco_bound_timeline tl;
    measured m[3]; /* the program, communication removed, computation removed */
    char *seed, *work, *tdir, *inject, *tl_error, *advice, *analysis_error;
    json_t *analysis, *root;
    cuco_strlist dirs;
    cuco_buf text, warn;
    const char *dynamic; /* the dynamic audit's verdict */
    int dynamic_finding;
} bound_job;

/* The headline figures: the timeline's critical rank, else the program's
 * own breakdown. */
typedef struct headline {
    double share, ceiling, top_share, comp_ms, comm_ms, step_ms;
    const char *top_name, *source;
    int top_comm, per_step;
    const char *note; /* why the ceiling is not a measured figure, or NULL */
} headline;

/* The static audit of the program's verification. */
static int bound_static_audit(bound_job *bj, cuco_err *e)
{
    include_dirs(bj->w, &bj->tc, &bj->dirs);
    char *evolve = cuco_path_join(bj->w->dir, bj->w->evolve_file);
    const char **dv = calloc(bj->dirs.n + 1, sizeof *dv);
    for (size_t i = 0; dv && i < bj->dirs.n; i++)
        dv[i] = bj->dirs.items[i];
    say(bj->o, "static audit of %s", evolve);
    int rc = cuco_bound_audit_static(evolve, dv, &bj->audit, e);
    free(dv);
    free(evolve);
    if (rc == 0 && bj->audit.finding)
        cuco_buf_printf(&bj->warn, "WARNING: verification audit (static): %s\n", bj->audit.summary);
    return rc;
}

/* The program at bench size, with the timeline library loaded when found. */
static int bound_measure_program(bound_job *bj, cuco_err *e)
{
    bj->work = cuco_path_join(bj->o->workspace, "bound");
    bj->tdir = cuco_path_join(bj->work, "timeline");
    cuco_fs_remove_tree(bj->tdir, NULL);
    int rc = cuco_fs_mkdirs(bj->tdir, e);
    if (rc)
        return rc;
    char *abs_t = cuco_path_abs(bj->tdir);
    free(bj->tdir);
    bj->tdir = abs_t;
    bj->inject = find_injection(bj->o);
    if (!bj->inject)
        cuco_buf_printf(&bj->warn, "note: libcuco_timeline.so not found (build it where CUPTI "
                                   "exists, or set CUCO_TIMELINE_LIB): no kernel timeline\n");
    if ((rc = measure(bj->w, bj->seed, bj->o, &bj->tc, bj->work, bj->tdir, bj->inject, &bj->m[0],
                      e)))
        return rc;
    if (bj->inject && bj->m[0].ran) {
        cuco_err te = CUCO_ERR_INIT;
        if (cuco_bound_timeline_load(bj->tdir, NULL, BOUND_TOP_KERNELS, &bj->tl, &te))
            bj->tl_error = cuco_strdup(cuco_err_msg(&te));
        cuco_err_clear(&te);
    }
    return 0;
}

/* The two variants (communication removed, computation removed), then the
 * dynamic audit: the first must fail its verification. */
static int bound_measure_variants(bound_job *bj, cuco_err *e)
{
    measured *m = bj->m;
    /* The analysis's call spans join the variant builder's own. */
    bj->analysis = analyze_evolve(bj->w, &bj->analysis_error);
    for (int v = 1; v <= 2; v++) {
        char *vt = NULL;
        int rc = cuco_bound_variant_from(bj->seed, bj->w->evolve_file, bj->analysis,
                                         v == 1 ? CUCO_VARIANT_NO_COMM : CUCO_VARIANT_NO_COMPUTE,
                                         &vt, &m[v].n_removed, e);
        if (rc)
            return rc;
        if (m[v].n_removed > 0)
            rc = measure(bj->w, vt, bj->o, &bj->tc, bj->work, NULL, NULL, &m[v], e);
        else
            m[v].error = cuco_strdup("no call to remove was found");
        free(vt);
        if (rc)
            return rc;
    }
    if (m[1].n_removed == 0) {
        bj->dynamic = "no_collective";
    } else if (!m[1].ran || !m[1].has_verification) {
        bj->dynamic = "inconclusive";
    } else if (m[1].verified) {
        bj->dynamic = "passes_without_communication";
        bj->dynamic_finding = 1;
        cuco_buf_printf(&bj->warn,
                        "WARNING: verification audit (dynamic): the program still prints "
                        "PASS with its %d communication call%s removed: its verification "
                        "does not check communicated data, so speedups of transformed "
                        "programs are not proven correct\n",
                        m[1].n_removed, m[1].n_removed == 1 ? "" : "s");
    } else {
        bj->dynamic = "fails_without_communication";
    }
    return 0;
}

/* bound.json: the audits, the analysis used, the three measurements and
 * the timeline. */
static void bound_json_measurements(bound_job *bj)
{
    json_t *root = bj->root;
    const measured *m = bj->m;
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "workload", json_string(bj->w->name));
    json_object_set_new(root, "ranks", json_integer(bj->w->ranks));
    json_t *ver = json_object();
    json_object_set_new(ver, "warning", json_boolean(bj->audit.finding || bj->dynamic_finding));
    json_object_set_new(ver, "static", audit_json(&bj->audit));
    json_t *dyn = json_object();
    json_object_set_new(dyn, "result", json_string(bj->dynamic));
    json_object_set_new(dyn, "finding", json_boolean(bj->dynamic_finding));
    json_object_set_new(ver, "dynamic", dyn);
    json_object_set_new(ver, "message", json_string(bj->warn.len ? cuco_buf_str(&bj->warn) : ""));
    json_object_set_new(root, "verification_audit", ver);
    json_t *an = json_object();
    json_object_set_new(an, "used", json_boolean(bj->analysis != NULL));
    json_object_set_new(
        an, "collectives",
        json_integer((json_int_t)json_array_size(json_object_get(bj->analysis, "collectives"))));
    json_object_set_new(
        an, "launches",
        json_integer((json_int_t)json_array_size(json_object_get(bj->analysis, "launches"))));
    json_object_set_new(an, "error",
                        bj->analysis_error ? json_string(bj->analysis_error) : json_null());
    json_object_set_new(root, "analysis", an);
    json_object_set_new(root, "single_run", json_boolean(bj->o->single_run));
    json_object_set_new(root, "program", measured_json(&m[0]));
    /* The program itself built, ran and did not fail its verification (the
     * variants are expected to fail theirs). */
    json_object_set_new(
        root, "program_ok",
        json_boolean(bj->o->static_only || (m[0].built && m[0].ran && !m[0].error &&
                                            (!m[0].has_verification || m[0].verified))));
    json_object_set_new(root, "comm_removed", measured_json(&m[1]));
    json_object_set_new(root, "compute_removed", measured_json(&m[2]));
    json_t *tj = json_object();
    json_object_set_new(tj, "available", json_boolean(bj->tl.n_ranks > 0));
    json_object_set_new(tj, "error", bj->tl_error ? json_string(bj->tl_error) : json_null());
    json_object_set_new(tj, "files", json_integer((json_int_t)bj->tl.n_files));
    json_object_set_new(tj, "dropped", json_integer(bj->tl.dropped));
    json_t *ranks = json_array();
    for (size_t r = 0; r < bj->tl.n_ranks; r++)
        json_array_append_new(ranks, rank_json(&bj->tl.ranks[r]));
    json_object_set_new(tj, "ranks", ranks);
    json_object_set_new(tj, "critical",
                        bj->tl.critical >= 0 ? json_integer(bj->tl.critical) : json_null());
    json_object_set_new(root, "timeline", tj);
}

/* The headline from the timeline's critical rank. One step as the program
 * timed it when the timeline has its timed intervals (set-up and
 * verification left out), else the whole run. When the program also times
 * computation alone and communication alone, those parts give the bound:
 * inside a full step the kernels run faster than back to back (a GPU at its
 * power limit clocks higher while it waits on communication), so the full
 * step's busy times make the ceiling look higher than any overlap can
 * reach. */
static void headline_of_timeline(const cuco_bound_rank *c, headline *h)
{
    const cuco_bound_timed *full = &c->timed[CUCO_TIMED_FULL];
    const cuco_bound_timed *co = &c->timed[CUCO_TIMED_COMPUTE_ONLY];
    const cuco_bound_timed *mo = &c->timed[CUCO_TIMED_COMM_ONLY];
    double full_ms = full->event_ms > 0 ? full->event_ms : full->span_ms;
    if (full->n > 0 && co->n > 0 && mo->n > 0 && full_ms > 0 && co->compute_ms + mo->comm_ms > 0) {
        h->comp_ms = co->compute_ms;
        h->comm_ms = mo->comm_ms;
        h->step_ms = full_ms;
        h->source = "timeline_parts";
        h->per_step = 1;
    } else if (full->n > 0 && full->compute_ms + full->comm_ms > 0) {
        h->comp_ms = full->compute_ms;
        h->comm_ms = full->comm_ms;
        h->source = "timeline_steps";
        h->per_step = 1;
    } else {
        h->comp_ms = c->compute_ms;
        h->comm_ms = c->comm_ms;
        h->source = "timeline";
    }
    h->share = h->comp_ms + h->comm_ms > 0 ? h->comm_ms / (h->comp_ms + h->comm_ms) : 0;
    /* the ceiling is run_view's, the one definition of bound and ceiling */
    run_view_bound vb;
    run_view_bound_of(h->step_ms > 0 ? h->step_ms : h->comp_ms + h->comm_ms, h->comp_ms, h->comm_ms,
                      -1, &vb);
    h->ceiling = vb.has_ceiling ? vb.ceiling : 1.0;
    if (!vb.has_ceiling && h->comp_ms + h->comm_ms > 0) {
        /* a step faster than its slower part: nothing to gain */
        h->note = "the full step took less time than its slower part timed alone (clock and "
                  "power differ between the timed parts): no bound applies, the ceiling is "
                  "set to 1";
    }
    if (c->n_top) {
        h->top_name = c->top[0].name;
        h->top_share = c->top[0].share;
        h->top_comm = c->top[0].comm;
    }
}

static headline headline_of(const bound_job *bj)
{
    headline h = {-1, -1, 0, -1, -1, -1, NULL, "none", 0, 0, NULL};
    const measured *p = &bj->m[0];
    if (bj->tl.critical >= 0) {
        headline_of_timeline(&bj->tl.ranks[bj->tl.critical], &h);
    } else if (p->compute_ms >= 0 && p->comm_ms >= 0 && p->compute_ms + p->comm_ms > 0) {
        double big = p->compute_ms > p->comm_ms ? p->compute_ms : p->comm_ms;
        h.share = p->comm_ms / (p->compute_ms + p->comm_ms);
        h.ceiling = (p->compute_ms + p->comm_ms) / big;
        h.comp_ms = p->compute_ms;
        h.comm_ms = p->comm_ms;
        h.source = "program_breakdown";
        h.per_step = 1;
    }
    return h;
}

/* bound.json's "bound" and "advice". */
static void bound_json_headline(bound_job *bj)
{
    headline h = headline_of(bj);
    const measured *m = bj->m;
    json_t *b = json_object();
    json_object_set_new(b, "source", json_string(h.source));
    json_object_set_new(b, "per_step", json_boolean(h.per_step));
    json_object_set_new(b, "compute_ms", num_or_null(h.comp_ms));
    json_object_set_new(b, "comm_ms", num_or_null(h.comm_ms));
    json_object_set_new(b, "step_ms", num_or_null(h.step_ms));
    json_object_set_new(b, "comm_share", num_or_null(h.share));
    json_object_set_new(b, "ceiling", num_or_null(h.ceiling));
    json_object_set_new(b, "note", h.note ? json_string(h.note) : json_null());
    if (m[0].time_ms > 0 && h.ceiling > 0)
        json_object_set_new(b, "bound_time_ms", json_real(m[0].time_ms / h.ceiling));
    if (m[0].time_ms > 0 && m[1].time_ms >= 0 && m[2].time_ms >= 0 && m[1].ran && m[2].ran) {
        double big = m[1].time_ms > m[2].time_ms ? m[1].time_ms : m[2].time_ms;
        json_object_set_new(b, "variants_bound_ms", json_real(big));
        if (big > 0)
            json_object_set_new(b, "variants_ceiling", json_real(m[0].time_ms / big));
    }
    json_object_set_new(bj->root, "bound", b);
    if (h.share >= 0) {
        bj->advice = cuco_bound_advice(h.share, h.ceiling, h.top_name, h.top_share, h.top_comm);
        json_object_set_new(bj->root, "advice", json_string(bj->advice));
    } else {
        json_object_set_new(bj->root, "advice", json_null());
    }
}

/* The text: the static audit's sites. */
static void bound_text_audit(bound_job *bj)
{
    const cuco_audit *a = &bj->audit;
    cuco_buf *text = &bj->text;
    cuco_buf_printf(text, "cuco bound: %s (%d ranks)\n", bj->w->name, bj->w->ranks);
    if (bj->warn.len)
        cuco_buf_printf(text, "\n%s\n", cuco_buf_str(&bj->warn));
    cuco_buf_printf(text, "verification (static): %s\n", a->summary);
    for (size_t k = 0; k < a->n_sites; k++)
        cuco_buf_printf(text, "  %s:%d %s: %s: %s\n", a->sites[k].file, a->sites[k].line,
                        a->sites[k].text, cuco_audit_verdict_name(a->sites[k].verdict),
                        a->sites[k].why);
    for (size_t k = 0; k < a->n_comm; k++)
        cuco_buf_printf(text, "  %s:%d %s into %s: %s%s\n", a->comm[k].file, a->comm[k].line,
                        a->comm[k].call, a->comm[k].buffer,
                        a->comm[k].read ? "received data read at " : "received data never read",
                        a->comm[k].read && a->comm[k].read_at ? a->comm[k].read_at : "");
}

/* The text: one line per measurement. */
static void bound_text_measured(bound_job *bj)
{
    cuco_buf *text = &bj->text;
    cuco_buf_printf(text, "verification (dynamic): %s\n", bj->dynamic);
    for (int v = 0; v < 3; v++) {
        const measured *m = &bj->m[v];
        cuco_buf_printf(text, "%-16s ", m->what);
        if (m->ran && m->time_ms >= 0)
            cuco_buf_printf(text, "time %.3f ms", m->time_ms);
        if (m->ran && m->compute_ms >= 0 && m->comm_ms >= 0)
            cuco_buf_printf(text, "  (its own compute %.3f, comm %.3f)", m->compute_ms, m->comm_ms);
        if (m->ran)
            cuco_buf_printf(text, "  verification %s",
                            !m->has_verification ? "none"
                            : m->verified        ? "PASS"
                                                 : "FAIL");
        if (v)
            cuco_buf_printf(text, "  [%d calls removed]", m->n_removed);
        /* A variant that ran to its verdict failed it as expected: its
         * exit status and mpirun's complaint about it are no news. */
        if (m->error && !(v && m->ran && m->has_verification))
            cuco_buf_printf(text, "  error: %.300s", m->error);
        cuco_buf_putc(text, '\n');
    }
}

/* The text: the timeline, rank by rank, the critical rank's top kernels. */
static void bound_text_timeline(bound_job *bj)
{
    static const char *const kind_names[] = {"full step", "computation only", "communication only"};
    cuco_buf *text = &bj->text;
    if (bj->tl_error)
        cuco_buf_printf(text, "timeline: %s\n", bj->tl_error);
    for (size_t r = 0; r < bj->tl.n_ranks; r++) {
        const cuco_bound_rank *c = &bj->tl.ranks[r];
        int critical = (int)r == bj->tl.critical;
        cuco_buf_printf(text,
                        "rank %d dev %d%s: span %.3f ms, compute %.3f, comm %.3f, overlapped "
                        "%.3f, bound %.3f, ceiling %.3fx, waiting %.3f\n",
                        c->rank, c->device, critical ? " (critical)" : "", c->span_ms,
                        c->compute_ms, c->comm_ms, c->overlap_ms, c->bound_ms, c->ceiling,
                        c->wait_ms);
        for (int k = 0; k < CUCO_TIMED_KINDS; k++)
            if (c->timed[k].n)
                cuco_buf_printf(text,
                                "    per step (%s, median of %d timed by the program): "
                                "compute %.3f ms, comm %.3f ms, span %.3f ms, program's "
                                "own %.3f ms\n",
                                kind_names[k], c->timed[k].n, c->timed[k].compute_ms,
                                c->timed[k].comm_ms, c->timed[k].span_ms, c->timed[k].event_ms);
        for (size_t k = 0; critical && k < c->n_top; k++)
            cuco_buf_printf(text, "    %5.1f%%  %8.3f ms  x%-5d %s%.100s\n", c->top[k].share * 100,
                            c->top[k].total_ms, c->top[k].count, c->top[k].comm ? "[comm] " : "",
                            c->top[k].name);
    }
}

/* bound.json into the workspace; *json_out and *text_out on success. */
static int bound_write(bound_job *bj, char **json_out, char **text_out, cuco_err *e)
{
    char *dump = json_dumps(bj->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char *path = cuco_path_join(bj->o->workspace, "bound.json");
    int rc =
        dump ? cuco_fs_write(path, dump, strlen(dump), e) : cuco_err_set(e, CUCO_ENOMEM, "json");
    free(path);
    if (!rc) {
        *json_out = dump;
        dump = NULL;
        *text_out = cuco_buf_detach(&bj->text);
    }
    free(dump);
    return rc;
}

static void bound_job_free(bound_job *bj)
{
    json_decref(bj->root);
    cuco_buf_free(&bj->text);
    cuco_buf_free(&bj->warn);
    for (int v = 0; v < 3; v++)
        free(bj->m[v].error);
    free(bj->advice);
    free(bj->analysis_error);
    json_decref(bj->analysis);
    free(bj->tl_error);
    cuco_bound_timeline_free(&bj->tl);
    cuco_audit_free(&bj->audit);
    cuco_strlist_free(&bj->dirs);
    cuco_toolchain_free(&bj->tc);
    free(bj->seed);
    free(bj->work);
    free(bj->tdir);
    free(bj->inject);
}

int cuco_bound_run(const cuco_workload *w, const cuco_bound_opts *o, char **json_out,
                   char **text_out, cuco_err *e)
{
    *json_out = *text_out = NULL;
    bound_job bj;
    memset(&bj, 0, sizeof bj);
    bj.w = w;
    bj.o = o;
    bj.tl.critical = -1;
    bj.m[0].what = "program";
    bj.m[1].what = "comm_removed";
    bj.m[2].what = "compute_removed";
    bj.dynamic = "not_run";
    bj.root = json_object();
    int rc = cuco_toolchain_detect(&bj.tc, e);
    if (rc) {
        json_decref(bj.root);
        return rc;
    }
    if ((rc = cuco_fs_mkdirs(o->workspace, e)) || (rc = cuco_workload_read_seed(w, &bj.seed, e)) ||
        (rc = bound_static_audit(&bj, e)))
        goto out;
    if (!o->static_only && ((rc = bound_measure_program(&bj, e)) ||
                            (!o->skip_variants && (rc = bound_measure_variants(&bj, e)))))
        goto out;
    bound_json_measurements(&bj);
    bound_json_headline(&bj);
    bound_text_audit(&bj);
    if (!o->static_only) {
        bound_text_measured(&bj);
        bound_text_timeline(&bj);
    }
    const char *note =
        json_string_value(json_object_get(json_object_get(bj.root, "bound"), "note"));
    if (note)
        cuco_buf_printf(&bj.text, "\nbound: %s\n", note);
    if (bj.advice)
        cuco_buf_printf(&bj.text, "\nadvice: %s\n", bj.advice);
    rc = bound_write(&bj, json_out, text_out, e);
out:
    bound_job_free(&bj);
    return rc;
}
