/* novelty.h: novelty of a program (MinHash over normalized token shingles)
 * and the choice of a parent among a run's programs (src/evolve/novelty.c). */
#ifndef CUCO_NOVELTY_H
#define CUCO_NOVELTY_H

#include "cuco/config.h"
#include "cuco/mutate.h"

#include <stddef.h>
#include <stdint.h>

#define CUCO_MINHASH_K 64
typedef struct cuco_minhash {
    uint64_t h[CUCO_MINHASH_K];
} cuco_minhash;
/* Signature of a program: comments and whitespace stripped, tokens in
 * 3-token shingles. */
void cuco_minhash_of(const char *text, cuco_minhash *m);
/* Estimated Jaccard similarity in [0, 1]. */
double cuco_minhash_similarity(const cuco_minhash *a, const cuco_minhash *b);

/* Parent selection over programs sorted best first (n >= 1): returns an
 * index. exploit raises the selection pressure. */
size_t cuco_select_parent(cuco_selection s, const double *scores, size_t n, int exploit,
                          cuco_rng *rng);

#endif
