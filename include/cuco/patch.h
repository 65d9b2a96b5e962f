/* patch.h: applies a mutator's edit to a parent program.
 *
 * Two edit forms:
 *  - SEARCH/REPLACE blocks, applied in order to the running text:
 *        <<<<<<< SEARCH
 *        old lines
 *        =======
 *        new lines
 *        >>>>>>> REPLACE
 *    Each SEARCH text must match exactly once: first byte for byte, then
 *    line by line ignoring leading/trailing whitespace of each line. A missing
 *    or ambiguous match is CUCO_EINVAL naming the block number (1-based) and
 *    the first line of its SEARCH text.
 *  - Full rewrite of the EVOLVE-BLOCKs: the response holds, in order, the new
 *    body of every block of the program, each between its own
 *    "// EVOLVE-BLOCK-START" and "// EVOLVE-BLOCK-END" marker lines (a program
 *    with a single block may also get a bare body). Markdown code fences
 *    (```) around the response are ignored.
 * Both results then go through the frozen guard (cuco_patch_guard), which
 * refuses any change outside the blocks.
 */
#ifndef CUCO_PATCH_H
#define CUCO_PATCH_H

#include <stddef.h>
#include "cuco/err.h"

typedef struct cuco_sr_block {
    char *search;  /* owned */
    char *replace; /* owned */
    int line;      /* 1-based line of the SEARCH marker in the response */
} cuco_sr_block;

/* Parses the SEARCH/REPLACE blocks of response. No block, or a malformed
 * block (missing ======= or >>>>>>> REPLACE): CUCO_EINVAL with the line.
 * *blocks malloc'd: cuco_sr_blocks_free(). */
int cuco_patch_parse(const char *response, cuco_sr_block **blocks, size_t *n, cuco_err *e);
void cuco_sr_blocks_free(cuco_sr_block *blocks, size_t n);

/* Applies the SEARCH/REPLACE blocks of response to text; *out malloc'd. */
int cuco_patch_apply_diff(const char *text, const char *response, char **out, cuco_err *e);

/* Replaces the bodies of text's EVOLVE-BLOCKs with those in response. */
int cuco_patch_apply_rewrite(const char *text, const char *response, char **out, cuco_err *e);

/* 0 if cand changes nothing outside the blocks of seed; else CUCO_EINVAL
 * with "edit outside the EVOLVE-BLOCKs: ..." */
int cuco_patch_guard(const char *seed, const char *cand, cuco_err *e);

#endif
