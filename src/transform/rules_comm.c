/* rules_comm.c: the communicators of the rule route: which one the device calls take,
 * the setup inserted after a communicator is made and the teardown before it
 * is destroyed, and the guards for processes that drive several GPUs. */
#include "rules_int.h"

/* Adds the communicator named by tokens first..last of a call inside the
 * function whose name is at fn: a parameter of a helper stands for what its
 * callers pass (four levels), so "exchange(comm)" called with world and with
 * tp names both. */
static int comm_collect(ctx *c, size_t first, size_t last, size_t fn, int line, int depth)
{
    const sview *v = &c->v;
    /* "comms[i]": an element of an array of communicators, one per GPU of this
     * process (several_devices guards their number); the array is one name */
    size_t base = rl_chain_last(v, first, last);
    if (base >= v->n || (base < last && is(v, base + 1, "(")))
        return 0; /* not a name (an accessor "ctx.comm()"): unknown, not counted */
    char *name = cuco_strndup(v->src + tk(v, base)->off, tk(v, base)->len);
    if (!name)
        return CUCO_ENOMEM;
    /* a copy made once ("ncclComm_t comm = g.world;") is what it copies */
    size_t copy = v->n;
    int copies = 0;
    for (size_t i = 0; depth < 4 && i + 2 < v->n; i++) {
        if (!cuco_tok_is(&v->lx, tk(v, i), name) || !is(v, i + 1, "=") ||
            (i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->"))))
            continue;
        size_t e = i + 2;
        while (e < v->n && (ident(v, e) || is(v, e, ".") || is(v, e, "->") || is(v, e, "*")))
            e++;
        if (is(v, i + 2, "nullptr") || is(v, i + 2, "NULL"))
            continue; /* an initial empty value */
        copies++;
        if (is(v, e, ";") && e > i + 2)
            copy = i + 2;
    }
    if (copies == 1 && copy < v->n) {
        size_t e = copy;
        while (!is(v, e + 1, ";"))
            e++;
        free(name);
        return comm_collect(c, copy, e, fn, line, depth + 1);
    }
    int k = fn < v->n && depth < 4 ? sview_param_index(v, rl_def_params(v, fn), name) : -1;
    int rc = 0, callers = 0;
    for (size_t j = 0; k >= 0 && j + 1 < v->n && rc == 0; j++) {
        if (j == fn || !same_tok(v, j, fn))
            continue;
        size_t open = rl_call_open(v, j);
        if (open >= v->n || rl_function_body(v, open) ||
            (j > 0 && ident(v, j - 1) && !rl_is_keyword(v, j - 1)))
            continue;
        args a;
        rl_call_args(v, open, &a);
        if (a.n <= k)
            continue;
        callers++;
        rc = comm_collect(c, a.first[k], a.last[k], rl_enclosing_function(v, j), tk(v, j)->line,
                          depth + 1);
    }
    if (rc == 0 && callers == 0 && !rl_name_seen(&c->comm_names, name)) {
        int *lines = realloc(c->comm_lines, (c->comm_names.n + 1) * sizeof(*lines));
        size_t s0 = tk(v, first)->off;
        char *text = cuco_strndup(v->src + s0, rl_tok_end(v, last) - s0);
        if (!lines || !text || cuco_strlist_push(&c->comm_names, name) != 0 ||
            cuco_strlist_push(&c->comm_texts, text) != 0)
            rc = CUCO_ENOMEM;
        free(text);
        if (lines) {
            c->comm_lines = lines;
            c->comm_lines[c->comm_names.n - 1] = line;
        }
    }
    free(name);
    return rc;
}

int rl_check_one_comm(ctx *c)
{
    if (c->comm_names.n < 2)
        return 0;
    cuco_buf b = CUCO_BUF_INIT;
    for (size_t i = 0; i < c->comm_names.n; i++)
        cuco_buf_printf(&b, "%s'%s' (line %d)",
                        i ? (i + 1 == c->comm_names.n ? " and " : ", ") : "",
                        c->comm_texts.items[i], c->comm_lines[i]);
    c->r->refused = 1;
    if (!c->p2p_host && !c->p2p_comms_refused && rl_has_p2p_calls(&c->v))
        c->p2p_comms_refused = c->comm_lines[1];
    int rc = cuco_tx_notes_add(
        &c->r->notes, c->comm_lines[1], "refused",
        "collectives on %zu communicators, %s: the device runtime registers every "
        "symmetric buffer with one communicator, so calls on a second one (e.g. one "
        "made by ncclCommSplit) would fail at run time; only programs whose "
        "collectives and point-to-point calls use one communicator are transformed",
        c->comm_names.n, cuco_buf_str(&b));
    cuco_buf_free(&b);
    return rc;
}

int rl_note_comm(ctx *c, const args *a, int k, size_t call_tok)
{
    if (k < 0 || k >= a->n)
        return 0;
    return comm_collect(c, a->first[k], a->last[k], rl_enclosing_function(&c->v, call_tok),
                        rl_line_of(c, call_tok), 0);
}

/* The communicators named by argument k of the call at call_tok (a helper's
 * parameter stands for what its callers pass), into *names; none for an
 * accessor. */
static int call_comms(ctx *c, const args *a, int k, size_t call_tok, cuco_strlist *names)
{
    cuco_strlist keep_names = c->comm_names, keep_texts = c->comm_texts;
    int *keep_lines = c->comm_lines;
    c->comm_names = (cuco_strlist){0};
    c->comm_texts = (cuco_strlist){0};
    c->comm_lines = NULL;
    int rc = rl_note_comm(c, a, k, call_tok);
    *names = c->comm_names;
    cuco_strlist_free(&c->comm_texts);
    free(c->comm_lines);
    c->comm_names = keep_names;
    c->comm_texts = keep_texts;
    c->comm_lines = keep_lines;
    return rc;
}

/* Whether argument k of a call names a communicator other than
 * c->device_comm (its collectives stay host NCCL, no device state is set up
 * or released for it). */
static int other_comm_arg(const ctx *c, const args *a, int k)
{
    if (!c->device_comm || a->n <= k)
        return 0;
    size_t named = rl_chain_last(&c->v, a->first[k], a->last[k]);
    return named < c->v.n && !cuco_tok_is(&c->v.lx, tk(&c->v, named), c->device_comm);
}

/* Whether argument k of a communicator's creation makes one that no
 * collective names, where the file makes several and the collectives name
 * some: its device communicator is not set up there, so that the first one
 * set up (whose calls take the device path, cuco_tx::window_comm) is one
 * they use. */
static int unused_comm_arg(const ctx *c, const args *a, int k)
{
    if (c->call_comms.n == 0 || c->creation_calls < 2 || a->n <= k)
        return 0;
    size_t named = rl_chain_last(&c->v, a->first[k], a->last[k]);
    if (named >= c->v.n)
        return 0;
    for (size_t i = 0; i < c->call_comms.n; i++)
        if (cuco_tok_is(&c->v.lx, tk(&c->v, named), c->call_comms.items[i]))
            return 0;
    return 1;
}

int rl_other_comm_kept(ctx *c, const args *a, size_t call_tok, const char *call, int group, int *rc)
{
    cuco_strlist of = {0};
    *rc = c->device_comm && a->n >= 2 ? call_comms(c, a, a->n - 2, call_tok, &of) : 0;
    const char *other = NULL;
    for (size_t k = 0; *rc == 0 && k < of.n && !other; k++)
        if (strcmp(of.items[k], c->device_comm) != 0)
            other = of.items[k];
    if (other) {
        char *why = cuco_sprintf("%s on communicator '%s': the device calls use '%s' (the device "
                                 "runtime registers its windows with one communicator)",
                                 call, other, c->device_comm);
        size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
        *rc = why ? rl_keep_or_refuse(c, rl_line_of(c, call_tok), group, "%s%s", why, NULL)
                  : CUCO_ENOMEM;
        free(why);
        if (*rc == 0 && rl_kept_since(c, kept))
            *rc = rl_keep_call(c, call_tok, group);
    }
    cuco_strlist_free(&of);
    return other != NULL;
}

int rl_choose_device_comm(ctx *c)
{
    const sview *v = &c->v;
    cuco_strlist names = {0}, p2p = {0};
    size_t *counts = NULL;
    int rc = 0;
    for (size_t i = 0; i + 1 < v->n && rc == 0; i++) {
        if ((in_words(v, i, rl_comm_makers) || is(v, i, "ncclCommInitAll")) && rl_called_name(v, i))
            c->creation_calls++;
        if (!in_words(v, i, rl_host_collectives) || !rl_called_name(v, i))
            continue;
        args a;
        rl_call_args(v, i + 1, &a);
        cuco_strlist of = {0};
        rc = a.n >= 2 ? call_comms(c, &a, a.n - 2, i, &of) : 0;
        int is_p2p = is(v, i, "ncclSend") || is(v, i, "ncclRecv");
        /* under p2p_host they stay host NCCL: no say in the choice */
        for (size_t k = 0; rc == 0 && !(is_p2p && c->p2p_host) && k < of.n; k++) {
            size_t at = 0;
            while (at < names.n && strcmp(names.items[at], of.items[k]) != 0)
                at++;
            if (at == names.n) {
                size_t *grown = realloc(counts, (names.n + 1) * sizeof(*grown));
                rc = grown ? cuco_strlist_push(&names, of.items[k]) : CUCO_ENOMEM;
                counts = grown ? grown : counts;
                if (rc == 0)
                    counts[at] = 0;
            }
            if (rc == 0)
                counts[at]++;
            if (rc == 0 && is_p2p && !rl_name_seen(&p2p, of.items[k]))
                rc = cuco_strlist_push(&p2p, of.items[k]);
        }
        cuco_strlist_free(&of);
    }
    size_t best = 0;
    for (size_t k = 1; k < names.n; k++)
        if (counts[k] > counts[best])
            best = k;
    const char *pick = p2p.n == 1 ? p2p.items[0] : p2p.n == 0 && names.n ? names.items[best] : NULL;
    if (rc == 0 && names.n > 1 && pick && !(c->device_comm = cuco_strdup(pick)))
        rc = CUCO_ENOMEM;
    if (rc == 0) {
        c->call_comms = names;
        names = (cuco_strlist){0};
    }
    cuco_strlist_free(&names);
    cuco_strlist_free(&p2p);
    free(counts);
    return rc;
}

/* The line of a "blocking = 0" (an ncclConfig_t made non-blocking:
 * "config.blocking = 0;", "cfg->blocking = 0"), or 0. */
static int nonblocking_line(const ctx *c)
{
    const sview *v = &c->v;
    for (size_t i = 0; i + 2 < v->n; i++)
        if (is(v, i, "blocking") && is(v, i + 1, "=") && is(v, i + 2, "0"))
            return tk(v, i)->line;
    return 0;
}

/* The first line that starts a thread (pthread_create, std::thread), 0 when
 * none: a program that makes a communicator per thread, one GPU each. */
static int threads_line(const ctx *c)
{
    const sview *v = &c->v;
    for (size_t i = 0; i + 1 < v->n; i++)
        if ((is(v, i, "pthread_create") && is(v, i + 1, "(")) ||
            (is(v, i, "thread") && i > 1 && is(v, i - 1, "::") && is(v, i - 2, "std")))
            return tk(v, i)->line;
    return 0;
}

int rl_several_devices(ctx *c, size_t i, const char *name, int init_all)
{
    const sview *v = &c->v;
    int line = tk(v, i)->line;
    if (!rl_editable(c, i, name))
        return 0;
    args a;
    rl_call_args(v, i + 1, &a);
    char *ndev = init_all && a.n == 3 ? rl_arg_text(v, &a, 1) : NULL;
    char *guard =
        ndev ? cuco_sprintf(" if ((int)(%s) > 1) { fprintf(stderr, \"cuco_tx: %s at line %d "
                            "makes %%d communicators in one process; the device runtime drives "
                            "one GPU per process\\n\", (int)(%s)); exit(EXIT_FAILURE); }",
                            ndev, name, line, ndev)
             : cuco_sprintf(" { static int cuco_tx_comms_made = 0; if (__sync_add_and_fetch("
                            "&cuco_tx_comms_made, 1) > 1) { fprintf(stderr, \"cuco_tx: %s at "
                            "line %d makes a second communicator in this process; the device "
                            "runtime drives one GPU per process\\n\"); exit(EXIT_FAILURE); } }",
                            name, line);
    free(ndev);
    if (!guard)
        return CUCO_ENOMEM;
    size_t lo, hi;
    rl_stmt_span(c, i, &lo, &hi);
    /* the body of "for (...) ncclCommInitRank(...);" gets braces, so that the
     * guard counts each communicator the loop makes */
    int braces = rl_control_body(v, i, &lo);
    int rc = braces ? rl_add_edit(c, i, lo, 0, "{ ") : 0;
    if (rc == 0)
        rc = rl_add_edit(c, i, hi, 0, guard);
    if (rc == 0 && braces)
        rc = rl_add_edit(c, i, hi, 0, " }");
    free(guard);
    if (rc == 0)
        rc = cuco_tx_notes_add(
            &c->r->notes, line, "note",
            "%s: one process drives several GPUs; transformed for one GPU per process (the "
            "device communicator is made at the first device collective) and guarded: with a "
            "second communicator the program stops with a message. The device runtime sets up "
            "one device communicator per process; ncclDevCommCreate and "
            "ncclCommWindowRegister are collective, so several devices of one thread would "
            "need each communicator's setup issued inside one ncclGroupStart/ncclGroupEnd",
            name);
    return rc;
}

/* Whether the function whose name is at token f runs once: main, or a
 * function the file names once besides its definition and its declarations
 * at file scope, by a call outside any loop and any lambda, in a function
 * that runs once. */
static int runs_once(const ctx *c, size_t f, int depth)
{
    const sview *v = &c->v;
    if (f >= v->n || depth >= 8)
        return 0;
    if (is(v, f, "main"))
        return 1;
    size_t use = v->n;
    int uses = 0;
    for (size_t t = 0; t < v->n; t++) {
        if (t == f || !ident(v, t) || !same_tok(v, t, f))
            continue;
        if (c->fn_of[t] >= v->n)
            continue; /* at file scope: a declaration or another definition */
        uses++;
        use = t;
    }
    if (uses != 1 || !is(v, use + 1, "(") || rl_in_loop(v, use) || rl_in_lambda(v, use))
        return 0;
    return runs_once(c, c->fn_of[use], depth + 1);
}

/* The device communicator's setup right after the call at token i makes
 * *comm: after its statement, or, where the call is a condition's (`if
 * (ncclCommInitRank(...) != ncclSuccess) { fail }`), around the call, on
 * its success, keeping its result (cuco_tx::comm_made). */
static int setup_after(ctx *c, size_t i, const char *comm)
{
    const sview *v = &c->v;
    if (rl_in_control_header(v, i) && is(v, i + 1, "(")) {
        char *to = cuco_sprintf(", (%s))", comm);
        int rc = to ? rl_add_edit(c, i, tk(v, i)->off, 0, "cuco_tx::comm_made(") : CUCO_ENOMEM;
        if (rc == 0)
            rc = rl_add_edit(c, i, rl_tok_end(v, close_of(v, i + 1)), 0, to);
        free(to);
        return rc;
    }
    size_t lo, hi;
    rl_stmt_span(c, i, &lo, &hi);
    char *ins = cuco_sprintf(" cuco_tx::comm_setup(*(%s));", comm);
    int rc = ins ? rl_add_edit(c, i, hi, 0, ins) : CUCO_ENOMEM;
    free(ins);
    return rc;
}

int rl_scan_comm_init(ctx *c, scan_state *st, size_t i, const char *name)
{
    const sview *v = &c->v;
    const cuco_tok *t = tk(v, i);
    args a;
    rl_call_args(v, i + 1, &a);
    int k = strcmp(name, "ncclCommSplit") == 0 ? 3 : 0;
    if (other_comm_arg(c, &a, k))
        return cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                 "no device communicator for the one %s makes: the device "
                                 "calls use '%s', its collectives stay host NCCL",
                                 name, c->device_comm);
    c->comm_creations++;
    if (unused_comm_arg(c, &a, k))
        return cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                 "no device communicator set up after %s: no collective names "
                                 "the one it makes (one a collective reaches otherwise is set up "
                                 "at its first use)",
                                 name);
    int nonblocking = strcmp(name, "ncclCommInitRank") != 0 ? nonblocking_line(c) : 0;
    if (st->group_depth > 0 || rl_in_loop(v, i) || threads_line(c))
        /* NCCL's own multi-device pattern: a communicator per GPU, made in a
         * loop inside a group, or one per thread */
        return rl_several_devices(c, i, name, 0);
    if (nonblocking) {
        c->r->refused = 1;
        return cuco_tx_notes_add(&c->r->notes, t->line, "refused",
                                 "%s makes a non-blocking communicator (blocking = 0 at line "
                                 "%d): the device runtime's setup (ncclDevCommCreate, window "
                                 "registration) expects calls that complete on return, not "
                                 "ncclInProgress; make the communicator blocking",
                                 name, nonblocking);
    }
    if (a.n <= k || (c->nblocks != 0 && !rl_in_block(c, t->off)))
        return cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                 "%s is in frozen code: the device communicator is created at the "
                                 "first device collective",
                                 name);
    char *comm = rl_arg_text(v, &a, k);
    int rc = comm ? setup_after(c, i, comm) : CUCO_ENOMEM;
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                               "device communicator created after %s", name);
    if (rc == 0 && !c->setup_line)
        c->setup_line = t->line;
    if (rc == 0 && rl_scope_map(c) == 0 && c->fn_of[i] < v->n && !rl_in_lambda(v, i))
        c->comm_once = c->comm_once || runs_once(c, c->fn_of[i], 0);
    free(comm);
    return rc;
}

int rl_scan_comm_destroy(ctx *c, size_t i, const char *name)
{
    const sview *v = &c->v;
    const cuco_tok *t = tk(v, i);
    args a;
    rl_call_args(v, i + 1, &a);
    if (a.n != 1 || (c->nblocks != 0 && !rl_in_block(c, t->off)))
        return cuco_tx_notes_add(&c->r->notes, t->line, "note",
                                 "%s is in frozen code: windows and the device communicator are "
                                 "released by the last symmetric free",
                                 name);
    if (other_comm_arg(c, &a, 0))
        return 0; /* a communicator whose calls stay host NCCL: nothing to release */
    char *comm = rl_arg_text(v, &a, 0);
    size_t lo, hi;
    rl_stmt_span(c, i, &lo, &hi);
    /* the body of "for (...) ncclCommDestroy(comms[i]);" gets braces */
    int braces = rl_control_body(v, i, &lo);
    char *ins =
        comm ? cuco_sprintf("%scuco_tx::comm_teardown(%s); ", braces ? "{ " : "", comm) : NULL;
    int rc = ins ? rl_add_edit(c, i, lo, 0, ins) : CUCO_ENOMEM;
    if (rc == 0 && braces)
        rc = rl_add_edit(c, i, hi, 0, " }");
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "teardown",
                               "device communicator and windows released before %s", name);
    free(comm);
    free(ins);
    return rc;
}
