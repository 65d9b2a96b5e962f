/* rules.c: the rule route of the fast path. Reads a host-driven program with
 * the analysis lexer, rewrites each NCCL collective / point-to-point call in
 * place into the cuco_tx glue (same arguments, so the program's own error
 * checks, streams and synchronisation stay valid), makes the allocations that
 * feed a collective symmetric (rules_buffers.c), inserts device-communicator
 * setup/teardown (rules_comm.c), offers each call to the schedules
 * (rules_sched.c), and puts the glue and its knobs into an EVOLVE-BLOCK
 * (rules_emit.c). Anything it cannot rewrite is reported with its line: a
 * collective the device path cannot take stays host NCCL ("kept", marked for
 * the static check; rules_edit.c), anything else refuses the program as a
 * whole. This file scans the calls and holds the entry points.
 */
#include "rules_int.h"

static const char *const unsupported_calls[] = {"ncclReduce", "ncclAllToAllv", "ncclAlltoAllv",
                                                NULL};

static const char *const device_dtypes[] = {"ncclFloat32",  "ncclFloat", "ncclFloat16", "ncclHalf",
                                            "ncclBfloat16", "ncclInt32", "ncclInt",     NULL};
static const char *const float_dtypes[] = {"ncclFloat32", "ncclFloat",    "ncclFloat16",
                                           "ncclHalf",    "ncclBfloat16", NULL};

/* Appends text[0..len) to vals and line to lines (same index). */
static int add_value(cuco_strlist *vals, int **lines, const char *text, size_t len, int line)
{
    int *grown = realloc(*lines, (vals->n + 1) * sizeof(int));
    if (!grown)
        return CUCO_ENOMEM;
    *lines = grown;
    char *val = cuco_strndup(text, len);
    int rc = val ? cuco_strlist_push(vals, val) : CUCO_ENOMEM;
    free(val);
    if (rc != 0)
        return CUCO_ENOMEM;
    (*lines)[vals->n - 1] = line;
    return 0;
}

/* The text after NAME in token p when p is `#define NAME ...` (an object-like
 * macro of that name); NULL otherwise. *end: the end of p's text. */
static const char *define_value(const cuco_lex *lx, const cuco_tok *p, const char *name,
                                const char **end)
{
    size_t nl = strlen(name);
    if (p->kind != CUCO_TOK_PREPROC || p->dir_len != 6 ||
        memcmp(lx->src + p->dir_off, "define", 6) != 0)
        return NULL;
    const char *q = lx->src + p->dir_off + 6;
    *end = lx->src + p->off + p->len;
    while (q < *end && (*q == ' ' || *q == '\t'))
        q++;
    if ((size_t)(*end - q) <= nl || memcmp(q, name, nl) != 0 || !(q[nl] == ' ' || q[nl] == '\t'))
        return NULL; /* another macro, or a function-like one */
    q += nl;
    while (q < *end && (*q == ' ' || *q == '\t'))
        q++;
    return q;
}

/* The NCCL names (ncclFloat, ncclSum ...) argument k of a call stands for:
 * itself when it is one such name; else, for a single identifier, the
 * values of its object-like macros ("#define NCCL_REAL_TYPE ncclFloat", every
 * #if branch) and of variables initialised with one ("constexpr
 * ncclDataType_t kType = ncclHalf;"). Each value goes to vals, its line to
 * lines (0 for the argument itself). Nothing when the argument is an
 * expression (a call, a traits member): the runtime checks those. */
static int arg_values(ctx *c, const args *a, int k, cuco_strlist *vals, int **lines)
{
    const sview *v = &c->v;
    size_t t = a->first[k];
    if (a->first[k] != a->last[k] || !ident(v, t))
        return 0;
    char *name = cuco_strndup(v->src + tk(v, t)->off, tk(v, t)->len);
    if (!name)
        return CUCO_ENOMEM;
    int rc = 0;
    if (strncmp(name, "nccl", 4) == 0) {
        rc = add_value(vals, lines, name, strlen(name), 0);
        free(name);
        return rc;
    }
    const cuco_lex *lx = &v->lx;
    for (size_t i = 0; i < lx->ntoks && rc == 0; i++) {
        const cuco_tok *p = &lx->toks[i];
        const char *end, *q = define_value(lx, p, name, &end);
        if (!q)
            continue;
        const char *ve = q;
        while (ve < end && (*ve == '_' || (*ve >= '0' && *ve <= '9') ||
                            ((*ve | 32) >= 'a' && (*ve | 32) <= 'z')))
            ve++;
        if (ve > q + 4 && strncmp(q, "nccl", 4) == 0)
            rc = add_value(vals, lines, q, (size_t)(ve - q), p->line);
    }
    for (size_t i = 0; i + 3 < v->n && rc == 0; i++) {
        if (!cuco_tok_is(&v->lx, tk(v, i), name) || !is(v, i + 1, "=") || !ident(v, i + 2) ||
            !(is(v, i + 3, ";") || is(v, i + 3, ",")) ||
            strncmp(v->src + tk(v, i + 2)->off, "nccl", 4) != 0)
            continue;
        const cuco_tok *val = tk(v, i + 2);
        rc = add_value(vals, lines, v->src + val->off, val->len, val->line);
    }
    free(name);
    return rc;
}

/* Whether name is a macro the file #defines. */
static int defined_macro(const ctx *c, const char *name)
{
    const cuco_lex *lx = &c->v.lx;
    const char *end;
    for (size_t i = 0; i < lx->ntoks; i++)
        if (define_value(lx, &lx->toks[i], name, &end))
            return 1;
    return 0;
}

/* "NAME (ncclDouble at line 31)" for messages; the argument alone when it
 * is the value. Caller frees. */
static char *value_text(const char *arg, const char *value, int line)
{
    return line ? cuco_sprintf("%s (%s at line %d)", arg, value, line) : cuco_strdup(arg);
}

/* The glue's CUCO_TX_DTYPES bit of an NCCL data type's name (0: one the
 * device does not reduce, or float, which is always built). */
static unsigned glue_dtype_bit(const char *name)
{
    static const struct {
        const char *name;
        unsigned bit;
    } bits[] = {{"ncclFloat16", 2}, {"ncclHalf", 2}, {"ncclBfloat16", 4},
                {"ncclInt32", 8},   {"ncclInt", 8},  {NULL, 0}};
    for (size_t i = 0; bits[i].name; i++)
        if (!strcmp(bits[i].name, name))
            return bits[i].bit;
    return 0;
}

/* Reductions the device implements: the dtype (argument 3) must be one the
 * device reductions have, the operation (argument 4) ncclSum, or ncclAvg of
 * a floating type; names defined by macros or constants count as their
 * values (all of them, when #if branches define several). */
static int check_reduce_args(ctx *c, const args *a, size_t i, const char *call, int group)
{
    cuco_strlist dts = {0}, ops = {0};
    int *dt_lines = NULL, *op_lines = NULL;
    char *dt_arg = rl_arg_text(&c->v, a, 3), *op_arg = rl_arg_text(&c->v, a, 4);
    int rc = dt_arg && op_arg ? 0 : CUCO_ENOMEM;
    if (rc == 0)
        rc = arg_values(c, a, 3, &dts, &dt_lines);
    if (rc == 0)
        rc = arg_values(c, a, 4, &ops, &op_lines);
    int all_float = dts.n > 0, avg = 0, op_refused = 0;
    /* the mask trusts a literal or a macro (#define DT ncclHalf), not a
     * variable some assignment of the file gives a literal: its value may
     * come from elsewhere too */
    c->dtypes_unread |= dts.n == 0 || !(dt_lines[0] == 0 || defined_macro(c, dt_arg));
    for (size_t k = 0; rc == 0 && k < dts.n; k++) {
        c->dtypes |= glue_dtype_bit(dts.items[k]);
        all_float &= rl_str_in(float_dtypes, dts.items[k]);
        if (!rl_str_in(device_dtypes, dts.items[k])) {
            char *t = value_text(dt_arg, dts.items[k], dt_lines[k]);
            rc = rl_keep_or_refuse(c, rl_line_of(c, i), group,
                                   "%s: data type %s has no device reduction in device/", call, t);
            free(t);
            break;
        }
    }
    for (size_t k = 0; rc == 0 && k < ops.n; k++) {
        if (!strcmp(ops.items[k], "ncclAvg")) {
            avg = 1;
        } else if (strcmp(ops.items[k], "ncclSum") != 0) {
            if (op_lines[k] == 0) {
                rc = rl_keep_or_refuse(
                    c, rl_line_of(c, i), group,
                    "%s: reduction '%s' is not the literal ncclSum or ncclAvg (device/ only sums)",
                    call, op_arg);
            } else {
                char *t = value_text(op_arg, ops.items[k], op_lines[k]);
                rc = rl_keep_or_refuse(
                    c, rl_line_of(c, i), group,
                    "%s: reduction %s is not ncclSum or ncclAvg (device/ only sums)", call, t);
                free(t);
            }
            op_refused = 1;
            avg = 0;
            break;
        }
    }
    if (rc == 0 && dts.n == 0)
        rc = cuco_tx_notes_add(&c->r->notes, rl_line_of(c, i), "rewrite",
                               "%s: data type '%s' is not a literal, macro or constant: one the "
                               "device does not reduce (any but float, half, bf16 and int32) goes "
                               "through NCCL's own call at run time",
                               call, dt_arg);
    if (rc == 0 && ops.n == 0 && !op_refused)
        rc = rl_keep_or_refuse(
            c, rl_line_of(c, i), group,
            "%s: reduction '%s' is not ncclSum or ncclAvg, nor a macro or constant naming one "
            "(device/ only sums)",
            call, op_arg);
    else if (rc == 0 && avg && !all_float)
        /* a sum, then a scale by 1/nranks: floating types only */
        rc = rl_keep_or_refuse(
            c, rl_line_of(c, i), group,
            "%s: ncclAvg of data type '%s': the device average is implemented for floating types "
            "named by a literal, macro or constant only (float, half, bf16)",
            call, dt_arg);
    free(dt_arg);
    free(op_arg);
    cuco_strlist_free(&dts);
    cuco_strlist_free(&ops);
    free(dt_lines);
    free(op_lines);
    return rc;
}

/* Receives need their buffer in a symmetric window (the sender stores into
 * it); sends need nothing: the receiver posts where its data goes. */
static int rewrite_p2p(ctx *c, p2p_call *calls, size_t n)
{
    const sview *v = &c->v;
    for (size_t i = 0; i < n; i++) {
        p2p_call *s = &calls[i];
        size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
        int rc = rl_note_comm(c, &s->a, 4, s->tok);
        if (rc == 0 && !s->is_send)
            rc = rl_need_symmetric(c, &s->a, 0, s->tok, "ncclRecv", -1);
        if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
            continue; /* refused on its own line: no rewrite line */
        if (rc == 0)
            rc = rl_add_edit(c, s->tok, tk(v, s->tok)->off, tk(v, s->tok)->len,
                             s->is_send ? "cuco_tx::send" : "cuco_tx::recv");
        if (rc == 0)
            rc = rl_sched_candidate(c, s->tok, s->group);
        if (rc == 0)
            rc = cuco_tx_notes_add(&c->r->notes, rl_line_of(c, s->tok), "rewrite", "%s",
                                   s->is_send
                                       ? "ncclSend -> cuco_tx::send (waits for the receiver to "
                                         "post its buffer, stores into it over NVLink, signals)"
                                       : "ncclRecv -> cuco_tx::recv (posts its buffer to the "
                                         "source, then waits for the source's signal)");
        if (rc != 0)
            return rc < 0 ? rc : CUCO_ENOMEM;
    }
    return 0;
}

static const char *const capture_calls[] = {"cudaStreamBeginCapture",
                                            "cudaStreamBeginCaptureToGraph",
                                            "cudaStreamBeginCapture_v2",
                                            "cuStreamBeginCapture",
                                            "cuStreamBeginCapture_v2",
                                            "cuStreamBeginCaptureToGraph",
                                            NULL};

/* Stream capture into a CUDA graph: a graph replays its nodes with the
 * arguments they had when captured, while the glue's device paths number
 * point-to-point calls and copy-engine rendezvous on the host and set
 * communicators and windows up at a first use. So the glue sends a call made
 * on a capturing stream through NCCL's own (cuco_tx::capturing), but for the
 * SM collectives on registered windows (replayable_on_device), and the schedules,
 * which fork streams and decide on the host, are left out of the program. */
static const char capture_note[] =
    "stream capture into a CUDA graph: calls made on a capturing stream go through NCCL's own "
    "(which captures), but for an all-reduce, reduce-scatter or all-gather whose window is "
    "already registered (their SM kernels keep their barrier state on the device, so each "
    "replay synchronises afresh); calls made outside a capture keep the device paths; no "
    "schedule is applied";

const char *const rl_comm_makers[] = {
    "ncclCommInitRank", "ncclCommInitRankConfig",   "ncclCommSplit",
    "ncclCommShrink",   "ncclCommInitRankScalable", NULL};

/* Whether the group opened at token open makes communicators and issues no
 * visible communication (NCCL's multi-device setup: an ncclCommInitRank per
 * GPU inside one group). It stays NCCL's own group, whose ncclGroupEnd
 * completes the communicators together: without it, each ncclCommInitRank
 * of one thread would wait for the next one. */
static int group_makes_comms_only(const sview *v, size_t open)
{
    size_t end = rl_group_end(v, open);
    int makes = 0;
    for (size_t i = open + 1; i < end; i++) {
        if (!rl_called_name(v, i))
            continue;
        if (in_words(v, i, rl_comm_makers))
            makes = 1;
        else if (in_words(v, i, rl_host_collectives))
            return 0;
    }
    return end < v->n && makes;
}

static int scan_group_call(ctx *c, scan_state *st, size_t i, const char *name)
{
    const cuco_tok *t = tk(&c->v, i);
    int start = name[9] == 'S';
    if (start && st->group_depth++ == 0) {
        st->group = ++st->next_group;
        c->group_open = i;
        st->nccl_group = group_makes_comms_only(&c->v, i);
        st->kept_group = c->p2p_host && rl_group_p2p_line(c, i);
        if (st->nccl_group)
            return cuco_tx_notes_add(&c->r->notes, t->line, "setup",
                                     "ncclGroupStart: the group makes communicators and "
                                     "communicates nothing, so it stays NCCL's own group");
        if (st->kept_group)
            return cuco_tx_notes_add(&c->r->notes, t->line, "kept",
                                     "ncclGroupStart: the group holds point-to-point calls, "
                                     "which all stay host NCCL (see line %d): it stays NCCL's "
                                     "own group, every call in it host NCCL",
                                     c->p2p_host);
    } else if (!start && st->group_depth > 0 && --st->group_depth == 0) {
        st->group = 0;
        if (st->nccl_group || st->kept_group) {
            st->nccl_group = st->kept_group = 0;
            return 0;
        }
    }
    if (st->nccl_group || st->kept_group)
        return 0;
    if (!rl_editable(c, i, name))
        return 0;
    int rc =
        rl_add_edit(c, i, t->off, t->len, start ? "cuco_tx::group_start" : "cuco_tx::group_end");
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> cuco_tx::%s (groups the device point-to-point calls)", name,
                               start ? "group_start" : "group_end");
    return rc;
}

/* ncclAllGather, ncclReduceScatter, ncclAllReduce -> the device collectives. */
static int scan_collective(ctx *c, scan_state *st, size_t i, const char *name)
{
    const sview *v = &c->v;
    const cuco_tok *t = tk(v, i);
    args a;
    rl_call_args(v, i + 1, &a);
    int ag = name[4] == 'A' && name[7] == 'G', rs = name[4] == 'R';
    int want = ag ? 6 : 7;
    if (a.n != want) {
        rl_refuse(c, t->line, "%s: expected its %s arguments", name, ag ? "6" : "7");
        return 0;
    }
    if (!rl_editable(c, i, name))
        return 0;
    size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
    size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
    int rc = 0;
    if (!ag)
        rc = check_reduce_args(c, &a, i, name, st->group);
    if (rc == 0 && rl_kept_since(c, kept))
        return rl_keep_call(c, i, st->group); /* stays host NCCL: its own line says why */
    if (rc == 0 && rl_other_comm_kept(c, &a, i, name, st->group, &rc))
        return rc;
    c->stage_call = 0;
    if (rc == 0)
        rc = rl_need_symmetric(c, &a, rs ? 0 : 1, i, name, st->group);
    if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
        return 0; /* this call is refused: its own line says why, no rewrite line */
    if (rc == 0 && rl_kept_since(c, kept))
        return rl_keep_call(c, i, st->group);
    if (rc == 0)
        rc = rl_note_comm(c, &a, want - 2, i);
    const char *to = ag              ? "cuco_tx::all_gather"
                     : rs            ? "cuco_tx::reduce_scatter"
                     : c->stage_call ? "cuco_tx::staged_all_reduce"
                                     : "cuco_tx::all_reduce";
    if (rc == 0)
        rc = rl_add_edit(c, i, t->off, t->len, to);
    if (rc == 0)
        rc = rl_sched_candidate(c, i, st->group);
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> %s (device/ LSA kernel on the same stream)", name, to);
    return rc;
}

/* Broadcast, all-to-all and the other calls of rl_p2p_collectives. */
static int scan_p2p_collective(ctx *c, scan_state *st, size_t i, const char *name)
{
    const sview *v = &c->v;
    const cuco_tok *t = tk(v, i);
    const p2p_collective *pc = rl_p2p_collective_of(name);
    args a;
    rl_call_args(v, i + 1, &a);
    if (a.n != pc->nargs) {
        char nbuf[16];
        snprintf(nbuf, sizeof nbuf, "%d", pc->nargs);
        rl_refuse(c, t->line, "%s: expected its %s arguments", name, nbuf);
        return 0;
    }
    if (!rl_editable(c, i, name))
        return 0;
    int rc = 0;
    if (rl_other_comm_kept(c, &a, i, name, st->group, &rc))
        return rc;
    size_t refusals = cuco_tx_notes_count(&c->r->notes, "refused");
    size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
    rc = rl_need_symmetric(c, &a, pc->recv_arg, i, name, st->group);
    if (rc == 0 && cuco_tx_notes_count(&c->r->notes, "refused") > refusals)
        return 0; /* refused on its own line */
    if (rc == 0 && rl_kept_since(c, kept))
        return rl_keep_call(c, i, st->group);
    /* consumer_split_by_source pulls each peer's block from its send buffer */
    if (rc == 0 && (!strcmp(name, "ncclAlltoAll") || !strcmp(name, "ncclAllToAll")))
        rc = rl_need_symmetric(c, &a, 0, i, name, SYMM_OPTIONAL);
    if (rc == 0)
        rc = rl_note_comm(c, &a, pc->nargs - 2, i);
    if (rc == 0)
        rc = rl_add_edit(c, i, t->off, t->len, pc->to);
    if (rc == 0)
        rc = rl_sched_candidate(c, i, st->group);
    if (rc == 0)
        rc = cuco_tx_notes_add(&c->r->notes, t->line, "rewrite",
                               "%s -> %s (device point-to-point puts into the receivers' "
                               "symmetric buffers)",
                               name, pc->to);
    return rc;
}

/* ncclSend / ncclRecv: collected, rewritten together by rewrite_p2p. */
static int scan_p2p_call(ctx *c, scan_state *st, size_t i, const char *name)
{
    const sview *v = &c->v;
    p2p_call pc;
    pc.tok = i;
    pc.is_send = name[4] == 'S';
    pc.group = st->group;
    pc.top = (int)rl_top_start(v, i);
    rl_call_args(v, i + 1, &pc.a);
    if (pc.a.n != 6) {
        rl_refuse(c, tk(v, i)->line, "%s: expected its 6 arguments%s", name, NULL);
        return 0;
    }
    if (!rl_editable(c, i, name))
        return 0;
    if (c->p2p_host) {
        int rc = cuco_tx_notes_add(&c->r->notes, tk(v, i)->line, "kept",
                                   "%s: every point-to-point call stays host NCCL, so that both "
                                   "ends of each transfer take the same path (see line %d)",
                                   name, c->p2p_host);
        return rc == 0 ? rl_keep_call(c, i, 0) : rc;
    }
    p2p_call *grown = realloc(st->p2p, (st->np2p + 1) * sizeof(*grown));
    if (!grown)
        return CUCO_ENOMEM;
    st->p2p = grown;
    st->p2p[st->np2p++] = pc;
    return 0;
}

/* One identifier of the program: a call cuco rewrites or refuses, or nothing. */
static int scan_one(ctx *c, scan_state *st, size_t i, const char *name, int called)
{
    const sview *v = &c->v;
    const cuco_tok *t = tk(v, i);
    if (in_words(v, i, rl_host_collectives) && !called) {
        /* what a pointer calls may run anywhere, in a group too */
        if (rl_is_p2p_name(name) || rl_has_group_calls(v))
            return rl_refuse(c, t->line,
                             "%s is used but not called (a function pointer or a macro "
                             "argument?)%s",
                             name, NULL);
        return rl_keep_or_refuse(c, t->line, 0, "%s is used but not called (a function pointer?)%s",
                                 name, NULL);
    }
    if (called && st->kept_group && in_words(v, i, rl_host_collectives)) {
        if (!rl_editable(c, i, name))
            return 0;
        int rc = cuco_tx_notes_add(&c->r->notes, t->line, "kept",
                                   "%s: inside the NCCL group that stays NCCL's own (line %d)",
                                   name, rl_line_of(c, c->group_open));
        return rc == 0 ? rl_keep_call(c, i, 0) : rc;
    }
    if (in_words(v, i, unsupported_calls)) {
        if (!called || !rl_editable(c, i, name))
            return 0;
        size_t kept = cuco_tx_notes_count(&c->r->notes, "kept");
        int rc = rl_keep_or_refuse(c, t->line, st->group, "%s: device/ has no device-side %s", name,
                                   name);
        return rc == 0 && rl_kept_since(c, kept) ? rl_keep_call(c, i, st->group) : rc;
    }
    if (!called)
        return 0;
    if (strcmp(name, "ncclGroupStart") == 0 || strcmp(name, "ncclGroupEnd") == 0)
        return scan_group_call(c, st, i, name);
    if (strcmp(name, "ncclAllGather") == 0 || strcmp(name, "ncclReduceScatter") == 0 ||
        strcmp(name, "ncclAllReduce") == 0)
        return scan_collective(c, st, i, name);
    if (rl_p2p_collective_of(name))
        return scan_p2p_collective(c, st, i, name);
    if (strcmp(name, "ncclSend") == 0 || strcmp(name, "ncclRecv") == 0)
        return scan_p2p_call(c, st, i, name);
    if (strcmp(name, "ncclCommInitRankScalable") == 0 || strcmp(name, "ncclCommShrink") == 0)
        c->comm_creations++; /* no device communicator set up after it: counted only */
    if (strcmp(name, "ncclCommInitAll") == 0) {
        c->comm_creations++;
        return rl_several_devices(c, i, name, 1);
    }
    if (strcmp(name, "ncclCommInitRank") == 0 || strcmp(name, "ncclCommInitRankConfig") == 0 ||
        strcmp(name, "ncclCommSplit") == 0)
        return rl_scan_comm_init(c, st, i, name);
    if (strcmp(name, "ncclCommDestroy") == 0 || strcmp(name, "ncclCommAbort") == 0)
        return rl_scan_comm_destroy(c, i, name);
    return 0;
}

static int scan_calls(ctx *c)
{
    const sview *v = &c->v;
    scan_state st;
    memset(&st, 0, sizeof(st));
    int rc = 0, capture_line = 0, collective_calls = 0;
    for (size_t i = 0; i < v->n && rc == 0; i++) {
        if (!ident(v, i) || rl_qualified(v, i))
            continue;
        int called = is(v, i + 1, "(");
        if (called && !capture_line && in_words(v, i, capture_calls))
            capture_line = tk(v, i)->line;
        if (called && in_words(v, i, rl_host_collectives))
            collective_calls++;
        char *name = cuco_strndup(v->src + tk(v, i)->off, tk(v, i)->len);
        rc = name ? scan_one(c, &st, i, name, called) : CUCO_ENOMEM;
        free(name);
    }
    if (rc == 0 && capture_line && collective_calls) {
        c->capture_line = capture_line;
        rc = cuco_tx_notes_add(&c->r->notes, capture_line, "setup", "%s", capture_note);
    }
    if (rc == 0)
        rc = rewrite_p2p(c, st.p2p, st.np2p);
    if (rc == 0)
        rc = rl_check_one_comm(c);
    free(st.p2p);
    return rc;
}

/* A collective named in a macro's body stays host NCCL (the macro may be
 * expanded anywhere, so only in a file without NCCL groups); a send or a
 * receive there is refused (its peer's call would be rewritten). */
static int keep_macro_call(ctx *c, int line, size_t at, const char *name)
{
    if (rl_is_p2p_name(name) || rl_has_group_calls(&c->v) ||
        (c->nblocks > 0 && !rl_in_block(c, at)))
        return rl_refuse(
            c, line,
            "%s inside a preprocessor directive (a macro) cannot be rewritten in "
            "place%s",
            name, rl_is_p2p_name(name) ? "" : " (the file has NCCL groups, or it is frozen code)");
    int rc =
        rl_keep_or_refuse(c, line, 0, "%s inside a preprocessor directive (a macro)%s", name, NULL);
    return rc == 0 ? rl_keep_mark(c, 0, at, 0) : rc;
}

/* Collectives named in a macro's body (keep_macro_call); a name in another
 * directive (an #include's path) is not a call. */
static int refuse_macros(ctx *c)
{
    const cuco_lex *lx = &c->v.lx;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind != CUCO_TOK_PREPROC || !rl_is_define(lx->src + t->off, t->len))
            continue;
        for (const char *const *n = rl_host_collectives; *n; n++) {
            size_t nl = strlen(*n);
            for (size_t k = 0; k + nl <= t->len; k++) {
                const char *p = lx->src + t->off + k;
                if (memcmp(p, *n, nl) != 0 || (k > 0 && cuco_tx_ident_char(p[-1])) ||
                    (k + nl < t->len && cuco_tx_ident_char(p[nl])))
                    continue;
                int rc = keep_macro_call(c, t->line, t->off + k, *n);
                if (rc != 0)
                    return rc;
            }
        }
    }
    return 0;
}

int cuco_transform_rules(const char *file_name, const char *text, cuco_tx_result *r, cuco_err *e)
{
    return cuco_transform_rules_declared(file_name, text, NULL, 0, r, e);
}

/* A note for each symmetric allocation under a branch that reads the rank:
 * windows are registered by every rank together, so a rank that skips the
 * allocation leaves the others waiting at the registration. */
static int rank_branch_notes(ctx *c, cuco_err *e)
{
    if (!c->nalloc)
        return 0;
    size_t *offs = malloc(c->nalloc * sizeof(*offs));
    cuco_rank_branch *b = calloc(c->nalloc, sizeof(*b));
    int rc = offs && b ? 0 : CUCO_ENOMEM;
    for (size_t k = 0; rc == 0 && k < c->nalloc; k++)
        offs[k] = tk(&c->v, c->alloc_sites[k])->off;
    if (rc == 0 && cuco_rank_branches(c->v.src, offs, c->nalloc, b, e) != 0)
        rc = e->code ? e->code : CUCO_ENOMEM;
    for (size_t k = 0; rc == 0 && k < c->nalloc; k++) {
        if (!b[k].cond_line)
            continue;
        const cuco_tok *t = tk(&c->v, c->alloc_sites[k]);
        char via[96] = "";
        if (b[k].call_line)
            snprintf(via, sizeof via,
                     " (it decides every call of its function, the first at line %d)",
                     b[k].call_line);
        rc = cuco_tx_notes_add(
            &c->r->notes, t->line, "note",
            "%.*s of a symmetric buffer runs only where 'if %s' (line %d) "
            "%s%s, which reads the rank: every rank registers the windows "
            "together, in allocation order, so every rank must allocate it "
            "(else the ranks that did wait at the registration); allocate it "
            "before the branch",
            (int)t->len, c->v.src + t->off, b[k].cond, b[k].cond_line,
            b[k].after_exit ? "does not hold (its branch leaves first)" : "holds", via);
    }
    if (b)
        cuco_rank_branches_free(b, c->nalloc);
    free(b);
    free(offs);
    return rc;
}

/* Why a pass would keep every point-to-point call host NCCL: the line of
 * the first group whose kept call refused the program, or of the second
 * communicator when sends and receives sit beside collectives on several. */
typedef struct p2p_retry {
    int group_line, comms_line;
} p2p_retry;

/* One pass of the rules; p2p_host: the line that keeps every
 * point-to-point call host NCCL (0: none); *retry: what refused it. */
static int run_rules(const cuco_tx_input *in, int p2p_host, p2p_retry *retry, cuco_tx_result *r,
                     cuco_err *e)
{
    memset(r, 0, sizeof(*r));
    ctx c;
    memset(&c, 0, sizeof(c));
    c.file = in->file_name;
    c.r = r;
    c.sem = in->sem;
    c.n_sem = in->n_sem;
    c.p2p_host = p2p_host;
    int rc = cuco_program_blocks(in->text, &c.blocks, &c.nblocks, e);
    if (rc != 0) {
        if (!e->file)
            cuco_err_prefix(e, "%s", in->file_name);
        return rc;
    }
    rc = sview_open(&c.v, in->text, e);
    if (rc == 0 && in->header_macros)
        rc = sview_add_macros(&c.v, in->header_macros, e);
    if (rc == 0)
        rc = refuse_macros(&c);
    if (rc == 0)
        rc = rl_choose_device_comm(&c);
    if (rc == 0)
        rc = scan_calls(&c);
    if (rc == 0)
        rc = rl_rewrite_frees(&c);
    if (rc == 0 && cuco_tx_notes_count(&r->notes, "rewrite") == 0 && !r->refused) {
        r->refused = 1;
        cuco_tx_notes_add(&r->notes, 0, "refused",
                          cuco_tx_notes_count(&r->notes, "kept")
                              ? "every NCCL call stays host NCCL (the kept lines say why): "
                                "nothing to transform"
                              : "no NCCL collective or point-to-point call found: nothing to "
                                "transform");
    }
    if (rc == 0 && !r->refused)
        rc = rank_branch_notes(&c, e);
    if (rc == 0 && !r->refused)
        rc = rl_sched_all(&c, in->text, e);
    if (rc == 0 && !r->refused)
        rc = rl_assemble(&c, in->text);
    if (rc == 0 && r->refused) {
        free(r->program);
        r->program = NULL;
        rc = cuco_tx_notes_unapply(&r->notes); /* only rewrites that happened are listed */
    }
    if (rc == CUCO_ENOMEM)
        cuco_err_set(e, rc, "out of memory");
    else if (rc == CUCO_EINVAL && !e->code)
        cuco_err_set(e, rc, "the cuco_tx glue is not embedded in this build");
    retry->group_line = c.p2p_group_refused;
    retry->comms_line = c.p2p_comms_refused;
    sview_close(&c.v);
    for (size_t i = 0; i < c.nedits; i++)
        free(c.edits[i].text);
    free(c.edits);
    free(c.blocks);
    free(c.alloc_sites);
    free(c.fn_of);
    cuco_strlist_free(&c.symm_names);
    cuco_strlist_free(&c.symm_found);
    cuco_strlist_free(&c.symm_busy);
    cuco_strlist_free(&c.comm_names);
    cuco_strlist_free(&c.comm_texts);
    free(c.device_comm);
    cuco_strlist_free(&c.call_comms);
    free(c.comm_lines);
    free(c.sched_toks);
    free(c.sched_group);
    free(c.split_gemms);
    cuco_buf_free(&c.knobs);
    return rc;
}

/* The first pass's reason for refusing the group at line, up to its "; inside". */
static char *group_refusal(const cuco_tx_result *r, int line)
{
    for (size_t i = 0; i < r->notes.n; i++) {
        const cuco_tx_note *n = &r->notes.items[i];
        const char *cut = strstr(n->text, "; inside ncclGroupStart/ncclGroupEnd");
        if (strcmp(n->kind, "refused") == 0 && cut && n->line >= line)
            return cuco_strndup(n->text, (size_t)(cut - n->text));
    }
    return cuco_strdup("a call the device does not implement");
}

/* A group that holds point-to-point calls and a call the device does not
 * implement cannot be split between NCCL and the device (the group's
 * point-to-point calls run at its end on the device), nor can sends and
 * receives go to the device beside collectives on another communicator:
 * then a second pass keeps every point-to-point call of the program (both
 * ends of a transfer must take one path) and every group holding one host
 * NCCL, NCCL's own groups; the rest goes to the device. */
int cuco_transform_rules_in(const cuco_tx_input *in, cuco_tx_result *r, cuco_err *e)
{
    p2p_retry retry = {0, 0}, again = {0, 0};
    int rc = run_rules(in, 0, &retry, r, e);
    int line = retry.group_line ? retry.group_line : retry.comms_line;
    if (rc != 0 || !r->refused || !line)
        return rc;
    char *why = retry.group_line
                    ? group_refusal(r, line)
                    : cuco_strdup("sends and receives beside collectives on several communicators");
    cuco_tx_result first = *r;
    rc = why ? run_rules(in, line, &again, r, e) : CUCO_ENOMEM;
    if (rc == 0 && !r->refused)
        rc = cuco_tx_notes_add(&r->notes, line, "kept", "%s%s", why,
                               retry.group_line
                                   ? ", in this NCCL group beside point-to-point calls: the group "
                                     "stays NCCL's own, and every point-to-point call of the "
                                     "program host NCCL"
                                   : ": every point-to-point call stays host NCCL (the device "
                                     "runtime registers its windows with one communicator), the "
                                     "collectives on that one go to the device");
    if (rc == 0 && !r->refused) {
        cuco_tx_result_free(&first);
    } else {
        if (rc == 0)
            cuco_tx_result_free(r);
        else
            cuco_tx_result_free(&first);
        if (rc == 0)
            *r = first;
    }
    free(why);
    return rc;
}

int cuco_transform_rules_declared(const char *file_name, const char *text, const cuco_semantic *sem,
                                  size_t n_sem, cuco_tx_result *r, cuco_err *e)
{
    cuco_tx_input in = {.file_name = file_name, .text = text, .sem = sem, .n_sem = n_sem};
    return cuco_transform_rules_in(&in, r, e);
}
