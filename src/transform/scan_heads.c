/* scan_heads.c: what an expression names (scan_int.h): its heads, the
 * variables it reads (`s.buf`, `L->out` and `ls[i].x` count as `s`, `L`,
 * `ls`; types, casts, members and calls are not heads), whether a call's
 * qualified name is in a list, and a statement's heads less some names. The scans of the schedules
 * and of the aliases read expressions through it.
 */
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

const char *const scan_type_words[] = {
    "const",      "volatile",     "void",     "float",         "double",
    "int",        "char",         "short",    "long",          "unsigned",
    "signed",     "bool",         "auto",     "struct",        "class",
    "size_t",     "half",         "__half",   "__nv_bfloat16", "nv_bfloat16",
    "int8_t",     "uint8_t",      "int16_t",  "uint16_t",      "int32_t",
    "uint32_t",   "int64_t",      "uint64_t", "static_cast",   "reinterpret_cast",
    "const_cast", "dynamic_cast", "sizeof",   "nullptr",       "NULL",
    "true",       "false",        "this",     "new",           "delete",
    "typename",   "template",     NULL};

/* A head: an identifier that names a variable, not the member after . or ->,
 * not a call, a type, a keyword or a namespace. */
int scan_is_head(const sview *v, size_t i)
{
    if (!ident(v, i) || in_words(v, i, scan_type_words) || in_words(v, i, sview_keywords))
        return 0;
    if (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::")))
        return 0;
    if (is(v, i + 1, "(") || is(v, i + 1, "::") || is(v, i + 1, "<<<"))
        return 0;
    /* (T *)x and static_cast<T *>(x): a type */
    size_t k = i + 1;
    while (is(v, k, "*") || is(v, k, "&"))
        k++;
    if (k > i + 1 && (is(v, k, ")") || is(v, k, ">")))
        return 0;
    if (is(v, i + 1, ">") && i > 0 && (is(v, i - 1, "<") || is(v, i - 1, ",")))
        return 0;
    /* (uintptr_t)y: a cast's type, the operand after it */
    if (i > 0 && is(v, i - 1, "(") && is(v, i + 1, ")") &&
        (ident(v, i + 2) || is(v, i + 2, "(") ||
         (i + 2 < v->n && tk(v, i + 2)->kind == CUCO_TOK_NUMBER)))
        return 0;
    return 1;
}

/* The first head of the expression [a, b), and those after ?, : at its top. */
int scan_expr_heads(const sview *v, size_t a, size_t b, cuco_strlist *out, int all)
{
    int want = 1, d = 0, braced = -1; /* braced: the depth of a brace list at the top */
    for (size_t i = a; i < b; i++) {
        if (is(v, i, "(") || is(v, i, "[") || is(v, i, "{")) {
            if (is(v, i, "{") && braced < 0 && d == 0)
                braced = d; /* T{a, b}, {a, b}: the list holds every value in it */
            d++;
        } else if (is(v, i, ")") || is(v, i, "]") || is(v, i, "}")) {
            if (--d == braced)
                braced = -1;
        } else if (d == 0 && (is(v, i, "?") || is(v, i, ":") || is(v, i, ",")))
            want = 1;
        if ((want || all || braced >= 0) && scan_is_head(v, i)) {
            char *s = cuco_strndup(v->src + tk(v, i)->off, tk(v, i)->len);
            if (!s || cuco_strlist_push(out, s) != 0) {
                free(s);
                return CUCO_ENOMEM;
            }
            free(s);
            want = 0;
        }
    }
    return 0;
}

/* Qualified name ending at i ("std::min"), for the lists. */
int scan_call_in(const sview *v, size_t i, const char *const *list)
{
    size_t q = i;
    while (q >= 2 && is(v, q - 1, "::") && ident(v, q - 2))
        q -= 2;
    size_t len = tk(v, i)->off + tk(v, i)->len - tk(v, q)->off;
    const char *s = v->src + tk(v, q)->off;
    const char *base = v->src + tk(v, i)->off;
    for (; *list; list++) {
        size_t n = strlen(*list);
        if ((n == len && memcmp(*list, s, n) == 0) ||
            (n == tk(v, i)->len && memcmp(*list, base, n) == 0 && q == i))
            return 1;
    }
    return 0;
}

int scan_stmt_drop_heads(stmt *st, const cuco_strlist *drop)
{
    cuco_strlist keep = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < st->heads.n; i++)
        if (!cuco_strlist_has(drop, st->heads.items[i]))
            rc = cuco_strlist_push(&keep, st->heads.items[i]);
    if (rc != 0) {
        cuco_strlist_free(&keep);
        return rc;
    }
    cuco_strlist_free(&st->heads);
    st->heads = keep;
    return 0;
}

/* The '<' that the '>' at gt closes; 0 when not found nearby. */
static size_t angle_open(const sview *v, size_t gt)
{
    int d = 0;
    for (size_t k = gt; k > 0 && k + 32 > gt; k--) {
        d += is(v, k, ">") - is(v, k, "<");
        if (d == 0)
            return k;
    }
    return 0;
}

int scan_declaration_at(const sview *v, size_t k)
{
    if (!sview_declarator(v, k, "= ; , : [ { ( )"))
        return 0;
    size_t j = k;
    while (j > 1 && (ident(v, j - 1) || is(v, j - 1, "*") || is(v, j - 1, "&") ||
                     is(v, j - 1, "&&") || is(v, j - 1, "::") || is(v, j - 1, ">")))
        j = is(v, j - 1, ">") ? angle_open(v, j - 1) : j - 1;
    if (j == 0 || j >= k)
        return 0;
    if (is(v, j - 1, ";") || is(v, j - 1, "{") || is(v, j - 1, "}") || is(v, j - 1, ":"))
        return 1;
    if (is(v, j - 1, "(") && j >= 2 && (is(v, j - 2, "for") || is(v, j - 2, "catch")))
        return 1;
    return (is(v, j - 1, "(") || is(v, j - 1, ",")) && in_words(v, j, scan_type_words);
}
