/* sched_place.c: where schedule (a) puts a call's start and its wait in a
 * block (scan_int.h): the call's statement, block and function
 * (sched_locate: a plain statement, the whole body of an if without else,
 * one checked in an if whose body leaves, after a switch's label), the
 * wait's place and edit (before a consumer, at the block's end, ahead of a
 * conditional directive: sched_fence), the stream it names, and the
 * early_start edit of the call's stream argument. sched_plan.c and
 * sched_callers.c place with it. */
#include "cuco/buf.h"
#include "cuco/transform.h"
#include "scan_int.h"
#include "tx_common.h"

#include <stdlib.h>
#include <string.h>

/* Sets why the schedule does not apply: returns 1 (stop), or CUCO_ENOMEM. */
int sched_note(cuco_sched_plan *p, const char *fmt, int line)
{
    return sched_note_take(p, cuco_sprintf(fmt, line));
}

int sched_note_take(cuco_sched_plan *p, char *note)
{
    free(p->note);
    p->note = note;
    return note ? 1 : CUCO_ENOMEM;
}

/* `if (cond) call;` (no braces, no else) at s0 with the call at c in its
 * body: the if statement stands for the call, whose effects happen or not;
 * v->n otherwise. */
static size_t guarded_stmt(const sview *v, size_t s0, size_t c)
{
    if (!is(v, s0 + 1, "("))
        return v->n;
    size_t body = close_of(v, s0 + 1) + 1;
    if (body >= v->n || body > c || is(v, body, "{") || in_words(v, body, sview_keywords))
        return v->n;
    int d = 0;
    for (size_t k = body; k < c; k++) {
        d += is(v, k, "(") - is(v, k, ")");
        if (d < 0)
            return v->n;
    }
    size_t end = scan_stmt_after(v, body, v->n);
    return end < v->n && is(v, end, "else") ? v->n : s0;
}

/* Whether the statement at i leaves the block: return, goto, break,
 * continue, throw, or a braced block whose last statement does. */
static int exits(const sview *v, size_t i)
{
    static const char *const jumps[] = {"return", "goto", "break", "continue", "throw", NULL};
    if (in_words(v, i, jumps))
        return 1;
    if (!is(v, i, "{"))
        return 0;
    size_t end = close_of(v, i), last = v->n;
    for (size_t k = i + 1; k < end && k < v->n; k = scan_stmt_after(v, k, end))
        last = k;
    return last < v->n && in_words(v, last, jumps);
}

/* `if (call(...) != ncclSuccess) goto fail;` (no else) at s0 with the call
 * at c in its condition, the body an exit: the if statement stands for the
 * call, whose failure leaves; v->n otherwise. */
static size_t checked_stmt(const sview *v, size_t s0, size_t c)
{
    size_t close = close_of(v, s0 + 1);
    if (close >= v->n || c >= close || !exits(v, close + 1))
        return v->n;
    size_t end = scan_stmt_after(v, s0, v->n);
    return end < v->n && is(v, end, "else") ? v->n : s0;
}

/* Where the call statement starts (v->n: it is not a plain statement, e.g. a
 * condition or the body of an unbraced for, or of an if with an else); a
 * statement right after a switch's label starts after the label. */
static size_t plain_stmt_start(const sview *v, size_t c)
{
    size_t s0 = c;
    while (s0 > 0 && !is(v, s0 - 1, ";") && !is(v, s0 - 1, "{") && !is(v, s0 - 1, "}") &&
           !sview_case_colon(v, s0 - 1))
        s0--;
    if (s0 > 0 && is(v, s0, "if") && is(v, s0 + 1, "(")) {
        size_t guarded = guarded_stmt(v, s0, c);
        return guarded < v->n ? guarded : checked_stmt(v, s0, c);
    }
    if (s0 == 0 || in_words(v, s0, sview_keywords))
        return v->n;
    int d = 0;
    for (size_t k = s0; k < c; k++) {
        d += is(v, k, "(") - is(v, k, ")");
        if (d < 0)
            return v->n;
    }
    return s0;
}

/* Whether the '{' at b opens code (not an initializer list). */
static int code_block(const sview *v, size_t b)
{
    static const char *const before[] = {")",        "else",  "do",      "try",   "{",
                                         "}",        ";",     "]",       "const", "noexcept",
                                         "override", "final", "mutable", NULL};
    return b > 0 && b < v->n && (in_words(v, b - 1, before) || sview_case_colon(v, b - 1));
}

/* The start of the line of token i when only blanks precede it there (with
 * that indentation in *indent, caller frees), else the token's offset. */
static size_t line_slot(const sview *v, size_t i, char **indent)
{
    size_t off = tk(v, i)->off, ls = off;
    while (ls > 0 && (v->src[ls - 1] == ' ' || v->src[ls - 1] == '\t'))
        ls--;
    if (ls == 0 || v->src[ls - 1] == '\n') {
        *indent = cuco_strndup(v->src + ls, off - ls);
        return sview_pragma_lines_before(v->src, ls);
    }
    *indent = NULL;
    return off;
}

/* Whether the statement [a, b) declares the name w (len bytes): "int i =",
 * "cudaStream_t st :" (a loop's variable, not visible before it). */
static int declares(const sview *v, size_t a, size_t b, const char *w, size_t len)
{
    for (size_t k = a + 1; k < b; k++)
        if (tk(v, k)->len == len && memcmp(v->src + tk(v, k)->off, w, len) == 0 &&
            sview_declarator(v, k, "= ; , : [ {"))
            return 1;
    return 0;
}

/* The stream the wait before consumer st names (*cs; NULL: the call's own),
 * when it can: a name, member or element chain (no call, no increment, no
 * assignment: evaluating it again changes nothing) that the consumer does
 * not declare itself (streams[i] in a loop over i), and one stream besides
 * the call's. Returns 1 when it can. */
int sched_wait_stream(const sview *v, const stmt *st, const char *own, const char **cs)
{
    *cs = NULL;
    for (size_t i = 0; i < st->streams.n; i++) {
        const char *t = st->streams.items[i];
        if (own && strcmp(t, own) == 0)
            continue;
        if (*cs)
            return 0; /* two streams besides the call's */
        for (const char *q = t; *q; q++)
            if (strchr("()=+,?;{}<", *q) || (q[0] == '-' && q[1] != '>') ||
                (q[0] == '>' && (q == t || q[-1] != '-')))
                return 0;
        for (const char *q = t; *q;) {
            const char *w = q;
            while (*q && cuco_tx_ident_char(*q))
                q++;
            if (q == w)
                q++;
            else if (!(*w >= '0' && *w <= '9') && declares(v, st->a, st->b, w, (size_t)(q - w)))
                return 0;
        }
        *cs = t;
    }
    return 1;
}

/* The token the call's wait goes before: its first consumer's first, or the
 * block's '}' when the wait goes to the block's end. */
size_t sched_wait_token(const scan *s, const cuco_sched_place *pl)
{
    return pl->wait < s->n ? s->stmts[pl->wait].a : s->block_end;
}

/* Where the wait goes: *off, the byte it is inserted at, in the statement
 * at *stmt_off; *indent (caller frees; NULL: none) the indentation of its
 * line. Returns 1 when it goes right after the statement before it, on a
 * line of its own: at the block's end (the '}' line may be frozen code) and
 * before a conditional directive ahead of its consumer. */
static int wait_slot(const scan *s, const cuco_sched_place *pl, size_t *off, size_t *stmt_off,
                     char **indent)
{
    const sview *v = s->v;
    size_t at = sched_wait_token(s, pl);
    *off = line_slot(v, at, indent);
    *stmt_off = tk(v, at)->off;
    int ahead = pl->wait < s->n && pl->wait == s->fence && s->fence_line;
    if ((pl->wait >= s->n || ahead) && *indent) {
        free(*indent);
        line_slot(v, s->stmts[s->call].a, indent);
    }
    size_t prev = pl->wait < s->n ? pl->wait : s->n;
    if (!*indent || prev == 0 || (pl->wait < s->n && !ahead))
        return 0;
    const stmt *before = &s->stmts[prev - 1];
    const cuco_tok *last = tk(v, before->b - 1);
    if (!is(v, before->b - 1, ";") && !is(v, before->b - 1, "}"))
        return 0;
    *off = last->off + last->len;
    /* after a braced statement (a loop), the edit is that statement's */
    *stmt_off = is(v, before->b - 1, ";") ? last->off : tk(v, before->a)->off;
    return 1;
}

/* The call's stream argument (the call opens at open) through
 * cuco_tx::early_start. */
int sched_start_edit(const scan *s, size_t open, int site, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t a, b;
    if (!arg_range(v, open, -1, &a, &b))
        return 0;
    size_t aoff = tk(v, a)->off, aend = tk(v, b - 1)->off + tk(v, b - 1)->len;
    return scan_plan_edit(p, aoff, aend - aoff,
                          cuco_sprintf("cuco_tx::early_start(%d, CUCO_EARLY_%d, %.*s)", site, site,
                                       (int)(aend - aoff), v->src + aoff),
                          aoff);
}

int sched_wait_edit(const scan *s, const cuco_sched_place *pl, int site, const char *cs,
                    cuco_sched_plan *p)
{
    const sview *v = s->v;
    char *call = cs ? cuco_sprintf("cuco_tx::early_wait(%d, CUCO_EARLY_%d, %s);", site, site, cs)
                    : cuco_sprintf("cuco_tx::early_wait(%d, CUCO_EARLY_%d);", site, site);
    char *indent = NULL;
    size_t off, stmt_off;
    int after = wait_slot(s, pl, &off, &stmt_off, &indent);
    char *text = !call    ? NULL
                 : after  ? cuco_sprintf("\n%s%s", indent, call)
                 : indent ? cuco_sprintf("%s%s\n", indent, call)
                          : cuco_sprintf("%s ", call);
    int rc = scan_plan_edit(p, off, 0, text, stmt_off);
    free(call);
    free(indent);
    p->wait_line = pl->wait == s->fence && s->fence_line ? s->fence_line
                                                         : tk(v, sched_wait_token(s, pl))->line;
    return rc;
}

/* Whether the block at brace (closing at end) holds one NCCL group and
 * nothing else: ncclGroupStart, statements that are NCCL calls, ncclGroupEnd. */
static int group_block(const sview *v, size_t brace, size_t end)
{
    size_t i = brace + 1, n = 0;
    int last_end = 0;
    while (i < end) {
        size_t j = scan_stmt_after(v, i, end);
        if (j <= i)
            return 0;
        int opens = scan_holds_call(v, i, j, "ncclGroupStart");
        last_end = scan_holds_call(v, i, j, "ncclGroupEnd");
        int nccl = 0;
        for (size_t k = i; k < j; k++)
            nccl |= nccl_name(v, k);
        if ((n == 0) != opens || !nccl || is(v, i, "{") || in_words(v, i, sview_keywords))
            return 0;
        n++;
        i = j;
    }
    return n >= 3 && last_end;
}

/* When the block at brace is the body of `if (cond) { call; }` (no else)
 * and holds only the statement at st, or only the NCCL group st is in:
 * that if statement, which stands for the call in the enclosing block; v->n
 * otherwise. */
static size_t braced_guard(const sview *v, size_t brace, size_t st)
{
    if (brace == 0 || !is(v, brace - 1, ")"))
        return v->n;
    size_t end = close_of(v, brace);
    if (end >= v->n || is(v, end + 1, "else"))
        return v->n;
    if ((st != brace + 1 || scan_stmt_after(v, st, end) != end) && !group_block(v, brace, end))
        return v->n;
    size_t o = sview_open_of(v, brace - 1);
    if (o == 0 || o >= v->n || !is(v, o, "(") || !is(v, o - 1, "if"))
        return v->n;
    size_t s0 = o - 1;
    return s0 > 0 && (is(v, s0 - 1, ";") || is(v, s0 - 1, "{") || is(v, s0 - 1, "}")) ? s0 : v->n;
}

int sched_in_group(const sview *v, size_t brace, size_t st)
{
    int open = 0;
    for (size_t i = brace + 1; i < st; i++)
        open += is(v, i, "ncclGroupStart") - is(v, i, "ncclGroupEnd");
    return open > 0;
}

/* Finds the call's statement, block and function; 1 when the schedule
 * cannot apply (p->note says why). */
int sched_locate(scan *s, size_t c, cuco_sched_plan *p, size_t *call_stmt)
{
    *call_stmt = plain_stmt_start(s->v, c);
    if (*call_stmt >= s->v->n)
        return sched_note(p,
                          "the call is not a statement of its own (a condition, or the body "
                          "of a loop, or of an if with an else, without braces)",
                          0);
    return sched_locate_stmt(s, p, call_stmt);
}

int sched_locate_stmt(scan *s, cuco_sched_plan *p, size_t *call_stmt)
{
    const sview *v = s->v;
    s->block = block_open(v, *call_stmt);
    while (s->block < v->n && braced_guard(v, s->block, *call_stmt) < v->n) {
        *call_stmt = braced_guard(v, s->block, *call_stmt);
        s->block = block_open(v, *call_stmt);
    }
    if (s->block >= v->n || !code_block(v, s->block))
        return sched_note(p, "the call is not in a braced block", 0);
    s->block_end = close_of(v, s->block);
    if (s->block_end >= v->n)
        return sched_note(p, "the call's block is not closed", 0);
    int rc = scan_fn_scope_find(&s->fn, v, s->block);
    if (rc == CUCO_ENOTFOUND)
        return sched_note(p, "the call is not inside a function body", 0);
    return rc;
}

int sched_apart_note(cuco_sched_plan *p, int line)
{
    return sched_note(p,
                      "a preprocessor conditional (line %d) lies between the call and where its "
                      "wait would go: one could be compiled without the other",
                      line);
}

/* The line of a conditional directive between the call and where its wait
 * goes that leaves them in different branches (one could be compiled
 * without the other), its offset in *cut; 0: none. */
int sched_wait_cut(const scan *s, const cuco_sched_place *pl, size_t *cut)
{
    size_t off, stmt_off;
    char *indent = NULL;
    wait_slot(s, pl, &off, &stmt_off, &indent);
    free(indent);
    return sview_conditional_cut(s->v, tk(s->v, s->stmts[s->call].a)->off, off, cut);
}

/* A conditional directive between the call and its wait: the wait moves
 * ahead of it (s->fence, placed again), or, when it cannot, 1 with the
 * plan's note. */
int sched_fence(scan *s, cuco_sched_place *pl, cuco_sched_plan *p)
{
    const sview *v = s->v;
    size_t cut = 0;
    int line;
    while ((line = sched_wait_cut(s, pl, &cut)) != 0) {
        size_t j = s->call + 1;
        while (j < s->n && tk(v, s->stmts[j].b - 1)->off < cut)
            j++;
        if (j >= s->n || (s->fence && j >= s->fence))
            return sched_apart_note(p, line);
        s->fence = j;
        s->fence_line = tk(v, s->stmts[j].a)->off > cut ? line : 0;
        int rc = scan_place(s, pl);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void sched_scan_free(scan *s)
{
    for (size_t i = 0; i < s->n; i++)
        scan_stmt_free(&s->stmts[i]);
    free(s->stmts);
    scan_fn_scope_free(&s->fn);
    cuco_strlist_free(&s->send);
    cuco_strlist_free(&s->recv);
    cuco_strlist_free(&s->all);
    cuco_strlist_free(&s->members);
    cuco_strlist_free(&s->member_plain);
    free(s->member_base);
    free(s->stream);
}

int sched_insert_before(const sview *v, size_t at, const char *text, cuco_sched_plan *p)
{
    char *indent = NULL;
    size_t off = line_slot(v, at, &indent);
    char *t = indent ? cuco_sprintf("%s%s\n", indent, text) : cuco_sprintf("%s ", text);
    free(indent);
    return scan_plan_edit(p, off, 0, t, tk(v, at)->off);
}

int sched_wait_after(scan *cs, size_t call_stmt, const char *what, int site,
                     int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *p,
                     cuco_sched_place *pl)
{
    const sview *v = cs->v;
    const char *stream = NULL;
    int rc = scan_closure_and_escapes(cs);
    if (rc == 0)
        rc = scan_read_block(cs, call_stmt);
    if (rc == 0 && cs->call >= cs->n)
        rc = sched_note_take(p, cuco_sprintf("%s is not a statement of its block", what));
    if (rc == 0)
        rc = scan_place(cs, pl);
    if (rc == 0)
        rc = sched_fence(cs, pl, p);
    if (rc == 0 && pl->wait < cs->n &&
        !sched_wait_stream(v, &cs->stmts[pl->wait], cs->stream, &stream))
        rc = sched_note_take(
            p, cuco_sprintf("the consumer after %s runs on a stream the wait cannot name", what));
    size_t at = pl->wait < cs->n ? cs->stmts[pl->wait].a : cs->block_end;
    if (rc == 0 && editable && !editable(ctx, tk(v, at)->off))
        rc = sched_note_take(p, cuco_sprintf("the wait after %s would be in frozen code", what));
    if (rc == 0)
        rc = sched_wait_edit(cs, pl, site, stream, p);
    return rc;
}

void sched_drop_edits(cuco_sched_plan *p, size_t n)
{
    for (size_t i = n; i < p->nedits; i++)
        free(p->edits[i].text);
    p->nedits = n;
}
