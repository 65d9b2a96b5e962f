/* scan_callee.c: what a call may do with its arguments, for the alias scan
 * (scan_int.h): the calls that only make or ask for something, the library
 * calls that keep no pointer, the parameter a function of the file declares
 * at a position, whether it can be made to hold another pointer (T **out,
 * T *&out, Params &out, or an address into a pointer to non-const),
 * whether the function only reads its members (c.comm, c->stream: then it
 * sets nothing through it), and whether it touches no memory at all (a
 * grid-size helper: scan_pure_function). */
#include <string.h>

#include "scan_int.h"

/* Calls that take addresses only to make or ask for something: no pointer
 * they are given ends up holding another. */
static const char *const making_calls[] = {"cudaMalloc",
                                           "cudaMallocAsync",
                                           "cudaMallocHost",
                                           "cudaHostAlloc",
                                           "cudaMallocManaged",
                                           "cudaMallocPitch",
                                           "ncclMemAlloc",
                                           "cudaStreamCreate",
                                           "cudaStreamCreateWithFlags",
                                           "cudaStreamCreateWithPriority",
                                           "cudaEventCreate",
                                           "cudaEventCreateWithFlags",
                                           "cudaGetDevice",
                                           "cudaGetDeviceCount",
                                           "cudaDeviceGetAttribute",
                                           "cudaGetDeviceProperties",
                                           "ncclCommInitRank",
                                           "ncclCommInitRankConfig",
                                           "ncclCommInitAll",
                                           "ncclGetUniqueId",
                                           "ncclCommCount",
                                           "ncclCommUserRank",
                                           "ncclCommCuDevice",
                                           "cublasCreate",
                                           "cublasLtCreate",
                                           "MPI_Comm_rank",
                                           "MPI_Comm_size",
                                           "MPI_Init",
                                           "cudaEventElapsedTime",
                                           "cudaStreamGetPriority",
                                           "cudaDeviceGetStreamPriorityRange",
                                           "cudaMemGetInfo",
                                           NULL};

/* Parameter t of the function of the file named like token name: *a, *b
 * its declaration's tokens; 0 when the file defines no such function. */
int scan_param_of(const sview *v, size_t name, int t, size_t *a, size_t *b)
{
    size_t at = 0;
    for (size_t k = sview_next_def(v, name, &at, NULL); k < v->n;
         k = sview_next_def(v, name, &at, NULL))
        if (v->scope[k] == 0 && sview_param_range(v, k + 1, t, a, b))
            return 1;
    return 0;
}

int scan_library_call(const sview *v, size_t name)
{
    static const char *const prefixes[] = {"cuda",   "nccl",  "cublas", "cusparse",
                                           "curand", "cufft", "MPI_",   NULL};
    const char *w = v->src + tk(v, name)->off;
    size_t len = tk(v, name)->len;
    int library = len > 2 && w[0] == 'c' && w[1] == 'u' && w[2] >= 'A' && w[2] <= 'Z';
    for (const char *const *p = prefixes; *p && !library; p++)
        library = len > strlen(*p) && memcmp(w, *p, strlen(*p)) == 0;
    return library;
}

/* Whether a library call's arguments can make one pointer hold another:
 * of the CUDA, NCCL, cuBLAS and MPI APIs the copies, and the calls that
 * make or fill a descriptor or handle from a buffer (cusparseCreateDnVec(
 * &vec, n, x, ...), cudaCreateTextureObject, cuTensorMapEncodeTiled,
 * cudaGraphKernelNodeSetParams): the handle then reads the buffer. */
int scan_library_keeps_pointers(const sview *v, size_t name)
{
    static const char *const makers[] = {"Create", "Encode", "Set", "Add", NULL};
    const char *w = v->src + tk(v, name)->off;
    size_t len = tk(v, name)->len;
    if (!scan_library_call(v, name))
        return 1;
    /* a handle made from nothing (cublasCreate(&h), cudaStreamCreate(&s)) */
    int bare = scan_call_in(v, name, scan_plain_calls) ||
               (len >= 6 && memcmp(w + len - 6, "Create", 6) == 0);
    for (const char *const *m = makers; *m && !bare; m++)
        for (size_t k = 0; k + strlen(*m) <= len; k++)
            if (memcmp(w + k, *m, strlen(*m)) == 0)
                return 1;
    return (len >= 10 && memcmp(w, "cudaMemcpy", 10) == 0) ||
           (len >= 8 && memcmp(w, "cuMemcpy", 8) == 0);
}

/* Whether argument t of the call at name can be made to hold another
 * argument: taken by address (&p) into a parameter that is not a pointer to
 * const (or into a function the file does not define, the library's copies
 * and unknown calls), or a plain name into a parameter the callee can set
 * (T *&out, T **out, Params &out). */
int scan_arg_takes_pointer(const sview *v, size_t name, int t, int by_address)
{
    size_t a, b;
    if (!scan_param_of(v, name, t, &a, &b))
        return by_address && scan_library_keeps_pointers(v, name);
    int stars = 0, refs = 0, const_first = 0;
    for (size_t q = a; q < b; q++) {
        const_first |= stars == 0 && is(v, q, "const");
        stars += is(v, q, "*");
        refs += is(v, q, "&") || is(v, q, "&&");
    }
    if (by_address)
        return stars >= 2 || (stars == 1 && !const_first);
    if (scan_param_elements_kept(v, name, t))
        return 0; /* a table of pointers the callee only reads */
    return stars >= 2 || (stars >= 1 && refs >= 1) || (refs >= 1 && !const_first);
}

/* The token after the element and member steps that follow token i
 * ([k], .m, ->m); *steps: how many. */
static size_t after_steps(const sview *v, size_t i, int *steps)
{
    size_t k = i + 1;
    for (*steps = 0;; ++*steps) {
        if (is(v, k, "[") && close_of(v, k) < v->n)
            k = close_of(v, k) + 1;
        else if ((is(v, k, ".") || is(v, k, "->")) && ident(v, k + 1) && !is(v, k + 2, "("))
            k += 2;
        else
            return k;
    }
}

/* Whether the name at i is only read there: reached through at least one
 * element or member step, and that neither assigned, stepped nor taken by
 * address. */
static int steps_read(const sview *v, size_t i)
{
    static const char *const sets[] = {"=", "+=", "-=", "*=", "/=", "++", "--", NULL};
    int steps;
    size_t k = after_steps(v, i, &steps);
    return steps > 0 && !is(v, i - 1, "&") && !is(v, i - 1, "++") && !is(v, i - 1, "--") &&
           !in_words(v, k, sets);
}

/* Whether the range-for whose variable is at x (`for (T &x : pn)`) only
 * reads through x in its body. */
static int range_var_reads(const sview *v, size_t x)
{
    size_t close = sview_paren_around(v, x);
    close = close < v->n ? close_of(v, close) : v->n;
    if (close >= v->n)
        return 0;
    size_t end =
        is(v, close + 1, "{") ? close_of(v, close + 1) : scan_stmt_after(v, close + 1, v->n);
    for (size_t k = close + 1; k < end && k < v->n; k++)
        if (same_tok(v, k, x) && !is(v, k - 1, ".") && !is(v, k - 1, "->") && !steps_read(v, k))
            return 0;
    return 1;
}

/* Whether the use of a table parameter at i reads it: an element or its
 * member read (pn[k], pn[k].m; pn[k][j] is the buffer's own data), its
 * size, or the range of a range-for whose variable is a copy or is only
 * read through. */
static int element_use_reads(const sview *v, size_t i)
{
    if (is(v, i + 1, "["))
        return steps_read(v, i);
    if (is(v, i + 1, ".") && is(v, i + 2, "size") && is(v, i + 3, "("))
        return 1;
    if (!is(v, i - 1, ":") || !is(v, i + 1, ")") || i < 2 || !ident(v, i - 2))
        return 0;
    return (!is(v, i - 3, "&") && !is(v, i - 3, "&&")) || range_var_reads(v, i - 2);
}

/* Whether parameter t of the definition whose name is at k, body at body,
 * is a table (T **p, T *p[N], a reference to a container) whose elements
 * the body only reads. */
static int def_elements_kept(const sview *v, size_t k, size_t body, int t)
{
    size_t a, b, pn = v->n;
    int stars = 0, refs = 0, angle = 0, square = 0, container = 0;
    if (!sview_param_range(v, k + 1, t, &a, &b))
        return 0;
    for (size_t q = a; q < b && !is(v, q, "="); q++) {
        angle += is(v, q, "<") - is(v, q, ">");
        container |= angle > 0;
        stars += angle == 0 && (is(v, q, "*") || is(v, q, "[")); /* T *p[N] is T **p */
        square += is(v, q, "[") - is(v, q, "]");
        refs += angle == 0 && (is(v, q, "&") || is(v, q, "&&"));
        if (ident(v, q) && angle == 0 && square == 0)
            pn = q;
    }
    if (pn >= v->n || !((stars == 2 && refs == 0) || (stars == 0 && refs == 1 && container)))
        return 0;
    size_t end = close_of(v, body);
    for (size_t i = body + 1; i < end; i++)
        if (same_tok(v, i, pn) && !is(v, i - 1, ".") && !is(v, i - 1, "->") &&
            !element_use_reads(v, i))
            return 0;
    return 1;
}

/* Whether the arguments that open at open are given by value only: a
 * kernel's launch, a declaration's initialiser (dim3 grid(...)), or a
 * library call that keeps no pointer. */
static int args_by_value(const sview *v, size_t open)
{
    if (open == 0 || open >= v->n)
        return 0;
    if (is(v, open - 1, ">>>"))
        return 1;
    size_t name = open - 1;
    if (!ident(v, name))
        return 0;
    if (in_words(v, name, sview_keywords))
        return 1; /* if (c.ready), while (...), return (...) */
    if (name > 0 && (ident(v, name - 1) || is(v, name - 1, ">")) &&
        !in_words(v, name - 1, sview_keywords))
        return 1;
    return !scan_library_keeps_pointers(v, name) || in_words(v, name, making_calls);
}

/* Whether token i is an operand of a launch's configuration, outside any
 * parentheses there (`k<<<c->blocks, 256>>>`: a value). */
static int in_launch_config(const sview *v, size_t i)
{
    return sview_back_to(v, i, "<<<", ">>>");
}

/* Whether the use of a parameter at i (its name) only reads a member of it
 * (c.comm, c->stream, or through an accessor, c.data()): the member is not
 * assigned, indexed, called, taken by address or handed to a call that may
 * keep or set it. */
static int member_read(const sview *v, size_t i)
{
    static const char *const stores[] = {"=", "+=", "-=", "*=", "/=", "++", "--", "(",
                                         "[", ".",  "->", "|=", "&=", "^=", NULL};
    if ((i > 0 && is(v, i - 1, "&")) || !(is(v, i + 1, ".") || is(v, i + 1, "->")) ||
        !ident(v, i + 2))
        return 0;
    size_t member;
    size_t last = sview_getter(v, i + 2, &member) ? i + 4 : i + 2; /* past "()" */
    if (in_words(v, last + 1, stores))
        return 0;
    if (!is(v, last + 1, ",") && !is(v, last + 1, ")"))
        return 1;
    return in_launch_config(v, i) || args_by_value(v, sview_paren_around(v, i));
}

/* Whether parameter t of the definition whose name is at k, body at body,
 * is only read: every use of it in the body reads a member. */
static int def_param_only_read(const sview *v, size_t k, size_t body, int t)
{
    size_t pn = sview_param_name(v, k + 1, t);
    if (pn >= v->n)
        return 0;
    size_t end = close_of(v, body);
    for (size_t i = body + 1; i < end; i++)
        if (same_tok(v, i, pn) && !is(v, i - 1, ".") && !is(v, i - 1, "->") && !member_read(v, i))
            return 0;
    return 1;
}

/* Whether the use of pointer parameter pn at i keeps its value where it is:
 * a whole argument of a launch or of a library call that keeps no pointer,
 * an element read or written (pn[i]), a test (if (pn), pn == NULL, !pn). */
static int value_use_stays(const sview *v, size_t i)
{
    if (is(v, i + 1, "[") && !is(v, i - 1, "&"))
        return 1;
    if (is(v, i + 1, "==") || is(v, i + 1, "!=") || is(v, i - 1, "!") ||
        ((is(v, i - 1, "==") || is(v, i - 1, "!=")) && !is(v, i + 1, "=")))
        return 1;
    if (is(v, i - 1, "(") && is(v, i + 1, ")") && i >= 2 && is(v, i - 2, "if"))
        return 1;
    if (!(is(v, i - 1, "(") || is(v, i - 1, ",")) || !(is(v, i + 1, ")") || is(v, i + 1, ",")))
        return 0;
    size_t open = sview_paren_around(v, i);
    if (open >= v->n || open == 0)
        return 0;
    if (is(v, open - 1, ">>>"))
        return 1;
    return ident(v, open - 1) && scan_library_call(v, open - 1) &&
           !scan_library_keeps_pointers(v, open - 1);
}

/* Whether pointer parameter t of the definition whose name is at k, body
 * at body, is never handed on (value_use_stays at each use) nor assigned. */
static int def_value_stays(const sview *v, size_t k, size_t body, int t)
{
    size_t a, b, pn = v->n;
    int stars = 0;
    if (!sview_param_range(v, k + 1, t, &a, &b))
        return 0;
    for (size_t q = a; q < b && !is(v, q, "="); q++) {
        stars += is(v, q, "*");
        if (is(v, q, "&") || is(v, q, "&&") || is(v, q, "["))
            return 0;
        if (ident(v, q))
            pn = q;
    }
    if (pn >= v->n || stars != 1)
        return 0;
    size_t end = close_of(v, body);
    for (size_t i = body + 1; i < end; i++)
        if (same_tok(v, i, pn) && !is(v, i - 1, ".") && !is(v, i - 1, "->") &&
            !value_use_stays(v, i))
            return 0;
    return 1;
}

/* Whether every definition of a function of the file named like token
 * name (at file scope, with a body) meets def for its parameter t; 0 when
 * there is none. */
static int every_definition(const sview *v, size_t name, int t,
                            int (*def)(const sview *v, size_t k, size_t body, int t))
{
    size_t at = 0, body = v->n;
    int found = 0;
    for (size_t k = sview_next_def(v, name, &at, &body); k < v->n;
         k = sview_next_def(v, name, &at, &body)) {
        if (v->scope[k] != 0 || body >= v->n || !def(v, k, body, t))
            return 0;
        found = 1;
    }
    return found;
}

int scan_param_value_stays(const sview *v, size_t name, int t)
{
    return every_definition(v, name, t, def_value_stays);
}

int scan_param_elements_kept(const sview *v, size_t name, int t)
{
    return every_definition(v, name, t, def_elements_kept);
}

/* Whether the body opening at body allocates device memory into a local
 * (cudaMalloc, cudaMallocAsync or ncclMemAlloc of &p) and every return
 * gives that local back, plain or wrapped (`return p;`, `return
 * std::unique_ptr<T, D>(p);`). */
static int body_returns_allocation(const sview *v, size_t body)
{
    static const char *const allocs[] = {"cudaMalloc", "cudaMallocAsync", "ncclMemAlloc", NULL};
    size_t end = close_of(v, body), local = v->n;
    int returns = 0;
    for (size_t i = body + 1; i < end && i < v->n; i++) {
        if (in_words(v, i, allocs) && is(v, i + 1, "(") && local >= v->n) {
            size_t a, b;
            if (arg_range(v, i + 1, 0, &a, &b))
                for (size_t k = a; k < b && local >= v->n; k++)
                    if (is(v, k, "&") && ident(v, k + 1))
                        local = k + 1;
        }
        if (!is(v, i, "return"))
            continue;
        size_t e = i + 1;
        while (e < end && !is(v, e, ";"))
            e++;
        /* `return p;` or a constructor of p alone, `return Ptr<T, D>(p);` */
        size_t r = e == i + 2                                             ? i + 1
                   : e >= i + 4 && is(v, e - 1, ")") && is(v, e - 3, "(") ? e - 2
                                                                          : v->n;
        if (local >= v->n || r >= v->n || !same_tok(v, r, local))
            return 0;
        returns++;
    }
    return returns > 0;
}

int scan_allocator_call(const sview *v, size_t i)
{
    size_t open = sview_after_template_args(v, i + 1);
    if (!ident(v, i) || !is(v, open, "("))
        return 0;
    size_t at = 0, body = v->n;
    int found = 0;
    for (size_t k = sview_next_def(v, i, &at, &body); k < v->n;
         k = sview_next_def(v, i, &at, &body)) {
        if (body >= v->n || !body_returns_allocation(v, body))
            return 0;
        found = 1;
    }
    return found;
}

/* Whether every function of the file named like token name (each
 * overload) only reads its parameter t; 0 when the file defines none. */
int scan_param_only_read(const sview *v, size_t name, int t)
{
    size_t at = 0, body = v->n;
    int found = 0;
    for (size_t k = sview_next_def(v, name, &at, &body); k < v->n;
         k = sview_next_def(v, name, &at, &body)) {
        if (v->scope[k] != 0 || body >= v->n)
            continue;
        if (!def_param_only_read(v, k, body, t))
            return 0;
        found = 1;
    }
    return found;
}

int scan_making_call(const sview *v, size_t name)
{
    return in_words(v, name, making_calls) || scan_call_in(v, name, making_calls);
}

/* Whether the tokens (a, b) of a parameter list or a return type name a
 * pointer, a reference or an array. */
static int names_memory(const sview *v, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (is(v, i, "*") || is(v, i, "&") || is(v, i, "&&") || is(v, i, "["))
            return 1;
    return 0;
}

/* Whether the '*' or '&' at i stands before its operand (a dereference or
 * an address), not between two (a product, a bitwise and). */
static int unary_at(const sview *v, size_t i)
{
    static const char *const before[] = {"(", "=", ",", ";", "{", "return", "+", "-",
                                         "*", "/", "?", ":", "<", ">",      "!", NULL};
    return in_words(v, i - 1, before);
}

/* Whether the body [body, end] of a pure candidate touches only values:
 * no subscript, dereference, address, member through a pointer, launch or
 * assignment to a name it does not declare, and calls only to the plain
 * library calls or to functions of the file that are pure in turn. */
static int body_pure(const sview *v, size_t params, size_t body, int depth)
{
    size_t end = close_of(v, body);
    for (size_t i = body + 1; i < end && i < v->n; i++) {
        if (is(v, i, "[") || is(v, i, "->") || is(v, i, "<<<") ||
            ((is(v, i, "*") || is(v, i, "&")) && unary_at(v, i)))
            return 0;
        if (ident(v, i) && is(v, i + 1, "(") && !in_words(v, i, sview_keywords)) {
            if (!scan_call_in(v, i, scan_plain_calls) && !scan_pure_function(v, i, depth + 1))
                return 0;
            continue;
        }
        if (ident(v, i) &&
            (is(v, i + 1, "=") || is(v, i + 1, "+=") || is(v, i + 1, "-=") || is(v, i + 1, "*=") ||
             is(v, i + 1, "/=") || is(v, i + 1, "++") || is(v, i + 1, "--") ||
             (i > 0 && (is(v, i - 1, "++") || is(v, i - 1, "--"))))) {
            /* only its own names: a parameter or a local declared with a type */
            int own = param_position(v, params, v->src + tk(v, i)->off, tk(v, i)->len) >= 0;
            for (size_t k = body + 1; !own && k <= i; k++)
                own = same_tok(v, k, i) && sview_declarator(v, k, "= ; ,");
            if (!own)
                return 0;
        }
    }
    return 1;
}

int scan_pure_function(const sview *v, size_t name, int depth)
{
    if (depth > 4 || (name > 0 && (is(v, name - 1, ".") || is(v, name - 1, "->"))))
        return 0;
    size_t at = 0, body, k;
    int found = 0;
    while ((k = sview_next_def(v, name, &at, &body)) < v->n) {
        size_t close = close_of(v, k + 1), t = k;
        while (t > 0 && k - t < 8 && !is(v, t - 1, ";") && !is(v, t - 1, "}") &&
               !is(v, t - 1, "{") && !is(v, t - 1, ">"))
            t--; /* the return type's first token */
        if (v->scope[k] != 0 || close >= v->n || names_memory(v, k + 2, close) ||
            names_memory(v, t, k) || !body_pure(v, k + 1, body, depth))
            return 0;
        found = 1;
    }
    return found;
}

/* What tokens [a, b) reach (SCAN_REACH_*): a synchronising call
 * (scan_sync_calls), a communication call (NCCL, MPI, the glue's), directly
 * or through the file's functions and lambdas they call, depth levels deep
 * at most. */
static unsigned body_reach(const sview *v, size_t a, size_t b, size_t self, int depth)
{
    unsigned reach = 0;
    for (size_t k = a; k + 1 < b; k++) {
        if (!ident(v, k) || !is(v, k + 1, "("))
            continue;
        if (scan_call_in(v, k, scan_sync_calls))
            reach |= SCAN_REACH_SYNC;
        else if ((nccl_name(v, k) && !is(v, k, "ncclGetErrorString")) ||
                 (tk(v, k)->len > 4 && !memcmp(v->src + tk(v, k)->off, "MPI_", 4) &&
                  !is(v, k, "MPI_Abort")) ||
                 (k >= 2 && is(v, k - 1, "::") && is(v, k - 2, "cuco_tx")))
            reach |= SCAN_REACH_COMM; /* (an abort is an exit) */
        else if (depth < 3 && !same_tok(v, k, self))
            reach |= scan_function_reach(v, k, depth + 1);
        if (reach == (SCAN_REACH_SYNC | SCAN_REACH_COMM))
            break;
    }
    return reach;
}

unsigned scan_function_reach(const sview *v, size_t name, int depth)
{
    size_t at = 0, body = v->n;
    unsigned reach = 0;
    for (size_t k = sview_next_def(v, name, &at, &body); k < v->n;
         k = sview_next_def(v, name, &at, &body))
        if (body < v->n)
            reach |= body_reach(v, body, close_of(v, body), name, depth);
    size_t lb = sview_lambda_body(v, name, NULL);
    if (lb < v->n)
        reach |= body_reach(v, lb, close_of(v, lb), name, depth);
    return reach;
}

int scan_function_syncs(const sview *v, size_t name, int depth)
{
    return (scan_function_reach(v, name, depth) & SCAN_REACH_SYNC) != 0;
}
