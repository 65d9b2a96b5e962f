/* rules_int.h: what the files of the rule route share: rules.c (the call
 * scan and the entry points), rules_view.c (questions of syntax on the
 * token view, sview.h, and the NCCL names), rules_edit.c (the edits, the
 * refused and kept calls), rules_buffers.c (the symmetric buffers),
 * rules_comm.c (the communicators), rules_sched.c (the schedules) and
 * rules_emit.c (the output). It holds the transform's context and the
 * functions one file asks of another. */
#ifndef CUCO_TRANSFORM_RULES_INT_H
#define CUCO_TRANSFORM_RULES_INT_H

#include "cuco/transform.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/program.h"
#include "glue_knobs.h"
#include "sview.h"
#include "tx_common.h"

/* The rules read a program through sview (sview.h: tk, is, ident, close_of
 * and the rest); the byte after token i. */
static inline size_t rl_tok_end(const sview *v, size_t i)
{
    return tk(v, i)->off + tk(v, i)->len;
}

/* Arguments of the call whose "(" is at open: [first, last] token ranges. */
typedef struct args {
    size_t first[16], last[16];
    int n; /* -1: more than 16 or empty argument */
    size_t close;
} args;

typedef struct edit {
    size_t off, len;
    char *text; /* owned */
    int wrap;   /* 1: its statement lines get EVOLVE-BLOCK markers (program without blocks) */
    size_t stmt_lo, stmt_hi; /* statement bytes, for wrap */
    long seq;                /* order among edits at the same offset */
} edit;

/* The sites a schedule rewrote: how many, and the last one's index. */
typedef struct sched_sites {
    size_t n;
    size_t last;
} sched_sites;

/* One transform of one file by the rules: its tokens, the edits made so
 * far, the result being written, and what the scan has learnt. */
typedef struct ctx {
    const char *file;
    sview v;
    cuco_block *blocks;
    size_t nblocks;
    edit *edits;
    size_t nedits;
    cuco_tx_result *r;
    cuco_strlist symm_names; /* buffer names resolved to symmetric allocations */
    cuco_strlist symm_found; /* the name@function keys whose resolution found one */
    cuco_strlist symm_busy;  /* the keys being resolved (a stack) */
    size_t *alloc_sites;     /* cudaMalloc tokens made symmetric */
    size_t nalloc;
    cuco_strlist comm_names; /* communicators of the rewritten calls (helper params resolved) */
    cuco_strlist comm_texts; /* each one as the call writes it ("g.tp"), for messages */
    int *comm_lines;         /* the line of each one's first rewritten call */
    size_t *fn_of;           /* per code token: its innermost function's name token, or n */
    size_t *sched_toks;      /* rewritten communication calls, in program order */
    int *sched_group;        /* the ncclGroupStart/End group it is in (1, 2, ...), 0: none */
    size_t nsched;
    cuco_buf knobs;          /* CUCO_EARLY_<site> knob lines for the glue */
    int gemm_lt;             /* some cublasLtMatmul goes through a schedule (CUCO_TX_GEMM_LT) */
    sched_sites splits;      /* all-gathers split by consumer_split_by_source (CUCO_SPLIT_CHUNKS) */
    size_t gemm_splits;      /* of them, those whose consumer is a GEMM (not a kernel) */
    sched_sites attn_splits; /* of them, those whose consumer is a kernel declared attention */
    sched_sites recv_splits; /* receives consumed piece by piece (consume_as_received) */
    int attn_lends;          /* of those, with their queries declared (CUCO_ATTN_LEND) */
    const cuco_semantic *sem; /* the manifest's declared semantics (n_sem) */
    size_t n_sem;
    sched_sites produces; /* all-reduces fed by producer_split (CUCO_PSPLIT_PIECES) */
    size_t gemm_produces; /* of them, those whose producer is a GEMM (not a kernel) */
    int send_made;        /* some send goes as its buffer is made (CUCO_P2P_PIECES) */
    cuco_glue_use glue;   /* what the rewritten calls read of the glue (glue_knobs.h) */
    size_t n_gathers;     /* rewritten all-gathers */
    unsigned dtypes;      /* the glue's CUCO_TX_DTYPES bits the reductions' types need */
    int dtypes_unread;    /* a reduction's type is not a literal, macro or constant */
    size_t *split_gemms;  /* byte offsets of the GEMMs the consumer split rewrote */
    size_t nsplit_gemms;
    int nccl_mem;       /* some ncclMemAlloc became symmetric (symm_mem_alloc / _free glue) */
    int staged;         /* some all-reduce on managed memory is staged (staged_all_reduce glue) */
    int stage_call;     /* the call being rewritten is one of them */
    int comm_creations; /* ncclCommInitRank / InitRankConfig / Split calls in the file */
    int comm_once;      /* one of them sets up the device communicator, in a function run once */
    int setup_line;     /* the line of the first communicator setup inserted (0: none) */
    int capture_line;   /* the first stream capture into a CUDA graph (0: none) */
    char *device_comm;  /* with calls on several communicators, the one the device calls
                         * use (the others' collectives stay host NCCL); NULL: one or none */
    cuco_strlist call_comms; /* the communicators the collectives name (helper parameters
                              * resolved; an accessor's none) */
    int creation_calls;      /* calls that make communicators, in the whole file */
    size_t group_open;       /* the outermost ncclGroupStart of the group being scanned */
    int p2p_group_refused;   /* a call had to stay host NCCL in a group with point-to-point */
    int p2p_comms_refused;   /* point-to-point calls beside collectives on several communicators */
    int p2p_host; /* that group's line: every point-to-point call, and every group holding
                   * one, stays host NCCL (0: they go to the device) */
} ctx;

static inline int rl_line_of(const ctx *c, size_t i)
{
    return tk(&c->v, i)->line;
}

static inline int rl_in_block(const ctx *c, size_t off)
{
    for (size_t b = 0; b < c->nblocks; b++)
        if (off >= c->blocks[b].body_start && off < c->blocks[b].body_end)
            return 1;
    return 0;
}

#define KEPT_MARK CUCO_TX_KEPT_MARK " "

/* need_symmetric's group for a buffer the call can do without (an
 * all-to-all's send buffer, which its consumer split pulls from): nothing
 * is said when it cannot be a window. */
#define SYMM_OPTIONAL (-2)

typedef struct p2p_call {
    size_t tok;
    int is_send;
    int group; /* 0: none */
    int top;   /* index of the enclosing top-level function's first token */
    args a;
} p2p_call;

/* What scan_calls carries from call to call: the ncclGroupStart/End
 * nesting and the point-to-point calls collected for rewrite_p2p. */
typedef struct scan_state {
    int group, group_depth, next_group;
    int nccl_group; /* the open group makes communicators only: NCCL's own */
    int kept_group; /* the open group holds point-to-point under p2p_host: NCCL's own, whole */
    p2p_call *p2p;
    size_t np2p;
} scan_state;

/* Collectives the runtime builds from point-to-point: name, replacement,
 * argument count, index of the receive buffer (symmetric). */
typedef struct p2p_collective {
    const char *name, *to;
    int nargs, recv_arg;
} p2p_collective;

/* The host NCCL collectives and point-to-point calls the rules read
 * (NULL-terminated). */
extern const char *const rl_host_collectives[];
/* The calls that make a communicator (rules.c; ncclCommInitAll aside). */
extern const char *const rl_comm_makers[];
/* The collectives the runtime builds from point-to-point calls ({NULL}
 * ends the table). */
extern const p2p_collective rl_p2p_collectives[];
/* The entry of rl_p2p_collectives named name, or NULL. */
const p2p_collective *rl_p2p_collective_of(const char *name);

/* ---- rules_view.c ---------------------------------------------------------- */

void rl_call_args(const sview *v, size_t open, args *a);
char *rl_arg_text(const sview *v, const args *a, int k);
/* The last identifier of the lvalue chain an argument starts with, after
 * casts and '&': "(void **)&s.gathered" -> gathered, "p.cache + off" -> cache,
 * "&buf[i]" -> buf, "ls[i].out" -> out, "ns::alloc" -> alloc. Returns the
 * token index or n. */
size_t rl_chain_last(const sview *v, size_t first, size_t last);
/* Whether the file calls ncclGroupStart anywhere (a call that is not seen
 * as a call, through a pointer or a macro, may then run inside a group). */
int rl_has_group_calls(const sview *v);
/* Whether token i follows ".", "->" or "::" (a member's or a namespace's
 * name, not the NCCL function's). */
int rl_qualified(const sview *v, size_t i);
int rl_is_p2p_name(const char *name);
/* The line of the first point-to-point call (or call built from them) in
 * the group opened at token open; 0: none. */
int rl_group_p2p_line(const ctx *c, size_t open);
/* Whether the program calls ncclSend or ncclRecv. */
int rl_has_p2p_calls(const sview *v);
/* Keywords and specifiers that may stand before a call or a '(' without
 * making it a declaration or a definition. */
int rl_is_keyword(const sview *v, size_t i);
/* The '{' of a function body when the parameter list opened at open is a
 * definition's ("f(int a) {", "g() const noexcept {", "h(int a) : a_(a) {"),
 * else 0. */
size_t rl_function_body(const sview *v, size_t open);
/* The '(' of a call of the name at i, also with explicit template arguments
 * ("f<T>(x)", "ns::g<float, 4>(x)"); n when i is not called. */
size_t rl_call_open(const sview *v, size_t i);
/* The '(' of the parameter list of the function or lambda whose name is at
 * name_tok ("f(int a)", "auto f = [&](float *p)"), or n. */
size_t rl_def_params(const sview *v, size_t name_tok);
/* The token after the brackets starting at i ("[N][M]"), or n. */
size_t rl_after_brackets(const sview *v, size_t i);
/* Whether the name at token i is declared there (declares), a name after a
 * ',' only in a declaration list ("float *a = x, *b;"), not in the
 * arguments of a call or the elements of an initializer ("f(a, b)",
 * "{a, b}"): the statement it is in must start with a type. */
int rl_declares_variable(const sview *v, size_t i);
/* Whether the name at token i, followed by '=', is dereferenced there
 * ("*p = v", "*s->p = v", "*(s.p) = v"): a store into the buffer, not a new
 * value of the pointer. */
int rl_stores_through(const sview *v, size_t i);
/* The name token of the innermost function definition (or named lambda)
 * whose body holds token i, or n (file scope). */
size_t rl_enclosing_function(const sview *v, size_t i);
/* Whether the name at token i is declared there: "T x;", "T *x = ...",
 * "std::vector<T> a, x;", "T x(n)", "T x{...}". */
int rl_declares(const sview *v, size_t i);
/* The first token declaring the name s[0..len), or n. */
size_t rl_declaration_of(const sview *v, const char *s, size_t len);
/* Whether token i names a function it calls (a name, then "(", not after
 * ".", "->" or "::"). */
int rl_called_name(const sview *v, size_t i);
/* The ncclGroupEnd call closing the ncclGroupStart call at token open (groups
 * nest), or n. */
size_t rl_group_end(const sview *v, size_t open);
/* Whether s is one of the NULL-terminated words l. */
int rl_str_in(const char *const *l, const char *s);
/* The last token at file scope at or before token i: the '{' opening the
 * top-level function that holds i (namespace and extern "C" braces do not
 * count), or i itself at file scope. */
size_t rl_top_start(const sview *v, size_t i);
/* Whether token i is in the body (or the single statement) of a for, while
 * or do loop. */
int rl_in_loop(const sview *v, size_t i);
/* Whether token i is in the condition (the header) of an if, while, for or
 * switch. */
int rl_in_control_header(const sview *v, size_t i);
/* Whether the statement holding token i is the unbraced body of a control
 * statement ("for (...) stmt;", "else stmt;"); *lo becomes its first byte. */
int rl_control_body(const sview *v, size_t i, size_t *lo);
/* Token index of the token at byte off (the first at or after it). */
size_t rl_tok_at(const sview *v, size_t off);
/* Whether token i is in a lambda's body ("[&](...) { ... }", "[] { ... }"),
 * which may run any number of times. */
int rl_in_lambda(const sview *v, size_t i);
/* Whether the preprocessor line at src is a #define. */
int rl_is_define(const char *src, size_t len);
/* The byte where the line holding byte off starts. */
size_t rl_line_start(const char *s, size_t off);
/* The byte after the end of the line holding byte off (after its newline). */
size_t rl_line_after(const char *s, size_t off);

/* ---- rules_buffers.c ------------------------------------------------------- */

/* Whether the name s is in l. */
int rl_name_seen(const cuco_strlist *l, const char *s);
/* Fills c->fn_of: for every code token the name token of the innermost
 * function definition (or named lambda) holding it, n at file scope. */
int rl_scope_map(ctx *c);
/* Makes the buffer of argument k of the call symmetric, or says why not
 * (no_window, with group). */
int rl_need_symmetric(ctx *c, const args *a, int k, size_t call_tok, const char *call, int group);
/* cudaFree inside the blocks -> symm_free (plain pointers fall back to
 * cudaFree); a frozen cudaFree of a symmetric buffer is refused. */
int rl_rewrite_frees(ctx *c);

/* ---- rules_comm.c ---------------------------------------------------------- */

/* The device runtime registers every symmetric buffer with the first
 * communicator that runs a device call, so the calls of a program must all
 * use one communicator. */
int rl_check_one_comm(ctx *c);
/* Records the communicator of a rewritten call (argument k). */
int rl_note_comm(ctx *c, const args *a, int k, size_t call_tok);
/* A collective on a communicator other than c->device_comm stays host NCCL
 * (rl_keep_or_refuse, group: its NCCL group): 1 when it does, 0 when the
 * device takes it. */
int rl_other_comm_kept(ctx *c, const args *a, size_t call_tok, const char *call, int group,
                       int *rc);
/* Calls of the file on each communicator: with more than one, the device
 * calls take one (c->device_comm) and the other communicators' collectives
 * stay host NCCL: the one of the point-to-point calls when they use one,
 * else the one with the most calls (the first named, on a tie). */
int rl_choose_device_comm(ctx *c);
/* One process driving several GPUs (ncclCommInitAll, or ncclCommInitRank
 * per device in a loop, a group or a thread) at the call at token i. The
 * device runtime sets up one device communicator (ncclDevCommCreate and
 * window registration, both collective) per process, so the program is
 * transformed for one device per process: the device communicator is made
 * at the first device collective, and a guard after the call stops the
 * program with a message when it makes a second communicator (rather than
 * waiting forever on a collective setup that the other devices' setups,
 * issued later by the same thread, would have to join). */
int rl_several_devices(ctx *c, size_t i, const char *name, int init_all);
/* ncclCommInitRank / InitRankConfig / Split: the device communicator is
 * set up right after the call. */
int rl_scan_comm_init(ctx *c, scan_state *st, size_t i, const char *name);
/* ncclCommDestroy / ncclCommAbort: the device state is released first. */
int rl_scan_comm_destroy(ctx *c, size_t i, const char *name);

/* ---- rules_sched.c --------------------------------------------------------- */

/* Ends a schedule's parameter knob line: with one site, the parameter
 * matters only while that site's switch (PREFIX_<site>) is on, which the
 * search reads as " when PREFIX_<site>=1"; with several, any switch may
 * read it (conditions are 'and'), so it has none. */
void rl_site_switch_condition(cuco_buf *g, const sched_sites *s, const char *prefix);
/* Records the rewritten call at token tok (in NCCL group `group`, 0: none)
 * for the schedules. */
int rl_sched_candidate(ctx *c, size_t tok, int group);
/* Offers every recorded call to the schedules, in program order (text: the
 * program), or notes that a stream capture leaves them out. */
int rl_sched_all(ctx *c, const char *text, cuco_err *e);

/* ---- rules_emit.c ---------------------------------------------------------- */

/* The transformed program from text and c's edits, the glue and its knobs
 * put into an EVOLVE-BLOCK (c->r->program). */
int rl_assemble(ctx *c, const char *text);

/* ---- rules_edit.c ---------------------------------------------------------- */

/* Refuses the program with a note at line (fmt takes a and b, NULL as ""). */
int rl_refuse(ctx *c, int line, const char *fmt, const char *a, const char *b);
/* A call the device path cannot take stays host NCCL: a "kept" note gives
 * the reason (fmt, a, b as for refuse), and the caller marks the call
 * (keep_call). In a group (in_group), cuco_tx::group_start/end issue no
 * ncclGroupStart: the kept call runs where it stands, as its own NCCL
 * operation, after the group's earlier members. A group whose
 * point-to-point calls (or collectives made of them) the device defers to
 * its end is refused: a kept call would then run before them, which the
 * peers need not match. */
int rl_keep_or_refuse(ctx *c, int line, int in_group, const char *fmt, const char *a,
                      const char *b);
/* Whether a "kept" note was added since the count was `before`. */
int rl_kept_since(const ctx *c, size_t before);
/* KEPT_MARK before the kept call at byte at of token tok; wrap 0: no
 * EVOLVE-BLOCK markers around its statement (a macro's body). */
int rl_keep_mark(ctx *c, size_t tok, size_t at, int wrap);
/* Marks the kept call at token tok (its name, then "("). In a group the call
 * goes through cuco_tx::kept_in_group, which orders it after the group's
 * earlier members on their streams: "ncclX(args)" becomes
 * "cuco_tx::kept_in_group(ncclX, args)". */
int rl_keep_call(ctx *c, size_t tok, int group);
/* Statement extent around token i: after the previous ';', '{' or '}' to the
 * next ';' at the same nesting. */
void rl_stmt_span(const ctx *c, size_t i, size_t *lo, size_t *hi);
/* Replaces len bytes at off with text (a copy); tok_for_stmt names the
 * statement whose lines get EVOLVE-BLOCK markers in a program without
 * blocks. */
int rl_add_edit(ctx *c, size_t tok_for_stmt, size_t off, size_t len, const char *text);
/* An edit of token i must be inside the blocks when the program has some. */
int rl_editable(ctx *c, size_t i, const char *what);

#endif
