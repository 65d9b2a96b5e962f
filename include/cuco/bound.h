/* bound.h: 'cuco bound': what overlapping communication with computation can
 * gain on a program, and whether its verification really checks the results.
 *
 *  - Timeline: a CUPTI injection library (tools/cupti, libcuco_timeline.so,
 *    loaded through CUDA_INJECTION64_PATH) writes every kernel, memcpy and
 *    memset of each process to $CUCO_TIMELINE_DIR/timeline.<pid>.jsonl.
 *    cuco_bound_timeline_load() turns those files into per-rank figures:
 *    busy compute and communication time (unions of intervals), the overlap
 *    bound max(compute, comm), the ceiling (serial busy time / bound), the
 *    time a rank waits for its peers in collectives, and the top kernels;
 *    and, from the program's own cudaEventElapsedTime intervals (recorded
 *    by the library), the same figures for one step.
 *  - Variants: the program with its collectives made no-ops (communication
 *    removed) or its kernel launches and cuBLAS compute calls made no-ops
 *    (computation removed), for measuring each part alone.
 *  - Audit: static (the success line must be printed under a condition that
 *    depends on a comparison of results, and what each collective receives
 *    must be read somewhere) and dynamic (the communication-removed variant
 *    must fail verification).
 *  - Report: bound.json in the workspace, a text summary and one paragraph
 *    of advice.
 */
#ifndef CUCO_BOUND_H
#define CUCO_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cuco/err.h"
#include "cuco/workload.h"

/* ---- timeline ---- */

typedef struct cuco_interval {
    uint64_t start, end; /* ns, end >= start */
} cuco_interval;

/* Total length covered by the union of the intervals (ns). Sorts iv in
 * place by start. */
uint64_t cuco_interval_union(cuco_interval *iv, size_t n);
/* Length covered by both unions: |U(a) ∩ U(b)| (ns). Sorts both. */
uint64_t cuco_interval_overlap(cuco_interval *a, size_t na, cuco_interval *b, size_t nb);

/* 1 when a kernel of this name is communication: NCCL's own kernels (name
 * holds "nccl", any case) or a name in extra (NULL-terminated, may be NULL;
 * a kernel the analysis maps to a collective). */
int cuco_bound_is_comm_kernel(const char *name, const char *const *extra);

typedef struct cuco_bound_kernel {
    char *name; /* owned */
    int count;
    double total_ms;
    double share; /* of the rank's busy time */
    int comm;
} cuco_bound_kernel;

/* The program's own timed intervals (cudaEventElapsedTime calls, recorded
 * by the timeline library), by what ran inside them. */
typedef enum cuco_bound_timed_kind {
    CUCO_TIMED_FULL = 0,     /* computation and communication */
    CUCO_TIMED_COMPUTE_ONLY, /* computation only */
    CUCO_TIMED_COMM_ONLY,    /* communication only */
    CUCO_TIMED_KINDS
} cuco_bound_timed_kind;

typedef struct cuco_bound_timed {
    int n;             /* intervals of this kind */
    double compute_ms; /* medians over them: union of computation kernels */
    double comm_ms;    /* union of communication kernels and peer copies */
    double span_ms;    /* first start to last end of the GPU work inside */
    double event_ms;   /* what the program's cudaEventElapsedTime gave */
} cuco_bound_timed;

typedef struct cuco_bound_rank {
    int rank; /* MPI rank of the process, or -1 */
    long pid;
    int device; /* a process driving several GPUs gives one entry per device */
    int n_kernels, n_copies;
    double span_ms;         /* first start to last end on this device */
    double compute_ms;      /* union of computation kernels */
    double comm_ms;         /* union of communication kernels and peer copies */
    double copy_ms;         /* union of other memcpys / memsets (not in the bound) */
    double overlap_ms;      /* compute and comm at the same time (already overlapped) */
    double busy_ms;         /* union of compute and comm */
    double serial_ms;       /* compute + comm: the time with nothing overlapped */
    double bound_ms;        /* max(compute, comm): the best overlap can do */
    double ceiling;         /* serial / bound: the largest speedup overlap can give */
    double wait_ms;         /* comm time spent waiting for slower peers (see docs) */
    cuco_bound_kernel *top; /* by total time, largest first (owned) */
    size_t n_top;
    int n_timed; /* the program's timed intervals seen on this device */
    cuco_bound_timed timed[CUCO_TIMED_KINDS]; /* per step, by kind (see docs/bound.md) */
} cuco_bound_rank;

typedef struct cuco_bound_timeline {
    cuco_bound_rank *ranks; /* owned, sorted by rank then device */
    size_t n_ranks;
    int critical; /* index of the critical (slowest) rank, -1 when none */
    long dropped; /* records CUPTI dropped */
    size_t n_files;
} cuco_bound_timeline;

/* Loads every timeline.*.jsonl in dir. comm_kernels: extra names counted as
 * communication (may be NULL). top_n: kernels kept per rank. A malformed
 * line fails with file:line. Free with cuco_bound_timeline_free(). */
int cuco_bound_timeline_load(const char *dir, const char *const *comm_kernels, size_t top_n,
                             cuco_bound_timeline *tl, cuco_err *e);
void cuco_bound_timeline_free(cuco_bound_timeline *tl);

/* ---- variants ---- */

typedef enum cuco_bound_variant_kind {
    CUCO_VARIANT_NO_COMM = 0,    /* collectives and send/recv become no-ops */
    CUCO_VARIANT_NO_COMPUTE = 1, /* kernel launches and cuBLAS compute calls become no-ops */
} cuco_bound_variant_kind;

/* Builds a variant of a program text. Calls are replaced by an expression
 * of the same success value (ncclSuccess, cudaSuccess,
 * CUBLAS_STATUS_SUCCESS, or ((void)0) for a <<<>>> launch), so error-check
 * wrappers and stream order around them stay as they are. When the text
 * has EVOLVE-BLOCKs only calls inside them change (the timed step lives
 * there; setup and verification stay intact). *out: caller frees;
 * *n_removed: calls replaced (0 is not an error). */
int cuco_bound_variant(const char *text, const char *path, cuco_bound_variant_kind kind, char **out,
                       int *n_removed, cuco_err *e);
/* Same, also replacing the calls an analysis of this text found
 * (cuco_analyze_paths(): its collectives' and launches' spans, for entries
 * whose file has path's base name and whose span starts with the call's
 * name in text). Calls both find are replaced once. analysis may be NULL. */
int cuco_bound_variant_from(const char *text, const char *path, const json_t *analysis,
                            cuco_bound_variant_kind kind, char **out, int *n_removed, cuco_err *e);

/* ---- verification audit ---- */

typedef enum cuco_audit_verdict {
    CUCO_AUDIT_CHECKED = 0,   /* printed under a condition that depends on compared results */
    CUCO_AUDIT_UNCONDITIONAL, /* printed whatever happens */
    CUCO_AUDIT_CONSTANT,      /* decided by constants only */
    CUCO_AUDIT_UNRELATED,     /* conditions exist but none depends on results (e.g. rank == 0) */
} cuco_audit_verdict;

/* "checked", "unconditional", "constant", "unrelated". */
const char *cuco_audit_verdict_name(cuco_audit_verdict v);

typedef struct cuco_audit_site {
    char *file; /* owned */
    int line;
    char *text; /* the success string literal (owned) */
    cuco_audit_verdict verdict;
    char *why; /* explanation: the chain of conditions followed (owned) */
} cuco_audit_site;

/* A host NCCL call that receives data, and whether anything reads it. */
typedef struct cuco_audit_comm {
    char *file; /* owned */
    int line;
    char *call;    /* e.g. "ncclAllReduce" (owned) */
    char *buffer;  /* the receive argument as written (owned) */
    int read;      /* 0: the received data is never read, so no check can see it */
    char *read_at; /* "file:line" of the first read found, or NULL (owned) */
} cuco_audit_comm;

typedef struct cuco_audit {
    cuco_audit_site *sites; /* owned */
    size_t n_sites;
    cuco_audit_comm *comm; /* owned: every receiving NCCL call */
    size_t n_comm;
    int comm_finding; /* 1: some received data is never read */
    int finding;      /* 1: a success line is not decided by a comparison of results,
                         no success line was found, or comm_finding */
    char *summary;    /* one line (owned) */
} cuco_audit;

/* Static audit of a program: the success lines' verdicts, and whether the
 * data each receiving NCCL call writes is read anywhere (a collective whose
 * output nothing reads cannot be checked by any verification).
 * path is the main file; local #include "..."
 * files are followed in its folder and in include_dirs (NULL-terminated,
 * may be NULL). Free with cuco_audit_free(). */
int cuco_bound_audit_static(const char *path, const char *const *include_dirs, cuco_audit *a,
                            cuco_err *e);
void cuco_audit_free(cuco_audit *a);

/* ---- the whole measurement ---- */

typedef struct cuco_bound_opts {
    const char *workspace;     /* bound.json and run folders go here (created) */
    const char *injection_lib; /* libcuco_timeline.so; NULL: found beside the cuco binary
                                  or through CUCO_TIMELINE_LIB */
    int skip_variants;         /* 1: no communication/computation-removed runs */
    int static_only;           /* 1: audit only, run nothing */
    int single_run;            /* 1: run the program once, with the timeline library
                                  (its own figures then come from that run) */
    int build_only;            /* 1: build (parts of) the program and its variants into
                                  the workspace and stop; a later run reuses them */
    unsigned build_parts;      /* with build_only: bit 0 program, 1 comm_removed,
                                  2 compute_removed; 0 means all */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
    int no_confine; /* 1: builds and runs unconfined (--no-confine); 0: confined
                       (cuco/confine.h) unless CUCO_CONFINE=0 */
} cuco_bound_opts;

/* Runs the measurement on a workload (bench size) and writes
 * workspace/bound.json. *json_out: the report (caller frees). *text_out: the
 * human summary with warnings and advice (caller frees). Returns 0 when the
 * report was written, even if runs failed (their failure is in the report). */
int cuco_bound_run(const cuco_workload *w, const cuco_bound_opts *o, char **json_out,
                   char **text_out, cuco_err *e);

/* With o->build_only: builds the selected parts into workspace/bound/<part>/
 * (recorded in prebuilt.json there, keyed by the program text, the build
 * command and NCCL_HOME/PATH) so that separate processes can build in
 * parallel before the measurement runs them. *text_out: one line per part
 * (caller frees). Returns 0 when every selected part built, 1 when one
 * failed to build, negative on an error of cuco itself. */
int cuco_bound_build(const cuco_workload *w, const cuco_bound_opts *o, char **text_out,
                     cuco_err *e);

/* For commands that show speedups (transform, run, report): reads
 * workspace/bound.json when there is one. Returns 1 and sets *message (one
 * line, caller frees) when its verification audit raised a warning; 0 when
 * there is no file or no warning (*message NULL); negative on a file that
 * cannot be read or parsed. */
int cuco_bound_read_warning(const char *workspace, char **message, cuco_err *e);

/* One paragraph of advice from a report's figures (see docs/bound.md).
 * comm_share: comm / serial on the critical rank (0..1); ceiling: serial /
 * bound; top_name/top_share: the largest kernel and its share of busy time
 * (may be NULL/0). Caller frees. */
char *cuco_bound_advice(double comm_share, double ceiling, const char *top_name, double top_share,
                        int top_is_comm);

#endif
