/* schedule_scan.c: the graph of schedule (a), read from a program's text.
 *
 * Around one communication call (its statement, block and function found by
 * sched_plan.c): the statements of that block become graph nodes (a compound
 * statement is one node, the union of what is in it), each with the head
 * names it mentions (`s.buf`, `L->out` and `ls[i].x` count as `s`, `L`,
 * `ls`), its kind and its stream; the pointer assignments, swaps, tables and
 * range-for bindings of the enclosing function are its aliases; the rest of
 * an NCCL group the call is in is issued with it, never its consumer.
 * scan_place() hands the graph to cuco_sched_place_call(). The splits
 * (split_scan.c) and the plan (sched_plan.c) read the same scan (scan_int.h).
 */
#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"
#include "tx_common.h"
#include <stdlib.h>
#include <string.h>

/* ---- statements ----------------------------------------------------------- */

/* What one statement [a, b) is, for the placement. */

void scan_stmt_free(stmt *s)
{
    free(s->stream);
    cuco_strlist_free(&s->streams);
    cuco_strlist_free(&s->heads);
    cuco_strlist_free(&s->macro_heads);
}

static cuco_sched_kind stronger(cuco_sched_kind a, cuco_sched_kind b)
{
    static const int rank[] = {
        [CUCO_SCHED_PLAIN] = 0, [CUCO_SCHED_WORK] = 1, [CUCO_SCHED_UNKNOWN] = 2,
        [CUCO_SCHED_SYNC] = 3,  [CUCO_SCHED_COMM] = 4, [CUCO_SCHED_EXIT] = 5};
    return rank[a] >= rank[b] ? a : b;
}

/* The text of argument k (0-based) of the call whose '(' or '<<<' is at open;
 * NULL when it has fewer. */
char *scan_arg_text(const sview *v, size_t open, int k, int want_last)
{
    size_t close = close_of(v, open);
    size_t from = open + 1, idx = 0, last_from = open + 1;
    int d = 0;
    for (size_t i = open + 1; i <= close && i < v->n; i++) {
        int end = i == close;
        if (!end && (is(v, i, "(") || is(v, i, "[") || is(v, i, "{")))
            d++;
        else if (!end && (is(v, i, ")") || is(v, i, "]") || is(v, i, "}")))
            d--;
        if (end || (d == 0 && is(v, i, ","))) {
            if (i > from && (int)idx == k && !want_last)
                return cuco_strndup(v->src + tk(v, from)->off,
                                    tk(v, i - 1)->off + tk(v, i - 1)->len - tk(v, from)->off);
            last_from = from;
            idx++;
            from = i + 1;
            if (end && want_last && i > last_from)
                return cuco_strndup(v->src + tk(v, last_from)->off,
                                    tk(v, i - 1)->off + tk(v, i - 1)->len - tk(v, last_from)->off);
        }
    }
    return NULL;
}

static int push_text(cuco_strlist *l, const sview *v, size_t i)
{
    char *s = cuco_strndup(v->src + tk(v, i)->off, tk(v, i)->len);
    int rc = s ? cuco_strlist_push(l, s) : CUCO_ENOMEM;
    free(s);
    return rc;
}

/* The '(' or '<<<' after the name of a call at i; v->n when i is no call. */
/* Whether the identifier at i is the name a declaration with direct
 * initialisation declares (`dim3 grid(x, y);`, `ns::Type t(a);`): a type
 * name right before it, at the start of a statement. */
static int declared_name(const sview *v, size_t i)
{
    if (i == 0 || !ident(v, i - 1) || in_words(v, i - 1, sview_keywords))
        return 0;
    size_t t = i - 1;
    while (t >= 2 && is(v, t - 1, "::") && ident(v, t - 2))
        t -= 2;
    if (t >= 1 && is(v, t - 1, "::")) /* ::T */
        t--;
    return t == 0 || is(v, t - 1, ";") || is(v, t - 1, "{") || is(v, t - 1, "}") ||
           is(v, t - 1, "const");
}

size_t scan_call_open(const sview *v, size_t i)
{
    if (!ident(v, i) || in_words(v, i, sview_keywords) || in_words(v, i, scan_type_words) ||
        declared_name(v, i))
        return v->n;
    if (is(v, i + 1, "(") || is(v, i + 1, "<<<"))
        return i + 1;
    if (is(v, i + 1, "<")) {
        int d = 0;
        for (size_t k = i + 1; k < v->n && k < i + 64; k++) {
            if (is(v, k, "<"))
                d++;
            else if (is(v, k, ">") && --d == 0)
                return is(v, k + 1, "(") || is(v, k + 1, "<<<") ? k + 1 : v->n;
            else if (is(v, k, ";") || is(v, k, "{"))
                break;
        }
    }
    return v->n;
}

int scan_all_caps(const sview *v, size_t i)
{
    const cuco_tok *t = tk(v, i);
    for (size_t k = 0; k < t->len; k++) {
        char ch = v->src[t->off + k];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
            return 0;
    }
    return 1;
}

static int has_sub(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    for (size_t k = 0; k + wl <= n; k++)
        if (memcmp(s + k, w, wl) == 0)
            return 1;
    return 0;
}

/* Whether the name called at i is a variable the file declares as a
 * function pointer (`(*sync_fn)(cudaStream_t)`) or a function object
 * (`std::function<void()> hook`): what it calls is not in the text. */
static int called_variable(const sview *v, size_t i)
{
    for (size_t k = 2; k + 1 < v->n; k++) {
        if (k == i || !same_tok(v, k, i))
            continue;
        if (is(v, k - 1, "*") && is(v, k - 2, "(") && is(v, k + 1, ")"))
            return 1;
        if (is(v, k - 1, ">") && (is(v, k + 1, "=") || is(v, k + 1, ";") || is(v, k + 1, "{")))
            return 1;
    }
    return 0;
}

/* Kind and stream of the call named at i (open: its '(' or '<<<'). */
static int classify_call(const sview *v, size_t i, size_t open, stmt *s)
{
    cuco_sched_kind k = CUCO_SCHED_PLAIN;
    char *stream = NULL;
    size_t getter_member, lambda;
    unsigned reach;
    const cuco_tok *t = tk(v, i);
    const char *name = v->src + t->off;
    int qualified_tx = i >= 2 && is(v, i - 1, "::") && is(v, i - 2, "cuco_tx");
    if (is(v, open, "<<<")) {
        k = scan_launch_reaches_symbols(v, i) || scan_launch_takes_tables(v, i) ? CUCO_SCHED_UNKNOWN
                                                                                : CUCO_SCHED_WORK;
        stream = scan_arg_text(v, open, 3, 0);
        if (!stream)
            stream = cuco_strdup("0");
    } else if (nccl_name(v, i) || (t->len > 4 && memcmp(name, "MPI_", 4) == 0) || qualified_tx) {
        k = CUCO_SCHED_COMM;
    } else if (scan_call_in(v, i, scan_sync_calls)) {
        k = CUCO_SCHED_SYNC;
    } else if (scan_call_in(v, i, scan_indirect_launches)) {
        k = CUCO_SCHED_UNKNOWN; /* its arguments behind void **: any buffer */
    } else if (scan_call_in(v, i, scan_work_calls)) {
        k = CUCO_SCHED_WORK;
        if (is(v, i, "cudaMemcpyAsync") || is(v, i, "cudaMemsetAsync"))
            stream = scan_arg_text(v, open, is(v, i, "cudaMemsetAsync") ? 3 : 4, 0);
        if (!stream && !is(v, i, "cublasLtMatmul"))
            stream = cuco_strdup("0");
    } else if (t->len > 6 && memcmp(name, "cublas", 6) == 0 && has_sub(name, t->len, "Batched") &&
               !has_sub(name, t->len, "StridedBatched")) {
        k = CUCO_SCHED_UNKNOWN; /* device arrays of pointers: any buffer */
    } else if (t->len > 6 && memcmp(name, "cublas", 6) == 0 &&
               (has_sub(name, t->len, "gemm") || has_sub(name, t->len, "Gemm"))) {
        k = CUCO_SCHED_WORK; /* on the handle's stream: unknown here */
    } else if (scan_call_in(v, i, scan_plain_calls) || (is(v, open, "(") && scan_all_caps(v, i))) {
        /* a macro: scan_macro_reach reads its text when the file defines
         * it; one from a header is taken for a wrapper of its arguments */
        k = CUCO_SCHED_PLAIN;
    } else if ((lambda = kernel_lambda_launch(v, i)) < v->n) {
        /* a lambda of the function that launches its first argument */
        k = ident(v, open + 1) && scan_launch_reaches_symbols(v, open + 1) ? CUCO_SCHED_UNKNOWN
                                                                           : CUCO_SCHED_WORK;
        stream = scan_arg_text(v, lambda, 3, 0);
        if (!stream)
            stream = cuco_strdup("0");
    } else if ((reach = scan_function_reach(v, i, 0)) != 0) {
        /* a helper that communicates, joins streams or waits on the host */
        k = reach & SCAN_REACH_COMM ? CUCO_SCHED_COMM : CUCO_SCHED_SYNC;
    } else if (called_variable(v, i)) {
        k = CUCO_SCHED_UNKNOWN; /* a function pointer or std::function: any call */
    } else if (!sview_getter(v, i, &getter_member) && !sview_smart_get(v, i) &&
               !scan_pure_function(v, i, 0)) {
        /* a getter (a smart pointer's get() too) only names its object; a
         * pure function of the file only its arguments */
        s->calls++;
        if (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->")))
            s->method_calls++;
    }
    int rc = 0;
    if (k == CUCO_SCHED_WORK && stream && !cuco_strlist_has(&s->streams, stream))
        rc = cuco_strlist_push(&s->streams, stream);
    if (k == CUCO_SCHED_WORK && !s->stream && stream)
        s->stream = stream;
    else
        free(stream);
    if (rc != 0)
        return rc;
    s->kind = stronger(s->kind, k);
    return 0;
}

/* Whether the '(' at i calls what an expression gives: an element of a
 * table of functions (`hooks[k](n)`) or a dereferenced pointer
 * (`(*hook)(n)`); a cast (`(size_t)(n)`) is none. */
static int call_through_expression(const sview *v, size_t i)
{
    if (i == 0 || !is(v, i, "("))
        return 0;
    if (is(v, i - 1, "]"))
        return 1;
    if (!is(v, i - 1, ")"))
        return 0;
    size_t o = sview_open_of(v, i - 1);
    return o < v->n && is(v, o, "(") && is(v, o + 1, "*");
}

/* A statement that only binds a pointer name ("float *p = a + off;",
 * "p = q;"): no call and no store through a pointer. */
static int binds_name(const sview *v, const stmt *s)
{
    if (s->calls || s->kind != CUCO_SCHED_PLAIN || is(v, s->a, "*"))
        return 0;
    for (size_t i = s->a; i + 1 < s->b; i++)
        if (is(v, i + 1, "=") && ident(v, i))
            return 1;
    return 0;
}

/* Whether the head at i is named here only for a scalar or handle member
 * of an object that holds pointers (`n.dim`, `ctx->blas`:
 * scan_scalar_member, scan_member_of_holder): such an object is a host
 * context, not a buffer, and the member holds none. An address taken
 * (`&m->n`) or a struct of values only (`m->loss`, which may be device
 * memory) keeps the head. */
static int scalar_member_read(const sview *v, size_t i)
{
    return (i == 0 || !is(v, i - 1, "&")) && (is(v, i + 1, ".") || is(v, i + 1, "->")) &&
           ident(v, i + 2) && !is(v, i + 3, ".") && !is(v, i + 3, "->") && !is(v, i + 3, "(") &&
           !is(v, i + 3, "[") && scan_scalar_member(v, i + 2) && scan_member_of_holder(v, i + 2);
}

/* The kind of a declaration of an object of the type named at ty with
 * arguments (`Work w(s);`): what the type's constructors of the file
 * reach (a constructor that records an event synchronises). */
static cuco_sched_kind constructor_kind(const sview *v, size_t ty)
{
    unsigned reach = in_words(v, ty, sview_keywords) ? 0 : scan_function_reach(v, ty, 0);
    return reach & SCAN_REACH_COMM   ? CUCO_SCHED_COMM
           : reach & SCAN_REACH_SYNC ? CUCO_SCHED_SYNC
                                     : CUCO_SCHED_PLAIN;
}

int scan_stmt_classify(const sview *v, stmt *s)
{
    int rc = 0, macro_exits = 0, loop_exits = 0;
    for (size_t i = s->a; i < s->b && rc == 0; i++) {
        /* what token i adds is read into s->kind from kind_but_data_calls,
         * then joined to the whole statement's */
        cuco_sched_kind whole = s->kind;
        s->kind = s->kind_but_data_calls;
        if (is(v, i, "break") || is(v, i, "continue"))
            loop_exits = 1; /* a loop's own: they leave no function */
        else if (in_words(
                     v, i,
                     (const char *const[]){"return", "goto", "throw", "co_return", "case", NULL}) ||
                 (is(v, i, "default") && is(v, i + 1, ":")) ||
                 (ident(v, i) && i == s->a && is(v, i + 1, ":")))
            s->kind = stronger(s->kind, CUCO_SCHED_EXIT);
        size_t open = scan_call_open(v, i);
        if (open < v->n)
            rc = classify_call(v, i, open, s);
        else if (i > s->a && ident(v, i - 1) && (is(v, i + 1, "(") || is(v, i + 1, "{")))
            s->kind = stronger(s->kind, constructor_kind(v, i - 1));
        if (call_through_expression(v, i)) { /* hooks[k](...), (*hook)(...) */
            s->calls++;
            s->kind = stronger(s->kind, CUCO_SCHED_UNKNOWN);
        }
        /* a call of a lambda of the function touches what the lambda holds
         * (what it captures), unless it only launches its arguments */
        int lambda = open < v->n && sview_lambda_body(v, i, NULL) < v->n &&
                     kernel_lambda_launch(v, i) >= v->n;
        if (rc == 0 && ((scan_is_head(v, i) && !scalar_member_read(v, i)) || lambda))
            rc = push_text(&s->heads, v, i);
        unsigned reach = 0;
        if (rc == 0 && ident(v, i))
            rc = scan_macro_reach(v, i, &s->macro_heads, &reach);
        s->macro_opaque |= (reach & SCAN_MACRO_OPAQUE) != 0;
        if (reach & SCAN_MACRO_LAUNCHES)
            s->kind = stronger(s->kind, CUCO_SCHED_WORK);
        if (reach & SCAN_MACRO_OPAQUE)
            s->kind = stronger(s->kind, CUCO_SCHED_UNKNOWN);
        if (reach & SCAN_MACRO_SYNCS)
            s->kind = stronger(s->kind, CUCO_SCHED_SYNC);
        macro_exits |= (reach & SCAN_MACRO_EXITS) != 0;
        int data_call = in_words(v, i, scan_data_calls) && is(v, i + 1, "(");
        s->data_calls += data_call;
        if (!data_call && !(i == s->a && is(v, i, "return")))
            s->kind_but_data_calls = s->kind;
        s->kind = stronger(whole, s->kind);
    }
    for (size_t k = 0; rc == 0 && k < s->macro_heads.n; k++)
        rc = cuco_strlist_push(&s->heads, s->macro_heads.items[k]);
    s->kind_but_macro_exits = loop_exits ? stronger(s->kind, CUCO_SCHED_EXIT) : s->kind;
    s->kind_but_loop_exits = macro_exits ? stronger(s->kind, CUCO_SCHED_EXIT) : s->kind;
    if (macro_exits || loop_exits) {
        s->kind = stronger(s->kind, CUCO_SCHED_EXIT);
        if (loop_exits)
            s->kind_but_data_calls = stronger(s->kind_but_data_calls, CUCO_SCHED_EXIT);
    }
    if (rc == 0 && binds_name(v, s)) {
        cuco_strlist_free(&s->heads);
        cuco_strlist_free(&s->macro_heads);
    }
    return rc;
}

/* ---- the enclosing function and its aliases ------------------------------- */

void scan_fn_scope_free(fn_scope *f)
{
    cuco_strlist_free(&f->alias_a);
    cuco_strlist_free(&f->alias_b);
    cuco_strlist_free(&f->holds_a);
    cuco_strlist_free(&f->holds_b);
    cuco_strlist_free(&f->stores);
    cuco_strlist_free(&f->locals);
    cuco_strlist_free(&f->pointer_params);
    cuco_strlist_free(&f->wild);
}

/* Declared names of [a, b) ("T *x =", "T x;", parameters). */
/* Whether the ',' at comma separates declarators of one declaration in a
 * body that opens at body (`float *p1, *full;`): its statement's first
 * name, before a '=', ',', ';', '[' or '{', is a declaration's. */
static int later_declarator(const sview *v, size_t comma, size_t body)
{
    size_t k = comma;
    for (int d = 0; k > body; k--) {
        d += is(v, k, ")") + is(v, k, "]") + is(v, k, "}") - is(v, k, "(") - is(v, k, "[") -
             is(v, k, "{");
        if (d < 0 || (d == 0 && (is(v, k - 1, ";") || is(v, k - 1, "{") || is(v, k - 1, "}"))))
            break;
    }
    for (size_t n = k; n < comma; n++) {
        if (is(v, n, "(") || is(v, n, "<"))
            return 0; /* a call or template arguments before the first name */
        if (ident(v, n) &&
            (is(v, n + 1, "=") || is(v, n + 1, ",") || is(v, n + 1, "[") || is(v, n + 1, "{")))
            return scan_declaration_at(v, n);
    }
    return 0;
}

static int scan_locals(fn_scope *f, const sview *v, size_t a, size_t b)
{
    int rc = 0;
    for (size_t i = a + 1; i < b && rc == 0; i++) {
        if (!scan_is_head(v, i) ||
            !(is(v, i + 1, "=") || is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, "[") ||
              is(v, i + 1, ")") || is(v, i + 1, "{") || is(v, i + 1, ":")))
            continue;
        int ptr = is(v, i - 1, "*") || is(v, i - 1, "&") || is(v, i - 1, "&&");
        size_t p = i - 1;
        while (p > a && (is(v, p, "*") || is(v, p, "&") || is(v, p, "&&")))
            p--;
        if (i > f->body && is(v, p, ",") && later_declarator(v, p, f->body)) {
            rc = push_text(&f->locals, v, i); /* float *p1, *full; */
            continue;
        }
        if (!(ident(v, p) || is(v, p, ">")) || in_words(v, p, sview_keywords))
            continue;
        /* in the body, a declaration, not a product (`(size_t)i * b[i]`) */
        if (i > f->body && p + 1 < i && !scan_declaration_at(v, i))
            continue;
        rc = push_text(&f->locals, v, i);
        /* a pointer, a reference, or a struct by value that holds pointers
         * (`Ptrs ps`: the caller filled its table) */
        if (rc == 0 && i < f->body && (ptr || (ident(v, p) && scan_struct_holds_pointers(v, p))))
            rc = push_text(&f->pointer_params, v, i);
    }
    return rc;
}

/* Whether the file declares name outside any function body and parameter
 * list as a pointer or a container (`float *g_view;`, a member `float *x_,
 * *view_;`, `std::vector<float *> bufs_;`): a global or member that can hold
 * a buffer. */
static int outer_pointer(const sview *v, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 1; i + 1 < v->n; i++)
        if (ident(v, i) && tk(v, i)->len == len && !memcmp(v->src + tk(v, i)->off, name, len) &&
            (is(v, i - 1, "*") || is(v, i - 1, ">")) &&
            (is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, "=") || is(v, i + 1, "{")) &&
            function_body_of(v, i) >= v->n && sview_paren_around(v, i) >= v->n)
            return 1;
    return 0;
}

/* Whether the function whose parameters open at p runs on the device
 * (__global__ or __device__ before its name): its names are not the host's. */
static int device_function(const sview *v, size_t p)
{
    for (size_t k = p; k-- > 0 && k + 12 > p && !is(v, k, ";") && !is(v, k, "}");)
        if (is(v, k, "__global__") || is(v, k, "__device__"))
            return 1;
    return 0;
}

/* What the host functions of the file make between names that are none of
 * their locals, once for the file (the view's memo): pairs of globals or
 * members (`view_ = y_` in a method), and globals or members a function
 * sets from one of its own locals (`g_view = y + 4` in a setup function
 * taking y), each with the body it comes from. */
typedef struct file_pairs {
    cuco_strlist a, b, wild;
    size_t *pair_body, *wild_body;
} file_pairs;

static void file_pairs_free(void *p)
{
    file_pairs *fp = p;
    if (!fp)
        return;
    cuco_strlist_free(&fp->a);
    cuco_strlist_free(&fp->b);
    cuco_strlist_free(&fp->wild);
    free(fp->pair_body);
    free(fp->wild_body);
    free(fp);
}

static int push_with_body(cuco_strlist *l, size_t **bodies, const char *name, size_t body)
{
    size_t *grown = realloc(*bodies, (l->n + 1) * sizeof(**bodies));
    if (!grown)
        return CUCO_ENOMEM;
    *bodies = grown;
    grown[l->n] = body;
    return cuco_strlist_push(l, name);
}

/* One pair (a, b) of function g into fp: between a local and a global or
 * member pointer, the latter may be any buffer; between two names g does
 * not declare, a pair for every other function. */
static int function_pair(file_pairs *fp, const sview *v, const fn_scope *g, const char *a,
                         const char *b)
{
    int la = cuco_strlist_has(&g->locals, a), lb = cuco_strlist_has(&g->locals, b);
    if (la != lb && outer_pointer(v, la ? b : a))
        return push_with_body(&fp->wild, &fp->wild_body, la ? b : a, g->body);
    if (la || lb)
        return 0;
    int rc = push_with_body(&fp->a, &fp->pair_body, a, g->body);
    return rc == 0 ? cuco_strlist_push(&fp->b, b) : rc;
}

/* The pairs function g (its scope read) adds to fp; what its objects
 * hold counts as an alias there. */
static int function_pairs(file_pairs *fp, const sview *v, const fn_scope *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->alias_a.n && rc == 0; i++)
        rc = function_pair(fp, v, g, g->alias_a.items[i], g->alias_b.items[i]);
    for (size_t i = 0; i < g->holds_a.n && rc == 0; i++)
        rc = function_pair(fp, v, g, g->holds_a.items[i], g->holds_b.items[i]);
    return rc;
}

static int file_pairs_build(const sview *v, file_pairs **out)
{
    file_pairs *fp = calloc(1, sizeof(*fp));
    int rc = fp ? 0 : CUCO_ENOMEM;
    for (size_t o = 0; o < v->n && rc == 0; o++) {
        int lambda = 0;
        size_t p = is(v, o, "{") ? params_of(v, o, &lambda) : v->n;
        if (p >= v->n || lambda || device_function(v, p))
            continue;
        fn_scope g = {.params = p, .body = o, .body_end = close_of(v, o)};
        rc = scan_alias_pairs(&g, v, p, g.body_end);
        if (rc == 0)
            rc = scan_locals(&g, v, p, g.body_end);
        if (rc == 0)
            rc = function_pairs(fp, v, &g);
        scan_fn_scope_free(&g);
    }
    if (rc != 0) {
        file_pairs_free(fp);
        fp = NULL;
    }
    *out = fp;
    return rc;
}

/* The file's pairs (other functions' than f's) joined to f's, where f
 * declares neither name; the globals and members they may set from a local
 * into f->wild. */
static int add_file_pairs(fn_scope *f, const sview *v)
{
    if (!v->memo->data) {
        file_pairs *fp = NULL;
        int rc = file_pairs_build(v, &fp);
        if (rc != 0)
            return rc;
        v->memo->data = fp;
        v->memo->free_data = file_pairs_free;
    }
    const file_pairs *fp = v->memo->data;
    int rc = 0;
    for (size_t i = 0; i < fp->wild.n && rc == 0; i++) {
        const char *w = fp->wild.items[i];
        if (fp->wild_body[i] != f->body && !cuco_strlist_has(&f->locals, w) &&
            !cuco_strlist_has(&f->wild, w))
            rc = cuco_strlist_push(&f->wild, w);
    }
    for (size_t i = 0; i < fp->a.n && rc == 0; i++) {
        const char *a = fp->a.items[i], *b = fp->b.items[i];
        if (fp->pair_body[i] == f->body || cuco_strlist_has(&f->locals, a) ||
            cuco_strlist_has(&f->locals, b))
            continue;
        rc = cuco_strlist_push(&f->alias_a, a);
        if (rc == 0)
            rc = cuco_strlist_push(&f->alias_b, b);
    }
    return rc;
}

/* The function around block brace (through lambdas, to the named function):
 * its alias pairs, and the file's between names it does not declare. */
int scan_fn_scope_find(fn_scope *f, const sview *v, size_t brace)
{
    memset(f, 0, sizeof(*f));
    for (size_t o = brace; o < v->n; o = block_open(v, o)) {
        int lambda = 0;
        size_t p = params_of(v, o, &lambda);
        if (p < v->n && !lambda) {
            f->params = p;
            f->body = o;
            f->body_end = close_of(v, o);
            int rc = scan_alias_pairs(f, v, p, f->body_end);
            if (rc == 0)
                rc = scan_locals(f, v, p, f->body_end);
            if (rc == 0)
                rc = add_file_pairs(f, v);
            if (rc != 0)
                scan_fn_scope_free(f);
            return rc;
        }
        if (o == 0)
            break;
    }
    return CUCO_ENOTFOUND;
}

/* ---- the call's buffers and block ------------------------------------------ */

/* Whether names a and b of f may reach one buffer: what each touches
 * (its aliases and what they hold) meets. */
static int heads_connected(const fn_scope *f, const char *a, const char *b)
{
    cuco_strlist ta = {0}, tb = {0};
    int rc = cuco_strlist_push(&ta, a);
    if (rc == 0)
        rc = cuco_strlist_push(&tb, b);
    if (rc == 0)
        rc = scan_alias_grow(f, &ta, SCAN_GROW_FORWARD);
    if (rc == 0)
        rc = scan_alias_grow(f, &tb, SCAN_GROW_FORWARD);
    int met = rc != 0;
    for (size_t i = 0; i < ta.n && !met; i++)
        met = cuco_strlist_has(&tb, ta.items[i]);
    cuco_strlist_free(&ta);
    cuco_strlist_free(&tb);
    return met;
}

/* The type word of parameter pos of the parameter list at open (`float` of
 * `const float *x`, `Problem` of `const Problem &p`); v->n when it is not
 * one name (a template's arguments, a function pointer). */
static size_t param_type_word(const sview *v, size_t open, int pos)
{
    size_t a, b;
    if (pos < 0 || !arg_range(v, open, pos, &a, &b))
        return v->n;
    for (size_t i = a; i < b; i++) {
        if (!(is(v, i, "*") || is(v, i, "&") || is(v, i, "&&")))
            continue;
        size_t k = i;
        while (k > a && (is(v, k - 1, "const") || is(v, k - 1, "volatile")))
            k--;
        return k > a && ident(v, k - 1) ? k - 1 : v->n;
    }
    return v->n;
}

/* Whether the '}' at token c closes the body of `typedef struct [Tag] {`. */
static int typedef_struct_body(const sview *v, size_t c)
{
    size_t o = block_open(v, c); /* the '{' this '}' closes */
    if (o >= v->n || o < 2)
        return 0;
    size_t kw = ident(v, o - 1) && !is(v, o - 1, "struct") ? o - 2 : o - 1;
    return kw > 0 && kw < v->n && is(v, kw, "struct") && is(v, kw - 1, "typedef");
}

/* Whether token t names a struct or class the file defines: `struct T {`,
 * `class T : ...`, or C's `typedef struct [Tag] { ... } T;`. */
static int file_struct(const sview *v, size_t t)
{
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, t))
            continue;
        if ((is(v, k - 1, "struct") || is(v, k - 1, "class")) &&
            (is(v, k + 1, "{") || is(v, k + 1, ":")))
            return 1;
        if (is(v, k - 1, "}") && (is(v, k + 1, ";") || is(v, k + 1, ",")) &&
            typedef_struct_body(v, k - 1))
            return 1;
    }
    return 0;
}

/* Whether parameters at positions pp and pq of the function whose
 * parameters open at open are of types that cannot be one object: two
 * different types of which one is a struct or class of the file (arithmetic
 * element types are often two views of one buffer: half and uint16_t),
 * neither a parameter of a template the function is; nor, when the one at
 * pq is a struct that holds pointers and the one at pp is no struct, may it
 * hold pp's buffer (`step(net.full, net)`): its callers' arguments say.
 * Where both are structs, the memory one's pointer members reach is not
 * looked at: a member that points into the other's buffer (an arena) is a
 * known gap. */
static int types_apart(const sview *v, size_t open, int pp, int pq)
{
    size_t tp = param_type_word(v, open, pp), tq = param_type_word(v, open, pq);
    if (tp >= v->n || tq >= v->n || same_tok(v, tp, tq))
        return 0;
    int sp = file_struct(v, tp), sq = file_struct(v, tq);
    if (!(sp || sq) || (!sp && scan_struct_holds_pointers(v, tq)))
        return 0;
    for (size_t k = open; k-- > 0 && k + 40 > open && !is(v, k, ";") && !is(v, k, "}");)
        if (is(v, k, "template"))
            return 0; /* its types may be any */
    return 1;
}

/* Whether pointer parameters p and q of fn may be the same buffer: unless at
 * every call of fn in the text (one at least) their arguments have heads
 * that the caller's aliases do not connect (two pointer parameters of the
 * caller: as its own callers pass them, three calls up at most), or are two
 * members of one object that are two allocations (scan_members_distinct). */
static int params_may_alias(const sview *v, const fn_scope *fn, const char *p, const char *q,
                            int depth)
{
    size_t name = fn->params - 1;
    int pp = param_position(v, fn->params, p, strlen(p)),
        pq = param_position(v, fn->params, q, strlen(q)), calls = 0;
    if (pp < 0 || pq < 0 || !ident(v, name))
        return 1;
    if (types_apart(v, fn->params, pp, pq))
        return 0;
    for (size_t k = 0; k + 1 < v->n; k++) {
        if (k == name || !is(v, k + 1, "(") || tk(v, k)->len != tk(v, name)->len ||
            memcmp(v->src + tk(v, k)->off, v->src + tk(v, name)->off, tk(v, k)->len) != 0 ||
            (k > 0 && (is(v, k - 1, ".") || is(v, k - 1, "->"))))
            continue;
        size_t blk = block_open(v, k);
        if (blk >= v->n)
            continue; /* a declaration at file scope */
        size_t a1, b1, a2, b2;
        cuco_strlist h1 = {0}, h2 = {0};
        fn_scope caller;
        int alias = 1;
        int args = arg_range(v, k + 1, pp, &a1, &b1) && arg_range(v, k + 1, pq, &a2, &b2);
        if (args && scan_members_distinct(v, a1, b1, a2, b2)) {
            alias = 0; /* m->x, m->h: two members, each its own allocation */
        } else if (args && scan_expr_heads(v, a1, b1, &h1, 0) == 0 &&
                   scan_expr_heads(v, a2, b2, &h2, 0) == 0 && h1.n == 1 && h2.n == 1 &&
                   scan_fn_scope_find(&caller, v, blk) == 0) {
            alias = heads_connected(&caller, h1.items[0], h2.items[0]);
            /* two pointer parameters of the caller: as its own callers pass
             * them, a few calls up */
            if (!alias && cuco_strlist_has(&caller.pointer_params, h1.items[0]) &&
                cuco_strlist_has(&caller.pointer_params, h2.items[0]))
                alias =
                    depth >= 3 || params_may_alias(v, &caller, h1.items[0], h2.items[0], depth + 1);
            scan_fn_scope_free(&caller);
        }
        cuco_strlist_free(&h1);
        cuco_strlist_free(&h2);
        if (alias)
            return 1;
        calls++;
    }
    return calls == 0;
}

/* The call's buffers through the aliases; whether one is not local; a
 * parameter buffer may alias any pointer parameter. */
int scan_buffers_closure(scan *s)
{
    cuco_strlist all = {0}, via_param = {0};
    int rc = 0;
    for (size_t i = 0; i < s->send.n && rc == 0; i++)
        rc = cuco_strlist_push(&all, s->send.items[i]);
    for (size_t i = 0; i < s->recv.n && rc == 0; i++)
        rc = cuco_strlist_push(&all, s->recv.items[i]);
    for (size_t i = 0; i < s->fn.wild.n && rc == 0 && all.n > 0; i++) {
        if (cuco_strlist_has(&all, s->fn.wild.items[i]))
            continue; /* may be any buffer: the call's too */
        rc = cuco_strlist_push(&all, s->fn.wild.items[i]);
        if (rc == 0)
            rc = cuco_strlist_push(&s->fn.alias_a, all.items[0]);
        if (rc == 0)
            rc = cuco_strlist_push(&s->fn.alias_b, s->fn.wild.items[i]);
    }
    for (int grew = 1; grew && rc == 0;) {
        grew = 0;
        rc = scan_alias_grow(&s->fn, &all, SCAN_GROW_ALIASES);
        for (size_t i = 0; i < all.n && rc == 0 && !grew; i++)
            if (cuco_strlist_has(&s->fn.pointer_params, all.items[i]) &&
                !cuco_strlist_has(&via_param, all.items[i]))
                for (size_t k = 0; k < s->fn.pointer_params.n && rc == 0; k++) {
                    const char *q = s->fn.pointer_params.items[k];
                    if (cuco_strlist_has(&all, q) ||
                        !params_may_alias(s->v, &s->fn, all.items[i], q, 0))
                        continue;
                    rc = cuco_strlist_push(&all, q);
                    if (rc == 0) /* may be the buffer: not whatever else it may be */
                        rc = cuco_strlist_push(&via_param, q);
                    if (rc == 0)
                        rc = cuco_strlist_push(&s->fn.alias_a, all.items[i]);
                    if (rc == 0)
                        rc = cuco_strlist_push(&s->fn.alias_b, q);
                    grew = 1;
                }
    }
    /* a buffer argument that is a global or a member may be what any
     * pointer parameter points to (a caller may pass it, or a getter's
     * value), unless it never leaves its place (scan_member_kept); one
     * that is a parameter may be another parameter only as its callers
     * pass them (params_may_alias, above) */
    int outer = 0;
    for (int l = 0; l < 2; l++) {
        const cuco_strlist *args = l ? &s->recv : &s->send;
        for (size_t i = 0; i < args->n; i++)
            outer |= !cuco_strlist_has(&s->fn.locals, args->items[i]) &&
                     sview_param_index(s->v, s->fn.params, args->items[i]) < 0 &&
                     !scan_member_kept(s->v, args->items[i]);
    }
    for (size_t k = 0; outer && k < s->fn.pointer_params.n && rc == 0; k++) {
        const char *q = s->fn.pointer_params.items[k];
        if (cuco_strlist_has(&all, q))
            continue;
        rc = cuco_strlist_push(&all, q);
        if (rc == 0)
            rc = cuco_strlist_push(&s->fn.alias_a, all.items[0]);
        if (rc == 0)
            rc = cuco_strlist_push(&s->fn.alias_b, q);
    }
    /* what they hold, then every object that holds any of it */
    if (rc == 0)
        rc = scan_alias_grow(&s->fn, &all, SCAN_GROW_FORWARD);
    if (rc == 0)
        rc = scan_alias_grow(&s->fn, &all, SCAN_GROW_BACKWARD);
    for (size_t i = 0; i < all.n; i++)
        if (!cuco_strlist_has(&s->fn.locals, all.items[i]))
            s->globals = 1;
    cuco_strlist_free(&via_param);
    s->all = all;
    return rc;
}

int scan_aliases_of(const sview *v, size_t brace, const char *name, cuco_strlist *out)
{
    scan s = {.v = v};
    memset(out, 0, sizeof(*out));
    int rc = scan_fn_scope_find(&s.fn, v, brace);
    if (rc == 0)
        rc = cuco_strlist_push(&s.send, name);
    if (rc == 0)
        rc = scan_buffers_closure(&s);
    if (rc == 0) {
        *out = s.all;
        memset(&s.all, 0, sizeof(s.all));
    }
    scan_fn_scope_free(&s.fn);
    cuco_strlist_free(&s.send);
    cuco_strlist_free(&s.all);
    return rc;
}

/* Whether statement st names a global or a member (a head that is no
 * local and no parameter of the function): where an escaped buffer may be
 * kept. */
static int names_outer(const scan *s, const stmt *st)
{
    for (size_t i = 0; i < st->heads.n; i++)
        if (!cuco_strlist_has(&s->fn.locals, st->heads.items[i]) &&
            sview_param_index(s->v, s->fn.params, st->heads.items[i]) < 0)
            return 1;
    return 0;
}

/* The statements of the call's block, classified; the call's node. */
int scan_read_block(scan *s, size_t call_stmt)
{
    const sview *v = s->v;
    int rc = 0;
    for (size_t i = s->block + 1; i < s->block_end && rc == 0;) {
        size_t j = scan_stmt_after(v, i, s->block_end);
        if (j <= i)
            j = i + 1;
        if (j > s->block_end)
            j = s->block_end;
        stmt *grown = realloc(s->stmts, (s->n + 1) * sizeof(*grown));
        if (!grown)
            return CUCO_ENOMEM;
        s->stmts = grown;
        stmt *st = &s->stmts[s->n];
        memset(st, 0, sizeof(*st));
        st->a = i;
        st->b = j;
        if (i == call_stmt) {
            s->call = s->n;
            st->kind = CUCO_SCHED_COMM;
        } else {
            rc = scan_stmt_classify(v, st);
            if (rc == 0 && ((st->calls && (s->globals || st->method_calls)) ||
                            (s->escaped && names_outer(s, st)))) {
                st->kind = stronger(st->kind, CUCO_SCHED_UNKNOWN);
                st->kind_but_data_calls = stronger(st->kind_but_data_calls, CUCO_SCHED_UNKNOWN);
            }
        }
        s->n++;
        i = j;
    }
    return rc;
}

int scan_plan_edit(cuco_sched_plan *p, size_t off, size_t len, char *text, size_t stmt_off)
{
    return cuco_sched_edit_push(&p->edits, &p->nedits, off, len, text, stmt_off);
}

/* 1 when the scanned call is a receive (ncclRecv). */
int scan_is_recv(const scan *s)
{
    return s->call_tok < s->v->n && is(s->v, s->call_tok, "ncclRecv");
}

/* Whether tokens [a, b) name the call `name` (ncclGroupStart, ...). */
int scan_holds_call(const sview *v, size_t a, size_t b, const char *name)
{
    for (size_t i = a; i + 1 < b; i++)
        if (is(v, i, name) && is(v, i + 1, "("))
            return 1;
    return 0;
}

/* The statement that ends the NCCL group the call is in (ncclGroupStart
 * before it in its block, not yet ended), when every statement from the
 * call to it is a communication call; (size_t)-1 otherwise. The rules
 * schedule grouped calls only when the group holds collectives that run
 * where they stand (rules_sched.c, group_of_collectives). */
static size_t call_group_end(const scan *s)
{
    const sview *v = s->v;
    int depth = 0;
    for (size_t i = 0; i < s->call && i < s->n; i++)
        depth += scan_holds_call(v, s->stmts[i].a, s->stmts[i].b, "ncclGroupStart") -
                 scan_holds_call(v, s->stmts[i].a, s->stmts[i].b, "ncclGroupEnd");
    for (size_t i = s->call + 1; depth > 0 && i < s->n; i++) {
        const stmt *st = &s->stmts[i];
        if (scan_holds_call(v, st->a, st->b, "ncclGroupEnd") && --depth == 0)
            return i;
        if (st->kind != CUCO_SCHED_COMM)
            return (size_t)-1;
    }
    return (size_t)-1;
}

cuco_sched_graph scan_graph(const scan *s, const cuco_sched_node *nodes, size_t n)
{
    return (cuco_sched_graph){nodes,
                              n,
                              (const char *const *)s->fn.alias_a.items,
                              (const char *const *)s->fn.alias_b.items,
                              s->fn.alias_a.n,
                              (const char *const *)s->fn.holds_a.items,
                              (const char *const *)s->fn.holds_b.items,
                              s->fn.holds_a.n};
}

int scan_place(scan *s, cuco_sched_place *pl)
{
    size_t n = s->n;
    cuco_sched_node *nodes = calloc(n ? n : 1, sizeof(*nodes));
    if (!nodes)
        return CUCO_ENOMEM;
    size_t group_end = call_group_end(s);
    for (size_t i = 0; i < n; i++) {
        stmt *st = &s->stmts[i];
        if (group_end != (size_t)-1 && i > s->call && i <= group_end) {
            /* the rest of the call's group: issued with it, never its consumer */
            nodes[i].kind = CUCO_SCHED_PLAIN;
            nodes[i].line = tk(s->v, st->a)->line;
            continue;
        }
        nodes[i].kind = s->fence && i == s->fence ? CUCO_SCHED_EXIT : st->kind;
        nodes[i].stream = i == s->call ? s->stream : st->stream;
        nodes[i].line = tk(s->v, st->a)->line;
        const cuco_strlist *r = i == s->call ? &s->send : &st->heads;
        const cuco_strlist *w = i == s->call ? &s->recv : &st->heads;
        nodes[i].reads = (const char *const *)r->items;
        nodes[i].nreads = r->n;
        nodes[i].writes = (const char *const *)w->items;
        nodes[i].nwrites = w->n;
    }
    cuco_sched_graph g = scan_graph(s, nodes, n);
    int rc = cuco_sched_place_call(&g, s->call, pl);
    free(nodes);
    return rc;
}
