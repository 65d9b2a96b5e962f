/* send_made.c: schedule send_as_produced, the send mirror of the consumer
 * split (schedule (b)): a send whose buffer cuBLAS GEMMs make, piece by
 * piece, before it. Each piece then goes as soon as the GEMMs that made it
 * are done (the runtime records each GEMM's output range with an event), in
 * place of the whole buffer after the last GEMM.
 *
 * The scan works from the send's buffer, `R.M`, `R->M` or `R` (a variable or
 * one member of one), in the function B that makes and sends it: the
 * function holding the send when the GEMMs are there (or in its helpers),
 * else the one function that calls it (every call passing the same
 * variable). Every use of
 * the buffer in B and in the helpers B calls with R (their parameter standing
 * for it) must be one the scan reads: the operand C of a cuBLAS GEMM (a
 * producer, recorded), an operand A or B, the buffer of a send or receive
 * (the runtime drops records a receive overwrites), an argument of a kernel
 * whose parameter is a pointer to const, an allocation or a free. Anything
 * else (a memset, a kernel that may write it, an alias taken, R passed on
 * to a function the scan does not read) and the schedule does not apply.
 * Records are dropped when B starts (cuco_tx::made_begin at its body's
 * first statement), so what the program does to the buffer outside B never
 * meets a record.
 */
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"
#include "sview.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct made_scan {
    const sview *v;
    size_t root_b;     /* B's variable for the buffer's root */
    size_t member;     /* the token of `cache` in p.cache; v->n: the variable itself */
    size_t body_b;     /* B's '{' */
    size_t *producers; /* name tokens of the recording GEMMs */
    size_t nproducers;
    char *why; /* set when the schedule does not apply */
    int why_line;
} made_scan;

static const char *const alloc_calls[] = {
    "cudaMalloc", "cudaMallocAsync", "cudaMallocManaged", "ncclMemAlloc",
    "cudaFree",   "cudaFreeAsync",   "ncclMemFree",       NULL};
static const char *const p2p_calls[] = {"ncclSend", "ncclRecv", NULL};

static int refuse(made_scan *m, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(made_scan *m, int line, const char *fmt, ...)
{
    if (m->why)
        return 0;
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    int rc = cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (rc != 0) {
        cuco_buf_free(&b);
        return CUCO_ENOMEM;
    }
    m->why = cuco_buf_detach(&b);
    m->why_line = line;
    return 0;
}

/* The name token of the function whose body opens at brace. */
static size_t body_name(const sview *v, size_t brace)
{
    int lambda = 0;
    return params_of(v, brace, &lambda) - 1;
}

/* Position of parameter `name` in the definition whose name token is f; -1. */
static int param_index(const sview *v, size_t f, size_t name)
{
    size_t close = close_of(v, f + 1), a, b;
    for (int k = 0; arg_range(v, f + 1, k, &a, &b) && b <= close; k++)
        for (size_t i = a; i < b; i++)
            if (ident(v, i) && same_tok(v, i, name) && (i + 1 == b || is(v, i + 1, "=")))
                return k;
    return -1;
}

/* The definition (body '{') of the function named like token f; v->n. */
static size_t definition_of(const sview *v, size_t f)
{
    size_t at = 0, body = v->n;
    for (size_t i = sview_next_def(v, f, &at, &body); i < v->n;
         i = sview_next_def(v, f, &at, &body))
        if (!(i > 0 && is(v, i - 1, ".")))
            return body;
    return v->n;
}

/* The call whose argument list holds token i, inside [lo, i): its name token
 * (for a kernel launch, the kernel's) and the argument's index; 0 when i is
 * in no call's arguments (or in an index, a brace, another statement). */
static int enclosing_call(const sview *v, size_t lo, size_t i, size_t *name, int *argk, int *launch)
{
    int d = 0, commas = 0;
    for (size_t k = i; k-- > lo;) {
        if (is(v, k, ")") || is(v, k, "]") || is(v, k, "}")) {
            d++;
        } else if (is(v, k, "(") || is(v, k, "[") || is(v, k, "{")) {
            if (d-- > 0)
                continue;
            if (!is(v, k, "(") || k == 0)
                return 0;
            *argk = commas;
            *launch = is(v, k - 1, ">>>");
            size_t n = k - 1;
            while (*launch && n > lo && !is(v, n, "<<<"))
                n--;
            *name = *launch ? n - 1 : k - 1;
            return ident(v, *name) && !in_words(v, *name, sview_keywords);
        } else if (d == 0 && is(v, k, ",")) {
            commas++;
        } else if (d == 0 && is(v, k, ";")) {
            return 0;
        }
    }
    return 0;
}

/* Whether parameter k of kernel `name` is a pointer to const, read from its
 * first declaration or definition (`name(...)` outside any function body,
 * whatever stands before the name: __launch_bounds__, a template). */
static int const_param(const sview *v, size_t name, int k)
{
    size_t f = 0, a, b;
    while (f + 1 < v->n &&
           !(same_tok(v, f, name) && is(v, f + 1, "(") && function_body_of(v, f) >= v->n))
        f++;
    if (f + 1 >= v->n || !arg_range(v, f + 1, k, &a, &b))
        return 0;
    int seen_const = 0;
    for (size_t i = a; i < b; i++) {
        seen_const |= is(v, i, "const");
        if (is(v, i, "*"))
            return seen_const;
    }
    return 0;
}

/* Forgets what an audit found (to audit another function). */
static void made_scan_reset(made_scan *m)
{
    free(m->producers);
    free(m->why);
    m->producers = NULL;
    m->nproducers = 0;
    m->why = NULL;
    m->why_line = 0;
}

static int add_producer(made_scan *m, size_t g)
{
    for (size_t i = 0; i < m->nproducers; i++)
        if (m->producers[i] == g)
            return 0;
    size_t *p = realloc(m->producers, (m->nproducers + 1) * sizeof *p);
    if (!p)
        return CUCO_ENOMEM;
    m->producers = p;
    m->producers[m->nproducers++] = g;
    return 0;
}

static int audit_body(made_scan *m, size_t body, size_t root, int in_b);

/* The body of the program's function name, called with the buffer as its
 * argument k, audited with that parameter standing for the buffer. */
static int audit_helper(made_scan *m, size_t name, int k, int line)
{
    const sview *v = m->v;
    size_t def = definition_of(v, name), pa, pb;
    if (def >= v->n)
        return refuse(m, line, "the buffer goes to %.*s, which the scan does not read",
                      (int)tk(v, name)->len, v->src + tk(v, name)->off);
    if (!arg_range(v, body_name(v, def) + 1, k, &pa, &pb))
        return refuse(m, line, "a helper's parameters could not be read");
    return audit_body(m, def, pb - 1, 0);
}

/* Whether the variable at i is argument k of the call whose name is at name
 * whole or plus an offset (`buf`, `buf + e`). */
static int passed_at_offset(const sview *v, size_t name, int k, size_t i)
{
    size_t a, b;
    return arg_range(v, name + 1, k, &a, &b) && a == i && (b == i + 1 || is(v, i + 1, "+"));
}

/* One use of the buffer, tokens [i, end) inside the body opening at body
 * (in_b: the function that makes and sends it, whose helpers are read). */
static int buffer_use(made_scan *m, size_t body, size_t i, size_t end, int in_b)
{
    const sview *v = m->v;
    size_t name = 0;
    int k = 0, launch = 0, line = tk(v, i)->line;
    int in_call = enclosing_call(v, body + 1, i, &name, &k, &launch);
    if (m->member >= v->n && i > 0 && is(v, i - 1, "*") &&
        (is(v, end, ";") || is(v, end, ",") ||
         (is(v, end, "=") && (is(v, end + 1, "nullptr") || is(v, end + 1, "NULL")) &&
          (is(v, end + 2, ";") || is(v, end + 2, ",")))))
        return 0; /* T *buf; T *a, *buf; T *buf = nullptr;: its declaration */
    if (!in_call)
        return refuse(m, line, "the buffer is written or aliased outside any call");
    const gemm_api *g = launch ? NULL : gemm_at(v, name);
    if (g)
        return k == g->c ? add_producer(m, name) : 0;
    if (!launch && (in_words(v, name, p2p_calls) || in_words(v, name, alloc_calls)))
        return 0;
    if (launch && const_param(v, name, k))
        return 0;
    if (!launch && in_b && m->member >= v->n && passed_at_offset(v, name, k, i))
        return audit_helper(m, name, k, line); /* a helper of the program: read its body */
    const cuco_tok *t = tk(v, name);
    return launch ? refuse(m, line,
                           "the buffer goes to kernel %.*s through a pointer that is not const",
                           (int)t->len, v->src + t->off)
                  : refuse(m, line, "the buffer goes to %.*s, which the scan does not read",
                           (int)t->len, v->src + t->off);
}

/* The variable itself (root token i) passed whole: to a helper of the
 * program when in B (its body is audited with the parameter standing for
 * it); anything else is refused. */
static int root_passed(made_scan *m, size_t body, size_t i, int in_b)
{
    const sview *v = m->v;
    size_t name = 0, a, b;
    int k = 0, launch = 0;
    int whole = enclosing_call(v, body + 1, i, &name, &k, &launch) && !launch &&
                arg_range(v, name + 1, k, &a, &b) && a == i && b == i + 1;
    if (!in_b || !whole || definition_of(v, name) >= v->n)
        return refuse(m, tk(v, i)->line,
                      "`%.*s` is used whole where the scan cannot follow it (an alias, or an "
                      "argument of a function whose body it does not read)",
                      (int)tk(v, i)->len, v->src + tk(v, i)->off);
    return audit_helper(m, name, k, tk(v, i)->line);
}

/* Every use of the root (named like token root) in the body opening at body. */
static int audit_body(made_scan *m, size_t body, size_t root, int in_b)
{
    const sview *v = m->v;
    size_t end = close_of(v, body);
    int rc = 0;
    for (size_t i = body + 1; i < end && rc == 0 && !m->why; i++) {
        if (!same_tok(v, i, root) ||
            (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::")))
            continue;
        int field = is(v, i + 1, ".") || is(v, i + 1, "->");
        int has_member = m->member < v->n;
        if (has_member && field) {
            if (ident(v, i + 2) && same_tok(v, i + 2, m->member))
                rc = buffer_use(m, body, i, i + 3, in_b);
        } else if (has_member) {
            rc = root_passed(m, body, i, in_b);
        } else if (!field) {
            rc = buffer_use(m, body, i, i + 1, in_b);
        }
    }
    return rc;
}

/* The send's buffer argument [a, b): its root token (*root) and member; 0
 * when it is not `R`, `R.M` or `R->M`, optionally plus an offset. */
static int buffer_path(const sview *v, size_t a, size_t b, size_t *root, size_t *member)
{
    if (is(v, a, "(") && close_of(v, a) + 1 < b && ident(v, close_of(v, a) + 1))
        a = close_of(v, a) + 1; /* (T *)R... */
    if (!ident(v, a))
        return 0;
    *root = a;
    *member = v->n;
    size_t next = a + 1;
    if (is(v, next, ".") || is(v, next, "->")) {
        if (!ident(v, next + 1))
            return 0;
        *member = next + 1;
        next += 2;
    }
    return next == b || is(v, next, "+");
}

/* Whether token root names a parameter of the function of body, or a local
 * it declares (`T R`, `T *R`, `T &R`, then ; = ( { [ or, in a list, ,). */
static int declared_in(const sview *v, size_t body, size_t root)
{
    if (param_index(v, body_name(v, body), root) >= 0)
        return 1;
    size_t end = close_of(v, body);
    for (size_t i = body + 1; i < end; i++)
        if (same_tok(v, i, root) && sview_declarator(v, i, "; = ( { [ ,"))
            return 1;
    return 0;
}

/* B and its variable for the buffer: the function holding the send, or the
 * one function calling it when the buffer's root is a parameter (every call
 * passing the same variable there). */
static int find_b(made_scan *m, size_t send_body, size_t root_s)
{
    const sview *v = m->v;
    size_t f = body_name(v, send_body);
    int j = param_index(v, f, root_s);
    m->body_b = send_body;
    m->root_b = root_s;
    if (j < 0)
        return declared_in(v, send_body, root_s)
                   ? 0
                   : refuse(m, tk(v, root_s)->line,
                            "its buffer is not a variable of the function that sends it (a "
                            "global: what writes it cannot be bounded)");
    size_t caller = v->n, root = v->n, a, b;
    for (size_t i = 0; i + 1 < v->n; i++) {
        if (!call_of(v, i, f))
            continue;
        size_t body = function_body_of(v, i);
        if (!arg_range(v, i + 1, j, &a, &b) || b != a + 1 || !ident(v, a) || body >= v->n ||
            (caller < v->n && (body != caller || !same_tok(v, a, root))))
            return refuse(m, tk(v, i)->line,
                          "the function that sends it is called from several functions, or not "
                          "with one variable for the buffer");
        caller = body;
        root = a;
    }
    if (caller >= v->n)
        return 0; /* no call in the program: B is the sender itself */
    m->body_b = caller;
    m->root_b = root;
    return declared_in(v, caller, root)
               ? 0
               : refuse(m, tk(v, root)->line,
                        "the buffer's variable is not one of the calling function's");
}

static int add_plan_edit(cuco_send_made_plan *p, size_t off, size_t len, char *text)
{
    return cuco_sched_edit_push(&p->edits, &p->nedits, off, len, text, off);
}

/* The edits: made_begin first in B, the producers' record glue, and the
 * send's made_site argument. */
static int made_edits(made_scan *m, size_t call, int site, int (*editable)(void *, size_t),
                      void *ctx, cuco_send_made_plan *p)
{
    const sview *v = m->v;
    size_t first = m->body_b + 1, a, b;
    if (editable && !editable(ctx, tk(v, first)->off))
        return refuse(m, tk(v, first)->line, "the function that makes and sends it is frozen");
    for (size_t i = 0; i < m->nproducers; i++)
        if (editable && !editable(ctx, tk(v, m->producers[i])->off))
            return refuse(m, tk(v, m->producers[i])->line, "a GEMM that makes it is frozen");
    int rc = add_plan_edit(p, tk(v, first)->off, 0,
                           cuco_sprintf("cuco_tx::made_begin(%d);\n    ", site));
    for (size_t i = 0; rc == 0 && i < m->nproducers; i++) {
        size_t g = m->producers[i];
        const gemm_api *api = gemm_at(v, g);
        rc = add_plan_edit(p, tk(v, g)->off, tk(v, g)->len, cuco_strdup(api->record_glue));
        if (rc == 0 && arg_range(v, g + 1, 0, &a, &b))
            rc =
                add_plan_edit(p, tk(v, a)->off, 0, cuco_sprintf("%d, CUCO_SENDP_%d, ", site, site));
    }
    if (rc == 0 && arg_range(v, call + 1, 0, &a, &b))
        rc = add_plan_edit(p, tk(v, a)->off, 0,
                           cuco_sprintf("cuco_tx::made_site(%d, CUCO_SENDP_%d), ", site, site));
    return rc;
}

static int made_note(made_scan *m, size_t call, cuco_send_made_plan *p)
{
    const sview *v = m->v;
    if (m->why) {
        p->note =
            m->why_line ? cuco_sprintf("line %d: %s", m->why_line, m->why) : cuco_strdup(m->why);
        return p->note ? 0 : CUCO_ENOMEM;
    }
    const cuco_tok *fn = tk(v, body_name(v, m->body_b));
    p->gemm_line = tk(v, m->producers[0])->line;
    p->note =
        cuco_sprintf("ncclSend at line %d sends a buffer that %zu cuBLAS GEMM call%s (line "
                     "%d%s) make%s in %.*s and the functions it calls: each of its "
                     "CUCO_P2P_PIECES pieces goes as soon as the GEMMs that make it are done, "
                     "by the copy engine (CUCO_P2P_CE)",
                     tk(v, call)->line, m->nproducers, m->nproducers == 1 ? "" : "s", p->gemm_line,
                     m->nproducers == 1 ? "" : ", ...", m->nproducers == 1 ? "s" : "", (int)fn->len,
                     v->src + fn->off);
    return p->note ? 0 : CUCO_ENOMEM;
}

/* What may write the buffer unseen by the audit, in B: another name for
 * it (an alias, or a pointer parameter B's callers may pass it to), a
 * launch whose arguments sit behind void ** (cudaLaunchKernel and kin), a
 * kernel reaching memory no argument names (a __device__ variable). */
static int audit_hidden(made_scan *m)
{
    const sview *v = m->v;
    char *root = cuco_strndup(v->src + tk(v, m->root_b)->off, tk(v, m->root_b)->len);
    cuco_strlist names = {0};
    int rc = root ? scan_aliases_of(v, m->body_b, root, &names) : CUCO_ENOMEM;
    for (size_t i = 0; rc == 0 && i < names.n; i++)
        if (strcmp(names.items[i], root) != 0)
            rc = refuse(m, tk(v, m->root_b)->line,
                        "`%s` may hold the same buffer as `%s` (an alias, or a pointer parameter "
                        "its callers may pass it to): what writes it is not followed",
                        names.items[i], root);
    cuco_strlist_free(&names);
    free(root);
    size_t end = close_of(v, m->body_b);
    for (size_t i = m->body_b + 1; rc == 0 && i < end && !m->why; i++) {
        if (scan_call_in(v, i, scan_indirect_launches))
            rc = refuse(m, tk(v, i)->line,
                        "%.*s launches a kernel whose arguments the scan cannot read",
                        (int)tk(v, i)->len, v->src + tk(v, i)->off);
        else if (ident(v, i) && is(v, i + 1, "<<<") && scan_launch_reaches_symbols(v, i))
            rc = refuse(m, tk(v, i)->line,
                        "kernel %.*s may write memory no argument names (a __device__ "
                        "variable)",
                        (int)tk(v, i)->len, v->src + tk(v, i)->off);
    }
    return rc;
}

int send_made_scan_view(const sview *v, size_t call_off, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx,
                        cuco_send_made_plan *plan, cuco_err *e)
{
    memset(plan, 0, sizeof *plan);
    int rc = 0;
    made_scan m = {.v = v, .member = v->n};
    size_t c = 0, a, b, root = 0;
    while (rc == 0 && c < v->n && tk(v, c)->off != call_off)
        c++;
    if (rc == 0 && (c >= v->n || !is(v, c + 1, "(")))
        rc = cuco_err_set(e, CUCO_EINVAL, "no call at byte %zu", call_off);
    size_t body = rc == 0 ? function_body_of(v, c) : v->n;
    if (rc == 0 && body >= v->n)
        rc = refuse(&m, tk(v, c)->line, "the send is not inside a function");
    else if (rc == 0 &&
             (!arg_range(v, c + 1, 0, &a, &b) || !buffer_path(v, a, b, &root, &m.member)))
        rc = refuse(&m, tk(v, c)->line,
                    "its buffer is not a variable or one member of one (plus an offset)");
    if (rc == 0 && !m.why && declared_in(v, body, root)) {
        /* first the function holding the send: GEMMs there, or in its helpers */
        m.body_b = body;
        m.root_b = root;
        rc = audit_body(&m, body, root, 1);
        if (rc == 0 && (m.why || m.nproducers == 0))
            made_scan_reset(&m);
    }
    if (rc == 0 && !m.why && m.nproducers == 0)
        rc = find_b(&m, body, root);
    if (rc == 0 && !m.why && m.nproducers == 0)
        rc = audit_body(&m, m.body_b, m.root_b, 1);
    if (rc == 0 && !m.why && m.nproducers == 0)
        rc = refuse(&m, 0,
                    "no cuBLAS GEMM writes its buffer in the function that sends it or the "
                    "helpers that function calls with it");
    if (rc == 0 && !m.why)
        rc = audit_hidden(&m);
    if (rc == 0 && !m.why)
        rc = made_edits(&m, c, site, editable, ctx, plan);
    if (rc == 0)
        rc = made_note(&m, c, plan);
    plan->applies = rc == 0 && !m.why;
    free(m.producers);
    free(m.why);
    return rc;
}

int cuco_send_made_scan(const char *text, size_t call_off, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx,
                        cuco_send_made_plan *plan, cuco_err *e)
{
    sview v;
    int rc = sview_open(&v, text, e);
    if (rc == 0)
        rc = send_made_scan_view(&v, call_off, site, editable, ctx, plan, e);
    else
        memset(plan, 0, sizeof(*plan));
    sview_close(&v);
    return rc;
}

void cuco_send_made_plan_free(cuco_send_made_plan *plan)
{
    if (!plan)
        return;
    cuco_sched_edits_free(plan->edits, plan->nedits);
    free(plan->note);
    memset(plan, 0, sizeof *plan);
}
