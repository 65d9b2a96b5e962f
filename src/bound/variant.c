/* variant.c: program variants for measuring communication and computation
 * alone. A call is replaced in place by an expression with the call's
 * success value, so that the statement around it (an error-check macro, an
 * assignment, a stream synchronization after it) still compiles and keeps
 * its order. */
#include "cuco/bound.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "bound_int.h"
#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/program.h"
#include "cuco/transform.h"

static const char *const comm_calls[] = {"ncclAllGather",     "ncclAllReduce",
                                         "ncclReduceScatter", "ncclBroadcast",
                                         "ncclBcast",         "ncclReduce",
                                         "ncclSend",          "ncclRecv",
                                         "ncclAlltoAll",      "ncclAllToAll",
                                         "ncclAlltoAllv",     "ncclGather",
                                         "ncclScatter",       NULL};

static int in_list(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(name, list[i]))
            return 1;
    return 0;
}

/* cuBLAS / cuBLASLt calls that do the arithmetic (not handles, streams,
 * layouts). */
static int is_blas_compute(const char *name)
{
    if (!strncmp(name, "cublasLt", 8))
        return !strcmp(name, "cublasLtMatmul");
    if (strncmp(name, "cublas", 6))
        return 0;
    static const char *const ops[] = {"gemm", "Gemm", "gemv", "Gemv", "trsm", "syrk", "herk",
                                      "axpy", "Axpy", "dot",  "Dot",  "scal", "Scal", "geam",
                                      "symm", "trmm", "gbmv", "ger",  NULL};
    for (size_t i = 0; ops[i]; i++)
        if (strstr(name + 6, ops[i]))
            return 1;
    return 0;
}

typedef struct edit {
    size_t start, end;
    const char *with;
} edit;

static int cmp_edit(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Start token of the callee of a <<< at index lt: the name, with template
 * arguments and qualifiers (ns::k<T, 4>). -1 when it cannot be found. */
static int launch_callee_start(const bl_source *s, int lt)
{
    int j = lt - 1;
    if (bl_is(s, j, ">") || bl_is(s, j, ">>")) {
        int depth = 0;
        for (; j >= 0; j--) {
            if (bl_is(s, j, ">"))
                depth++;
            else if (bl_is(s, j, ">>"))
                depth += 2;
            else if (bl_is(s, j, "<"))
                depth--;
            else if (bl_is(s, j, ";") || bl_is(s, j, "{") || bl_is(s, j, "}"))
                return -1;
            if (depth == 0)
                break;
        }
        j--;
    }
    if (!bl_is_ident(s, j))
        return -1;
    while (j >= 2 && bl_is(s, j - 1, "::") && bl_is_ident(s, j - 2))
        j -= 2;
    return j;
}

static int inside_blocks(const cuco_block *b, size_t nb, size_t off)
{
    if (nb == 0)
        return 1;
    for (size_t i = 0; i < nb; i++)
        if (off >= b[i].body_start && off < b[i].body_end)
            return 1;
    return 0;
}

/* Whether the call whose name is at token i is cuco_tx::NAME( with NAME a
 * communication of the glue (the communication of a program cuco transform
 * wrote). */
static int glue_comm_call(const bl_source *s, int i, const char *name)
{
    return i >= 2 && bl_is(s, i - 1, "::") && bl_is(s, i - 2, "cuco_tx") &&
           cuco_tx_glue_comm_call(name);
}

/* The index of the token closing `namespace cuco_tx {` opened at token i
 * (the glue a transformed program carries), else -1. */
static int glue_namespace_end(const bl_source *s, int i)
{
    if (!bl_is(s, i, "namespace") || !bl_is(s, i + 1, "cuco_tx") || !bl_is(s, i + 2, "{"))
        return -1;
    return s->tok[i + 2].match;
}

/* Adds the analysis's calls of this kind that no edit covers yet. */
static void add_analysis_edits(const char *text, const char *path, const json_t *analysis,
                               cuco_bound_variant_kind kind, const cuco_block *blocks, size_t nb,
                               edit **edits, size_t *n_edits)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *base = slash ? slash + 1 : path ? path : "";
    size_t len = strlen(text);
    json_t *list =
        json_object_get(analysis, kind == CUCO_VARIANT_NO_COMM ? "collectives" : "launches");
    size_t i;
    json_t *call;
    json_array_foreach(list, i, call)
    {
        const char *file = json_string_value(json_object_get(call, "file"));
        const char *api = json_string_value(json_object_get(call, "api"));
        json_t *span = json_object_get(call, "span");
        json_int_t start = json_integer_value(json_object_get(span, "start"));
        json_int_t end = json_integer_value(json_object_get(span, "end"));
        if (!file || !api || start < 0 || end <= start || (size_t)end > len)
            continue;
        const char *fslash = strrchr(file, '/');
        if (strcmp(fslash ? fslash + 1 : file, base))
            continue;
        /* The span must start with the call's name (a launch's api may carry
         * template arguments: compare up to the first '<'). */
        size_t name_len = strcspn(api, "<");
        if (strncmp(text + start, api, name_len) || !inside_blocks(blocks, nb, (size_t)start))
            continue;
        const char *with = "ncclSuccess";
        if (kind == CUCO_VARIANT_NO_COMPUTE) {
            const char *how = json_string_value(json_object_get(call, "launch"));
            if (!how)
                continue;
            with = !strcmp(how, "triple_chevron") ? "((void)0)"
                   : !strcmp(how, "library")      ? "CUBLAS_STATUS_SUCCESS"
                                                  : "cudaSuccess";
        }
        int covered = 0;
        for (size_t k = 0; k < *n_edits && !covered; k++)
            covered = (size_t)start < (*edits)[k].end && (size_t)end > (*edits)[k].start;
        if (covered)
            continue;
        edit *grown = realloc(*edits, (*n_edits + 1) * sizeof *grown);
        if (!grown)
            return;
        *edits = grown;
        (*edits)[(*n_edits)++] = (edit){(size_t)start, (size_t)end, with};
    }
}

/* ---- computation launched through wrappers in the program's other files ---- */

/* A function of another source of the program (a .cu, a header) that
 * launches computation (a kernel, a cuBLAS call, or another such function)
 * and communicates nothing, or the reverse, with what a call of it is
 * replaced by in the variant that removes that part. */
typedef struct wrapper {
    char *name;
    const char *with; /* by its return type: ((void)0), cudaSuccess, ... */
    int included;     /* defined in a header the program includes */
} wrapper;

typedef struct wrappers {
    wrapper *v;
    size_t n;
} wrappers;

static const wrapper *wrapper_find(const wrappers *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->v[i].name, name))
            return &w->v[i];
    return NULL;
}

/* What a call of the function f stands for when it is removed, from its
 * return type; NULL for a type with no neutral value known here. */
static const char *neutral_of(const bl_source *s, const bl_func *f)
{
    int j = f->params_lp - 2; /* before the name */
    while (j > 0 && bl_is(s, j, "::") && bl_is_ident(s, j - 1))
        j -= 2; /* Class::method */
    if (bl_is(s, j, "*") || bl_is(s, j, "&"))
        return NULL;
    static const char *const types[][2] = {{"void", "((void)0)"},
                                           {"cudaError_t", "cudaSuccess"},
                                           {"cublasStatus_t", "CUBLAS_STATUS_SUCCESS"},
                                           {"ncclResult_t", "ncclSuccess"},
                                           {"int", "0"},
                                           {"bool", "true"},
                                           {NULL, NULL}};
    for (int t = 0; types[t][0]; t++)
        if (bl_is(s, j, types[t][0]))
            return types[t][1];
    return NULL;
}

/* 1 when the body of f does the variant's part (kind NO_COMPUTE: launches
 * computation; NO_COMM: calls a collective or a point-to-point), directly or
 * through a known wrapper, and none of the other part; else 0. */
static int body_only(const bl_source *s, const bl_func *f, const wrappers *known,
                     cuco_bound_variant_kind kind)
{
    int computes = 0, comms = 0;
    for (int i = f->open + 1; i < f->close; i++) {
        if (bl_is(s, i, "<<<")) {
            computes = 1;
            continue;
        }
        if (!bl_is_ident(s, i) || !bl_is(s, i + 1, "("))
            continue;
        char *name = bl_text(s, i);
        if (!name)
            return 0;
        int known_one = wrapper_find(known, name) != NULL;
        computes |= is_blas_compute(name) || !strncmp(name, "cudaLaunch", 10) ||
                    (known_one && kind == CUCO_VARIANT_NO_COMPUTE);
        comms |= in_list(name, comm_calls) || (known_one && kind == CUCO_VARIANT_NO_COMM);
        free(name);
    }
    return kind == CUCO_VARIANT_NO_COMPUTE ? computes && !comms : comms && !computes;
}

/* Whether the program text defines a function of this name itself (its own
 * definition wins over another file's of the same name). */
static int bl_func_defines(const bl_source *s, const char *name)
{
    for (int i = 0; i < s->n_funcs; i++)
        if (!strcmp(s->funcs[i].name, name))
            return 1;
    return 0;
}

/* Whether the program text declares a function of this name ("void f(int);"
 * outside any body): one of another file that it calls. */
static int bl_declares(const bl_source *s, const char *name)
{
    for (int i = 1; i + 1 < s->n; i++) {
        int close = s->tok[i + 1].match;
        if (bl_is(s, i, name) && bl_is(s, i + 1, "(") && close > 0 && bl_is(s, close + 1, ";") &&
            (bl_is_ident(s, i - 1) || bl_is(s, i - 1, "*") || bl_is(s, i - 1, "&")) &&
            !bl_is(s, i - 1, "return") && !bl_func_at(s, i))
            return 1;
    }
    return 0;
}

static int source_ext(const char *name)
{
    static const char *const exts[] = {".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", NULL};
    for (int i = 0; exts[i]; i++)
        if (cuco_str_ends_with(name, exts[i]))
            return 1;
    return 0;
}

/* The program's other sources: the files with a source extension in the
 * folder of the analyzed evolve file (the analysis's first file named
 * like path), that file left out. Scanned; *n_out of them. */
static bl_source *sibling_sources(const json_t *analysis, const char *path, int *n_out)
{
    *n_out = 0;
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *base = slash ? slash + 1 : path ? path : "";
    const char *full = NULL;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(analysis, "files"), i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        const char *ps = p ? strrchr(p, '/') : NULL;
        if (p && !full && !strcmp(ps ? ps + 1 : p, base))
            full = p;
    }
    char *dir = full ? cuco_path_dirname(full) : NULL;
    DIR *d = dir ? opendir(dir) : NULL;
    bl_source *v = NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !source_ext(de->d_name) || !strcmp(de->d_name, base))
            continue;
        bl_source s = {0};
        cuco_err e = CUCO_ERR_INIT;
        s.path = cuco_path_join(dir, de->d_name);
        bl_source *grown = s.path ? realloc(v, ((size_t)*n_out + 1) * sizeof *grown) : NULL;
        if (grown && !cuco_fs_is_dir(s.path) && !cuco_fs_read(s.path, &s.text, &s.len, &e) &&
            !bl_scan(&s, &e)) {
            v = grown;
            v[(*n_out)++] = s;
        } else {
            if (grown)
                v = grown;
            bl_source_free(&s);
        }
        cuco_err_clear(&e);
    }
    if (d)
        closedir(d);
    free(dir);
    return v;
}

/* The wrappers of the variant's part defined in the program's other
 * sources (see body_only), followed through wrappers of wrappers (to a
 * fixed point). */
static void find_wrappers(const json_t *analysis, const char *path, cuco_bound_variant_kind kind,
                          wrappers *w)
{
    int n = 0;
    bl_source *src = analysis ? sibling_sources(analysis, path, &n) : NULL;
    int *included = calloc((size_t)n + 1, sizeof *included);
    for (int k = 0; included && k < n; k++) {
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(analysis, "files"), i, f)
        {
            const char *p = json_string_value(json_object_get(f, "path"));
            included[k] |= p && !strcmp(p, src[k].path);
        }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int k = 0; k < n; k++)
            for (int q = 0; q < src[k].n_funcs; q++) {
                const bl_func *f = &src[k].funcs[q];
                const char *with = neutral_of(&src[k], f);
                if (!with || wrapper_find(w, f->name) || !body_only(&src[k], f, w, kind))
                    continue;
                wrapper *grown = realloc(w->v, (w->n + 1) * sizeof *grown);
                char *name = cuco_strdup(f->name);
                if (!grown || !name) {
                    free(name);
                    if (grown)
                        w->v = grown;
                    continue;
                }
                w->v = grown;
                w->v[w->n++] = (wrapper){name, with, 0};
                changed = 1;
            }
    }
    /* a call in the program text is of one of these when a header it includes
     * declares or defines it (or the text itself declares it) */
    for (size_t q = 0; q < w->n; q++)
        for (int k = 0; included && k < n && !w->v[q].included; k++)
            w->v[q].included = included[k] && (bl_func_defines(&src[k], w->v[q].name) ||
                                               bl_declares(&src[k], w->v[q].name));
    for (int k = 0; k < n; k++)
        bl_source_free(&src[k]);
    free(src);
    free(included);
}

static void wrappers_free(wrappers *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].name);
    free(w->v);
}

int cuco_bound_variant(const char *text, const char *path, cuco_bound_variant_kind kind, char **out,
                       int *n_removed, cuco_err *e)
{
    return cuco_bound_variant_from(text, path, NULL, kind, out, n_removed, e);
}

int cuco_bound_variant_from(const char *text, const char *path, const json_t *analysis,
                            cuco_bound_variant_kind kind, char **out, int *n_removed, cuco_err *e)
{
    *out = NULL;
    *n_removed = 0;
    bl_source s = {0};
    s.path = cuco_strdup(path ? path : "(program)");
    s.text = cuco_strdup(text);
    s.len = strlen(text);
    cuco_block *blocks = NULL;
    size_t nb = 0;
    edit *edits = NULL;
    size_t n_edits = 0;
    wrappers wraps = {NULL, 0};
    int rc = bl_scan(&s, e);
    if (rc)
        goto out;
    rc = cuco_program_blocks(text, &blocks, &nb, e);
    if (rc) {
        cuco_err_prefix(e, "%s", s.path);
        goto out;
    }
    find_wrappers(analysis, path, kind, &wraps);
    edits = calloc((size_t)s.n + 1, sizeof *edits);
    if (!edits) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < s.n; i++) {
        if (!inside_blocks(blocks, nb, s.tok[i].off))
            continue;
        /* the glue's own NCCL calls are its transport; its launches are the
         * program's computation (a split kernel's parts), so the variant
         * without computation still removes them */
        int glue_end = kind == CUCO_VARIANT_NO_COMM ? glue_namespace_end(&s, i) : -1;
        if (glue_end > i) {
            i = glue_end;
            continue;
        }
        if (kind == CUCO_VARIANT_NO_COMPUTE && bl_is(&s, i, "<<<")) {
            int start = launch_callee_start(&s, i);
            int j = i + 1;
            while (j < s.n && !bl_is(&s, j, ">>>") && !bl_is(&s, j, ";"))
                j++;
            if (start < 0 || !bl_is(&s, j, ">>>") || !bl_is(&s, j + 1, "(") ||
                s.tok[j + 1].match < 0)
                continue;
            int close = s.tok[j + 1].match;
            edits[n_edits++] = (edit){s.tok[start].off, s.tok[close].off + 1, "((void)0)"};
            i = close;
            continue;
        }
        if (!bl_is_ident(&s, i) || !bl_is(&s, i + 1, "(") || s.tok[i + 1].match < 0)
            continue;
        /* A declaration or definition of the function, not a call. */
        if (bl_is_ident(&s, i - 1) && !bl_is(&s, i - 1, "return"))
            continue;
        if (bl_is(&s, i - 1, ".") || bl_is(&s, i - 1, "->"))
            continue;
        char *name = bl_text(&s, i);
        const char *with = NULL;
        if (kind == CUCO_VARIANT_NO_COMM &&
            (in_list(name, comm_calls) || glue_comm_call(&s, i, name)))
            with = "ncclSuccess";
        else if (kind == CUCO_VARIANT_NO_COMPUTE && is_blas_compute(name))
            with = "CUBLAS_STATUS_SUCCESS";
        else if (kind == CUCO_VARIANT_NO_COMPUTE &&
                 (!strcmp(name, "cudaLaunchKernel") || !strcmp(name, "cudaLaunchKernelEx") ||
                  !strcmp(name, "cudaLaunchCooperativeKernel")))
            with = "cudaSuccess";
        else if (wrapper_find(&wraps, name) && !bl_func_defines(&s, name) &&
                 (wrapper_find(&wraps, name)->included || bl_declares(&s, name)))
            with = wrapper_find(&wraps, name)->with;
        free(name);
        if (!with)
            continue;
        int start = i;
        if (bl_is(&s, i - 1, "::"))
            start = bl_is_ident(&s, i - 2) ? i - 2 : i - 1;
        int close = s.tok[i + 1].match;
        edits[n_edits++] = (edit){s.tok[start].off, s.tok[close].off + 1, with};
        i = close;
    }
    if (analysis)
        add_analysis_edits(text, path, analysis, kind, blocks, nb, &edits, &n_edits);
    if (n_edits > 1)
        qsort(edits, n_edits, sizeof *edits, cmp_edit);
    cuco_buf b = CUCO_BUF_INIT;
    size_t at = 0;
    for (size_t k = 0; k < n_edits; k++) {
        cuco_buf_append(&b, text + at, edits[k].start - at);
        cuco_buf_puts(&b, edits[k].with);
        /* Keep the line count: line numbers in diagnostics stay those of the original. */
        for (size_t p = edits[k].start; p < edits[k].end; p++)
            if (text[p] == '\n')
                cuco_buf_putc(&b, '\n');
        at = edits[k].end;
    }
    cuco_buf_puts(&b, text + at);
    *out = cuco_buf_detach(&b);
    *n_removed = (int)n_edits;
    rc = 0;
out:
    wrappers_free(&wraps);
    free(edits);
    free(blocks);
    bl_source_free(&s);
    return rc;
}
