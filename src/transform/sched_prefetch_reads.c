/* sched_prefetch_reads.c: prefetch_next's reads in place (scan_int.h).
 *
 * prefetch_next gathers the next iteration's input into a window of the
 * glue's own, and the next call copies that window into its receive buffer.
 * The copy is avoidable where the rest of the body reads the window
 * instead: every later use of the receive buffer in the body written
 * `cuco_tx::prefetched(site, buf)`, which is the window while a taken
 * prefetch stands for the buffer and the buffer otherwise. That is sound
 * only when the body reaches the buffer by that name alone, so it applies
 * when
 *   - the receive argument is a plain name, a pointer local or pointer
 *     parameter of the function (declared `T *buf`), that no call keeps;
 *   - no statement of the body before the call touches the buffer, through
 *     its name or any name that may hold it (its aliases, the parameters
 *     its callers may pass it in, a struct parameter that holds it);
 *   - the call's statement names it nowhere else, and the statements after
 *     the call touch it through its name only (no other holder among their
 *     heads or called): each use of the name a plain read of the pointer
 *     (no `&buf`, no assignment, no declaration), outside any lambda and
 *     any macro's text, in arguments that every enclosing function-like
 *     macro uses as values (never set nor pasted).
 * A flag the body sets through a reference may end the loop before its
 * condition said: cuco_tx::prefetch_settle after the loop then copies the
 * window read last.
 * The glue adds its own conditions at run time (prefetch_in_place): the
 * gather fills the whole allocation, and a later iteration follows.
 */
#include "cuco/buf.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* The all-gather's receive argument. */
enum { ARG_RECV = 1 };

/* Whether the name token at k is declared a pointer there: `T *name`,
 * `T *const name`. */
static int declared_pointer(const sview *v, size_t k)
{
    while (k > 0 && (is(v, k - 1, "const") || is(v, k - 1, "__restrict__") ||
                     is(v, k - 1, "restrict") || is(v, k - 1, "volatile")))
        k--;
    return k > 0 && is(v, k - 1, "*");
}

/* Whether the first use of name in the function (its parameter list, then
 * its body) declares a pointer. */
static int pointer_decl(const scan *s, const char *name)
{
    const sview *v = s->v;
    for (size_t k = s->fn.params; k < s->fn.body_end; k++)
        if (cuco_tok_is(&v->lx, tk(v, k), name))
            return declared_pointer(v, k);
    return 0;
}

/* The names that may hold the buffer name names: its closure (aliases, the
 * globals its callers pass it from, the objects that hold it, the pointer
 * parameters its callers may pass it in or in a struct); *escaped when a
 * call may keep it. */
static int holders_of(const scan *s, const char *name, cuco_strlist *out, int *escaped)
{
    scan r = {.v = s->v, .call = (size_t)-1};
    int rc = scan_fn_scope_find(&r.fn, s->v, s->fn.body);
    if (rc == 0)
        rc = cuco_strlist_push(&r.recv, name);
    if (rc == 0)
        rc = scan_closure_and_escapes(&r);
    *escaped = r.escaped;
    *out = r.all;
    memset(&r.all, 0, sizeof(r.all));
    scan_fn_scope_free(&r.fn);
    cuco_strlist_free(&r.recv);
    cuco_strlist_free(&r.all);
    return rc;
}

/* Whether statement st names one of holders (name itself too unless
 * but_name): among its heads, or called (a lambda or a function object
 * that holds the buffer: `f();`, which no head names). */
static int touches(const sview *v, const stmt *st, const cuco_strlist *holders, const char *name,
                   int but_name)
{
    for (size_t i = 0; i < st->heads.n; i++)
        if (cuco_strlist_has(holders, st->heads.items[i]) &&
            !(but_name && strcmp(st->heads.items[i], name) == 0))
            return 1;
    for (size_t k = st->a; k < st->b; k++) {
        if (!ident(v, k) || !is(v, k + 1, "(") ||
            (k > st->a && (is(v, k - 1, ".") || is(v, k - 1, "->"))))
            continue;
        for (size_t h = 0; h < holders->n; h++)
            if (cuco_tok_is(&v->lx, tk(v, k), holders->items[h]) &&
                !(but_name && strcmp(holders->items[h], name) == 0))
                return 1;
    }
    return 0;
}

/* Whether every function-like macro whose arguments hold token k (from
 * the innermost out, inside [a, k)) uses that argument as a value only. */
static int macro_args_read(const sview *v, size_t a, size_t k)
{
    int depth = 0;
    for (size_t j = k; j-- > a;) {
        if (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")) {
            depth++;
        } else if (is(v, j, "(") || is(v, j, "[") || is(v, j, "{")) {
            if (depth > 0) {
                depth--;
                continue;
            }
            if (is(v, j, "(") && j > a && ident(v, j - 1) &&
                !scan_macro_arg_read(v, j - 1, sview_arg_position(v, j, k)))
                return 0;
        }
    }
    return 1;
}

/* Whether the use of the name at token k reads the pointer only: not a
 * member, an address taken, an assignment or a step, nor a declaration. */
static int plain_read(const sview *v, size_t k)
{
    static const char *const before[] = {".", "->", "::", "&", "++", "--", NULL};
    static const char *const after[] = {
        "=", "+=", "-=", "++", "--", "*=", "/=", "[", "(", "{", NULL};
    if (k == 0 || in_words(v, k - 1, before) || (k + 1 < v->n && in_words(v, k + 1, after)))
        return 0;
    if (ident(v, k - 1) && !is(v, k - 1, "return"))
        return 0; /* `T name`: a declaration */
    return !(is(v, k - 1, "*") && k > 1 && (ident(v, k - 2) || is(v, k - 2, ">")) &&
             !is(v, k - 2, "return"));
}

/* 0 when every use of name in statement st (after the call) can be written
 * prefetched(...): their tokens appended to uses; 1 with *why otherwise. */
static int uses_of(const scan *s, const stmt *st, const char *name, size_t **uses, size_t *n,
                   const char **why)
{
    const sview *v = s->v;
    if (cuco_strlist_has(&st->macro_heads, name)) {
        *why = "a macro's text names it";
        return 1;
    }
    int lambda = 0;
    size_t before = *n;
    for (size_t k = st->a; k < st->b; k++) {
        lambda |= is(v, k, "[") && sview_lambda_body(v, k, NULL) < v->n;
        if (!cuco_tok_is(&v->lx, tk(v, k), name))
            continue;
        if (!plain_read(v, k)) {
            *why = "the body takes its address, sets it or declares the name again";
            return 1;
        }
        if (!macro_args_read(v, st->a, k)) {
            *why = "a macro takes it as an argument that it sets or pastes";
            return 1;
        }
        size_t *grown = realloc(*uses, (*n + 1) * sizeof(*grown));
        if (!grown)
            return CUCO_ENOMEM;
        *uses = grown;
        (*uses)[(*n)++] = k;
    }
    if (lambda && *n > before) {
        *why = "a lambda of the body may read it later";
        return 1;
    }
    return 0;
}

/* The edits that write each use at uses[0..n) prefetched(site, name), and
 * cuco_tx::prefetch_settle after the loop whose body closes at block_end: a
 * loop that ends before its condition said (a flag the body sets through a
 * reference or a callee) leaves the window read last uncopied. */
static int reads_edits(const sview *v, const size_t *uses, size_t n, int site, size_t block_end,
                       cuco_sched_plan *p)
{
    const cuco_tok *end = tk(v, block_end);
    int rc = scan_plan_edit(
        p, end->off + 1, 0,
        cuco_sprintf(" cuco_tx::prefetch_settle(%d, CUCO_PREF_%d);", site, site), end->off);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const cuco_tok *t = tk(v, uses[i]);
        rc = scan_plan_edit(p, t->off, 0, cuco_sprintf("cuco_tx::prefetched(%d, ", site), t->off);
        if (rc == 0)
            rc = scan_plan_edit(p, t->off + t->len, 0, cuco_strdup(")"), t->off);
    }
    return rc;
}

/* Whether the call's statement st names name outside the call's own
 * arguments (`ncclAllGather(..., full, ...), use(full);`). */
static int names_beside_call(const scan *s, const stmt *st, const char *name)
{
    const sview *v = s->v;
    size_t open = s->call_tok + 1, close = close_of(v, open);
    for (size_t k = st->a; k < st->b; k++)
        if ((k < s->call_tok || k > close) && cuco_tok_is(&v->lx, tk(v, k), name))
            return 1;
    return 0;
}

/* Why the body cannot read the buffer in place (statically), or NULL:
 * name is the receive argument's; its uses after the call into *uses. */
static int reads_check(const scan *s, const char *name, size_t **uses, size_t *n, const char **why)
{
    if (!pointer_decl(s, name)) {
        *why = "its receive buffer is no pointer local or parameter of the function";
        return 1;
    }
    cuco_strlist holders = {0};
    int escaped = 0;
    int rc = holders_of(s, name, &holders, &escaped);
    if (rc == 0 && escaped) {
        *why = "a call may keep its receive buffer";
        rc = 1;
    }
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        const stmt *st = &s->stmts[i];
        if (i == s->call && names_beside_call(s, st, name)) {
            *why = "the call's own statement names its receive buffer outside the call";
            rc = 1;
        } else if (i < s->call && touches(s->v, st, &holders, name, 0)) {
            *why = "the body touches its receive buffer before the call";
            rc = 1;
        } else if (i > s->call && touches(s->v, st, &holders, name, 1)) {
            *why = "the body reaches its receive buffer through another name";
            rc = 1;
        } else if (i > s->call) {
            rc = uses_of(s, st, name, uses, n, why);
        }
    }
    cuco_strlist_free(&holders);
    return rc;
}

int sched_prefetch_reads(const scan *s, int site, cuco_sched_plan *p, char **why)
{
    const sview *v = s->v;
    size_t a, b;
    *why = NULL;
    if (!arg_range(v, s->call_tok + 1, ARG_RECV, &a, &b) || b != a + 1 || !ident(v, a)) {
        *why = cuco_strdup("its receive argument is no plain name");
        return *why ? 0 : CUCO_ENOMEM;
    }
    char *name = cuco_strndup(v->src + tk(v, a)->off, tk(v, a)->len);
    size_t *uses = NULL, n = 0;
    const char *no = NULL;
    int rc = name ? reads_check(s, name, &uses, &n, &no) : CUCO_ENOMEM;
    if (rc == 0 && n == 0)
        no = "the body does not read its receive buffer after the call", rc = 1;
    if (rc == 0)
        rc = reads_edits(v, uses, n, site, s->block_end, p);
    if (rc == 1 && !(*why = cuco_strdup(no)))
        rc = CUCO_ENOMEM;
    free(uses);
    free(name);
    return rc > 0 ? 0 : rc;
}
