/* scan_alias.c: the alias pairs of a function (scan_int.h:
 * scan_alias_pairs), flow-insensitive: what names may hold the same buffer.
 * A pointer copied (p = y, T *p = y + off), stored into a table, an
 * element's member or through a pointer (tab[i] = y, s[1].buf = y, *pp =
 * y), bound (auto [p, q] = ..., std::tie(p, q) = ..., range-for), swapped,
 * declared with it in brackets (device_ptr<float> p(y), vector<float *>
 * v{x, y}), captured by a lambda, handed to a call beside an address (a
 * memcpy, an out-parameter, a descriptor set with &y) or to an object's
 * method (v.push_back(y)). Names that can hold no buffer (scalars, streams,
 * handles) are left out of lists of names, where they would join the
 * buffers they sit beside.
 *
 * An object the function declares (not a pointer or a reference: `Pair q`,
 * `Params p[2]`, `std::vector<float *> v`) that is given pointers into its
 * own storage (q.in = y, Pair q = {y, a}, v.push_back(y), init(&q, y) or
 * init(q, y) into a reference, the callee's only such argument) holds them:
 * touching q touches y and a, while y and a stay two buffers. A store
 * through a pointer or a reference (pp->in = z, *pp = z, r.in = z) may land
 * in any object the pointer reaches, so the objects that its names hold
 * join them as aliases. */
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"

/* Type words of arithmetic scalars and handles: no buffer. */
static const char *const scalar_words[] = {"int",
                                           "long",
                                           "short",
                                           "char",
                                           "unsigned",
                                           "signed",
                                           "float",
                                           "double",
                                           "bool",
                                           "size_t",
                                           "ssize_t",
                                           "int8_t",
                                           "uint8_t",
                                           "int16_t",
                                           "uint16_t",
                                           "int32_t",
                                           "uint32_t",
                                           "int64_t",
                                           "uint64_t",
                                           "ptrdiff_t",
                                           "cudaStream_t",
                                           "cudaEvent_t",
                                           "ncclComm_t",
                                           "cublasHandle_t",
                                           "cublasLtHandle_t",
                                           "dim3",
                                           "ncclDataType_t",
                                           "ncclRedOp_t",
                                           NULL};

/* Whether the name at i is a later declarator of a declaration of an
 * arithmetic type ("const size_t n = a.n, m = a.m;": m), with no '*' or
 * '&' of its own. */
static int later_scalar_declarator(const sview *v, size_t i)
{
    if (!is(v, i - 1, ","))
        return 0;
    int d = 0;
    size_t k = i - 1;
    while (k > 0) {
        k--;
        d += is(v, k, ")") + is(v, k, "]") + is(v, k, "}") - is(v, k, "(") - is(v, k, "[") -
             is(v, k, "{");
        if (d < 0 || (d == 0 && is(v, k, ";")))
            break;
    }
    size_t t = k + 1;
    while (t < i && (is(v, t, "const") || is(v, t, "static") || is(v, t, "constexpr")))
        t++;
    return t < i && in_words(v, t, scalar_words) && sview_declarator(v, t + 1, "= ; , ) [ {");
}

/* Whether the function of f declares name as an arithmetic scalar or a
 * handle ("size_t n", "const int rows = 4", "cudaStream_t s": such a type
 * word right before the name), which no buffer can alias. */
static int member_decl_at(const sview *v, size_t k, size_t *body);

/* Whether the name at i is declared there with an arithmetic type (or
 * later in such a declaration). */
static int scalar_decl_at(const sview *v, size_t i)
{
    return (is(v, i + 1, "=") || is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, ")") ||
            is(v, i + 1, "{")) &&
           (in_words(v, i - 1, scalar_words) || later_scalar_declarator(v, i));
}

static int declared_scalar(const fn_scope *f, const sview *v, const char *name)
{
    int declared = 0;
    for (size_t i = f->params + 1; i < f->body_end && i < v->n; i++) {
        if (!ident(v, i) || !is(v, i, name))
            continue;
        if (scalar_decl_at(v, i) || scan_macro_number(v, i))
            return 1; /* a number, or `#define N 4` */
        declared |= sview_declarator(v, i, "= ; , ) [ {");
    }
    /* not the function's own: a constant at file scope (`constexpr int
     * kLayers = 4;`), or a member of the file's classes held as a value
     * (`size_t n; cudaStream_t stream;` used in a method) */
    size_t body;
    for (size_t k = 1; !declared && k + 1 < v->n; k++) {
        if (!is(v, k, name))
            continue;
        if (v->scope[k] == 0 && function_body_of(v, k) >= v->n && scalar_decl_at(v, k))
            return 1;
        if (member_decl_at(v, k, &body))
            return scan_scalar_member(v, k);
    }
    return 0;
}

static int scalar_struct(const sview *v, size_t t, int depth);

/* Whether the declarations of the struct body opening at brace are all of
 * arithmetic types or of such structs in turn (no pointer, reference or
 * function among them). */
static int scalar_body(const sview *v, size_t brace, int depth)
{
    static const char *const skip[] = {"const",   "static",    "constexpr", "mutable", "public",
                                       "private", "protected", ":",         NULL};
    size_t end = close_of(v, brace);
    int first = 1;
    for (size_t i = brace + 1; i < end && i < v->n; i++) {
        if (is(v, i, "*") || is(v, i, "&") || is(v, i, "&&") || is(v, i, "(") || is(v, i, "<"))
            return 0;
        if (is(v, i, "{")) {
            i = close_of(v, i);
            continue;
        }
        if (is(v, i, ";")) {
            first = 1;
        } else if (first && !in_words(v, i, skip)) {
            if (!in_words(v, i, scalar_words) && !(ident(v, i) && scalar_struct(v, i, depth + 1)))
                return 0;
            first = 0;
        }
    }
    return end < v->n;
}

/* Whether token t names a struct or class of the file (`struct T {`, C's
 * `typedef struct { ... } T;`) whose members all hold plain values. */
static int scalar_struct(const sview *v, size_t t, int depth)
{
    if (depth > 2)
        return 0;
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, t))
            continue;
        if ((is(v, k - 1, "struct") || is(v, k - 1, "class")) && is(v, k + 1, "{"))
            return scalar_body(v, k + 1, depth);
        if (is(v, k - 1, "}") && is(v, k + 1, ";") && block_open(v, k - 1) < v->n)
            return scalar_body(v, block_open(v, k - 1), depth);
    }
    return 0;
}

int scan_struct_holds_pointers(const sview *v, size_t t)
{
    if (!ident(v, t) || in_words(v, t, scalar_words) || in_words(v, t, scan_type_words) ||
        in_words(v, t, sview_keywords))
        return 0; /* a word of the language names no struct of the file */
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, t) || (k >= 2 && is(v, k - 2, "enum")))
            continue; /* an `enum class` holds values */
        if (((is(v, k - 1, "struct") || is(v, k - 1, "class")) && is(v, k + 1, "{")) ||
            (is(v, k - 1, "}") && is(v, k + 1, ";") && block_open(v, k - 1) < v->n))
            return !scalar_struct(v, t, 0);
    }
    return 0;
}

/* Whether the member named like token m is declared, in every class or
 * struct body of the file that declares it, with an arithmetic type word
 * (`struct Options { size_t n = 4, m = 8; };`) or as a struct of the file
 * whose members are such in turn (`Config cfg;`): no buffer. */
/* Whether the member declared at token k in the class body opening at body
 * holds a plain value: an arithmetic type word or a struct of such, not a
 * pointer, reference or function of the same list. */
static int scalar_decl(const sview *v, size_t body, size_t k)
{
    static const char *const skip[] = {"const", "static", "constexpr", "mutable", "volatile", NULL};
    if (is(v, k - 1, "*") || is(v, k - 1, "&"))
        return 0;
    size_t t = sview_member_decl_start(v, body, k);
    while (t < k && in_words(v, t, skip))
        t++;
    if (!in_words(v, t, scalar_words) && !(ident(v, t) && scalar_struct(v, t, 0)))
        return 0;
    for (size_t j = t; j < k; j++)
        if (is(v, j, "*") || is(v, j, "&") || is(v, j, "("))
            return 0; /* a pointer declared in the same list, a function */
    return 1;
}

/* Whether token k declares a member of the class body around it. */
static int member_decl_at(const sview *v, size_t k, size_t *body)
{
    if (k == 0 || is(v, k - 1, ".") || is(v, k - 1, "->") ||
        !(is(v, k + 1, ";") || is(v, k + 1, "=") || is(v, k + 1, ",") || is(v, k + 1, "{")))
        return 0;
    *body = block_open(v, k);
    return *body < v->n && sview_class_body(v, *body);
}

/* Whether every declaration of the member named like token m in a class or
 * struct body of the file meets decl (its body, its token); 0 when there
 * is none. */
static int every_member_decl(const sview *v, size_t m,
                             int (*decl)(const sview *v, size_t body, size_t k))
{
    int seen = 0;
    size_t body;
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, m) || !member_decl_at(v, k, &body))
            continue;
        if (!decl(v, body, k))
            return 0;
        seen = 1;
    }
    return seen;
}

int scan_scalar_member(const sview *v, size_t m)
{
    return every_member_decl(v, m, scalar_decl);
}

/* Whether the class body at body holds more than values (a pointer, a
 * reference, a container). */
static int holder_body(const sview *v, size_t body, size_t k)
{
    (void)k;
    return !scalar_body(v, body, 0);
}

int scan_member_of_holder(const sview *v, size_t m)
{
    return every_member_decl(v, m, holder_body);
}

int scan_scalar_member_of(const sview *v, size_t type, size_t m)
{
    size_t body;
    for (size_t k = 1; k + 1 < v->n; k++) {
        if (!same_tok(v, k, type) || !(is(v, k - 1, "struct") || is(v, k - 1, "class")) ||
            !is(v, k + 1, "{"))
            continue;
        size_t end = close_of(v, k + 1);
        for (size_t j = k + 2; j < end && j < v->n; j++)
            if (same_tok(v, j, m) && member_decl_at(v, j, &body) && body == k + 1)
                return scalar_decl(v, body, j);
    }
    return 0;
}

/* Heads of the comma-separated elements in [a, b), as scan_expr_heads
 * finds them, less the elements that read a scalar member (`o.n`,
 * `cfg->rows * 2`): a constructor's size argument holds no buffer. */
static int heads_but_scalar_members(const sview *v, size_t a, size_t b, cuco_strlist *out)
{
    size_t from[64], to[64];
    int n = arg_ranges(v, a - 1, from, to, 64);
    if (n < 0 || n >= 64)
        return scan_expr_heads(v, a, b, out, 0);
    for (int k = 0; k < n; k++) {
        size_t h = from[k];
        if (scan_is_head(v, h) && (is(v, h + 1, ".") || is(v, h + 1, "->")) && ident(v, h + 2) &&
            !is(v, h + 3, ".") && !is(v, h + 3, "->") && !is(v, h + 3, "(") && !is(v, h + 3, "[") &&
            scan_scalar_member(v, h + 2))
            continue;
        int rc = scan_expr_heads(v, from[k], to[k], out, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* How the function of f declares a name: not at all (a global, a member),
 * as an object with storage of its own (indexable too: an array, a standard
 * container), or otherwise (a pointer, a reference, auto, a scalar, a
 * structured binding, or two declarations that differ). */
typedef enum { DECL_NONE, DECL_OBJECT, DECL_INDEXABLE, DECL_OTHER } decl_kind;

/* Whether identifier k is a name of a structured binding (auto [p, q]). */
static int in_binding(const sview *v, size_t k)
{
    size_t i = k;
    while (i > 0 && (ident(v, i) || is(v, i, ",")))
        i--;
    return is(v, i, "[") && i > 0 &&
           (is(v, i - 1, "auto") || is(v, i - 1, "&") || is(v, i - 1, "&&"));
}

/* The kind of the declaration at k, whose type ends at k - 1. */
static decl_kind one_declaration(const fn_scope *f, const sview *v, size_t k, const char *name)
{
    static const char *const indexable[] = {"vector", "array", "deque", NULL};
    if (is(v, k - 1, "*") || is(v, k - 1, "&") || is(v, k - 1, "&&") || is(v, k - 1, "auto") ||
        is(v, k - 1, "const") || is(v, k - 1, "volatile") || declared_scalar(f, v, name) ||
        in_words(v, k - 1, scan_type_words))
        return DECL_OTHER;
    if (is(v, k + 1, "["))
        return DECL_INDEXABLE;
    if (is(v, k - 1, ">")) {
        int d = 0;
        for (size_t i = k - 1; i > 0; i--) {
            d += is(v, i, ">") - is(v, i, "<");
            if (d == 0)
                return in_words(v, i - 1, indexable) ? DECL_INDEXABLE : DECL_OBJECT;
        }
        return DECL_OTHER;
    }
    return DECL_OBJECT;
}

static decl_kind declared_kind(const fn_scope *f, const sview *v, const char *name)
{
    decl_kind kind = DECL_NONE;
    for (size_t k = f->params + 1; k < f->body_end && k + 1 < v->n && kind != DECL_OTHER; k++) {
        if (!ident(v, k) || !is(v, k, name))
            continue;
        if (in_binding(v, k)) {
            kind = DECL_OTHER;
            continue;
        }
        static const char *const follow[] = {";", "=", "{", "(", ",", "[", ")", ":", NULL};
        int typed = ident(v, k - 1) || is(v, k - 1, ">") || is(v, k - 1, "*") ||
                    is(v, k - 1, "&") || is(v, k - 1, "&&");
        if (!typed || !in_words(v, k + 1, follow) || in_words(v, k - 1, sview_keywords))
            continue;
        decl_kind here = one_declaration(f, v, k, name);
        kind = kind == DECL_NONE || kind == here ? here : DECL_OTHER;
    }
    return kind;
}

/* declared_kind of the name at token name. */
static decl_kind kind_at(const fn_scope *f, const sview *v, size_t name)
{
    char *s = cuco_strndup(v->src + tk(v, name)->off, tk(v, name)->len);
    decl_kind k = s ? declared_kind(f, v, s) : DECL_OTHER;
    free(s);
    return k;
}

static int is_object(const fn_scope *f, const sview *v, size_t name)
{
    decl_kind k = kind_at(f, v, name);
    return k == DECL_OBJECT || k == DECL_INDEXABLE;
}

/* What a pair records: two names of one buffer; an object that holds the
 * other; or a store through the first name (an alias pair, and the objects
 * it reaches join it: degrade_stored). */
typedef enum { PAIR_ALIAS, PAIR_HOLDS, PAIR_STORE } pair_kind;

/* Pairs (lhs, each of rhs); a list of names (lists) leaves out what
 * declared_scalar says holds no buffer, on either side. */
static int add_pairs(fn_scope *f, const sview *v, size_t lhs, const cuco_strlist *rhs, int lists,
                     pair_kind kind)
{
    char *name = cuco_strndup(v->src + tk(v, lhs)->off, tk(v, lhs)->len);
    if (!name)
        return CUCO_ENOMEM;
    int rc = 0, scalar = lists && declared_scalar(f, v, name);
    cuco_strlist *a = kind == PAIR_HOLDS ? &f->holds_a : &f->alias_a;
    cuco_strlist *b = kind == PAIR_HOLDS ? &f->holds_b : &f->alias_b;
    if (kind == PAIR_STORE && !scalar && !cuco_strlist_has(&f->stores, name))
        rc = cuco_strlist_push(&f->stores, name);
    for (size_t k = 0; k < rhs->n && rc == 0 && !scalar; k++) {
        if ((lists && declared_scalar(f, v, rhs->items[k])) || !strcmp(rhs->items[k], name))
            continue;
        rc = cuco_strlist_push(a, name);
        if (rc == 0)
            rc = cuco_strlist_push(b, rhs->items[k]);
    }
    free(name);
    return rc;
}

/* The '[' that opens the subscripts ending right before at ("a[i][j]" -> the
 * first '['); at itself when none ends there. */
static size_t before_subscripts(const sview *v, size_t at)
{
    while (at > 0 && is(v, at - 1, "]")) {
        size_t k = at - 1;
        int d = 0;
        for (; k < v->n; k--) {
            d += is(v, k, "]") - is(v, k, "[");
            if (d == 0 || k == 0)
                break;
        }
        if (d != 0 || !is(v, k, "["))
            return at;
        at = k;
    }
    return at;
}

/* The head of the name chain that ends right before '=' at eq (p.buf,
 * L->x, s[1].buf, tab[i], *p); v->n when there is none. */
static size_t lhs_head(const sview *v, size_t eq)
{
    size_t k = eq;
    for (;;) {
        k = before_subscripts(v, k);
        if (k == 0 || !ident(v, k - 1))
            return v->n;
        k--;
        if (k >= 1 && (is(v, k - 1, ".") || is(v, k - 1, "->")))
            k--;
        else
            break;
    }
    return in_words(v, k, scan_type_words) ? v->n : k;
}

/* Every name inside [a, b) paired with every head of the right side. */
static int bind_all(fn_scope *f, const sview *v, size_t a, size_t b, const cuco_strlist *rhs)
{
    int rc = 0;
    for (size_t k = a; k < b && rc == 0; k++)
        if (ident(v, k) && !in_words(v, k, scan_type_words))
            rc = add_pairs(f, v, k, rhs, 1, PAIR_ALIAS);
    return rc;
}

/* How an assignment to the name chain from head to the '=' at eq lands: in
 * head's own storage when head is an object (q = ..., q.in = ..., tab[i] =
 * ..., tab[i].in = ...), a copy into a pointer (p = ...), or through a
 * pointer or a reference (pp->in, *pp, p[i], r.in, q.buf[i]). */
static pair_kind assigned_kind(const fn_scope *f, const sview *v, size_t head, size_t eq)
{
    size_t k = head;
    while (k > 0 && is(v, k - 1, "*"))
        k--;
    if (k < head &&
        !(k > 0 && (ident(v, k - 1) || is(v, k - 1, ">")) && !in_words(v, k - 1, sview_keywords)))
        return PAIR_STORE; /* *pp = ..., not T *p = ... */
    decl_kind kind = kind_at(f, v, head);
    int object = kind == DECL_OBJECT || kind == DECL_INDEXABLE;
    size_t i = head + 1;
    if (i == eq)
        return object ? PAIR_HOLDS : PAIR_ALIAS;
    if (is(v, i, "[")) {
        if (kind != DECL_INDEXABLE)
            return PAIR_STORE;
        i = close_of(v, i) + 1;
    }
    while (i + 1 < eq && is(v, i, ".") && ident(v, i + 1))
        i += 2;
    return i == eq && object ? PAIR_HOLDS : PAIR_STORE;
}

/* Whether token i (a name) is declared a scalar in the function of f. */
static int scalar_name(const fn_scope *f, const sview *v, size_t i)
{
    char *name = cuco_strndup(v->src + tk(v, i)->off, tk(v, i)->len);
    int scalar = name && declared_scalar(f, v, name);
    free(name);
    return scalar;
}

/* Whether `lhs = [a, b)` only moves plain values: lhs a scalar of the
 * function and each name of the value a scalar of the function, a macro
 * that is a number or a chain ending in a scalar member ("size_t n =
 * t.cfg.n, m = n * t.ranks / COLS;"). */
static int scalar_value(const fn_scope *f, const sview *v, size_t lhs, size_t a, size_t b)
{
    if (!scalar_name(f, v, lhs))
        return 0;
    for (size_t i = a; i < b; i++) {
        if (!ident(v, i) || (i > a && (is(v, i - 1, ".") || is(v, i - 1, "->"))) ||
            in_words(v, i, scalar_words) || in_words(v, i, sview_keywords))
            continue;
        size_t last = i;
        while (last + 2 < b && (is(v, last + 1, ".") || is(v, last + 1, "->")) &&
               ident(v, last + 2))
            last += 2;
        if (is(v, last + 1, "(") || is(v, last + 1, "[") ||
            (last == i ? !scalar_name(f, v, i) && !scan_macro_number(v, i)
                       : !scan_scalar_member(v, last)))
            return 0;
        i = last;
    }
    return 1;
}

/* Whether tokens [a, b) (a lambda) return a value: calling a lambda that
 * returns none touches what it names, and hands none of it on (its body's
 * own assignments are the function's too). */
static int returns_value(const sview *v, size_t a, size_t b)
{
    for (size_t k = a; k + 1 < b; k++)
        if (is(v, k, "return") && !is(v, k + 1, ";"))
            return 1;
    return 0;
}

/* Whether tokens [a, b) are one call of a function that parses a number
 * from a string (`atoi` of `argv[i]`, `std::stoul`, after a cast): its
 * value holds no pointer. */
static int parsed_number(const sview *v, size_t a, size_t b)
{
    static const char *const parsers[] = {
        "atoi",   "atol", "atoll", "atof",  "strtol", "strtoll", "strtoul", "strtoull", "strtod",
        "strtof", "stoi", "stol",  "stoll", "stoul",  "stoull",  "stof",    "stod",     NULL};
    if (is(v, a, "(") && close_of(v, a) + 1 < b && in_words(v, a + 1, scan_type_words))
        a = close_of(v, a) + 1; /* a cast before the parse */
    if (a + 2 < b && is(v, a, "std") && is(v, a + 1, "::"))
        a += 2;
    return a + 1 < b && in_words(v, a, parsers) && is(v, a + 1, "(") && close_of(v, a + 1) + 1 == b;
}

/* An assignment at eq: its left side with the right side's heads (a lambda's
 * every name: the lambda holds them, or, when it returns a value, may be
 * any of them); structured bindings and std::tie bind each name. */
static int assignment(fn_scope *f, const sview *v, size_t eq, size_t b)
{
    size_t e = eq + 1;
    int d = 0;
    while (e < b && !(d == 0 && (is(v, e, ";") || is(v, e, ",") || is(v, e, ")")))) {
        d += is(v, e, "(") || is(v, e, "[") || is(v, e, "{");
        d -= is(v, e, ")") || is(v, e, "]") || is(v, e, "}");
        e++;
    }
    cuco_strlist rhs = {0};
    int lambda = is(v, eq + 1, "[");
    int rc = is(v, eq + 1, "{") ? scan_expr_heads(v, eq + 2, close_of(v, eq + 1), &rhs, 0)
                                : scan_expr_heads(v, eq + 1, e, &rhs, lambda);
    size_t open =
        eq > 0 && (is(v, eq - 1, "]") || is(v, eq - 1, ")")) ? sview_open_of(v, eq - 1) : v->n;
    if (rc != 0) {
    } else if (open < v->n && open > 0 && is(v, open, "[") &&
               (is(v, open - 1, "auto") || is(v, open - 1, "&") || is(v, open - 1, "&&"))) {
        cuco_strlist_free(&rhs);
        rc = scan_expr_heads(v, eq + 1, e, &rhs, 1); /* auto [p, q] = ... */
        if (rc == 0)
            rc = bind_all(f, v, open + 1, eq - 1, &rhs);
    } else if (open < v->n && open > 0 && is(v, open, "(") && is(v, open - 1, "tie")) {
        cuco_strlist_free(&rhs);
        rc = scan_expr_heads(v, eq + 1, e, &rhs, 1); /* std::tie(p, q) = ... */
        if (rc == 0)
            rc = bind_all(f, v, open + 1, eq - 1, &rhs);
    } else {
        size_t lhs = lhs_head(v, eq);
        if (lhs < v->n && !scalar_value(f, v, lhs, eq + 1, e) && !parsed_number(v, eq + 1, e))
            rc = add_pairs(f, v, lhs, &rhs, lambda || is(v, eq + 1, "{") || rhs.n > 1,
                           lambda && !returns_value(v, eq + 1, e) ? PAIR_HOLDS
                                                                  : assigned_kind(f, v, lhs, eq));
    }
    cuco_strlist_free(&rhs);
    return rc;
}

enum { MAX_ARGS = 64 };

/* The object whose method is called at name (`v` of v.push_back, `s` of
 * s.bufs[i].add); v->n when name is no method. */
static size_t method_object(const sview *v, size_t name)
{
    if (name < 2 || !(is(v, name - 1, ".") || is(v, name - 1, "->")))
        return v->n;
    size_t k = name - 1;
    while (k >= 2 && (is(v, k, ".") || is(v, k, "->")) && ident(v, k - 1)) {
        k = before_subscripts(v, k - 1);
        if (k > 0 && (is(v, k - 1, ".") || is(v, k - 1, "->")))
            k--;
        else
            break;
    }
    return ident(v, k) ? k : v->n;
}

/* The name a call's argument [a, b) (argument t) may be made to hold
 * another argument through: &p, p into an out-parameter (not where every
 * function of the file by that name only reads the parameter's members),
 * or an object handed to a function the file does not define (it may take
 * it by reference); v->n. */
static size_t holder_arg(const fn_scope *f, const sview *v, size_t name, int t, size_t a, size_t b)
{
    size_t pa, pb;
    if (is(v, a, "&") && ident(v, a + 1) && scan_arg_takes_pointer(v, name, t, 1) &&
        !scan_param_only_read(v, name, t))
        return a + 1;
    if (ident(v, a) && a + 1 == b && scan_arg_takes_pointer(v, name, t, 0) &&
        !scan_param_only_read(v, name, t))
        return a;
    if (ident(v, a) && a + 1 == b && !scan_param_of(v, name, t, &pa, &pb) &&
        scan_library_keeps_pointers(v, name) && is_object(f, v, a))
        return a;
    return v->n;
}

/* What a call's holder (argument t, or the object of a method at t < 0)
 * records: an object of the function holds what it is given when the
 * callee is a method of a standard container called on it, or a function
 * of the file that takes no other holder; anything else is a store. */
static pair_kind call_pair_kind(const fn_scope *f, const sview *v, size_t name, int t,
                                size_t holder, int holders)
{
    size_t pa, pb;
    if (t < 0)
        return is(v, name - 1, ".") && name >= 2 && name - 2 == holder &&
                       kind_at(f, v, holder) == DECL_INDEXABLE
                   ? PAIR_HOLDS
                   : PAIR_STORE;
    return holders == 1 && scan_param_of(v, name, t, &pa, &pb) && is_object(f, v, holder)
               ? PAIR_HOLDS
               : PAIR_STORE;
}

/* A call at name whose arguments hand a pointer over: each argument taken
 * by address (&p: memcpy(&p, &y, 8), view_of(&p, y), a descriptor set with
 * &y) holds the other arguments' heads; an object's method (v.push_back(y))
 * makes the object hold its arguments'. */
static int call_pairs(fn_scope *f, const sview *v, size_t name)
{
    size_t open = name + 1, close = close_of(v, open);
    if (close >= v->n || scan_making_call(v, name) || sview_smart_get(v, name))
        return 0;
    size_t from[MAX_ARGS], to[MAX_ARGS], holder[MAX_ARGS];
    int n = arg_ranges(v, open, from, to, MAX_ARGS), rc = 0, holders = 0;
    for (int t = 0; t < n; t++)
        holders += (holder[t] = holder_arg(f, v, name, t, from[t], to[t])) < v->n;
    size_t obj = method_object(v, name);
    for (int t = -1; t < n && rc == 0; t++) {
        size_t lhs = t < 0 ? obj : holder[t];
        if (lhs >= v->n)
            continue;
        cuco_strlist rhs = {0};
        for (int o = 0; o < n && rc == 0; o++)
            if (o != t)
                rc = scan_expr_heads(v, from[o], to[o], &rhs, 0);
        if (rc == 0)
            rc = add_pairs(f, v, lhs, &rhs, 1, call_pair_kind(f, v, name, t, lhs, holders));
        cuco_strlist_free(&rhs);
    }
    return rc;
}

int scan_alias_grow(const fn_scope *f, cuco_strlist *set, scan_grow mode)
{
    int rc = 0;
    for (int grew = 1; grew && rc == 0;) {
        grew = 0;
        for (size_t i = 0; i < f->alias_a.n && rc == 0; i++) {
            const char *x = f->alias_a.items[i], *y = f->alias_b.items[i];
            int hx = cuco_strlist_has(set, x), hy = cuco_strlist_has(set, y);
            if (hx != hy) {
                rc = cuco_strlist_push(set, hx ? y : x);
                grew = 1;
            }
        }
        for (size_t i = 0; i < f->holds_a.n && rc == 0 && mode != SCAN_GROW_ALIASES; i++) {
            const char *from = f->holds_a.items[i], *to = f->holds_b.items[i];
            if (mode == SCAN_GROW_BACKWARD) {
                const char *t = from;
                from = to;
                to = t;
            }
            if (cuco_strlist_has(set, from) && !cuco_strlist_has(set, to)) {
                rc = cuco_strlist_push(set, to);
                grew = 1;
            }
        }
    }
    return rc;
}

/* Removes pair i of (a, b), its names freed (the last pair takes its place). */
static void pair_remove(cuco_strlist *a, cuco_strlist *b, size_t i)
{
    free(a->items[i]);
    free(b->items[i]);
    a->items[i] = a->items[a->n - 1];
    b->items[i] = b->items[b->n - 1];
    a->n--;
    b->n--;
}

/* A store through a name (pp->in = z, *pp = z, r.in = z) may land in any
 * object its aliases hold, and in what those hold: each such holds pair
 * becomes an alias pair, so that the stored value joins them all. */
static int degrade_stored(fn_scope *f)
{
    int rc = 0;
    for (size_t s = 0; s < f->stores.n && rc == 0; s++) {
        for (int moved = 1; moved && rc == 0;) {
            moved = 0;
            cuco_strlist names = {0};
            rc = cuco_strlist_push(&names, f->stores.items[s]);
            if (rc == 0)
                rc = scan_alias_grow(f, &names, SCAN_GROW_ALIASES);
            for (size_t i = 0; i < f->holds_a.n && rc == 0 && !moved; i++) {
                if (!cuco_strlist_has(&names, f->holds_a.items[i]))
                    continue;
                rc = cuco_strlist_push(&f->alias_a, f->holds_a.items[i]);
                if (rc == 0)
                    rc = cuco_strlist_push(&f->alias_b, f->holds_b.items[i]);
                if (rc == 0)
                    pair_remove(&f->holds_a, &f->holds_b, i);
                moved = 1;
            }
            cuco_strlist_free(&names);
        }
    }
    return rc;
}

/* Drops the pairs whose source is a scalar or handle that nothing is ever
 * assigned to (`p.n = n` with `size_t n` a parameter): it holds no buffer,
 * so it joins p to nothing. One that takes a value (`uint64_t a =
 * (uint64_t)y;`) may carry an address, and its pairs stay. */
static int drop_inert_scalars(fn_scope *f, const sview *v)
{
    cuco_strlist *lists[2][2] = {{&f->alias_a, &f->alias_b}, {&f->holds_a, &f->holds_b}};
    char *drop[2] = {calloc(f->alias_a.n + 1, 1), calloc(f->holds_a.n + 1, 1)};
    for (int l = 0; l < 2 && drop[0] && drop[1]; l++)
        for (size_t i = 0; i < lists[l][1]->n; i++) {
            const char *src = lists[l][1]->items[i];
            drop[l][i] = !cuco_strlist_has(&f->alias_a, src) &&
                         !cuco_strlist_has(&f->holds_a, src) && declared_scalar(f, v, src);
        }
    for (int l = 0; l < 2 && drop[0] && drop[1]; l++)
        for (size_t i = lists[l][0]->n; i-- > 0;)
            if (drop[l][i])
                pair_remove(lists[l][0], lists[l][1], i);
    int rc = drop[0] && drop[1] ? 0 : CUCO_ENOMEM;
    free(drop[0]);
    free(drop[1]);
    return rc;
}

/* The '{' of a braced initialiser when the name at i is declared with one
 * after a pointer or reference declarator (`float *w{y}`) or as an array
 * (`float *ws[]{x, y}`, `T ws[2]{...}`); v->n otherwise. */
static size_t brace_declarator(const sview *v, size_t i)
{
    if (!ident(v, i) || i == 0)
        return v->n;
    size_t k = i + 1;
    while (k < v->n && is(v, k, "["))
        k = close_of(v, k) + 1;
    if (k >= v->n || !is(v, k, "{"))
        return v->n;
    int pointer =
        is(v, i - 1, "*") || is(v, i - 1, "&") || is(v, i - 1, "&&") || is(v, i - 1, "const");
    return pointer || (k > i + 1 && (ident(v, i - 1) || is(v, i - 1, ">"))) ? k : v->n;
}

int scan_alias_pairs(fn_scope *f, const sview *v, size_t a, size_t b)
{
    int rc = 0;
    for (size_t i = a; i < b && rc == 0; i++) {
        cuco_strlist rhs = {0};
        size_t lhs = v->n, open;
        pair_kind kind = PAIR_ALIAS;
        if (is(v, i, "=")) {
            rc = assignment(f, v, i, b);
        } else if (ident(v, i) && (is(v, i + 1, "(") || is(v, i + 1, "{")) && i > a &&
                   (is(v, i - 1, ">") || (ident(v, i - 1) && !in_words(v, i - 1, sview_keywords)) ||
                    (is(v, i - 1, ",") && sview_paren_around(v, i) >= v->n))) {
            /* a declaration with its initialiser in brackets:
             * "thrust::device_ptr<float> p(y);", "std::vector<float *> v{x, y};",
             * the q of "device_ptr<float> p(y), q(z);" (a name with brackets
             * after a comma outside parentheses: a comma expression taken for
             * a declarator only adds a pair) */
            lhs = i;
            kind = is_object(f, v, i) ? PAIR_HOLDS : PAIR_ALIAS;
            rc = heads_but_scalar_members(v, i + 2, close_of(v, i + 1), &rhs);
        } else if (i > a && (open = brace_declarator(v, i)) < v->n) {
            /* a pointer or an array declared with its initialiser in braces:
             * "float *w{y};", "float *ws[]{x, y};" */
            lhs = i;
            rc = heads_but_scalar_members(v, open + 1, close_of(v, open), &rhs);
        } else if (is(v, i, "swap") && is(v, i + 1, "(") && ident(v, i + 2)) {
            lhs = i + 2;
            rc = scan_expr_heads(v, i + 3, close_of(v, i + 1), &rhs, 0);
        } else if (is(v, i, ":") && ident(v, i - 1) && !is(v, i + 1, ":")) {
            size_t k = i; /* range-for: "for (auto &b : buckets)" */
            while (k > a && !is(v, k, "(") && !is(v, k, ";") && !is(v, k, "{"))
                k--;
            if (is(v, k, "(") && k > 0 && is(v, k - 1, "for")) {
                lhs = i - 1;
                rc = scan_expr_heads(v, i + 1, close_of(v, k), &rhs, 0);
            }
        } else if (ident(v, i) && is(v, i + 1, "(") && !in_words(v, i, sview_keywords)) {
            rc = call_pairs(f, v, i);
        }
        if (rc == 0 && lhs < v->n)
            rc = add_pairs(f, v, lhs, &rhs, rhs.n > 1, kind);
        cuco_strlist_free(&rhs);
    }
    if (rc == 0)
        rc = degrade_stored(f);
    return rc == 0 ? drop_inert_scalars(f, v) : rc;
}
