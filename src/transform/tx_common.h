/* tx_common.h: internal helpers shared by the transform routes (gen0.c,
 * llm_route.c); not part of the public headers. */
#ifndef CUCO_TX_COMMON_H
#define CUCO_TX_COMMON_H

#include "cuco/err.h"
#include "cuco/eval.h"

#include <jansson.h>
#include <stdint.h>

/* The comment the rules put right before a call they leave host NCCL on
 * purpose ("kept" note); the static check lets such a call stay. */
#define CUCO_TX_KEPT_MARK "/* cuco:kept */"

/* Whether ch may be part of an identifier (letter, digit, '_'). */
static inline int cuco_tx_ident_char(char ch)
{
    return ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
}

/* The end of the string or character literal, or comment, that starts at
 * q (after from, before end); q itself when none starts there (a `'` after
 * a name's character is a digit separator, `1'024`; a raw string ends at
 * its delimiter; a `//` comment at end). */
const char *cuco_tx_literal_end(const char *from, const char *q, const char *end);

/* The next name in [q, end) past the literals and comments there (in text
 * that starts at from): its start, *len its bytes; NULL when none is left.
 * A run of name characters that starts with a digit is a number. */
const char *cuco_tx_next_name(const char *from, const char *q, const char *end, size_t *len);

/* The name a #define defines, in the text after its directive word
 * [after, end): its start, *len its bytes (0 when it names none). */
const char *cuco_tx_define_name(const char *after, const char *end, size_t *len);

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

struct cuco_tx_notes;
/* After a refusal or a failed check nothing was rewritten: the notes of edits the rules had
 * planned (rewrite, symmetric, schedule, setup, teardown) become kind
 * "not applied", so that a report lists only rewrites that happened. */
int cuco_tx_notes_unapply(struct cuco_tx_notes *notes);

/* Line map of a program made from seed by insertions and in-line edits:
 * (*map)[p] for the program's line p (1-based, p <= *nlines) is the seed's
 * line it comes from, or 0 for a line the transform inserted. Lines are
 * matched by a longest common subsequence; changed lines between two matched
 * ones map to the seed's lines between them in order. *map caller frees. */
int cuco_tx_line_map(const char *seed, const char *program, int **map, int *nlines, cuco_err *e);

/* cuco_transform_check with the seed beside the program: a
 * device-to-device copy the seed itself makes is the program's own work
 * (seed NULL: no such exemption). */
int cuco_tx_check_seed(const char *file_name, const char *seed, const char *text, int *passed,
                       struct cuco_tx_notes *notes, cuco_err *e);

/* A seed that prints no verification line gets one: the calls of *program
 * that have a host NCCL twin (all_reduce, all_gather, reduce_scatter,
 * broadcast, bcast) go through cuco_tx::checked_*, which compare the first
 * CUCO_TX_SELF_CHECK of them with host NCCL on the same inputs and print
 * "Verification: PASS|FAIL" at exit. *added: calls rerouted (0: *program
 * unchanged, e.g. a point-to-point call that has no such twin). */
int cuco_tx_self_check(char **program, int *added, cuco_err *e);

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
