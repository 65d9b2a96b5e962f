/* audit_comm.c: the static audit's second question: is the data a collective
 * receives ever read? A verification can only notice a broken collective if
 * something reads what the collective wrote. For every host NCCL call that
 * receives data (ncclAllGather, ncclAllReduce, ncclReduceScatter,
 * ncclBroadcast, ncclReduce, ncclAlltoAll, ncclRecv, ...) this file takes the
 * receive buffer's name and looks for a read of it: copied out
 * (cudaMemcpy* source), given to a kernel launch, to another collective as
 * its send buffer, to any call that is not an allocation, free or memset, or
 * used in an expression. Registering it (ncclCommRegister, a window) is
 * no read. Through a parameter the search continues in the
 * callers (whose call passing the buffer on is not itself a read). A buffer
 * that is written by the collective and otherwise only allocated, cleared and
 * freed is never read: the program's PASS cannot depend on what was
 * communicated. Like the rest of the audit it works on tokens: names are
 * matched in the scopes that can hold them, so a reused name counts as a
 * read (the check errs towards no finding). */
#include <stdlib.h>
#include <string.h>

#include "bound_int.h"
#include "cuco/buf.h"
#include "cuco/grow.h"

#define COMM_MAX_DEPTH 4

typedef struct recv_call {
    const char *name;
    int recv_arg; /* argument index of the receive buffer */
    int send_arg; /* argument index of the send buffer, -1 when none */
} recv_call;

static const recv_call recv_calls[] = {{"ncclAllGather", 1, 0},
                                       {"ncclAllReduce", 1, 0},
                                       {"ncclReduceScatter", 1, 0},
                                       {"ncclBroadcast", 1, 0},
                                       {"ncclReduce", 1, 0},
                                       {"ncclAlltoAll", 1, 0},
                                       {"ncclAllToAll", 1, 0},
                                       {"ncclGather", 1, 0},
                                       {"ncclScatter", 1, 0},
                                       {"ncclBcast", 0, 0},
                                       {"ncclRecv", 0, -1},
                                       {"ncclSend", -1, 0},
                                       {NULL, 0, 0}};

/* Calls that allocate, free or clear a buffer: naming it there is no read. */
static int is_neutral_call(const char *name)
{
    static const char *const prefixes[] = {"cudaMalloc",
                                           "cudaFree",
                                           "cudaMemset",
                                           "cudaHostAlloc",
                                           "cudaHostRegister",
                                           "ncclMemAlloc",
                                           "ncclMemFree",
                                           "ncclCommWindow",
                                           "ncclCommRegister",
                                           "ncclCommDeregister",
                                           "cudaHostUnregister",
                                           "cudaPointerGetAttributes",
                                           NULL};
    for (int k = 0; prefixes[k]; k++)
        if (!strncmp(name, prefixes[k], strlen(prefixes[k])))
            return 1;
    return !strcmp(name, "free") || !strcmp(name, "memset") || !strcmp(name, "sizeof") ||
           !strcmp(name, "delete") || !strcmp(name, "cudaStreamAttachMemAsync");
}

static const recv_call *find_recv_call(const bl_source *s, int i)
{
    if (!bl_is_ident(s, i) || !bl_is(s, i + 1, "("))
        return NULL;
    for (int k = 0; recv_calls[k].name; k++)
        if (bl_is(s, i, recv_calls[k].name))
            return &recv_calls[k];
    return NULL;
}

/* Token range [*a, *b) of argument idx of the call whose '(' is lp. */
static int arg_range(const bl_source *s, int lp, int idx, int *a, int *b)
{
    int rp = s->tok[lp].match, k = 0, start = lp + 1;
    if (rp < 0)
        return 0;
    for (int j = lp + 1; j <= rp; j++) {
        if (j == rp || bl_is(s, j, ",")) {
            if (k == idx) {
                *a = start;
                *b = j;
                return start < j;
            }
            k++;
            start = j + 1;
        } else if ((bl_is(s, j, "(") || bl_is(s, j, "[") || bl_is(s, j, "{")) &&
                   s->tok[j].match > j) {
            j = s->tok[j].match;
        }
    }
    return 0;
}

static int is_type_word(const bl_source *s, int i)
{
    static const char *const words[] = {
        "const",         "void",    "char",     "float",  "double",   "int",
        "unsigned",      "signed",  "long",     "short",  "struct",   "__half",
        "__nv_bfloat16", "half",    "uint8_t",  "int8_t", "uint16_t", "int32_t",
        "uint32_t",      "int64_t", "uint64_t", "size_t", NULL};
    for (int k = 0; words[k]; k++)
        if (bl_is(s, i, words[k]))
            return 1;
    return 0;
}

/* The name that stands for the buffer of an argument: the last member of
 * its leading access chain (s.k_all + off -> "k_all", member 1), or the
 * variable ((char *)buf + n -> "buf"). Casts, '&' and '*' are skipped.
 * NULL when the argument is a call or holds no name. Caller frees. */
static char *buffer_key(const bl_source *s, int a, int b, int *member)
{
    *member = 0;
    int i = a;
    while (i < b) {
        if (bl_is(s, i, "&") || bl_is(s, i, "*") || is_type_word(s, i)) {
            i++;
        } else if (bl_is(s, i, "(") && s->tok[i].match > i && s->tok[i].match < b) {
            /* A cast: (T *) x. Otherwise a parenthesised expression: go in. */
            int close = s->tok[i].match, cast = 1;
            for (int j = i + 1; j < close; j++)
                if (!bl_is_ident(s, j) && !bl_is(s, j, "*") && !bl_is(s, j, "::"))
                    cast = 0;
            i = cast ? close + 1 : i + 1;
        } else if (bl_is_ident(s, i) &&
                   (bl_is(s, i, "static_cast") || bl_is(s, i, "reinterpret_cast") ||
                    bl_is(s, i, "const_cast"))) {
            /* x_cast<T *>(expr): go into expr. */
            int j = i + 1;
            while (j < b && !bl_is(s, j, "("))
                j++;
            i = j + 1;
        } else {
            break;
        }
    }
    if (i >= b || !bl_is_ident(s, i) || bl_is(s, i + 1, "("))
        return NULL;
    int last = i;
    while (i + 2 < b + 1 && (bl_is(s, i + 1, ".") || bl_is(s, i + 1, "->")) &&
           bl_is_ident(s, i + 2)) {
        i += 2;
        last = i;
        *member = 1;
    }
    if (bl_is(s, last + 1, "("))
        return NULL; /* a method call */
    return bl_text(s, last);
}

static int param_of(const bl_source *s, const bl_func *f, const char *name)
{
    int rp = s->tok[f->params_lp].match, idx = 0;
    for (int j = f->params_lp + 1; j < rp; j++) {
        if (bl_is(s, j, ","))
            idx++;
        else if ((bl_is(s, j, "(") || bl_is(s, j, "[")) && s->tok[j].match > j)
            j = s->tok[j].match;
        else if (bl_is_ident(s, j) && bl_is(s, j, name))
            return idx;
    }
    return -1;
}

/* A place where a receive buffer is passed on without being read: a call of
 * func (in source src) with the buffer as argument arg. */
typedef struct holder {
    int src;
    const bl_func *func;
    int arg;
} holder;

typedef struct comm_ctx {
    const bl_source *src;
    int n_src;
    holder *holders;
    size_t n_holders, cap_holders;
    int read_src, read_line;   /* where the first read was found */
    int origin_src, origin_lp; /* the collective whose output is followed: its '(' */
} comm_ctx;

static void holder_add(comm_ctx *c, int src, const bl_func *f, int arg)
{
    for (size_t k = 0; k < c->n_holders; k++)
        if (c->holders[k].func == f && c->holders[k].arg == arg)
            return;
    if (CUCO_GROW(c->holders, c->cap_holders, c->n_holders + 1, 8) != 0)
        return;
    c->holders[c->n_holders++] = (holder){src, f, arg};
}

/* Is token j inside the receive argument of a collective (a write)? */
static int in_recv_arg(const bl_source *s, int lp, int argi)
{
    if (lp < 1)
        return 0;
    const recv_call *rc = find_recv_call(s, lp - 1);
    return rc && argi == rc->recv_arg;
}

static char *buffer_key(const bl_source *s, int a, int b, int *member);

/* In-place collective: the send argument of the call names the same
 * buffer as its receive argument (that send reads the data before it is
 * communicated, not what was received). */
static int same_as_recv(const bl_source *s, int lp, const recv_call *rc, const char *key)
{
    int a, b, m = 0;
    if (rc->recv_arg < 0 || !arg_range(s, lp, rc->recv_arg, &a, &b))
        return 0;
    char *k = buffer_key(s, a, b, &m);
    int same = k && !strcmp(k, key);
    free(k);
    return same;
}

/* Does the occurrence of the buffer name key at token j read it? */
static int occurrence_reads(comm_ctx *c, int si, int j, const char *key)
{
    const bl_source *s = &c->src[si];
    /* The innermost unclosed '(' around j, and which argument j is in. */
    int lp = -1, argi = 0, commas = 0;
    for (int k = j - 1; k >= 0; k--) {
        if ((bl_is(s, k, ")") || bl_is(s, k, "]") || bl_is(s, k, "}")) && s->tok[k].match >= 0 &&
            s->tok[k].match < k) {
            k = s->tok[k].match;
            continue;
        }
        if (bl_is(s, k, ",")) {
            commas++;
            continue;
        }
        if (bl_is(s, k, "{") || bl_is(s, k, ";"))
            break;
        if (bl_is(s, k, "(") && s->tok[k].match > j) {
            lp = k;
            argi = commas;
            break;
        }
        if (bl_is(s, k, "[") && s->tok[k].match > j)
            return 1; /* an index expression reads it */
    }
    if (lp < 0) {
        /* A statement of its own: an assignment to it or a declaration writes. */
        if (bl_is(s, j + 1, "="))
            return 0;
        if ((bl_is(s, j + 1, ";") || bl_is(s, j + 1, ",")) &&
            (bl_is(s, j - 1, "*") || bl_is_ident(s, j - 1)))
            return 0;
        return 1;
    }
    if (lp == 0 || !bl_is_ident(s, lp - 1))
        return 1; /* a kernel launch (>>>), a condition, a grouping */
    if (in_recv_arg(s, lp, argi))
        return 0;
    const recv_call *rc = find_recv_call(s, lp - 1);
    if (rc && argi == rc->send_arg && si == c->origin_src && lp == c->origin_lp &&
        same_as_recv(s, lp, rc, key))
        return 0; /* the in-place call's own send: the data before it communicates */
    char *callee = bl_text(s, lp - 1);
    int reads = 1;
    if (is_neutral_call(callee)) {
        reads = 0;
    } else if (!strncmp(callee, "cudaMemcpy", 10) || !strcmp(callee, "memcpy")) {
        reads = argi != 0; /* the destination is written */
    } else {
        for (size_t k = 0; k < c->n_holders; k++)
            if (!strcmp(c->holders[k].func->name, callee) && c->holders[k].arg == argi)
                reads = 0;
    }
    free(callee);
    return reads;
}

/* Looks for a read of the buffer named key in [a, b) of source si. */
static int scan_reads(comm_ctx *c, int si, int a, int b, const char *key, int member)
{
    const bl_source *s = &c->src[si];
    for (int j = a; j < b; j++) {
        if (!bl_is_ident(s, j) || !bl_is(s, j, key) || bl_is(s, j + 1, "("))
            continue; /* another name, or a function of the same name */
        int is_member = bl_is(s, j - 1, ".") || bl_is(s, j - 1, "->");
        if (is_member != member)
            continue;
        if (occurrence_reads(c, si, j, key)) {
            c->read_src = si;
            c->read_line = s->tok[j].line;
            return 1;
        }
    }
    return 0;
}

/* Is the buffer key, named in function f of source si, read anywhere it can
 * be seen? Follows a parameter into the callers. */
static int buffer_read(comm_ctx *c, int si, const bl_func *f, const char *key, int member,
                       int depth)
{
    if (member || !f) {
        /* A member (or a name outside any function) may be read anywhere. */
        for (int k = 0; k < c->n_src; k++)
            for (int g = 0; g < c->src[k].n_funcs; g++)
                if (scan_reads(c, k, c->src[k].funcs[g].open, c->src[k].funcs[g].close, key,
                               member))
                    return 1;
        return 0;
    }
    const bl_source *s = &c->src[si];
    if (scan_reads(c, si, f->open, f->close, key, 0))
        return 1;
    int pidx = param_of(s, f, key);
    if (pidx < 0) {
        /* A local, or a global: other functions may read a global. */
        for (int k = 0; k < c->n_src; k++)
            for (int g = 0; g < c->src[k].n_funcs; g++) {
                const bl_func *h = &c->src[k].funcs[g];
                if (h != f && scan_reads(c, k, h->open, h->close, key, 0))
                    return 1;
            }
        return 0;
    }
    if (depth >= COMM_MAX_DEPTH)
        return 1; /* too deep to follow: assume it is read */
    holder_add(c, si, f, pidx);
    for (int k = 0; k < c->n_src; k++) {
        const bl_source *cs = &c->src[k];
        for (int j = 0; j + 1 < cs->n; j++) {
            if (!bl_is_ident(cs, j) || !bl_is(cs, j, f->name) || !bl_is(cs, j + 1, "(") ||
                (k == si && j + 1 == f->params_lp))
                continue;
            const bl_func *g = bl_func_at(cs, j);
            int a, b, m = 0;
            if (!arg_range(cs, j + 1, pidx, &a, &b))
                continue;
            char *ck = buffer_key(cs, a, b, &m);
            if (!ck)
                return 1; /* passed as an expression we cannot follow */
            int r = buffer_read(c, k, g, ck, m, depth + 1);
            free(ck);
            if (r)
                return 1;
        }
    }
    return 0;
}

int bl_audit_comm(const bl_source *src, int n_src, bl_comm_use **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    size_t cap = 0;
    comm_ctx c = {.src = src, .n_src = n_src};
    for (int si = 0; si < n_src; si++) {
        const bl_source *s = &src[si];
        for (int i = 0; i + 1 < s->n; i++) {
            const recv_call *rc = find_recv_call(s, i);
            if (!rc || rc->recv_arg < 0)
                continue;
            const bl_func *f = bl_func_at(s, i);
            if (!f)
                continue; /* a declaration or a macro, not a call */
            int a, b, member = 0;
            if (!arg_range(s, i + 1, rc->recv_arg, &a, &b))
                continue;
            if (CUCO_GROW(*out, cap, *n_out + 1, 4) != 0)
                break;
            bl_comm_use *u = &(*out)[(*n_out)++];
            memset(u, 0, sizeof *u);
            u->src = si;
            u->line = s->tok[i].line;
            u->call = bl_text(s, i);
            u->buffer = cuco_strndup(s->text + s->tok[a].off,
                                     s->tok[b - 1].off + s->tok[b - 1].len - s->tok[a].off);
            char *key = buffer_key(s, a, b, &member);
            c.n_holders = 0;
            c.origin_src = si;
            c.origin_lp = i + 1;
            c.read_src = -1;
            c.read_line = 0;
            if (!key) {
                u->read = 1; /* cannot be followed: no finding */
                u->read_src = -1;
                continue;
            }
            u->read = buffer_read(&c, si, f, key, member, 0);
            u->read_src = u->read ? c.read_src : -1;
            u->read_line = u->read ? c.read_line : 0;
            free(key);
        }
    }
    free(c.holders);
    return 0;
}

void bl_comm_uses_free(bl_comm_use *u, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        free(u[k].call);
        free(u[k].buffer);
    }
    free(u);
}
