/* rank_branch.c: whether a statement runs on some ranks only. Symmetric
 * windows are registered by every rank of a communicator together, in
 * allocation order, so a buffer the transform makes symmetric must be
 * allocated by every rank; an allocation under a branch that reads the rank
 * ("if (rank == 0)", or a flag made from it: "int first = rank == 0; ...
 * if (first)") may not be, and the ranks would then wait at the
 * registration.
 *
 * The rank's names: the rank argument of ncclCommInitRank and
 * ncclCommInitRankConfig, the rank out-argument of MPI_Comm_rank and
 * ncclCommUserRank, then every variable assigned or initialized from an
 * expression that reads one of them (to a fixed point). A name is matched
 * by its last identifier ("c.rank" -> "rank"), so the answer is a hint,
 * not a proof: both branches of an if/else may allocate the same buffer.
 */
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct rank_names {
    const sview *v;
    size_t *toks; /* one token spelling each name */
    size_t n;
} rank_names;

static int names_has(const rank_names *r, size_t t)
{
    for (size_t k = 0; k < r->n; k++)
        if (same_tok(r->v, r->toks[k], t))
            return 1;
    return 0;
}

static int names_add(rank_names *r, size_t t)
{
    if (names_has(r, t))
        return 0;
    size_t *grown = realloc(r->toks, (r->n + 1) * sizeof(*grown));
    if (!grown)
        return -1;
    r->toks = grown;
    r->toks[r->n++] = t;
    return 1;
}

/* Whether tokens [a, b) read a rank name (a variable, or a member spelled
 * like one). */
static int reads_rank(const rank_names *r, size_t a, size_t b)
{
    for (size_t t = a; t < b; t++)
        if (ident(r->v, t) && names_has(r, t))
            return 1;
    return 0;
}

/* The last identifier of argument k of the call whose '(' is at open, when
 * the argument only names a variable ("rank", "&rank", "c.rank",
 * "&c->rank", "*r"); v->n for anything else (a call, an index). */
static size_t named_arg(const sview *v, size_t open, int k)
{
    size_t a, b, last = v->n;
    if (!arg_range(v, open, k, &a, &b))
        return v->n;
    for (size_t t = a; t < b; t++) {
        if (ident(v, t))
            last = t;
        else if (!is(v, t, "&") && !is(v, t, "*") && !is(v, t, ".") && !is(v, t, "->"))
            return v->n;
    }
    return last;
}

static const struct {
    const char *call;
    int arg;
} sources[] = {{"ncclCommInitRank", 3},
               {"ncclCommInitRankConfig", 3},
               {"MPI_Comm_rank", 1},
               {"ncclCommUserRank", 1}};

/* Whether tokens [a, b) call one of the sources ("r = ncclCommInitRank(...,
 * rank)" makes a result code, not a rank). */
static int calls_source(const sview *v, size_t a, size_t b)
{
    for (size_t t = a; t < b; t++)
        for (size_t s = 0; s < sizeof(sources) / sizeof(sources[0]); s++)
            if (is(v, t, sources[s].call))
                return 1;
    return 0;
}

static int seed_names(rank_names *r)
{
    const sview *v = r->v;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!ident(v, i) || !is(v, i + 1, "("))
            continue;
        for (size_t s = 0; s < sizeof(sources) / sizeof(sources[0]); s++) {
            if (!is(v, i, sources[s].call))
                continue;
            size_t t = named_arg(v, i + 1, sources[s].arg);
            if (t < v->n && names_add(r, t) < 0)
                return -1;
        }
    }
    return 0;
}

/* The end (its ';') of the statement an '=' at eq is in, at bracket depth 0. */
static size_t statement_end(const sview *v, size_t eq)
{
    int d = 0;
    for (size_t t = eq; t < v->n; t++) {
        if (is(v, t, "(") || is(v, t, "[") || is(v, t, "{"))
            d++;
        else if (is(v, t, ")") || is(v, t, "]") || is(v, t, "}"))
            d--;
        if (d < 0 || (d == 0 && (is(v, t, ";") || is(v, t, ","))))
            return t;
    }
    return v->n;
}

/* Adds each variable assigned from a rank-reading expression ("x = ...",
 * "T x = ..."); 1 when a name was added, 0 when none, -1 on failure. */
static int grow_names(rank_names *r)
{
    const sview *v = r->v;
    int added = 0;
    for (size_t i = 1; i + 1 < v->n; i++) {
        if (!is(v, i, "=") || !ident(v, i - 1) || names_has(r, i - 1))
            continue;
        size_t end = statement_end(v, i + 1);
        if (reads_rank(r, i + 1, end) && !calls_source(v, i + 1, end)) {
            int rc = names_add(r, i - 1);
            if (rc < 0)
                return -1;
            added = 1;
        }
    }
    return added;
}

/* The last token of the statement or block that starts at body (a nested
 * if with its else, a loop, a block; scan_stmt_after); v->n when it does
 * not end. */
static size_t body_end(const sview *v, size_t body)
{
    size_t after = body < v->n ? scan_stmt_after(v, body, v->n) : v->n;
    return after < v->n ? after - 1 : v->n;
}

/* Whether tokens [a, b] leave the function or the program (return, exit). */
static int leaves(const sview *v, size_t a, size_t b)
{
    static const char *const exits[] = {"return", "exit", "_exit", "abort", "MPI_Abort", NULL};
    for (size_t t = a; t <= b && t < v->n; t++)
        if (in_words(v, t, exits))
            return 1;
    return 0;
}

/* The innermost 'if' (its token) whose condition reads the rank and whose
 * branch (then or else) holds token i, or whose then-branch leaves (return,
 * exit) before i in the same block; v->n when none. */
static size_t rank_if_around(const rank_names *r, size_t i, int *after_exit)
{
    const sview *v = r->v;
    size_t found = v->n;
    for (size_t f = 0; f < i; f++) {
        if (!is(v, f, "if") || !is(v, f + 1, "("))
            continue;
        size_t close = close_of(v, f + 1);
        if (close >= v->n || !reads_rank(r, f + 2, close))
            continue;
        size_t then_end = body_end(v, close + 1);
        int inside = close < i && i <= then_end;
        if (!inside && then_end + 1 < v->n && is(v, then_end + 1, "else"))
            inside = then_end + 1 < i && i <= body_end(v, then_end + 2);
        /* "if (rank >= 2) { ...; return 0; }": what follows in its block
         * runs on the other ranks only */
        size_t block = block_open(v, f);
        int exits = !inside && then_end < i && leaves(v, close + 1, then_end) &&
                    (block >= v->n || i < close_of(v, block));
        if (inside || exits) {
            found = f;
            *after_exit = exits;
        }
    }
    return found;
}

/* The rank 'if' that decides whether token i runs: one around it in its
 * function (rank_if_around), or else one that decides every call of its
 * function, up to 4 functions up (*call_line: the first such call's line);
 * v->n when a call, or the token itself, runs on every rank. */
static size_t rank_if_deciding(const rank_names *r, size_t i, int *after_exit, int *call_line,
                               int depth)
{
    const sview *v = r->v;
    size_t f = rank_if_around(r, i, after_exit);
    size_t body = function_body_of(v, i);
    if (f < v->n || depth >= 4 || body >= v->n)
        return f;
    int lambda = 0;
    size_t name = params_of(v, body, &lambda) - 1;
    if (is(v, name, "main"))
        return v->n;
    size_t found = v->n;
    for (size_t t = 0; t + 1 < v->n; t++) {
        if (!call_of(v, t, name) || function_body_of(v, t) >= v->n)
            continue; /* not a call, or a declaration at file scope */
        int exits = 0, line = 0;
        size_t g = rank_if_deciding(r, t, &exits, &line, depth + 1);
        if (g >= v->n)
            return v->n; /* this call runs on every rank */
        if (found >= v->n) {
            found = g;
            *after_exit = exits;
            *call_line = line ? line : tk(v, t)->line;
        }
    }
    return found;
}

int cuco_rank_branches(const char *text, const size_t *offs, size_t n, cuco_rank_branch *out,
                       cuco_err *e)
{
    memset(out, 0, n * sizeof(*out));
    sview v;
    if (sview_open(&v, text, e) != 0)
        return -1;
    rank_names r = {&v, NULL, 0};
    int rc = seed_names(&r);
    for (int pass = 0; rc == 0 && r.n && pass < 8; pass++) {
        int grew = grow_names(&r);
        rc = grew < 0 ? -1 : 0;
        if (grew <= 0)
            break;
    }
    for (size_t k = 0; rc == 0 && r.n && k < n; k++) {
        size_t i = 0;
        while (i < v.n && tk(&v, i)->off < offs[k])
            i++;
        size_t f =
            i < v.n ? rank_if_deciding(&r, i, &out[k].after_exit, &out[k].call_line, 0) : v.n;
        if (f >= v.n)
            continue;
        size_t close = close_of(&v, f + 1);
        out[k].cond_line = tk(&v, f)->line;
        size_t a = tk(&v, f + 1)->off, b = tk(&v, close)->off + 1;
        out[k].cond = cuco_strndup(text + a, b - a);
        if (!out[k].cond)
            rc = -1;
    }
    free(r.toks);
    sview_close(&v);
    if (rc != 0)
        return cuco_err_set(e, CUCO_ENOMEM, "rank branches: out of memory");
    return 0;
}

void cuco_rank_branches_free(cuco_rank_branch *b, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        free(b[k].cond);
        b[k].cond = NULL;
    }
}
