/* transform.h: the fast path. Rewrites a host-driven CUDA + NCCL program into
 * a device-initiated one built on device/ (rule route), checks the result
 * statically, and writes a workspace's gen_0/ (program, diff, report,
 * database root).
 *
 * Rule route: every ncclAllGather / ncclReduceScatter / ncclAllReduce /
 * ncclSend / ncclRecv / ncclGroupStart / ncclGroupEnd call is rewritten in
 * place into the cuco_tx glue (src/transform/cuco_tx_runtime.cuh, inserted
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

#include <stddef.h>
#include "cuco/err.h"
#include "cuco/workload.h"

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
void cuco_tx_result_free(cuco_tx_result *r);

/* The static device-initiated check of a transformed program (any route): no
 * host collective or point-to-point call left, no cudaMemcpyPeer nor
 * device-to-device cudaMemcpy of a communicated buffer standing in for
 * communication, and a device communicator created (ncclDevCommCreate or
 * device/'s symm_create reachable from the program). Problems are appended to
 * notes as kind "error" with their line; *passed is 1 when there is none.
 * Returns negative only on cuco's own failures. */
int cuco_transform_check(const char *file_name, const char *text, int *passed,
                         cuco_tx_notes *notes, cuco_err *e);

/* The cuco_tx glue inserted into transformed programs (static text). */
const char *cuco_transform_runtime(void);

typedef struct cuco_transform_opts {
    const char *workspace; /* NULL: ./cuco-out/<workload> */
    int no_verify;         /* 1: do not build, run or time anything */
    const char *work_dir;  /* build folders for the evaluations; NULL: workspace/eval */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
} cuco_transform_opts;

typedef enum cuco_transform_outcome {
    CUCO_TX_VERIFIED = 0,      /* built, ran, verified, timed; registered */
    CUCO_TX_REFUSED = 1,       /* rules refused, static check failed, or it did not build/verify */
    CUCO_TX_UNVERIFIED = 3,    /* built, not verified: no GPU on this machine (not registered) */
    CUCO_TX_NOT_BUILT = 4,     /* --no-verify: static check passed, nothing built; registered pending */
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

#endif
