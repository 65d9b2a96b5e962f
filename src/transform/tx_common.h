/* tx_common.h: internal helpers shared by the transform routes (gen0.c,
 * llm_route.c); not part of the public headers. */
#ifndef CUCO_TX_COMMON_H
#define CUCO_TX_COMMON_H

#include "cuco/err.h"
#include "cuco/eval.h"

#include <jansson.h>
#include <stdint.h>

/* 1 when a GPU is visible (/dev/nvidia0 or nvidia-smi on PATH). */
int cuco_tx_have_gpu(void);
/* Unified diff seed -> program (diff -u, labels a/LABEL b/LABEL); *out
 * caller frees. */
int cuco_tx_make_diff(const char *seed_path, const char *prog_path, const char *label, char **out,
                      cuco_err *e);
/* Writes GEN0/transform_report.json (rep, indented) and
 * GEN0/transform_report.md (md); with report_json, *report_json gets the
 * JSON text (caller frees). */
int cuco_tx_write_report(const char *gen0, const json_t *rep, const char *md, char **report_json,
                         cuco_err *e);
/* {status, level, hash[, time_ms][, excerpt]} of an eval result (new ref). */
json_t *cuco_tx_eval_json(const cuco_eval_result *r);

/* Wall-clock seconds (the database's timestamps). */
double cuco_tx_now_s(void);

struct cuco_db;
/* The fast path's program as the root of a search: generation 0 of run
 * run_id, its hash and knobs taken from the text, score = seed_ms / time_ms
 * (-1 when either is unknown, i.e. <= 0). Strings are not kept. */
typedef struct cuco_tx_root {
    int64_t run_id;
    const char *program, *mutator, *patch_type, *description, *status, *metrics_json;
    double seed_ms, time_ms;
} cuco_tx_root;
int cuco_tx_insert_root(struct cuco_db *db, const cuco_tx_root *root, int64_t *prog_id,
                        cuco_err *e);

#endif
