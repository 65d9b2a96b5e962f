/* rules.c: the rule route of the fast path. Reads a host-driven program with
 * the analysis lexer, rewrites each NCCL collective / point-to-point call in
 * place into the cuco_tx glue (same arguments, so the program's own error
 * checks, streams and synchronisation stay valid), makes the allocations that
 * feed a collective symmetric, inserts device-communicator setup/teardown,
 * and puts the glue and its knobs into an EVOLVE-BLOCK. Anything it cannot
 * rewrite is reported with its line: a collective outside NCCL groups stays
 * host NCCL ("kept", marked for the static check), anything else refuses the
 * program as a whole.
 */
#include "cuco/transform.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/program.h"
#include "glue_knobs.h"
#include "tx_common.h"

/* ---- notes ---------------------------------------------------------------- */

int cuco_tx_notes_add(cuco_tx_notes *l, int line, const char *kind, const char *fmt, ...)
{
    cuco_tx_note *items = realloc(l->items, (l->n + 1) * sizeof(*items));
    if (!items)
        return CUCO_ENOMEM;
    l->items = items;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *kind_copy = cuco_strdup(kind);
    if (rc != 0 || !kind_copy) {
        cuco_buf_free(&b);
        free(kind_copy);
        return CUCO_ENOMEM;
    }
    l->items[l->n].line = line;
    l->items[l->n].kind = kind_copy;
    l->items[l->n].text = cuco_buf_detach(&b);
    l->n++;
    return 0;
}

void cuco_tx_notes_free(cuco_tx_notes *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].kind);
        free(l->items[i].text);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

size_t cuco_tx_notes_count(const cuco_tx_notes *l, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += strcmp(l->items[i].kind, kind) == 0;
    return n;
}

void cuco_tx_result_free(cuco_tx_result *r)
{
    free(r->program);
    r->program = NULL;
    cuco_tx_notes_free(&r->notes);
}

/* ---- token view ----------------------------------------------------------- */

/* The code tokens (comments and preprocessor lines left out) with their brace
 * depth, over one lexed text. */
typedef struct view {
    const char *src;
    cuco_lex lx;
    size_t *ix; /* code token -> lexer token */
    int *depth; /* brace depth before the token */
    int *scope; /* the same, namespace and extern "C" braces left out (0: file scope) */
    size_t n;
} view;

static const cuco_tok *T(const view *v, size_t i);

static int view_open(view *v, const char *src, cuco_err *e)
{
    memset(v, 0, sizeof(*v));
    v->src = src;
    int rc = cuco_lex_run(&v->lx, src, strlen(src), e);
    if (rc != 0)
        return rc;
    v->ix = malloc((v->lx.ntoks + 1) * sizeof(size_t));
    v->depth = malloc((v->lx.ntoks + 1) * sizeof(int));
    v->scope = malloc((v->lx.ntoks + 1) * sizeof(int));
    /* per open brace: 1 when it opens a namespace or an extern "C" block */
    char *ns = malloc(v->lx.ntoks + 1);
    if (!v->ix || !v->depth || !v->scope || !ns) {
        free(ns);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int d = 0, sc = 0;
    for (size_t i = 0; i < v->lx.ntoks; i++) {
        const cuco_tok *t = &v->lx.toks[i];
        if (t->kind == CUCO_TOK_COMMENT || t->kind == CUCO_TOK_PREPROC)
            continue;
        v->ix[v->n] = i;
        v->depth[v->n] = d;
        v->scope[v->n] = sc;
        v->n++;
        if (t->kind == CUCO_TOK_PUNCT && t->len == 1 && src[t->off] == '{') {
            /* "namespace {", "namespace a::b {", "extern "C" {" */
            size_t k = v->n - 1;
            while (
                k > 0 &&
                (T(v, k - 1)->kind == CUCO_TOK_IDENT || cuco_tok_is(&v->lx, T(v, k - 1), "::")) &&
                !cuco_tok_is(&v->lx, T(v, k - 1), "namespace"))
                k--;
            int is_ns = (k > 0 && cuco_tok_is(&v->lx, T(v, k - 1), "namespace")) ||
                        (v->n >= 3 && T(v, v->n - 2)->kind == CUCO_TOK_STRING &&
                         cuco_tok_is(&v->lx, T(v, v->n - 3), "extern"));
            ns[d] = (char)is_ns;
            d++;
            sc += !is_ns;
        } else if (t->kind == CUCO_TOK_PUNCT && t->len == 1 && src[t->off] == '}' && d > 0) {
            d--;
            sc -= !ns[d];
        }
    }
    free(ns);
    return 0;
}

static void view_close(view *v)
{
    cuco_lex_free(&v->lx);
    free(v->ix);
    free(v->depth);
    free(v->scope);
}

static const cuco_tok *T(const view *v, size_t i)
{
    return &v->lx.toks[v->ix[i]];
}
static int is(const view *v, size_t i, const char *s)
{
    return i < v->n && cuco_tok_is(&v->lx, T(v, i), s);
}
/* Whether tokens a and b spell the same text. */
static int same_text(const view *v, size_t a, size_t b)
{
    return T(v, a)->len == T(v, b)->len &&
           memcmp(v->src + T(v, a)->off, v->src + T(v, b)->off, T(v, a)->len) == 0;
}
static int is_ident(const view *v, size_t i)
{
    return i < v->n && T(v, i)->kind == CUCO_TOK_IDENT;
}
static size_t tok_end(const view *v, size_t i)
{
    return T(v, i)->off + T(v, i)->len;
}

/* Index of the token closing the bracket opened at i (n when unbalanced). */
static size_t match_close(const view *v, size_t i)
{
    int d = 0;
    for (size_t j = i; j < v->n; j++) {
        if (is(v, j, "(") || is(v, j, "[") || is(v, j, "{"))
            d++;
        else if (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")) {
            if (--d == 0)
                return j;
        }
    }
    return v->n;
}

/* Arguments of the call whose "(" is at open: [first, last] token ranges. */
typedef struct args {
    size_t first[16], last[16];
    int n; /* -1: more than 16 or empty argument */
    size_t close;
} args;

static void call_args(const view *v, size_t open, args *a)
{
    a->n = 0;
    a->close = match_close(v, open);
    if (a->close >= v->n || a->close == open + 1)
        return;
    size_t start = open + 1;
    int d = 0;
    for (size_t j = open + 1; j <= a->close; j++) {
        int at_end = j == a->close;
        if (!at_end && (is(v, j, "(") || is(v, j, "[") || is(v, j, "{")))
            d++;
        else if (!at_end && (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")))
            d--;
        if ((at_end || (d == 0 && is(v, j, ",")))) {
            if (a->n >= 16 || j == start) {
                a->n = -1;
                return;
            }
            a->first[a->n] = start;
            a->last[a->n] = j - 1;
            a->n++;
            start = j + 1;
        }
    }
}

static char *arg_text(const view *v, const args *a, int k)
{
    size_t s = T(v, a->first[k])->off;
    return cuco_strndup(v->src + s, tok_end(v, a->last[k]) - s);
}

/* The last identifier of the lvalue chain an argument starts with, after
 * casts and '&': "(void **)&s.gathered" -> gathered, "p.cache + off" -> cache,
 * "&buf[i]" -> buf, "ls[i].out" -> out, "ns::alloc" -> alloc. Returns the
 * token index or n. */
static size_t chain_last(const view *v, size_t first, size_t last)
{
    size_t j = first;
    while (j <= last) {
        if (is(v, j, "&") || is(v, j, "*")) {
            j++;
        } else if (is(v, j, "(")) {
            size_t c = match_close(v, j);
            if (c >= last)
                j++; /* a parenthesized expression: look inside */
            else if (c + 1 <= last &&
                     (is_ident(v, c + 1) || is(v, c + 1, "&") || is(v, c + 1, "(")))
                j = c + 1; /* a C cast */
            else
                j++;
        } else if (is(v, j, "static_cast") || is(v, j, "reinterpret_cast") ||
                   is(v, j, "const_cast")) {
            while (j <= last && !is(v, j, "("))
                j++;
            j++;
        } else {
            break;
        }
    }
    if (j > last || !is_ident(v, j))
        return v->n;
    /* a member of an array element is that member: "layers[i].out" -> out */
    size_t end = j;
    for (;;) {
        size_t k = end + 1;
        while (k <= last && is(v, k, "[")) {
            size_t c = match_close(v, k);
            if (c > last)
                break;
            k = c + 1;
        }
        if (k + 1 <= last &&
            (is(v, k, ".") || is(v, k, "->") || (k == end + 1 && is(v, k, "::"))) &&
            is_ident(v, k + 1)) {
            end = k + 1;
            continue;
        }
        break;
    }
    return end;
}

/* ---- edits ---------------------------------------------------------------- */

typedef struct edit {
    size_t off, len;
    char *text; /* owned */
    int wrap;   /* 1: its statement lines get EVOLVE-BLOCK markers (program without blocks) */
    size_t stmt_lo, stmt_hi; /* statement bytes, for wrap */
    long seq;                /* order among edits at the same offset */
} edit;

/* The sites a schedule rewrote: how many, and the last one's index. */
typedef struct sched_sites {
    size_t n;
    size_t last;
} sched_sites;

static void sched_sites_add(sched_sites *s, size_t site)
{
    s->n++;
    s->last = site;
}

/* Ends a schedule's parameter knob line: with one site, the parameter
 * matters only while that site's switch (PREFIX_<site>) is on, which the
 * search reads as " when PREFIX_<site>=1"; with several, any switch may
 * read it (conditions are 'and'), so it has none. */
static void site_switch_condition(cuco_buf *g, const sched_sites *s, const char *prefix)
{
    if (s->n == 1)
        cuco_buf_printf(g, " when %s_%zu=1", prefix, s->last);
    cuco_buf_putc(g, '\n');
}

typedef struct ctx {
    const char *file;
    view v;
    cuco_block *blocks;
    size_t nblocks;
    edit *edits;
    size_t nedits;
    cuco_tx_result *r;
    cuco_strlist symm_names; /* buffer names resolved to symmetric allocations */
    size_t *alloc_sites;     /* cudaMalloc tokens made symmetric */
    size_t nalloc;
    cuco_strlist comm_names; /* communicators of the rewritten calls (helper params resolved) */
    cuco_strlist comm_texts; /* each one as the call writes it ("g.tp"), for messages */
    int *comm_lines;         /* the line of each one's first rewritten call */
    size_t *fn_of;           /* per code token: its innermost function's name token, or n */
    size_t *sched_toks;      /* rewritten communication calls, in program order */
    int *sched_group;        /* the ncclGroupStart/End group it is in (1, 2, ...), 0: none */
    size_t nsched;
    cuco_buf knobs;          /* CUCO_EARLY_<site> knob lines for the glue */
    int gemm_lt;             /* some cublasLtMatmul goes through a schedule (CUCO_TX_GEMM_LT) */
    sched_sites splits;      /* all-gathers split by consumer_split_by_source (CUCO_SPLIT_CHUNKS) */
    size_t gemm_splits;      /* of them, those whose consumer is a GEMM (not a kernel) */
    sched_sites attn_splits; /* of them, those whose consumer is a kernel declared attention */
    sched_sites recv_splits; /* receives consumed piece by piece (consume_as_received) */
    int attn_lends;          /* of those, with their queries declared (CUCO_ATTN_LEND) */
    const cuco_semantic *sem; /* the manifest's declared semantics (n_sem) */
    size_t n_sem;
    sched_sites produces; /* all-reduces fed by producer_split (CUCO_PSPLIT_PIECES) */
    size_t gemm_produces; /* of them, those whose producer is a GEMM (not a kernel) */
    int send_made;        /* some send goes as its buffer is made (CUCO_P2P_PIECES) */
    cuco_glue_use glue;   /* what the rewritten calls read of the glue (glue_knobs.h) */
    size_t n_gathers;     /* rewritten all-gathers */
    size_t *split_gemms;  /* byte offsets of the GEMMs the consumer split rewrote */
    size_t nsplit_gemms;
    int nccl_mem;       /* some ncclMemAlloc became symmetric (symm_mem_alloc / _free glue) */
    int staged;         /* some all-reduce on managed memory is staged (staged_all_reduce glue) */
    int stage_call;     /* the call being rewritten is one of them */
    int comm_creations; /* ncclCommInitRank / InitRankConfig / Split calls in the file */
    int comm_once;      /* one of them sets up the device communicator, in a function run once */
    int setup_line;     /* the line of the first communicator setup inserted (0: none) */
    int capture_line;   /* the first stream capture into a CUDA graph (0: none) */
    char *device_comm;  /* with calls on several communicators, the one the device calls
                         * use (the others' collectives stay host NCCL); NULL: one or none */
    size_t group_open;  /* the outermost ncclGroupStart of the group being scanned */
} ctx;

static int line_of(const ctx *c, size_t i)
{
    return T(&c->v, i)->line;
}

static int in_block(const ctx *c, size_t off)
{
    for (size_t b = 0; b < c->nblocks; b++)
        if (off >= c->blocks[b].body_start && off < c->blocks[b].body_end)
            return 1;
    return 0;
}

static int refuse(ctx *c, int line, const char *fmt, const char *a, const char *b)
{
    c->r->refused = 1;
    return cuco_tx_notes_add(&c->r->notes, line, "refused", fmt, a ? a : "", b ? b : "");
}

#define KEPT_MARK CUCO_TX_KEPT_MARK " "

static int add_edit(ctx *c, size_t tok_for_stmt, size_t off, size_t len, const char *text);

static int deferred_call_line(const ctx *c);

/* A call the device path cannot take stays host NCCL: a "kept" note gives
 * the reason (fmt, a, b as for refuse), and the caller marks the call
 * (keep_call). In a group (in_group), cuco_tx::group_start/end issue no
 * ncclGroupStart: the kept call runs where it stands, as its own NCCL
 * operation, after the group's earlier members. A group whose
 * point-to-point calls (or collectives made of them) the device defers to
 * its end is refused: a kept call would then run before them, which the
 * peers need not match. */
static int keep_or_refuse(ctx *c, int line, int in_group, const char *fmt, const char *a,
                          const char *b)
{
    char *why = cuco_sprintf(fmt, a ? a : "", b ? b : "");
    if (!why)
        return CUCO_ENOMEM;
    int rc, deferred = in_group ? deferred_call_line(c) : 0;
    if (deferred) {
        c->r->refused = 1;
        rc = cuco_tx_notes_add(&c->r->notes, line, "refused",
                               "%s; inside ncclGroupStart/ncclGroupEnd with the point-to-point "
                               "call of line %d, which runs at the group's end on the device, it "
                               "cannot stay host NCCL",
                               why, deferred);
    } else {
        rc = cuco_tx_notes_add(&c->r->notes, line, "kept", "%s; it stays host NCCL%s", why,
                               in_group ? " (inside ncclGroupStart/ncclGroupEnd: issued where it "
                                          "stands, after the group's earlier calls)"
                                        : "");
    }
    free(why);
    return rc;
}

/* Whether a "kept" note was added since the count was `before`. */
static int kept_since(const ctx *c, size_t before)
{
    return cuco_tx_notes_count(&c->r->notes, "kept") > before;
}

/* KEPT_MARK before the kept call at byte at of token tok; wrap 0: no
 * EVOLVE-BLOCK markers around its statement (a macro's body). */
static int keep_mark(ctx *c, size_t tok, size_t at, int wrap)
{
    int rc = add_edit(c, tok, at, 0, KEPT_MARK);
    if (rc == 0)
        c->edits[c->nedits - 1].wrap &= wrap;
    return rc;
}

/* Marks the kept call at token tok (its name, then "("). In a group the call
 * goes through cuco_tx::kept_in_group, which orders it after the group's
 * earlier members on their streams: "ncclX(args)" becomes
 * "cuco_tx::kept_in_group(ncclX, args)". */
static int keep_call(ctx *c, size_t tok, int group)
{
    const cuco_tok *t = T(&c->v, tok);
    if (!group || tok + 1 >= c->v.n)
        return keep_mark(c, tok, t->off, 1);
    const cuco_tok *open = T(&c->v, tok + 1);
    char *to =
        cuco_sprintf("%scuco_tx::kept_in_group(%.*s, ", KEPT_MARK, (int)t->len, c->v.src + t->off);
    int rc = to ? add_edit(c, tok, t->off, open->off + 1 - t->off, to) : CUCO_ENOMEM;
    free(to);
    return rc;
}

/* Whether the file calls ncclGroupStart anywhere (a call that is not seen
 * as a call, through a pointer or a macro, may then run inside a group). */
static int has_group_calls(const view *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (is(v, i, "ncclGroupStart"))
            return 1;
    return 0;
}

/* Whether token i follows ".", "->" or "::" (a member's or a namespace's
 * name, not the NCCL function's). */
static int qualified(const view *v, size_t i)
{
    return i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"));
}

static int is_p2p_name(const char *name)
{
    return !strcmp(name, "ncclSend") || !strcmp(name, "ncclRecv");
}

/* Statement extent around token i: after the previous ';', '{' or '}' to the
 * next ';' at the same nesting. */
static void stmt_span(const ctx *c, size_t i, size_t *lo, size_t *hi)
{
    const view *v = &c->v;
    size_t s = i;
    while (s > 0 && !is(v, s - 1, ";") && !is(v, s - 1, "{") && !is(v, s - 1, "}"))
        s--;
    size_t e2 = i;
    int d = 0;
    while (e2 < v->n) {
        if (is(v, e2, "(") || is(v, e2, "["))
            d++;
        else if (is(v, e2, ")") || is(v, e2, "]"))
            d--;
        else if (d <= 0 && (is(v, e2, ";") || is(v, e2, "{") || is(v, e2, "}")))
            break;
        e2++;
    }
    if (e2 >= v->n)
        e2 = v->n - 1;
    *lo = T(v, s)->off;
    *hi = tok_end(v, e2);
}

static int add_edit(ctx *c, size_t tok_for_stmt, size_t off, size_t len, const char *text)
{
    edit *ed = realloc(c->edits, (c->nedits + 1) * sizeof(*ed));
    if (!ed)
        return CUCO_ENOMEM;
    c->edits = ed;
    edit *x = &c->edits[c->nedits];
    x->off = off;
    x->len = len;
    x->text = cuco_strdup(text);
    if (!x->text)
        return CUCO_ENOMEM;
    x->wrap = c->nblocks == 0;
    x->seq = (long)c->nedits;
    stmt_span(c, tok_for_stmt, &x->stmt_lo, &x->stmt_hi);
    c->nedits++;
    return 0;
}

/* An edit of token i must be inside the blocks when the program has some. */
static int editable(ctx *c, size_t i, const char *what)
{
    if (c->nblocks == 0 || in_block(c, T(&c->v, i)->off))
        return 1;
    refuse(c, line_of(c, i),
           "%s is outside the EVOLVE-BLOCKs (frozen code): rewriting it would edit the harness%s",
           what, NULL);
    return 0;
}

/* ---- symmetric buffers ---------------------------------------------------- */

static int name_seen(const cuco_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i], s) == 0)
            return 1;
    return 0;
}

static int alloc_seen(const ctx *c, size_t tok)
{
    for (size_t i = 0; i < c->nalloc; i++)
        if (c->alloc_sites[i] == tok)
            return 1;
    return 0;
}

static int add_alloc(ctx *c, size_t tok, const char *why)
{
    if (alloc_seen(c, tok))
        return 1;
    if (!editable(c, tok, "the allocation of a communicated buffer"))
        return 0;
    size_t *s = realloc(c->alloc_sites, (c->nalloc + 1) * sizeof(*s));
    if (!s)
        return -1;
    c->alloc_sites = s;
    c->alloc_sites[c->nalloc++] = tok;
    const cuco_tok *t = T(&c->v, tok);
    /* ncclMemAlloc memory can back a window already: it becomes one of the
     * runtime's windows, still answering ncclResult_t */
    int nccl = is(&c->v, tok, "ncclMemAlloc");
    const char *to = nccl ? "cuco_tx::symm_mem_alloc" : "cuco_tx::symm_malloc";
    c->nccl_mem |= nccl;
    if (add_edit(c, tok, t->off, t->len, to) != 0)
        return -1;
    cuco_tx_notes_add(&c->r->notes, t->line, "symmetric", "%.*s -> %s (symmetric window) for %s",
                      (int)t->len, c->v.src + t->off, to, why);
    return 1;
}

/* Keywords and specifiers that may stand before a call or a '(' without
 * making it a declaration or a definition. */
static int is_keyword(const view *v, size_t i)
{
    static const char *const kw[] = {"return",
                                     "else",
                                     "do",
                                     "case",
                                     "throw",
                                     "co_return",
                                     "co_await",
                                     "if",
                                     "for",
                                     "while",
                                     "switch",
                                     "catch",
                                     "sizeof",
                                     "decltype",
                                     "alignof",
                                     "static_assert",
                                     "__launch_bounds__",
                                     NULL};
    for (const char *const *k = kw; *k; k++)
        if (is(v, i, *k))
            return 1;
    return 0;
}

/* The '{' of a function body when the parameter list opened at open is a
 * definition's ("f(int a) {", "g() const noexcept {", "h(int a) : a_(a) {"),
 * else 0. */
static size_t function_body(const view *v, size_t open)
{
    size_t j = match_close(v, open);
    if (j >= v->n)
        return 0;
    j++;
    while (j < v->n && (is(v, j, "const") || is(v, j, "noexcept") || is(v, j, "override") ||
                        is(v, j, "final") || is(v, j, "mutable")))
        j++;
    if (is(v, j, ":")) { /* constructor initializers: "a_(a), b_{b} {" */
        for (j++; j < v->n && is_ident(v, j) && (is(v, j + 1, "(") || is(v, j + 1, "{"));) {
            j = match_close(v, j + 1) + 1;
            if (is(v, j, ","))
                j++;
            else
                break;
        }
    }
    return j < v->n && is(v, j, "{") ? j : 0;
}

/* The '(' of a call of the name at i, also with explicit template arguments
 * ("f<T>(x)", "ns::g<float, 4>(x)"); n when i is not called. */
static size_t call_open(const view *v, size_t i)
{
    if (is(v, i + 1, "("))
        return i + 1;
    if (!is(v, i + 1, "<"))
        return v->n;
    int d = 0;
    for (size_t j = i + 1; j < v->n && j < i + 64; j++) {
        if (is(v, j, "<"))
            d++;
        else if (is(v, j, ">"))
            d--;
        else if (is(v, j, ">>"))
            d -= 2;
        else if (is(v, j, ";") || is(v, j, "{") || is(v, j, "}") || is(v, j, "<<<") ||
                 is(v, j, "&&") || is(v, j, "||"))
            return v->n;
        if (d <= 0)
            return d == 0 && is(v, j + 1, "(") ? j + 1 : v->n;
    }
    return v->n;
}

/* The '(' of the parameter list of the function or lambda whose name is at
 * name_tok ("f(int a)", "auto f = [&](float *p)"), or n. */
static size_t def_params(const view *v, size_t name_tok)
{
    if (is(v, name_tok + 1, "("))
        return name_tok + 1;
    if (is(v, name_tok + 1, "=") && is(v, name_tok + 2, "[")) {
        size_t c = match_close(v, name_tok + 2);
        if (c + 1 < v->n && is(v, c + 1, "("))
            return c + 1;
    }
    return v->n;
}

/* Allocations in the body of function fname (a pointer-returning allocator). */
static int resolve_function(ctx *c, const char *fname, const char *why)
{
    const view *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!cuco_tok_is(&v->lx, T(v, i), fname) || !is(v, i + 1, "("))
            continue;
        size_t body = function_body(v, i + 1);
        if (!body)
            continue; /* a call or prototype, not the definition */
        size_t body_end = match_close(v, body);
        for (size_t j = body + 1; j < body_end; j++) {
            if ((is(v, j, "cudaMalloc") || is(v, j, "cudaMallocAsync") ||
                 is(v, j, "ncclMemAlloc")) &&
                is(v, j + 1, "(")) {
                int rc = add_alloc(c, j, why);
                if (rc < 0)
                    return rc;
                found += rc > 0;
            }
        }
    }
    return found;
}

static int resolve_buffer(ctx *c, const char *name, size_t at, const char *why, int depth);

/* Index of the parameter called `name` in the parameter list opened at
 * token open, or -1 ("float *dst", "const T *x = nullptr", "float v[]"). */
static int param_index(const view *v, size_t open, const char *name)
{
    args p;
    call_args(v, open, &p);
    for (int k = 0; k < p.n; k++) {
        size_t last = p.last[k];
        for (size_t j = p.first[k]; j <= p.last[k]; j++)
            if (is(v, j, "=")) {
                last = j - 1;
                break;
            }
        while (last > p.first[k] && is(v, last, "]")) {
            size_t j = last;
            while (j > p.first[k] && !is(v, j, "["))
                j--;
            last = j - 1;
        }
        if (last > p.first[k] && is_ident(v, last) && cuco_tok_is(&v->lx, T(v, last), name))
            return k;
    }
    return -1;
}

/* Whether the function whose name is at token fn is used anywhere in the
 * file but its own definition and declarations (called, or passed on). */
static int has_caller(const ctx *c, size_t fn)
{
    const view *v = &c->v;
    for (size_t j = 0; j + 1 < v->n; j++) {
        if (j == fn || !same_text(v, j, fn))
            continue;
        size_t open = call_open(v, j);
        if (open < v->n &&
            (function_body(v, open) || (j > 0 && is_ident(v, j - 1) && !is_keyword(v, j - 1))))
            continue; /* another definition or a prototype */
        return 1;
    }
    return 0;
}

/* A buffer that is a parameter of a function (at file or namespace scope) is
 * the argument its callers pass: "static void exchange(float *dst, ...)"
 * called as "exchange(nxt, ...)" resolves dst through nxt. */
static int resolve_params(ctx *c, const char *name, size_t scope_fn, const char *why, int depth)
{
    const view *v = &c->v;
    int found = 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        size_t open = is_ident(v, i) && !is_keyword(v, i) ? def_params(v, i) : v->n;
        if (open >= v->n || !function_body(v, open))
            continue; /* not a definition of a function or a named lambda */
        if (scope_fn < v->n && i != scope_fn)
            continue; /* a name declared in a function is a parameter of that function only */
        int k = param_index(v, open, name);
        if (k < 0)
            continue;
        for (size_t j = 0; j + 1 < v->n; j++) {
            if (j == i || T(v, j)->kind != CUCO_TOK_IDENT || !same_text(v, j, i))
                continue;
            size_t call = call_open(v, j);
            /* other declarations ("void exchange(") are not calls; member calls are
             * ("comm.all_reduce(buf, n)" of a method defined in a class) */
            if (call >= v->n || function_body(v, call) ||
                (j > 0 && is_ident(v, j - 1) && !is_keyword(v, j - 1)))
                continue;
            args a;
            call_args(v, call, &a);
            if (a.n <= k)
                continue;
            size_t last = chain_last(v, a.first[k], a.last[k]);
            /* a caller's own variable of the same name is another variable */
            if (last >= v->n || (cuco_tok_is(&v->lx, T(v, last), name) &&
                                 (scope_fn >= v->n || c->fn_of[last] == scope_fn)))
                continue;
            char *arg = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
            if (!arg)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, arg, last, why, depth + 1);
            free(arg);
            if (rc < 0)
                return rc;
            found += rc;
        }
    }
    return found;
}

/* The allocation(s) behind the value of the expression starting at token
 * rs (up to ';' or ',' at its level): a buffer name or an allocator call. */
static int resolve_rhs(ctx *c, size_t rs, const char *why, int depth)
{
    const view *v = &c->v;
    size_t re = rs;
    int d = 0;
    while (re < v->n) {
        if (is(v, re, "(") || is(v, re, "[") || is(v, re, "{"))
            d++;
        else if (is(v, re, ")") || is(v, re, "]") || is(v, re, "}")) {
            if (--d < 0)
                break;
        } else if (d == 0 && (is(v, re, ";") || is(v, re, ",")))
            break;
        re++;
    }
    if (re == rs || is(v, rs, "nullptr") || is(v, rs, "NULL") || T(v, rs)->kind == CUCO_TOK_NUMBER)
        return 0;
    size_t base = chain_last(v, rs, re - 1);
    if (base >= v->n)
        return 0;
    char *bname = cuco_strndup(v->src + T(v, base)->off, T(v, base)->len);
    if (!bname)
        return CUCO_ENOMEM;
    int rc;
    size_t after = base + 1;
    if (after < re && is(v, after, "<")) { /* alloc_fn<T>(...) */
        int d2 = 0;
        for (; after < re; after++) {
            if (is(v, after, "<"))
                d2++;
            else if (is(v, after, ">") && --d2 == 0)
                break;
            else if (is(v, after, ">>") && (d2 -= 2) <= 0)
                break;
        }
        after++;
    }
    if (after < re && is(v, after, "(") && base == chain_last(v, base, base))
        rc = resolve_function(c, bname, why); /* name = (T *)alloc_fn(...) */
    else
        rc = resolve_buffer(c, bname, base, why, depth + 1);
    free(bname);
    return rc;
}

/* The token after the brackets starting at i ("[N][M]"), or n. */
static size_t after_brackets(const view *v, size_t i)
{
    while (i < v->n && is(v, i, "["))
        i = match_close(v, i) + 1;
    return i < v->n ? i : v->n;
}

/* The table name before "[...] = {" whose '{' is at brace, or n. */
static size_t table_name(const view *v, size_t brace)
{
    size_t j = brace - 1; /* the '=' */
    while (j > 0 && is(v, j - 1, "]")) {
        int d = 0;
        for (j--; j > 0; j--) {
            if (is(v, j, "]"))
                d++;
            else if (is(v, j, "[") && --d == 0)
                break;
        }
    }
    return j > 0 && is_ident(v, j - 1) ? j - 1 : v->n;
}

/* An array initializer "{a, b, ...}" opened at brace. With member NULL:
 * resolves every element (the table holds those buffers). With a member:
 * when an element is its address ("&t->member"), the table is one of
 * pointers to pointers, and each store through it ("*(tab[i]) = p",
 * "*tab[i] = p") sets the member: resolves what is stored. */
static int resolve_table(ctx *c, size_t brace, const char *member, const char *why, int depth)
{
    const view *v = &c->v;
    args a;
    call_args(v, brace, &a);
    int found = 0;
    if (!member) {
        for (int k = 0; k < a.n; k++) {
            if (is(v, a.first[k], "&"))
                continue;
            size_t last = chain_last(v, a.first[k], a.last[k]);
            if (last >= v->n)
                continue;
            char *el = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
            int rc = el ? resolve_buffer(c, el, last, why, depth + 1) : CUCO_ENOMEM;
            free(el);
            if (rc < 0)
                return rc;
            found += rc;
        }
        return found;
    }
    int holds = 0;
    for (int k = 0; k < a.n && !holds; k++) {
        size_t last = chain_last(v, a.first[k], a.last[k]);
        holds = is(v, a.first[k], "&") && last < v->n && cuco_tok_is(&v->lx, T(v, last), member);
    }
    size_t tab = table_name(v, brace);
    if (!holds || tab >= v->n)
        return 0;
    for (size_t j = 0; j + 2 < v->n; j++) {
        if (!is(v, j, "*"))
            continue;
        size_t t = j + 1, paren = is(v, t, "(");
        t += paren;
        if (!is_ident(v, t) || !same_text(v, t, tab) || !is(v, t + 1, "["))
            continue;
        size_t e = after_brackets(v, t + 1);
        if (paren && is(v, e, ")"))
            e++;
        if (!is(v, e, "="))
            continue;
        int rc = resolve_rhs(c, e + 1, why, depth);
        if (rc < 0)
            return rc;
        found += rc;
    }
    return found;
}

/* ---- scopes: a name is the variable of the function that declares it ------ */

static int declares(const view *v, size_t i);

/* Fills c->fn_of: for every code token the name token of the innermost
 * function definition (or named lambda) holding it, n at file scope. */
static int scope_map(ctx *c)
{
    const view *v = &c->v;
    if (c->fn_of)
        return 0;
    c->fn_of = malloc((v->n + 1) * sizeof(*c->fn_of));
    if (!c->fn_of)
        return CUCO_ENOMEM;
    for (size_t i = 0; i <= v->n; i++)
        c->fn_of[i] = v->n;
    for (size_t f = 0; f + 1 < v->n; f++) {
        size_t open = is_ident(v, f) && !is_keyword(v, f) ? def_params(v, f) : v->n;
        size_t body = open < v->n ? function_body(v, open) : 0;
        if (!body)
            continue;
        size_t end = match_close(v, body);
        /* later (inner) definitions overwrite their outer function's tokens */
        for (size_t t = open; t <= end && t < v->n; t++)
            c->fn_of[t] = f;
    }
    return 0;
}

/* Whether the name at token i is declared there (declares), a name after a
 * ',' only in a declaration list ("float *a = x, *b;"), not in the
 * arguments of a call or the elements of an initializer ("f(a, b)",
 * "{a, b}"): the statement it is in must start with a type. */
static int declares_variable(const view *v, size_t i)
{
    if (!declares(v, i))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (is(v, p, "*") || is(v, p, "&")))
        p--;
    if (!is(v, p, ","))
        return 1;
    size_t k = i;
    while (k > 0) {
        size_t q = k - 1;
        if (is(v, q, ")") || is(v, q, "]") || is(v, q, "}")) {
            int d = 0; /* skip the group back to its opener */
            for (; q > 0; q--) {
                if (is(v, q, ")") || is(v, q, "]") || is(v, q, "}"))
                    d++;
                else if ((is(v, q, "(") || is(v, q, "[") || is(v, q, "{")) && --d == 0)
                    break;
            }
            k = q;
            continue;
        }
        if (is(v, q, "(") || is(v, q, "[") || is(v, q, "{") || is(v, q, ";") || is(v, q, ":"))
            break;
        k = q;
    }
    return is_ident(v, k) && !is_keyword(v, k) &&
           (is_ident(v, k + 1) || is(v, k + 1, "*") || is(v, k + 1, "&") || is(v, k + 1, "<") ||
            is(v, k + 1, "::"));
}

/* The scope of the name used at token at: the tokens [*lo, *hi) of the
 * innermost function around it that declares the name (a local or a
 * parameter), with its name token in *fn; the whole file and *fn = n for a
 * name no enclosing function declares (a global, a member). Two functions
 * with a variable of the same name (a reference solver beside the
 * distributed one) are two buffers. */
static void name_scope(const ctx *c, const char *name, size_t at, size_t *lo, size_t *hi,
                       size_t *fn, int *param)
{
    const view *v = &c->v;
    *lo = 0;
    *hi = v->n;
    *fn = v->n;
    *param = 0;
    size_t nl = strlen(name);
    for (size_t f = at < v->n ? c->fn_of[at] : v->n; f < v->n; f = c->fn_of[f]) {
        size_t open = def_params(v, f), end = match_close(v, function_body(v, open));
        for (size_t t = open; t < end && t < v->n; t++) {
            if (T(v, t)->len != nl || memcmp(v->src + T(v, t)->off, name, nl) != 0 ||
                !declares_variable(v, t))
                continue;
            *lo = open;
            *hi = end + 1;
            *fn = f;
            *param = t < function_body(v, open);
            return;
        }
    }
}

/* Whether the name at token i, followed by '=', is dereferenced there
 * ("*p = v", "*s->p = v", "*(s.p) = v"): a store into the buffer, not a new
 * value of the pointer. */
static int stores_through(const view *v, size_t i)
{
    size_t s = i;
    while (s >= 2 && (is(v, s - 1, "->") || is(v, s - 1, ".")) && is_ident(v, s - 2))
        s -= 2;
    if (s > 0 && is(v, s - 1, "(") && is(v, i + 1, ")"))
        s--;
    if (s == 0 || !is(v, s - 1, "*"))
        return 0;
    /* after ';', '{', '}', ')' or '(' the '*' dereferences; after a type
     * ("float *p = v") or a ',' of a declaration list it declares */
    return s < 2 || is(v, s - 2, ";") || is(v, s - 2, "{") || is(v, s - 2, "}") ||
           is(v, s - 2, ")") || is(v, s - 2, "(");
}

/* The allocations behind name found in tokens [lo, hi): its cudaMalloc,
 * what it is assigned or swapped with, the tables that hold it. */
static int resolve_range(ctx *c, const char *name, size_t lo, size_t hi, const char *why, int depth)
{
    const view *v = &c->v;
    int found = 0;
    for (size_t i = lo; i + 1 < hi; i++) {
        if ((is(v, i, "cudaMalloc") || is(v, i, "cudaMallocAsync") || is(v, i, "ncclMemAlloc")) &&
            is(v, i + 1, "(")) {
            args a;
            call_args(v, i + 1, &a);
            if (a.n < 1)
                continue;
            size_t last = chain_last(v, a.first[0], a.last[0]);
            if (last < v->n && cuco_tok_is(&v->lx, T(v, last), name)) {
                int rc = add_alloc(c, i, why);
                if (rc < 0)
                    return rc;
                found += rc > 0;
            }
            continue;
        }
        /* swap(a, b) (std::swap, thrust::swap ...): a double buffer whose halves
         * trade places; each half may end up in the other's role */
        if (is(v, i, "swap") && is(v, i + 1, "(")) {
            args a;
            call_args(v, i + 1, &a);
            if (a.n != 2)
                continue;
            size_t x = chain_last(v, a.first[0], a.last[0]),
                   y = chain_last(v, a.first[1], a.last[1]);
            size_t other = v->n;
            if (x < v->n && cuco_tok_is(&v->lx, T(v, x), name))
                other = y;
            else if (y < v->n && cuco_tok_is(&v->lx, T(v, y), name))
                other = x;
            if (other >= v->n)
                continue;
            char *oname = cuco_strndup(v->src + T(v, other)->off, T(v, other)->len);
            if (!oname)
                return CUCO_ENOMEM;
            int rc = resolve_buffer(c, oname, other, why, depth + 1);
            free(oname);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* "T *name[] = {a, b}": a table of pointers is each buffer it holds */
        if (cuco_tok_is(&v->lx, T(v, i), name) && is(v, i + 1, "[")) {
            size_t eq = after_brackets(v, i + 1);
            if (is(v, eq, "=") && is(v, eq + 1, "{")) {
                int rc = resolve_table(c, eq + 1, NULL, why, depth);
                if (rc < 0)
                    return rc;
                found += rc;
            }
            continue;
        }
        /* "T **tab[] = {&s->a, &s->b};" then "*(tab[i]) = p;": name is set through the table */
        if (is(v, i, "=") && is(v, i + 1, "{") && i > 0 && is(v, i - 1, "]")) {
            int rc = resolve_table(c, i + 1, name, why, depth);
            if (rc < 0)
                return rc;
            found += rc;
            continue;
        }
        /* name = RHS;  (not ==, not a declaration of a function parameter, not
         * a store through the pointer: "*s->name = v") */
        if (!cuco_tok_is(&v->lx, T(v, i), name) || !is(v, i + 1, "=") || stores_through(v, i))
            continue;
        int rc = resolve_rhs(c, i + 2, why, depth);
        if (rc < 0)
            return rc;
        found += rc;
    }
    return found;
}

/* Finds the allocation(s) behind buffer name, used at token at, in the scope
 * of the variable it names (name_scope); returns how many were made
 * symmetric (0: none found), negative on memory failure. */
static int resolve_buffer(ctx *c, const char *name, size_t at, const char *why, int depth)
{
    const view *v = &c->v;
    if (depth > 8)
        return 0;
    if (scope_map(c) != 0)
        return CUCO_ENOMEM;
    size_t lo, hi, fn;
    int param;
    name_scope(c, name, at, &lo, &hi, &fn, &param);
    /* each variable is resolved once: "buf" of two functions is two variables */
    char *key = cuco_sprintf("%s@%zu", name, fn);
    if (!key)
        return CUCO_ENOMEM;
    int seen = name_seen(&c->symm_names, key);
    int pushed = seen ? 0 : cuco_strlist_push(&c->symm_names, key);
    free(key);
    if (seen || pushed != 0)
        return pushed != 0 ? CUCO_ENOMEM : 1;
    /* the plain name too, for the frozen cudaFree check */
    if (!name_seen(&c->symm_names, name) && cuco_strlist_push(&c->symm_names, name) != 0)
        return CUCO_ENOMEM;
    int found = resolve_range(c, name, lo, hi, why, depth);
    if (found < 0)
        return found;
    int rc = resolve_params(c, name, fn, why, depth);
    if (rc < 0)
        return rc;
    found += rc;
    if (found == 0 && param && !has_caller(c, fn)) {
        /* a parameter of a function nothing here calls: the same name's
         * allocations in the rest of the file are a guess, said in the report */
        found = resolve_range(c, name, 0, v->n, why, depth);
        if (found > 0)
            cuco_tx_notes_add(&c->r->notes, T(v, fn)->line, "note",
                              "guessed: '%s' of %.*s (which no function of this file calls) is "
                              "the buffer of the same name allocated elsewhere in the file",
                              name, (int)T(v, fn)->len, v->src + T(v, fn)->off);
    }
    return found;
}

static int in_list(const char *const *l, const view *v, size_t i);

/* The first call of another allocator (managed, pooled, host memory...)
 * whose first argument names `name`; its token index, or n. */
static size_t other_allocation(const ctx *c, const char *name)
{
    static const char *const others[] = {"cudaMallocManaged",
                                         "cudaMallocFromPoolAsync",
                                         "cudaMallocHost",
                                         "cudaHostAlloc",
                                         "cudaMallocPitch",
                                         "cuMemAlloc",
                                         NULL};
    const view *v = &c->v;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!is(v, i + 1, "(") || !in_list(others, v, i))
            continue;
        args a;
        call_args(v, i + 1, &a);
        if (a.n < 1)
            continue;
        size_t last = chain_last(v, a.first[0], a.last[0]);
        if (last < v->n && cuco_tok_is(&v->lx, T(v, last), name))
            return i;
    }
    return v->n;
}

/* The name token of the innermost function definition (or named lambda)
 * whose body holds token i, or n (file scope). */
static size_t enclosing_function(const view *v, size_t i)
{
    size_t best = v->n;
    for (size_t f = 0; f + 1 < i; f++) {
        size_t open = is_ident(v, f) && !is_keyword(v, f) ? def_params(v, f) : v->n;
        if (open >= v->n)
            continue;
        size_t body = function_body(v, open);
        if (body && body < i && match_close(v, body) > i)
            best = f;
    }
    return best;
}

/* Adds the communicator named by tokens first..last of a call inside the
 * function whose name is at fn: a parameter of a helper stands for what its
 * callers pass (four levels), so "exchange(comm)" called with world and with
 * tp names both. */
static int comm_collect(ctx *c, size_t first, size_t last, size_t fn, int line, int depth)
{
    const view *v = &c->v;
    /* "comms[i]": an element of an array of communicators, one per GPU of this
     * process (several_devices guards their number); the array is one name */
    size_t base = chain_last(v, first, last);
    if (base >= v->n || (base < last && is(v, base + 1, "(")))
        return 0; /* not a name (an accessor "ctx.comm()"): unknown, not counted */
    char *name = cuco_strndup(v->src + T(v, base)->off, T(v, base)->len);
    if (!name)
        return CUCO_ENOMEM;
    /* a copy made once ("ncclComm_t comm = g.world;") is what it copies */
    size_t copy = v->n;
    int copies = 0;
    for (size_t i = 0; depth < 4 && i + 2 < v->n; i++) {
        if (!cuco_tok_is(&v->lx, T(v, i), name) || !is(v, i + 1, "=") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        size_t e = i + 2;
        while (e < v->n && (is_ident(v, e) || is(v, e, ".") || is(v, e, "->") || is(v, e, "*")))
            e++;
        if (is(v, i + 2, "nullptr") || is(v, i + 2, "NULL"))
            continue; /* an initial empty value */
        copies++;
        if (is(v, e, ";") && e > i + 2)
            copy = i + 2;
    }
    if (copies == 1 && copy < v->n) {
        size_t e = copy;
        while (!is(v, e + 1, ";"))
            e++;
        free(name);
        return comm_collect(c, copy, e, fn, line, depth + 1);
    }
    int k = fn < v->n && depth < 4 ? param_index(v, def_params(v, fn), name) : -1;
    int rc = 0, callers = 0;
    for (size_t j = 0; k >= 0 && j + 1 < v->n && rc == 0; j++) {
        if (j == fn || !same_text(v, j, fn))
            continue;
        size_t open = call_open(v, j);
        if (open >= v->n || function_body(v, open) ||
            (j > 0 && is_ident(v, j - 1) && !is_keyword(v, j - 1)))
            continue;
        args a;
        call_args(v, open, &a);
        if (a.n <= k)
            continue;
        callers++;
        rc = comm_collect(c, a.first[k], a.last[k], enclosing_function(v, j), T(v, j)->line,
                          depth + 1);
    }
    if (rc == 0 && callers == 0 && !name_seen(&c->comm_names, name)) {
        int *lines = realloc(c->comm_lines, (c->comm_names.n + 1) * sizeof(*lines));
        size_t s0 = T(v, first)->off;
        char *text = cuco_strndup(v->src + s0, tok_end(v, last) - s0);
        if (!lines || !text || cuco_strlist_push(&c->comm_names, name) != 0 ||
            cuco_strlist_push(&c->comm_texts, text) != 0)
            rc = CUCO_ENOMEM;
        free(text);
        if (lines) {
            c->comm_lines = lines;
            c->comm_lines[c->comm_names.n - 1] = line;
        }
    }
    free(name);
    return rc;
}

/* The device runtime registers every symmetric buffer with the first
 * communicator that runs a device call, so the calls of a program must all
 * use one communicator. */
static int check_one_comm(ctx *c)
{
    if (c->comm_names.n < 2)
        return 0;
    cuco_buf b = CUCO_BUF_INIT;
    for (size_t i = 0; i < c->comm_names.n; i++)
        cuco_buf_printf(&b, "%s'%s' (line %d)",
                        i ? (i + 1 == c->comm_names.n ? " and " : ", ") : "",
                        c->comm_texts.items[i], c->comm_lines[i]);
    c->r->refused = 1;
    int rc = cuco_tx_notes_add(
        &c->r->notes, c->comm_lines[1], "refused",
        "collectives on %zu communicators, %s: the device runtime registers every "
        "symmetric buffer with one communicator, so calls on a second one (e.g. one "
        "made by ncclCommSplit) would fail at run time; only programs whose "
        "collectives and point-to-point calls use one communicator are transformed",
        c->comm_names.n, cuco_buf_str(&b));
    cuco_buf_free(&b);
    return rc;
}

/* Records the communicator of a rewritten call (argument k). */
static int note_comm(ctx *c, const args *a, int k, size_t call_tok)
{
    if (k < 0 || k >= a->n)
        return 0;
    return comm_collect(c, a->first[k], a->last[k], enclosing_function(&c->v, call_tok),
                        line_of(c, call_tok), 0);
}

/* The communicators named by argument k of the call at call_tok (a helper's
 * parameter stands for what its callers pass), into *names; none for an
 * accessor. */
static int call_comms(ctx *c, const args *a, int k, size_t call_tok, cuco_strlist *names)
{
    cuco_strlist keep_names = c->comm_names, keep_texts = c->comm_texts;
    int *keep_lines = c->comm_lines;
    c->comm_names = (cuco_strlist){0};
    c->comm_texts = (cuco_strlist){0};
    c->comm_lines = NULL;
    int rc = note_comm(c, a, k, call_tok);
    *names = c->comm_names;
    cuco_strlist_free(&c->comm_texts);
    free(c->comm_lines);
    c->comm_names = keep_names;
    c->comm_texts = keep_texts;
    c->comm_lines = keep_lines;
    return rc;
}

/* Whether argument k of a call names a communicator other than
 * c->device_comm (its collectives stay host NCCL, no device state is set up
 * or released for it). */
static int other_comm_arg(const ctx *c, const args *a, int k)
{
    if (!c->device_comm || a->n <= k)
        return 0;
    size_t named = chain_last(&c->v, a->first[k], a->last[k]);
    return named < c->v.n && !cuco_tok_is(&c->v.lx, T(&c->v, named), c->device_comm);
}

/* A collective on a communicator other than c->device_comm stays host NCCL
 * (refused in a group): 1 when it does, 0 when the device takes it. */
static int other_comm_kept(ctx *c, const args *a, size_t call_tok, const char *call, int group,
                           int *rc)
{
    cuco_strlist of = {0};
    *rc = c->device_comm && a->n >= 2 ? call_comms(c, a, a->n - 2, call_tok, &of) : 0;
    const char *other = NULL;
    for (size_t k = 0; *rc == 0 && k < of.n && !other; k++)
        if (strcmp(of.items[k], c->device_comm) != 0)
            other = of.items[k];
    if (other) {
        char *why = cuco_sprintf("%s on communicator '%s': the device calls use '%s' (the device "
                                 "runtime registers its windows with one communicator)",
                                 call, other, c->device_comm);
        size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
        *rc = why ? keep_or_refuse(c, line_of(c, call_tok), group, "%s%s", why, NULL) : CUCO_ENOMEM;
        free(why);
        if (*rc == 0 && kept_since(c, kept))
            *rc = keep_call(c, call_tok, group);
    }
    cuco_strlist_free(&of);
    return other != NULL;
}

/* Containers whose memory comes from their own allocator. */
static const char *const container_words[] = {"device_vector",  "device_ptr", "device_buffer",
                                              "device_uvector", "Tensor",     "unique_ptr",
                                              "shared_ptr",     NULL};

/* Whether the name at token i is declared there: "T x;", "T *x = ...",
 * "std::vector<T> a, x;", "T x(n)", "T x{...}". */
static int declares(const view *v, size_t i)
{
    if (i == 0 || !(is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, "=") ||
                    is(v, i + 1, "(") || is(v, i + 1, "{") || is(v, i + 1, "[")))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (is(v, p, "*") || is(v, p, "&")))
        p--;
    return (is_ident(v, p) && !is_keyword(v, p) && !is(v, p, "new") && !is(v, p, "delete") &&
            !is(v, p, "goto")) ||
           is(v, p, ">") || is(v, p, ">>") ||
           (is(v, p, ",") && p > 0 && v->depth[p] == v->depth[i]);
}

/* The first token declaring the name s[0..len), or n. */
static size_t declaration_of(const view *v, const char *s, size_t len)
{
    for (size_t i = 0; i < v->n; i++)
        if (T(v, i)->len == len && !memcmp(v->src + T(v, i)->off, s, len) && declares(v, i))
            return i;
    return v->n;
}

/* Appends to b, and returns 1, when the declaration at token t is of a
 * container (container_words) rather than of a pointer. */
static int container_note(ctx *c, cuco_buf *b, size_t t)
{
    const view *v = &c->v;
    size_t lo, hi;
    stmt_span(c, t, &lo, &hi);
    for (const char *const *w = container_words; *w; w++) {
        size_t wl = strlen(*w);
        for (size_t q = lo; q + wl <= hi; q++) {
            char before = q > lo ? v->src[q - 1] : ' ', after = v->src[q + wl];
            if (memcmp(v->src + q, *w, wl) != 0 || before == '_' ||
                ((before | 32) >= 'a' && (before | 32) <= 'z') || after == '_' ||
                ((after | 32) >= 'a' && (after | 32) <= 'z'))
                continue;
            cuco_buf_printf(
                b,
                "; '%.*s' is declared at line %d as '%.*s': the memory of a %s comes from its own "
                "allocator, which cannot back a symmetric window (allocate the buffer with "
                "cudaMalloc)",
                (int)T(v, t)->len, v->src + T(v, t)->off, T(v, t)->line, (int)(hi - lo),
                v->src + lo, *w);
            return 1;
        }
    }
    return 0;
}

/* Where the trace of a buffer whose cudaMalloc was not found stops, for
 * the refusal: the expression it gets its value from, and a container
 * (thrust::device_vector, a smart pointer ...) that holds it or a name in
 * that expression. Caller frees; NULL when there is nothing to say. */
static char *trace_hint(ctx *c, const char *name)
{
    const view *v = &c->v;
    cuco_buf b = CUCO_BUF_INIT;
    size_t rs = v->n, re = v->n;
    for (size_t i = 0; i + 2 < v->n && rs >= v->n; i++) {
        if (!cuco_tok_is(&v->lx, T(v, i), name) || !is(v, i + 1, "=") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        rs = i + 2;
        int d = 0;
        for (re = rs; re < v->n; re++) {
            if (is(v, re, "(") || is(v, re, "[") || is(v, re, "{"))
                d++;
            else if ((is(v, re, ")") || is(v, re, "]") || is(v, re, "}")) && --d < 0)
                break;
            else if (d == 0 && (is(v, re, ";") || is(v, re, ",")))
                break;
        }
        if (re > rs)
            cuco_buf_printf(&b, "; '%s' gets its value at line %d from '%.*s'", name,
                            T(v, rs)->line, (int)(tok_end(v, re - 1) - T(v, rs)->off),
                            v->src + T(v, rs)->off);
    }
    /* the buffer's own declaration, then those of the names its value is made of */
    size_t own = declaration_of(v, name, strlen(name));
    if (!(own < v->n && container_note(c, &b, own)))
        for (size_t j = rs; rs < v->n && j < re; j++) {
            if (!is_ident(v, j) || is(v, j + 1, "(") || is(v, j + 1, "::"))
                continue;
            size_t t = declaration_of(v, v->src + T(v, j)->off, T(v, j)->len);
            if (t < v->n && container_note(c, &b, t))
                break;
        }
    if (b.len == 0) {
        cuco_buf_free(&b);
        return NULL;
    }
    return cuco_buf_detach(&b);
}

/* need_symmetric's group for a buffer the call can do without (an
 * all-to-all's send buffer, which its consumer split pulls from): nothing
 * is said when it cannot be a window. */
#define SYMM_OPTIONAL (-2)

/* A buffer that cannot become a window: the call is refused (group -1: a
 * receive, which must meet its peer's rewritten send), kept host NCCL
 * (keep_or_refuse, group: the call's NCCL group), or left as it is
 * (SYMM_OPTIONAL). */
static int no_window(ctx *c, int group, int line, const char *fmt, const char *a, const char *b)
{
    if (group == SYMM_OPTIONAL)
        return 0;
    return group < 0 ? refuse(c, line, fmt, a, b) : keep_or_refuse(c, line, group, fmt, a, b);
}

/* Makes the buffer of argument k of the call symmetric, or says why not
 * (no_window, with group). */
static int need_symmetric(ctx *c, const args *a, int k, size_t call_tok, const char *call,
                          int group)
{
    const view *v = &c->v;
    size_t last = chain_last(v, a->first[k], a->last[k]);
    char *text = arg_text(v, a, k);
    if (!text)
        return CUCO_ENOMEM;
    if (last >= v->n) {
        no_window(c, group, line_of(c, call_tok), "%s: cannot tell which buffer '%s' is", call,
                  text);
        free(text);
        return 0;
    }
    char *name = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
    char *why = cuco_sprintf("'%s' of %s at line %d", text, call, line_of(c, call_tok));
    int rc = (!name || !why) ? CUCO_ENOMEM : resolve_buffer(c, name, last, why, 0);
    if (rc == 0) {
        size_t at = name ? other_allocation(c, name) : v->n;
        if (at < v->n && is(v, at, "cudaMallocManaged") && strcmp(call, "ncclAllReduce") == 0) {
            /* host-readable scratch (a loss or a norm summed over ranks): staged
             * through a symmetric buffer of the glue */
            c->staged = c->stage_call = 1;
            rc = cuco_tx_notes_add(&c->r->notes, line_of(c, call_tok), "symmetric",
                                   "'%s' comes from cudaMallocManaged at line %d (host-readable "
                                   "memory, which cannot be a symmetric window): %s runs on a "
                                   "symmetric staging buffer, copied in and out on its stream",
                                   text, line_of(c, at), call);
        } else if (at < v->n) {
            char *detail =
                cuco_sprintf("'%s' comes from %.*s at line %d, which cannot back a symmetric "
                             "window (only cudaMalloc, cudaMallocAsync and ncclMemAlloc "
                             "allocations become windows)",
                             text, (int)T(v, at)->len, v->src + T(v, at)->off, line_of(c, at));
            no_window(c, group, line_of(c, call_tok), "%s: buffer %s", call, detail ? detail : "?");
            free(detail);
        } else {
            char *hint = name ? trace_hint(c, name) : NULL;
            char *what = cuco_sprintf("'%s'%s", text, hint ? hint : "");
            no_window(c, group, line_of(c, call_tok), "%s: cannot find the cudaMalloc of buffer %s",
                      call, what ? what : text);
            free(what);
            free(hint);
        }
    }
    free(name);
    free(why);
    free(text);
    return rc < 0 ? rc : 0;
}

/* ---- calls ---------------------------------------------------------------- */

static const char *const unsupported_calls[] = {"ncclReduce", "ncclAllToAllv", "ncclAlltoAllv",
                                                NULL};

/* Collectives the runtime builds from point-to-point: name, replacement,
 * argument count, index of the receive buffer (symmetric). */
typedef struct p2p_collective {
    const char *name, *to;
    int nargs, recv_arg;
} p2p_collective;
static const p2p_collective p2p_collectives[] = {{"ncclAlltoAll", "cuco_tx::all_to_all", 6, 1},
                                                 {"ncclAllToAll", "cuco_tx::all_to_all", 6, 1},
                                                 {"ncclBroadcast", "cuco_tx::broadcast", 7, 1},
                                                 {"ncclBcast", "cuco_tx::bcast", 6, 0},
                                                 {"ncclGather", "cuco_tx::gather", 7, 1},
                                                 {"ncclScatter", "cuco_tx::scatter", 7, 1},
                                                 {NULL, NULL, 0, 0}};
/* The line of the first point-to-point call (or collective made of them:
 * the device defers both to the group's end) in the group opened at
 * c->group_open, or 0. */
static int deferred_call_line(const ctx *c)
{
    const view *v = &c->v;
    int depth = 0;
    for (size_t i = c->group_open; i < v->n; i++) {
        if (!is_ident(v, i) || !is(v, i + 1, "(") || qualified(v, i))
            continue;
        if (is(v, i, "ncclGroupStart"))
            depth++;
        else if (is(v, i, "ncclGroupEnd") && --depth <= 0)
            return 0;
        else if (is(v, i, "ncclSend") || is(v, i, "ncclRecv"))
            return line_of(c, i);
        for (const p2p_collective *p = p2p_collectives; p->name; p++)
            if (is(v, i, p->name))
                return line_of(c, i);
    }
    return 0;
}

static const char *const host_collectives[] = {
    "ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclSend",     "ncclRecv",
    "ncclBroadcast", "ncclBcast",         "ncclReduce",    "ncclAllToAll", "ncclAlltoAll",
    "ncclAllToAllv", "ncclAlltoAllv",     "ncclGather",    "ncclScatter",  NULL};
static const char *const device_dtypes[] = {"ncclFloat32",  "ncclFloat", "ncclFloat16", "ncclHalf",
                                            "ncclBfloat16", "ncclInt32", "ncclInt",     NULL};
static const char *const float_dtypes[] = {"ncclFloat32", "ncclFloat",    "ncclFloat16",
                                           "ncclHalf",    "ncclBfloat16", NULL};

/* Calls of the file on each communicator: with more than one, the device
 * calls take one (c->device_comm) and the other communicators' collectives
 * stay host NCCL: the one of the point-to-point calls when they use one,
 * else the one with the most calls (the first named, on a tie). */
static int choose_device_comm(ctx *c)
{
    const view *v = &c->v;
    cuco_strlist names = {0}, p2p = {0};
    size_t *counts = NULL;
    int rc = 0;
    for (size_t i = 0; i + 1 < v->n && rc == 0; i++) {
        if (!in_list(host_collectives, v, i) || !is(v, i + 1, "(") || qualified(v, i))
            continue;
        args a;
        call_args(v, i + 1, &a);
        cuco_strlist of = {0};
        rc = a.n >= 2 ? call_comms(c, &a, a.n - 2, i, &of) : 0;
        int is_p2p = is(v, i, "ncclSend") || is(v, i, "ncclRecv");
        for (size_t k = 0; rc == 0 && k < of.n; k++) {
            size_t at = 0;
            while (at < names.n && strcmp(names.items[at], of.items[k]) != 0)
                at++;
            if (at == names.n) {
                size_t *grown = realloc(counts, (names.n + 1) * sizeof(*grown));
                rc = grown ? cuco_strlist_push(&names, of.items[k]) : CUCO_ENOMEM;
                counts = grown ? grown : counts;
                if (rc == 0)
                    counts[at] = 0;
            }
            if (rc == 0)
                counts[at]++;
            if (rc == 0 && is_p2p && !name_seen(&p2p, of.items[k]))
                rc = cuco_strlist_push(&p2p, of.items[k]);
        }
        cuco_strlist_free(&of);
    }
    size_t best = 0;
    for (size_t k = 1; k < names.n; k++)
        if (counts[k] > counts[best])
            best = k;
    const char *pick = p2p.n == 1 ? p2p.items[0] : p2p.n == 0 && names.n ? names.items[best] : NULL;
    if (rc == 0 && names.n > 1 && pick && !(c->device_comm = cuco_strdup(pick)))
        rc = CUCO_ENOMEM;
    cuco_strlist_free(&names);
    cuco_strlist_free(&p2p);
    free(counts);
    return rc;
}

static const p2p_collective *p2p_collective_of(const char *name)
{
    for (const p2p_collective *p = p2p_collectives; p->name; p++)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}

static int in_list(const char *const *l, const view *v, size_t i)
{
    for (; *l; l++)
        if (cuco_tok_is(&v->lx, T(v, i), *l))
            return 1;
    return 0;
}

static int str_in(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

/* Appends text[0..len) to vals and line to lines (same index). */
static int add_value(cuco_strlist *vals, int **lines, const char *text, size_t len, int line)
{
    int *grown = realloc(*lines, (vals->n + 1) * sizeof(int));
    if (!grown)
        return CUCO_ENOMEM;
    *lines = grown;
    char *val = cuco_strndup(text, len);
    int rc = val ? cuco_strlist_push(vals, val) : CUCO_ENOMEM;
    free(val);
    if (rc != 0)
        return CUCO_ENOMEM;
    (*lines)[vals->n - 1] = line;
    return 0;
}

/* The NCCL names (ncclFloat, ncclSum ...) argument k of a call stands for:
 * itself when it is one such name; else, for a single identifier, the
 * values of its object-like macros ("#define NCCL_REAL_TYPE ncclFloat", every
 * #if branch) and of variables initialised with one ("constexpr
 * ncclDataType_t kType = ncclHalf;"). Each value goes to vals, its line to
 * lines (0 for the argument itself). Nothing when the argument is an
 * expression (a call, a traits member): the runtime checks those. */
static int arg_values(ctx *c, const args *a, int k, cuco_strlist *vals, int **lines)
{
    const view *v = &c->v;
    size_t t = a->first[k];
    if (a->first[k] != a->last[k] || !is_ident(v, t))
        return 0;
    char *name = cuco_strndup(v->src + T(v, t)->off, T(v, t)->len);
    if (!name)
        return CUCO_ENOMEM;
    int rc = 0;
    if (strncmp(name, "nccl", 4) == 0) {
        rc = add_value(vals, lines, name, strlen(name), 0);
        free(name);
        return rc;
    }
    size_t nl = strlen(name);
    const cuco_lex *lx = &v->lx;
    for (size_t i = 0; i < lx->ntoks && rc == 0; i++) {
        const cuco_tok *p = &lx->toks[i];
        if (p->kind != CUCO_TOK_PREPROC || p->dir_len != 6 ||
            memcmp(lx->src + p->dir_off, "define", 6) != 0)
            continue;
        const char *q = lx->src + p->dir_off + 6, *end = lx->src + p->off + p->len;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if ((size_t)(end - q) <= nl || memcmp(q, name, nl) != 0 || !(q[nl] == ' ' || q[nl] == '\t'))
            continue; /* another macro, or a function-like one */
        q += nl;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        const char *ve = q;
        while (ve < end && (*ve == '_' || (*ve >= '0' && *ve <= '9') ||
                            ((*ve | 32) >= 'a' && (*ve | 32) <= 'z')))
            ve++;
        if (ve > q + 4 && strncmp(q, "nccl", 4) == 0)
            rc = add_value(vals, lines, q, (size_t)(ve - q), p->line);
    }
    for (size_t i = 0; i + 3 < v->n && rc == 0; i++) {
        if (!cuco_tok_is(&v->lx, T(v, i), name) || !is(v, i + 1, "=") || !is_ident(v, i + 2) ||
            !(is(v, i + 3, ";") || is(v, i + 3, ",")) ||
            strncmp(v->src + T(v, i + 2)->off, "nccl", 4) != 0)
            continue;
        const cuco_tok *val = T(v, i + 2);
        rc = add_value(vals, lines, v->src + val->off, val->len, val->line);
    }
    free(name);
    return rc;
}

/* "NAME (ncclDouble at line 31)" for messages; the argument alone when it
 * is the value. Caller frees. */
static char *value_text(const char *arg, const char *value, int line)
{
    return line ? cuco_sprintf("%s (%s at line %d)", arg, value, line) : cuco_strdup(arg);
}

/* Reductions the device implements: the dtype (argument 3) must be one the
 * device reductions have, the operation (argument 4) ncclSum, or ncclAvg of
 * a floating type; names defined by macros or constants count as their
 * values (all of them, when #if branches define several). */
static int check_reduce_args(ctx *c, const args *a, size_t i, const char *call, int group)
{
    cuco_strlist dts = {0}, ops = {0};
    int *dt_lines = NULL, *op_lines = NULL;
    char *dt_arg = arg_text(&c->v, a, 3), *op_arg = arg_text(&c->v, a, 4);
    int rc = dt_arg && op_arg ? 0 : CUCO_ENOMEM;
    if (rc == 0)
        rc = arg_values(c, a, 3, &dts, &dt_lines);
    if (rc == 0)
        rc = arg_values(c, a, 4, &ops, &op_lines);
    int all_float = dts.n > 0, avg = 0, op_refused = 0;
    for (size_t k = 0; rc == 0 && k < dts.n; k++) {
        all_float &= str_in(float_dtypes, dts.items[k]);
        if (!str_in(device_dtypes, dts.items[k])) {
            char *t = value_text(dt_arg, dts.items[k], dt_lines[k]);
            rc = keep_or_refuse(c, line_of(c, i), group,
                                "%s: data type %s has no device reduction in device/", call, t);
            free(t);
            break;
        }
    }
    for (size_t k = 0; rc == 0 && k < ops.n; k++) {
        if (!strcmp(ops.items[k], "ncclAvg")) {
            avg = 1;
        } else if (strcmp(ops.items[k], "ncclSum") != 0) {
            if (op_lines[k] == 0) {
                rc = keep_or_refuse(
                    c, line_of(c, i), group,
                    "%s: reduction '%s' is not the literal ncclSum or ncclAvg (device/ only sums)",
                    call, op_arg);
            } else {
                char *t = value_text(op_arg, ops.items[k], op_lines[k]);
                rc = keep_or_refuse(
                    c, line_of(c, i), group,
                    "%s: reduction %s is not ncclSum or ncclAvg (device/ only sums)", call, t);
                free(t);
            }
            op_refused = 1;
            avg = 0;
            break;
        }
    }
    if (rc == 0 && ops.n == 0 && !op_refused)
        rc = keep_or_refuse(
            c, line_of(c, i), group,
            "%s: reduction '%s' is not ncclSum or ncclAvg, nor a macro or constant naming one "
            "(device/ only sums)",
            call, op_arg);
    else if (rc == 0 && avg && !all_float)
        /* a sum, then a scale by 1/nranks: floating types only */
        rc = keep_or_refuse(
            c, line_of(c, i), group,
            "%s: ncclAvg of data type '%s': the device average is implemented for floating types "
            "named by a literal, macro or constant only (float, half, bf16)",
            call, dt_arg);
    free(dt_arg);
    free(op_arg);
    cuco_strlist_free(&dts);
    cuco_strlist_free(&ops);
    free(dt_lines);
    free(op_lines);
    return rc;
}

typedef struct p2p_call {
    size_t tok;
    int is_send;
    int group; /* 0: none */
    int top;   /* index of the enclosing top-level function's first token */
    args a;
} p2p_call;

static size_t top_start(const view *v, size_t i)
{
    while (i > 0 && v->scope[i] > 0)
        i--;
    return i;
}

static int sched_candidate(ctx *c, size_t tok, int group);

/* Receives need their buffer in a symmetric window (the sender stores into
 * it); sends need nothing: the receiver posts where its data goes. */
static int rewrite_p2p(ctx *c, p2p_call *calls, size_t n)
{
    const view *v = &c->v;
    for (size_t i = 0; i < n; i++) {
        p2p_call *s = &calls[i];
        size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
        int rc = note_comm(c, &s->a, 4, s->tok);
        if (rc == 0 && !s->is_send)
            rc = need_symmetric(c, &s->a, 0, s->tok, "ncclRecv", -1);
        if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
            continue; /* refused on its own line: no rewrite line */
        if (rc == 0)
            rc = add_edit(c, s->tok, T(v, s->tok)->off, T(v, s->tok)->len,
                          s->is_send ? "cuco_tx::send" : "cuco_tx::recv");
        if (rc == 0)
            rc = sched_candidate(c, s->tok, s->group);
        if (rc == 0)
            rc = cuco_tx_notes_add(&c->r->notes, line_of(c, s->tok), "rewrite", "%s",
                                   s->is_send
                                       ? "ncclSend -> cuco_tx::send (waits for the receiver to "
                                         "post its buffer, stores into it over NVLink, signals)"
                                       : "ncclRecv -> cuco_tx::recv (posts its buffer to the "
                                         "source, then waits for the source's signal)");
        if (rc != 0)
            return rc < 0 ? rc : CUCO_ENOMEM;
    }
    return 0;
}

/* Whether token i is in the body (or the single statement) of a for, while
 * or do loop. */
static int in_loop(const view *v, size_t i)
{
    for (size_t f = 0; f < i; f++) {
        size_t body;
        if ((is(v, f, "for") || is(v, f, "while")) && is(v, f + 1, "("))
            body = match_close(v, f + 1) + 1;
        else if (is(v, f, "do"))
            body = f + 1;
        else
            continue;
        if (body >= v->n || body > i)
            continue;
        size_t end = body;
        if (is(v, body, "{")) {
            end = match_close(v, body);
        } else {
            int d = 0;
            for (; end < v->n; end++) {
                if (is(v, end, "(") || is(v, end, "[") || is(v, end, "{"))
                    d++;
                else if (is(v, end, ")") || is(v, end, "]") || is(v, end, "}"))
                    d--;
                else if (d == 0 && is(v, end, ";"))
                    break;
            }
        }
        if (i < end)
            return 1;
    }
    return 0;
}

/* The line of a "blocking = 0" (an ncclConfig_t made non-blocking:
 * "config.blocking = 0;", "cfg->blocking = 0"), or 0. */
static int nonblocking_line(const ctx *c)
{
    const view *v = &c->v;
    for (size_t i = 0; i + 2 < v->n; i++)
        if (is(v, i, "blocking") && is(v, i + 1, "=") && is(v, i + 2, "0"))
            return T(v, i)->line;
    return 0;
}

/* Whether the statement holding token i is the unbraced body of a control
 * statement ("for (...) stmt;", "else stmt;"); *lo becomes its first byte. */
static int control_body(const view *v, size_t i, size_t *lo)
{
    size_t s = i;
    while (s > 0) {
        size_t p = s - 1;
        if (is(v, p, ";") || is(v, p, "{") || is(v, p, "}"))
            break;
        if (is(v, p, "else") || is(v, p, "do")) {
            *lo = T(v, s)->off;
            return 1;
        }
        if (is(v, p, ")")) {
            int d = 0;
            size_t q = p;
            for (;; q--) {
                if (is(v, q, ")"))
                    d++;
                else if (is(v, q, "(") && --d == 0)
                    break;
                if (q == 0)
                    return 0;
            }
            if (q > 0 && (is(v, q - 1, "for") || is(v, q - 1, "while") || is(v, q - 1, "if") ||
                          is(v, q - 1, "switch"))) {
                *lo = T(v, s)->off;
                return 1;
            }
            s = q;
            continue;
        }
        s = p;
    }
    return 0;
}

/* The first line that starts a thread (pthread_create, std::thread), 0 when
 * none: a program that makes a communicator per thread, one GPU each. */
static int threads_line(const ctx *c)
{
    const view *v = &c->v;
    for (size_t i = 0; i + 1 < v->n; i++)
        if ((is(v, i, "pthread_create") && is(v, i + 1, "(")) ||
            (is(v, i, "thread") && i > 1 && is(v, i - 1, "::") && is(v, i - 2, "std")))
            return T(v, i)->line;
    return 0;
}

/* One process driving several GPUs (ncclCommInitAll, or ncclCommInitRank
 * per device in a loop, a group or a thread) at the call at token i. The
 * device runtime sets up one device communicator (ncclDevCommCreate and
 * window registration, both collective) per process, so the program is
 * transformed for one device per process: the device communicator is made
 * at the first device collective, and a guard after the call stops the
 * program with a message when it makes a second communicator (rather than
 * waiting forever on a collective setup that the other devices' setups,
 * issued later by the same thread, would have to join). */
static int several_devices(ctx *c, size_t i, const char *name, int init_all)
{
    const view *v = &c->v;
    int line = T(v, i)->line;
    if (!editable(c, i, name))
        return 0;
    args a;
    call_args(v, i + 1, &a);
    char *ndev = init_all && a.n == 3 ? arg_text(v, &a, 1) : NULL;
    char *guard =
        ndev ? cuco_sprintf(" if ((int)(%s) > 1) { fprintf(stderr, \"cuco_tx: %s at line %d "
                            "makes %%d communicators in one process; the device runtime drives "
                            "one GPU per process\\n\", (int)(%s)); exit(EXIT_FAILURE); }",
                            ndev, name, line, ndev)
             : cuco_sprintf(" { static int cuco_tx_comms_made = 0; if (__sync_add_and_fetch("
                            "&cuco_tx_comms_made, 1) > 1) { fprintf(stderr, \"cuco_tx: %s at "
                            "line %d makes a second communicator in this process; the device "
                            "runtime drives one GPU per process\\n\"); exit(EXIT_FAILURE); } }",
                            name, line);
    free(ndev);
    if (!guard)
        return CUCO_ENOMEM;
    size_t lo, hi;
    stmt_span(c, i, &lo, &hi);
    /* the body of "for (...) ncclCommInitRank(...);" gets braces, so that the
     * guard counts each communicator the loop makes */
    int braces = control_body(v, i, &lo);
    int rc = braces ? add_edit(c, i, lo, 0, "{ ") : 0;
    if (rc == 0)
        rc = add_edit(c, i, hi, 0, guard);
    if (rc == 0 && braces)
        rc = add_edit(c, i, hi, 0, " }");
    free(guard);
    if (rc == 0)
        rc = cuco_tx_notes_add(
            &c->r->notes, line, "note",
            "%s: one process drives several GPUs; transformed for one GPU per process (the "
            "device communicator is made at the first device collective) and guarded: with a "
            "second communicator the program stops with a message. The device runtime sets up "
            "one device communicator per process; ncclDevCommCreate and "
            "ncclCommWindowRegister are collective, so several devices of one thread would "
            "need each communicator's setup issued inside one ncclGroupStart/ncclGroupEnd",
            name);
    return rc;
}

static const char *const capture_calls[] = {
    "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cudaStreamBeginCapture_v2", NULL};

/* Stream capture into a CUDA graph: a graph replays its nodes with the
 * arguments they had when captured, while the glue's device paths number
 * point-to-point calls and copy-engine rendezvous on the host and set
 * communicators and windows up at a first use. So the glue sends a call made
 * on a capturing stream through NCCL's own (cuco_tx::capturing), but for the
 * SM collectives on registered windows (replayable_on_device), and the schedules,
 * which fork streams and decide on the host, are left out of the program. */
static const char capture_note[] =
    "stream capture into a CUDA graph: calls made on a capturing stream go through NCCL's own "
    "(which captures), but for an all-reduce, reduce-scatter or all-gather whose window is "
    "already registered (their SM kernels keep their barrier state on the device, so each "
    "replay synchronises afresh); calls made outside a capture keep the device paths; no "
    "schedule is applied";

/* ---- schedule early_start_late_wait (schedule_scan.c places it) ---------- */

static int sched_candidate(ctx *c, size_t tok, int group)
{
    size_t *t = realloc(c->sched_toks, (c->nsched + 1) * sizeof(*t));
    if (!t)
        return CUCO_ENOMEM;
    c->sched_toks = t;
    int *g = realloc(c->sched_group, (c->nsched + 1) * sizeof(*g));
    if (!g)
        return CUCO_ENOMEM;
    c->sched_group = g;
    c->sched_toks[c->nsched] = tok;
    c->sched_group[c->nsched++] = group;
    const char *api = c->v.src + T(&c->v, tok)->off;
    size_t len = T(&c->v, tok)->len;
    unsigned reads = cuco_glue_reads_of(api, len);
    c->glue.reads |= reads;
    if (len == strlen("ncclAllGather") && !strncmp(api, "ncclAllGather", len))
        c->n_gathers++;
    else
        c->glue.reads_besides_gather |= reads;
    return 0;
}

static int sched_editable(void *ctxp, size_t off)
{
    const ctx *c = ctxp;
    return c->nblocks == 0 || in_block(c, off);
}

/* Token index of the token at byte off (the first at or after it). */
static size_t tok_at(const view *v, size_t off)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (T(v, mid)->off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n ? lo : v->n - 1;
}

/* Schedule (b)'s knob and report line for the all-gather of site k, or
 * consume_as_received's for the receive of site k. */
static int split_report(ctx *c, const cuco_sched_plan *plan, size_t k, int line, const char *api)
{
    int split = plan->applies && plan->split;
    const char *name = cuco_sched_consumer_split(api);
    int rc = 0;
    if (split) {
        sched_sites_add(plan->split_recv ? &c->recv_splits : &c->splits, k);
        c->gemm_splits += !plan->split_kernel;
        if (plan->split_attention)
            sched_sites_add(&c->attn_splits, k);
        c->attn_lends += plan->split_lend;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_SPLIT_%zu 1 // cuco:knob run 0 1\n", k);
    }
    if (rc == 0)
        rc = split ? cuco_tx_notes_add(&c->r->notes, plan->split_line, "schedule",
                                       "%s: %s (knob CUCO_SPLIT_%zu)", name, plan->split_note, k)
                   : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                       "%s does not apply to %s: %s", name, api,
                                       plan->split_note ? plan->split_note : "no placement");
    return rc;
}

/* producer_split's knob and report line for the all-reduce of site k. */
static int produce_report(ctx *c, const cuco_sched_plan *plan, size_t k, int line, const char *api)
{
    int rc = 0;
    /* On by default for a kernel feeding an all-reduce (measured:
     * bench/README.md, "Producer split of a kernel, ranges on two streams");
     * off for a GEMM, and for a reduce-scatter (its copy-engine steps were
     * slower than the whole device reduce-scatter: bench/README.md,
     * "Producer split into a reduce-scatter"). */
    int on = plan->produce_kernel && strcmp(api, "ncclAllReduce") == 0;
    if (plan->produce) {
        sched_sites_add(&c->produces, k);
        c->gemm_produces += !plan->produce_kernel;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_PSPLIT_%zu %d // cuco:knob run 0 1\n", k, on);
    }
    if (rc == 0)
        rc = plan->produce
                 ? cuco_tx_notes_add(&c->r->notes, plan->produce_line, "schedule",
                                     "producer_split: %s (knob CUCO_PSPLIT_%zu, default %s)",
                                     plan->produce_note, k, on ? "on" : "off")
                 : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                     "producer_split does not apply to %s: %s", api,
                                     plan->produce_note ? plan->produce_note : "no placement");
    return rc;
}

/* Whether an earlier plan's consumer split rewrote the GEMM (or launch)
 * whose name is at byte off. */
static int split_taken(const ctx *c, size_t off)
{
    for (size_t i = 0; i < c->nsplit_gemms; i++)
        if (c->split_gemms[i] == off)
            return 1;
    return 0;
}

/* A later all-gather whose first consumer an earlier one already split: the
 * attention split of a kernel waits for the pieces of every all-gather of
 * its keys, so this one keeps its edits but the launch's (the earlier plan
 * rewrote it); any other split consumer reads one gathered buffer per
 * part, so this all-gather's plan is dropped (it stays in place, before the
 * split consumer on its stream). */
static int split_shared(ctx *c, cuco_sched_plan *plan)
{
    if (!plan->split || !split_taken(c, plan->split_gemm_off))
        return 0;
    size_t kept = 0;
    for (size_t i = 0; i < plan->nedits; i++) {
        cuco_sched_edit *x = &plan->edits[i];
        int launch = x->off == plan->split_gemm_off && x->len > 0;
        if (!plan->split_attention || launch)
            free(x->text);
        else
            plan->edits[kept++] = *x;
    }
    plan->nedits = kept;
    free(plan->split_note);
    if (plan->split_attention) {
        plan->split_note = cuco_sprintf("joins the attention split of the kernel at line %d: its "
                                        "parts wait for this all-gather's pieces too",
                                        plan->split_line);
    } else {
        plan->split = plan->applies = 0;
        free(plan->note);
        plan->note = cuco_sprintf("its first consumer (line %d) is already split for an earlier "
                                  "all-gather",
                                  plan->split_line);
        plan->split_note = cuco_strdup(plan->note ? plan->note : "");
        if (!plan->note)
            return CUCO_ENOMEM;
    }
    return plan->split_note ? 0 : CUCO_ENOMEM;
}

/* Whether every scheduled call of the group of site k is an all-gather,
 * all-reduce or reduce-scatter: cuco_tx::group_start/end defer only the
 * point-to-point calls (and the collectives made of them), so each of
 * these runs where it stands and may be scheduled as if ungrouped. */
static int group_of_collectives(const ctx *c, size_t k)
{
    const view *v = &c->v;
    for (size_t j = 0; j < c->nsched; j++) {
        size_t t = c->sched_toks[j];
        if (c->sched_group[j] == c->sched_group[k] && !is(v, t, "ncclAllGather") &&
            !is(v, t, "ncclAllReduce") && !is(v, t, "ncclReduceScatter"))
            return 0;
    }
    return 1;
}

/* A GEMM takes one of the two splits: the producer split of a GEMM the
 * consumer split already rewrote is dropped (its edits and its knob), with
 * the reason in its note. */
static int one_split_per_gemm(ctx *c, cuco_sched_plan *plan)
{
    if (plan->split) {
        size_t *g = realloc(c->split_gemms, (c->nsplit_gemms + 1) * sizeof *g);
        if (!g)
            return CUCO_ENOMEM;
        c->split_gemms = g;
        c->split_gemms[c->nsplit_gemms++] = plan->split_gemm_off;
    }
    if (!plan->produce || !split_taken(c, plan->produce_gemm_off))
        return 0;
    for (size_t i = plan->produce_edit0; i < plan->nedits; i++)
        free(plan->edits[i].text);
    plan->nedits = plan->produce_edit0;
    plan->produce = 0;
    free(plan->produce_note);
    plan->produce_note = cuco_sprintf("the GEMM before it (line %d) is already split by "
                                      "consumer_split_by_source",
                                      plan->produce_line);
    return plan->produce_note ? 0 : CUCO_ENOMEM;
}

/* Edits of a plan into the transform's list; an insertion at the start of a
 * block goes inside it. */
static int plan_apply(ctx *c, const cuco_sched_edit *edits, size_t n)
{
    const view *v = &c->v;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const cuco_sched_edit *x = &edits[i];
        static const char lt_glue[] = "cuco_tx::lt_matmul_"; /* split_scan.c's gemm_table */
        c->gemm_lt |= x->text && !strncmp(x->text, lt_glue, sizeof lt_glue - 1);
        rc = add_edit(c, tok_at(v, x->stmt_off), x->off, x->len, x->text);
        if (rc == 0 && x->len == 0)
            c->edits[c->nedits - 1].seq = LONG_MAX;
    }
    return rc;
}

/* Schedule send_as_produced for the ncclSend of site k (send_made.c). */
static int send_made_apply(ctx *c, const char *text, size_t k, int grouped, cuco_err *e)
{
    const view *v = &c->v;
    size_t tok = c->sched_toks[k];
    int line = T(v, tok)->line;
    if (grouped)
        return cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                 "send_as_produced does not apply to ncclSend: inside "
                                 "ncclGroupStart/ncclGroupEnd");
    cuco_send_made_plan plan;
    int rc = cuco_send_made_scan(text, T(v, tok)->off, (int)k, sched_editable, c, &plan, e);
    if (rc == 0 && plan.applies)
        rc = plan_apply(c, plan.edits, plan.nedits);
    if (rc == 0 && plan.applies) {
        c->send_made = 1;
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_SENDP_%zu 1 // cuco:knob run 0 1\n", k);
    }
    if (rc == 0)
        rc = plan.applies
                 ? cuco_tx_notes_add(&c->r->notes, plan.gemm_line, "schedule",
                                     "send_as_produced: %s (knob CUCO_SENDP_%zu)", plan.note, k)
                 : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                     "send_as_produced does not apply to ncclSend: %s",
                                     plan.note ? plan.note : "no plan");
    cuco_send_made_plan_free(&plan);
    return rc;
}

static int sched_apply(ctx *c, const char *text, size_t k, cuco_err *e)
{
    const view *v = &c->v;
    size_t tok = c->sched_toks[k];
    char *api = cuco_strndup(v->src + T(v, tok)->off, T(v, tok)->len);
    if (!api)
        return CUCO_ENOMEM;
    int line = T(v, tok)->line, rc = 0;
    const char *split_name = cuco_sched_consumer_split(api);
    if (strcmp(api, "ncclSend") == 0)
        rc = send_made_apply(c, text, k, c->sched_group[k], e);
    if (rc != 0) {
        free(api);
        return rc;
    }
    if (c->sched_group[k] && !group_of_collectives(c, k)) {
        rc = cuco_tx_notes_add(&c->r->notes, line, "schedule",
                               "early_start_late_wait does not apply to %s: inside "
                               "ncclGroupStart/ncclGroupEnd with point-to-point calls, the group "
                               "is issued as one",
                               api);
        if (rc == 0 && split_name)
            rc = cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                   "%s does not apply to %s: inside ncclGroupStart/ncclGroupEnd",
                                   split_name, api);
        free(api);
        return rc;
    }
    cuco_sched_plan plan;
    rc = cuco_sched_scan(text, T(v, tok)->off, api, (int)k, c->sem, c->n_sem, sched_editable, c,
                         &plan, e);
    if (rc == 0)
        rc = split_shared(c, &plan);
    if (rc == 0)
        rc = one_split_per_gemm(c, &plan);
    if (rc == 0 && (plan.applies || plan.produce))
        rc = plan_apply(c, plan.edits, plan.nedits);
    if (rc == 0 && plan.applies)
        rc = cuco_buf_printf(&c->knobs, "#define CUCO_EARLY_%zu %d // cuco:knob run 0 1\n", k,
                             plan.knob_default);
    if (rc == 0)
        rc = plan.applies ? cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                              "%s (knob CUCO_EARLY_%zu)", plan.note, k)
                          : cuco_tx_notes_add(&c->r->notes, line, "schedule",
                                              "early_start_late_wait does not apply to %s: %s", api,
                                              plan.note ? plan.note : "no placement");
    if (rc == 0 && split_name)
        rc = split_report(c, &plan, k, line, api);
    if (rc == 0 && cuco_sched_producer_fed(api))
        rc = produce_report(c, &plan, k, line, api);
    cuco_sched_plan_free(&plan);
    free(api);
    return rc;
}

/* The report line of a call a schedule would have served, in a program
 * that captures streams into graphs. */
static int sched_not_under_capture(ctx *c, size_t k)
{
    const cuco_tok *t = T(&c->v, c->sched_toks[k]);
    return cuco_tx_notes_add(&c->r->notes, t->line, "schedule",
                             "no schedule applies to %.*s: the program captures streams into "
                             "CUDA graphs (line %d), whose replays would repeat the schedules' "
                             "host-side decisions",
                             (int)t->len, c->v.src + t->off, c->capture_line);
}

static int sched_all(ctx *c, const char *text, cuco_err *e)
{
    /* program order: point-to-point calls were recorded after the collectives */
    for (size_t i = 1; i < c->nsched; i++)
        for (size_t j = i; j > 0 && c->sched_toks[j - 1] > c->sched_toks[j]; j--) {
            size_t t = c->sched_toks[j];
            int g = c->sched_group[j];
            c->sched_toks[j] = c->sched_toks[j - 1];
            c->sched_group[j] = c->sched_group[j - 1];
            c->sched_toks[j - 1] = t;
            c->sched_group[j - 1] = g;
        }
    int rc = 0;
    for (size_t k = 0; k < c->nsched && rc == 0; k++)
        rc = c->capture_line ? sched_not_under_capture(c, k) : sched_apply(c, text, k, e);
    return rc;
}

/* What scan_calls carries from call to call: the ncclGroupStart/End
 * nesting and the point-to-point calls collected for rewrite_p2p. */
typedef struct scan_state {
    int group, group_depth, next_group;
    int nccl_group; /* the open group makes communicators only: NCCL's own */
    p2p_call *p2p;
    size_t np2p;
} scan_state;

static const char *const comm_makers[] = {
    "ncclCommInitRank", "ncclCommInitRankConfig",   "ncclCommSplit",
    "ncclCommShrink",   "ncclCommInitRankScalable", NULL};

/* Whether the group opened at token open makes communicators and issues no
 * visible communication (NCCL's multi-device setup: an ncclCommInitRank per
 * GPU inside one group). It stays NCCL's own group, whose ncclGroupEnd
 * completes the communicators together: without it, each ncclCommInitRank
 * of one thread would wait for the next one. */
static int group_makes_comms_only(const view *v, size_t open)
{
    int depth = 0, makes = 0;
    for (size_t i = open; i < v->n; i++) {
        if (!is_ident(v, i) || !is(v, i + 1, "(") || qualified(v, i))
            continue;
        if (is(v, i, "ncclGroupStart"))
            depth++;
        else if (is(v, i, "ncclGroupEnd") && --depth <= 0)
            return makes;
        else if (in_list(comm_makers, v, i))
            makes = 1;
        else if (in_list(host_collectives, v, i))
            return 0;
    }
    return 0;
}

static int scan_group_call(ctx *c, scan_state *st, size_t i, const char *name)
{
    const cuco_tok *t = T(&c->v, i);
    int start = name[9] == 'S';
    if (start && st->group_depth++ == 0) {
        st->group = ++st->next_group;
        c->group_open = i;
        st->nccl_group = group_makes_comms_only(&c->v, i);
        if (st->nccl_group)
            return cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                     "ncclGroupStart: the group makes communicators and "
                                     "communicates nothing, so it stays NCCL's own group");
    } else if (!start && st->group_depth > 0 && --st->group_depth == 0) {
        st->group = 0;
        if (st->nccl_group) {
            st->nccl_group = 0;
            return 0;
        }
    }
    if (st->nccl_group)
        return 0;
    if (!editable(c, i, name))
        return 0;
    int rc = add_edit(c, i, t->off, t->len, start ? "cuco_tx::group_start" : "cuco_tx::group_end");
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> cuco_tx::%s (groups the device point-to-point calls)", name,
                               start ? "group_start" : "group_end");
    return rc;
}

/* ncclAllGather, ncclReduceScatter, ncclAllReduce -> the device collectives. */
static int scan_collective(ctx *c, scan_state *st, size_t i, const char *name)
{
    const view *v = &c->v;
    const cuco_tok *t = T(v, i);
    args a;
    call_args(v, i + 1, &a);
    int ag = name[4] == 'A' && name[7] == 'G', rs = name[4] == 'R';
    int want = ag ? 6 : 7;
    if (a.n != want) {
        refuse(c, t->line, "%s: expected its %s arguments", name, ag ? "6" : "7");
        return 0;
    }
    if (!editable(c, i, name))
        return 0;
    size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
    size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
    int rc = 0;
    if (!ag)
        rc = check_reduce_args(c, &a, i, name, st->group);
    if (rc == 0 && kept_since(c, kept))
        return keep_call(c, i, st->group); /* stays host NCCL: its own line says why */
    if (rc == 0 && other_comm_kept(c, &a, i, name, st->group, &rc))
        return rc;
    c->stage_call = 0;
    if (rc == 0)
        rc = need_symmetric(c, &a, rs ? 0 : 1, i, name, st->group);
    if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
        return 0; /* this call is refused: its own line says why, no rewrite line */
    if (rc == 0 && kept_since(c, kept))
        return keep_call(c, i, st->group);
    if (rc == 0)
        rc = note_comm(c, &a, want - 2, i);
    const char *to = ag              ? "cuco_tx::all_gather"
                     : rs            ? "cuco_tx::reduce_scatter"
                     : c->stage_call ? "cuco_tx::staged_all_reduce"
                                     : "cuco_tx::all_reduce";
    if (rc == 0)
        rc = add_edit(c, i, t->off, t->len, to);
    if (rc == 0)
        rc = sched_candidate(c, i, st->group);
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> %s (device/ LSA kernel on the same stream)", name, to);
    return rc;
}

/* Broadcast, all-to-all and the other calls of p2p_collectives. */
static int scan_p2p_collective(ctx *c, scan_state *st, size_t i, const char *name)
{
    const view *v = &c->v;
    const cuco_tok *t = T(v, i);
    const p2p_collective *pc = p2p_collective_of(name);
    args a;
    call_args(v, i + 1, &a);
    if (a.n != pc->nargs) {
        char nbuf[16];
        snprintf(nbuf, sizeof nbuf, "%d", pc->nargs);
        refuse(c, t->line, "%s: expected its %s arguments", name, nbuf);
        return 0;
    }
    if (!editable(c, i, name))
        return 0;
    int rc = 0;
    if (other_comm_kept(c, &a, i, name, st->group, &rc))
        return rc;
    size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
    size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
    rc = need_symmetric(c, &a, pc->recv_arg, i, name, st->group);
    if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
        return 0; /* refused on its own line */
    if (rc == 0 && kept_since(c, kept))
        return keep_call(c, i, st->group);
    /* consumer_split_by_source pulls each peer's block from its send buffer */
    if (rc == 0 && (!strcmp(name, "ncclAlltoAll") || !strcmp(name, "ncclAllToAll")))
        rc = need_symmetric(c, &a, 0, i, name, SYMM_OPTIONAL);
    if (rc == 0)
        rc = note_comm(c, &a, pc->nargs - 2, i);
    if (rc == 0)
        rc = add_edit(c, i, t->off, t->len, pc->to);
    if (rc == 0)
        rc = sched_candidate(c, i, st->group);
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> %s (device point-to-point puts into the receivers' "
                               "symmetric buffers)",
                               name, pc->to);
    return rc;
}

/* ncclSend / ncclRecv: collected, rewritten together by rewrite_p2p. */
static int scan_p2p_call(ctx *c, scan_state *st, size_t i, const char *name)
{
    const view *v = &c->v;
    p2p_call pc;
    pc.tok = i;
    pc.is_send = name[4] == 'S';
    pc.group = st->group;
    pc.top = (int)top_start(v, i);
    call_args(v, i + 1, &pc.a);
    if (pc.a.n != 6) {
        refuse(c, T(v, i)->line, "%s: expected its 6 arguments%s", name, NULL);
        return 0;
    }
    if (!editable(c, i, name))
        return 0;
    p2p_call *grown = realloc(st->p2p, (st->np2p + 1) * sizeof(*grown));
    if (!grown)
        return CUCO_ENOMEM;
    st->p2p = grown;
    st->p2p[st->np2p++] = pc;
    return 0;
}

/* Whether token i is in a lambda's body ("[&](...) { ... }", "[] { ... }"),
 * which may run any number of times. */
static int in_lambda(const view *v, size_t i)
{
    for (size_t b = 0; b < i; b++) {
        if (!is(v, b, "{") || match_close(v, b) < i)
            continue;
        size_t k = b;
        while (k > 0 && (is(v, k - 1, "mutable") || is(v, k - 1, "noexcept")))
            k--;
        if (k > 0 && is(v, k - 1, ")")) {
            int d = 0;
            for (k = k - 1; k > 0; k--) {
                d += is(v, k, ")") - is(v, k, "(");
                if (d == 0)
                    break;
            }
        }
        if (k > 0 && is(v, k - 1, "]"))
            return 1;
    }
    return 0;
}

/* Whether the function whose name is at token f runs once: main, or a
 * function the file names once besides its definition and its declarations
 * at file scope, by a call outside any loop and any lambda, in a function
 * that runs once. */
static int runs_once(const ctx *c, size_t f, int depth)
{
    const view *v = &c->v;
    if (f >= v->n || depth >= 8)
        return 0;
    if (is(v, f, "main"))
        return 1;
    size_t use = v->n;
    int uses = 0;
    for (size_t t = 0; t < v->n; t++) {
        if (t == f || !is_ident(v, t) || !same_text(v, t, f))
            continue;
        if (c->fn_of[t] >= v->n)
            continue; /* at file scope: a declaration or another definition */
        uses++;
        use = t;
    }
    if (uses != 1 || !is(v, use + 1, "(") || in_loop(v, use) || in_lambda(v, use))
        return 0;
    return runs_once(c, c->fn_of[use], depth + 1);
}

/* ncclCommInitRank / InitRankConfig / Split: the device communicator is
 * set up right after the call. */
static int scan_comm_init(ctx *c, scan_state *st, size_t i, const char *name)
{
    const view *v = &c->v;
    const cuco_tok *t = T(v, i);
    args a;
    call_args(v, i + 1, &a);
    int k = strcmp(name, "ncclCommSplit") == 0 ? 3 : 0;
    if (other_comm_arg(c, &a, k))
        return cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                 "no device communicator for the one %s makes: the device "
                                 "calls use '%s', its collectives stay host NCCL",
                                 name, c->device_comm);
    c->comm_creations++;
    int nonblocking = strcmp(name, "ncclCommInitRank") != 0 ? nonblocking_line(c) : 0;
    if (st->group_depth > 0 || in_loop(v, i) || threads_line(c))
        /* NCCL's own multi-device pattern: a communicator per GPU, made in a
         * loop inside a group, or one per thread */
        return several_devices(c, i, name, 0);
    if (nonblocking) {
        c->r->refused = 1;
        return cuco_tx_notes_add(&c->r->notes, t->line, "refused",
                                 "%s makes a non-blocking communicator (blocking = 0 at line "
                                 "%d): the device runtime's setup (ncclDevCommCreate, window "
                                 "registration) expects calls that complete on return, not "
                                 "ncclInProgress; make the communicator blocking",
                                 name, nonblocking);
    }
    if (a.n <= k || (c->nblocks != 0 && !in_block(c, t->off)))
        return cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                 "%s is in frozen code: the device communicator is created at the "
                                 "first device collective",
                                 name);
    char *comm = arg_text(v, &a, k);
    size_t lo, hi;
    stmt_span(c, i, &lo, &hi);
    char *ins = comm ? cuco_sprintf(" cuco_tx::comm_setup(*(%s));", comm) : NULL;
    /* the argument is a pointer to the communicator */
    int rc = ins ? add_edit(c, i, hi, 0, ins) : CUCO_ENOMEM;
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                               "device communicator created after %s", name);
    if (rc == 0 && !c->setup_line)
        c->setup_line = t->line;
    if (rc == 0 && scope_map(c) == 0 && c->fn_of[i] < v->n && !in_lambda(v, i))
        c->comm_once = c->comm_once || runs_once(c, c->fn_of[i], 0);
    free(comm);
    free(ins);
    return rc;
}

/* ncclCommDestroy / ncclCommAbort: the device state is released first. */
static int scan_comm_destroy(ctx *c, size_t i, const char *name)
{
    const view *v = &c->v;
    const cuco_tok *t = T(v, i);
    args a;
    call_args(v, i + 1, &a);
    if (a.n != 1 || (c->nblocks != 0 && !in_block(c, t->off)))
        return cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                 "%s is in frozen code: windows and the device communicator are "
                                 "released by the last symmetric free",
                                 name);
    if (other_comm_arg(c, &a, 0))
        return 0; /* a communicator whose calls stay host NCCL: nothing to release */
    char *comm = arg_text(v, &a, 0);
    size_t lo, hi;
    stmt_span(c, i, &lo, &hi);
    /* the body of "for (...) ncclCommDestroy(comms[i]);" gets braces */
    int braces = control_body(v, i, &lo);
    char *ins =
        comm ? cuco_sprintf("%scuco_tx::comm_teardown(%s); ", braces ? "{ " : "", comm) : NULL;
    int rc = ins ? add_edit(c, i, lo, 0, ins) : CUCO_ENOMEM;
    if (rc == 0 && braces)
        rc = add_edit(c, i, hi, 0, " }");
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "teardown",
                               "device communicator and windows released before %s", name);
    free(comm);
    free(ins);
    return rc;
}

/* One identifier of the program: a call cuco rewrites or refuses, or nothing. */
static int scan_one(ctx *c, scan_state *st, size_t i, const char *name, int called)
{
    const view *v = &c->v;
    const cuco_tok *t = T(v, i);
    if (in_list(host_collectives, v, i) && !called) {
        /* what a pointer calls may run anywhere, in a group too */
        if (is_p2p_name(name) || has_group_calls(v))
            return refuse(c, t->line,
                          "%s is used but not called (a function pointer or a macro "
                          "argument?)%s",
                          name, NULL);
        return keep_or_refuse(c, t->line, 0, "%s is used but not called (a function pointer?)%s",
                              name, NULL);
    }
    if (in_list(unsupported_calls, v, i)) {
        if (!called || !editable(c, i, name))
            return 0;
        size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
        int rc =
            keep_or_refuse(c, t->line, st->group, "%s: device/ has no device-side %s", name, name);
        return rc == 0 && kept_since(c, kept) ? keep_call(c, i, st->group) : rc;
    }
    if (!called)
        return 0;
    if (strcmp(name, "ncclGroupStart") == 0 || strcmp(name, "ncclGroupEnd") == 0)
        return scan_group_call(c, st, i, name);
    if (strcmp(name, "ncclAllGather") == 0 || strcmp(name, "ncclReduceScatter") == 0 ||
        strcmp(name, "ncclAllReduce") == 0)
        return scan_collective(c, st, i, name);
    if (p2p_collective_of(name))
        return scan_p2p_collective(c, st, i, name);
    if (strcmp(name, "ncclSend") == 0 || strcmp(name, "ncclRecv") == 0)
        return scan_p2p_call(c, st, i, name);
    if (strcmp(name, "ncclCommInitRankScalable") == 0 || strcmp(name, "ncclCommShrink") == 0)
        c->comm_creations++; /* no device communicator set up after it: counted only */
    if (strcmp(name, "ncclCommInitAll") == 0) {
        c->comm_creations++;
        return several_devices(c, i, name, 1);
    }
    if (strcmp(name, "ncclCommInitRank") == 0 || strcmp(name, "ncclCommInitRankConfig") == 0 ||
        strcmp(name, "ncclCommSplit") == 0)
        return scan_comm_init(c, st, i, name);
    if (strcmp(name, "ncclCommDestroy") == 0 || strcmp(name, "ncclCommAbort") == 0)
        return scan_comm_destroy(c, i, name);
    return 0;
}

static int scan_calls(ctx *c)
{
    const view *v = &c->v;
    scan_state st;
    memset(&st, 0, sizeof(st));
    int rc = 0, capture_line = 0, collective_calls = 0;
    for (size_t i = 0; i < v->n && rc == 0; i++) {
        if (!is_ident(v, i) || qualified(v, i))
            continue;
        int called = is(v, i + 1, "(");
        if (called && !capture_line && in_list(capture_calls, v, i))
            capture_line = T(v, i)->line;
        if (called && in_list(host_collectives, v, i))
            collective_calls++;
        char *name = cuco_strndup(v->src + T(v, i)->off, T(v, i)->len);
        rc = name ? scan_one(c, &st, i, name, called) : CUCO_ENOMEM;
        free(name);
    }
    if (rc == 0 && capture_line && collective_calls) {
        c->capture_line = capture_line;
        rc = cuco_tx_notes_add(&c->r->notes, capture_line, "setup", "%s", capture_note);
    }
    if (rc == 0)
        rc = rewrite_p2p(c, st.p2p, st.np2p);
    if (rc == 0)
        rc = check_one_comm(c);
    free(st.p2p);
    return rc;
}

/* cudaFree inside the blocks -> symm_free (plain pointers fall back to
 * cudaFree); a frozen cudaFree of a symmetric buffer is refused. */
static int rewrite_frees(ctx *c)
{
    const view *v = &c->v;
    if (c->nalloc == 0)
        return 0;
    for (size_t i = 0; i + 1 < v->n; i++) {
        int async = is(v, i, "cudaFreeAsync"), nccl = c->nccl_mem && is(v, i, "ncclMemFree");
        if (!(async || nccl || is(v, i, "cudaFree")) || !is(v, i + 1, "(") ||
            (i > 0 && is(v, i - 1, "::")))
            continue;
        if (c->nblocks == 0 || in_block(c, T(v, i)->off)) {
            int rc = add_edit(c, i, T(v, i)->off, T(v, i)->len,
                              async  ? "cuco_tx::symm_free_async"
                              : nccl ? "cuco_tx::symm_mem_free"
                                     : "cuco_tx::symm_free");
            if (rc != 0)
                return rc;
            continue;
        }
        args a;
        call_args(v, i + 1, &a);
        size_t last = a.n >= 1 ? chain_last(v, a.first[0], a.last[0]) : v->n;
        if (last < v->n) {
            char *nm = cuco_strndup(v->src + T(v, last)->off, T(v, last)->len);
            if (nm && name_seen(&c->symm_names, nm))
                refuse(c, T(v, i)->line, "%s(%s) of a symmetric buffer is in frozen code",
                       nccl ? "ncclMemFree" : "cudaFree", nm);
            free(nm);
        }
    }
    return 0;
}

/* A collective named in a macro's body stays host NCCL (the macro may be
 * expanded anywhere, so only in a file without NCCL groups); a send or a
 * receive there is refused (its peer's call would be rewritten). */
static int keep_macro_call(ctx *c, int line, size_t at, const char *name)
{
    if (is_p2p_name(name) || has_group_calls(&c->v) || (c->nblocks > 0 && !in_block(c, at)))
        return refuse(c, line,
                      "%s inside a preprocessor directive (a macro) cannot be rewritten in "
                      "place%s",
                      name,
                      is_p2p_name(name) ? "" : " (the file has NCCL groups, or it is frozen code)");
    int rc =
        keep_or_refuse(c, line, 0, "%s inside a preprocessor directive (a macro)%s", name, NULL);
    return rc == 0 ? keep_mark(c, 0, at, 0) : rc;
}

/* Whether the preprocessor line at src is a #define. */
static int is_define(const char *src, size_t len)
{
    size_t k = 0;
    while (k < len && (src[k] == '#' || src[k] == ' ' || src[k] == '\t'))
        k++;
    return len - k >= 6 && memcmp(src + k, "define", 6) == 0;
}

/* Collectives named in a macro's body (keep_macro_call); a name in another
 * directive (an #include's path) is not a call. */
static int refuse_macros(ctx *c)
{
    const cuco_lex *lx = &c->v.lx;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind != CUCO_TOK_PREPROC || !is_define(lx->src + t->off, t->len))
            continue;
        for (const char *const *n = host_collectives; *n; n++) {
            size_t nl = strlen(*n);
            for (size_t k = 0; k + nl <= t->len; k++) {
                const char *p = lx->src + t->off + k;
                if (memcmp(p, *n, nl) != 0 || (k > 0 && cuco_tx_ident_char(p[-1])) ||
                    (k + nl < t->len && cuco_tx_ident_char(p[nl])))
                    continue;
                int rc = keep_macro_call(c, t->line, t->off + k, *n);
                if (rc != 0)
                    return rc;
            }
        }
    }
    return 0;
}

/* ---- assembly ------------------------------------------------------------- */

static int cmp_edit(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static size_t line_start(const char *s, size_t off)
{
    while (off > 0 && s[off - 1] != '\n')
        off--;
    return off;
}

static size_t line_after(const char *s, size_t off)
{
    while (s[off] && s[off] != '\n')
        off++;
    return s[off] ? off + 1 : off;
}

/* Where the glue goes: the start of the first block's body (which must be at
 * file scope), or after the last top-level #include. */
static int glue_position(ctx *c, size_t *pos, int *wrap)
{
    const view *v = &c->v;
    if (c->nblocks > 0) {
        size_t at = c->blocks[0].body_start;
        for (size_t i = 0; i < v->n; i++) {
            if (T(v, i)->off >= at) {
                if (v->depth[i] != 0)
                    return refuse(c, c->blocks[0].start_line,
                                  "the first EVOLVE-BLOCK is not at file scope: the device library "
                                  "include and the glue cannot go into it%s%s",
                                  NULL, NULL),
                           1;
                break;
            }
        }
        *pos = at;
        *wrap = 0;
        return 0;
    }
    size_t after = 0;
    const cuco_lex *lx = &v->lx;
    static const char inlined[] = "// cuco: begin of the program's header";
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind == CUCO_TOK_COMMENT && t->len >= sizeof(inlined) - 1 &&
            memcmp(lx->src + t->off, inlined, sizeof(inlined) - 1) == 0) {
            /* a header inlined by headers.c uses the glue: it goes before it */
            after = line_start(lx->src, t->off);
            break;
        }
        if (t->kind == CUCO_TOK_PREPROC && t->dir_len == 7 &&
            memcmp(lx->src + t->dir_off, "include", 7) == 0)
            after = line_after(lx->src, t->off + t->len - (t->len > 0));
    }
    *pos = after;
    *wrap = 1;
    return 0;
}

/* An all-reduce on managed memory (host-readable scratch) through a
 * symmetric staging buffer, made at the first such call: every rank makes
 * the same calls with the same count, in the same order, as symmetric
 * memory requires. */
static const char staged_glue[] =
    "// All-reduces on managed memory, staged through a symmetric buffer\n"
    "namespace cuco_tx {\n"
    "inline ncclResult_t staged_all_reduce(const void* sendbuff, void* recvbuff, size_t count,\n"
    "                                      ncclDataType_t datatype, ncclRedOp_t op,\n"
    "                                      ncclComm_t comm, cudaStream_t stream) {\n"
    "  static void* stage = nullptr;\n"
    "  static size_t stage_bytes = 0;\n"
    "  size_t bytes = count * dtype_size(datatype);\n"
    "  if (!bytes) return CUCO_TX_FAIL(\"staged_all_reduce: unsupported data type\");\n"
    "  if (capturing(stream))  // stream capture: NCCL's own (cuco_tx::capturing)\n"
    "    return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);\n"
    "  if (bytes > stage_bytes) {\n"
    "    if (stage && symm_free(stage) != cudaSuccess) return CUCO_TX_FAIL(\"freeing the "
    "stage\");\n"
    "    if (symm_malloc(&stage, bytes) != cudaSuccess) return CUCO_TX_FAIL(\"no stage\");\n"
    "    stage_bytes = bytes;\n"
    "  }\n"
    "  if (cudaMemcpyAsync(stage, sendbuff, bytes, cudaMemcpyDefault, stream) != cudaSuccess)\n"
    "    return CUCO_TX_FAIL(\"staged_all_reduce: copy in\");\n"
    "  ncclResult_t r = all_reduce(stage, stage, count, datatype, op, comm, stream);\n"
    "  if (r != ncclSuccess) return r;\n"
    "  if (cudaMemcpyAsync(recvbuff, stage, bytes, cudaMemcpyDefault, stream) != cudaSuccess)\n"
    "    return CUCO_TX_FAIL(\"staged_all_reduce: copy out\");\n"
    "  return ncclSuccess;\n"
    "}\n"
    "}  // namespace cuco_tx\n";

/* The knob lines of the schedules the program got (pieces, parts, ranges,
 * transports), into g. */
static void schedule_knob_lines(const ctx *c, cuco_buf *g)
{
    if (c->send_made || c->recv_splits.n)
        cuco_buf_puts(g, "// the pieces sends and receives of 2 MiB and more move in\n"
                         "#define CUCO_P2P_PIECES 8 // cuco:knob run 1 2 4 8 16\n");
    if (c->glue.reads & CUCO_GLUE_READS_P2P)
        cuco_buf_printf(g,
                        "// large sends and receives by the copy engines (no SM)\n"
                        "#define CUCO_P2P_CE %d // cuco:knob run 0 1\n",
                        c->send_made);
    if (c->splits.n) {
        cuco_buf_puts(g, "// the pieces each peer's gathered block is pulled and consumed in\n"
                         "#define CUCO_SPLIT_CHUNKS 4 // cuco:knob run 1 2 4");
        site_switch_condition(g, &c->splits, "CUCO_SPLIT");
    }
    if (c->attn_splits.n) {
        cuco_buf_puts(g, "// the parts each peer's keys are attended in (merged by log-sum-exp)\n"
                         "#define CUCO_ATTN_CHUNKS 1 // cuco:knob run 1 2 4");
        site_switch_condition(g, &c->attn_splits, "CUCO_SPLIT");
        if (c->attn_lends) {
            cuco_buf_puts(g,
                          "// the busiest rank lends queries to the least busy (declared queries)\n"
                          "#define CUCO_ATTN_LEND 1 // cuco:knob run 0 1");
            site_switch_condition(g, &c->attn_splits, "CUCO_SPLIT");
        }
    }
    if (c->produces.n) {
        cuco_buf_puts(
            g, "// the ranges a GEMM or kernel feeding an all-reduce is made and reduced in\n"
               "#define CUCO_PSPLIT_PIECES 8 // cuco:knob run 2 4 8");
        site_switch_condition(g, &c->produces, "CUCO_PSPLIT");
        cuco_buf_puts(g, "// the ranges reduced by the copy engines (no SM) where they can be\n"
                         "#define CUCO_PSPLIT_CE 1 // cuco:knob run 0 1");
        site_switch_condition(g, &c->produces, "CUCO_PSPLIT");
    }
}

/* Whether the file makes one communicator, once (CUCO_TX_ONE_COMM). */
static int one_comm_made(const ctx *c)
{
    return c->comm_creations == 1 && c->comm_once;
}

/* The report's line on when the windows are registered (CUCO_TX_ONE_COMM
 * or at first use, and why), at the first communicator setup inserted. */
static int window_timing_note(ctx *c)
{
    if (!c->setup_line)
        return 0;
    if (one_comm_made(c))
        return cuco_tx_notes_add(&c->r->notes, c->setup_line, "setup",
                                 "windows registered right after this setup and at each later "
                                 "allocation, which every rank reaches (the program makes one "
                                 "communicator, once)");
    char many[48];
    snprintf(many, sizeof many, "the file makes %d communicators", c->comm_creations);
    const char *why = c->comm_creations > 1 ? many
                                            : "its communicator may be made more than once: in a "
                                              "loop, a lambda, or a function main does not call "
                                              "exactly once";
    return cuco_tx_notes_add(&c->r->notes, c->setup_line, "setup",
                             "windows registered at their first use, with the communicator of "
                             "that use, so every rank must reach a rewritten call (%s)",
                             why);
}

static int assemble(ctx *c, const char *text)
{
    size_t pos;
    int wrap;
    if (glue_position(c, &pos, &wrap) != 0 || c->r->refused)
        return 0;
    int with_gemm = c->gemm_splits || c->gemm_produces || c->send_made;
    char *whole = cuco_transform_runtime_for(with_gemm, c->gemm_lt);
    /* conditions are 'and': the program's only all-gather, split */
    c->glue.split_site = c->n_gathers == 1 && c->splits.n == 1 ? (long)c->splits.last : -1;
    char *glue = whole ? cuco_glue_knobs_pruned(whole, &c->glue) : NULL;
    free(whole);
    if (!glue)
        return CUCO_ENOMEM;
    cuco_buf g = CUCO_BUF_INIT;
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-START\n");
    if (with_gemm)
        cuco_buf_puts(&g,
                      "// Schedules consumer_split_by_source / producer_split / send_as_produced:\n"
                      "// the cuBLAS part of the glue\n"
                      "#define CUCO_TX_GEMM_SPLIT 1\n");
    if (c->gemm_lt)
        cuco_buf_puts(&g, "// the cublasLtMatmul part of the glue\n"
                          "#define CUCO_TX_GEMM_LT 1\n");
    if (one_comm_made(c))
        cuco_buf_puts(&g, "// the program makes one communicator, once: windows are\n"
                          "// registered when they are allocated (cuco_tx::eager_comm)\n"
                          "#define CUCO_TX_ONE_COMM 1\n");
    if (window_timing_note(c) != 0) {
        cuco_buf_free(&g);
        return CUCO_ENOMEM;
    }
    schedule_knob_lines(c, &g);
    cuco_buf_puts(&g, glue);
    free(glue);
    if (g.len && g.data[g.len - 1] != '\n')
        cuco_buf_putc(&g, '\n');
    if (c->nccl_mem)
        cuco_buf_puts(
            &g, "// ncclMemAlloc / ncclMemFree of buffers made symmetric: the runtime's windows,\n"
                "// answering ncclResult_t like the calls they replace\n"
                "namespace cuco_tx {\n"
                "inline ncclResult_t symm_mem_alloc(void** p, size_t bytes) {\n"
                "  return symm_malloc(p, bytes) == cudaSuccess ? ncclSuccess : ncclSystemError;\n"
                "}\n"
                "template <typename T> inline ncclResult_t symm_mem_alloc(T** p, size_t bytes) {\n"
                "  return symm_mem_alloc(reinterpret_cast<void**>(p), bytes);\n"
                "}\n"
                "inline ncclResult_t symm_mem_free(void* p) {\n"
                "  for (Buf* b : bufs())\n"
                "    if (b->base == p) return symm_free(p) == cudaSuccess ? ncclSuccess : "
                "ncclSystemError;\n"
                "  return ncclMemFree(p);\n"
                "}\n"
                "}  // namespace cuco_tx\n");
    if (c->staged)
        cuco_buf_puts(&g, staged_glue);
    if (c->knobs.len) {
        cuco_buf_puts(
            &g, "// Schedules early_start_late_wait (CUCO_EARLY_<n>, cuco_tx::early_start) and\n"
                "// consumer_split_by_source (CUCO_SPLIT_<n>), one knob each per call\n");
        cuco_buf_puts(&g, cuco_buf_str(&c->knobs));
    }
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-END\n");
    /* line ranges to wrap (program without blocks), merged */
    size_t nr = 0;
    size_t(*ranges)[2] = malloc((c->nedits + 1) * sizeof(*ranges));
    if (!ranges) {
        cuco_buf_free(&g);
        return CUCO_ENOMEM;
    }
    for (size_t i = 0; i < c->nedits; i++) {
        if (!c->edits[i].wrap)
            continue;
        ranges[nr][0] = line_start(text, c->edits[i].stmt_lo);
        ranges[nr][1] = line_after(text, c->edits[i].stmt_hi > 0 ? c->edits[i].stmt_hi - 1 : 0);
        nr++;
    }
    /* merge overlapping or touching ranges until none is left (small n) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < nr; i++)
            for (size_t j = 0; j < nr; j++)
                if (i != j && ranges[i][1] > ranges[i][0] && ranges[j][1] > ranges[j][0] &&
                    ranges[i][0] <= ranges[j][1] && ranges[j][0] <= ranges[i][1]) {
                    if (ranges[j][0] < ranges[i][0])
                        ranges[i][0] = ranges[j][0];
                    if (ranges[j][1] > ranges[i][1])
                        ranges[i][1] = ranges[j][1];
                    ranges[j][0] = ranges[j][1] = 0;
                    changed = 1;
                }
    }
    int rc = 0;
    for (size_t i = 0; i < nr && rc == 0; i++) {
        if (ranges[i][1] <= ranges[i][0])
            continue;
        rc = add_edit(c, 0, ranges[i][0], 0, "// EVOLVE-BLOCK-START\n");
        if (rc == 0)
            rc = add_edit(c, 0, ranges[i][1], 0,
                          text[ranges[i][1] - 1] != '\n' ? "\n// EVOLVE-BLOCK-END\n"
                                                         : "// EVOLVE-BLOCK-END\n");
    }
    free(ranges);
    if (rc == 0)
        rc = add_edit(c, 0, pos, 0, cuco_buf_str(&g));
    if (rc == 0)
        c->edits[c->nedits - 1].seq = -1; /* the glue goes before a marker at the same place */
    cuco_buf_free(&g);
    if (rc != 0)
        return rc;
    /* insertions at the same offset: markers end before code starts; a START
     * marker at a line start goes before the glue; stable otherwise */
    if (c->nedits > 1)
        qsort(c->edits, c->nedits, sizeof(*c->edits), cmp_edit);
    cuco_buf out = CUCO_BUF_INIT;
    size_t at = 0;
    for (size_t i = 0; i < c->nedits; i++) {
        edit *x = &c->edits[i];
        if (x->off < at)
            continue; /* overlapping edit: cannot happen with token-level edits */
        cuco_buf_append(&out, text + at, x->off - at);
        cuco_buf_puts(&out, x->text);
        at = x->off + x->len;
    }
    cuco_buf_puts(&out, text + at);
    c->r->program = cuco_buf_detach(&out);
    return c->r->program ? 0 : CUCO_ENOMEM;
}

int cuco_transform_rules(const char *file_name, const char *text, cuco_tx_result *r, cuco_err *e)
{
    return cuco_transform_rules_declared(file_name, text, NULL, 0, r, e);
}

/* A note for each symmetric allocation under a branch that reads the rank:
 * windows are registered by every rank together, so a rank that skips the
 * allocation leaves the others waiting at the registration. */
static int rank_branch_notes(ctx *c, cuco_err *e)
{
    if (!c->nalloc)
        return 0;
    size_t *offs = malloc(c->nalloc * sizeof(*offs));
    cuco_rank_branch *b = calloc(c->nalloc, sizeof(*b));
    int rc = offs && b ? 0 : CUCO_ENOMEM;
    for (size_t k = 0; rc == 0 && k < c->nalloc; k++)
        offs[k] = T(&c->v, c->alloc_sites[k])->off;
    if (rc == 0 && cuco_rank_branches(c->v.src, offs, c->nalloc, b, e) != 0)
        rc = e->code ? e->code : CUCO_ENOMEM;
    for (size_t k = 0; rc == 0 && k < c->nalloc; k++) {
        if (!b[k].cond_line)
            continue;
        const cuco_tok *t = T(&c->v, c->alloc_sites[k]);
        char via[96] = "";
        if (b[k].call_line)
            snprintf(via, sizeof via,
                     " (it decides every call of its function, the first at line %d)",
                     b[k].call_line);
        rc = cuco_tx_notes_add(
            &c->r->notes, t->line, "note",
            "%.*s of a symmetric buffer runs only where 'if %s' (line %d) "
            "%s%s, which reads the rank: every rank registers the windows "
            "together, in allocation order, so every rank must allocate it "
            "(else the ranks that did wait at the registration); allocate it "
            "before the branch",
            (int)t->len, c->v.src + t->off, b[k].cond, b[k].cond_line,
            b[k].after_exit ? "does not hold (its branch leaves first)" : "holds", via);
    }
    if (b)
        cuco_rank_branches_free(b, c->nalloc);
    free(b);
    free(offs);
    return rc;
}

int cuco_transform_rules_declared(const char *file_name, const char *text, const cuco_semantic *sem,
                                  size_t n_sem, cuco_tx_result *r, cuco_err *e)
{
    memset(r, 0, sizeof(*r));
    ctx c;
    memset(&c, 0, sizeof(c));
    c.file = file_name;
    c.r = r;
    c.sem = sem;
    c.n_sem = n_sem;
    int rc = cuco_program_blocks(text, &c.blocks, &c.nblocks, e);
    if (rc != 0) {
        if (!e->file)
            cuco_err_prefix(e, "%s", file_name);
        return rc;
    }
    rc = view_open(&c.v, text, e);
    if (rc == 0)
        rc = refuse_macros(&c);
    if (rc == 0)
        rc = choose_device_comm(&c);
    if (rc == 0)
        rc = scan_calls(&c);
    if (rc == 0)
        rc = rewrite_frees(&c);
    if (rc == 0 && cuco_tx_notes_count(&r->notes, "rewrite") == 0 && !r->refused) {
        r->refused = 1;
        cuco_tx_notes_add(&r->notes, 0, "refused",
                          cuco_tx_notes_count(&r->notes, "kept")
                              ? "every NCCL call stays host NCCL (the kept lines say why): "
                                "nothing to transform"
                              : "no NCCL collective or point-to-point call found: nothing to "
                                "transform");
    }
    if (rc == 0 && !r->refused)
        rc = rank_branch_notes(&c, e);
    if (rc == 0 && !r->refused)
        rc = sched_all(&c, text, e);
    if (rc == 0 && !r->refused)
        rc = assemble(&c, text);
    if (rc == 0 && r->refused) {
        free(r->program);
        r->program = NULL;
        rc = cuco_tx_notes_unapply(&r->notes); /* only rewrites that happened are listed */
    }
    if (rc == CUCO_ENOMEM)
        cuco_err_set(e, rc, "out of memory");
    else if (rc == CUCO_EINVAL && !e->code)
        cuco_err_set(e, rc, "the cuco_tx glue is not embedded in this build");
    view_close(&c.v);
    for (size_t i = 0; i < c.nedits; i++)
        free(c.edits[i].text);
    free(c.edits);
    free(c.blocks);
    free(c.alloc_sites);
    free(c.fn_of);
    cuco_strlist_free(&c.symm_names);
    cuco_strlist_free(&c.comm_names);
    cuco_strlist_free(&c.comm_texts);
    free(c.device_comm);
    free(c.comm_lines);
    free(c.sched_toks);
    free(c.sched_group);
    free(c.split_gemms);
    cuco_buf_free(&c.knobs);
    return rc;
}
