/* scan_int.h: what schedule_scan.c (a block's statements with their heads,
 * kinds and streams, the enclosing function's aliases, and the placement of
 * the issue and wait points) shares with split_scan.c (the splits, schedule
 * (b) and producer_split, read on the same scan) and sched_plan.c (the plan
 * of one call, which uses both). Internal to src/transform. */
#ifndef CUCO_TRANSFORM_SCAN_INT_H
#define CUCO_TRANSFORM_SCAN_INT_H

#include "cuco/transform.h"
#include "kernel_launch.h"
#include "sview.h"

#include <stddef.h>

/* One statement of the block: a graph node. */
typedef struct stmt {
    size_t a, b;
    cuco_sched_kind kind;
    char *stream;                         /* owned: the stream of its first launch */
    cuco_strlist streams;                 /* the streams of all its launches (text) */
    cuco_strlist heads;                   /* every head it names */
    cuco_strlist macro_heads;             /* those its macros' texts name (among heads) */
    int macro_opaque;                     /* a macro of it pastes tokens or calls what its
                                             text does not show */
    cuco_sched_kind kind_but_macro_exits; /* its kind were the exits only a macro's text
                                             has (an error check's return) not counted */
    cuco_sched_kind kind_but_loop_exits;  /* its kind were its `break` and `continue` not
                                             counted (a loop's, inside the function) */
    cuco_sched_kind kind_but_data_calls;  /* its kind were its NCCL calls that move data
                                             between the buffers it names (scan_data_calls),
                                             a `return` that starts it and the exits only a
                                             macro's text has not counted */
    int data_calls;                       /* those NCCL calls */
    int calls;                            /* calls of functions not in the lists above */
    int method_calls;                     /* obj.f(...), p->f(...) */
} stmt;

/* The enclosing function: its parameters, body, aliases and locals. */
typedef struct fn_scope {
    size_t params, body, body_end; /* '(' of the parameters, '{' and '}' of the body */
    cuco_strlist alias_a, alias_b; /* may name the same buffer (both ways) */
    cuco_strlist holds_a, holds_b; /* object holds_a[i] holds a copy of holds_b[i]: touching
                                      it touches that, not the other way round */
    cuco_strlist stores;           /* names stored through (pp->in = z): scan_alias.c */
    cuco_strlist locals, pointer_params;
    cuco_strlist wild; /* globals or members another function sets from its own locals:
                          any buffer */
} fn_scope;

/* The scan around one communication call. */
typedef struct scan {
    const sview *v;
    fn_scope fn;
    stmt *stmts;
    size_t n, call; /* statements of the block; the call's */
    size_t block, block_end;
    cuco_strlist send, recv;
    char *stream;
    int globals;              /* a buffer of the call may be reached by any call (not a local) */
    cuco_strlist all;         /* the call's buffers and their aliases */
    size_t gemm;              /* the split GEMM's name token (schedule (b)) */
    size_t call_tok;          /* the communication call's name token */
    const cuco_semantic *sem; /* the manifest's declarations (n_sem) */
    size_t n_sem;
    kernel_launch ks; /* the split kernel launch, when it is one (schedule (b)) */
    /* scan_members.c: the object whose members are all of the call's buffers */
    char *member_base;         /* owned; NULL: none seen yet */
    cuco_strlist members;      /* the call's members of it */
    cuco_strlist member_plain; /* the call's buffer arguments that are plain names */
    int member_whole;          /* a buffer argument is no member of member_base */
    int members_apart;         /* scan_members_apart found them apart from its other members */
    /* sched_plan.c: the statement before which the wait must go at the
     * latest (a conditional directive before or inside it); 0: none */
    size_t fence;
    int fence_line; /* the directive's line when it comes before the fence's first token */
    int escaped;    /* a local buffer of the call is handed to a call that may keep it */
} scan;

/* ---- scan_calls.c ---- */
/* The calls that synchronise, that launch work, that launch through an
 * array of argument pointers, and host calls that touch nothing but their
 * arguments (NULL-terminated). */
extern const char *const scan_sync_calls[];
extern const char *const scan_work_calls[];
extern const char *const scan_indirect_launches[];
extern const char *const scan_plain_calls[];
/* NCCL's calls that move data between the buffers their arguments name, and
 * ncclGroupStart/End around them: no part in a communicator's life. */
extern const char *const scan_data_calls[];
/* Index after the statement that starts at i, inside a block closing at end. */
size_t scan_stmt_after(const sview *v, size_t i, size_t end);

/* Whether the member named like token m is declared, in every class or
 * struct body of the file that declares it, with an arithmetic type word
 * (`struct Options { size_t n = 4, m = 8; };`) or as a struct of the file
 * whose members are such in turn (`Config cfg;`): no buffer. */
int scan_scalar_member(const sview *v, size_t m);
/* Whether every class or struct body of the file that declares the member
 * named like token m also holds pointers (a context or a workspace, not a
 * payload of values: `struct Metrics { float loss; }` may itself be a
 * buffer in device memory). */
int scan_member_of_holder(const sview *v, size_t m);
/* The same for the member named like token m of the struct or class named
 * at token type (`struct Options { int hidden; };`); 0 when not found. */
int scan_scalar_member_of(const sview *v, size_t type, size_t m);

/* Whether token t names a struct or class of the file that may hold a
 * pointer (a member that is not an arithmetic value or such a struct). */
int scan_struct_holds_pointers(const sview *v, size_t t);

/* Whether the name at i is an object-like macro whose text is one number
 * (`#define LN_COLS 64`). */
int scan_macro_number(const sview *v, size_t i);

/* ---- scan_macros.c ---- */
enum {
    SCAN_MACRO_LAUNCHES = 1u << 0, /* its text launches a kernel */
    SCAN_MACRO_EXITS = 1u << 1,    /* it may leave the block (return, break, goto, ...) */
    SCAN_MACRO_OPAQUE = 1u << 2,   /* it pastes tokens, or calls what its text does not show */
    SCAN_MACRO_SYNCS = 1u << 3     /* it synchronises (a call of scan_sync_calls) */
};
/* When token i names a macro the file defines: the names its replacement
 * reaches (through the macros it uses, its parameters left out) appended
 * to heads, and what else it does in *reach. */
int scan_macro_reach(const sview *v, size_t i, cuco_strlist *heads, unsigned *reach);
/* Whether the function-like macro named at token name (the file's or a
 * header's) uses its argument k as a value only: its replacement never
 * pastes it (##), sets it (=, +=, ++, ...) or takes its address; 1 also
 * when name is no function-like macro (a function's argument is a value). */
int scan_macro_arg_read(const sview *v, size_t name, int k);

/* ---- device_symbols.c ---- */
/* Whether the kernel launched at token name (its name) may touch memory its
 * arguments do not name: its body (or a function of the file it calls)
 * names a file-scope __device__/__constant__/__managed__ variable, or it is
 * defined elsewhere while the file has such variables or hands addresses to
 * symbols (cudaMemcpyToSymbol, cudaGetSymbolAddress). */
int scan_launch_reaches_symbols(const sview *v, size_t name);
/* Whether the __global__ kernel named at name takes a table of pointers
 * (`float **tab`, `const float *const *src`, or a pointer to a struct of
 * the file that holds pointers, `const struct slot *slots`): what it
 * reaches through the table is no argument the launch names. */
int scan_launch_takes_tables(const sview *v, size_t name);

/* ---- the scans on a view the caller holds (its memo kept across calls):
 * cuco_sched_scan and cuco_send_made_scan on an open view of their text */
int sched_scan_view(const sview *v, size_t call_off, const char *api, int site,
                    const cuco_semantic *sem, size_t n_sem, int (*editable)(void *ctx, size_t off),
                    void *ctx, cuco_sched_plan *plan, cuco_err *e);
/* The scan of the call whose name starts at call_off (api: its NCCL name)
 * into s (s->v, sem, n_sem set): its statement, block, buffers and their
 * closure, the block's statements; 1 with the plan's note when the call
 * has no statement the schedules can use. */
int sched_scan_prepare(scan *s, size_t call_off, const char *api, cuco_sched_plan *plan,
                       cuco_err *e);
/* Schedule prefetch_next for the all-gather at call_off (sched_prefetch.c):
 * fills *plan (edits, note, applies). */
int sched_prefetch_view(const sview *v, size_t call_off, const char *api, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *plan,
                        cuco_err *e);
/* prefetch_next's reads in place (sched_prefetch_reads.c): the edits that
 * write each use of the call's receive buffer after it in the loop's body
 * cuco_tx::prefetched(site, buf), and cuco_tx::prefetch_settle after the
 * loop, into p; *why (owned) says why not, and then no edit is made. */
int sched_prefetch_reads(const scan *s, int site, cuco_sched_plan *p, char **why);
int send_made_scan_view(const sview *v, size_t call_off, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx,
                        cuco_send_made_plan *plan, cuco_err *e);

/* ---- sched_loop.c: the loop around a call ---- */
/* The `for` around a call: its header and the variable of an iteration. */
typedef struct loop_shape {
    size_t kw, open, close; /* 'for' and its header's parentheses */
    size_t var;             /* the counter (classic) or the range variable */
    int range;              /* 1: a range-for over [rng_a, rng_b) */
    size_t rng_a, rng_b;
    size_t semi[2]; /* a classic header's two ';' */
} loop_shape;
/* The `for` whose braced body opens at body into *L; 0 when it is none or
 * its header is not one the schedules read (a counter only the header
 * steps, a header that calls nothing but size()). */
int sched_loop_find(const sview *v, size_t body, loop_shape *L);
/* Whether tokens [a, b) can be read again elsewhere in [from, to): every
 * name in them neither declared nor set in [from, to), and no call but
 * size(). */
int sched_readable_before(const sview *v, size_t a, size_t b, size_t from, size_t to);
/* Whether tokens [a, b) call nothing but size(), length() or empty(). */
int sched_calls_only_sizes(const sview *v, size_t a, size_t b);
/* The heads of the loop body's statement st into *out, less the container
 * named at token owner (NAME of an argument NAME[i] or NAME[i].m) when st
 * names it only as an iteration's element, through members that are
 * scalars or keep their own allocation (no element's member can be another
 * element's) other than the member named at token member (0: none: a
 * later iteration may write it on its own element), and never sets it. */
int sched_loop_heads_apart(const scan *s, const loop_shape *L, const stmt *st, size_t owner,
                           size_t member, cuco_strlist *out);

/* ---- sched_prefetch_beside.c: what prefetch_next's routes share */
/* Whether token k of tokens [a, ...) names the variable like token var
 * (not a member of that name, `x.l`); whether tokens [a, b) do. */
int sched_prefetch_names_at(const sview *v, size_t a, size_t k, size_t var);
int sched_prefetch_names(const sview *v, size_t a, size_t b, size_t var);
/* The text of tokens [a, b) with each use of the variable like token var
 * (not a member name) written repl; NULL when out of memory. */
char *sched_prefetch_subst(const sview *v, size_t a, size_t b, size_t var, const char *repl);
/* The same with each use written `(var STEP)`, its value in the next
 * iteration (step "+ 1", "- 1", "+ (stride)"). */
char *sched_prefetch_next_text(const sview *v, size_t a, size_t b, size_t var, const char *step);
/* The step of L's header as the text that follows the counter in its next
 * value into *step: "+ 1" (++i, i++), "- 1" (--i, i--), "+ (e)" or "- (e)"
 * (i += e, i -= e, sched_loop_find checked the shape); NULL when e calls
 * anything or names what [from, to) (the body) sets, or the header
 * declares the counter narrower than int. */
int sched_prefetch_step(const sview *v, const loop_shape *L, size_t from, size_t to, char **step);
/* L's condition for the next iteration (the whole condition with the
 * counter one step on: `(l + 1) < L`, `(l - 1) >= 0`) into *cond and the
 * step into *step; 1 with the note when the header is not `i = ...; COND;
 * STEP` with a COND that names the counter, calls nothing and names
 * nothing [from, to) sets, and a STEP sched_prefetch_step reads. */
int sched_prefetch_next_condition(const sview *v, const loop_shape *L, size_t from, size_t to,
                                  cuco_sched_plan *p, char **cond, char **step);
/* What keeps a statement apart from the send buffer beside the names:
 * the loop whose body the block is (L: a statement that names the send's
 * container only through other elements' members that stay apart), else
 * the object the send is a member of (root, the send root->member...: a
 * statement that names it only through other members that are scalars or
 * stay in place). */
typedef struct prefetch_apart {
    const loop_shape *L; /* NULL: none */
    const char *root;    /* NULL: none */
    size_t member;       /* the send's member token, with root */
} prefetch_apart;
/* The object the send argument [a, b) is a member of (`m->shard[l]`,
 * `net.w`: m, net; the member at a + 2), owned; NULL when it is none. */
char *sched_prefetch_send_root(const sview *v, size_t a, size_t b);
/* Whether tokens [a, b) name the object root (the send buffer's, the send
 * being root->member...) only through members other than the send's that
 * are scalars, stay in place everywhere in the file (each made by an
 * allocation of its own: no element of the send's member can be one), or
 * are never set but by allocations (scan_member_never_set); and the send's
 * member is never set but by allocations either. */
int sched_prefetch_root_apart_in(const sview *v, size_t a, size_t b, const char *root,
                                 size_t member);
/* Whether the statements of s's block other than its call (a graph after
 * the call's node, which reads and writes its send buffer only) leave the
 * send buffer alone while the next iteration's gather runs: each
 * statement's heads, less what ap keeps apart; with returns, a `return`
 * counts for its expression alone (the prefetch outlives the function). 1
 * with the note (what: the block, in words) when one may touch it, or
 * communicates other than by NCCL's calls on other buffers, synchronises
 * or is opaque; *launches: the work launched beside it. */
int sched_prefetch_keeps_send(const scan *s, const prefetch_apart *ap, int returns,
                              const char *what, cuco_sched_plan *p, size_t *launches);
/* Whether a statement can go right before loop L: its `for` starts a
 * statement of a braced block (not the body of an unbraced if or loop). */
int sched_loop_stands_alone(const sview *v, const loop_shape *L);
/* Schedule prefetch_next through the calls of the function whose body's
 * statement s's all-gather is (sched_prefetch_caller.c): 0 when it applies
 * (edits and note in p), 1 with the note when not, negative on failure. */
int sched_prefetch_caller(const scan *s, int site, int (*editable)(void *ctx, size_t off),
                          void *ctx, cuco_sched_plan *p);

/* ---- sched_place.c: where schedule (a) puts a call's start and wait */
/* Sets why the schedule does not apply: returns 1 (stop), or CUCO_ENOMEM. */
int sched_note(cuco_sched_plan *p, const char *fmt, int line);
/* The same with the note made already (owned; NULL: out of memory). */
int sched_note_take(cuco_sched_plan *p, char *note);
/* The edit that puts text (a statement) before token at: on a line of its
 * own with at's indentation when at starts its line, else in front of it. */
int sched_insert_before(const sview *v, size_t at, const char *text, cuco_sched_plan *p);
/* The wait of a call that stands at statement call_stmt of cs's block (a
 * call of the call's function, the loop around it: what, in the notes),
 * with cs's buffers and stream set: the block read and placed (*pl), its
 * wait edit added to p; 1 with the note when it cannot be placed. */
int sched_wait_after(scan *cs, size_t call_stmt, const char *what, int site,
                     int (*editable)(void *ctx, size_t off), void *ctx, cuco_sched_plan *p,
                     cuco_sched_place *pl);
/* The token the call's wait goes before: its first consumer's first, or
 * the block's '}'. */
size_t sched_wait_token(const scan *s, const cuco_sched_place *pl);
/* The line of a conditional directive between the call and where its wait
 * goes that leaves them in different branches (*cut its offset); 0: none. */
int sched_wait_cut(const scan *s, const cuco_sched_place *pl, size_t *cut);
/* 1 with the note that such a directive (line) lies in between. */
int sched_apart_note(cuco_sched_plan *p, int line);
/* The call's statement (*call_stmt), its block and function into s; 1 with
 * the plan's note when it has none it can use. */
int sched_locate(scan *s, size_t c, cuco_sched_plan *p, size_t *call_stmt);
/* The same from the statement that starts at *call_stmt (a loop's `for`):
 * the whole body of an if without else stands for it. */
int sched_locate_stmt(scan *s, cuco_sched_plan *p, size_t *call_stmt);
/* Whether an NCCL group is open at token st of the block at brace. */
int sched_in_group(const sview *v, size_t brace, size_t st);
/* Moves the wait ahead of a conditional directive that would leave it in
 * another branch than the call (s->fence, placed again); 1 with the note
 * when it cannot. */
int sched_fence(scan *s, cuco_sched_place *pl, cuco_sched_plan *p);
/* The stream the wait before consumer st names (*cs; NULL: the call's,
 * own); 0 when it cannot name one. */
int sched_wait_stream(const sview *v, const stmt *st, const char *own, const char **cs);
/* The edit of the call's stream argument (the call opens at open) through
 * cuco_tx::early_start, and the edit that puts the wait where pl says. */
int sched_start_edit(const scan *s, size_t open, int site, cuco_sched_plan *p);
int sched_wait_edit(const scan *s, const cuco_sched_place *pl, int site, const char *cs,
                    cuco_sched_plan *p);
/* Drops p's edits from the n-th on (a schedule that did not apply). */
void sched_drop_edits(cuco_sched_plan *p, size_t n);
/* Frees what a scan holds. */
void sched_scan_free(scan *s);

/* ---- sched_loop.c ---- */
/* Schedule (a) across a loop's iterations: the call ends the body of a
 * `for` whose later iterations touch only their own elements of its
 * buffers, so it starts early and its wait goes after the loop, before the
 * first consumer in the enclosing block. 0 when applied (edits and the
 * note in p), 1 with the note when not, negative on failure. */
int sched_loop(scan *s, const char *api, int site, int (*editable)(void *ctx, size_t off),
               void *ctx, cuco_sched_plan *p);

/* ---- sched_callers.c ---- */
/* The name token of the function s's call is in when it is a free function
 * (not a method, a lambda or a qualified name); 0 otherwise. */
size_t sched_free_function(const scan *s);
/* The calls of the function named at name (*sites, caller frees, *n); 1
 * with the note when the function is named in a macro's text, may be
 * called from another file, or a use of the name is no plain call of it in
 * another function. */
int sched_call_sites(const scan *s, size_t name, size_t **sites, size_t *n, cuco_sched_plan *p);
/* The caller's names for the function's names in: a parameter's argument
 * at the call opening at open (its heads), a global or a member as it is;
 * 1 when one is a local of the function (the caller has no name for it). */
int sched_map_names(const scan *s, size_t open, const cuco_strlist *in, cuco_strlist *out);
/* Schedule (a) across a return: the call ends function F of the file (its
 * wait would go to the end of F's body with nothing independent before),
 * so it starts early in F and each call of F gets the wait before its own
 * first consumer in its caller. 0 when applied (edits and the note in p),
 * 1 with the note when not, negative on failure. */
int sched_callers(scan *s, int site, int (*editable)(void *ctx, size_t off), void *ctx,
                  cuco_sched_plan *p);

/* ---- scan_heads.c ---- */
/* Words that name types, casts and constants: never a variable. */
extern const char *const scan_type_words[];
/* Whether token i is a head: a variable, not a member, call, type or keyword. */
int scan_is_head(const sview *v, size_t i);
/* The first head of the expression [a, b) and those after ?, : and , at its
 * top (all: every head) appended to out. */
int scan_expr_heads(const sview *v, size_t a, size_t b, cuco_strlist *out, int all);
/* Whether the call named at i ("std::min" qualified or not) is in list. */
int scan_call_in(const sview *v, size_t i, const char *const *list);
/* Whether token k is the name a declaration declares: a declarator
 * (sview_declarator) whose type words start a statement, a for's or a
 * catch's header, or, after '(' or ',', start with a type word (`int i`):
 * `f(rows * dout)`, `(size_t)i * b[i]` declare nothing. */
int scan_declaration_at(const sview *v, size_t k);
/* Removes from st's heads every name in drop. */
int scan_stmt_drop_heads(stmt *st, const cuco_strlist *drop);

/* ---- schedule_scan.c ---- */
int scan_stmt_classify(const sview *v, stmt *s);
void scan_stmt_free(stmt *s);

char *scan_arg_text(const sview *v, size_t open, int k, int want_last);
size_t scan_call_open(const sview *v, size_t i);
int scan_all_caps(const sview *v, size_t i);
int scan_place(scan *s, cuco_sched_place *pl);
int scan_holds_call(const sview *v, size_t a, size_t b, const char *name);
/* 1 when the scanned call is a receive (ncclRecv) */
int scan_is_recv(const scan *s);
/* the enclosing function of the block at brace (CUCO_ENOTFOUND: none) */
int scan_fn_scope_find(fn_scope *f, const sview *v, size_t brace);
/* scan_alias.c: the alias pairs of tokens [a, b) of f's function into
 * f->alias_a / alias_b, and what its objects hold into f->holds_a /
 * holds_b (f->params and body_end set). */
int scan_alias_pairs(fn_scope *f, const sview *v, size_t a, size_t b);
/* Grows set, to a fixed point, by the names f's alias pairs join to one in
 * it and: nothing more (SCAN_GROW_ALIASES), what one in it holds
 * (SCAN_GROW_FORWARD), or the objects that hold one in it
 * (SCAN_GROW_BACKWARD). */
typedef enum { SCAN_GROW_ALIASES, SCAN_GROW_FORWARD, SCAN_GROW_BACKWARD } scan_grow;
int scan_alias_grow(const fn_scope *f, cuco_strlist *set, scan_grow mode);
void scan_fn_scope_free(fn_scope *f);
/* The names that may hold the buffer `name` names in the function around
 * block brace (itself included): its aliases, and the pointer parameters
 * its callers may pass it to (into *out, the caller's to free). */
int scan_aliases_of(const sview *v, size_t brace, const char *name, cuco_strlist *out);

/* s->all: the call's buffers with their aliases, what they hold and the
 * objects that hold any of that (s->send, s->recv read) */
int scan_buffers_closure(scan *s);

/* ---- scan_escape.c ---- */
/* Whether the local `name` of s's function is handed, anywhere in it, to a
 * call that may keep it (itself, or a lambda that captures it): a function
 * the file does not define, a library call that makes a handle of it, a
 * file function that hands its parameter on. Then any call the analysis
 * cannot see into may touch it. */
int scan_local_escapes(const scan *s, const char *name);
/* The globals (and members) that pointer parameter p of fn may be: the
 * names that may hold each caller's argument in the caller (its aliases,
 * `g_grads[b] = grads[b]`) that are none of the caller's locals or
 * parameters, appended to *out; a caller's own pointer parameter is
 * followed to its callers, three calls up. *unknown is set where the trace
 * stops short (an argument of several names, deeper callers). */
int scan_param_globals(const sview *v, const fn_scope *fn, const char *p, cuco_strlist *out,
                       int *unknown);
/* scan_buffers_closure, then the globals its pointer parameters may be
 * (each an alias of its parameter, in s->all) and s->escaped (with
 * s->globals) when one of its locals escapes: what the schedules read
 * before the call's block. */
int scan_closure_and_escapes(scan *s);
/* The graph of nodes[0..n) with the aliases and holds of s's function. */
cuco_sched_graph scan_graph(const scan *s, const cuco_sched_node *nodes, size_t n);
/* s->stmts: the block's statements, classified; s->call: the call's */
int scan_read_block(scan *s, size_t call_stmt);
int scan_plan_edit(cuco_sched_plan *p, size_t off, size_t len, char *text, size_t stmt_off);

/* ---- scan_callee.c: what a call may do with its arguments ---- */
/* Whether the call at name only makes or asks for something (cudaMalloc,
 * ncclCommInitRank, MPI_Comm_rank, ...): no pointer it is given ends up
 * holding another. */
int scan_making_call(const sview *v, size_t name);
/* Whether a library call named at name can make one pointer hold another:
 * of the CUDA, NCCL, cuBLAS and MPI APIs only the copies can; any other
 * call may. */
int scan_library_keeps_pointers(const sview *v, size_t name);
/* Whether the call at name is one of the CUDA, NCCL, cuBLAS, cuSPARSE,
 * cuRAND, cuFFT or MPI APIs. */
int scan_library_call(const sview *v, size_t name);
/* Parameter t of the function of the file named like token name: *a, *b
 * its declaration's tokens; 0 when the file defines no such function. */
int scan_param_of(const sview *v, size_t name, int t, size_t *a, size_t *b);
/* Whether argument t of the call at name can be made to hold another
 * argument (by_address: given as &p). */
int scan_arg_takes_pointer(const sview *v, size_t name, int t, int by_address);
/* Whether every function of the file named like token name takes a table
 * as its parameter t (T **p, std::array<T *, N> &p, std::vector<S> &p) and
 * only reads its elements and their members; 0 when the file defines
 * none. */
int scan_param_elements_kept(const sview *v, size_t name, int t);
/* Whether every function of the file named like token name only reads the
 * members of its parameter t; 0 when the file defines none. */
int scan_param_only_read(const sview *v, size_t name, int t);
/* Whether every function of the file named like token name keeps the value
 * of its pointer parameter t where it is: never assigned, stored, returned
 * or handed on but to a launch or a library call that keeps no pointer; 0
 * when the file defines none. */
int scan_param_value_stays(const sview *v, size_t name, int t);
/* Whether token i calls a function of the file (`make_device<float>(n)`)
 * whose every definition allocates device memory into a local and returns
 * only it: each call gives a fresh allocation. */
int scan_allocator_call(const sview *v, size_t i);
/* Whether every function of the file named like token name (at file scope,
 * not a method) touches no memory: no pointer, reference or array in its
 * parameters or its return type, and a body of values only (body_pure); 0
 * when the file defines none. depth: 0 (the calls it makes are followed
 * four deep). A call of one names nothing beyond its arguments. */
int scan_pure_function(const sview *v, size_t name, int depth);

/* Whether the call at name reaches a synchronising call (an event record
 * or wait, a stream or device synchronisation, a blocking copy:
 * scan_sync_calls) through a function of the file by that name or a
 * lambda its function defines, and the file's functions they call, three
 * deep. depth: 0. */
int scan_function_syncs(const sview *v, size_t name, int depth);
/* The same for synchronisation and communication together: what the call
 * at name reaches through the file's functions and lambdas, as bits. A
 * helper that issues a collective is a communication call of its caller:
 * two device collectives of one communicator must not run at once. */
enum { SCAN_REACH_SYNC = 1u << 0, SCAN_REACH_COMM = 1u << 1 };
unsigned scan_function_reach(const sview *v, size_t name, int depth);

/* ---- scan_members.c ---- */
/* Whether the global or member named name keeps its value in place at
 * every use in the file, plain (`partial_` in a method) or through an
 * object, and is made by an allocation call: no caller can hold it. */
int scan_member_kept(const sview *v, const char *name);
/* Whether the member named like token m stays in place at each of its
 * member uses in the file (`x.m`, `p->m`: never assigned, stored or handed
 * to a call that may keep it) and is made by an allocation call there: it
 * is no other object's buffer. */
int scan_other_member_stays(const sview *v, size_t m);
/* Whether the member named like token m is made by an allocation call and
 * every other use of it anywhere in the file sets nothing: a release, a
 * truth test or comparison, or an element read as a value (in an
 * expression, or given by value to a launch, a library call or a function
 * of the file); never its whole value elsewhere. A table's elements may
 * be copied out, but none comes from another buffer. */
int scan_member_never_set(const sview *v, size_t m);
/* Whether the arguments [a1, b1) and [a2, b2) are two members of one object
 * (`m->x`, `m->h`) that each stay in place everywhere in the file and are
 * made by an allocation call: two buffers. */
int scan_members_distinct(const sview *v, size_t a1, size_t b1, size_t a2, size_t b2);
/* Records the call's buffer argument [a, b): a member of an object
 * (member_base, members), a plain name (member_plain), or neither or a
 * member of a second object (member_whole). */
int scan_member_arg(scan *s, size_t a, size_t b);
/* After scan_read_block: when the call's members stay apart from the
 * object's others, drops the object from the heads of the statements that
 * name it only through other members (s->members_apart set). */
int scan_members_apart(scan *s);
/* Whether tokens [a, b) name the object only through members other than the
 * call's (and name it at all), once scan_members_apart found them apart. */
int scan_members_apart_in(const scan *s, size_t a, size_t b);

/* ---- split_scan.c ---- */
/* Whether argument k of the call whose '(' is at open names one of the
 * call's buffers (s->all) into *hit. */
int scan_arg_names_buffer(const scan *s, size_t open, int k, int *hit);
/* The bits of the first nargs arguments of the launch whose '(' is at open
 * that name one of the call's buffers. */
int scan_launch_reads(const scan *s, size_t open, int nargs, unsigned long *bits);
/* When statement st calls a helper of the file (defined once, called once)
 * whose body is plain host code and one kernel launch: the helper's name
 * token, the launch statement in [*wa, *wb); v->n otherwise. */
size_t scan_helper_launch(const scan *s, const stmt *st, size_t *wa, size_t *wb);
int scan_try_split(scan *s, cuco_sched_place *pl, int (*editable)(void *, size_t), void *ctx,
                   cuco_sched_plan *p);
int scan_split_edits(scan *s, size_t call_open, int site, cuco_sched_plan *p);
int scan_split_fails(cuco_sched_plan *p, int rc);
int scan_try_produce(scan *s, int site, int (*editable)(void *, size_t), void *ctx,
                     cuco_sched_plan *p);
/* Drops (a)'s edits from p when (a) does not apply (a later schedule's own
 * edits then stand alone). */
void scan_drop_unapplied(cuco_sched_plan *p);

/* ---- warm_scan.c ---- */
/* warm_read on an all-gather or all-to-all placed at *pl (placed: whether
 * the placement ran) whose split did not apply. Returns 0 (p->warm says
 * whether it applies), or negative. */
int scan_try_warm(scan *s, const cuco_sched_place *pl, int placed, int site, cuco_sched_plan *p);

#endif
