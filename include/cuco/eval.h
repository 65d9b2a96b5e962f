/* eval.h: the evaluation cascade of one candidate program.
 *
 *   frozen check -> L1 compile -> L2 run + verify (verify size, short timeout)
 *                -> L3 benchmark (bench size, repeats; median, min, spread)
 *
 * The candidate's evolve file replaces the workload's in a fresh build folder
 * (the other sources are copied beside it). Runs go through mpirun with the
 * manifest's rank count (or directly). The program's stdout must hold
 * "Verification: PASS" and a "CUCO_RESULT {json}" line with time_ms.
 */
#ifndef CUCO_EVAL_H
#define CUCO_EVAL_H

#include "cuco/err.h"
#include "cuco/workload.h"
#include <stddef.h>

struct cuco_launcher;

typedef enum cuco_eval_status {
    CUCO_EVAL_OK = 0,
    CUCO_EVAL_COMPILE_ERROR,
    CUCO_EVAL_RUN_ERROR, /* crashed or exited non-zero */
    CUCO_EVAL_TIMEOUT,
    CUCO_EVAL_WRONG_ANSWER,     /* printed Verification: FAIL */
    CUCO_EVAL_FROZEN_VIOLATION, /* changed text outside the EVOLVE-BLOCKs */
    CUCO_EVAL_BAD_OUTPUT,       /* no verification line / no or malformed CUCO_RESULT */
    CUCO_EVAL_INFRA_ERROR,      /* launcher / node failure: not the program's fault */
} cuco_eval_status;

/* "ok", "compile_error", "run_error", "timeout", "wrong_answer",
 * "frozen_violation", "bad_output", "infra_error". */
const char *cuco_eval_status_name(cuco_eval_status s);
/* Inverse of the above; -1 if unknown. */
int cuco_eval_status_parse(const char *name);

typedef struct cuco_eval_opts {
    const char *work_dir;       /* candidate build folders go under it; NULL: a temp dir */
    int max_level;              /* 1, 2 or 3; 0 means 3 */
    int repeats;                /* bench repeats; 0: the manifest's */
    const char *const *env_set; /* extra "NAME=VALUE" for every run (e.g. a GPU slot) */
    int keep_build;             /* keep the build folder (default: removed on success) */
    void (*progress)(void *ctx, const char *line); /* optional progress lines */
    void *progress_ctx;
    const struct cuco_launcher *launcher; /* runs L2/L3 (cuco/launch.h); NULL: mpirun here,
                                             no slots. Not owned. */
    const char *frozen_ref;          /* text whose frozen part the candidate must keep; NULL: the
                                        seed (a search rooted at a transformed program passes it) */
    const char *build_cache;         /* folder of built binaries keyed by program and build
                                      * command; NULL: $CUCO_BUILD_CACHE, unset: none */
    int no_confine;                  /* 1: build and run unconfined (--no-confine); 0: confined
                                        (cuco/confine.h) unless CUCO_CONFINE=0 */
    const char *const *secret_names; /* extra variable names kept from the candidate (the
                                        configured API key names), or NULL */
    int quick_breakdown; /* 1: the bench run's compute-only and comm-only timings are one
                            step each (CUCO_BREAKDOWN=quick; a search's candidates). A
                            verification run always has the quick one */
} cuco_eval_opts;

typedef struct cuco_eval_result {
    int level; /* highest level passed: 0 none, 1 built, 2 verified, 3 benchmarked */
    cuco_eval_status status;
    char program_hash[17]; /* xxh3 of the candidate text */
    double time_ms;        /* median over bench repeats of the program's time_ms */
    double time_ms_min;
    double time_ms_max;
    double spread;    /* (max - min) / median */
    double *times_ms; /* each repeat's time_ms (owned) */
    int n_times;
    char *metrics_json; /* the median repeat's CUCO_RESULT object (owned) or NULL */
    char *excerpt;      /* the part of the log that explains a failure (owned) or NULL */
    double compile_s, verify_s, bench_s;
    char *build_dir; /* the candidate's build folder when kept (keep_build or a
                        failure past the frozen check), else NULL (owned) */
    char *warning;   /* e.g. "unvouched: ..." when the workload's frozen code does
                        not vouch for its runs (result.vouch off), else NULL (owned) */
} cuco_eval_result;

/* Evaluates program_text (NULL: the workload's seed). Returns 0 when the
 * cascade ran, whatever the candidate's status; negative only when cuco
 * itself could not do its job (seed unreadable, build folder cannot be made
 * or filled). A command that cannot be started (compiler or mpirun missing)
 * or a placeholder that cannot be filled gives status infra_error. On 0, free
 * r with cuco_eval_result_free(); on a negative return r holds nothing. */
int cuco_eval_program(const cuco_workload *w, const char *program_text, const cuco_eval_opts *o,
                      cuco_eval_result *r, cuco_err *e);
void cuco_eval_result_free(cuco_eval_result *r);
/* The build cache folder for a workspace: $CUCO_BUILD_CACHE when set, else
 * WORKSPACE/build-cache (created), absolute; NULL when none. Caller frees;
 * pass it as cuco_eval_opts.build_cache. */
char *cuco_eval_build_cache_dir(const char *workspace);
/* Makes cuco_eval_build_cache_dir(workspace) the default of this process's
 * evaluations that name no build_cache. Call from the main thread before
 * evaluations start (no environment variable is set: worker threads read
 * the value, never the environment written under them). */
void cuco_eval_default_build_cache(const char *workspace);
/* The result as one JSON object (caller frees). */
char *cuco_eval_result_json(const cuco_eval_result *r);
/* A digest (16 hex digits) of what, besides the program text, decides an
 * evaluation's result: the manifest file, the workload's other sources, the
 * local headers its sources include through the build command's -I folders
 * (the harness, device/), NCCL_HOME and PATH. A result cached under another
 * digest was measured with other inputs. The headers are left out when the
 * build command cannot be expanded here (e.g. no NCCL found). */
int cuco_eval_inputs_digest(const cuco_workload *w, char hex[17], cuco_err *e);
/* The frozen text around a workload's evolve file, for the block guard
 * (cuco_patch_guard_blocks): its other sources and the local headers they
 * include through the build command's -I folders (those that expand here),
 * each as "path\nsize\ncontent\n". Caller frees *text. */
int cuco_eval_frozen_context(const cuco_workload *w, char **text, cuco_err *e);

/* Output parsing, exposed for tests and other runners. */
typedef struct cuco_run_output {
    int has_verification;
    int verified;      /* 1 PASS, 0 FAIL */
    char *fail_reason; /* text after FAIL (owned) or NULL */
    char *result_json; /* the last CUCO_RESULT object (owned) or NULL */
    double time_ms;    /* from result_json; < 0 if missing */
    char *parse_error; /* why result_json is unusable (owned) or NULL */
} cuco_run_output;
void cuco_run_output_parse(const char *stdout_text, cuco_run_output *out);
void cuco_run_output_free(cuco_run_output *out);

/* The vouch protocol (a workload with result.vouch; docs/workload.md, "Trust").
 * cuco sets CUCO_NONCE to a fresh nonce for every run; the frozen code reads
 * and unsets it first thing in main and, after all candidate code has run,
 * prints on rank 0 the one line
 *     CUCO_VOUCH <nonce> <h> <verdict>
 * <h>: cuco_fnv1a64 of the JSON text it printed after "CUCO_RESULT " as 16
 * lowercase hex digits; <verdict>: PASS or FAIL, its verification's. */
enum { CUCO_NONCE_LEN = 32 };
typedef enum cuco_vouch {
    CUCO_VOUCH_OK = 0,
    CUCO_VOUCH_NONE,   /* no CUCO_VOUCH line with the nonce */
    CUCO_VOUCH_BROKEN, /* a line with the nonce, but it does not vouch for this output */
} cuco_vouch;
/* Fills nonce with CUCO_NONCE_LEN fresh random lowercase hex digits (from
 * getrandom, else /dev/urandom) and a NUL. */
int cuco_vouch_new_nonce(char nonce[CUCO_NONCE_LEN + 1], cuco_err *e);
/* FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3). */
unsigned long long cuco_fnv1a64(const char *s, size_t n);
/* Whether stdout_text holds the frozen code's vouch for its output: a
 * CUCO_VOUCH line with nonce, after the last Verification: and CUCO_RESULT
 * lines and followed by none of the three kinds, whose hash is that of the
 * last CUCO_RESULT JSON text (trimmed as cuco_run_output_parse trims it) and
 * whose verdict is the last Verification's. Otherwise *why (caller frees)
 * says what is wrong ("the frozen code did not vouch for this run: ..."). */
cuco_vouch cuco_run_output_vouch(const char *stdout_text, const char *nonce, char **why);

#endif
