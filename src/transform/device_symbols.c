/* device_symbols.c: whether a kernel launch can reach memory that its
 * arguments do not name. A kernel may read or write a file-scope
 * __device__, __constant__ or __managed__ variable (a buffer of its own, or
 * a pointer the host set with cudaMemcpyToSymbol); its launch then touches
 * buffers no argument shows, and the schedules must treat it as reaching
 * every buffer (scan_int.h: scan_launch_reaches_symbols). So does a kernel
 * that takes a table of pointers (a device copy of host pointers, or of
 * structs that hold them): what it reaches through the table is no
 * argument (scan_launch_takes_tables). */
#include <string.h>

#include "kernel_launch.h"
#include "scan_int.h"

static int device_space_word(const sview *v, size_t i)
{
    return is(v, i, "__device__") || is(v, i, "__constant__") || is(v, i, "__managed__");
}

/* Whether file-scope token i is a device variable's name: a declaration
 * after __device__ (or its kin) that ends at ';', '=' or '[' with no '('
 * before (a function). */
static int is_symbol_name(const sview *v, size_t i)
{
    if (!ident(v, i) || v->scope[i] != 0 ||
        !(is(v, i + 1, ";") || is(v, i + 1, "=") || is(v, i + 1, "[") || is(v, i + 1, ",")))
        return 0;
    for (size_t k = i; k-- > 0;) {
        if (is(v, k, ";") || is(v, k, "}") || is(v, k, "{") || is(v, k, "(") || is(v, k, ")"))
            return 0;
        if (device_space_word(v, k))
            return 1;
    }
    return 0;
}

/* Whether the body [a, b) names one of the file's device variables (the
 * tokens syms[0..n) that declare them). */
static int body_names_symbol(const sview *v, size_t a, size_t b, const size_t *syms, size_t n)
{
    for (size_t i = a; i < b; i++) {
        if (!ident(v, i) || (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        for (size_t k = 0; k < n; k++)
            if (same_tok(v, syms[k], i))
                return 1;
    }
    return 0;
}

/* The '{' of the file-scope definition of the function named like token f;
 * v->n when the file only declares it (or not at all). */
static size_t definition_body(const sview *v, size_t f)
{
    size_t at = 0, body = v->n;
    for (size_t k; (k = sview_next_def(v, f, &at, &body)) < v->n;)
        if (v->scope[k] == 0)
            return body;
    return v->n;
}

/* The '{' of the body of the struct or class the file defines by the name
 * of token t; v->n when none. */
static size_t class_body(const sview *v, size_t t)
{
    for (size_t k = 1; k + 1 < v->n; k++)
        if (same_tok(v, k, t) && (is(v, k - 1, "struct") || is(v, k - 1, "class")) &&
            is(v, k + 1, "{"))
            return k + 1;
    return v->n;
}

/* Whether the file has device variables, or hands addresses to symbols. */
static int file_uses_symbols(const sview *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (device_space_word(v, i) && v->scope[i] == 0) {
            size_t k = i + 1;
            while (k < v->n && !is(v, k, ";") && !is(v, k, "(") && !is(v, k, "{"))
                k++;
            if (k < v->n && is(v, k, ";"))
                return 1;
        } else if (is(v, i, "cudaMemcpyToSymbol") || is(v, i, "cudaMemcpyToSymbolAsync") ||
                   is(v, i, "cudaGetSymbolAddress")) {
            return 1;
        }
    return 0;
}

enum { MAX_SYMBOLS = 256 };

int scan_launch_reaches_symbols(const sview *v, size_t name)
{
    if (!file_uses_symbols(v))
        return 0;
    size_t body = definition_body(v, name);
    if (body >= v->n)
        return 1; /* defined elsewhere: it may read them */
    size_t syms[MAX_SYMBOLS], n = 0;
    for (size_t i = 0; i < v->n; i++)
        if (is_symbol_name(v, i)) {
            if (n == MAX_SYMBOLS)
                return 1; /* more than the list holds: assume the worst */
            syms[n++] = i;
        }
    size_t end = close_of(v, body);
    if (body_names_symbol(v, body + 1, end, syms, n))
        return 1;
    /* one level down: the file's functions that the kernel calls (templates
     * too, `at<float>(i)`), and the file's classes it names (their
     * operators and methods) */
    for (size_t i = body + 1; i + 1 < end; i++) {
        if (!ident(v, i) || (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        size_t cls = class_body(v, i);
        if (cls < v->n && body_names_symbol(v, cls + 1, close_of(v, cls), syms, n))
            return 1;
        if (!is(v, i + 1, "(") && !is(v, i + 1, "<"))
            continue;
        size_t callee = definition_body(v, i);
        if (callee < v->n && callee != body &&
            body_names_symbol(v, callee + 1, close_of(v, callee), syms, n))
            return 1;
    }
    return 0;
}

int scan_launch_takes_tables(const sview *v, size_t name)
{
    size_t params = kernel_launch_params(v, name), a, b;
    for (int k = 0; params < v->n && sview_param_range(v, params, k, &a, &b); k++) {
        int stars = 0, angle = 0;
        size_t type = v->n;
        for (size_t q = a; q < b; q++) {
            angle += is(v, q, "<") - is(v, q, ">");
            stars += angle == 0 && is(v, q, "*");
            stars += angle == 0 && is(v, q, "[") && stars > 0; /* T *p[] */
            if (type >= v->n && ident(v, q) && !is(v, q, "const") && !is(v, q, "struct") &&
                !is(v, q, "volatile"))
                type = q;
        }
        /* a table, a struct that holds pointers, or an untyped pointer
         * (`const void *ctx`: the kernel may cast it to either) */
        if (stars >= 2 || (stars == 1 && type < v->n &&
                           (scan_struct_holds_pointers(v, type) || is(v, type, "void"))))
            return 1;
    }
    return 0;
}
