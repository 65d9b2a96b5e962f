/* glue_knobs.h: which of the glue's knobs a transformed program can reach.
 * The glue declares every transport knob; a knob that no rewritten call
 * reads (the all-gather's copy engine in a program of sends, the staging
 * threshold without an all-reduce) keeps its #define but loses its
 * cuco:knob annotation, so that the search does not spend evaluations on
 * it. Internal to the transform. */
#ifndef CUCO_GLUE_KNOBS_H
#define CUCO_GLUE_KNOBS_H

#include <stddef.h>

/* What a rewritten call reads, as bits. */
enum {
    CUCO_GLUE_READS_COLL = 1u << 0,    /* the device collectives' launch (CTAs, chunk) */
    CUCO_GLUE_READS_KERNEL = 1u << 1,  /* the SM kernels' threads and unroll */
    CUCO_GLUE_READS_P2P = 1u << 2,     /* sends and receives (CTAs, NCCL threshold, copy engine) */
    CUCO_GLUE_READS_CE_COLL = 1u << 3, /* the copy engine of all-gather and all-to-all */
    CUCO_GLUE_READS_STAGED = 1u << 4,  /* the staged all-reduce's NCCL threshold */
    CUCO_GLUE_READS_CE_AR = 1u << 5,   /* the all-reduce's transport by size (copy engine, NCCL) */
    CUCO_GLUE_READS_AG_NCCL = 1u << 6, /* the all-gather's NCCL threshold */
};

/* The bits of the NCCL call named api (0 for a name the glue does not
 * carry). */
unsigned cuco_glue_reads_of(const char *api, size_t len);

/* What a program's rewritten calls read of the glue: reads (every call),
 * reads_besides_gather (every call but the all-gathers), and split_site
 * (>= 0: the program's only all-gather takes schedule
 * consumer_split_by_source, knob CUCO_SPLIT_<split_site>; -1 otherwise). */
typedef struct cuco_glue_use {
    unsigned reads;
    unsigned reads_besides_gather;
    long split_site;
} cuco_glue_use;

/* A copy of glue whose knobs that no rewritten call reads have their
 * annotation replaced by a comment saying so, and whose knobs read only by
 * all-gathers carry the conditions under which they matter: the launch
 * knobs 'when CUCO_COPY_ENGINE=0' (the copy engine takes no CTA), and with a
 * split all-gather every all-gather knob 'when CUCO_SPLIT_<n>=0' too (the
 * split pulls by the copy engine whatever they say). NULL when out of
 * memory. Caller frees. */
char *cuco_glue_knobs_pruned(const char *glue, const cuco_glue_use *use);

#endif
