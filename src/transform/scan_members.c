/* scan_members.c: the call's members of one object apart from the object's
 * other members (scan_int.h).
 *
 * A call whose buffers are members of one object (`c->cache`, `s.rows`)
 * has that object as their head, and so has every statement that names any
 * of its members: a launch of `c->q` would wait for a gather into
 * `c->cache`. When the buffer arguments of the call that are members are
 * members of the same object B (the others plain names, none of them B), B
 * takes part in no alias, hold or store of the function,
 * and no text of the file lets one of those members escape (its address
 * handed to anything but a library call that does not keep pointers or a
 * kernel launch, its value assigned, returned or given to a function of the
 * file, or the member set from a named value), then a statement that names
 * B only through other members, each read in place the same way, does not
 * touch the call's buffers: B is dropped from its heads
 * (scan_members_apart). Anything else keeps B whole.
 */
#include "cuco/buf.h"
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

static int member_after(const sview *v, size_t i)
{
    return (is(v, i + 1, "->") || is(v, i + 1, ".")) && ident(v, i + 2);
}

static int tok_in(const sview *v, size_t i, const cuco_strlist *l)
{
    for (size_t k = 0; k < l->n; k++)
        if (strlen(l->items[k]) == tk(v, i)->len &&
            !memcmp(l->items[k], v->src + tk(v, i)->off, tk(v, i)->len))
            return 1;
    return 0;
}

int scan_member_arg(scan *s, size_t a, size_t b)
{
    const sview *v = s->v;
    size_t h = a;
    while (h < b && !scan_is_head(v, h))
        h++;
    if (h >= b) {
        s->member_whole = 1; /* no name: what it points into is unknown */
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

/* Whether the use of member token t (after '.' or '->' of an object at
 * t - 2) keeps its pointer in place: a subscript or member read, an argument
 * of a launch or of a library call that keeps no pointer (its address only
 * for an allocation-like library call), or the target of an assignment of
 * no named value. */
static int use_stays(const sview *v, size_t t)
{
    size_t o = t - 2;
    while (o >= 2 && (is(v, o - 1, "->") || is(v, o - 1, ".")) && ident(v, o - 2))
        o -= 2; /* a.b->m: the whole access */
    int addr = o > 0 && is(v, o - 1, "&");
    if (!addr && (is(v, t + 1, "[") || is(v, t + 1, ".") || is(v, t + 1, "->")))
        return 1;
    if (is(v, t + 1, "=")) {
        size_t e = t + 2;
        while (e < v->n && !is(v, e, ";"))
            e++;
        cuco_strlist heads = {0};
        int rc = scan_expr_heads(v, t + 2, e, &heads, 1), none = rc == 0 && heads.n == 0;
        cuco_strlist_free(&heads);
        return none;
    }
    size_t first = addr ? o - 1 : o;
    if (first == 0 || !(is(v, first - 1, "(") || is(v, first - 1, ",")) ||
        !(is(v, t + 1, ")") || is(v, t + 1, ",") || is(v, t + 1, ">>>")))
        return 0;
    if (is(v, t + 1, ">>>"))
        return !addr; /* a launch's configuration: its stream or sizes */
    size_t open = sview_paren_around(v, t);
    if (open >= v->n || open == 0)
        return 0;
    if (is(v, open - 1, ">>>"))
        return !addr;
    return ident(v, open - 1) && !in_words(v, open - 1, sview_keywords) &&
           !scan_library_keeps_pointers(v, open - 1);
}

/* Whether no use of the members in the whole text lets one escape. */
static int members_stay(const sview *v, const cuco_strlist *members)
{
    for (size_t t = 2; t < v->n; t++)
        if ((is(v, t - 1, "->") || is(v, t - 1, ".")) && ident(v, t) && tok_in(v, t, members) &&
            !use_stays(v, t))
            return 0;
    return 1;
}

/* members_stay for the one member named at token m. */
static int member_stays(const sview *v, size_t m)
{
    for (size_t t = 2; t < v->n; t++)
        if ((is(v, t - 1, "->") || is(v, t - 1, ".")) && same_tok(v, t, m) && !use_stays(v, t))
            return 0;
    return 1;
}

int scan_members_apart_in(const scan *s, size_t a, size_t b)
{
    const sview *v = s->v;
    if (!s->members_apart)
        return 0;
    int seen = 0;
    for (size_t i = a; i < b; i++) {
        if (!scan_is_head(v, i) || strlen(s->member_base) != tk(v, i)->len ||
            memcmp(s->member_base, v->src + tk(v, i)->off, tk(v, i)->len))
            continue;
        /* another member, read in place (not handed to a function that
         * could follow it back to the object); beside a plain name among
         * the call's buffers, one whose value never leaves the object
         * anywhere (the plain name could be it otherwise) */
        if (!member_after(v, i) || tok_in(v, i + 2, &s->members) || !use_stays(v, i + 2) ||
            (s->member_plain.n && !member_stays(v, i + 2)))
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
    s->members_apart = 1;
    for (size_t i = 0; i < s->n; i++) {
        stmt *st = &s->stmts[i];
        if (i == s->call || !cuco_strlist_has(&st->heads, b) ||
            !scan_members_apart_in(s, st->a, st->b))
            continue;
        cuco_strlist drop = {0};
        int rc = cuco_strlist_push(&drop, b);
        if (rc == 0)
            rc = scan_stmt_drop_heads(st, &drop);
        cuco_strlist_free(&drop);
        if (rc != 0)
            return rc;
    }
    return 0;
}
