/* workload.c: loads a workload folder's manifest (workload.yaml) with libyaml's
 * document API and checks it, so that everything downstream can trust the
 * struct: required keys present, types right, no unknown keys, the evolve file
 * among the sources, every source on disk. Every error names the manifest and
 * the line of the offending node ("path:line: what is wrong"). */
#include "cuco/workload.h"
#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/semantics.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

void cuco_strlist_free(cuco_strlist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int cuco_strlist_push(cuco_strlist *l, const char *s)
{
    char **grown = realloc(l->items, (l->n + 1) * sizeof *grown);
    if (!grown)
        return CUCO_ENOMEM;
    l->items = grown;
    l->items[l->n] = cuco_strdup(s);
    if (!l->items[l->n])
        return CUCO_ENOMEM;
    l->n++;
    return 0;
}

int cuco_strlist_has(const cuco_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i], s) == 0)
            return 1;
    return 0;
}

int cuco_workload_parse_ranks(const char *text)
{
    char *end = NULL;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || !*text || !end || *end || v < 1 || v > 65536)
        return -1;
    return (int)v;
}

int cuco_workload_override_ranks(cuco_workload *w, int ranks, cuco_err *e)
{
    if (ranks < 1 || ranks > 65536)
        return cuco_err_set(e, CUCO_EINVAL, "ranks must be 1..65536, not %d", ranks);
    if (ranks == w->ranks)
        return 0;
    char *name = cuco_sprintf("%s@%d", w->name, ranks);
    if (!name)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(w->name);
    w->name = name;
    w->ranks = ranks;
    return 0;
}

void cuco_workload_free(cuco_workload *w)
{
    if (!w)
        return;
    free(w->dir);
    free(w->manifest_path);
    free(w->name);
    free(w->description);
    cuco_strlist_free(&w->sources);
    free(w->evolve_file);
    free(w->expert);
    cuco_strlist_free(&w->build_command);
    free(w->build_output);
    free(w->launcher);
    cuco_strlist_free(&w->mpirun_args);
    for (size_t i = 0; i < w->n_env; i++) {
        free(w->env[i].key);
        free(w->env[i].value);
    }
    free(w->env);
    cuco_strlist_free(&w->verify.args);
    cuco_strlist_free(&w->bench.args);
    for (size_t i = 0; i < w->n_space; i++) {
        free(w->space[i].name);
        cuco_strlist_free(&w->space[i].values);
    }
    free(w->space);
    for (size_t i = 0; i < w->n_semantics; i++)
        cuco_semantic_free(&w->semantics[i]);
    free(w->semantics);
    free(w);
}

/* The parsing state: the document and where errors point. */
typedef struct manifest {
    yaml_document_t doc;
    const char *path;
    cuco_err *e;
} manifest;

static int node_line(const yaml_node_t *n)
{
    return n ? (int)n->start_mark.line + 1 : 0;
}

static int bad(manifest *m, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(manifest *m, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    cuco_err_set_at(m->e, CUCO_EINVAL, m->path, node_line(n), "%s", cuco_buf_str(&b));
    cuco_buf_free(&b);
    return CUCO_EINVAL;
}

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "empty";
    }
}

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* A plain (unquoted) scalar that YAML would read as null. */
static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int get_string(manifest *m, const char *key, const yaml_node_t *n, char **out)
{
    if (n->type != YAML_SCALAR_NODE || is_null(n))
        return bad(m, n, "'%s' must be a string, not %s", key,
                   n->type == YAML_SCALAR_NODE ? "null" : node_kind(n));
    free(*out);
    *out = cuco_strdup(scalar(n));
    return *out ? 0 : CUCO_ENOMEM;
}

static int get_int(manifest *m, const char *key, const yaml_node_t *n, long *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return bad(m, n, "'%s' must be an integer, not %s", key, node_kind(n));
    const char *s = scalar(n);
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno)
        return bad(m, n, "'%s' must be an integer, not '%s'", key, s);
    *out = v;
    return 0;
}

static int get_number(manifest *m, const char *key, const yaml_node_t *n, double *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return bad(m, n, "'%s' must be a number, not %s", key, node_kind(n));
    const char *s = scalar(n);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return bad(m, n, "'%s' must be a number, not '%s'", key, s);
    *out = v;
    return 0;
}

static int get_bool(manifest *m, const char *key, const yaml_node_t *n, int *out)
{
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    if (n->type != YAML_SCALAR_NODE)
        return bad(m, n, "'%s' must be true or false, not %s", key, node_kind(n));
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(scalar(n), yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcmp(scalar(n), no[i])) {
            *out = 0;
            return 0;
        }
    }
    return bad(m, n, "'%s' must be true or false, not '%s'", key, scalar(n));
}

/* A list of scalars; a single scalar is not accepted (an argv is a list). */
static int get_strlist(manifest *m, const char *key, const yaml_node_t *n, cuco_strlist *out)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(m, n, "'%s' must be a list, not %s", key, node_kind(n));
    cuco_strlist_free(out);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(&m->doc, *it);
        if (item->type != YAML_SCALAR_NODE || is_null(item))
            return bad(m, item, "items of '%s' must be strings, not %s", key,
                       item->type == YAML_SCALAR_NODE ? "null" : node_kind(item));
        if (cuco_strlist_push(out, scalar(item)) != 0)
            return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    }
    return 0;
}

/* Checks the placeholders of a scalar that the cascade expands (see
 * cuco_workload_placeholder_check); the error names the scalar's line. */
static int check_placeholders(manifest *m, const char *key, const yaml_node_t *n, int whole_item)
{
    cuco_err pe = CUCO_ERR_INIT;
    if (cuco_workload_placeholder_check(scalar(n), whole_item, &pe) == 0)
        return 0;
    int rc = bad(m, n, "'%s': %s", key, cuco_err_msg(&pe));
    cuco_err_clear(&pe);
    return rc;
}

/* An argv list (get_strlist) whose items' placeholders are checked. */
static int get_argv(manifest *m, const char *key, const yaml_node_t *n, cuco_strlist *out)
{
    int rc = get_strlist(m, key, n, out);
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         rc == 0 && it < n->data.sequence.items.top; it++)
        rc = check_placeholders(m, key, yaml_document_get_node(&m->doc, *it), 1);
    return rc;
}

/* Walks a mapping: calls fn for each pair after checking the key is a
 * string, is one of valid[] (NULL-terminated; NULL valid = any key) and is not
 * repeated. */
typedef int (*pair_fn)(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v);

static int walk_mapping(manifest *m, const char *what, const yaml_node_t *n,
                        const char *const *valid, pair_fn fn, void *ctx)
{
    if (n->type != YAML_MAPPING_NODE)
        return bad(m, n, "%s must be a mapping, not %s", what, node_kind(n));
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&m->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&m->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return bad(m, k, "keys of %s must be strings, not %s", what, node_kind(k));
        const char *key = scalar(k);
        if (valid) {
            int known = 0;
            for (size_t i = 0; valid[i]; i++)
                known |= !strcmp(valid[i], key);
            if (!known) {
                cuco_buf list = CUCO_BUF_INIT;
                for (size_t i = 0; valid[i]; i++)
                    cuco_buf_printf(&list, "%s%s", i ? ", " : "", valid[i]);
                int rc = bad(m, k, "unknown key '%s' in %s (valid keys: %s)", key, what,
                             cuco_buf_str(&list));
                cuco_buf_free(&list);
                return rc;
            }
        }
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *prev = yaml_document_get_node(&m->doc, q->key);
            if (prev->type == YAML_SCALAR_NODE && !strcmp(scalar(prev), key))
                return bad(m, k, "duplicate key '%s' in %s (first at line %d)", key, what,
                           node_line(prev));
        }
        int rc = fn(m, ctx, key, k, v);
        if (rc)
            return rc;
    }
    return 0;
}

static const char *const build_keys[] = {"command", "output", "timeout_s", NULL};
static const char *const run_keys[] = {"launcher", "mpirun_args", "env", NULL};
static const char *const verify_keys[] = {"args", "timeout_s", NULL};
static const char *const bench_keys[] = {"args", "timeout_s", "repeats", NULL};
static const char *const result_keys[] = {"vouch", NULL};
static const char *const top_keys[] = {
    "name",   "description", "ranks",  "gpu",   "sources", "evolve_file", "build", "run",
    "verify", "bench",       "result", "space", "expert",  "semantics",   NULL};

static int positive_timeout(manifest *m, const char *key, yaml_node_t *v, double *out)
{
    int rc = get_number(m, key, v, out);
    if (rc)
        return rc;
    if (*out <= 0)
        return bad(m, v, "'%s' must be > 0, not %s", key, scalar(v));
    return 0;
}

static int build_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    cuco_workload *w = ctx;
    if (!strcmp(key, "command")) {
        int rc = get_argv(m, "build.command", v, &w->build_command);
        if (!rc && w->build_command.n == 0)
            return bad(m, v, "'build.command' must not be empty");
        return rc;
    }
    if (!strcmp(key, "output"))
        return get_string(m, "build.output", v, &w->build_output);
    return positive_timeout(m, "build.timeout_s", v, &w->build_timeout_s);
}

static int env_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    cuco_workload *w = ctx;
    if (v->type != YAML_SCALAR_NODE)
        return bad(m, v, "run.env value of '%s' must be a string, not %s", key, node_kind(v));
    if (!*key || strchr(key, '='))
        return bad(m, k, "run.env name '%s' is not a valid variable name", key);
    if (check_placeholders(m, "run.env", v, 0))
        return CUCO_EINVAL;
    cuco_kv *grown = realloc(w->env, (w->n_env + 1) * sizeof *grown);
    if (!grown)
        return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    w->env = grown;
    w->env[w->n_env].key = cuco_strdup(key);
    w->env[w->n_env].value = cuco_strdup(scalar(v));
    w->n_env++;
    return 0;
}

static int run_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    cuco_workload *w = ctx;
    if (!strcmp(key, "launcher")) {
        int rc = get_string(m, "run.launcher", v, &w->launcher);
        if (!rc && strcmp(w->launcher, "mpirun") && strcmp(w->launcher, "direct"))
            return bad(m, v, "'run.launcher' must be mpirun or direct, not '%s'", w->launcher);
        return rc;
    }
    if (!strcmp(key, "mpirun_args"))
        return get_argv(m, "run.mpirun_args", v, &w->mpirun_args);
    return walk_mapping(m, "run.env", v, NULL, env_pair, w);
}

struct level_ctx {
    cuco_run_level *level;
    const char *section;
};

static int level_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    struct level_ctx *lc = ctx;
    char *full = cuco_sprintf("%s.%s", lc->section, key);
    int rc;
    if (!strcmp(key, "args")) {
        rc = get_argv(m, full, v, &lc->level->args);
    } else if (!strcmp(key, "timeout_s")) {
        rc = positive_timeout(m, full, v, &lc->level->timeout_s);
    } else {
        long repeats = 0;
        rc = get_int(m, full, v, &repeats);
        if (!rc && (repeats < 1 || repeats > 1000))
            rc = bad(m, v, "'%s' must be between 1 and 1000, not %ld", full, repeats);
        if (!rc)
            lc->level->repeats = (int)repeats;
    }
    free(full);
    return rc;
}

static int space_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    cuco_workload *w = ctx;
    cuco_space_dim *grown = realloc(w->space, (w->n_space + 1) * sizeof *grown);
    if (!grown)
        return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    w->space = grown;
    cuco_space_dim *d = &w->space[w->n_space];
    memset(d, 0, sizeof *d);
    d->name = cuco_strdup(key);
    w->n_space++;
    char *full = cuco_sprintf("space.%s", key);
    int rc = get_strlist(m, full, v, &d->values);
    if (!rc && d->values.n == 0)
        rc = bad(m, v, "'%s' must list at least one value", full);
    free(full);
    return rc;
}

/* One key of a declaration under `semantics`: kernel, call, is, or a
 * parameter of the term (checked against the vocabulary afterwards). */
static int semantic_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    (void)k;
    cuco_semantic *s = ctx;
    if (v->type != YAML_SCALAR_NODE || !*scalar(v))
        return bad(m, v, "semantics: '%s' must be a word, not %s", key, node_kind(v));
    char **slot = !strcmp(key, "kernel") ? &s->kernel
                  : !strcmp(key, "call") ? &s->call
                  : !strcmp(key, "is")   ? &s->term
                                         : NULL;
    if (slot) {
        *slot = cuco_strdup(scalar(v));
        return *slot ? 0 : cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    }
    char **keys = realloc(s->keys, (s->n_params + 1) * sizeof *keys);
    if (keys)
        s->keys = keys;
    char **values = keys ? realloc(s->values, (s->n_params + 1) * sizeof *values) : NULL;
    if (!values)
        return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    s->values = values;
    char *kc = cuco_strdup(key), *vc = cuco_strdup(scalar(v));
    if (!kc || !vc) {
        free(kc);
        free(vc);
        return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
    }
    s->keys[s->n_params] = kc;
    s->values[s->n_params] = vc;
    s->n_params++;
    return 0;
}

/* semantics: a list of declarations, each checked against the vocabulary. */
static int get_semantics(manifest *m, const yaml_node_t *n, cuco_workload *w)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(m, n, "'semantics' must be a list of declarations, not %s", node_kind(n));
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(&m->doc, *it);
        cuco_semantic *grown = realloc(w->semantics, (w->n_semantics + 1) * sizeof *grown);
        if (!grown)
            return cuco_err_set(m->e, CUCO_ENOMEM, "out of memory");
        w->semantics = grown;
        cuco_semantic *s = &w->semantics[w->n_semantics++];
        memset(s, 0, sizeof *s);
        s->line = node_line(item);
        int rc = walk_mapping(m, "a declaration of 'semantics'", item, NULL, semantic_pair, s);
        if (rc)
            return rc;
        char *owned = NULL;
        const char *why = cuco_semantic_check(s, &owned);
        rc = why ? bad(m, item, "semantics: %s", why) : 0;
        free(owned);
        if (rc)
            return rc;
    }
    return 0;
}

/* Where each required top-level key was seen (0: absent). */
struct top_ctx {
    cuco_workload *w;
    int seen_name, seen_ranks, seen_sources, seen_evolve, seen_build;
    int evolve_line, sources_line, build_line, expert_line;
};

static int result_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    (void)key;
    (void)k;
    return get_bool(m, "result.vouch", v, &((cuco_workload *)ctx)->vouch);
}

static int top_pair(manifest *m, void *ctx, const char *key, yaml_node_t *k, yaml_node_t *v)
{
    struct top_ctx *t = ctx;
    cuco_workload *w = t->w;
    if (!strcmp(key, "name")) {
        t->seen_name = 1;
        int rc = get_string(m, "name", v, &w->name);
        if (rc)
            return rc;
        for (const char *c = w->name; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
                return bad(m, v, "'name' must match [A-Za-z0-9_-]+, not '%s'", w->name);
        if (!*w->name)
            return bad(m, v, "'name' must not be empty");
        return 0;
    }
    if (!strcmp(key, "description"))
        return get_string(m, "description", v, &w->description);
    if (!strcmp(key, "ranks")) {
        t->seen_ranks = 1;
        long ranks = 0;
        int rc = get_int(m, "ranks", v, &ranks);
        if (rc)
            return rc;
        if (ranks < 1 || ranks > 65536)
            return bad(m, v, "'ranks' must be >= 1, not %ld", ranks);
        w->ranks = (int)ranks;
        return 0;
    }
    if (!strcmp(key, "gpu"))
        return get_bool(m, "gpu", v, &w->gpu);
    if (!strcmp(key, "sources")) {
        t->seen_sources = 1;
        t->sources_line = node_line(v);
        int rc = get_strlist(m, "sources", v, &w->sources);
        if (!rc && w->sources.n == 0)
            return bad(m, v, "'sources' must list at least one file");
        return rc;
    }
    if (!strcmp(key, "evolve_file")) {
        t->seen_evolve = 1;
        t->evolve_line = node_line(v);
        return get_string(m, "evolve_file", v, &w->evolve_file);
    }
    if (!strcmp(key, "expert")) {
        t->expert_line = node_line(v);
        return get_string(m, "expert", v, &w->expert);
    }
    if (!strcmp(key, "build")) {
        t->seen_build = 1;
        t->build_line = node_line(k);
        int rc = walk_mapping(m, "build", v, build_keys, build_pair, w);
        if (rc)
            return rc;
        if (w->build_command.n == 0)
            return bad(m, v, "missing required key 'build.command'");
        if (!w->build_output)
            return bad(m, v, "missing required key 'build.output'");
        return 0;
    }
    if (!strcmp(key, "run"))
        return walk_mapping(m, "run", v, run_keys, run_pair, w);
    if (!strcmp(key, "verify") || !strcmp(key, "bench")) {
        struct level_ctx lc = {!strcmp(key, "verify") ? &w->verify : &w->bench, key};
        lc.level->line = node_line(k);
        return walk_mapping(m, key, v, lc.level == &w->verify ? verify_keys : bench_keys,
                            level_pair, &lc);
    }
    if (!strcmp(key, "result"))
        return walk_mapping(m, "result", v, result_keys, result_pair, w);
    if (!strcmp(key, "semantics"))
        return get_semantics(m, v, w);
    return walk_mapping(m, "space", v, NULL, space_pair, w);
}

int cuco_workload_is_program_path(const char *path)
{
    static const char *const exts[] = {".cu", ".cc", ".cpp", ".cxx", ".c", NULL};
    for (size_t i = 0; exts[i]; i++)
        if (cuco_str_ends_with(path, exts[i]))
            return 1;
    return 0;
}

/* Paths in the manifest stay inside the workload folder. */
static int safe_relative(const char *p)
{
    if (!*p || p[0] == '/')
        return 0;
    for (const char *s = p; *s;) {
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return 0;
        if (!slash)
            break;
        s = slash + 1;
    }
    return 1;
}

const char *cuco_workload_host_language(const char *path)
{
    static const char *const cxx[] = {".cpp", ".cc", ".cxx", ".c++", ".C", NULL};
    size_t n = strlen(path);
    for (const char *const *x = cxx; *x; x++)
        if (n > strlen(*x) && strcmp(path + n - strlen(*x), *x) == 0)
            return "C++";
    return n > 2 && strcmp(path + n - 2, ".c") == 0 ? "C" : NULL;
}

int cuco_workload_builds_as_cuda(const cuco_workload *w)
{
    const cuco_strlist *b = &w->build_command;
    for (size_t i = 1; i + 1 < b->n; i++)
        if ((!strcmp(b->items[i], "-x") || !strcmp(b->items[i], "--x")) &&
            !strcmp(b->items[i + 1], "cu"))
            return 1;
    for (size_t i = 1; i < b->n; i++)
        if (!strcmp(b->items[i], "-xcu") || !strcmp(b->items[i], "--x=cu"))
            return 1;
    return 0;
}

int cuco_workload_build_cxx_as_cuda(cuco_workload *w)
{
    cuco_strlist *b = &w->build_command;
    const char *cc = b->n ? b->items[0] : "";
    const char *base = strrchr(cc, '/') ? strrchr(cc, '/') + 1 : cc;
    const char *lang = cuco_workload_host_language(w->evolve_file);
    if (!lang || strcmp(lang, "C++") != 0 || strcmp(base, "nvcc") != 0)
        return 0;
    for (size_t i = 1; i < b->n; i++)
        if (!strncmp(b->items[i], "-x", 2) || !strncmp(b->items[i], "--x", 3))
            return 0; /* the language is chosen already */
    if (cuco_strlist_push(b, "-x") != 0 || cuco_strlist_push(b, "cu") != 0)
        return CUCO_ENOMEM;
    char *x = b->items[b->n - 2], *cu = b->items[b->n - 1];
    memmove(b->items + 3, b->items + 1, (b->n - 3) * sizeof(*b->items));
    b->items[1] = x;
    b->items[2] = cu;
    return 0;
}

static int check_workload(manifest *m, struct top_ctx *t, const yaml_node_t *root)
{
    cuco_workload *w = t->w;
    const char *missing = !t->seen_name      ? "name"
                          : !t->seen_ranks   ? "ranks"
                          : !t->seen_sources ? "sources"
                          : !t->seen_evolve  ? "evolve_file"
                          : !t->seen_build   ? "build"
                                             : NULL;
    if (missing)
        return bad(m, root, "missing required key '%s'", missing);
    int in_sources = 0;
    for (size_t i = 0; i < w->sources.n; i++) {
        const char *src = w->sources.items[i];
        if (!safe_relative(src))
            return cuco_err_set_at(m->e, CUCO_EINVAL, m->path, t->sources_line,
                                   "source '%s' must be a relative path inside the workload folder",
                                   src);
        char *p = cuco_path_join(w->dir, src);
        int there = cuco_fs_exists(p) && !cuco_fs_is_dir(p);
        free(p);
        if (!there)
            return cuco_err_set_at(m->e, CUCO_EINVAL, m->path, t->sources_line,
                                   "source file '%s' not found in %s", src, w->dir);
        in_sources |= !strcmp(src, w->evolve_file);
    }
    if (!in_sources)
        return cuco_err_set_at(m->e, CUCO_EINVAL, m->path, t->evolve_line,
                               "evolve_file '%s' is not one of the sources", w->evolve_file);
    if (w->expert) {
        char *p = safe_relative(w->expert) ? cuco_path_join(w->dir, w->expert) : NULL;
        int there = p && cuco_fs_exists(p) && !cuco_fs_is_dir(p);
        free(p);
        if (!there)
            return cuco_err_set_at(m->e, CUCO_EINVAL, m->path, t->expert_line,
                                   "expert '%s' must be a file inside the workload folder",
                                   w->expert);
    }
    if (!safe_relative(w->build_output) || strchr(w->build_output, '/'))
        return cuco_err_set_at(m->e, CUCO_EINVAL, m->path, t->build_line,
                               "build.output '%s' must be a plain file name", w->build_output);
    return cuco_workload_build_cxx_as_cuda(w) != 0
               ? cuco_err_set(m->e, CUCO_ENOMEM, "out of memory")
               : 0;
}

static int parse_document(manifest *m, const char *text, size_t len, cuco_workload *w)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return cuco_err_set(m->e, CUCO_ENOMEM, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = 0;
    if (!yaml_parser_load(&parser, &m->doc)) {
        const yaml_mark_t *mark = parser.problem_mark.line || parser.problem_mark.column
                                      ? &parser.problem_mark
                                      : &parser.context_mark;
        rc = cuco_err_set_at(m->e, CUCO_EINVAL, m->path, (int)mark->line + 1,
                             "YAML syntax error: %s%s%s", parser.problem ? parser.problem : "?",
                             parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&m->doc);
    if (!root) {
        rc = cuco_err_set_at(m->e, CUCO_EINVAL, m->path, 1, "the manifest is empty");
    } else {
        struct top_ctx t = {.w = w};
        rc = walk_mapping(m, "the manifest", root, top_keys, top_pair, &t);
        if (!rc)
            rc = check_workload(m, &t, root);
    }
    yaml_document_delete(&m->doc);
    return rc;
}

int cuco_workload_load(const char *dir_or_manifest, cuco_workload **out, cuco_err *e)
{
    *out = NULL;
    if (!cuco_fs_is_dir(dir_or_manifest) && cuco_workload_is_program_path(dir_or_manifest))
        return cuco_err_set(e, CUCO_EINVAL,
                            "%s is a program, not a workload: give a folder holding workload.yaml "
                            "(docs/workload.md), or use 'cuco bound' / 'cuco transform', which "
                            "also take a bare PROGRAM.cu",
                            dir_or_manifest);
    char *manifest_path = cuco_fs_is_dir(dir_or_manifest)
                              ? cuco_path_join(dir_or_manifest, "workload.yaml")
                              : cuco_strdup(dir_or_manifest);
    char *abs = cuco_path_abs(manifest_path);
    if (!abs) {
        int rc = cuco_err_set(e, CUCO_ENOTFOUND, "no workload manifest at %s", manifest_path);
        free(manifest_path);
        return rc;
    }
    free(manifest_path);
    char *text = NULL;
    size_t len = 0;
    int rc = cuco_fs_read(abs, &text, &len, e);
    if (rc) {
        free(abs);
        return rc;
    }
    cuco_workload *w = calloc(1, sizeof *w);
    if (!w) {
        free(abs);
        free(text);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    w->manifest_path = abs;
    w->dir = cuco_path_dirname(abs);
    w->gpu = 1;
    w->build_timeout_s = 300;
    w->verify.timeout_s = 60;
    w->verify.repeats = 1;
    w->bench.timeout_s = 300;
    w->bench.repeats = 3;
    manifest m = {.path = abs, .e = e};
    rc = parse_document(&m, text, len, w);
    free(text);
    if (!rc && !w->launcher)
        w->launcher = cuco_strdup("mpirun");
    if (rc) {
        cuco_workload_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int cuco_workload_read_seed(const cuco_workload *w, char **text, cuco_err *e)
{
    char *p = cuco_path_join(w->dir, w->evolve_file);
    int rc = cuco_fs_read(p, text, NULL, e);
    free(p);
    return rc;
}
