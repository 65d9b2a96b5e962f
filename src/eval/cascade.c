/* cascade.c: evaluates one candidate program of a workload:
 *
 *   frozen check -> L1 compile -> L2 run + verify -> L3 benchmark
 *
 * Each candidate gets a fresh build folder holding copies of the workload's
 * sources with the candidate's text as the evolve file. Commands come from the
 * manifest with placeholders expanded and run through src/proc (argv arrays,
 * timeouts that kill the whole process group). The first failing level decides
 * the status, and the excerpt keeps the part of the log that explains it. */
#include "cuco/buf.h"
#include "cuco/confine.h"
#include "cuco/eval.h"
#include "cuco/fs.h"
#include "cuco/hash.h"
#include "cuco/include_deps.h"
#include "cuco/launch.h"
#include "cuco/patch.h"
#include "cuco/proc.h"
#include "cuco/program.h"
#include "cuco/redact.h"
#include "cuco/stats.h"
#include "cuco/toolchain.h"
#include "exports.h"
#include "sight.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXCERPT_CAP = 4096, COMPILE_EXCERPT_LINES = 40 };
/* A run that prints more than this is stopped as bad_output: the result
 * lines are a few hundred bytes, and a flood only costs time and memory. */
#define RUN_OUTPUT_LIMIT (64ULL << 20)

/* State of one evaluation. Everything here is owned and freed by
 * cascade_free(). */
typedef struct cascade {
    const cuco_workload *w;
    const cuco_eval_opts *o;
    cuco_eval_result *r;
    char *build_dir;
    char *bin;
    char *evolve_path;
    cuco_toolchain tc;
    int tc_done;
    cuco_strlist mpi_compile, mpi_link;
    int mpi_compile_done, mpi_link_done;
    cuco_strlist run_env;  /* NAME=VALUE for every run */
    cuco_strlist knob_env; /* CUCO_KNOB_<NAME>=VALUE of the run knobs (cuco/program.h) */
    cuco_confine confine;  /* of the build and the runs: only build_dir is writable */
    const char *writable[2];
    eval_sight sight; /* what the build and the runs may read */
    char *leftovers;  /* the first "cuco: ended N processes ..." line of a run, or NULL */
} cascade;

static void progress(cascade *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(cascade *c, const char *fmt, ...)
{
    if (!c->o || !c->o->progress)
        return;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    c->o->progress(c->o->progress_ctx, cuco_buf_str(&b));
    cuco_buf_free(&b);
}

static void cascade_free(cascade *c)
{
    free(c->leftovers);
    free(c->build_dir);
    free(c->bin);
    free(c->evolve_path);
    if (c->tc_done)
        cuco_toolchain_free(&c->tc);
    cuco_strlist_free(&c->mpi_compile);
    cuco_strlist_free(&c->mpi_link);
    cuco_strlist_free(&c->run_env);
    cuco_strlist_free(&c->knob_env);
    eval_sight_free(&c->sight);
}

/* Keeps valid UTF-8 and printable ASCII (plus \n and \t); anything else
 * becomes '?', so excerpts always go into JSON. Caller frees. */
static char *clean_text(const char *s, size_t n)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_reserve(&b, n + 1);
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        size_t len = ch < 0x80             ? 1
                     : (ch & 0xE0) == 0xC0 ? 2
                     : (ch & 0xF0) == 0xE0 ? 3
                     : (ch & 0xF8) == 0xF0 ? 4
                                           : 0;
        int ok = len > 0 && i + len <= n && !(len == 2 && ch < 0xC2);
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && len == 1 && ch < 0x20 && ch != '\n' && ch != '\t')
            ok = 0;
        if (!ok) {
            cuco_buf_putc(&b, ch == '\r' ? '\n' : '?');
            i++;
            continue;
        }
        cuco_buf_append(&b, s + i, len);
        i += len;
    }
    return cuco_buf_detach(&b);
}

/* The last cap bytes of s, starting at a line boundary when one is near. */
static const char *tail_of(const char *s, size_t cap)
{
    size_t n = strlen(s);
    if (n <= cap)
        return s;
    const char *t = s + n - cap;
    const char *nl = strchr(t, '\n');
    return nl && nl + 1 < s + n && (size_t)(nl - t) < cap / 4 ? nl + 1 : t;
}

/* Every excerpt goes through here: secrets are redacted before the cut, so
 * that none is cut in half and let through (cuco/redact.h). */
static void set_excerpt(cascade *c, const char *text)
{
    free(c->r->excerpt);
    char *redacted = cuco_redact_secrets(text);
    const char *t = redacted ? redacted : "";
    size_t n = strlen(t);
    if (n > EXCERPT_CAP)
        n = EXCERPT_CAP;
    c->r->excerpt = clean_text(t, n);
    free(redacted);
}

static int line_has_error(const char *s, size_t n)
{
    static const char *const marks[] = {"error", "Error", "ERROR", "undefined reference",
                                        "cannot find"};
    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
        size_t k = strlen(marks[m]);
        for (size_t i = 0; i + k <= n; i++)
            if (!memcmp(s + i, marks[m], k))
                return 1;
    }
    return 0;
}

/* The first error lines of a compiler's output: from the first line that
 * mentions an error, some lines on; the head of the log when none does. */
static char *compile_excerpt(const char *log)
{
    const char *start = log;
    for (const char *p = log; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (line_has_error(p, n)) {
            start = p;
            break;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    const char *end = start;
    for (int lines = 0; *end && lines < COMPILE_EXCERPT_LINES; lines++) {
        const char *nl = strchr(end, '\n');
        end = nl ? nl + 1 : end + strlen(end);
    }
    return cuco_strndup(start, (size_t)(end - start));
}

/* "how it ended" + tails of stderr and stdout, for run failures. */
static char *run_excerpt(const char *headline, const cuco_proc_result *pr)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_printf(&b, "%s\n", headline);
    const char *err = pr->err ? pr->err : "", *out = pr->out ? pr->out : "";
    if (*err)
        cuco_buf_printf(&b, "--- stderr (last lines) ---\n%s%s", tail_of(err, 1800),
                        cuco_str_ends_with(err, "\n") ? "" : "\n");
    if (*out)
        cuco_buf_printf(&b, "--- stdout (last lines) ---\n%s%s", tail_of(out, 1800),
                        cuco_str_ends_with(out, "\n") ? "" : "\n");
    return cuco_buf_detach(&b);
}

/* The evaluation's excerpt: headline, then the tail of the run's output. */
static void set_run_excerpt(cascade *c, const char *headline, const cuco_proc_result *pr)
{
    char *x = run_excerpt(headline, pr);
    set_excerpt(c, x);
    free(x);
}

static int need_toolchain(cascade *c, cuco_err *e)
{
    if (c->tc_done)
        return 0;
    memset(&c->tc, 0, sizeof c->tc);
    int rc = cuco_toolchain_detect(&c->tc, e);
    if (rc)
        return rc;
    c->tc_done = 1;
    return 0;
}

/* Splits the output of "mpicc --showme:WHAT" into arguments. */
static int need_mpi_flags(cascade *c, const char *what, cuco_strlist *flags, int *done, cuco_err *e)
{
    if (*done)
        return 0;
    char *opt = cuco_sprintf("--showme:%s", what);
    const char *argv[] = {"mpicc", opt, NULL};
    cuco_proc_opts po = {.argv = argv, .timeout_s = 30};
    cuco_proc_result pr;
    int rc = cuco_proc_run(&po, &pr, e);
    free(opt);
    if (rc)
        return cuco_err_prefix(e, "{mpi_%s_flags} needs mpicc", what);
    if (!pr.exited || pr.exit_code != 0) {
        char *how = cuco_proc_describe(&pr);
        rc = cuco_err_set(e, CUCO_EUNSUPPORTED, "mpicc --showme:%s failed (%s)", what, how);
        free(how);
        cuco_proc_result_free(&pr);
        return rc;
    }
    for (char *p = pr.out; p && *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        char *s = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (p > s) {
            char *arg = cuco_strndup(s, (size_t)(p - s));
            cuco_strlist_push(flags, arg);
            free(arg);
        }
    }
    cuco_proc_result_free(&pr);
    *done = 1;
    return 0;
}

/* The value of placeholder `name`, or NULL with e set when it cannot be had.
 * *known is 0 for names that are not placeholders. Caller frees. */
static char *placeholder(cascade *c, const char *name, int *known, cuco_err *e)
{
    *known = 1;
    if (!strcmp(name, "out"))
        return cuco_strdup(c->bin);
    if (!strcmp(name, "evolve_file"))
        return cuco_strdup(c->evolve_path);
    if (!strcmp(name, "src_dir"))
        return cuco_strdup(c->build_dir);
    int from_tc = cuco_workload_placeholder_needs_toolchain(name);
    if (from_tc && need_toolchain(c, e))
        return NULL;
    char *v = cuco_workload_placeholder(c->w, from_tc ? &c->tc : NULL, name, known);
    if (!v && *known && from_tc)
        cuco_err_set(e, CUCO_EUNSUPPORTED, "{%s} is used but was not found on this machine%s", name,
                     strcmp(name, "cuda_home") ? " (set NCCL_HOME)" : " (set CUDA_HOME)");
    return v;
}

/* Expands the placeholders of one argument into out (one or several args). */
static int expand_arg(cascade *c, const char *arg, cuco_strlist *out, cuco_err *e)
{
    int compile = !strcmp(arg, "{mpi_compile_flags}"), link = !strcmp(arg, "{mpi_link_flags}");
    if (compile || link) {
        cuco_strlist *flags = compile ? &c->mpi_compile : &c->mpi_link;
        int rc = need_mpi_flags(c, compile ? "compile" : "link", flags,
                                compile ? &c->mpi_compile_done : &c->mpi_link_done, e);
        if (rc)
            return rc;
        for (size_t i = 0; i < flags->n; i++)
            cuco_strlist_push(out, flags->items[i]);
        return 0;
    }
    cuco_buf b = CUCO_BUF_INIT;
    for (const char *p = arg; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (!close) {
            cuco_buf_putc(&b, *p++);
            continue;
        }
        char *name = cuco_strndup(p + 1, (size_t)(close - p - 1));
        int known = 0;
        char *value = placeholder(c, name, &known, e);
        free(name);
        if (known && !value) {
            cuco_buf_free(&b);
            return e->code ? e->code : CUCO_EINVAL;
        }
        if (known) {
            cuco_buf_puts(&b, value);
            free(value);
            p = close + 1;
        } else {
            cuco_buf_putc(&b, *p++);
        }
    }
    int rc = cuco_strlist_push(out, cuco_buf_str(&b));
    cuco_buf_free(&b);
    return rc;
}

static int expand_list(cascade *c, const cuco_strlist *in, cuco_strlist *out, cuco_err *e)
{
    for (size_t i = 0; i < in->n; i++) {
        int rc = expand_arg(c, in->items[i], out, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* A NULL-terminated view of a list (the strings stay the list's). */
static const char **argv_of(const cuco_strlist *l)
{
    const char **v = calloc(l->n + 1, sizeof *v);
    for (size_t i = 0; v && i < l->n; i++)
        v[i] = l->items[i];
    return v;
}

static int make_build_dir(cascade *c, cuco_err *e)
{
    char *tmpl;
    if (c->o && c->o->work_dir) {
        int rc = cuco_fs_mkdirs(c->o->work_dir, e);
        if (rc)
            return rc;
        char *abs = cuco_path_abs(c->o->work_dir);
        tmpl = cuco_sprintf("%s/cand-%s-XXXXXX", abs ? abs : c->o->work_dir, c->r->program_hash);
        free(abs);
    } else {
        const char *tmp = getenv("TMPDIR");
        tmpl = cuco_sprintf("%s/cuco-eval-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    }
    if (!mkdtemp(tmpl)) {
        int rc = cuco_err_errno(e, "cannot create a build folder from %s", tmpl);
        free(tmpl);
        return rc;
    }
    c->build_dir = tmpl;
    return 0;
}

static int stage_sources(cascade *c, const char *text, cuco_err *e)
{
    const cuco_workload *w = c->w;
    for (size_t i = 0; i < w->sources.n; i++) {
        const char *rel = w->sources.items[i];
        char *dst = cuco_path_join(c->build_dir, rel);
        char *dst_dir = cuco_path_dirname(dst);
        int rc = cuco_fs_mkdirs(dst_dir, e);
        free(dst_dir);
        if (!rc && !strcmp(rel, w->evolve_file)) {
            /* run knobs are read from the environment: one build serves
             * every value (the build cache key is the staged text) */
            char *staged = NULL;
            rc = cuco_program_stage_run_knobs(text, &staged, &c->knob_env, e);
            if (!rc && staged)
                progress(c, "%zu run knob%s passed at run time", c->knob_env.n,
                         c->knob_env.n == 1 ? "" : "s");
            if (!rc)
                rc = cuco_fs_write(dst, staged ? staged : text, strlen(staged ? staged : text), e);
            free(staged);
        } else if (!rc) {
            char *src = cuco_path_join(w->dir, rel);
            rc = cuco_fs_copy(src, dst, e);
            free(src);
        }
        free(dst);
        if (rc)
            return rc;
    }
    c->evolve_path = cuco_path_join(c->build_dir, w->evolve_file);
    c->bin = cuco_path_join(c->build_dir, w->build_output);
    return 0;
}

/* Environment for the runs: the MPI and NCCL settings every run needs, the
 * manifest's run.env (expanded), then the caller's. */
static int make_run_env(cascade *c, cuco_err *e)
{
    cuco_strlist_push(&c->run_env, "OMPI_ALLOW_RUN_AS_ROOT=1");
    cuco_strlist_push(&c->run_env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    cuco_strlist_push(&c->run_env, "NCCL_NVLS_ENABLE=0");
    for (size_t i = 0; i < c->w->n_env; i++) {
        cuco_strlist value = {0};
        int rc = expand_arg(c, c->w->env[i].value, &value, e);
        if (rc) {
            cuco_strlist_free(&value);
            return cuco_err_prefix(e, "run.env %s", c->w->env[i].key);
        }
        char *kv = cuco_sprintf("%s=%s", c->w->env[i].key, value.n ? value.items[0] : "");
        cuco_strlist_push(&c->run_env, kv);
        free(kv);
        cuco_strlist_free(&value);
    }
    for (size_t i = 0; i < c->knob_env.n; i++)
        cuco_strlist_push(&c->run_env, c->knob_env.items[i]);
    for (size_t i = 0; c->o && c->o->env_set && c->o->env_set[i]; i++)
        cuco_strlist_push(&c->run_env, c->o->env_set[i]);
    /* libraries the runs load (LD_LIBRARY_PATH) stay in their sight */
    if (eval_sight_add_env(&c->sight, &c->run_env) == 0 && c->confine.visible)
        c->confine.visible = c->sight.visible_view;
    return 0;
}

/* Sets status and excerpt for an infrastructure failure (cuco could not run
 * the step for reasons that are not the candidate's). */
static void infra_failure(cascade *c, const char *step, const cuco_err *e)
{
    c->r->status = CUCO_EVAL_INFRA_ERROR;
    char *msg = cuco_sprintf("%s: %s", step, cuco_err_msg(e));
    set_excerpt(c, msg);
    free(msg);
}

/* Appends the headers the staged sources include to key (see
 * cuco/include_deps.h); negative when they cannot be known (no caching). */
static int include_key(cascade *c, cuco_buf *key)
{
    cuco_strlist argv = {0}, dirs = {0};
    cuco_err ie = CUCO_ERR_INIT;
    int rc = expand_list(c, &c->w->build_command, &argv, &ie);
    if (rc == 0)
        rc = cuco_include_dirs((const char *const *)argv.items, argv.n, c->build_dir, &dirs, &ie);
    if (rc == 0)
        rc = cuco_include_digest(c->build_dir, &c->w->sources, &dirs, key, &ie);
    if (rc < 0)
        progress(c, "build cache not used: the included headers are not known (%s)",
                 cuco_err_msg(&ie));
    cuco_strlist_free(&argv);
    cuco_strlist_free(&dirs);
    cuco_err_clear(&ie);
    return rc < 0 ? rc : 0;
}

/* Appends "label\nsize\ncontent\n" of the file at path dir/name to key.
 * Negative when it cannot be read (key unchanged). */
static int key_file(cuco_buf *key, const char *dir, const char *name)
{
    char *path = cuco_path_join(dir, name);
    char *body = NULL;
    size_t len = 0;
    int rc = path ? cuco_fs_read(path, &body, &len, NULL) : CUCO_ENOMEM;
    if (rc == 0) {
        cuco_buf_printf(key, "%s\n%zu\n", name, len);
        cuco_buf_append(key, body, len);
        cuco_buf_putc(key, '\n');
    }
    free(body);
    free(path);
    return rc < 0 ? rc : 0;
}

/* Appends the toolchain-facing environment (NCCL_HOME, PATH) to key. */
static void key_toolchain_env(cuco_buf *key)
{
    const char *nccl = getenv("NCCL_HOME"), *path = getenv("PATH");
    cuco_buf_printf(key, "\n%s\n%s\n", nccl ? nccl : "", path ? path : "");
}

/* The process's default build cache (cuco_eval_default_build_cache): set
 * by the main thread before evaluations start, only read after, so the
 * worker threads that read it need no environment variable. */
static char *default_build_cache;

/* The build cache: binaries of programs already built, keyed by the xxh3 of
 * the staged sources (the program text among them), the local headers they
 * include, the build command template, the output name and the
 * toolchain-facing environment
 * (NCCL_HOME, PATH). A hit skips L1; a binary is only cached after a
 * successful build. */
static char *cache_path(cascade *c)
{
    const char *dir = c->o && c->o->build_cache ? c->o->build_cache : default_build_cache;
    if (!dir)
        dir = getenv("CUCO_BUILD_CACHE"); /* read only: nothing in cuco sets it */
    if (!dir || !*dir)
        return NULL;
    /* the staged sources: the candidate's text (the evolve file is one of
     * them, as the manifest requires) and the others */
    cuco_buf key = CUCO_BUF_INIT;
    for (size_t i = 0; i < c->w->sources.n; i++)
        if (key_file(&key, c->build_dir, c->w->sources.items[i]) < 0) {
            /* a source that cannot be read: no key, no caching */
            cuco_buf_free(&key);
            return NULL;
        }
    for (size_t i = 0; i < c->w->build_command.n; i++)
        cuco_buf_printf(&key, "%s\x1f", c->w->build_command.items[i]);
    /* the headers the sources include (harness, device/, runtime): a changed
     * header makes a new key */
    if (include_key(c, &key) < 0) {
        cuco_buf_free(&key);
        return NULL;
    }
    cuco_buf_printf(&key, "\n%s", c->w->build_output);
    key_toolchain_env(&key);
    char hex[17];
    cuco_hash_hex(key.data ? key.data : "", key.len, hex);
    cuco_buf_free(&key);
    char *name = cuco_sprintf("%s-%s", hex, c->w->build_output);
    char *out = name ? cuco_path_join(dir, name) : NULL;
    free(name);
    return out;
}

int cuco_eval_inputs_digest(const cuco_workload *w, char hex[17], cuco_err *e)
{
    cuco_eval_result r;
    memset(&r, 0, sizeof r);
    cascade c = {.w = w, .o = NULL, .r = &r};
    c.build_dir = cuco_strdup(w->dir);
    c.bin = cuco_path_join(w->dir, w->build_output);
    c.evolve_path = cuco_path_join(w->dir, w->evolve_file);
    if (!c.build_dir || !c.bin || !c.evolve_path) {
        cascade_free(&c);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    /* files that cannot be read are left out of the key */
    cuco_buf key = CUCO_BUF_INIT;
    if (w->manifest_path)
        key_file(&key, "/", w->manifest_path);
    for (size_t i = 0; i < w->sources.n; i++)
        if (strcmp(w->sources.items[i], w->evolve_file)) /* the program text is the
                                                            other half of the key */
            key_file(&key, w->dir, w->sources.items[i]);
    include_key(&c, &key); /* without the headers when they cannot be known */
    key_toolchain_env(&key);
    cuco_hash_hex(key.data ? key.data : "", key.len, hex);
    cuco_buf_free(&key);
    cascade_free(&c);
    return 0;
}

/* The build command's include folders, from the arguments that expand here
 * (one that cannot, e.g. {nccl_include} without NCCL, is left out). */
static void frozen_include_dirs(cascade *c, cuco_strlist *dirs)
{
    cuco_strlist argv = {0};
    for (size_t i = 0; i < c->w->build_command.n; i++) {
        cuco_err ae = CUCO_ERR_INIT;
        expand_arg(c, c->w->build_command.items[i], &argv, &ae);
        cuco_err_clear(&ae);
    }
    cuco_err de = CUCO_ERR_INIT;
    cuco_include_dirs((const char *const *)argv.items, argv.n, c->build_dir, dirs, &de);
    cuco_err_clear(&de);
    cuco_strlist_free(&argv);
}

/* What the compiler quotes from files outside the build folder and the build
 * command's include folders (`#include "/etc/passwd"`) keeps only its
 * location: the log goes into excerpts, the database and prompts. */
static void withhold_outside_quotes(cascade *c, cuco_proc_result *pr)
{
    cuco_strlist roots = {0};
    cuco_strlist_push(&roots, c->build_dir);
    frozen_include_dirs(c, &roots);
    char *kept = cuco_redact_compiler_output(pr->out ? pr->out : "", c->build_dir,
                                             (const char *const *)roots.items, roots.n);
    free(pr->out);
    pr->out = kept;
    cuco_strlist_free(&roots);
}

int cuco_eval_frozen_context(const cuco_workload *w, char **text, cuco_err *e)
{
    cuco_eval_result r;
    memset(&r, 0, sizeof r);
    cascade c = {.w = w, .o = NULL, .r = &r};
    c.build_dir = cuco_strdup(w->dir);
    c.bin = cuco_path_join(w->dir, w->build_output);
    c.evolve_path = cuco_path_join(w->dir, w->evolve_file);
    cuco_buf ctx = CUCO_BUF_INIT;
    cuco_strlist dirs = {0};
    int rc = c.build_dir && c.bin && c.evolve_path ? 0 : CUCO_ENOMEM;
    for (size_t i = 0; !rc && i < w->sources.n; i++)
        if (strcmp(w->sources.items[i], w->evolve_file))
            key_file(&ctx, w->dir, w->sources.items[i]);
    if (!rc) {
        frozen_include_dirs(&c, &dirs);
        rc = cuco_include_digest(w->dir, &w->sources, &dirs, &ctx, e);
    }
    cuco_strlist_free(&dirs);
    cascade_free(&c);
    if (rc) {
        cuco_buf_free(&ctx);
        return rc == CUCO_ENOMEM ? cuco_err_set(e, rc, "out of memory")
                                 : cuco_err_prefix(e, "the workload's headers");
    }
    *text = cuco_buf_detach(&ctx);
    if (!*text)
        *text = cuco_strdup("");
    return *text ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

/* The block guard (cuco/patch.h) with the workload's headers as frozen text:
 * 0 when the candidate passes; else the status is frozen_violation. */
static int guard_blocks(cascade *c, const char *frozen_ref, const char *text)
{
    char *context = NULL;
    cuco_err ge = CUCO_ERR_INIT;
    if (cuco_eval_frozen_context(c->w, &context, &ge) != 0) {
        progress(c, "block guard without the workload's headers: %s", cuco_err_msg(&ge));
        cuco_err_clear(&ge);
    }
    int rc = cuco_patch_guard_blocks(frozen_ref, text, context, &ge);
    free(context);
    if (rc == 0)
        return 0;
    c->r->status = CUCO_EVAL_FROZEN_VIOLATION;
    set_excerpt(c, cuco_err_msg(&ge));
    progress(c, "block guard failed: %s", cuco_err_msg(&ge));
    cuco_err_clear(&ge);
    return rc;
}

char *cuco_eval_build_cache_dir(const char *workspace)
{
    const char *env = getenv("CUCO_BUILD_CACHE");
    if (env && *env)
        return cuco_strdup(env);
    if (!workspace)
        return NULL;
    char *bc = cuco_path_join(workspace, "build-cache");
    cuco_err be = CUCO_ERR_INIT;
    char *abs = bc && cuco_fs_mkdirs(bc, &be) == 0 ? cuco_path_abs(bc) : NULL;
    cuco_err_clear(&be);
    free(bc);
    return abs;
}

void cuco_eval_default_build_cache(const char *workspace)
{
    char *dir = cuco_eval_build_cache_dir(workspace);
    if (!dir)
        return;
    free(default_build_cache);
    default_build_cache = dir;
}

static int level_compile_cached(cascade *c, const char *cached)
{
    cuco_err ce = CUCO_ERR_INIT;
    if (!cuco_fs_exists(cached) || cuco_fs_copy(cached, c->bin, &ce) != 0) {
        cuco_err_clear(&ce);
        return 0;
    }
    c->r->level = 1;
    c->r->compile_s = 0;
    progress(c, "L1 ok (cached build %s)", cached);
    return 1;
}

static void cache_store(cascade *c, const char *cached)
{
    cuco_err ce = CUCO_ERR_INIT;
    char *dir = cuco_path_dirname(cached);
    char *tmp = cuco_sprintf("%s.tmp%ld", cached, (long)getpid());
    if (dir && tmp && cuco_fs_mkdirs(dir, &ce) == 0 && cuco_fs_copy(c->bin, tmp, &ce) == 0 &&
        rename(tmp, cached) == 0) {
        progress(c, "build cached as %s", cached);
    } else {
        if (tmp)
            unlink(tmp);
        progress(c, "could not cache the build: %s", ce.code ? cuco_err_msg(&ce) : "rename failed");
    }
    cuco_err_clear(&ce);
    free(dir);
    free(tmp);
}

static int level_compile(cascade *c, cuco_err *e)
{
    char *cached = cache_path(c);
    if (cached && level_compile_cached(c, cached)) {
        free(cached);
        return 0;
    }
    cuco_strlist argv = {0};
    cuco_err step_err = CUCO_ERR_INIT;
    int rc = expand_list(c, &c->w->build_command, &argv, &step_err);
    if (rc) {
        infra_failure(c, "build.command", &step_err);
        rc = 0;
        goto out;
    }
    /* the folders the build names stay in its sight */
    if (eval_sight_add_args(&c->sight, &argv) == 0)
        c->confine.visible = c->sight.visible_view;
    const char **args = argv_of(&argv);
    char *shown = cuco_proc_argv_string(args);
    progress(c, "L1 compile: %s", shown);
    free(shown);
    cuco_proc_opts po = {.argv = args,
                         .cwd = c->build_dir,
                         .timeout_s = c->w->build_timeout_s,
                         .merge_stderr = 1,
                         .confine = &c->confine};
    cuco_proc_result pr;
    rc = cuco_proc_run(&po, &pr, &step_err);
    free(args);
    if (rc) {
        infra_failure(c, "cannot run the build command", &step_err);
        rc = 0;
        goto out;
    }
    c->r->compile_s = pr.wall_s;
    withhold_outside_quotes(c, &pr);
    if (pr.timed_out) {
        c->r->status = CUCO_EVAL_TIMEOUT;
        char *how = cuco_proc_describe(&pr);
        char *head = cuco_sprintf("compile %s", how);
        set_run_excerpt(c, head, &pr);
        free(head);
        free(how);
    } else if (!pr.exited || pr.exit_code != 0) {
        c->r->status = CUCO_EVAL_COMPILE_ERROR;
        char *how = cuco_proc_describe(&pr);
        char *first = compile_excerpt(pr.out ? pr.out : "");
        char *x = cuco_sprintf("compiler %s:\n%s", how, first);
        set_excerpt(c, x);
        free(x);
        free(first);
        free(how);
    } else if (!cuco_fs_exists(c->bin)) {
        c->r->status = CUCO_EVAL_COMPILE_ERROR;
        char *x = cuco_sprintf("the build command succeeded but did not produce %s\n%s",
                               c->w->build_output, tail_of(pr.out ? pr.out : "", 2000));
        set_excerpt(c, x);
        free(x);
    } else {
        c->r->level = 1;
        progress(c, "L1 ok (%.1f s)", pr.wall_s);
        if (cached)
            cache_store(c, cached);
    }
    cuco_proc_result_free(&pr);
    rc = 0;
out:
    free(cached);
    cuco_strlist_free(&argv);
    cuco_err_clear(&step_err);
    (void)e;
    return rc;
}

/* A built program that exports a function of its own to the shared
 * libraries it loads (exports.c) has replaced one of theirs under the frozen
 * code: frozen_violation, naming them. 0 when the run may go on. */
static int check_exports(cascade *c, const char *frozen_ref)
{
    cuco_strlist foreign = {0};
    cuco_err xe = CUCO_ERR_INIT;
    if (eval_foreign_exports(c->bin, frozen_ref, &c->confine, &foreign, &xe) != 0) {
        infra_failure(c, "exported symbols", &xe);
        cuco_err_clear(&xe);
        return -1;
    }
    int found = foreign.n > 0;
    if (found) {
        cuco_buf b = CUCO_BUF_INIT;
        cuco_buf_printf(&b, "the program exports %s", foreign.n > 1 ? "functions" : "function");
        for (size_t i = 0; i < foreign.n && i < 8; i++)
            cuco_buf_printf(&b, "%s'%s'", i ? ", " : " ", foreign.items[i]);
        cuco_buf_printf(&b,
                        "%s that the frozen code does not define: a shared library it loads "
                        "(the C library, MPI, CUDA, NCCL) would call the candidate's "
                        "definition in place of its own; make each one static or rename it",
                        foreign.n > 8 ? ", ..." : "");
        c->r->status = CUCO_EVAL_FROZEN_VIOLATION;
        set_excerpt(c, b.data ? b.data : "the program exports a function");
        progress(c, "%s", b.data ? b.data : "the program exports a function");
        cuco_buf_free(&b);
    }
    cuco_strlist_free(&foreign);
    return found ? -1 : 0;
}

/* The run's environment, a NULL-terminated view (caller frees the array):
 * the cascade's, the nonce_kv ("CUCO_NONCE=...", the vouch protocol of
 * cuco/eval.h; NULL: none) when it travels there, and for a verification
 * run CUCO_MIN_WARMUP_MS=0 (the harness's warm-up steadies timings, and a
 * verification run's times are not used) and CUCO_BREAKDOWN=quick, which a
 * bench run gets too when the options ask for it. */
static const char **run_env_with_nonce(const cascade *c, const char *nonce_kv, int verification)
{
    const char **v = calloc(c->run_env.n + 4, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < c->run_env.n; i++)
        v[n++] = c->run_env.items[i];
    if (v && verification)
        v[n++] = "CUCO_MIN_WARMUP_MS=0";
    if (v && (verification || (c->o && c->o->quick_breakdown)))
        v[n++] = "CUCO_BREAKDOWN=quick";
    if (v)
        v[n] = nonce_kv;
    return v;
}

/* cuco-vouch-exec, beside the cuco binary: this process's when it is cuco,
 * else $CUCO_BIN's (a test linked with libcuco); NULL when not found.
 * Caller frees. */
static char *vouch_exec_path(void)
{
    char *self = cuco_path_abs("/proc/self/exe");
    const char *base = self ? strrchr(self, '/') : NULL;
    const char *bin = getenv("CUCO_BIN");
    char *cuco = base && !strcmp(base + 1, "cuco") ? self : bin && *bin ? cuco_strdup(bin) : NULL;
    if (cuco != self)
        free(self);
    char *dir = cuco ? cuco_path_dirname(cuco) : NULL;
    char *path = dir ? cuco_path_join(dir, "cuco-vouch-exec") : NULL;
    free(dir);
    free(cuco);
    if (path && access(path, X_OK) != 0) {
        free(path);
        path = NULL;
    }
    return path;
}

/* Every rank starts through 'cuco-vouch-exec NONCE_FILE|- --'
 * (tools/vouch_exec.c), which ends whatever the rank leaves running when it
 * exits (so a leftover child holding the output cannot keep mpirun waiting)
 * and, for a workload that vouches, hands rank 0 the nonce from a file in the
 * build folder, so that the environment of mpirun and its daemons, which a
 * candidate can read in /proc, never holds it. Returns the nonce file (caller
 * passes it to drop_nonce_file), or NULL (no nonce file: the workload does
 * not vouch, or the file could not be written and the nonce then goes
 * through the environment). */
/* A copy of cuco-vouch-exec in the build folder, made once per evaluation:
 * the confined runs see the build folder, not cuco's own (which may sit in a
 * hidden folder, and which holds more than the runs need). Caller frees;
 * NULL when cuco-vouch-exec is not found or cannot be copied. */
static char *staged_vouch_exec(cascade *c)
{
    char *staged = cuco_path_join(c->build_dir, ".cuco-vouch-exec");
    if (staged && access(staged, X_OK) == 0)
        return staged;
    char *found = vouch_exec_path();
    cuco_err ce = CUCO_ERR_INIT;
    int ok = found && staged && cuco_fs_copy(found, staged, &ce) == 0 && chmod(staged, 0755) == 0;
    cuco_err_clear(&ce);
    free(found);
    if (!ok) {
        free(staged);
        return NULL;
    }
    return staged;
}

static char *push_vouch_exec(cascade *c, const char *nonce, cuco_strlist *argv)
{
    char *self = staged_vouch_exec(c);
    if (!self) {
        progress(c, "cuco-vouch-exec not found beside cuco: ranks start directly%s",
                 c->w->vouch ? " and the nonce goes through the environment" : "");
        return NULL;
    }
    char *path = c->w->vouch ? cuco_path_join(c->build_dir, ".cuco-nonce-XXXXXX") : NULL;
    int fd = path ? mkstemp(path) : -1;
    int ok = fd >= 0 && write(fd, nonce, CUCO_NONCE_LEN) == CUCO_NONCE_LEN;
    if (fd >= 0)
        close(fd);
    if (path && !ok) {
        progress(c, "the nonce goes through the environment (cannot write its file)");
        if (fd >= 0)
            unlink(path);
        free(path);
        path = NULL;
    }
    const char *pre[] = {self, path ? path : "-", "--"};
    for (size_t i = 0; i < 3; i++)
        cuco_strlist_push(argv, pre[i]);
    free(self);
    return path;
}

/* Removes a nonce file that rank 0 did not take, and frees its name. */
static void drop_nonce_file(char *path)
{
    if (path)
        unlink(path);
    free(path);
}

/* For a workload whose frozen code vouches (result.vouch), a run that ended
 * ok or with a non-zero status after vouching counts only with the vouch for
 * its output; otherwise it is bad_output with the reason. */
static void check_vouch(cascade *c, const cuco_proc_result *pr, const char *nonce, const char *what,
                        cuco_eval_status *st)
{
    if (!c->w->vouch || (*st != CUCO_EVAL_OK && *st != CUCO_EVAL_RUN_ERROR))
        return;
    char *why = NULL, *head = NULL;
    cuco_vouch v = cuco_run_output_vouch(pr->out, nonce, &why);
    if (*st == CUCO_EVAL_RUN_ERROR && v != CUCO_VOUCH_NONE) {
        char *how = pr->exited ? cuco_sprintf("exited with status %d", pr->exit_code)
                               : cuco_proc_describe(pr);
        head = cuco_sprintf("%s: the frozen code did not vouch for this run: %s after vouching",
                            what, how);
        free(how);
    } else if (*st == CUCO_EVAL_OK && v != CUCO_VOUCH_OK) {
        head = cuco_sprintf("%s: %s", what, why);
    }
    if (head) {
        *st = CUCO_EVAL_BAD_OUTPUT;
        set_run_excerpt(c, head, pr);
        free(head);
    }
    free(why);
}

/* Keeps the first line in which a rank's start (cuco-vouch-exec) or the
 * confinement said that it ended processes the program left running, for
 * the evaluation's warning. A rank that left processes behind fails the run:
 * an evaluation is hermetic, and work that goes on after a rank has exited
 * (or beside its timed steps) is not work the frozen code measured. */
static void note_leftovers(cascade *c, const cuco_proc_result *pr, const char *what,
                           cuco_eval_status *st)
{
    const char *texts[] = {pr->err, pr->out};
    for (size_t i = 0; i < 2; i++) {
        const char *at = texts[i] ? strstr(texts[i], "cuco: ended ") : NULL;
        if (!at)
            continue;
        char *line = cuco_strndup(at, strcspn(at, "\n"));
        if (!line)
            return;
        if (strstr(line, "(rank ") && *st == CUCO_EVAL_OK) {
            *st = CUCO_EVAL_RUN_ERROR;
            char *head = cuco_sprintf("%s: the program left processes running (%s)", what, line);
            set_run_excerpt(c, head, pr);
            free(head);
        }
        if (!c->leftovers)
            c->leftovers = line;
        else
            free(line);
    }
}

/* How one run ended, from its process and its parsed output, in the order
 * that decides: too much output, the timeout, a failed verification, a
 * crash or non-zero exit, missing or malformed result lines. The excerpt
 * says why when it is not OK. */
static cuco_eval_status classify_run(cascade *c, const cuco_proc_result *pr,
                                     const cuco_run_output *parsed, const char *what,
                                     int need_verification)
{
    char *how = cuco_proc_describe(pr), *head = NULL;
    cuco_eval_status st = CUCO_EVAL_OK;
    if (pr->output_exceeded || pr->timed_out) {
        st = pr->output_exceeded ? CUCO_EVAL_BAD_OUTPUT : CUCO_EVAL_TIMEOUT;
        head = cuco_sprintf("%s %s", what, how);
    } else if (parsed->has_verification && !parsed->verified) {
        st = CUCO_EVAL_WRONG_ANSWER;
        head = cuco_sprintf("%s: Verification: FAIL %s (%s)", what, parsed->fail_reason, how);
    } else if (!pr->exited || pr->exit_code != 0) {
        st = CUCO_EVAL_RUN_ERROR;
        head = cuco_sprintf("%s: %s", what, how);
    } else if (need_verification && !parsed->has_verification) {
        st = CUCO_EVAL_BAD_OUTPUT;
        head = cuco_sprintf("%s: no 'Verification: PASS|FAIL' line in the output", what);
    } else if (parsed->parse_error) {
        st = CUCO_EVAL_BAD_OUTPUT;
        head = cuco_sprintf("%s: %s", what, parsed->parse_error);
    }
    if (head) {
        set_run_excerpt(c, head, pr);
        free(head);
    }
    free(how);
    return st;
}

/* Runs the binary once with a level's args. Returns the status of the run;
 * on OK, *parsed holds the output (caller frees it). */
static cuco_eval_status run_once(cascade *c, const cuco_run_level *lv, const char *what,
                                 int need_verification, cuco_run_output *parsed, double *wall)
{
    cuco_strlist argv = {0};
    cuco_err step_err = CUCO_ERR_INIT;
    cuco_eval_status st = CUCO_EVAL_OK;
    char nonce[CUCO_NONCE_LEN + 1], nonce_kv[CUCO_NONCE_LEN + 16], *nonce_file = NULL;
    memset(parsed, 0, sizeof *parsed);
    parsed->time_ms = -1;
    if (cuco_vouch_new_nonce(nonce, &step_err) != 0)
        goto infra;
    snprintf(nonce_kv, sizeof nonce_kv, "CUCO_NONCE=%s", nonce);
    int mpi = !strcmp(c->w->launcher, "mpirun");
    cuco_strlist mpi_args = {0};
    if (mpi && expand_list(c, &c->w->mpirun_args, &mpi_args, &step_err)) {
        cuco_strlist_free(&mpi_args);
        goto infra;
    }
    nonce_file = push_vouch_exec(c, nonce, &argv);
    cuco_strlist_push(&argv, c->bin);
    if (expand_list(c, &lv->args, &argv, &step_err)) {
        cuco_strlist_free(&mpi_args);
        goto infra;
    }
    const char **args = argv_of(&argv);
    const char **margs = argv_of(&mpi_args);
    /* with vouch-exec the nonce is in a file, never in mpirun's environment */
    const char **env =
        run_env_with_nonce(c, c->w->vouch && !nonce_file ? nonce_kv : NULL, need_verification);
    char *shown = cuco_proc_argv_string(args);
    progress(c, "%s [%s%s]: %s", what, cuco_launcher_name(c->o ? c->o->launcher : NULL),
             mpi ? ", mpirun" : "", shown);
    free(shown);
    cuco_launch_job job = {.argv = args,
                           .ranks = c->w->ranks,
                           .mpi = mpi,
                           .mpi_args = margs,
                           .cwd = c->build_dir,
                           .env_set = env,
                           .timeout_s = lv->timeout_s,
                           .gpu = c->w->gpu,
                           .exclusive = !need_verification,
                           .name = what,
                           .progress = c->o ? c->o->progress : NULL,
                           .progress_ctx = c->o ? c->o->progress_ctx : NULL,
                           .output_limit = RUN_OUTPUT_LIMIT,
                           .confine = &c->confine};
    cuco_launch_result lr;
    int rc = cuco_launcher_run(c->o ? c->o->launcher : NULL, &job, &lr, &step_err);
    free(args);
    free(margs);
    free(env);
    cuco_strlist_free(&mpi_args);
    if (rc)
        goto infra;
    if (lr.infra_failure) {
        cuco_err_set(&step_err, CUCO_EIO, "%s (after %d attempts)", lr.infra_reason, lr.attempts);
        cuco_launch_result_free(&lr);
        goto infra;
    }
    cuco_proc_result pr = lr.proc;
    memset(&lr.proc, 0, sizeof lr.proc);
    cuco_launch_result_free(&lr);
    *wall = pr.wall_s;
    cuco_run_output_parse(pr.out, parsed);
    st = classify_run(c, &pr, parsed, what, need_verification);
    check_vouch(c, &pr, nonce, what, &st);
    note_leftovers(c, &pr, what, &st);
    cuco_proc_result_free(&pr);
    if (st != CUCO_EVAL_OK)
        cuco_run_output_free(parsed);
    drop_nonce_file(nonce_file);
    cuco_strlist_free(&argv);
    cuco_err_clear(&step_err);
    return st;
infra:
    infra_failure(c, what, &step_err);
    drop_nonce_file(nonce_file);
    cuco_strlist_free(&argv);
    cuco_err_clear(&step_err);
    return CUCO_EVAL_INFRA_ERROR;
}

static void level_verify(cascade *c)
{
    cuco_run_output parsed;
    double wall = 0;
    cuco_eval_status st = run_once(c, &c->w->verify, "L2 verify", 1, &parsed, &wall);
    c->r->verify_s = wall;
    c->r->status = st;
    if (st != CUCO_EVAL_OK)
        return;
    c->r->level = 2;
    progress(c, "L2 ok: Verification: PASS, time_ms %.4g (%.1f s)", parsed.time_ms, wall);
    cuco_run_output_free(&parsed);
}

static void level_bench(cascade *c)
{
    int repeats = c->o && c->o->repeats > 0 ? c->o->repeats : c->w->bench.repeats;
    if (repeats < 1)
        repeats = 1;
    double *times = calloc((size_t)repeats, sizeof *times);
    char **metrics = calloc((size_t)repeats, sizeof *metrics);
    int done = 0;
    for (int i = 0; i < repeats; i++) {
        cuco_run_output parsed;
        double wall = 0;
        char *what = cuco_sprintf("L3 bench %d/%d", i + 1, repeats);
        cuco_eval_status st = run_once(c, &c->w->bench, what, 0, &parsed, &wall);
        free(what);
        c->r->bench_s += wall;
        if (st != CUCO_EVAL_OK) {
            c->r->status = st;
            goto out;
        }
        times[done] = parsed.time_ms;
        metrics[done] = parsed.result_json;
        parsed.result_json = NULL;
        done++;
        progress(c, "L3 run %d/%d: time_ms %.4g", i + 1, repeats, parsed.time_ms);
        cuco_run_output_free(&parsed);
    }
    double *sorted = malloc((size_t)done * sizeof *sorted);
    memcpy(sorted, times, (size_t)done * sizeof *sorted);
    cuco_sort_doubles(sorted, (size_t)done);
    /* The median is the middle run (the lower one for an even count), so that
     * time_ms and metrics_json come from the same run. */
    double median = sorted[(done - 1) / 2];
    int median_run = 0;
    for (int i = 0; i < done; i++)
        if (times[i] == median) {
            median_run = i;
            break;
        }
    c->r->time_ms = median;
    c->r->time_ms_min = sorted[0];
    c->r->time_ms_max = sorted[done - 1];
    c->r->spread = (sorted[done - 1] - sorted[0]) / median;
    c->r->times_ms = times;
    c->r->n_times = done;
    times = NULL;
    c->r->metrics_json = cuco_redact_secrets(metrics[median_run]);
    c->r->level = 3;
    c->r->status = CUCO_EVAL_OK;
    free(sorted);
    progress(c, "L3 ok: median %.4g ms, min %.4g, spread %.1f%% (%.1f s)", c->r->time_ms,
             c->r->time_ms_min, 100 * c->r->spread, c->r->bench_s);
out:
    for (int i = 0; i < done; i++)
        free(metrics[i]);
    free(metrics);
    free(times);
}

/* The candidate's build and runs may write only in its build folder (and
 * their own /tmp); everything they start ends with them. */
static void setup_confine(cascade *c)
{
    c->writable[0] = c->build_dir;
    c->writable[1] = NULL;
    const char *repo = getenv("CUCO_REPO");
    if (eval_sight_init(&c->sight, c->w, repo && *repo ? repo : CUCO_SOURCE_DIR) == 0) {
        c->confine.hidden = c->sight.hidden_view;
        c->confine.visible = c->sight.visible_view;
    }
    c->confine.enabled = !(c->o && c->o->no_confine) && cuco_confine_default_enabled();
    c->confine.writable = c->writable;
    c->confine.secret_names = c->o ? c->o->secret_names : NULL;
    c->confine.as_bytes = c->w->gpu ? 0 : CUCO_CONFINE_CPU_AS;
}

/* A GPU workload run by the local launcher needs a GPU here: without one the
 * run would end in MPI's and CUDA's errors; say it plainly instead (a Slurm
 * launcher's runs go to nodes that have them). 0 after setting the status. */
static int gpu_visible_for(cascade *c)
{
    const cuco_launcher *l = c->o ? c->o->launcher : NULL;
    if (!c->w->gpu || (l && strcmp(cuco_launcher_name(l), "local") != 0) ||
        cuco_launch_visible_gpus() > 0)
        return 1;
    cuco_err e = CUCO_ERR_INIT;
    cuco_err_set(&e, CUCO_EUNSUPPORTED,
                 "no GPU visible here (nvidia-smi -L lists none%s): a GPU workload is built "
                 "but not run; run it on a machine with a GPU, or with --launcher slurm",
                 getenv("CUDA_VISIBLE_DEVICES") ? ", within CUDA_VISIBLE_DEVICES" : "");
    infra_failure(c, "L2 verify", &e);
    cuco_err_clear(&e);
    return 0;
}

int cuco_eval_program(const cuco_workload *w, const char *program_text, const cuco_eval_opts *o,
                      cuco_eval_result *r, cuco_err *e)
{
    memset(r, 0, sizeof *r);
    cascade c = {.w = w, .o = o, .r = r};
    char *seed = NULL;
    int rc = cuco_workload_read_seed(w, &seed, e);
    if (rc)
        return rc;
    const char *text = program_text ? program_text : seed;
    cuco_hash_hex(text, strlen(text), r->program_hash);
    int max_level = o && o->max_level > 0 && o->max_level < 3 ? o->max_level : 3;

    cuco_err frozen = CUCO_ERR_INIT;
    const char *frozen_ref = o && o->frozen_ref ? o->frozen_ref : seed;
    if (cuco_program_check_frozen(frozen_ref, text, &frozen) != 0) {
        r->status = CUCO_EVAL_FROZEN_VIOLATION;
        set_excerpt(&c, cuco_err_msg(&frozen));
        progress(&c, "frozen check failed: %s", cuco_err_msg(&frozen));
        cuco_err_clear(&frozen);
        free(seed);
        return 0;
    }
    if (guard_blocks(&c, frozen_ref, text) != 0) {
        free(seed);
        return 0;
    }
    rc = make_build_dir(&c, e);
    if (!rc)
        rc = stage_sources(&c, text, e);
    if (rc)
        goto out;
    setup_confine(&c);
    progress(&c, "build folder %s", c.build_dir);
    cuco_err env_err = CUCO_ERR_INIT;
    if (make_run_env(&c, &env_err) != 0) {
        infra_failure(&c, "run environment", &env_err);
        cuco_err_clear(&env_err);
        goto done;
    }
    rc = level_compile(&c, e);
    if (rc || r->level < 1 || r->status != CUCO_EVAL_OK || check_exports(&c, frozen_ref) != 0 ||
        max_level < 2)
        goto done;
    if (!gpu_visible_for(&c))
        goto done;
    level_verify(&c);
    if (!w->vouch && r->status != CUCO_EVAL_TIMEOUT && r->status != CUCO_EVAL_INFRA_ERROR)
        r->warning = cuco_strdup("unvouched: the frozen code does not vouch for its result "
                                 "(result.vouch is off in the manifest)");
    if (r->level < 2 || max_level < 3)
        goto done;
    level_bench(&c);
done:
    if (c.leftovers) {
        char *joined =
            r->warning ? cuco_sprintf("%s; %s", r->warning, c.leftovers) : cuco_strdup(c.leftovers);
        free(r->warning);
        r->warning = joined;
    }
    if (!rc && r->status == CUCO_EVAL_OK && !(o && o->keep_build)) {
        cuco_err rm_err = CUCO_ERR_INIT;
        if (cuco_fs_remove_tree(c.build_dir, &rm_err) != 0)
            progress(&c, "could not remove %s: %s", c.build_dir, cuco_err_msg(&rm_err));
        cuco_err_clear(&rm_err);
    } else if (c.build_dir) {
        r->build_dir = cuco_strdup(c.build_dir);
        progress(&c, "build folder kept: %s", c.build_dir);
    }
out:
    if (rc && c.build_dir)
        cuco_fs_remove_tree(c.build_dir, NULL);
    if (rc)
        cuco_eval_result_free(r);
    cascade_free(&c);
    free(seed);
    return rc;
}
