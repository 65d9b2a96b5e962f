/* transform.h: the fast path. Rewrites a host-driven CUDA + NCCL program into
 * a device-initiated one built on device/ (rule route), checks the result
 * statically, and writes a workspace's gen_0/ (program, diff, report,
 * database root).
 *
 * Rule route: every ncclAllGather / ncclReduceScatter / ncclAllReduce /
 * ncclSend / ncclRecv / ncclGroupStart / ncclGroupEnd call is rewritten in
 * place into the cuco_tx glue (src/transform/cuco_tx_*.cuh, joined and inserted
 * into the program inside an EVOLVE-BLOCK with the knobs), which launches
 * device/'s kernels on the same stream with the same buffers and counts; the
 * allocations that feed a collective become symmetric (cuco_tx::symm_malloc),
 * cudaFree inside the blocks becomes cuco_tx::symm_free, the device
 * communicator is set up after an ncclCommInitRank and torn down before an
 * ncclCommDestroy found in the blocks (else at the first device collective and
 * the last symmetric free). A program with EVOLVE-BLOCKs is edited only inside
 * them; one without gets blocks around every edit. docs/transform.md has the
 * rules and what is refused.
 */
#ifndef CUCO_TRANSFORM_H
#define CUCO_TRANSFORM_H

#include "cuco/err.h"
#include "cuco/semantics.h"
#include "cuco/workload.h"
#include <stddef.h>

/* One line of a report: where (1-based line of the input; 0: none), a kind
 * ("rewrite", "symmetric", "setup", "teardown", "refused", "note", "error"),
 * and what. */
typedef struct cuco_tx_note {
    int line;
    char *kind; /* owned */
    char *text; /* owned */
} cuco_tx_note;

typedef struct cuco_tx_notes {
    cuco_tx_note *items; /* owned */
    size_t n;
} cuco_tx_notes;

int cuco_tx_notes_add(cuco_tx_notes *l, int line, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cuco_tx_notes_free(cuco_tx_notes *l);
/* Number of notes of the kind. */
size_t cuco_tx_notes_count(const cuco_tx_notes *l, const char *kind);

typedef struct cuco_tx_result {
    char *program;       /* the transformed text (owned), NULL when refused */
    cuco_tx_notes notes; /* what was rewritten where, and what was refused */
    int refused;         /* 1: at least one construct the rules cannot rewrite */
} cuco_tx_result;

/* Applies the rules to text (file_name only for messages). Returns 0 when the
 * rules ran, whether or not they refused (see r->refused and the "refused"
 * notes); negative only for cuco's own failures (memory, bad EVOLVE-BLOCK
 * markers: CUCO_EINVAL with the line). Free r with cuco_tx_result_free(). */
int cuco_transform_rules(const char *file_name, const char *text, cuco_tx_result *r, cuco_err *e);
/* The same, with the manifest's declared semantics sem[0..n_sem) (a kernel
 * declared rows_independent may take schedule (b)'s consumer split). */
int cuco_transform_rules_declared(const char *file_name, const char *text, const cuco_semantic *sem,
                                  size_t n_sem, cuco_tx_result *r, cuco_err *e);
/* What the rules read: the evolve file's text (file_name only for
 * messages), the manifest's declared semantics sem[0..n_sem), and the
 * #define lines of the program's own headers (header_macros, NULL: none),
 * which the schedule scans read as if the file defined them (a header
 * macro that launches a kernel on a buffer reads that buffer). */
typedef struct cuco_tx_input {
    const char *file_name, *text;
    const cuco_semantic *sem;
    size_t n_sem;
    const char *header_macros;
} cuco_tx_input;
int cuco_transform_rules_in(const cuco_tx_input *in, cuco_tx_result *r, cuco_err *e);
void cuco_tx_result_free(cuco_tx_result *r);

/* The static device-initiated check of a transformed program (any route): no
 * host collective or point-to-point call left, no cudaMemcpyPeer nor
 * device-to-device cudaMemcpy of a communicated buffer standing in for
 * communication, and a device communicator created (ncclDevCommCreate or
 * device/'s symm_create reachable from the program). Problems are appended to
 * notes as kind "error" with their line; *passed is 1 when there is none.
 * Returns negative only on cuco's own failures. */
int cuco_transform_check(const char *file_name, const char *text, int *passed, cuco_tx_notes *notes,
                         cuco_err *e);

/* 1 when name, called as cuco_tx::name(...) in a transformed program, is
 * one of the glue's communication calls (all_gather, ..., send, recv, also
 * in their checked_ and staged_ forms), each returning ncclResult_t. */
int cuco_tx_glue_comm_call(const char *name);

/* The cuco_tx glue inserted into transformed programs (static text). */
const char *cuco_transform_runtime(void);

/* The glue as a program gets it: without its cuBLAS part (the
 * '#if defined(CUCO_TX_GEMM_SPLIT)' section) unless with_gemm (a GEMM takes
 * a split schedule: CUCO_TX_GEMM_SPLIT is defined before it), and without
 * its cuBLASLt parts (the '#if defined(CUCO_TX_GEMM_LT)' sections) unless
 * with_lt (a cublasLtMatmul does). A part left out would be compiled out,
 * but its #include would reach a program that may not include that header,
 * and a block may not #include what the frozen code does not. NULL when out
 * of memory or not embedded; caller frees. */
char *cuco_transform_runtime_for(int with_gemm, int with_lt);

typedef struct cuco_transform_opts {
    const char *workspace; /* NULL: ./cuco-out/<workload> */
    int no_verify;         /* 1: do not build, run or time anything */
    const char *work_dir;  /* build folders for the evaluations; NULL: workspace/eval */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
} cuco_transform_opts;

typedef enum cuco_transform_outcome {
    CUCO_TX_VERIFIED = 0,   /* built, ran, verified, timed; registered */
    CUCO_TX_REFUSED = 1,    /* rules refused, static check failed, or it did not build/verify */
    CUCO_TX_UNVERIFIED = 3, /* built, not verified: no GPU on this machine (not registered) */
    CUCO_TX_NOT_BUILT = 4, /* --no-verify: static check passed, nothing built; registered pending */
} cuco_transform_outcome;

/* Runs the fast path for w and writes WORKSPACE/gen_0/: PROGRAM (the evolve
 * file's name; not written when refused), program.diff, transform_report.md,
 * transform_report.json; registers the program as the root of a new run in
 * WORKSPACE/runs.db when verified (status ok) or with no_verify (status
 * pending). *report_json (caller frees, may be NULL) receives the JSON report.
 * Returns 0 when the fast path ran (outcome in *outcome), negative when cuco
 * itself failed. */
int cuco_transform_workload(const cuco_workload *w, const cuco_transform_opts *o,
                            cuco_transform_outcome *outcome, char **report_json, cuco_err *e);

/* ---- schedule (a): early start, late wait --------------------------------
 * The placement works on a small graph: the statements of one scope (a block,
 * one iteration of a loop body, a function body) in program order, each with
 * the buffer names it reads and writes and its stream, plus the pointer
 * aliases known in the enclosing function. It is pure: the text rewriting
 * (rules.c) builds the graph (cuco_sched_scan) and applies the result. */

typedef enum cuco_sched_kind {
    CUCO_SCHED_PLAIN,   /* host code without calls (declarations, arithmetic) */
    CUCO_SCHED_WORK,    /* a kernel launch, a cuBLAS call, an async copy or memset */
    CUCO_SCHED_COMM,    /* a communication call (NCCL, cuco_tx, MPI): the call itself too */
    CUCO_SCHED_SYNC,    /* a host synchronisation, an event record/wait, a free */
    CUCO_SCHED_EXIT,    /* return, break, continue, goto, throw, a case label */
    CUCO_SCHED_UNKNOWN, /* a call the analysis cannot see into that may reach the buffers */
} cuco_sched_kind;

typedef struct cuco_sched_node {
    cuco_sched_kind kind;
    const char *stream;       /* the stream's text; NULL: unknown or none */
    const char *const *reads; /* buffer names (any alias) */
    size_t nreads;
    const char *const *writes;
    size_t nwrites;
    int line;
} cuco_sched_node;

typedef struct cuco_sched_graph {
    const cuco_sched_node *nodes; /* program order, one scope */
    size_t n;
    const char *const *alias_a; /* alias_a[i] and alias_b[i] name the same buffer */
    const char *const *alias_b;
    size_t naliases;
    const char *const *holds_a; /* holds_a[i] is an object that holds (a copy of) */
    const char *const *holds_b; /* holds_b[i]: touching it touches what holds_b[i] */
    size_t nholds;              /* names, not the other way round */
} cuco_sched_graph;

typedef struct cuco_sched_place {
    size_t issue;       /* earliest legal start: before node issue (<= the call) */
    size_t wait;        /* the wait goes before node wait; g->n: at the end of the scope */
    size_t independent; /* work nodes between the call and the wait */
    size_t same_stream; /* of which on the call's stream (or on an unknown stream) */
    int knob_default;   /* 1 when same_stream > 0 */
} cuco_sched_place;

/* Places the start and the wait of the communication node g->nodes[call]: the
 * wait goes before the first later node that touches (reads or writes) a
 * buffer the call reads or writes, through the aliases, or that is a
 * communication call, a synchronisation, an exit from the scope or a call the
 * analysis cannot see into; none: at the end of the scope. The start may go
 * right after the last earlier node that writes what the call reads, touches
 * what it writes, or is one of those barriers. Returns CUCO_EINVAL when call
 * is out of range or not a communication node. */
int cuco_sched_place_call(const cuco_sched_graph *g, size_t call, cuco_sched_place *out);

/* One edit of the text that the schedule asks for. */
typedef struct cuco_sched_edit {
    size_t off, len; /* bytes of the input replaced (len 0: an insertion) */
    char *text;      /* owned */
    size_t stmt_off; /* a byte of the statement the edit belongs to (for EVOLVE-BLOCK wrapping) */
} cuco_sched_edit;

/* Appends an edit (text owned by the list from here, also on failure);
 * CUCO_ENOMEM when text is NULL or memory runs out. */
int cuco_sched_edit_push(cuco_sched_edit **edits, size_t *n, size_t off, size_t len, char *text,
                         size_t stmt_off);
/* Frees n edits and the array. */
void cuco_sched_edits_free(cuco_sched_edit *edits, size_t n);

typedef struct cuco_sched_plan {
    cuco_sched_edit *edits; /* owned */
    size_t nedits;
    int applies; /* 1: the edits are there (stream argument, wait) */
    int knob_default;
    size_t independent, same_stream;
    int wait_line;    /* the consumer's line, or the end of the scope's */
    int consumer_end; /* 1: no consumer, the wait is at the end of the scope */
    char *note;       /* owned: the report line (applies or why not) */
    /* schedule (b), consumer_split_by_source (all-gathers): the first
     * consumer is a cuBLAS GEMM reading the gathered buffer; its call goes
     * through cuco_tx::<gemm>_split(site, CUCO_SPLIT_<site>, ...) and the
     * all-gather gets cuco_tx::split_site(site, CUCO_SPLIT_<site>) first.
     * consume_as_received (receives): the first consumer is a declared
     * rows_independent kernel (cuco_tx::kernel_recv_split), and the
     * receive gets cuco_tx::recv_site(site, CUCO_SPLIT_<site>) first. */
    int split;             /* 1: the split's edits are among edits */
    int split_kernel;      /* 1: the consumer is a kernel launch (cuco_tx::kernel_split) */
    int split_recv;        /* 1: the split consumes a receive piece by piece */
    int split_attention;   /* 1: that kernel is declared attention (cuco_tx::attention_split):
                            * the all-gathers of its other key arguments join the split */
    int split_lend;        /* 1: its queries are declared too (the ranks may trade them) */
    int split_line;        /* the GEMM's (or the launch's) line */
    size_t split_gemm_off; /* byte offset of the split GEMM's (or kernel's) name */
    char *split_note;      /* owned: the split's report line (applies or why not); NULL: none */
    /* producer_split (all-reduces only): the statement right before the call
     * is a cuBLAS GEMM writing its input; the GEMM goes through
     * cuco_tx::<gemm>_produce(site, CUCO_PSPLIT_<site>, ...) and the
     * all-reduce gets cuco_tx::produce_site(site, CUCO_PSPLIT_<site>) first.
     * Its edits are among edits whether or not schedule (a) applies. */
    int produce;
    int produce_kernel;      /* 1: the producer is a kernel launch (cuco_tx::kernel_produce) */
    int produce_line;        /* the GEMM's (or the launch's) line */
    size_t produce_gemm_off; /* byte offset of that GEMM's (or kernel's) name */
    size_t produce_edit0;    /* edits[produce_edit0..nedits) are the producer split's */
    char *produce_note;      /* owned: its report line (applies or why not); NULL: none */
    /* warm_read (all-gathers and all-to-alls): the first consumer is a
     * kernel launch the split does not take; the call gets
     * cuco_tx::warm_site(site, CUCO_WARM_<site>) first, whether or not
     * schedule (a) applies (its edits then dropped, as for producer_split). */
    int warm;
    int warm_default; /* 1: the kernel's blocks each loop over what the call wrote */
    int warm_line;    /* the consumer's line */
    char *warm_note;  /* owned: its report line (applies or why not); NULL: none */
} cuco_sched_plan;

/* Builds the scope graph of the communication call whose name starts at byte
 * call_off of text (api: its NCCL name) and places it (knob macro name in
 * the edits: CUCO_EARLY_<site>). sem[0..n_sem) are the manifest's declared
 * semantics (a kernel declared rows_independent may take the consumer
 * split). editable(ctx, off) says whether an
 * insertion at byte off is allowed (EVOLVE-BLOCKs). Fills *plan (free with
 * cuco_sched_plan_free) even when the schedule does not apply (plan->note
 * says why). Negative only on cuco's own failures. */
int cuco_sched_scan(const char *text, size_t call_off, const char *api, int site,
                    const cuco_semantic *sem, size_t n_sem, int (*editable)(void *ctx, size_t off),
                    void *ctx, cuco_sched_plan *plan, cuco_err *e);
void cuco_sched_plan_free(cuco_sched_plan *plan);
/* Whether the producer split is tried for a call of this NCCL name: an
 * all-reduce or a reduce-scatter (the reductions a producer's ranges feed). */
int cuco_sched_producer_fed(const char *api);
/* The consumer split a call of this NCCL name may take, by its report
 * name: "consumer_split_by_source" for an all-gather, "consume_as_received"
 * for a receive; NULL for any other call. */
const char *cuco_sched_consumer_split(const char *api);

/* ---- schedule send_as_produced (send_made.c) -----------------------------
 * An ncclSend whose buffer cuBLAS GEMMs make in the function that sends it
 * (or its one caller), directly or in helpers called with the buffer's
 * variable, with no other writer there: the GEMMs go through
 * cuco_tx::<gemm>_record(site, CUCO_SENDP_<site>, ...), the send gets
 * cuco_tx::made_site(site, CUCO_SENDP_<site>) as its first argument, and that
 * function's body starts with cuco_tx::made_begin(site). */
typedef struct cuco_send_made_plan {
    cuco_sched_edit *edits; /* owned */
    size_t nedits;
    int applies;
    int gemm_line; /* the first recording GEMM's line */
    char *note;    /* owned: the report line (applies, or why not) */
} cuco_send_made_plan;

/* Plans the schedule for the ncclSend whose name starts at byte call_off;
 * editable as for cuco_sched_scan. Fills *plan even when it does not apply
 * (free with cuco_send_made_plan_free). Negative only on cuco's failures. */
int cuco_send_made_scan(const char *text, size_t call_off, int site,
                        int (*editable)(void *ctx, size_t off), void *ctx,
                        cuco_send_made_plan *plan, cuco_err *e);
void cuco_send_made_plan_free(cuco_send_made_plan *plan);

/* ---- allocations made on some ranks only (rank_branch.c) ------------------
 * For each byte offset offs[k] (an allocation's name), whether it lies in a
 * branch of an 'if' whose condition reads the rank, or after one whose
 * branch leaves the function (after_exit) (the rank argument of
 * ncclCommInitRank, the out-argument of MPI_Comm_rank or ncclCommUserRank,
 * or a variable made from one): out[k].cond_line is that if's line (0:
 * none) and out[k].cond its condition, "(...)" (owned; free with
 * cuco_rank_branches_free). A hint: matched by name. */
typedef struct cuco_rank_branch {
    int cond_line;
    char *cond;
    int after_exit; /* the allocation follows the if, whose branch leaves (return, exit) */
    int call_line;  /* the if decides every call of the allocation's function: the first
                     * call's line (0: the if is in the allocation's own function) */
} cuco_rank_branch;

int cuco_rank_branches(const char *text, const size_t *offs, size_t n, cuco_rank_branch *out,
                       cuco_err *e);
void cuco_rank_branches_free(cuco_rank_branch *b, size_t n);

#endif
