/* patch.c: SEARCH/REPLACE diffs, full EVOLVE-BLOCK rewrites and the frozen
 * guard (see patch.h). */
#include "cuco/patch.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/grow.h"
#include "cuco/program.h"

/* A line view: [s, s+len) without its newline. */
typedef struct line {
    const char *s;
    size_t len;
    size_t off; /* byte offset of the line start */
    size_t end; /* byte offset after the line's newline (or text end) */
} line;

static int split_lines(const char *text, line **out, size_t *n)
{
    size_t cap = 16, cnt = 0, off = 0, tl = strlen(text);
    line *ls = malloc(cap * sizeof *ls);
    if (!ls)
        return CUCO_ENOMEM;
    while (off < tl) {
        const char *nl = memchr(text + off, '\n', tl - off);
        size_t len = nl ? (size_t)(nl - (text + off)) : tl - off;
        if (CUCO_GROW(ls, cap, cnt + 1, 16) != 0) {
            free(ls);
            return CUCO_ENOMEM;
        }
        ls[cnt].s = text + off;
        ls[cnt].len = len;
        ls[cnt].off = off;
        ls[cnt].end = off + len + (nl ? 1 : 0);
        cnt++;
        off += len + (nl ? 1 : 0);
    }
    *out = ls;
    *n = cnt;
    return 0;
}

static int line_is(const line *l, const char *marker)
{
    size_t len = l->len;
    while (len && (l->s[len - 1] == '\r' || l->s[len - 1] == ' ' || l->s[len - 1] == '\t'))
        len--;
    size_t ml = strlen(marker);
    return len == ml && memcmp(l->s, marker, ml) == 0;
}

/* Starts with a marker (allowing "<<<<<<< SEARCH" variations of trailing text). */
static int line_starts(const line *l, const char *marker)
{
    size_t ml = strlen(marker);
    return l->len >= ml && memcmp(l->s, marker, ml) == 0;
}

void cuco_sr_blocks_free(cuco_sr_block *blocks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(blocks[i].search);
        free(blocks[i].replace);
    }
    free(blocks);
}

/* Text of lines [a, b) joined with their newlines. */
static char *join_lines(const char *text, const line *ls, size_t a, size_t b)
{
    if (a >= b)
        return cuco_strdup("");
    return cuco_strndup(text + ls[a].off, ls[b - 1].end - ls[a].off);
}

int cuco_patch_parse(const char *response, cuco_sr_block **blocks, size_t *n, cuco_err *e)
{
    line *ls;
    size_t nl;
    *blocks = NULL;
    *n = 0;
    if (split_lines(response, &ls, &nl) < 0)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    cuco_sr_block *bs = NULL;
    size_t cnt = 0;
    int rc = 0;
    for (size_t i = 0; i < nl; i++) {
        if (!line_starts(&ls[i], "<<<<<<< SEARCH"))
            continue;
        size_t mid = 0, end = 0;
        for (size_t j = i + 1; j < nl; j++) {
            if (!mid && line_is(&ls[j], "=======")) {
                mid = j;
            } else if (line_starts(&ls[j], ">>>>>>> REPLACE")) {
                end = j;
                break;
            } else if (line_starts(&ls[j], "<<<<<<< SEARCH")) {
                break;
            }
        }
        if (!mid || !end) {
            rc = cuco_err_set_at(e, CUCO_EINVAL, "response", (int)i + 1,
                                 "SEARCH/REPLACE block %zu is not closed (missing %s)", cnt + 1,
                                 mid ? ">>>>>>> REPLACE" : "=======");
            goto out;
        }
        cuco_sr_block *nb = realloc(bs, (cnt + 1) * sizeof *bs);
        if (!nb) {
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            goto out;
        }
        bs = nb;
        bs[cnt].search = join_lines(response, ls, i + 1, mid);
        bs[cnt].replace = join_lines(response, ls, mid + 1, end);
        bs[cnt].line = (int)i + 1;
        cnt++;
        if (!bs[cnt - 1].search || !bs[cnt - 1].replace) {
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            goto out;
        }
        i = end;
    }
    if (cnt == 0)
        rc = cuco_err_set(e, CUCO_EINVAL, "no SEARCH/REPLACE block in the response");
out:
    free(ls);
    if (rc < 0) {
        cuco_sr_blocks_free(bs, cnt);
        return rc;
    }
    *blocks = bs;
    *n = cnt;
    return 0;
}

static int count_occurrences(const char *hay, const char *needle, const char **first)
{
    int cnt = 0;
    size_t nlen = strlen(needle);
    *first = NULL;
    if (nlen == 0)
        return 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) {
        if (!cnt)
            *first = p;
        cnt++;
    }
    return cnt;
}

static void trim_view(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

static int lines_eq_ws(const line *a, const line *b)
{
    const char *as = a->s, *bs = b->s;
    size_t al = a->len, bl = b->len;
    trim_view(&as, &al);
    trim_view(&bs, &bl);
    return al == bl && memcmp(as, bs, al) == 0;
}

static char *first_line(const char *s)
{
    while (*s == '\n' || *s == '\r')
        s++;
    const char *nl = strchr(s, '\n');
    char *f = nl ? cuco_strndup(s, (size_t)(nl - s)) : cuco_strdup(s);
    return f ? cuco_str_trim(f) : NULL;
}

/* Applies one block to *text (replaced on success). */
static int apply_one(char **text, const cuco_sr_block *b, size_t idx, cuco_err *e)
{
    const char *at;
    size_t start = 0, stop = 0;
    int rc = 0;
    int n = count_occurrences(*text, b->search, &at);
    if (n == 1) {
        start = (size_t)(at - *text);
        stop = start + strlen(b->search);
    } else if (n > 1) {
        rc = CUCO_EINVAL;
    } else {
        /* whitespace-tolerant: line by line, trimmed, ignoring blank edges */
        line *tl = NULL, *sl = NULL;
        size_t ntl, nsl;
        if (split_lines(*text, &tl, &ntl) < 0 || split_lines(b->search, &sl, &nsl) < 0) {
            free(tl);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        size_t s0 = 0, s1 = nsl;
        while (s0 < s1 && sl[s0].len == 0)
            s0++;
        while (s1 > s0 && sl[s1 - 1].len == 0)
            s1--;
        if (s1 > s0) {
            for (size_t i = 0; i + (s1 - s0) <= ntl; i++) {
                size_t k = 0;
                while (k < s1 - s0 && lines_eq_ws(&tl[i + k], &sl[s0 + k]))
                    k++;
                if (k == s1 - s0) {
                    n++;
                    if (n == 1) {
                        start = tl[i].off;
                        stop = tl[i + k - 1].end;
                    }
                }
            }
        }
        free(tl);
        free(sl);
    }
    if (n != 1) {
        char *fl = first_line(b->search);
        rc = cuco_err_set(e, CUCO_EINVAL, "SEARCH/REPLACE block %zu: SEARCH text %s: \"%s\"",
                          idx + 1, n == 0 ? "not found" : "matches more than once", fl ? fl : "");
        free(fl);
        return rc;
    }
    cuco_buf o = CUCO_BUF_INIT;
    size_t rl = strlen(b->replace);
    if (cuco_buf_append(&o, *text, start) < 0 || cuco_buf_append(&o, b->replace, rl) < 0)
        goto nomem;
    /* keep the line structure when the matched text ended with a newline */
    if (stop > start && (*text)[stop - 1] == '\n' && rl && b->replace[rl - 1] != '\n' &&
        cuco_buf_putc(&o, '\n') < 0)
        goto nomem;
    if (cuco_buf_puts(&o, *text + stop) < 0)
        goto nomem;
    free(*text);
    *text = cuco_buf_detach(&o);
    return 0;
nomem:
    cuco_buf_free(&o);
    return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

int cuco_patch_apply_diff(const char *text, const char *response, char **out, cuco_err *e)
{
    cuco_sr_block *bs;
    size_t n;
    *out = NULL;
    int rc = cuco_patch_parse(response, &bs, &n, e);
    if (rc < 0)
        return rc;
    char *cur = cuco_strdup(text);
    if (!cur) {
        cuco_sr_blocks_free(bs, n);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = apply_one(&cur, &bs[i], i, e);
    cuco_sr_blocks_free(bs, n);
    if (rc < 0) {
        free(cur);
        return rc;
    }
    *out = cur;
    return 0;
}

/* Strips a leading ```lang line and a trailing ``` line. Returns a new string. */
static char *strip_fences(const char *r)
{
    const char *s = r;
    while (*s == '\n' || *s == ' ' || *s == '\r')
        s++;
    if (strncmp(s, "```", 3) == 0) {
        const char *nl = strchr(s, '\n');
        s = nl ? nl + 1 : s + strlen(s);
    }
    size_t len = strlen(s);
    const char *f = len >= 3 ? s + len : NULL;
    if (f) {
        /* last non-blank line */
        size_t l = len;
        while (l && (s[l - 1] == '\n' || s[l - 1] == ' ' || s[l - 1] == '\r'))
            l--;
        if (l >= 3 && strncmp(s + l - 3, "```", 3) == 0 && (l == 3 || s[l - 4] == '\n'))
            len = l - 3;
    }
    return cuco_strndup(s, len);
}

int cuco_patch_apply_rewrite(const char *text, const char *response, char **out, cuco_err *e)
{
    cuco_block *tb = NULL, *rb = NULL;
    size_t ntb = 0, nrb = 0;
    *out = NULL;
    int rc = cuco_program_blocks(text, &tb, &ntb, e);
    if (rc < 0)
        return cuco_err_prefix(e, "parent program");
    if (ntb == 0) {
        free(tb);
        return cuco_err_set(e, CUCO_EINVAL, "the parent program has no EVOLVE-BLOCK");
    }
    char *resp = strip_fences(response);
    if (!resp) {
        free(tb);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    rc = cuco_program_blocks(resp, &rb, &nrb, e);
    if (rc < 0) {
        cuco_err_prefix(e, "rewrite response");
        goto out;
    }
    int bare = nrb == 0;
    if (bare && ntb != 1) {
        rc = cuco_err_set(e, CUCO_EINVAL,
                          "rewrite response has no EVOLVE-BLOCK markers but the program has %zu "
                          "blocks",
                          ntb);
        goto out;
    }
    if (!bare && nrb != ntb) {
        rc = cuco_err_set(e, CUCO_EINVAL, "rewrite response has %zu EVOLVE-BLOCKs, the program %zu",
                          nrb, ntb);
        goto out;
    }
    cuco_buf o = CUCO_BUF_INIT;
    size_t pos = 0;
    for (size_t i = 0; i < ntb; i++) {
        const char *body = bare ? resp : resp + rb[i].body_start;
        size_t blen = bare ? strlen(resp) : rb[i].body_end - rb[i].body_start;
        if (cuco_buf_append(&o, text + pos, tb[i].body_start - pos) < 0 ||
            cuco_buf_append(&o, body, blen) < 0 ||
            (blen && body[blen - 1] != '\n' && cuco_buf_putc(&o, '\n') < 0)) {
            cuco_buf_free(&o);
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            goto out;
        }
        pos = tb[i].body_end;
    }
    if (cuco_buf_puts(&o, text + pos) < 0) {
        cuco_buf_free(&o);
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    *out = cuco_buf_detach(&o);
out:
    free(resp);
    free(tb);
    free(rb);
    return rc;
}

int cuco_patch_guard(const char *seed, const char *cand, cuco_err *e)
{
    int rc = cuco_program_check_frozen(seed, cand, e);
    if (rc < 0)
        return cuco_err_prefix(e, "edit outside the EVOLVE-BLOCKs");
    return cuco_patch_guard_blocks(seed, cand, NULL, e);
}
