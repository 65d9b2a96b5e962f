/* scan_escape.c: buffers of a call that other code may reach without naming
 * them (scan_int.h: scan_escapes).
 *
 * A local buffer handed to a call that may keep it (a function the file
 * does not define, a file function that stores its parameter, a lambda that
 * captures it handed to either: `register_hook([=] { scale(grad); })`) can
 * be touched later by any call the analysis cannot see into
 * (`run_hooks()`). And a pointer parameter may be a global the callers set
 * from the argument they pass (`g_grads[b] = grads[b]; step(grads);`):
 * a statement naming that global touches the parameter's buffer. */
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

/* When token k sits in the body of a lambda inside its statement: the
 * lambda's '[' (its value, which is what a call receives); v->n otherwise. */
static size_t lambda_around(const sview *v, size_t k)
{
    size_t brace = block_open(v, k);
    if (brace >= v->n || brace == 0)
        return v->n;
    size_t b = brace - 1;
    while (b > 0 && (ident(v, b) || is(v, b, "mutable") || is(v, b, "->") || is(v, b, "::")))
        b--; /* `mutable`, a trailing return type */
    if (is(v, b, ")")) {
        size_t open = sview_open_of(v, b);
        if (open == 0 || open >= v->n)
            return v->n;
        b = open - 1;
    }
    if (!is(v, b, "]"))
        return v->n;
    size_t open = sview_open_of(v, b);
    return open < v->n && is(v, open, "[") ? open : v->n;
}

/* Standard C and C++ functions that read their arguments and keep none. */
static const char *const keeps_none[] = {
    "strcmp",      "strncmp",     "strcasecmp", "strlen",      "strstr",       "strchr",
    "strrchr",     "atoi",        "atol",       "atoll",       "atof",         "strtol",
    "strtoll",     "strtoul",     "strtoull",   "strtod",      "strtof",       "sscanf",
    "sprintf",     "perror",      "fputs",      "fwrite",      "fread",        "memcmp",
    "memset",      "getenv",      "exit",       "abort",       "assert",       "free",
    "std::stoi",   "std::stol",   "std::stoul", "std::stoll",  "std::stod",    "std::stof",
    "std::strcmp", "std::strlen", "std::fill",  "std::fill_n", "std::sort",    "std::accumulate",
    "std::iota",   "std::memset", "std::exit",  "std::printf", "std::fprintf", "std::snprintf",
    "std::getenv", "std::atoi",   "std::puts",  "std::fabs",   "std::pow",     NULL};

/* Whether parameter pos of the definition named at def is a plain value
 * (no pointer, reference, array or template, no struct of the file that
 * holds pointers): what the caller passes there cannot be kept. */
static int param_is_value(const sview *v, size_t def, int pos)
{
    size_t a, b;
    if (!is(v, def + 1, "(") || !sview_param_range(v, def + 1, pos, &a, &b))
        return 0;
    for (size_t q = a; q < b; q++)
        if (is(v, q, "*") || is(v, q, "&") || is(v, q, "&&") || is(v, q, "[") || is(v, q, "<") ||
            (ident(v, q) && scan_struct_holds_pointers(v, q)))
            return 0;
    return 1;
}

/* Whether the call whose '(' is at open, with token k among its arguments,
 * may keep what k's argument names: 0 for a launch, a library call that
 * keeps no pointer, a call of the lists (sync, work, plain), a lambda of the
 * function and a file function whose parameter stays; 1 for a file function that hands its
 * parameter on and any function the file does not define. *outer: the
 * call is a macro, whose arguments reach the call around it. */
static int param_kept(const sview *v, size_t def, size_t body, int pos, int depth);

static int call_keeps(const sview *v, size_t open, size_t k, int *outer, int depth)
{
    *outer = 0;
    if (open == 0 || is(v, open - 1, ">>>"))
        return 0;
    size_t f = open - 1;
    if (is(v, f, ">")) { /* static_cast<T *>(p), a template's call f<T>(p) */
        int d = 0;
        for (; f > 0; f--) {
            d += is(v, f, ">") - is(v, f, "<");
            if (d == 0)
                break;
        }
        f = f > 0 ? f - 1 : 0;
    }
    if (!ident(v, f) || in_words(v, f, sview_keywords))
        return 0; /* a condition, a C cast, a grouping */
    static const char *const casts[] = {"static_cast", "reinterpret_cast", "const_cast",
                                        "dynamic_cast", NULL};
    static const char *const no_value[] = {"sizeof", "alignof", "decltype", "typeid", NULL};
    if (in_words(v, f, no_value))
        return 0;
    if (scan_all_caps(v, f) || in_words(v, f, casts)) {
        *outer = 1;
        return 0;
    }
    if (scan_call_in(v, f, scan_sync_calls) || scan_call_in(v, f, scan_work_calls) ||
        scan_call_in(v, f, scan_plain_calls) || scan_call_in(v, f, keeps_none) || nccl_name(v, f))
        return 0;
    if (scan_library_call(v, f))
        return scan_library_keeps_pointers(v, f);
    int pos = sview_arg_position(v, open, k);
    size_t lparams = v->n, lbody = sview_lambda_body(v, f, &lparams);
    if (lbody < v->n) /* a lambda of the function: what it does with its parameter */
        return kernel_lambda_launch(v, f) >= v->n && lparams < v->n &&
               (depth >= 2 || param_kept(v, lparams - 1, lbody, pos, depth + 1));
    size_t at = 0, body = v->n, def = sview_next_def(v, f, &at, &body);
    if (def >= v->n || body >= v->n)
        return 1; /* defined elsewhere: it may keep anything */
    if (param_is_value(v, def, pos) || scan_param_value_stays(v, f, pos) ||
        scan_param_elements_kept(v, f, pos))
        return 0;
    return depth >= 2 || param_kept(v, def, body, pos, depth + 1);
}

/* Whether the name at token t is declared in the function whose
 * parameters open at params and whose body opens at body (a parameter, or
 * a local declared with a type). */
static int declared_in(const sview *v, size_t params, size_t body, size_t t)
{
    char *name = cuco_strndup(v->src + tk(v, t)->off, tk(v, t)->len);
    int in = name && sview_param_index(v, params, name) >= 0;
    free(name);
    for (size_t k = body + 1, end = close_of(v, body); !in && k < end; k++)
        in = same_tok(v, k, t) && sview_declarator(v, k, "= ; , ( [ {");
    return in;
}

/* Whether the use at token t, in the statement that starts at st, is the
 * value of an assignment to anything but one of the function's parameters
 * (those opening at params: `p.keys = keys` reaches the caller through its
 * argument), a local too (`q = p;`, `float *q = p;`: what the local does
 * next is not followed). */
static int stored_after(const sview *v, size_t params, size_t st, size_t t)
{
    size_t eq = v->n;
    for (size_t q = st; q < t && eq >= v->n; q++)
        if (is(v, q, "="))
            eq = q;
    if (eq >= v->n)
        return 0;
    size_t h = st;
    while (h < eq && !scan_is_head(v, h))
        h++;
    if (h >= eq)
        return 1;
    char *name = cuco_strndup(v->src + tk(v, h)->off, tk(v, h)->len);
    int param = name && sview_param_index(v, params, name) >= 0 && !sview_declarator(v, h, "= ;");
    free(name);
    return !param;
}

/* Whether the function defined at def (body at body) keeps its parameter
 * pos where its caller cannot see: assigned into a name it does not
 * declare (a global, a member), handed to a method of such an object
 * (`g_hooks.push_back(f)`), or to a call that keeps it. Into another
 * parameter (`p.keys = keys`) it stays visible: the caller's argument holds
 * it (scan_arg_takes_pointer). */
static int param_kept(const sview *v, size_t def, size_t body, int pos, int depth)
{
    size_t pn = sview_param_name(v, def + 1, pos), end = close_of(v, body);
    if (pn >= v->n)
        return 1;
    for (size_t t = body + 1; t < end; t++) {
        if (!same_tok(v, t, pn) || is(v, t - 1, ".") || is(v, t - 1, "->"))
            continue;
        size_t st = t;
        while (st > body + 1 && !is(v, st - 1, ";") && !is(v, st - 1, "{") && !is(v, st - 1, "}"))
            st--;
        if (!is(v, t + 1, "[") && stored_after(v, def + 1, st, t))
            return 1;
        size_t open = sview_paren_around(v, t);
        if (open >= v->n || open < 2)
            continue;
        if ((is(v, open - 2, ".") || is(v, open - 2, "->")) && open >= 4 && ident(v, open - 3) &&
            !declared_in(v, def + 1, body, open - 3))
            return 1; /* a method of an outer object */
        int outer;
        if (!(is(v, open - 2, ".") || is(v, open - 2, "->")) &&
            call_keeps(v, open, t, &outer, depth))
            return 1;
    }
    return 0;
}

/* Whether the use of a name at token t hands it to a call that may keep it
 * (through a lambda that captures it, through macros). */
static int use_escapes(const sview *v, size_t t)
{
    size_t k = t;
    for (int steps = 0; steps < 8; steps++) {
        size_t lam = lambda_around(v, k);
        size_t open = sview_paren_around(v, k);
        if (lam < v->n && (open >= v->n || open < lam))
            open = sview_paren_around(v, lam), k = lam; /* the lambda is the argument */
        if (open >= v->n)
            return 0;
        int outer;
        if (call_keeps(v, open, k, &outer, 0))
            return 1;
        if (!outer && lam >= v->n)
            return 0;
        k = open;
    }
    return 0;
}

int scan_local_escapes(const scan *s, const char *name)
{
    const sview *v = s->v;
    for (size_t t = s->fn.body + 1; t < s->fn.body_end; t++)
        if (cuco_tok_is(&v->lx, tk(v, t), name) && !is(v, t - 1, ".") && !is(v, t - 1, "->") &&
            use_escapes(v, t))
            return 1;
    return 0;
}

/* Whether the file declares a variable (or a member) named name: a
 * function's or a type's name is none. */
static int declares_variable(const sview *v, const char *name)
{
    for (size_t k = 1; k + 1 < v->n; k++)
        if (cuco_tok_is(&v->lx, tk(v, k), name) && sview_declarator(v, k, "= ; , [ {"))
            return 1;
    return 0;
}

/* scan_param_globals at depth: a caller that passes its own pointer
 * parameter is followed to its callers, three calls up; *unknown is set
 * where the trace stops short (an argument of several names, the depth). */
static int param_globals_at(const sview *v, const fn_scope *fn, const char *p, cuco_strlist *out,
                            int depth, int *unknown)
{
    size_t name = fn->params - 1;
    int pos = param_position(v, fn->params, p, strlen(p)), rc = 0;
    if (pos < 0 || !ident(v, name))
        return 0;
    for (size_t k = 0; k + 1 < v->n && rc == 0; k++) {
        size_t a, b, blk;
        if (k == name || !same_tok(v, k, name) || !is(v, k + 1, "(") ||
            (k > 0 && (is(v, k - 1, ".") || is(v, k - 1, "->"))) ||
            (blk = block_open(v, k)) >= v->n || !arg_range(v, k + 1, pos, &a, &b))
            continue;
        cuco_strlist heads = {0};
        fn_scope caller;
        int found = 0;
        rc = scan_expr_heads(v, a, b, &heads, 0);
        *unknown |= rc == 0 && heads.n > 1;
        if (rc == 0 && heads.n == 1) {
            rc = scan_fn_scope_find(&caller, v, blk);
            found = rc == 0;
            rc = rc == CUCO_ENOTFOUND ? 0 : rc; /* a call outside any function's body */
        }
        if (found) {
            cuco_strlist reach = {0};
            rc = scan_aliases_of(v, blk, heads.items[0], &reach);
            for (size_t i = 0; i < reach.n && rc == 0; i++) {
                const char *r = reach.items[i];
                if (cuco_strlist_has(out, r))
                    continue;
                if (sview_param_index(v, caller.params, r) >= 0) {
                    /* the caller's own parameter: what its callers pass */
                    *unknown |= depth >= 3 && cuco_strlist_has(&caller.pointer_params, r);
                    if (depth < 3 && cuco_strlist_has(&caller.pointer_params, r))
                        rc = param_globals_at(v, &caller, r, out, depth + 1, unknown);
                } else if (!cuco_strlist_has(&caller.locals, r) && declares_variable(v, r)) {
                    rc = cuco_strlist_push(out, r);
                }
            }
            cuco_strlist_free(&reach);
            scan_fn_scope_free(&caller);
        }
        cuco_strlist_free(&heads);
    }
    return rc;
}

int scan_param_globals(const sview *v, const fn_scope *fn, const char *p, cuco_strlist *out,
                       int *unknown)
{
    return param_globals_at(v, fn, p, out, 1, unknown);
}

/* The globals the pointer parameters among *all may be (as the callers
 * pass them): into *all, each an alias of its parameter. */
static int callers_globals(scan *s, cuco_strlist *all)
{
    cuco_strlist globals = {0};
    int rc = 0;
    size_t n = all->n;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!cuco_strlist_has(&s->fn.pointer_params, all->items[i]))
            continue;
        size_t from = globals.n;
        int unknown = 0;
        rc = scan_param_globals(s->v, &s->fn, all->items[i], &globals, &unknown);
        s->escaped |= unknown; /* a caller passes what the trace cannot follow */
        for (size_t k = from; k < globals.n && rc == 0; k++) {
            if (cuco_strlist_has(all, globals.items[k]))
                continue;
            rc = cuco_strlist_push(all, globals.items[k]);
            if (rc == 0)
                rc = cuco_strlist_push(&s->fn.alias_a, all->items[i]);
            if (rc == 0)
                rc = cuco_strlist_push(&s->fn.alias_b, globals.items[k]);
        }
    }
    cuco_strlist_free(&globals);
    return rc;
}

int scan_closure_and_escapes(scan *s)
{
    int rc = scan_buffers_closure(s);
    size_t before = s->all.n;
    if (rc == 0)
        rc = callers_globals(s, &s->all);
    /* what the callers' globals hold, and the objects that hold them */
    if (rc == 0 && s->all.n > before)
        rc = scan_alias_grow(&s->fn, &s->all, SCAN_GROW_ALIASES);
    if (rc == 0 && s->all.n > before)
        rc = scan_alias_grow(&s->fn, &s->all, SCAN_GROW_FORWARD);
    if (rc == 0 && s->all.n > before)
        rc = scan_alias_grow(&s->fn, &s->all, SCAN_GROW_BACKWARD);
    for (size_t i = 0; i < s->all.n && rc == 0; i++)
        if (cuco_strlist_has(&s->fn.locals, s->all.items[i]) &&
            scan_local_escapes(s, s->all.items[i]))
            s->escaped = 1;
    s->globals |= s->escaped;
    return rc;
}
