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
 * refuses any change outside the blocks and, through the block guard
 * (block_guard.c), any block that could change what the frozen text means.
 */
#ifndef CUCO_PATCH_H
#define CUCO_PATCH_H

#include "cuco/err.h"
#include <stddef.h>

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

/* 0 if cand changes nothing outside the blocks of seed and its blocks pass
 * cuco_patch_guard_blocks (with no headers); else CUCO_EINVAL with "edit
 * outside the EVOLVE-BLOCKs: ..." or "line N of the candidate, inside an
 * EVOLVE-BLOCK: ..." and e->line set. */
int cuco_patch_guard(const char *seed, const char *cand, cuco_err *e);

/* The block guard: 0 when nothing inside cand's EVOLVE-BLOCKs can change what
 * its frozen text means. CUCO_EINVAL, naming the line and the reason
 * (e->line set), when a block
 *  - #defines or #undefs an identifier of the frozen text (cand outside its
 *    blocks, and frozen_extra: the workload's other sources and local
 *    headers, or NULL), keywords included, unless the blocks of seed
 *    #define it too (a knob the frozen code reads), or a reserved one
 *    (__x, _X);
 *  - has an #include other than those of seed's blocks, "cuco_device.cuh"
 *    (a transformed program's blocks include it) and a list of C++ standard
 *    headers (<cstdio>, <vector>, <thread>, ...), #line, a #pragma other
 *    than loop and diagnostic ones
 *    (push_macro, GCC optimize, redefine_extname, ...), an #if/#endif that
 *    pairs with the frozen text, a comment, string or directive that runs
 *    past the block's end, a trigraph or a '#' the guard cannot read;
 *  - names CUCO_NONCE or environ, or uses constructor/destructor attributes
 *    or init/fini sections (code outside the frozen flow);
 *  - defines a function, or puts an asm label, on a name the frozen text
 *    uses, unless the blocks of seed define that function too (the hooks
 *    the frozen code calls). seed may be NULL (no such hooks or knobs).
 * Macros named only inside the blocks (knobs) are allowed. */
int cuco_patch_guard_blocks(const char *seed, const char *cand, const char *frozen_extra,
                            cuco_err *e);

/* Appends to out the name of every function text defines (NAME ( ... ) {),
 * at any depth, methods included; names may repeat. 0 or CUCO_ENOMEM. */
struct cuco_strlist;
int cuco_patch_defined_functions(const char *text, struct cuco_strlist *out, cuco_err *e);

#endif
