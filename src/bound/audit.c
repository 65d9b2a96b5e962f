/* audit.c: the static verification audit. A program's success line ("PASS",
 * "PASSED", "OK", "success"...) proves something only when printing it
 * depends on a comparison of computed results. From each success string the
 * audit climbs the enclosing conditions (if/else, ternaries, early returns
 * before it in its blocks) and asks of each condition whether it depends on
 * results: it holds a comparison between two computed values (counts of
 * GPUs and ranks, argc, are not: "if (nDev < nRanks)" decides nothing about
 * results), a call to a
 * difference function (fabs, memcmp, ...), a helper whose returns do, or a
 * variable written from such an expression (assignments, counters bumped
 * under such a condition, out-parameters of a call fed by one, parameters
 * given such a value by a caller). A success line printed in a helper with
 * no such condition is followed to the helper's callers. The analysis is a
 * token-level approximation, not a parser: it can be fooled, but it finds
 * the common hollow checks (PASS printed unconditionally, decided by a
 * constant, or only by rank == 0). */
#include "cuco/bound.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bound_int.h"
#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/grow.h"
#include "cuco/log.h"

#define AUDIT_MAX_DEPTH 8
#define AUDIT_MAX_FILES 64

typedef struct memo {
    int src;
    const bl_func *func;
    char *name; /* NULL for a function's returns */
    int state;  /* 1 in progress, 2 no, 3 yes */
} memo;

typedef struct audit_ctx {
    bl_source *src;
    int n_src;
    memo *memos;
    size_t n_memos, cap_memos;
} audit_ctx;

typedef struct range {
    int a, b; /* tokens [a, b) */
} range;

typedef struct ranges {
    range *r;
    size_t n, cap;
} ranges;

static void ranges_push(ranges *g, int a, int b)
{
    if (a >= b)
        return;
    if (CUCO_GROW(g->r, g->cap, g->n + 1, 8) != 0)
        return;
    g->r[g->n++] = (range){a, b};
}

static int is_ctrl_kw(const bl_source *s, int i)
{
    return bl_is(s, i, "if") || bl_is(s, i, "while") || bl_is(s, i, "for") || bl_is(s, i, "switch");
}

static int tok_is_allcaps(const bl_source *s, int i)
{
    const char *t = s->text + s->tok[i].off;
    int letters = 0;
    for (size_t k = 0; k < s->tok[i].len; k++) {
        if (islower((unsigned char)t[k]))
            return 0;
        if (isupper((unsigned char)t[k]))
            letters++;
    }
    return letters > 0;
}

static int is_const_word(const bl_source *s, int i)
{
    static const char *const w[] = {"true",     "false", "nullptr", "NULL", "sizeof", "static_cast",
                                    "const",    "int",   "bool",    "long", "double", "float",
                                    "unsigned", "char",  "size_t",  "auto", "void",   NULL};
    for (int k = 0; w[k]; k++)
        if (bl_is(s, i, w[k]))
            return 1;
    return tok_is_allcaps(s, i);
}

/* Start of the statement holding token i (inside function body open). */
static int stmt_start(const bl_source *s, int i, int open)
{
    int j = i - 1;
    while (j > open) {
        if (bl_is(s, j, ";") || bl_is(s, j, "{") || bl_is(s, j, "}") || bl_is(s, j, "else") ||
            bl_is(s, j, "do"))
            return j + 1;
        if ((bl_is(s, j, ")") || bl_is(s, j, "]")) && s->tok[j].match >= 0) {
            int m = s->tok[j].match;
            if (bl_is(s, j, ")") && is_ctrl_kw(s, m - 1))
                return j + 1;
            j = m - 1;
            continue;
        }
        j--;
    }
    return open + 1;
}

/* End (index of the ';' or '}') of the statement starting at t. */
static int stmt_end(const bl_source *s, int t, int close)
{
    for (int j = t; j < close; j++) {
        if (bl_is(s, j, ";"))
            return j;
        if (bl_is(s, j, "{") && s->tok[j].match >= 0) {
            int m = s->tok[j].match;
            if (!bl_is(s, m + 1, "else") && !bl_is(s, m + 1, ";") && !bl_is(s, m + 1, ")") &&
                !bl_is(s, m + 1, ","))
                return m;
            j = m;
            continue;
        }
        if ((bl_is(s, j, "(") || bl_is(s, j, "[")) && s->tok[j].match >= 0)
            j = s->tok[j].match;
    }
    return close;
}

static int body_exits(const bl_source *s, int a, int b)
{
    static const char *const w[] = {"return", "exit",  "abort",      "MPI_Abort", "throw",
                                    "goto",   "_exit", "quick_exit", NULL};
    for (int j = a; j <= b && j < s->n; j++)
        for (int k = 0; w[k]; k++)
            if (bl_is(s, j, w[k]))
                return 1;
    return 0;
}

/* Conditions of "if (c) { ... exit ... }" statements in the block opened at
 * `open` before token pos, at any depth (a check loop that returns on the
 * first mismatch guards what follows it). */
static void early_exits(const bl_source *s, int open, int pos, ranges *g)
{
    for (int j = open + 1; j < pos; j++) {
        if (bl_is(s, j, "if") && bl_is(s, j + 1, "(") && s->tok[j + 1].match > 0) {
            int rp = s->tok[j + 1].match;
            int end = stmt_end(s, rp + 1, pos);
            if (end < pos && body_exits(s, rp + 1, end))
                ranges_push(g, j + 2, rp);
        }
    }
}

/* The '(' ')' of the if whose then-branch ends just before the else at e. */
static int if_of_else(const bl_source *s, int e, int open)
{
    int q = e - 1;
    int t;
    if (bl_is(s, q, "}") && s->tok[q].match >= 0)
        t = s->tok[q].match;
    else
        t = stmt_start(s, q, open);
    int rp = t - 1;
    if (bl_is(s, rp, ")") && s->tok[rp].match >= 0 && bl_is(s, s->tok[rp].match - 1, "if"))
        return rp;
    return -1;
}

/* The conditions that decide whether token i runs, inside function f. */
static void guards_of(const bl_source *s, int i, const bl_func *f, ranges *g)
{
    /* A ternary whose branch holds i: walking back, the first '?' with no
     * colon crossed (i in its true branch) or with one (i in its false
     * branch: that colon is its own). A ',' ends the operand that holds i:
     * the ternaries before it, up to the '(' that encloses both, do not. */
    int depth = 0, closed = 0;
    for (int j = i - 1; j > f->open; j--) {
        if ((bl_is(s, j, ")") || bl_is(s, j, "]")) && s->tok[j].match >= 0) {
            j = s->tok[j].match;
            continue;
        }
        if (bl_is(s, j, ";") || bl_is(s, j, "{") || bl_is(s, j, "}"))
            break;
        if (bl_is(s, j, "(")) { /* climb out of a call's argument list */
            depth = closed = 0;
            continue;
        }
        if (bl_is(s, j, ","))
            closed = 1;
        if (closed)
            continue;
        if (bl_is(s, j, ":"))
            depth++;
        else if (bl_is(s, j, "?")) {
            if (depth > 1) {
                depth--;
                continue;
            }
            int a = j - 1;
            while (a > f->open && !bl_is(s, a, ";") && !bl_is(s, a, "{") && !bl_is(s, a, "}") &&
                   !bl_is(s, a, "=") && !bl_is(s, a, ",") && !bl_is(s, a, "return") &&
                   !bl_is(s, a, "<<") && !(bl_is(s, a, "(") && s->tok[a].match > j)) {
                if ((bl_is(s, a, ")") || bl_is(s, a, "]")) && s->tok[a].match >= 0)
                    a = s->tok[a].match;
                a--;
            }
            ranges_push(g, a + 1, j);
            break;
        }
    }
    int pos = stmt_start(s, i, f->open);
    for (int guard = 0; guard < 10000 && pos > f->open; guard++) {
        int p = pos - 1;
        if (p <= f->open) {
            early_exits(s, f->open, pos, g);
            break;
        }
        if (bl_is(s, p, ")") && s->tok[p].match >= 0 && is_ctrl_kw(s, s->tok[p].match - 1)) {
            int lp = s->tok[p].match;
            /* A for loop's header bounds iterations; it decides nothing. */
            if (!bl_is(s, lp - 1, "for"))
                ranges_push(g, lp + 1, p);
            pos = lp - 1;
            continue;
        }
        if (bl_is(s, p, "else")) {
            int rp = if_of_else(s, p, f->open);
            if (rp < 0)
                break;
            int lp = s->tok[rp].match;
            ranges_push(g, lp + 1, rp);
            pos = lp - 1;
            continue;
        }
        if (bl_is(s, p, "do")) {
            pos = p;
            continue;
        }
        if (bl_is(s, p, "{")) {
            early_exits(s, p, pos, g);
            if (p == f->open)
                break;
            pos = p;
            /* A block that is not a control statement's body (a lambda, a
             * plain block): continue from the statement holding it. */
            int q = p - 1;
            if (!(bl_is(s, q, ")") && s->tok[q].match >= 0 && is_ctrl_kw(s, s->tok[q].match - 1)) &&
                !bl_is(s, q, "else") && !bl_is(s, q, "do"))
                pos = stmt_start(s, p, f->open);
            continue;
        }
        /* A statement among others in a block: go to the block's '{', whose
         * owner the next round looks at (and its early exits). */
        int j = p;
        while (j > f->open) {
            if (bl_is(s, j, "}") && s->tok[j].match >= 0) {
                j = s->tok[j].match - 1;
                continue;
            }
            if (bl_is(s, j, "{"))
                break;
            j--;
        }
        if (j < f->open)
            break;
        if (j == f->open) {
            early_exits(s, f->open, pos, g);
            break;
        }
        early_exits(s, j, pos, g);
        pos = j;
        int q = j - 1;
        if (!(bl_is(s, q, ")") && s->tok[q].match >= 0 && is_ctrl_kw(s, s->tok[q].match - 1)) &&
            !bl_is(s, q, "else") && !bl_is(s, q, "do"))
            pos = stmt_start(s, j, f->open);
    }
}

static memo *memo_get(audit_ctx *c, int src, const bl_func *f, const char *name)
{
    for (size_t k = 0; k < c->n_memos; k++) {
        memo *m = &c->memos[k];
        if (m->src == src && m->func == f &&
            ((!m->name && !name) || (m->name && name && !strcmp(m->name, name))))
            return m;
    }
    if (CUCO_GROW(c->memos, c->cap_memos, c->n_memos + 1, 64) != 0)
        return NULL;
    c->memos[c->n_memos] = (memo){src, f, name ? cuco_strdup(name) : NULL, 0};
    return &c->memos[c->n_memos++];
}

static const bl_func *find_func(audit_ctx *c, const char *name, int *src)
{
    for (int k = 0; k < c->n_src; k++)
        for (int i = 0; i < c->src[k].n_funcs; i++)
            if (!strcmp(c->src[k].funcs[i].name, name)) {
                *src = k;
                return &c->src[k].funcs[i];
            }
    return NULL;
}

static int dep_expr(audit_ctx *c, int si, int a, int b, const bl_func *f, int depth);

static int dep_guards(audit_ctx *c, int si, int i, const bl_func *f, int depth)
{
    ranges g = {0};
    guards_of(&c->src[si], i, f, &g);
    int yes = 0;
    for (size_t k = 0; k < g.n && !yes; k++)
        yes = dep_expr(c, si, g.r[k].a, g.r[k].b, f, depth);
    free(g.r);
    return yes;
}

static int is_diff_func(const char *name)
{
    static const char *const d[] = {
        "fabs",  "fabsf", "abs",      "fmax",     "fmaxf",   "fmin",  "fminf",    "memcmp",
        "isnan", "isinf", "isfinite", "allclose", "isclose", "equal", "mismatch", NULL};
    for (int k = 0; d[k]; k++)
        if (!strcmp(name, d[k]))
            return 1;
    return 0;
}

/* Is the name at token i a count or an id of the machine rather than a
 * result: filled by a query of GPUs, ranks or communicators (cudaGetDeviceCount
 * (&n), MPI_Comm_size(.., &n), n = omp_get_num_threads()...), or argc? A guard
 * such as "if (nDev < nRanks)" compares such names and decides nothing about
 * the results. */
static int is_setup_var(const bl_source *s, int i)
{
    static const char *const queries[] = {"cudaGetDeviceCount",
                                          "cuDeviceGetCount",
                                          "cudaGetDevice",
                                          "MPI_Comm_size",
                                          "MPI_Comm_rank",
                                          "ncclCommCount",
                                          "ncclCommUserRank",
                                          "ncclCommCuDevice",
                                          "omp_get_num_threads",
                                          "omp_get_thread_num",
                                          "nvmlDeviceGetCount",
                                          "getDeviceCount",
                                          NULL};
    if (bl_is(s, i, "argc"))
        return 1;
    for (int j = 0; j + 1 < s->n; j++) {
        if (!bl_is_ident(s, j) || s->tok[j].len != s->tok[i].len ||
            memcmp(s->text + s->tok[j].off, s->text + s->tok[i].off, s->tok[i].len) != 0)
            continue;
        int lp = -1;
        if (bl_is(s, j + 1, "=") && j + 3 < s->n && bl_is(s, j + 3, "("))
            lp = j + 3; /* n = query(...) */
        else
            for (int k = j - 1; k > 0 && k > j - 24; k--)
                if (bl_is(s, k, "(") && s->tok[k].match > j) {
                    lp = k; /* query(..., &n) */
                    break;
                }
        if (lp < 1)
            continue;
        for (int q = 0; queries[q]; q++)
            if (bl_is(s, lp - 1, queries[q]))
                return 1;
    }
    return 0;
}

/* Does the operand of a comparison at op (scanning in dir) hold a computed value? */
static int operand_is_data(const bl_source *s, int op, int dir, int a, int b)
{
    int depth = 0;
    for (int j = op + dir; j >= a && j < b; j += dir) {
        if (bl_is(s, j, "(") || bl_is(s, j, "["))
            depth += dir > 0 ? 1 : -1;
        if (bl_is(s, j, ")") || bl_is(s, j, "]"))
            depth += dir > 0 ? -1 : 1;
        if (depth < 0)
            break;
        if (depth == 0 &&
            (bl_is(s, j, "&&") || bl_is(s, j, "||") || bl_is(s, j, "?") || bl_is(s, j, ":") ||
             bl_is(s, j, ",") || bl_is(s, j, "=") || bl_is(s, j, ";")))
            break;
        if (bl_is_ident(s, j) && !is_const_word(s, j) && !bl_is(s, j + 1, "::") &&
            !bl_is(s, j + 1, "(") && !is_setup_var(s, j))
            return 1;
    }
    return 0;
}

static int dep_var(audit_ctx *c, int si, const char *name, const bl_func *f, int depth);
static int dep_returns(audit_ctx *c, int si, const bl_func *f, int depth);

static int dep_expr(audit_ctx *c, int si, int a, int b, const bl_func *f, int depth)
{
    const bl_source *s = &c->src[si];
    if (depth > AUDIT_MAX_DEPTH)
        return 0;
    for (int j = a; j < b; j++) {
        if (s->tok[j].kind == BL_PUNCT &&
            (bl_is(s, j, "<") || bl_is(s, j, ">") || bl_is(s, j, "<=") || bl_is(s, j, ">=") ||
             bl_is(s, j, "==") || bl_is(s, j, "!=")) &&
            operand_is_data(s, j, -1, a, b) && operand_is_data(s, j, +1, a, b))
            return 1;
        if (!bl_is_ident(s, j) || is_const_word(s, j))
            continue;
        /* a member is not a variable of f; a method call (m.check(...)) is
         * followed like a call of the function of that name */
        if ((bl_is(s, j - 1, ".") || bl_is(s, j - 1, "->")) && !bl_is(s, j + 1, "("))
            continue;
        char *name = bl_text(s, j);
        int yes = 0;
        if (bl_is(s, j + 1, "(")) {
            int gs = 0;
            const bl_func *g = is_diff_func(name) ? NULL : find_func(c, name, &gs);
            if (is_diff_func(name))
                yes = 1;
            else if (g && g != f)
                yes = dep_returns(c, gs, g, depth + 1);
        } else if (!bl_is(s, j + 1, "::") && f) {
            yes = dep_var(c, si, name, f, depth + 1);
        }
        free(name);
        if (yes)
            return 1;
    }
    return 0;
}

static int dep_returns(audit_ctx *c, int si, const bl_func *f, int depth)
{
    memo *m = memo_get(c, si, f, NULL);
    if (!m || m->state == 1 || depth > AUDIT_MAX_DEPTH)
        return 0;
    if (m->state)
        return m->state == 3;
    m->state = 1;
    const bl_source *s = &c->src[si];
    int yes = 0;
    for (int j = f->open + 1; j < f->close && !yes; j++) {
        if (!bl_is(s, j, "return"))
            continue;
        int end = stmt_end(s, j, f->close);
        yes = dep_expr(c, si, j + 1, end, f, depth) || dep_guards(c, si, j, f, depth);
    }
    m = memo_get(c, si, f, NULL);
    if (m)
        m->state = yes ? 3 : 2;
    if (yes)
        cuco_debug("audit: what %s() returns depends on compared results", f->name);
    return yes;
}

/* End of an expression starting at a: the ';' or ',' at depth 0, or an
 * unmatched closing bracket. */
static int expr_end(const bl_source *s, int a, int limit)
{
    for (int j = a; j < limit; j++) {
        if (bl_is(s, j, ";") || bl_is(s, j, ",") || bl_is(s, j, ")") || bl_is(s, j, "]") ||
            bl_is(s, j, "}"))
            return j;
        if ((bl_is(s, j, "(") || bl_is(s, j, "[") || bl_is(s, j, "{")) && s->tok[j].match > j)
            j = s->tok[j].match;
    }
    return limit;
}

static int param_index(const bl_source *s, const bl_func *f, const char *name)
{
    int rp = s->tok[f->params_lp].match, idx = 0;
    for (int j = f->params_lp + 1; j < rp; j++) {
        if (bl_is(s, j, ","))
            idx++;
        else if ((bl_is(s, j, "(") || bl_is(s, j, "[") || bl_is(s, j, "<")) && s->tok[j].match > j)
            j = s->tok[j].match;
        else if (bl_is(s, j, name) && bl_is_ident(s, j))
            return idx;
    }
    return -1;
}

/* Token range of argument idx of the call whose '(' is lp. */
static int call_arg(const bl_source *s, int lp, int idx, range *r)
{
    int rp = s->tok[lp].match, k = 0, a = lp + 1;
    if (rp < 0)
        return 0;
    for (int j = lp + 1; j <= rp; j++) {
        if (j == rp || bl_is(s, j, ",")) {
            if (k == idx) {
                *r = (range){a, j};
                return a < j;
            }
            k++;
            a = j + 1;
        } else if ((bl_is(s, j, "(") || bl_is(s, j, "[") || bl_is(s, j, "{")) &&
                   s->tok[j].match > j) {
            j = s->tok[j].match;
        }
    }
    return 0;
}

static int dep_callers(audit_ctx *c, const bl_func *f, int pidx, int depth)
{
    for (int k = 0; k < c->n_src; k++) {
        const bl_source *s = &c->src[k];
        for (int j = 0; j + 1 < s->n; j++) {
            if (!bl_is_ident(s, j) || !bl_is(s, j, f->name) || !bl_is(s, j + 1, "(") ||
                j + 1 == f->params_lp)
                continue;
            const bl_func *g = bl_func_at(s, j);
            range r;
            if (g && call_arg(s, j + 1, pidx, &r) && dep_expr(c, k, r.a, r.b, g, depth))
                return 1;
        }
    }
    return 0;
}

/* printf-like calls only read their arguments. */
static int is_print_call(const bl_source *s, int i)
{
    char *name = bl_text(s, i);
    int yes = strstr(name, "printf") || !strcmp(name, "puts") || !strcmp(name, "fputs") ||
              !strcmp(name, "cuco_log") || !strcmp(name, "fwrite");
    free(name);
    return yes;
}

/* Calls that write into an array argument: MPI receives and reductions,
 * CUDA and C copies. */
static int is_copy_call(const bl_source *s, int i)
{
    char *name = bl_text(s, i);
    int yes = !strncmp(name, "MPI_", 4) || !strncmp(name, "cudaMemcpy", 10) ||
              !strcmp(name, "memcpy") || !strcmp(name, "copy");
    free(name);
    return yes;
}

static int dep_var(audit_ctx *c, int si, const char *name, const bl_func *f, int depth)
{
    memo *m = memo_get(c, si, f, name);
    if (!m || m->state == 1 || depth > AUDIT_MAX_DEPTH)
        return 0;
    if (m->state)
        return m->state == 3;
    m->state = 1;
    const bl_source *s = &c->src[si];
    int yes = 0;
    for (int j = f->open + 1; j < f->close && !yes; j++) {
        if (!bl_is_ident(s, j) || !bl_is(s, j, name) || bl_is(s, j - 1, ".") ||
            bl_is(s, j - 1, "->") || bl_is(s, j - 1, "::"))
            continue;
        int k = j + 1;
        for (;;) {
            if (bl_is(s, k, "[") && s->tok[k].match > k)
                k = s->tok[k].match + 1;
            else if ((bl_is(s, k, ".") || bl_is(s, k, "->")) && bl_is_ident(s, k + 1))
                k += 2;
            else
                break;
        }
        static const char *const assign[] = {
            "=", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "%=", NULL};
        int is_assign = 0;
        for (int a = 0; assign[a]; a++)
            if (bl_is(s, k, assign[a]))
                is_assign = 1;
        if (is_assign) {
            int end = expr_end(s, k + 1, f->close);
            yes = dep_expr(c, si, k + 1, end, f, depth) || dep_guards(c, si, j, f, depth);
        } else if (bl_is(s, k, "++") || bl_is(s, k, "--") || bl_is(s, j - 1, "++") ||
                   bl_is(s, j - 1, "--")) {
            yes = dep_guards(c, si, j, f, depth);
        } else if ((bl_is(s, k, "(") || bl_is(s, k, "{")) && s->tok[k].match > k &&
                   (bl_is_ident(s, j - 1) || bl_is(s, j - 1, "*") || bl_is(s, j - 1, "&") ||
                    bl_is(s, j - 1, ">"))) {
            yes = dep_expr(c, si, k + 1, s->tok[k].match, f, depth); /* T v(e) / T v{e} */
        } else if ((bl_is(s, j - 1, "&") && (bl_is(s, j - 2, "(") || bl_is(s, j - 2, ","))) ||
                   ((bl_is(s, j - 1, "(") || bl_is(s, j - 1, ",")) &&
                    (bl_is(s, k, ",") || bl_is(s, k, ")")))) {
            /* Passed to a call as an out-parameter (&v, or an array to a
             * copy/MPI call): the call's other inputs flow into v. */
            int bare = !bl_is(s, j - 1, "&");
            int lp = j - 1;
            while (lp > f->open && !(bl_is(s, lp, "(") && s->tok[lp].match > j))
                lp--;
            if (lp > f->open && bl_is_ident(s, lp - 1) && !is_ctrl_kw(s, lp - 1) &&
                !is_print_call(s, lp - 1) && (!bare || is_copy_call(s, lp - 1)))
                yes = dep_expr(c, si, lp + 1, s->tok[lp].match, f, depth);
        }
    }
    if (!yes) {
        int pidx = param_index(s, f, name);
        if (pidx >= 0)
            yes = dep_callers(c, f, pidx, depth);
    }
    m = memo_get(c, si, f, name);
    if (m)
        m->state = yes ? 3 : 2;
    if (yes)
        cuco_debug("audit: %s in %s() depends on compared results", name, f->name);
    return yes;
}

/* Is the condition made of constants only (literals, ALL_CAPS macros,
 * true/false, variables only ever assigned such)? */
static int const_expr(audit_ctx *c, int si, int a, int b, const bl_func *f, int depth)
{
    const bl_source *s = &c->src[si];
    if (depth > 3)
        return 0;
    for (int j = a; j < b; j++) {
        if (!bl_is_ident(s, j) || is_const_word(s, j))
            continue;
        if (bl_is(s, j + 1, "(") || !f)
            return 0;
        /* A variable: constant when every write to it assigns a constant. */
        int writes = 0;
        for (int k = f->open + 1; k < f->close; k++) {
            if (s->tok[k].kind != BL_IDENT || s->tok[k].len != s->tok[j].len ||
                memcmp(s->text + s->tok[k].off, s->text + s->tok[j].off, s->tok[j].len))
                continue;
            if (bl_is(s, k - 1, ".") || bl_is(s, k - 1, "->"))
                continue;
            if (bl_is(s, k + 1, "=")) {
                int end = expr_end(s, k + 2, f->close);
                if (!const_expr(c, si, k + 2, end, f, depth + 1))
                    return 0;
                writes++;
            } else if (bl_is(s, k + 1, "++") || bl_is(s, k + 1, "--") || bl_is(s, k - 1, "&") ||
                       bl_is(s, k + 1, "+=") || bl_is(s, k + 1, "-=") || bl_is(s, k + 1, "|=") ||
                       bl_is(s, k + 1, "&=")) {
                return 0;
            }
        }
        char *var = bl_text(s, j);
        int is_param = param_index(s, f, var) >= 0;
        free(var);
        if (writes == 0 || is_param)
            return 0;
    }
    return 1;
}

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return 1;
    return 0;
}

static int is_success_text(const char *lit, size_t n)
{
    char *t = cuco_strndup(lit, n);
    int yes = 0;
    if (!t)
        return 0;
    if (strstr(t, "FAIL") || ci_contains(t, "fail") || ci_contains(t, "unsuccess") ||
        ci_contains(t, "usage") || ci_contains(t, "not "))
        yes = 0;
    else if (strstr(t, "PASS") || ci_contains(t, "passed") || ci_contains(t, "success"))
        yes = 1;
    else {
        /* "OK" as the whole message or at its end ("Verification: OK\n"). */
        size_t l = strlen(t);
        for (;;) {
            if (l >= 2 && t[l - 2] == '\\' && t[l - 1] == 'n')
                l -= 2;
            else if (l > 0 &&
                     (isspace((unsigned char)t[l - 1]) || t[l - 1] == '.' || t[l - 1] == '!'))
                l--;
            else
                break;
        }
        if (l >= 2 && t[l - 1] == 'K' && t[l - 2] == 'O' &&
            (l == 2 || !isalnum((unsigned char)t[l - 3])))
            yes = 1;
    }
    free(t);
    return yes;
}

typedef struct site_result {
    cuco_audit_verdict verdict;
    cuco_buf why;
} site_result;

static void range_text(const bl_source *s, range r, cuco_buf *b)
{
    size_t a = s->tok[r.a].off, z = s->tok[r.b - 1].off + s->tok[r.b - 1].len;
    for (size_t k = a; k < z && k - a < 160; k++)
        cuco_buf_putc(b, s->text[k] == '\n' ? ' ' : s->text[k]);
}

static cuco_audit_verdict site_verdict(audit_ctx *c, int si, int i, int depth, cuco_buf *why)
{
    const bl_source *s = &c->src[si];
    const bl_func *f = bl_func_at(s, i);
    if (!f)
        return CUCO_AUDIT_UNCONDITIONAL;
    ranges g = {0};
    guards_of(s, i, f, &g);
    int all_const = 1;
    for (size_t k = 0; k < g.n; k++) {
        if (dep_expr(c, si, g.r[k].a, g.r[k].b, f, 0)) {
            cuco_buf_printf(why, "%s%s:%d: decided by (", why->len ? "; " : "", s->path,
                            s->tok[g.r[k].a].line);
            range_text(s, g.r[k], why);
            cuco_buf_puts(why, "), which depends on compared results");
            free(g.r);
            return CUCO_AUDIT_CHECKED;
        }
        if (!const_expr(c, si, g.r[k].a, g.r[k].b, f, 0))
            all_const = 0;
    }
    cuco_audit_verdict own = g.n == 0    ? CUCO_AUDIT_UNCONDITIONAL
                             : all_const ? CUCO_AUDIT_CONSTANT
                                         : CUCO_AUDIT_UNRELATED;
    cuco_audit_verdict best = own;
    /* Printed in a helper: the helper's callers decide. */
    if (strcmp(f->name, "main") && depth < 3) {
        for (int k = 0; k < c->n_src; k++) {
            const bl_source *t = &c->src[k];
            for (int j = 0; j + 1 < t->n; j++) {
                if (!bl_is(t, j, f->name) || !bl_is(t, j + 1, "(") || j + 1 == f->params_lp ||
                    !bl_func_at(t, j))
                    continue;
                if (bl_is_ident(t, j - 1) && !bl_is(t, j - 1, "return"))
                    continue;
                cuco_buf sub = CUCO_BUF_INIT;
                cuco_audit_verdict v = site_verdict(c, k, j, depth + 1, &sub);
                if (v == CUCO_AUDIT_CHECKED) {
                    cuco_buf_printf(why, "%sprinted in %s(), called at %s:%d: %s",
                                    why->len ? "; " : "", f->name, t->path, t->tok[j].line,
                                    cuco_buf_str(&sub));
                    cuco_buf_free(&sub);
                    free(g.r);
                    return CUCO_AUDIT_CHECKED;
                }
                cuco_buf_free(&sub);
                if (own == CUCO_AUDIT_UNCONDITIONAL && v > best)
                    best = v;
            }
        }
    }
    if (best == CUCO_AUDIT_UNCONDITIONAL)
        cuco_buf_printf(why, "%sprinted whatever the results are (no condition decides it)",
                        why->len ? "; " : "");
    else if (best == CUCO_AUDIT_CONSTANT)
        cuco_buf_printf(why, "%sdecided by constants only", why->len ? "; " : "");
    else {
        cuco_buf_printf(why, "%sits conditions (", why->len ? "; " : "");
        for (size_t k = 0; k < g.n; k++) {
            if (k)
                cuco_buf_puts(why, ", ");
            range_text(s, g.r[k], why);
        }
        cuco_buf_puts(why, ") do not depend on compared results");
    }
    free(g.r);
    return best;
}

const char *cuco_audit_verdict_name(cuco_audit_verdict v)
{
    switch (v) {
    case CUCO_AUDIT_CHECKED:
        return "checked";
    case CUCO_AUDIT_UNCONDITIONAL:
        return "unconditional";
    case CUCO_AUDIT_CONSTANT:
        return "constant";
    case CUCO_AUDIT_UNRELATED:
        return "unrelated";
    }
    return "unknown";
}

static int load_source(audit_ctx *c, const char *path, cuco_err *e)
{
    char *abs = cuco_path_abs(path);
    if (!abs)
        return cuco_err_set(e, CUCO_ENOTFOUND, "%s: no such file", path);
    for (int k = 0; k < c->n_src; k++)
        if (!strcmp(c->src[k].path, abs)) {
            free(abs);
            return 0;
        }
    if (c->n_src >= AUDIT_MAX_FILES) {
        free(abs);
        return 0;
    }
    bl_source *grown = realloc(c->src, (size_t)(c->n_src + 1) * sizeof *grown);
    if (!grown) {
        free(abs);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    c->src = grown;
    bl_source *s = &c->src[c->n_src];
    memset(s, 0, sizeof *s);
    s->path = abs;
    int rc = cuco_fs_read(abs, &s->text, &s->len, e);
    if (!rc)
        rc = bl_scan(s, e);
    if (rc) {
        bl_source_free(s);
        return rc;
    }
    c->n_src++;
    return 0;
}

/* Follows #include "name" of the file at index k (its folder, then dirs). */
static int follow_includes(audit_ctx *c, int k, const char *const *dirs, cuco_err *e)
{
    for (int j = 0; j < c->src[k].n; j++) {
        const bl_source *s = &c->src[k];
        if (s->tok[j].kind != BL_PP)
            continue;
        const char *t = s->text + s->tok[j].off;
        size_t n = s->tok[j].len;
        char *line = cuco_strndup(t, n);
        char *inc = strstr(line, "include");
        char *q1 = inc ? strchr(inc, '"') : NULL;
        char *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
        if (q1 && q2) {
            *q2 = '\0';
            char *dir = cuco_path_dirname(s->path);
            char *cand = cuco_path_join(dir, q1 + 1);
            free(dir);
            for (size_t d = 0; dirs && dirs[d] && !cuco_fs_exists(cand); d++) {
                free(cand);
                cand = cuco_path_join(dirs[d], q1 + 1);
            }
            if (cuco_fs_exists(cand)) {
                int rc = load_source(c, cand, e);
                if (rc) {
                    free(cand);
                    free(line);
                    return rc;
                }
            }
            free(cand);
        }
        free(line);
    }
    return 0;
}

int cuco_bound_audit_static(const char *path, const char *const *include_dirs, cuco_audit *a,
                            cuco_err *e)
{
    memset(a, 0, sizeof *a);
    audit_ctx c = {0};
    int rc = load_source(&c, path, e);
    for (int k = 0; !rc && k < c.n_src; k++)
        rc = follow_includes(&c, k, include_dirs, e);
    size_t cap = 0;
    for (int k = 0; !rc && k < c.n_src; k++) {
        const bl_source *s = &c.src[k];
        for (int i = 0; i < s->n; i++) {
            if (s->tok[i].kind != BL_STRING || s->tok[i].len < 2)
                continue;
            if (!is_success_text(s->text + s->tok[i].off + 1, s->tok[i].len - 2))
                continue;
            if (CUCO_GROW(a->sites, cap, a->n_sites + 1, 4) != 0) {
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                break;
            }
            cuco_audit_site *site = &a->sites[a->n_sites++];
            cuco_buf why = CUCO_BUF_INIT;
            site->verdict = site_verdict(&c, k, i, 0, &why);
            site->why = cuco_buf_detach(&why);
            site->file = cuco_strdup(s->path);
            site->line = s->tok[i].line;
            site->text = cuco_strndup(s->text + s->tok[i].off, s->tok[i].len);
        }
    }
    if (!rc) {
        bl_comm_use *uses = NULL;
        size_t n_uses = 0;
        bl_audit_comm(c.src, c.n_src, &uses, &n_uses);
        a->comm = n_uses ? calloc(n_uses, sizeof *a->comm) : NULL;
        for (size_t k = 0; a->comm && k < n_uses; k++) {
            cuco_audit_comm *u = &a->comm[a->n_comm++];
            u->file = cuco_strdup(c.src[uses[k].src].path);
            u->line = uses[k].line;
            u->call = cuco_strdup(uses[k].call);
            u->buffer = cuco_strdup(uses[k].buffer);
            u->read = uses[k].read;
            u->read_at = uses[k].read_src >= 0 ? cuco_sprintf("%s:%d", c.src[uses[k].read_src].path,
                                                              uses[k].read_line)
                                               : NULL;
            if (!u->read)
                a->comm_finding = 1;
        }
        bl_comm_uses_free(uses, n_uses);
    }
    if (!rc) {
        size_t bad = 0;
        for (size_t k = 0; k < a->n_sites; k++)
            bad += a->sites[k].verdict != CUCO_AUDIT_CHECKED;
        a->finding = a->n_sites == 0 || bad > 0;
        if (a->n_sites == 0)
            a->summary = cuco_strdup("no success line (PASS, PASSED, OK, success) found: nothing "
                                     "shows that the program checks its results");
        else if (bad)
            a->summary = cuco_sprintf("%zu of %zu success lines are not decided by a comparison of "
                                      "results (%s:%d: %s)",
                                      bad, a->n_sites, a->sites[0].file, a->sites[0].line,
                                      cuco_audit_verdict_name(a->sites[0].verdict));
        else
            a->summary = cuco_sprintf("%zu success line%s, each decided by a comparison of results",
                                      a->n_sites, a->n_sites == 1 ? "" : "s");
        if (bad)
            for (size_t k = 0; k < a->n_sites; k++)
                if (a->sites[k].verdict != CUCO_AUDIT_CHECKED) {
                    free(a->summary);
                    a->summary = cuco_sprintf(
                        "%zu of %zu success lines are not decided by a comparison of results "
                        "(first: %s:%d %s: %s)",
                        bad, a->n_sites, a->sites[k].file, a->sites[k].line, a->sites[k].text,
                        cuco_audit_verdict_name(a->sites[k].verdict));
                    break;
                }
        if (a->comm_finding) {
            size_t unread = 0;
            const cuco_audit_comm *first = NULL;
            for (size_t k = 0; k < a->n_comm; k++)
                if (!a->comm[k].read) {
                    unread++;
                    first = first ? first : &a->comm[k];
                }
            char *more = cuco_sprintf(
                "%s%s%zu of %zu receiving NCCL calls write data that nothing reads, so no "
                "verification can check it (first: %s:%d %s into %s)",
                a->summary ? a->summary : "", a->summary ? "; " : "", unread, a->n_comm,
                first->file, first->line, first->call, first->buffer);
            free(a->summary);
            a->summary = more;
        }
        a->finding = a->finding || a->comm_finding;
    }
    for (size_t k = 0; k < c.n_memos; k++)
        free(c.memos[k].name);
    free(c.memos);
    for (int k = 0; k < c.n_src; k++)
        bl_source_free(&c.src[k]);
    free(c.src);
    if (rc)
        cuco_audit_free(a);
    return rc;
}

void cuco_audit_free(cuco_audit *a)
{
    if (!a)
        return;
    for (size_t k = 0; k < a->n_sites; k++) {
        free(a->sites[k].file);
        free(a->sites[k].text);
        free(a->sites[k].why);
    }
    free(a->sites);
    for (size_t k = 0; k < a->n_comm; k++) {
        free(a->comm[k].file);
        free(a->comm[k].call);
        free(a->comm[k].buffer);
        free(a->comm[k].read_at);
    }
    free(a->comm);
    free(a->summary);
    memset(a, 0, sizeof *a);
}
