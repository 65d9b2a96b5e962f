/* check.c: the static device-initiated check of a transformed program,
 * whatever route made it. It re-lexes the program and rejects host
 * collectives left on the path (but those the rules kept, marked
 * CUCO_TX_KEPT_MARK), host copies into received buffers standing
 * in for communication (not the seed's own copies: packing a send buffer is
 * local), and a program that never creates a device communicator.
 */
#include "cuco/transform.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"

static const char *const host_calls[] = {"ncclAllGather", "ncclReduceScatter",
                                         "ncclAllReduce", "ncclSend",
                                         "ncclRecv",      "ncclBroadcast",
                                         "ncclBcast",     "ncclReduce",
                                         "ncclAllToAll",  "ncclAlltoAll",
                                         "ncclAllToAllv", "ncclGather",
                                         "ncclScatter",   NULL};
/* device-side communication entry points (cuco_tx glue and device/ launchers) */
static const char *const device_calls[] = {
    "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "bcast",
    "gather",     "scatter",        "put_signal", "send",       "recv",      NULL};
/* glue calls whose arguments are the communicated buffers */
static const char *const glue_calls[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all",
                                         "broadcast",  "bcast",          "gather",     "scatter",
                                         "send",       "recv",           NULL};

int cuco_tx_glue_comm_call(const char *name)
{
    static const char *const prefixes[] = {"checked_", "staged_", ""};
    for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
        size_t n = strlen(prefixes[p]);
        if (strncmp(name, prefixes[p], n) != 0)
            continue;
        for (size_t i = 0; glue_calls[i]; i++)
            if (!strcmp(name + n, glue_calls[i]))
                return 1;
    }
    return 0;
}

typedef struct code {
    const cuco_lex *lx;
    size_t *ix;
    size_t n;
} code;

static const cuco_tok *tk(const code *c, size_t i)
{
    return &c->lx->toks[c->ix[i]];
}
static int is(const code *c, size_t i, const char *s)
{
    return i < c->n && cuco_tok_is(c->lx, tk(c, i), s);
}
static int in(const code *c, size_t i, const char *const *l)
{
    for (; *l; l++)
        if (is(c, i, *l))
            return 1;
    return 0;
}
static int member(const code *c, size_t i)
{
    return i > 0 && (is(c, i - 1, ".") || is(c, i - 1, "->") || is(c, i - 1, "::"));
}

/* Words of a cast before an argument's buffer (`(void *)recvbuff`,
 * `static_cast<float *>(x)`): no buffer's name. */
static const char *const cast_words[] = {
    "void",   "const",  "volatile", "float",         "double",           "int",        "char",
    "long",   "short",  "unsigned", "signed",        "static_cast",      "const_cast", "size_t",
    "struct", "__half", "half",     "__nv_bfloat16", "reinterpret_cast", NULL};

/* Last identifier of the leading lvalue chain of each argument from..nargs-1
 * (the buffers, cast words skipped), appended to names. */

static int arg_bases(const code *c, size_t open, int from, int nargs, cuco_strlist *names)
{
    int d = 0, argi = 0;
    size_t j = open + 1;
    int want = from == 0; /* at the start of an argument */
    for (; j < c->n; j++) {
        if (is(c, j, "(") || is(c, j, "[")) {
            d++;
            continue;
        }
        if (is(c, j, ")") || is(c, j, "]")) {
            if (d-- == 0)
                break;
            continue;
        }
        if (d == 0 && is(c, j, ",")) {
            want = ++argi < nargs && argi >= from;
            continue;
        }
        if (want && tk(c, j)->kind == CUCO_TOK_IDENT && !in(c, j, cast_words)) {
            size_t e = j;
            while (e + 2 < c->n && (is(c, e + 1, ".") || is(c, e + 1, "->")) &&
                   tk(c, e + 2)->kind == CUCO_TOK_IDENT)
                e += 2;
            char *nm = cuco_strndup(c->lx->src + tk(c, e)->off, tk(c, e)->len);
            if (!nm || cuco_strlist_push(names, nm) != 0) {
                free(nm);
                return CUCO_ENOMEM;
            }
            free(nm);
            want = 0;
            j = e;
        } else if (want && !is(c, j, "&") && !is(c, j, "*")) {
            want = 0;
        }
    }
    return 0;
}

/* The tokens of the call whose name is at i, up to its closing ')', one
 * space apart (comments and layout do not count). Caller frees. */
static char *call_text(const code *c, size_t i)
{
    cuco_buf b = CUCO_BUF_INIT;
    int d = 0;
    for (size_t j = i; j < c->n; j++) {
        cuco_buf_printf(&b, "%s%.*s", j > i ? " " : "", (int)tk(c, j)->len,
                        c->lx->src + tk(c, j)->off);
        if (is(c, j, "("))
            d++;
        else if (is(c, j, ")") && --d == 0)
            break;
    }
    return cuco_buf_detach(&b);
}

static int is_copy(const code *c, size_t i)
{
    return (is(c, i, "cudaMemcpy") || is(c, i, "cudaMemcpyAsync")) && is(c, i + 1, "(") &&
           !(member(c, i) && !is(c, i - 1, "::"));
}

/* The device-to-device copies the seed itself makes, as call_text. */
static int seed_copies(const char *seed, cuco_strlist *out, cuco_err *e)
{
    cuco_lex lx;
    int rc = cuco_lex_run(&lx, seed, strlen(seed), e);
    if (rc != 0)
        return rc;
    code c = {&lx, malloc((lx.ntoks + 1) * sizeof(size_t)), 0};
    for (size_t i = 0; c.ix && i < lx.ntoks; i++)
        if (lx.toks[i].kind != CUCO_TOK_COMMENT && lx.toks[i].kind != CUCO_TOK_PREPROC)
            c.ix[c.n++] = i;
    for (size_t i = 0; c.ix && rc == 0 && i + 1 < c.n; i++) {
        if (!is_copy(&c, i))
            continue;
        char *t = call_text(&c, i);
        rc = t ? cuco_strlist_push(out, t) : CUCO_ENOMEM;
        free(t);
    }
    if (!c.ix)
        rc = CUCO_ENOMEM;
    free(c.ix);
    cuco_lex_free(&lx);
    return rc;
}

/* Whether the host call at byte off of text was left host NCCL on purpose
 * by the rules (CUCO_TX_KEPT_MARK right before it). */
static int kept_at(const char *text, size_t off)
{
    size_t n = strlen(CUCO_TX_KEPT_MARK);
    while (off > 0 && (text[off - 1] == ' ' || text[off - 1] == '\t'))
        off--;
    return off >= n && memcmp(text + off - n, CUCO_TX_KEPT_MARK, n) == 0;
}

static int listed(const cuco_strlist *l, const char *s, size_t n)
{
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->items[i]) == n && memcmp(l->items[i], s, n) == 0)
            return 1;
    return 0;
}

int cuco_transform_check(const char *file_name, const char *text, int *passed, cuco_tx_notes *notes,
                         cuco_err *e)
{
    return cuco_tx_check_seed(file_name, NULL, text, passed, notes, e);
}

int cuco_tx_check_seed(const char *file_name, const char *seed, const char *text, int *passed,
                       cuco_tx_notes *notes, cuco_err *e)
{
    (void)file_name;
    cuco_lex lx;
    cuco_strlist buffers = {NULL, 0}, own_copies = {NULL, 0};
    code c = {&lx, NULL, 0};
    size_t before = notes->n;
    int rc = seed ? seed_copies(seed, &own_copies, e) : 0;
    if (rc != 0 || (rc = cuco_lex_run(&lx, text, strlen(text), e)) != 0) {
        cuco_strlist_free(&own_copies);
        return rc;
    }
    c.ix = malloc((lx.ntoks + 1) * sizeof(size_t));
    if (!c.ix) {
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < lx.ntoks; i++) {
        const cuco_tok *t = &lx.toks[i];
        if (t->kind == CUCO_TOK_PREPROC) {
            for (const char *const *n = host_calls; *n; n++) {
                const char *hit = NULL;
                for (size_t k = 0; !hit && k + strlen(*n) < t->len; k++)
                    if (memcmp(text + t->off + k, *n, strlen(*n)) == 0 &&
                        text[t->off + k + strlen(*n)] == '(' &&
                        (k == 0 || !cuco_tx_ident_char(text[t->off + k - 1])) &&
                        !kept_at(text, t->off + k))
                        hit = *n;
                if (hit)
                    rc = cuco_tx_notes_add(notes, t->line, "error",
                                           "host collective %s in a preprocessor directive", hit);
            }
            continue;
        }
        if (t->kind != CUCO_TOK_COMMENT)
            c.ix[c.n++] = i;
    }
    int devcomm = 0, device_comm_calls = 0;
    for (size_t i = 0; i + 1 < c.n && rc == 0; i++) {
        const cuco_tok *t = tk(&c, i);
        if (t->kind != CUCO_TOK_IDENT)
            continue;
        size_t open = i + 1;
        if (is(&c, open, "<") && in(&c, i, device_calls)) { /* cuco::all_gather<P>(...) */
            int d = 0;
            for (; open < c.n; open++) {
                if (is(&c, open, "<"))
                    d++;
                else if (is(&c, open, ">") && --d == 0)
                    break;
                else if (is(&c, open, ">>") && (d -= 2) <= 0)
                    break;
                else if (is(&c, open, ";") || is(&c, open, "{"))
                    break;
            }
            open++;
        }
        if (!is(&c, open, "("))
            continue;
        if (in(&c, i, host_calls) && !member(&c, i) && !kept_at(text, t->off)) {
            rc = cuco_tx_notes_add(notes, t->line, "error", "host collective %.*s is still called",
                                   (int)t->len, text + t->off);
        } else if ((is(&c, i, "ncclDevCommCreate") || is(&c, i, "symm_create"))) {
            devcomm = 1;
        } else if (in(&c, i, device_calls) && i >= 2 && is(&c, i - 1, "::") &&
                   (is(&c, i - 2, "cuco_tx") || is(&c, i - 2, "cuco"))) {
            device_comm_calls++;
            /* the received buffer: the second argument, the only one of recv
             * and bcast; send receives nothing */
            int one = is(&c, i, "recv") || is(&c, i, "bcast");
            if (is(&c, i - 2, "cuco_tx") && in(&c, i, glue_calls) && !is(&c, i, "send"))
                rc = arg_bases(&c, open, one ? 0 : 1, one ? 1 : 2, &buffers);
        }
    }
    /* host copies of communicated buffers standing in for communication */
    for (size_t i = 0; i + 1 < c.n && rc == 0; i++) {
        const cuco_tok *t = tk(&c, i);
        if (member(&c, i) && !is(&c, i - 1, "::"))
            continue;
        if (is(&c, i, "cudaMemcpyPeer") || is(&c, i, "cudaMemcpyPeerAsync")) {
            rc = cuco_tx_notes_add(notes, t->line, "error",
                                   "%.*s copies between GPUs on the host path", (int)t->len,
                                   text + t->off);
            continue;
        }
        if (!(is(&c, i, "cudaMemcpy") || is(&c, i, "cudaMemcpyAsync")) || !is(&c, i + 1, "("))
            continue;
        /* Only a copy into a received buffer can stand in for receiving it:
         * packing a send buffer or unpacking a received one is local work,
         * and a copy the seed itself makes is the program's own. */
        int d = 0, dtod = 0, into = 0, first = 1;
        for (size_t j = i + 1; j < c.n; j++) {
            if (is(&c, j, "("))
                d++;
            else if (is(&c, j, ")") && --d == 0)
                break;
            if (d == 1 && is(&c, j, ","))
                first = 0;
            if (is(&c, j, "cudaMemcpyDeviceToDevice") || is(&c, j, "cudaMemcpyDefault"))
                dtod = 1;
            if (first && tk(&c, j)->kind == CUCO_TOK_IDENT &&
                listed(&buffers, text + tk(&c, j)->off, tk(&c, j)->len))
                into = 1;
        }
        if (dtod && into && own_copies.n > 0) {
            char *ct = call_text(&c, i);
            if (!ct) {
                rc = CUCO_ENOMEM;
                break;
            }
            for (size_t k = 0; k < own_copies.n && into; k++)
                into = strcmp(own_copies.items[k], ct) != 0;
            free(ct);
        }
        if (dtod && into)
            rc = cuco_tx_notes_add(notes, t->line, "error",
                                   "%.*s into a received buffer stands in for communication "
                                   "(a copy the seed does not make)",
                                   (int)t->len, text + t->off);
    }
    if (rc == 0 && !devcomm)
        rc = cuco_tx_notes_add(
            notes, 0, "error",
            "no device communicator is created (no ncclDevCommCreate or symm_create)");
    if (rc == 0 && device_comm_calls == 0)
        rc = cuco_tx_notes_add(notes, 0, "error", "no device-initiated communication call found");
    if (rc != 0 && !e->code)
        cuco_err_set(e, rc, "out of memory");
    *passed = rc == 0 && cuco_tx_notes_count(notes, "error") == 0;
    /* errors counted before this call are not ours */
    if (rc == 0 && *passed == 0) {
        size_t mine = 0;
        for (size_t i = before; i < notes->n; i++)
            mine += strcmp(notes->items[i].kind, "error") == 0;
        *passed = mine == 0;
    }
out:
    free(c.ix);
    cuco_strlist_free(&buffers);
    cuco_strlist_free(&own_copies);
    cuco_lex_free(&lx);
    return rc;
}
