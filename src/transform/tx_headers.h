/* tx_headers.h: the program's own headers whose NCCL calls the rules
 * rewrite (headers.c); internal to src/transform. */
#ifndef CUCO_TX_HEADERS_H
#define CUCO_TX_HEADERS_H

#include "cuco/analyze.h"
#include "cuco/err.h"
#include "cuco/transform.h"
#include "cuco/workload.h"

/* A header of the program inlined into the evolve file in place of its
 * #include line. */
typedef struct cuco_tx_inlined {
    char *name;     /* as the #include line names it (owned) */
    char *path;     /* the file (owned) */
    int seed_line;  /* the #include line in the seed */
    int begin, end; /* lines of its begin and end markers in the flattened seed */
} cuco_tx_inlined;

typedef struct cuco_tx_headers {
    cuco_tx_inlined *v; /* owned */
    size_t n;
} cuco_tx_headers;

/* The seed with each of the program's own headers that calls an NCCL
 * collective (a local #include "..." of the evolve file, found in its
 * folder; never a system header) inlined between marker comments, so the
 * rules rewrite its calls like the evolve file's. Only for a seed without
 * EVOLVE-BLOCKs (in a seed with blocks such a header is frozen code).
 * *flat: NULL when nothing was inlined, else caller frees; free h with
 * cuco_tx_headers_free(). */
int cuco_tx_headers_inline(const cuco_workload *w, const char *seed, char **flat,
                           cuco_tx_headers *h, cuco_err *e);
/* Moves note lines from the flattened seed to the seed's own: a line of an
 * inlined header becomes its #include line, with the header's name and line
 * in the text. Notes from index first on. */
int cuco_tx_headers_notes(const cuco_tx_headers *h, cuco_tx_notes *notes, size_t first);
/* Writes the edited copy of each inlined header (the program's text between
 * its markers) to GEN0/NAME. */
int cuco_tx_headers_write(const cuco_tx_headers *h, const char *program, const char *gen0,
                          cuco_err *e);
/* The name inside the quotes of an #include "..." directive (a token of
 * src), or NULL. Caller frees. */
char *cuco_tx_quoted_include(const char *src, const cuco_tok *t);
/* The folder of w's evolve file, where its own headers are found; NULL on
 * failure of memory. Caller frees. */
char *cuco_tx_evolve_dir(const cuco_workload *w);
/* The #define lines of the program's own headers that seed includes with
 * #include "..." (found beside w's evolve file, and the headers they
 * include in turn, a few levels deep), one a line, into *out (caller
 * frees; NULL when there is none). The schedule scans read them as the
 * file's own macros. */
int cuco_tx_header_macros(const cuco_workload *w, const char *seed, char **out, cuco_err *e);
/* 1 when the file (a path as the analysis names it) is an inlined header. */
int cuco_tx_headers_has(const cuco_tx_headers *h, const char *file);
void cuco_tx_headers_free(cuco_tx_headers *h);

#endif
