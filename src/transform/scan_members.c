/* scan_members.c: the call's members of one object apart from the object's
 * other members (scan_int.h).
 *
 * A call whose buffers are members of one object (`c->cache`, `s.rows`)
 * has that object as their head, and so has every statement that names any
 * of its members: a launch of `c->q` would wait for a gather into
 * `c->cache`. The object B is kept apart member by member when each buffer
 * argument of the call is one name (a member of B, or a plain name that is
 * not B), B is a parameter of a type the file never makes whole (no brace
 * or copy initialisation, no constructor, no name of that type assigned,
 * written through or handed to a call the file does not define:
 * objects_set_whole) and takes part in no alias, hold
 * or store of the function, and each of the call's members stays in place
 * at every use in the file (use_stays: an element read or written inside an
 * expression, its value given to a launch or a library call, its address to
 * an allocation call, which must appear, or an assignment of no named
 * value). A statement that names B only through other members that stay in
 * place the same way and are made by a library call then does not touch
 * the call's buffers: B is dropped from its heads (scan_members_apart).
 * Anything else keeps B whole.
 */
#include "cuco/buf.h"
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

static int member_after(const sview *v, size_t i)
{
    return (is(v, i + 1, "->") || is(v, i + 1, ".")) && ident(v, i + 2);
}

int scan_member_arg(scan *s, size_t a, size_t b)
{
    const sview *v = s->v;
    size_t h = a;
    while (h < b && !scan_is_head(v, h))
        h++;
    /* the names in an index of the member (`s->grads[l]`) pick an
     * element of it: no other object */
    size_t more = h < b ? h + 1 : b;
    if (h < b && member_after(v, h))
        for (more = h + 3; more < b && is(v, more, "[");)
            more = close_of(v, more) + 1;
    while (more < b && !scan_is_head(v, more))
        more++;
    if (h >= b || more < b) {
        s->member_whole = 1; /* no name, or several: what it points into is unknown */
        return 0;
    }
    char *base = cuco_strndup(v->src + tk(v, h)->off, tk(v, h)->len);
    if (!base)
        return CUCO_ENOMEM;
    if (!member_after(v, h)) { /* a name of its own: B must not be it */
        int rc = cuco_strlist_push(&s->member_plain, base);
        free(base);
        return rc;
    }
    if (s->member_base && strcmp(s->member_base, base) != 0) {
        s->member_whole = 1; /* members of two objects */
        free(base);
        return 0;
    }
    if (!s->member_base)
        s->member_base = base;
    else
        free(base);
    char *m = cuco_strndup(v->src + tk(v, h + 2)->off, tk(v, h + 2)->len);
    int rc = m ? cuco_strlist_push(&s->members, m) : CUCO_ENOMEM;
    free(m);
    return rc;
}

static const char *const allocations[] = {
    "cudaMalloc",    "cudaMallocAsync",         "cudaMallocManaged", "cudaMallocHost",
    "cudaHostAlloc", "cudaMallocFromPoolAsync", "ncclMemAlloc",      NULL};

/* The first token of a C cast right before token i ("(void **)&c->p": the
 * '('), or i when there is none: a parenthesised type, names, '*' and '::'. */
static size_t cast_start(const sview *v, size_t i)
{
    if (i < 3 || !is(v, i - 1, ")") || !is(v, i - 2, "*"))
        return i;
    size_t k = i - 2;
    while (k > 0 && (is(v, k, "*") || is(v, k, "::") || ident(v, k)))
        k--;
    return is(v, k, "(") && k + 1 < i - 1 && ident(v, k + 1) ? k : i;
}

/* The first token of the object chain that ends at token o (a.b->c,
 * v[i].c, a.b[j][k]): names joined by '.' or '->', each with subscripts. */
static size_t chain_start(const sview *v, size_t o)
{
    for (;;) {
        while (is(v, o, "]")) {
            size_t open = sview_open_of(v, o);
            if (open == 0 || open >= v->n || !is(v, open, "[") || open < 1)
                return o;
            o = open - 1;
        }
        if (!ident(v, o) || o < 2 || !(is(v, o - 1, "->") || is(v, o - 1, ".")) ||
            !(ident(v, o - 2) || is(v, o - 2, "]")))
            return o;
        o -= 2;
    }
}

/* The access to member token t as one unit: [*first, *end), its object's
 * chain (a.b->m, v[i].m) and the subscripts after it included, an address
 * taken (&x->m, &(x->m[0])) in *addr. */
static void member_unit(const sview *v, size_t t, size_t *first, size_t *end, int *addr)
{
    size_t o = chain_start(v, t - 2);
    size_t before = o;
    while (before > 0 && is(v, before - 1, "("))
        before--;
    *addr = before > 0 && is(v, before - 1, "&");
    *first = cast_start(v, *addr ? before - 1 : o);
    size_t e = t + 1;
    while (e < v->n && is(v, e, "["))
        e = close_of(v, e) + 1;
    if (sview_smart_get(v, e + 1))
        e += 4; /* a smart pointer's raw value */
    *end = e < v->n ? e : v->n;
}

/* A truth test or comparison of a value, and steps of one. */
static const char *const truth_ops[] = {"==", "!=", "&&", "||", NULL};
static const char *const step_ops[] = {"+=", "-=", "++", "--", NULL};

/* The host's allocators: a fresh block each call. */
static const char *const host_allocations[] = {"malloc", "calloc", "aligned_alloc", NULL};

/* Whether the value assigned after the '=' at eq is one call of an
 * allocator function of the file (`c.x = make_device<float>(n);`: 1), or
 * of the host's (`m->w = (float **)calloc(n, sizeof(float *));`, `new
 * T[n]`: 2), a C cast of it allowed; 0 otherwise. */
static int allocator_value(const sview *v, size_t eq)
{
    size_t i = eq + 1;
    if (is(v, i, "(")) {
        size_t c = close_of(v, i), k = i + 1;
        while (k < c && (ident(v, k) || is(v, k, "*") || is(v, k, "::")))
            k++;
        i = c < v->n && k == c && c > i + 1 ? c + 1 : i;
    }
    while (i < v->n && (is(v, i, "std") || is(v, i, "::")))
        i++;
    if (is(v, i, "new")) {
        size_t k = i + 1;
        while (k < v->n && !is(v, k, ";") && !is(v, k, "(") && !is(v, k, "{"))
            k++;
        return is(v, k, ";") ? 2 : 0;
    }
    int host = in_words(v, i, host_allocations) && is(v, i + 1, "(");
    if (!host && !scan_allocator_call(v, i))
        return 0;
    while (i < v->n && !is(v, i, "("))
        i++;
    return i < v->n && is(v, close_of(v, i) + 1, ";") ? 1 + host : 0;
}

/* Whether the use of member token t hands its whole value to a call other
 * than a release (`cudaMemcpy(c->tab, ...)`, `init(c->tab)`): for a table
 * the host allocated, the call may write pointers into it. */
static int whole_to_call(const sview *v, size_t t)
{
    static const char *const releases[] = {"free", "cudaFreeHost", NULL};
    size_t first, end;
    int addr;
    member_unit(v, t, &first, &end, &addr);
    if (addr || end != t + 1 || first == 0 || end >= v->n ||
        !(is(v, first - 1, "(") || is(v, first - 1, ",")) || !(is(v, end, ")") || is(v, end, ",")))
        return 0;
    size_t open = sview_paren_around(v, t);
    return open < v->n && open > 0 && ident(v, open - 1) && !in_words(v, open - 1, releases) &&
           !in_words(v, open - 1, sview_keywords);
}

/* Whether [first, end) is a whole argument of a launch (its value), or of a
 * library call: its value to any, its address (addr) to one that keeps no
 * pointer, or to an allocation call only (alloc_only). */
static int library_argument(const sview *v, size_t first, size_t end, int addr, int alloc_only)
{
    if (first == 0 || end >= v->n || !(is(v, first - 1, "(") || is(v, first - 1, ",")) ||
        !(is(v, end, ")") || is(v, end, ",") || is(v, end, ">>>")))
        return 0;
    size_t last = end - 1; /* the unit's last token before any ".get()" */
    if (last >= 4 && sview_smart_get(v, last - 2))
        last -= 4;
    size_t open = is(v, end, ">>>") ? v->n : sview_paren_around(v, last);
    if (is(v, end, ">>>") || (open < v->n && open > 0 && is(v, open - 1, ">>>")))
        return !addr; /* a launch: its configuration or its arguments */
    if (open >= v->n || open == 0 || !ident(v, open - 1) || in_words(v, open - 1, sview_keywords))
        return 0;
    if (!addr) /* its value: the data it points at moves, the pointer stays */
        return scan_library_call(v, open - 1);
    return alloc_only ? in_words(v, open - 1, allocations)
                      : !scan_library_keeps_pointers(v, open - 1);
}

/* Whether [first, end) is a whole argument of a call of a function of the
 * file that keeps that parameter's value in place (scan_param_value_stays),
 * or only reads the elements of that table or container parameter
 * (scan_param_elements_kept). */
static int file_call_argument(const sview *v, size_t first, size_t end)
{
    if (first == 0 || end >= v->n || !(is(v, first - 1, "(") || is(v, first - 1, ",")) ||
        !(is(v, end, ")") || is(v, end, ",")))
        return 0;
    size_t open = sview_paren_around(v, end - 1);
    if (open >= v->n || open == 0 || !ident(v, open - 1) || in_words(v, open - 1, sview_keywords))
        return 0;
    int k = sview_arg_position(v, open, first);
    return scan_param_value_stays(v, open - 1, k) || scan_param_elements_kept(v, open - 1, k);
}

/* Whether the use of member token t (after '.' or '->' of an object) keeps
 * its pointer in place: an element read or written inside an expression; an
 * argument of a launch or of a library call that keeps no pointer; its
 * address given to an allocation call (call_member), or to any library call
 * that keeps no pointer (another member: a stream, an event); or the target
 * of an assignment of no named value. A member of it, or the member or an
 * element handed on whole (assigned, returned, initialising), does not. */
static int member_stays_at(const sview *v, const char *m, int call_member, int depth);

/* A container's methods that hand out no element's address. */
static const char *const size_methods[] = {"size", "resize", "reserve", "empty", "length", NULL};

/* When the unit of a use ends with '.' or '->' at end: whether what follows
 * keeps the member in place: a size method of a container (`x.items.size()`)
 * or a member of an element (`x.items[i].buf`, `&x.items[i].buf`) that stays
 * in place itself, so that every element holds its own allocation (one
 * level deep). */
static int nested_stays(const sview *v, size_t end, int call_member, int depth)
{
    if (!ident(v, end + 1))
        return 0;
    if (in_words(v, end + 1, size_methods) && is(v, end + 2, "("))
        return 1;
    if (depth > 0 || is(v, end + 2, "("))
        return 0;
    char *m = cuco_strndup(v->src + tk(v, end + 1)->off, tk(v, end + 1)->len);
    int stays = m && member_stays_at(v, m, call_member, depth + 1);
    free(m);
    return stays;
}

static int use_stays(const sview *v, size_t t, int call_member, int depth)
{
    size_t first, end;
    int addr;
    member_unit(v, t, &first, &end, &addr);
    if (end >= v->n)
        return 0;
    if (is(v, end, ".") || is(v, end, "->"))
        return nested_stays(v, end, call_member,
                            depth); /* the address, if any, is the nested member's */
    if (is(v, end, "=")) {
        size_t e = end + 1;
        while (e < v->n && !is(v, e, ";"))
            e++;
        cuco_strlist heads = {0};
        int rc = scan_expr_heads(v, end + 1, e, &heads, 1), none = rc == 0 && heads.n == 0;
        cuco_strlist_free(&heads);
        return !addr && (none || allocator_value(v, end));
    }
    if (library_argument(v, first, end, addr, call_member) ||
        (!addr && file_call_argument(v, first, end)))
        return 1;
    /* a truth test or a comparison (`!m->w`, `m->w == NULL`): no pointer
     * is kept */
    if (!addr && first > 0 &&
        (is(v, first - 1, "!") || in_words(v, first - 1, truth_ops) || in_words(v, end, truth_ops)))
        return 1;
    if (addr || end == t + 1 || first == 0)
        return 0;
    /* an element inside an expression, not handed on whole */
    int whole_before = is(v, first - 1, "=") || is(v, first - 1, "(") || is(v, first - 1, ",") ||
                       is(v, first - 1, "{") || is(v, first - 1, "return");
    int whole_after = is(v, end, ";") || is(v, end, ",") || is(v, end, ")") || is(v, end, "}");
    return !(whole_before && whole_after);
}

/* Whether the use of member token t is its address given to an allocation
 * call (call_member) or to a library call that keeps no pointer: the
 * member's value comes from there, not from an initialiser the text does
 * not spell as a member (`T c{p, p}`, a constructor's list). */
static int use_makes(const sview *v, size_t t, int call_member)
{
    size_t first, end;
    int addr;
    member_unit(v, t, &first, &end, &addr);
    if (end < v->n && (is(v, end, ".") || is(v, end, "->")) && ident(v, end + 1) &&
        !is(v, end + 2, "("))
        return use_makes(v, end + 1, call_member); /* x.items[i].buf made */
    if (!addr && is(v, end, "=") && allocator_value(v, end))
        return 1; /* c.x = make_device<float>(n); */
    /* &c.x, or &c.x[i] of an array of pointers: each element allocated */
    return addr && library_argument(v, first, end, 1, call_member) &&
           (end == t + 1 || in_words(v, sview_paren_around(v, end - 1) - 1, allocations));
}

/* Whether member token t is read through a plain name (`o.hidden`) that
 * the enclosing function declares with a struct type whose member of that
 * name holds a plain value (`const Options &o`, `struct Options { int
 * hidden; }`): another struct's member, no buffer. */
static int other_struct_scalar(const sview *v, size_t t)
{
    size_t o = t - 2;
    if (t < 3 || !ident(v, o) || is(v, o - 1, ".") || is(v, o - 1, "->"))
        return 0;
    for (size_t i = 0; i < v->ndefs; i++) {
        size_t def = v->defs[i], end = close_of(v, v->def_bodies[i]);
        if (!(def < t && t < end))
            continue;
        for (size_t k = t; k-- > def;) {
            if (!same_tok(v, k, o) || !sview_declarator(v, k, "= ; , ) [ {"))
                continue;
            size_t ty = k - 1;
            while (ty > def && (is(v, ty, "*") || is(v, ty, "&") || is(v, ty, "const")))
                ty--;
            return ident(v, ty) && scan_scalar_member_of(v, ty, t);
        }
        return 0;
    }
    return 0;
}

/* CUDA's built-in variables: their .x is no member of anything the
 * program allocates. */
static const char *const builtins[] = {"threadIdx", "blockIdx", "blockDim", "gridDim", NULL};

/* Whether the member named at token m (the call's, call_member) stays in
 * place at each of its uses in the text and is made by a call there. */
static int member_stays_at(const sview *v, const char *m, int call_member, int depth)
{
    int made = 0, host = 0, handed = 0;
    for (size_t t = 2; t < v->n; t++) {
        if (!(is(v, t - 1, "->") || is(v, t - 1, ".")) || !is(v, t, m) ||
            in_words(v, t - 2, builtins) || other_struct_scalar(v, t))
            continue;
        if (!use_stays(v, t, call_member, depth))
            return 0;
        made |= use_makes(v, t, call_member);
        host |= is(v, t + 1, "=") && allocator_value(v, t + 1) == 2;
        handed |= whole_to_call(v, t);
    }
    /* a table the host allocated, handed whole to a call, may get its
     * pointers from anywhere */
    return made && !(host && handed);
}

static int member_stays(const sview *v, const char *m, int call_member)
{
    return member_stays_at(v, m, call_member, 0);
}

/* The type token of parameter b of the function whose parameters open at
 * params (`ctx *c`, `const Layer &L`: ctx, Layer); v->n when b is no
 * parameter or its type is not one name. */
static size_t param_type(const sview *v, size_t params, const char *b)
{
    size_t a, e;
    for (int k = 0; params < v->n && arg_range(v, params, k, &a, &e); k++) {
        if (e == a || !is(v, e - 1, b))
            continue;
        size_t t = a;
        while (t < e && (is(v, t, "const") || is(v, t, "struct") || is(v, t, "volatile")))
            t++;
        return t + 1 < e && ident(v, t) ? t : v->n;
    }
    return v->n;
}

/* Whether the text may set the members of objects of the type at token ty
 * without naming them: a brace or copy initialisation (`T c{p, p}`, `T c =
 * d`, `T{...}`) or a constructor (`T(`). */
static int type_set_whole(const sview *v, size_t ty)
{
    for (size_t i = 0; i + 2 < v->n; i++) {
        if (!same_tok(v, i, ty) ||
            (i > 0 && (is(v, i - 1, "sizeof") || is(v, i - 1, "struct") || is(v, i - 1, "class"))))
            continue; /* its size, or its definition's head */
        if (is(v, i + 1, "{") || is(v, i + 1, "(") ||
            (ident(v, i + 1) && (is(v, i + 2, "{") || is(v, i + 2, "=") || is(v, i + 2, "("))))
            return 1;
    }
    return 0;
}

/* Whether the use of an object name at u (not after '.' or '->') may
 * write the object whole: an assignment to it, through it (`*c = other`) or
 * to an element of it, or the object handed to a call the file does not
 * define (a copy into it, a library that fills it). Its members, a launch,
 * a function of the file (whose parameter is checked in turn), sizeof, a
 * free and a memset read, release or clear it only. */
static int writes_whole(const sview *v, size_t u)
{
    /* a release, a size, or a fill with one byte (`memset(&c, 0, sizeof c)`):
     * no other object's pointer comes in */
    static const char *const releases[] = {"free",  "cudaFree", "cudaFreeHost", "sizeof", "memset",
                                           "bzero", NULL};
    if (is(v, u + 1, ".") || is(v, u + 1, "->"))
        return 0;
    if (is(v, u + 1, "="))                                                   /* c = ..., *c = ... */
        return !(is(v, u + 2, "&") && ident(v, u + 3) && is(v, u + 4, ";")); /* T *c = &x; */
    if (is(v, u + 1, "[")) {
        size_t c = close_of(v, u + 1);
        return c < v->n && is(v, c + 1, "=");
    }
    size_t a = is(v, u - 1, "&") ? u - 1 : u;
    if (!(is(v, a - 1, "(") || is(v, a - 1, ",")) || !(is(v, u + 1, ",") || is(v, u + 1, ")")))
        return 0; /* inside an expression: read */
    size_t open = sview_paren_around(v, u);
    if (open >= v->n || open == 0 || is(v, open - 1, ">>>"))
        return 0;
    size_t at = 0, body;
    if (!ident(v, open - 1) || in_words(v, open - 1, sview_keywords) ||
        in_words(v, open - 1, releases) || sview_next_def(v, open - 1, &at, &body) < v->n)
        return 0;
    return 1;
}

/* The tokens [*a, *b) where the name declared at d is seen: the function
 * whose parameter list or body holds it, or the whole file (a global). */
static void name_scope(const sview *v, size_t d, size_t *a, size_t *b)
{
    *a = 0;
    *b = v->n;
    for (size_t i = 0; i < v->ndefs; i++) {
        size_t k = v->defs[i];
        if (k + 1 < d && d < close_of(v, k + 1)) {
            *a = k;
            *b = close_of(v, v->def_bodies[i]);
            return;
        }
    }
    size_t body = function_body_of(v, d);
    if (body < v->n) {
        *a = body;
        *b = close_of(v, body);
    }
}

/* Whether the text may write an object of the type at token ty whole:
 * through any name declared with that type (`ctx *c`, `Layer &L`, `ctx
 * all[4]`), writes_whole at one of its uses in the name's scope. */
static int objects_set_whole(const sview *v, size_t ty)
{
    for (size_t k = 0; k + 1 < v->n; k++) {
        if (!same_tok(v, k, ty) || (k > 0 && (is(v, k - 1, "struct") || is(v, k - 1, "class"))))
            continue;
        size_t d = k + 1, a, b;
        while (d < v->n && (is(v, d, "*") || is(v, d, "&") || is(v, d, "const")))
            d++;
        if (d >= v->n || !ident(v, d))
            continue;
        name_scope(v, d, &a, &b);
        for (size_t u = a > 0 ? a : 1; u + 1 < v->n && u < b; u++)
            if (u != d && same_tok(v, u, d) && !is(v, u - 1, ".") && !is(v, u - 1, "->") &&
                writes_whole(v, u))
                return 1;
    }
    return 0;
}

int scan_members_distinct(const sview *v, size_t a1, size_t b1, size_t a2, size_t b2)
{
    if (b1 != a1 + 3 || b2 != a2 + 3 || !same_tok(v, a1, a2) || same_tok(v, a1 + 2, a2 + 2) ||
        !member_after(v, a1) || !member_after(v, a2))
        return 0;
    char *m1 = cuco_strndup(v->src + tk(v, a1 + 2)->off, tk(v, a1 + 2)->len);
    char *m2 = cuco_strndup(v->src + tk(v, a2 + 2)->off, tk(v, a2 + 2)->len);
    int distinct = m1 && m2 && member_stays(v, m1, 1) && member_stays(v, m2, 1);
    free(m1);
    free(m2);
    return distinct;
}

/* Whether the plain use of a member's or a global's name at t (a member
 * inside its class's methods, no `this->`) keeps its value in place: its
 * declaration (initialised to no named value), an element (`m_[i]`), its
 * address given to an allocation call, its value given whole to a launch
 * or a library call that keeps no pointer, a test, or an assignment of no
 * named value. */
static int plain_use_stays(const sview *v, size_t t)
{
    size_t brace = block_open(v, t);
    int declared = (brace >= v->n || sview_class_body(v, brace)) && is(v, t - 1, "*");
    if (declared && (is(v, t + 1, ";") || is(v, t + 1, ",")))
        return 1; /* its declaration, as a member or a global */
    if (is(v, t + 1, "[") && !is(v, t - 1, "&"))
        return 1;
    if (is(v, t + 1, "==") || is(v, t + 1, "!=") || is(v, t - 1, "!") ||
        (is(v, t - 1, "(") && is(v, t + 1, ")") && t >= 2 && is(v, t - 2, "if")))
        return 1;
    if (is(v, t - 1, "&"))
        return library_argument(v, t - 1, t + 1, 1, 1);
    if (is(v, t + 1, "=")) {
        size_t e = t + 2;
        for (int d = 0; e < v->n && !is(v, e, ";") && !(d == 0 && is(v, e, ",")); e++)
            d += is(v, e, "(") + is(v, e, "{") - is(v, e, ")") - is(v, e, "}");
        cuco_strlist heads = {0};
        int rc = scan_expr_heads(v, t + 2, e, &heads, 1), none = rc == 0 && heads.n == 0;
        cuco_strlist_free(&heads);
        return none;
    }
    return library_argument(v, t, t + 1, 0, 0);
}

int scan_member_kept(const sview *v, const char *name)
{
    int made = 0;
    for (size_t t = 2; t + 1 < v->n; t++) {
        if (!is(v, t, name))
            continue;
        int member = is(v, t - 1, "->") || is(v, t - 1, ".");
        if (member ? !use_stays(v, t, 1, 0) : !plain_use_stays(v, t))
            return 0;
        made |= member ? use_makes(v, t, 1) : is(v, t - 1, "&");
    }
    return made;
}

/* member_stays for every one of the call's members. */
static int members_stay(const sview *v, const cuco_strlist *members)
{
    for (size_t k = 0; k < members->n; k++)
        if (!member_stays(v, members->items[k], 1))
            return 0;
    return 1;
}

/* Whether the argument [first, end) of the call whose '(' is at open goes
 * by value: to a launch, a library call (C APIs), or a function of the
 * file whose parameter there is no reference (`float *&d` could be set). */
static int by_value_arg(const sview *v, size_t open, size_t first)
{
    if (open == 0 || open >= v->n)
        return 0;
    if (is(v, open - 1, ">>>"))
        return 1;
    if (!ident(v, open - 1) || in_words(v, open - 1, sview_keywords))
        return 0;
    if (scan_library_call(v, open - 1))
        return 1;
    size_t a, b;
    int k = 0;
    while (arg_range(v, open, k, &a, &b) && !(a <= first && first < b))
        k++;
    if (!arg_range(v, open, k, &a, &b) || !scan_param_of(v, open - 1, k, &a, &b))
        return 0;
    for (size_t i = a; i < b; i++)
        if (is(v, i, "&") || is(v, i, "&&"))
            return 0;
    return 1;
}

/* How the use of member token t touches the member: 0 it sets nothing (an
 * allocation assigned, or its address given to an allocation call: *made;
 * a release; a truth test or comparison; an element read as a value, in
 * an expression or given by value to a call), 2 its whole value is read
 * out (a copy of the table elsewhere, through which its elements could be
 * set), 1 anything else (an assignment, a step, an address given to any
 * other call, an element handed by reference, a member of it). */
static int member_use(const sview *v, size_t t, int *made)
{
    static const char *const releases[] = {"free", "cudaFree", "cudaFreeHost", NULL};
    size_t first, end;
    int addr;
    member_unit(v, t, &first, &end, &addr);
    if (end >= v->n || first == 0 || is(v, end, ".") || is(v, end, "->") ||
        in_words(v, end, step_ops) || in_words(v, first - 1, step_ops))
        return 1;
    if (is(v, end, "=") || addr) {
        size_t open = addr ? sview_paren_around(v, first) : v->n;
        int alloc = addr ? open < v->n && open > 0 && in_words(v, open - 1, allocations)
                         : allocator_value(v, end) != 0;
        *made |= alloc;
        return !alloc;
    }
    if (is(v, first - 1, "!") || in_words(v, first - 1, truth_ops) || in_words(v, end, truth_ops))
        return 0;
    int arg =
        (is(v, first - 1, "(") || is(v, first - 1, ",")) && (is(v, end, ")") || is(v, end, ","));
    size_t open = arg ? sview_paren_around(v, first) : v->n;
    if (end == t + 1) /* the whole value */
        return arg && open < v->n && open > 0 && in_words(v, open - 1, releases) ? 0 : 2;
    return arg && !by_value_arg(v, open, first) ? 1 : 0;
}

int scan_member_never_set(const sview *v, size_t m)
{
    int made = 0;
    for (size_t t = 2; t < v->n; t++)
        if ((is(v, t - 1, "->") || is(v, t - 1, ".")) && same_tok(v, t, m) &&
            !in_words(v, t - 2, builtins) && !other_struct_scalar(v, t) &&
            member_use(v, t, &made) != 0)
            return 0;
    return made;
}

int scan_other_member_stays(const sview *v, size_t m)
{
    char *name = cuco_strndup(v->src + tk(v, m)->off, tk(v, m)->len);
    int stays = name && member_stays(v, name, 0); /* out of memory: not apart */
    free(name);
    return stays;
}

int scan_members_apart_in(const scan *s, size_t a, size_t b)
{
    const sview *v = s->v;
    if (!s->members_apart)
        return 0;
    int seen = 0;
    for (size_t i = a; i < b; i++) {
        if (!scan_is_head(v, i) || !is(v, i, s->member_base))
            continue;
        /* another member that stays in place everywhere and is made by a
         * call (not one the call's buffers could have been copied into), or
         * a scalar (`s.n`: it holds no buffer) */
        if (!member_after(v, i) || in_list(v, i + 2, s->members.items, s->members.n) ||
            (!scan_other_member_stays(v, i + 2) && !scan_scalar_member(v, i + 2)))
            return 0;
        seen = 1;
    }
    return seen;
}

int scan_members_apart(scan *s)
{
    const fn_scope *f = &s->fn;
    const char *b = s->member_base;
    if (!b || s->member_whole || !s->members.n || cuco_strlist_has(&s->member_plain, b) ||
        cuco_strlist_has(&f->alias_a, b) || cuco_strlist_has(&f->alias_b, b) ||
        cuco_strlist_has(&f->holds_a, b) || cuco_strlist_has(&f->holds_b, b) ||
        cuco_strlist_has(&f->stores, b) || cuco_strlist_has(&f->wild, b) ||
        !members_stay(s->v, &s->members))
        return 0;
    size_t ty = param_type(s->v, f->params, b);
    if (ty >= s->v->n || type_set_whole(s->v, ty) || objects_set_whole(s->v, ty))
        return 0; /* a parameter of a type whose objects are made member by member */
    s->members_apart = 1;
    cuco_strlist drop = {0};
    int rc = cuco_strlist_push(&drop, b);
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        stmt *st = &s->stmts[i];
        if (i != s->call && cuco_strlist_has(&st->heads, b) &&
            scan_members_apart_in(s, st->a, st->b))
            rc = scan_stmt_drop_heads(st, &drop);
    }
    cuco_strlist_free(&drop);
    return rc;
}
