/* rules_edit.c: the edits of the rule route and what it says of a call it
 * cannot take: the program refused, or the call kept host NCCL (and marked
 * for the static check, through cuco_tx::kept_in_group inside a group). */
#include "rules_int.h"
#include "scan_int.h"

/* The line of the first point-to-point call (or collective made of them:
 * the device defers both to the group's end) in the group opened at
 * c->group_open, or 0. */
int rl_group_p2p_line(const ctx *c, size_t open)
{
    const sview *v = &c->v;
    size_t end = rl_group_end(v, open);
    for (size_t i = open + 1; i < end; i++) {
        if (!rl_called_name(v, i))
            continue;
        if (is(v, i, "ncclSend") || is(v, i, "ncclRecv"))
            return rl_line_of(c, i);
        for (const p2p_collective *p = rl_p2p_collectives; p->name; p++)
            if (is(v, i, p->name))
                return rl_line_of(c, i);
    }
    return 0;
}

int rl_has_p2p_calls(const sview *v)
{
    for (size_t i = 0; i < v->n; i++)
        if ((is(v, i, "ncclSend") || is(v, i, "ncclRecv")) && rl_called_name(v, i))
            return 1;
    return 0;
}

int rl_refuse(ctx *c, int line, const char *fmt, const char *a, const char *b)
{
    c->r->refused = 1;
    return cuco_tx_notes_add(&c->r->notes, line, "refused", fmt, a ? a : "", b ? b : "");
}

int rl_keep_or_refuse(ctx *c, int line, int in_group, const char *fmt, const char *a, const char *b)
{
    char *why = cuco_sprintf(fmt, a ? a : "", b ? b : "");
    if (!why)
        return CUCO_ENOMEM;
    int rc, deferred = in_group ? rl_group_p2p_line(c, c->group_open) : 0;
    if (deferred) {
        c->r->refused = 1;
        if (!c->p2p_group_refused)
            c->p2p_group_refused = rl_line_of(c, c->group_open);
        rc = cuco_tx_notes_add(&c->r->notes, line, "refused",
                               "%s; inside ncclGroupStart/ncclGroupEnd with the point-to-point "
                               "call of line %d, which runs at the group's end on the device, it "
                               "cannot stay host NCCL",
                               why, deferred);
    } else {
        rc = cuco_tx_notes_add(&c->r->notes, line, "kept", "%s; it stays host NCCL%s", why,
                               in_group ? " (inside ncclGroupStart/ncclGroupEnd: issued where it "
                                          "stands, after the group's earlier calls)"
                                        : "");
    }
    free(why);
    return rc;
}

int rl_kept_since(const ctx *c, size_t before)
{
    return cuco_tx_notes_count(&c->r->notes, "kept") > before;
}

int rl_keep_mark(ctx *c, size_t tok, size_t at, int wrap)
{
    int rc = rl_add_edit(c, tok, at, 0, KEPT_MARK);
    if (rc == 0)
        c->edits[c->nedits - 1].wrap &= wrap;
    return rc;
}

int rl_keep_call(ctx *c, size_t tok, int group)
{
    const cuco_tok *t = tk(&c->v, tok);
    if (!group || tok + 1 >= c->v.n)
        return rl_keep_mark(c, tok, t->off, 1);
    const cuco_tok *open = tk(&c->v, tok + 1);
    char *to =
        cuco_sprintf("%scuco_tx::kept_in_group(%.*s, ", KEPT_MARK, (int)t->len, c->v.src + t->off);
    int rc = to ? rl_add_edit(c, tok, t->off, open->off + 1 - t->off, to) : CUCO_ENOMEM;
    free(to);
    return rc;
}

/* The first and the last token of the statement around token i (the last
 * one its ';', or the '{' or '}' it stops at); 0 when the file has none. */
static int stmt_tokens(const sview *v, size_t i, size_t *first, size_t *last)
{
    if (v->n == 0) /* a file of no code tokens (one unterminated comment) */
        return 0;
    size_t s = i < v->n ? i : v->n - 1;
    while (s > 0 && !is(v, s - 1, ";") && !is(v, s - 1, "{") && !is(v, s - 1, "}") &&
           !sview_case_colon(v, s - 1))
        s--;
    size_t e2 = i;
    int d = 0;
    while (e2 < v->n) {
        if (is(v, e2, "(") || is(v, e2, "["))
            d++;
        else if (is(v, e2, ")") || is(v, e2, "]"))
            d--;
        else if (d <= 0 && (is(v, e2, ";") || is(v, e2, "{") || is(v, e2, "}")))
            break;
        e2++;
    }
    *first = s;
    *last = e2 < v->n ? e2 : v->n - 1;
    return 1;
}

void rl_stmt_span(const ctx *c, size_t i, size_t *lo, size_t *hi)
{
    size_t s, e;
    if (!stmt_tokens(&c->v, i, &s, &e)) {
        *lo = *hi = 0;
        return;
    }
    *lo = tk(&c->v, s)->off;
    *hi = rl_tok_end(&c->v, e);
}

/* The bytes an edit's EVOLVE-BLOCK wraps: its statement's; for an edit in
 * the header of an if, for, while, switch (or an else, a do) whose body is
 * braced, the whole statement, so that the block closes what it opens. */
static void wrap_span(const ctx *c, size_t i, size_t *lo, size_t *hi)
{
    const sview *v = &c->v;
    size_t s, e;
    if (!stmt_tokens(v, i, &s, &e)) {
        *lo = *hi = 0;
        return;
    }
    if (is(v, e, "{") && (is(v, s, "if") || is(v, s, "for") || is(v, s, "while") ||
                          is(v, s, "switch") || is(v, s, "else") || is(v, s, "do"))) {
        /* through its body and the else branches after it */
        size_t after = scan_stmt_after(v, is(v, s, "else") ? s + 1 : s, v->n);
        e = after > e && after <= v->n ? after - 1 : e;
    }
    *lo = tk(v, s)->off;
    *hi = rl_tok_end(v, e);
}

int rl_add_edit(ctx *c, size_t tok_for_stmt, size_t off, size_t len, const char *text)
{
    edit *ed = realloc(c->edits, (c->nedits + 1) * sizeof(*ed));
    if (!ed)
        return CUCO_ENOMEM;
    c->edits = ed;
    edit *x = &c->edits[c->nedits];
    x->off = off;
    x->len = len;
    x->text = cuco_strdup(text);
    if (!x->text)
        return CUCO_ENOMEM;
    x->wrap = c->nblocks == 0;
    x->seq = (long)c->nedits;
    wrap_span(c, tok_for_stmt, &x->stmt_lo, &x->stmt_hi);
    c->nedits++;
    return 0;
}

int rl_editable(ctx *c, size_t i, const char *what)
{
    if (c->nblocks == 0 || rl_in_block(c, tk(&c->v, i)->off))
        return 1;
    rl_refuse(
        c, rl_line_of(c, i),
        "%s is outside the EVOLVE-BLOCKs (frozen code): rewriting it would edit the harness%s",
        what, NULL);
    return 0;
}
