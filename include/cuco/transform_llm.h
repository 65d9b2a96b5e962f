/* transform_llm.h: the LLM route of the fast path (`cuco transform --model`).
 *
 * Used when the rule route refuses a program (or always with --route llm).
 * A model rewrites the seed in two stages, one SEARCH/REPLACE edit per step:
 *   A  infrastructure: symmetric memory, the window, the device communicator
 *      (the host collectives still run, so the program must build and, with
 *      a GPU, still verify);
 *   B  the host collectives replaced by device-initiated communication, on
 *      cuco's device library (device/) where it fits.
 * Each edit is applied by the patch engine, checked (frozen text when the
 * seed has EVOLVE-BLOCKs; in stage B the static device-initiated check of
 * cuco_transform_check()), built (cascade level 1) and, when a GPU is here,
 * run and verified (level 2). What went wrong goes into the next prompt;
 * each stage has a cap on attempts. Then a judge (the model, on the seed and
 * the result) and the static check must both pass.
 *
 * The prompts carry the workload, the analysis summary (cuco analyze), the
 * rules' refusal notes, the NCCL device API and strategy notes
 * (docs/context/), cuco's device library notes (docs/device.md of the source
 * tree, found through $CUCO_REPO) and the hardware.
 *
 * Output as the rule route's: WORKSPACE/gen_0/ with the program, program.diff,
 * transform_report.md/.json (route "llm": stages, steps, judge verdict, every
 * LLM call with tokens and cost), plus gen_0/llm/ with each prompt and answer.
 * A verified program (GPU present) is benchmarked against the seed and
 * registered as the root of a new run in WORKSPACE/runs.db, its LLM calls in
 * that run's llm_calls. Without a GPU the outcome is CUCO_TX_UNVERIFIED
 * ("built, not verified: no GPU") and nothing is registered.
 */
#ifndef CUCO_TRANSFORM_LLM_H
#define CUCO_TRANSFORM_LLM_H

#include "cuco/err.h"
#include "cuco/transform.h"
#include "cuco/workload.h"

typedef struct cuco_transform_llm_opts {
    const char *workspace;     /* NULL: ./cuco-out/<workload> */
    const char *work_dir;      /* build folders; NULL: workspace/eval */
    const char *const *models; /* model specs, NULL-terminated, at least one */
    const char *prices;        /* "model=in,out[,cached];..." or NULL ($CUCO_LLM_PRICES) */
    double budget_usd;         /* <= 0: no limit */
    const char *base_url;      /* overrides the models' API base URL, or NULL */
    int max_tokens;            /* per call; 0: 8192 */
    int max_attempts;          /* edits per stage; 0: 4 */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
} cuco_transform_llm_opts;

/* Runs the LLM route for w. Returns 0 when it ran (outcome: VERIFIED,
 * UNVERIFIED, or REFUSED when a stage ran out of attempts, the judge or the
 * static check failed, or the LLM calls could not be made: the report says
 * which), negative when cuco itself failed (a missing key is CUCO_EINVAL
 * before any call). *report_json (caller frees, may be NULL) receives the
 * JSON report. */
int cuco_transform_llm(const cuco_workload *w, const cuco_transform_llm_opts *o,
                       cuco_transform_outcome *outcome, char **report_json, cuco_err *e);

/* Reads a judge's verdict: 1 pass, 0 fail (first word PASS or FAIL, any case,
 * markdown emphasis ignored); CUCO_EINVAL when it is neither. */
int cuco_transform_llm_verdict(const char *answer, int *pass, cuco_err *e);

#endif
