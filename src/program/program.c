/* program.c: the text of a candidate program: where its EVOLVE-BLOCKs are,
 * whether the frozen text around them is untouched, and the knobs
 * ("#define NAME VALUE  // cuco:knob V1 V2 ...") inside them. Lines end at
 * '\n'; a '\r' before it is not part of the line's content, so CRLF files work
 * the same as LF ones (the frozen check still compares bytes). */
#include "cuco/program.h"
#include "cuco/buf.h"
#include "cuco/grow.h"
#include "cuco/log.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One line of text: [start, end) without the line break; next is where the
 * following line starts. */
typedef struct line_span {
    size_t start, end, next;
} line_span;

static int next_line(const char *text, size_t len, size_t pos, line_span *l)
{
    if (pos >= len)
        return 0;
    const char *nl = memchr(text + pos, '\n', len - pos);
    l->start = pos;
    l->next = nl ? (size_t)(nl - text) + 1 : len;
    l->end = nl ? (size_t)(nl - text) : len;
    if (l->end > l->start && text[l->end - 1] == '\r')
        l->end--;
    return 1;
}

static int span_contains(const char *text, const line_span *l, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = l->start; i + n <= l->end; i++)
        if (!memcmp(text + i, needle, n))
            return 1;
    return 0;
}

/* 1 START, 2 END, 0 neither. */
static int marker_kind(const char *text, const line_span *l)
{
    size_t i = l->start;
    while (i < l->end && (text[i] == ' ' || text[i] == '\t'))
        i++;
    if (i + 2 > l->end || text[i] != '/' || text[i + 1] != '/')
        return 0;
    if (span_contains(text, l, "EVOLVE-BLOCK-START"))
        return 1;
    if (span_contains(text, l, "EVOLVE-BLOCK-END"))
        return 2;
    return 0;
}

/* A file with START markers and no END marker at all (the layout of some
 * other evolution tools): each block runs from its START line to the next
 * START line, or to the end of the file. */
static int start_only_blocks(const char *text, cuco_block **blocks, size_t *n, cuco_err *e)
{
    size_t len = strlen(text), count = 0, cap = 0, open_body = 0;
    cuco_block *list = NULL;
    int open_line = 0, lineno = 0;
    line_span l;
    for (size_t pos = 0; next_line(text, len, pos, &l); pos = l.next) {
        lineno++;
        if (marker_kind(text, &l) != 1)
            continue;
        if (open_line && CUCO_GROW(list, cap, count + 1, 4) != 0)
            goto nomem;
        if (open_line)
            list[count++] = (cuco_block){open_body, l.start, open_line, lineno};
        open_line = lineno;
        open_body = l.next;
    }
    if (CUCO_GROW(list, cap, count + 1, 4) != 0)
        goto nomem;
    list[count++] = (cuco_block){open_body, len, open_line, lineno + 1};
    *blocks = list;
    *n = count;
    return 0;
nomem:
    free(list);
    return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

int cuco_program_blocks(const char *text, cuco_block **blocks, size_t *n, cuco_err *e)
{
    *blocks = NULL;
    *n = 0;
    size_t len = strlen(text), count = 0, cap = 0;
    cuco_block *list = NULL;
    int open = 0, open_line = 0, lineno = 0, starts = 0, ends = 0;
    size_t open_body = 0;
    line_span l;
    for (size_t pos = 0; next_line(text, len, pos, &l); pos = l.next) {
        int kind = marker_kind(text, &l);
        starts += kind == 1;
        ends += kind == 2;
    }
    if (starts > 0 && ends == 0)
        return start_only_blocks(text, blocks, n, e);
    for (size_t pos = 0; next_line(text, len, pos, &l); pos = l.next) {
        lineno++;
        int kind = marker_kind(text, &l);
        if (kind == 1) {
            if (open) {
                free(list);
                return cuco_err_set(e, CUCO_EINVAL,
                                    "line %d: EVOLVE-BLOCK-START inside the block opened at line "
                                    "%d (blocks do not nest): put // EVOLVE-BLOCK-END before line "
                                    "%d, or drop every END marker (then each block runs to the "
                                    "next START or the end of the file)",
                                    lineno, open_line, lineno);
            }
            open = 1;
            open_line = lineno;
            open_body = l.next;
        } else if (kind == 2) {
            if (!open) {
                free(list);
                return cuco_err_set(e, CUCO_EINVAL,
                                    "line %d: EVOLVE-BLOCK-END without an EVOLVE-BLOCK-START",
                                    lineno);
            }
            if (CUCO_GROW(list, cap, count + 1, 4) != 0) {
                free(list);
                return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            }
            list[count++] = (cuco_block){open_body, l.start, open_line, lineno};
            open = 0;
        }
    }
    if (open) {
        free(list);
        return cuco_err_set(e, CUCO_EINVAL,
                            "line %d: EVOLVE-BLOCK-START is never closed by an EVOLVE-BLOCK-END "
                            "(the file has END markers: close this block too, or drop every END "
                            "marker so that each block runs to the next START)",
                            open_line);
    }
    *blocks = list;
    *n = count;
    return 0;
}

static int line_of_offset(const char *text, size_t off)
{
    int line = 1;
    for (size_t i = 0; i < off && text[i]; i++)
        line += text[i] == '\n';
    return line;
}

/* The text of line number `line` (1-based), for messages; caller frees. */
static char *line_text(const char *text, int line)
{
    size_t len = strlen(text);
    line_span l;
    int at = 0;
    for (size_t pos = 0; next_line(text, len, pos, &l); pos = l.next)
        if (++at == line) {
            size_t n = l.end - l.start;
            if (n > 160)
                n = 160;
            return cuco_strndup(text + l.start, n);
        }
    return cuco_strdup("(end of file)");
}

static int frozen_differs(const char *cand, size_t cand_off, cuco_err *e, const char *what)
{
    int line = line_of_offset(cand, cand_off);
    char *shown = line_text(cand, line);
    int rc =
        cuco_err_set(e, CUCO_EINVAL,
                     "frozen text changed: line %d of the candidate differs from the seed%s%s: "
                     "'%s'",
                     line, what ? " " : "", what ? what : "", shown);
    free(shown);
    return rc;
}

/* Offset of the first differing byte of two texts, from the start of the
 * line where they first differ (so messages point at whole lines). */
static size_t first_difference(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t i = 0, line_start = 0;
    while (i < alen && i < blen && a[i] == b[i]) {
        if (a[i] == '\n')
            line_start = i + 1;
        i++;
    }
    return line_start;
}

int cuco_program_check_frozen(const char *seed, const char *cand, cuco_err *e)
{
    cuco_block *sb = NULL, *cb = NULL;
    size_t sn = 0, cn = 0;
    int rc = cuco_program_blocks(seed, &sb, &sn, e);
    if (rc) {
        cuco_err_prefix(e, "seed program");
        return rc;
    }
    rc = cuco_program_blocks(cand, &cb, &cn, e);
    if (rc) {
        cuco_err_prefix(e, "candidate program");
        goto out;
    }
    size_t slen = strlen(seed), clen = strlen(cand);
    if (sn != cn) {
        size_t off = first_difference(seed, slen, cand, clen);
        char *what =
            sn == 0
                ? cuco_sprintf("(it has %zu EVOLVE-BLOCKs, the seed none: compare it with the "
                               "program that added them, e.g. 'cuco eval --frozen-ref' with the "
                               "transform's gen_0)",
                               cn)
                : cuco_sprintf("(it has %zu EVOLVE-BLOCKs, the seed %zu)", cn, sn);
        rc = frozen_differs(cand, off, e, what);
        free(what);
        goto out;
    }
    /* Segment k is the frozen text before block k (segment sn: after the last). */
    for (size_t k = 0; k <= sn; k++) {
        size_t s0 = k ? sb[k - 1].body_end : 0, s1 = k < sn ? sb[k].body_start : slen;
        size_t c0 = k ? cb[k - 1].body_end : 0, c1 = k < cn ? cb[k].body_start : clen;
        if (s1 - s0 == c1 - c0 && !memcmp(seed + s0, cand + c0, s1 - s0))
            continue;
        size_t off = c0 + first_difference(seed + s0, s1 - s0, cand + c0, c1 - c0);
        rc = frozen_differs(cand, off, e, NULL);
        goto out;
    }
out:
    free(sb);
    free(cb);
    return rc;
}

void cuco_knobs_free(cuco_knob *knobs, size_t n)
{
    if (!knobs)
        return;
    for (size_t i = 0; i < n; i++) {
        free(knobs[i].name);
        free(knobs[i].value);
        cuco_strlist_free(&knobs[i].choices);
        cuco_strlist_free(&knobs[i].when);
    }
    free(knobs);
}

/* Token scanning within [*i, end). */
static void skip_space(const char *t, size_t *i, size_t end)
{
    while (*i < end && (t[*i] == ' ' || t[*i] == '\t'))
        (*i)++;
}

static size_t token_end(const char *t, size_t i, size_t end)
{
    while (i < end && t[i] != ' ' && t[i] != '\t')
        i++;
    return i;
}

/* A whole decimal or 0x integer, optionally signed. */
static int is_integer(const char *s)
{
    if (!s || !*s)
        return 0;
    char *end = NULL;
    errno = 0;
    (void)strtoll(s, &end, 0);
    return errno == 0 && end && *end == '\0';
}

/* Parses one knob line. Returns 1 and fills k (and the value's byte range)
 * when it is a knob, 0 when it is not, negative on a malformed knob. */
static int parse_knob_line(const char *t, const line_span *l, int lineno, cuco_knob *k,
                           size_t *value_start, size_t *value_end, cuco_err *e)
{
    static const char tag[] = "cuco:knob";
    size_t i = l->start, end = l->end;
    skip_space(t, &i, end);
    if (i >= end || t[i] != '#')
        return 0;
    i++;
    skip_space(t, &i, end);
    if (end - i < 6 || memcmp(t + i, "define", 6) ||
        (i + 6 < end && !isspace((unsigned char)t[i + 6])))
        return 0;
    /* Only lines carrying the tag in a trailing // comment are knobs. */
    size_t comment = end;
    for (size_t j = i; j + 1 < end; j++)
        if (t[j] == '/' && t[j + 1] == '/') {
            comment = j;
            break;
        }
    if (comment == end)
        return 0;
    size_t c = comment + 2;
    skip_space(t, &c, end);
    if (end - c < sizeof tag - 1 || memcmp(t + c, tag, sizeof tag - 1))
        return 0;
    c += sizeof tag - 1;
    skip_space(t, &c, end);
    int run = end - c >= 3 && !memcmp(t + c, "run", 3) &&
              (c + 3 == end || isspace((unsigned char)t[c + 3]));
    if (run)
        c += 3;
    i += 6;
    skip_space(t, &i, comment);
    size_t name_end = i;
    while (name_end < comment && (isalnum((unsigned char)t[name_end]) || t[name_end] == '_'))
        name_end++;
    if (name_end == i)
        return cuco_err_set(e, CUCO_EINVAL, "line %d: knob #define has no macro name", lineno);
    size_t v = name_end;
    skip_space(t, &v, comment);
    size_t v_end = token_end(t, v, comment);
    if (v_end == v)
        return cuco_err_set(e, CUCO_EINVAL, "line %d: knob %.*s has no value", lineno,
                            (int)(name_end - i), t + i);
    size_t rest = v_end;
    skip_space(t, &rest, comment);
    if (rest != comment)
        return cuco_err_set(e, CUCO_EINVAL,
                            "line %d: knob %.*s: the value must be one token before the comment",
                            lineno, (int)(name_end - i), t + i);
    memset(k, 0, sizeof *k);
    k->name = cuco_strndup(t + i, name_end - i);
    k->value = cuco_strndup(t + v, v_end - v);
    k->line = lineno;
    int conditions = 0;
    for (;;) {
        skip_space(t, &c, end);
        if (c >= end)
            break;
        size_t te = token_end(t, c, end);
        if (!conditions && te - c == 4 && !memcmp(t + c, "when", 4)) {
            conditions = 1;
        } else {
            char *word = cuco_strndup(t + c, te - c);
            cuco_strlist_push(conditions ? &k->when : &k->choices, word);
            free(word);
        }
        c = te;
    }
    const char *bad = k->choices.n == 0              ? "lists no choices after cuco:knob"
                      : conditions && k->when.n == 0 ? "has 'when' and no condition after it"
                                                     : NULL;
    for (size_t j = 0; !bad && j < k->when.n; j++) {
        const char *eq = strchr(k->when.items[j], '=');
        if (!eq || eq == k->when.items[j] || !eq[1])
            bad = "has a condition that is not NAME=VALUE[,VALUE...] after 'when'";
    }
    if (bad) {
        int rc = cuco_err_set(e, CUCO_EINVAL, "line %d: knob %s %s", lineno, k->name, bad);
        free(k->name);
        free(k->value);
        cuco_strlist_free(&k->choices);
        cuco_strlist_free(&k->when);
        return rc;
    }
    k->value_in_choices = 0;
    for (size_t j = 0; j < k->choices.n; j++)
        k->value_in_choices |= !strcmp(k->choices.items[j], k->value);
    k->run = run && is_integer(k->value);
    for (size_t j = 0; k->run && j < k->choices.n; j++)
        k->run = is_integer(k->choices.items[j]);
    if (run && !k->run)
        cuco_warn("line %d: knob %s is marked run but its values are not all integers: it is "
                  "built in",
                  lineno, k->name);
    k->value_off = v;
    k->value_len = v_end - v;
    *value_start = v;
    *value_end = v_end;
    return 1;
}

/* Walks the knob lines of text; when want is non-NULL, stops at that knob and
 * reports its value range. */
static int scan_knobs(const char *text, cuco_knob **knobs, size_t *n, const char *want,
                      size_t *want_start, size_t *want_end, cuco_err *e)
{
    cuco_block *blocks = NULL;
    size_t nb = 0;
    int rc = cuco_program_blocks(text, &blocks, &nb, e);
    if (rc)
        return rc;
    size_t len = strlen(text), count = 0, b = 0;
    cuco_knob *list = NULL;
    int lineno = 0, found = 0;
    line_span l;
    for (size_t pos = 0; next_line(text, len, pos, &l); pos = l.next) {
        lineno++;
        while (b < nb && l.start >= blocks[b].body_end)
            b++;
        if (b >= nb)
            break;
        if (l.start < blocks[b].body_start)
            continue;
        cuco_knob k;
        size_t vs = 0, ve = 0;
        rc = parse_knob_line(text, &l, lineno, &k, &vs, &ve, e);
        if (rc < 0)
            goto fail;
        if (rc == 0)
            continue;
        rc = 0;
        for (size_t j = 0; j < count; j++)
            if (!strcmp(list[j].name, k.name)) {
                rc = cuco_err_set(e, CUCO_EINVAL, "line %d: knob %s is already declared at line %d",
                                  lineno, k.name, list[j].line);
                free(k.name);
                free(k.value);
                cuco_strlist_free(&k.choices);
                goto fail;
            }
        if (!k.value_in_choices)
            cuco_warn("line %d: knob %s = %s is not among its choices", lineno, k.name, k.value);
        if (want && !strcmp(want, k.name)) {
            *want_start = vs;
            *want_end = ve;
            found = 1;
        }
        cuco_knob *grown = realloc(list, (count + 1) * sizeof *grown);
        if (!grown) {
            free(k.name);
            free(k.value);
            cuco_strlist_free(&k.choices);
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            goto fail;
        }
        list = grown;
        list[count++] = k;
    }
    free(blocks);
    if (want && !found) {
        cuco_knobs_free(list, count);
        return cuco_err_set(e, CUCO_ENOTFOUND, "no knob named %s in the EVOLVE-BLOCKs", want);
    }
    if (knobs) {
        *knobs = list;
        *n = count;
    } else {
        cuco_knobs_free(list, count);
    }
    return 0;
fail:
    free(blocks);
    cuco_knobs_free(list, count);
    return rc;
}

int cuco_program_knobs(const char *text, cuco_knob **knobs, size_t *n, cuco_err *e)
{
    *knobs = NULL;
    *n = 0;
    return scan_knobs(text, knobs, n, NULL, NULL, NULL, e);
}

int cuco_program_set_knob(const char *text, const char *name, const char *value, char **out,
                          cuco_err *e)
{
    *out = NULL;
    if (!value || !*value)
        return cuco_err_set(e, CUCO_EINVAL, "knob %s: empty value", name);
    for (const char *c = value; *c; c++)
        if (isspace((unsigned char)*c) || *c == '/')
            return cuco_err_set(e, CUCO_EINVAL, "knob %s: value '%s' must be one token", name,
                                value);
    size_t vs = 0, ve = 0;
    int rc = scan_knobs(text, NULL, NULL, name, &vs, &ve, e);
    if (rc)
        return rc;
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_append(&b, text, vs);
    cuco_buf_puts(&b, value);
    cuco_buf_puts(&b, text + ve);
    *out = cuco_buf_detach(&b);
    return 0;
}

/* Declares cuco_run_knob before the program's first line; #line 1 restores
 * the program's own numbering for the compiler's messages. */
static const char run_knob_prelude[] =
    "#include <stdlib.h>\n"
    "static inline long long cuco_run_knob(const char *name, long long fallback)\n"
    "{\n"
    "    const char *v = getenv(name);\n"
    "    return v && *v ? strtoll(v, NULL, 0) : fallback;\n"
    "}\n"
    "#line 1\n";

int cuco_program_stage_run_knobs(const char *text, char **staged, cuco_strlist *env, cuco_err *e)
{
    *staged = NULL;
    cuco_knob *k = NULL;
    size_t n = 0;
    int rc = cuco_program_knobs(text, &k, &n, e);
    if (rc)
        return rc;
    size_t runs = 0;
    for (size_t i = 0; i < n; i++)
        runs += k[i].run;
    if (!runs) {
        cuco_knobs_free(k, n);
        return 0;
    }
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_puts(&b, run_knob_prelude);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!k[i].run)
            continue;
        cuco_buf_append(&b, text + at, k[i].value_off - at);
        cuco_buf_printf(&b, "cuco_run_knob(\"CUCO_KNOB_%s\", %s)", k[i].name,
                        k[i].choices.items[0]);
        at = k[i].value_off + k[i].value_len;
        char *kv = cuco_sprintf("CUCO_KNOB_%s=%s", k[i].name, k[i].value);
        cuco_strlist_push(env, kv);
        free(kv);
    }
    cuco_buf_puts(&b, text + at);
    cuco_knobs_free(k, n);
    *staged = cuco_buf_detach(&b);
    return 0;
}
