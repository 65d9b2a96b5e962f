/* headers.c: the program's own headers in the fast path. A training program
 * may keep its collectives in a header of its project (a ZeRO helper, a
 * communicator class); the rules edit one text, so such a header is inlined
 * into the evolve file in place of its #include line, between marker
 * comments, and rewritten there with the rest. The built program is that
 * one file (its other sources still see the original header); gen_0 gets a
 * copy of the edited header, and the notes cite the header's own lines.
 * System headers (<...>) and headers without a collective are left alone.
 */
#include "tx_headers.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/program.h"

static const char begin_fmt[] = "// cuco: begin of the program's header \"%s\" (inlined so that "
                                "its NCCL calls are rewritten; gen_0/%s is the edited copy)";
static const char end_fmt[] = "// cuco: end of the program's header \"%s\"";

/* 1 when the analysis of the file at path finds an NCCL collective or
 * point-to-point call in that file itself. */
static int calls_nccl(const char *path)
{
    const char *paths[] = {path};
    json_t *an = NULL;
    cuco_err ae = CUCO_ERR_INIT;
    int found = 0;
    if (cuco_analyze_paths(paths, 1, &an, &ae) == 0) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(an, "collectives"), i, c)
        {
            const char *file = json_string_value(json_object_get(c, "file"));
            found |= file && strcmp(file, path) == 0;
        }
    }
    json_decref(an);
    cuco_err_clear(&ae);
    return found;
}

char *cuco_tx_evolve_dir(const cuco_workload *w)
{
    char *evolve = cuco_path_join(w->dir, w->evolve_file);
    char *dir = evolve ? cuco_path_dirname(evolve) : NULL;
    free(evolve);
    return dir;
}

char *cuco_tx_quoted_include(const char *src, const cuco_tok *t)
{
    if (!cuco_tok_directive(src, t, "include"))
        return NULL;
    const char *end = src + t->off + t->len;
    const char *q = src + t->dir_off + 7;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    if (q >= end || *q != '"')
        return NULL;
    const char *q2 = memchr(q + 1, '"', (size_t)(end - q - 1));
    return q2 && q2 > q + 1 ? cuco_strndup(q + 1, (size_t)(q2 - q - 1)) : NULL;
}

/* Appends the header's text with "#pragma once" turned into a comment (it
 * would warn in a main file) and a final newline; returns its line count. */
static int append_header(cuco_buf *out, const char *text)
{
    int lines = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *s = p;
        while (s < p + len && (*s == ' ' || *s == '\t'))
            s++;
        if ((size_t)(p + len - s) >= 12 && strncmp(s, "#pragma once", 12) == 0)
            cuco_buf_puts(out, "// #pragma once (inlined)");
        else
            cuco_buf_append(out, p, len);
        cuco_buf_putc(out, '\n');
        lines++;
        p += nl ? len + 1 : len;
    }
    return lines;
}

static int add_inlined(cuco_tx_headers *h, const char *name, const char *path, int seed_line,
                       int begin, int end)
{
    cuco_tx_inlined *v = realloc(h->v, (h->n + 1) * sizeof(*v));
    if (!v)
        return CUCO_ENOMEM;
    h->v = v;
    cuco_tx_inlined *x = &h->v[h->n];
    x->name = cuco_strdup(name);
    x->path = cuco_strdup(path);
    x->seed_line = seed_line;
    x->begin = begin;
    x->end = end;
    if (!x->name || !x->path) {
        free(x->name);
        free(x->path);
        return CUCO_ENOMEM;
    }
    h->n++;
    return 0;
}

/* Inlines, into out, the header named by the #include at t when it is the
 * program's own and calls NCCL; *shift grows by the lines it adds. 1 when
 * inlined, 0 when not, negative on failure. */
static int inline_one(const char *dir, const char *seed, const cuco_tok *t, cuco_buf *out,
                      int *shift, cuco_tx_headers *h, cuco_err *e)
{
    char *name = cuco_tx_quoted_include(seed, t);
    char *path = name ? cuco_path_join(dir, name) : NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    if (!path || !cuco_fs_exists(path) || cuco_fs_is_dir(path) || !calls_nccl(path))
        goto out;
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->v[i].path, path) == 0)
            goto out; /* included twice: its guard keeps the second one empty */
    if ((rc = cuco_fs_read(path, &text, &len, e)) != 0)
        goto out;
    int begin = t->line + *shift;
    cuco_buf_printf(out, begin_fmt, name, name);
    cuco_buf_putc(out, '\n');
    int lines = append_header(out, text);
    cuco_buf_printf(out, end_fmt, name);
    *shift += lines + 1;
    rc = add_inlined(h, name, path, t->line, begin, begin + lines + 1);
    if (rc == 0)
        rc = 1;
out:
    free(text);
    free(path);
    free(name);
    return rc;
}

int cuco_tx_headers_inline(const cuco_workload *w, const char *seed, char **flat,
                           cuco_tx_headers *h, cuco_err *e)
{
    *flat = NULL;
    memset(h, 0, sizeof(*h));
    cuco_block *blocks = NULL;
    size_t nblocks = 0;
    cuco_err be = CUCO_ERR_INIT;
    int has_blocks = cuco_program_blocks(seed, &blocks, &nblocks, &be) != 0 || nblocks > 0;
    free(blocks);
    cuco_err_clear(&be);
    if (has_blocks)
        return 0;
    char *dir = cuco_tx_evolve_dir(w);
    if (!dir)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    cuco_lex lx;
    int rc = cuco_lex_run(&lx, seed, strlen(seed), e);
    if (rc != 0) {
        free(dir);
        return rc;
    }
    cuco_buf out = CUCO_BUF_INIT;
    size_t at = 0;
    int shift = 0, inlined = 0;
    for (size_t i = 0; rc >= 0 && i < lx.ntoks; i++) {
        const cuco_tok *t = &lx.toks[i];
        if (t->kind != CUCO_TOK_PREPROC)
            continue;
        cuco_buf_append(&out, seed + at, t->off - at);
        rc = inline_one(dir, seed, t, &out, &shift, h, e);
        if (rc == 0)
            cuco_buf_append(&out, seed + t->off, t->len);
        inlined += rc > 0;
        at = t->off + t->len;
    }
    cuco_lex_free(&lx);
    free(dir);
    if (rc < 0) {
        cuco_buf_free(&out);
        cuco_tx_headers_free(h);
        return rc;
    }
    cuco_buf_puts(&out, seed + at);
    if (inlined)
        *flat = cuco_buf_detach(&out);
    else
        cuco_buf_free(&out);
    return inlined && !*flat ? cuco_err_set(e, CUCO_ENOMEM, "out of memory") : 0;
}

/* The seed's line for line x of the flattened seed; *in gets the inlined
 * header holding x (NULL when none) and *hline its line there. */
static int seed_line_of(const cuco_tx_headers *h, int x, const cuco_tx_inlined **in, int *hline)
{
    int shift = 0;
    *in = NULL;
    *hline = 0;
    for (size_t r = 0; r < h->n; r++) {
        const cuco_tx_inlined *v = &h->v[r];
        if (x > v->end) {
            shift += v->end - v->begin;
            continue;
        }
        if (x >= v->begin) {
            if (x > v->begin && x < v->end) {
                *in = v;
                *hline = x - v->begin;
            }
            return v->seed_line;
        }
        break;
    }
    return x - shift;
}

/* The text with each "line N" (a line of the flattened seed) made the
 * seed's line, or "NAME line M" inside an inlined header. Caller frees. */
static char *remap_text(const cuco_tx_headers *h, const char *text)
{
    cuco_buf b = CUCO_BUF_INIT;
    const char *p = text;
    for (const char *q; (q = strstr(p, "line ")) != NULL;) {
        char *end = NULL;
        long x = q[5] >= '0' && q[5] <= '9' ? strtol(q + 5, &end, 10) : 0;
        if (x <= 0 || x > 10000000) {
            cuco_buf_append(&b, p, (size_t)(q + 5 - p));
            p = q + 5;
            continue;
        }
        const cuco_tx_inlined *in;
        int hline, at = seed_line_of(h, (int)x, &in, &hline);
        cuco_buf_append(&b, p, (size_t)(q - p));
        if (in)
            cuco_buf_printf(&b, "%s line %d", in->name, hline);
        else
            cuco_buf_printf(&b, "line %d", at);
        p = end;
    }
    cuco_buf_puts(&b, p);
    return cuco_buf_detach(&b);
}

int cuco_tx_headers_notes(const cuco_tx_headers *h, cuco_tx_notes *notes, size_t first)
{
    for (size_t i = first; h->n && i < notes->n; i++) {
        cuco_tx_note *n = &notes->items[i];
        /* a line of the generated program (check_lines_to_seed) is not one of the seed */
        char *text =
            strstr(n->text, "generated program") ? cuco_strdup(n->text) : remap_text(h, n->text);
        if (!text)
            return CUCO_ENOMEM;
        if (n->line > 0) {
            const cuco_tx_inlined *in;
            int hline;
            n->line = seed_line_of(h, n->line, &in, &hline);
            if (in) {
                char *t = cuco_sprintf("in %s line %d: %s", in->name, hline, text);
                free(text);
                text = t;
                if (!text)
                    return CUCO_ENOMEM;
            }
        }
        free(n->text);
        n->text = text;
    }
    return 0;
}

/* The text of the program between the marker lines of x, or NULL. Caller frees. */
static char *between_markers(const char *program, const cuco_tx_inlined *x)
{
    char *begin = cuco_sprintf(begin_fmt, x->name, x->name);
    char *end = cuco_sprintf(end_fmt, x->name);
    const char *b = begin ? strstr(program, begin) : NULL;
    const char *s = b ? strchr(b, '\n') : NULL;
    const char *en = s && end ? strstr(s, end) : NULL;
    char *text = en ? cuco_strndup(s + 1, (size_t)(en - s - 1)) : NULL;
    free(begin);
    free(end);
    return text;
}

int cuco_tx_headers_write(const cuco_tx_headers *h, const char *program, const char *gen0,
                          cuco_err *e)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < h->n; i++) {
        char *text = between_markers(program, &h->v[i]);
        char *path = text ? cuco_path_join(gen0, h->v[i].name) : NULL;
        char *dir = path ? cuco_path_dirname(path) : NULL;
        if (dir && (rc = cuco_fs_mkdirs(dir, e)) == 0)
            rc = cuco_fs_write(path, text, strlen(text), e);
        free(dir);
        free(path);
        free(text);
    }
    return rc;
}

int cuco_tx_headers_has(const cuco_tx_headers *h, const char *file)
{
    for (size_t i = 0; file && i < h->n; i++)
        if (strcmp(h->v[i].path, file) == 0)
            return 1;
    return 0;
}

void cuco_tx_headers_free(cuco_tx_headers *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].name);
        free(h->v[i].path);
    }
    free(h->v);
    h->v = NULL;
    h->n = 0;
}
