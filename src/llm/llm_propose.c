/* llm_propose.c: from a mutator's context to children: builds the prompts,
 * asks the session (model choice, budget, recording), and turns each answer
 * into a child program, or into a precise reason why it is unusable, which
 * is stored with the failed candidate and shown to later prompts. */
#include "cuco/llm.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/grow.h"

struct span {
    size_t start, end; /* body: after the START line, up to the END line */
};

/* 1 START, 2 END, 0 neither. */
static int marker_kind(const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i + 1 >= len || line[i] != '/' || line[i + 1] != '/')
        return 0;
    char *copy = cuco_strndup(line, len);
    int kind = 0;
    if (copy && strstr(copy, "EVOLVE-BLOCK-START"))
        kind = 1;
    else if (copy && strstr(copy, "EVOLVE-BLOCK-END"))
        kind = 2;
    free(copy);
    return kind;
}

/* Finds block bodies; returns the count, or -1 with *reason on bad markers. */
static long find_spans(const char *text, struct span **spans, char **reason, const char *what)
{
    size_t n = 0, cap = 0;
    long open_at = -1;
    int line_no = 0;
    *spans = NULL;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + len;
        line_no++;
        int kind = marker_kind(p, len);
        if (kind == 1) {
            if (open_at >= 0) {
                *reason = cuco_sprintf("%s: EVOLVE-BLOCK-START on line %d inside another block",
                                       what, line_no);
                goto bad;
            }
            open_at = (long)(next - text);
        } else if (kind == 2) {
            if (open_at < 0) {
                *reason =
                    cuco_sprintf("%s: EVOLVE-BLOCK-END on line %d without a START", what, line_no);
                goto bad;
            }
            if (CUCO_GROW(*spans, cap, n + 1, 4) != 0) {
                *reason = cuco_strdup("out of memory");
                goto bad;
            }
            (*spans)[n].start = (size_t)open_at;
            (*spans)[n].end = (size_t)(p - text);
            n++;
            open_at = -1;
        }
        p = next;
    }
    if (open_at >= 0) {
        *reason = cuco_sprintf("%s: an EVOLVE-BLOCK-START is never closed", what);
        goto bad;
    }
    return (long)n;
bad:
    free(*spans);
    *spans = NULL;
    return -1;
}

int cuco_llm_apply_blocks(const char *parent, const char *answer, char **child, char **reason)
{
    struct span *ps = NULL, *as = NULL;
    *child = NULL;
    *reason = NULL;
    long np = find_spans(parent, &ps, reason, "parent");
    if (np < 0)
        return -1;
    long na = find_spans(answer ? answer : "", &as, reason, "answer");
    if (na < 0) {
        free(ps);
        return -1;
    }
    int rc = -1;
    if (np == 0) {
        *reason = cuco_strdup("the parent has no EVOLVE-BLOCK");
    } else if (na != np) {
        *reason = cuco_sprintf("the answer holds %ld EVOLVE-BLOCK%s, the program has %ld", na,
                               na == 1 ? "" : "s", np);
    } else {
        cuco_buf out = CUCO_BUF_INIT;
        size_t at = 0;
        for (long i = 0; i < np; i++) {
            cuco_buf_append(&out, parent + at, ps[i].start - at);
            size_t blen = as[i].end - as[i].start;
            cuco_buf_append(&out, answer + as[i].start, blen);
            if (blen > 0 && answer[as[i].end - 1] != '\n')
                cuco_buf_putc(&out, '\n');
            at = ps[i].end;
        }
        cuco_buf_puts(&out, parent + at);
        *child = cuco_buf_detach(&out);
        rc = 0;
    }
    free(ps);
    free(as);
    return rc;
}

/* First line of s, for messages (caller frees). */
static char *first_line(const char *s, size_t len)
{
    const char *nl = memchr(s, '\n', len);
    size_t n = nl ? (size_t)(nl - s) : len;
    return cuco_strndup(s, n > 80 ? 80 : n);
}

/* Where a line starting with marker begins at or after p (NULL if none). */
static const char *find_line(const char *base, const char *p, const char *marker)
{
    size_t mlen = strlen(marker);
    for (const char *hit = strstr(p, marker); hit; hit = strstr(hit + 1, marker))
        if ((hit == base || hit[-1] == '\n') &&
            (hit[mlen] == '\n' || hit[mlen] == '\r' || hit[mlen] == ' ' || hit[mlen] == 0))
            return hit;
    return NULL;
}

static const char *next_line(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}

int cuco_llm_apply_diff(const char *parent, const char *answer, char **child, char **reason)
{
    *child = NULL;
    *reason = NULL;
    char *text = cuco_strdup(parent);
    const char *a = answer ? answer : "";
    int nblock = 0;
    for (const char *p = find_line(a, a, "<<<<<<< SEARCH"); p;
         p = find_line(a, p, "<<<<<<< SEARCH")) {
        nblock++;
        const char *s0 = next_line(p);
        const char *mid = find_line(a, s0, "=======");
        const char *end = mid ? find_line(a, mid, ">>>>>>> REPLACE") : NULL;
        if (!mid || !end) {
            *reason = cuco_sprintf("SEARCH/REPLACE block %d is not closed", nblock);
            goto bad;
        }
        const char *r0 = next_line(mid);
        /* the texts run up to the newline before the next marker */
        size_t slen = (size_t)(mid - s0), rlen = end > r0 ? (size_t)(end - r0) : 0;
        char *search = cuco_strndup(s0, slen);
        char *replace = cuco_strndup(r0, rlen);
        char *head = first_line(s0, slen);
        if (slen == 0) {
            *reason = cuco_sprintf("block %d: empty SEARCH text", nblock);
        } else {
            const char *hit = strstr(text, search);
            if (!hit)
                *reason = cuco_sprintf("block %d: SEARCH text not found: \"%s\"", nblock, head);
            else if (strstr(hit + 1, search))
                *reason = cuco_sprintf("block %d: SEARCH text matches more than once: \"%s\"",
                                       nblock, head);
            else {
                struct span *spans = NULL;
                char *why = NULL;
                long ns = find_spans(text, &spans, &why, "program");
                size_t at = (size_t)(hit - text);
                int inside = 0;
                for (long i = 0; i < ns; i++)
                    if (at >= spans[i].start && at + slen <= spans[i].end)
                        inside = 1;
                free(spans);
                free(why);
                if (!inside) {
                    *reason = cuco_sprintf("block %d: edits text outside the EVOLVE-BLOCKs "
                                           "(frozen): \"%s\"",
                                           nblock, head);
                } else {
                    cuco_buf out = CUCO_BUF_INIT;
                    cuco_buf_append(&out, text, at);
                    cuco_buf_append(&out, replace, rlen);
                    cuco_buf_puts(&out, hit + slen);
                    free(text);
                    text = cuco_buf_detach(&out);
                }
            }
        }
        free(search);
        free(replace);
        free(head);
        if (*reason)
            goto bad;
        p = next_line(end);
    }
    if (nblock == 0) {
        *reason = cuco_strdup("the answer holds no SEARCH/REPLACE block");
        goto bad;
    }
    *child = text;
    return 0;
bad:
    free(text);
    return -1;
}

char *cuco_llm_answer_description(const char *answer)
{
    if (!answer)
        return cuco_strdup("");
    size_t cut = strlen(answer);
    static const char *const stops[] = {"<<<<<<< SEARCH", "```", "EVOLVE-BLOCK-START"};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        const char *hit = strstr(answer, stops[i]);
        if (hit && (size_t)(hit - answer) < cut) {
            const char *ls = hit;
            while (ls > answer && ls[-1] != '\n')
                ls--;
            cut = (size_t)(ls - answer);
        }
    }
    if (cut > 500)
        cut = 500;
    char *d = cuco_strndup(answer, cut);
    return d ? cuco_str_trim(d) : NULL;
}

void cuco_llm_candidate_free(cuco_llm_candidate *c)
{
    if (!c)
        return;
    free(c->code);
    free(c->description);
    free(c->failure);
    memset(c, 0, sizeof *c);
}

static int apply_builtin(void *ctx, cuco_llm_prompt_kind kind, const char *parent,
                         const char *answer, char **child, char **reason)
{
    (void)ctx;
    if (kind == CUCO_LLM_PROMPT_DIFF)
        return cuco_llm_apply_diff(parent, answer, child, reason);
    return cuco_llm_apply_blocks(parent, answer, child, reason);
}

int cuco_llm_propose(cuco_llm_session *s, cuco_llm_prompt_kind kind, const cuco_llm_prompt_ctx *ctx,
                     size_t n, cuco_llm_apply_fn apply, void *apply_ctx, cuco_llm_candidate *out,
                     cuco_err *e)
{
    char *system = NULL, *user = NULL;
    memset(out, 0, n * sizeof *out);
    int rc = cuco_llm_prompt_build(kind, ctx, &system, &user, e);
    if (rc)
        return rc;
    const char **systems = calloc(n, sizeof *systems);
    const char **users = calloc(n, sizeof *users);
    cuco_llm_reply *replies = calloc(n, sizeof *replies);
    if (!systems || !users || !replies) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        systems[i] = system;
        users[i] = user;
    }
    rc = cuco_llm_session_ask(s, cuco_llm_prompt_kind_name(kind), systems, users, n, replies, e);
    if (rc && rc != CUCO_EBUDGET)
        goto out;
    if (!apply)
        apply = apply_builtin;
    for (size_t i = 0; i < n; i++) {
        cuco_llm_candidate *c = &out[i];
        cuco_llm_response *r = &replies[i].resp;
        c->arm = replies[i].arm;
        c->model = replies[i].model;
        c->cost_usd = r->cost_usd;
        c->status = r->status;
        if (r->status != CUCO_LLM_OK) {
            c->failure = cuco_sprintf("llm %s: %s", cuco_llm_status_name(r->status),
                                      r->error ? r->error : "no answer");
        } else {
            c->description = cuco_llm_answer_description(r->text);
            char *reason = NULL;
            if (apply(apply_ctx, kind, ctx->parent_code, r->text, &c->code, &reason)) {
                free(c->code);
                c->code = NULL;
                c->failure = reason ? reason : cuco_strdup("unusable answer");
                if (r->stop_reason &&
                    (!strcmp(r->stop_reason, "max_tokens") || !strcmp(r->stop_reason, "length"))) {
                    char *more = cuco_sprintf("%s (the answer was cut at max_tokens)", c->failure);
                    if (more) {
                        free(c->failure);
                        c->failure = more;
                    }
                }
            } else {
                free(reason);
            }
        }
    }
out:
    for (size_t i = 0; replies && i < n; i++)
        cuco_llm_response_free(&replies[i].resp);
    free(systems);
    free(users);
    free(replies);
    free(system);
    free(user);
    return rc;
}
