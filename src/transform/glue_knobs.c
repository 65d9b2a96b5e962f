/* glue_knobs.c: the glue's knobs that a program's rewritten calls read
 * (glue_knobs.h). The table follows the glue (cuco_tx_*.cuh): comm_launch()
 * (CTAs, threads, unroll, chunk) serves all-gather, reduce-scatter and
 * all-reduce; the send kernel takes its threads and unroll from the same
 * knobs and its CTAs from CUCO_P2P_CTAS; every call built from sends and
 * receives (all-to-all, broadcast, gather, scatter) is a send's reader. */
#include "glue_knobs.h"

#include <string.h>

#include "cuco/buf.h"

typedef struct api_reads {
    const char *api;
    unsigned reads;
} api_reads;

#define P2P_READS (CUCO_GLUE_READS_P2P | CUCO_GLUE_READS_KERNEL)
#define COLL_READS (CUCO_GLUE_READS_COLL | CUCO_GLUE_READS_KERNEL)

static const api_reads api_table[] = {
    {"ncclAllGather", COLL_READS | CUCO_GLUE_READS_CE_COLL | CUCO_GLUE_READS_AG_NCCL},
    {"ncclReduceScatter", COLL_READS},
    {"ncclAllReduce", COLL_READS | CUCO_GLUE_READS_STAGED | CUCO_GLUE_READS_CE_AR},
    {"ncclAlltoAll", P2P_READS | CUCO_GLUE_READS_CE_COLL},
    {"ncclAllToAll", P2P_READS | CUCO_GLUE_READS_CE_COLL},
    {"ncclSend", P2P_READS},
    {"ncclRecv", P2P_READS},
    {"ncclBroadcast", P2P_READS},
    {"ncclBcast", P2P_READS},
    {"ncclGather", P2P_READS},
    {"ncclScatter", P2P_READS},
};

typedef struct knob_reads {
    const char *name;
    unsigned reads; /* read when any of these bits is set */
    int launch;     /* an SM launch knob: moot where the copy engine moves the data */
} knob_reads;

static const knob_reads knob_table[] = {
    {"CUCO_COMM_CTAS", CUCO_GLUE_READS_COLL, 1},
    {"CUCO_CHUNK_BYTES", CUCO_GLUE_READS_COLL, 1},
    {"CUCO_COMM_THREADS", CUCO_GLUE_READS_KERNEL, 1},
    {"CUCO_COMM_UNROLL", CUCO_GLUE_READS_KERNEL, 1},
    {"CUCO_P2P_CTAS", CUCO_GLUE_READS_P2P, 0},
    {"CUCO_P2P_NCCL_FROM", CUCO_GLUE_READS_P2P, 0},
    {"CUCO_COPY_ENGINE", CUCO_GLUE_READS_CE_COLL, 0},
    {"CUCO_STAGED_NCCL_FROM", CUCO_GLUE_READS_STAGED, 0},
    {"CUCO_AR_CE_FROM", CUCO_GLUE_READS_CE_AR, 0},
    {"CUCO_AR_NCCL_UPTO", CUCO_GLUE_READS_CE_AR, 0},
    {"CUCO_AG_NCCL_UPTO", CUCO_GLUE_READS_AG_NCCL, 0},
};

unsigned cuco_glue_reads_of(const char *api, size_t len)
{
    for (size_t i = 0; i < sizeof api_table / sizeof api_table[0]; i++)
        if (strlen(api_table[i].api) == len && !strncmp(api, api_table[i].api, len))
            return api_table[i].reads;
    return 0;
}

/* The knob-table entry whose #define starts the line at p, or NULL. */
static const knob_reads *knob_defined_at(const char *p)
{
    static const char define[] = "#define ";
    if (strncmp(p, define, sizeof define - 1))
        return NULL;
    p += sizeof define - 1;
    for (size_t i = 0; i < sizeof knob_table / sizeof knob_table[0]; i++) {
        size_t n = strlen(knob_table[i].name);
        if (!strncmp(p, knob_table[i].name, n) && p[n] == ' ')
            return &knob_table[i];
    }
    return NULL;
}

/* The line of knob k rewritten into out: its annotation dropped (no call
 * reads it) or given the conditions under which it matters. */
static int knob_line(cuco_buf *out, const knob_reads *k, const char *line, const char *end,
                     const cuco_glue_use *use)
{
    static const char tag[] = "// cuco:knob";
    const char *at = strstr(line, tag);
    if (!at || at >= end)
        return cuco_buf_append(out, line, (size_t)(end - line));
    if (!(k->reads & use->reads)) {
        int rc = cuco_buf_append(out, line, (size_t)(at - line));
        return rc ? rc : cuco_buf_puts(out, "// no rewritten call of this program reads it\n");
    }
    int gather_only = !(k->reads & use->reads_besides_gather);
    size_t body = (size_t)(end - line) - (end > line && end[-1] == '\n');
    int rc = cuco_buf_append(out, line, body);
    if (rc == 0 && gather_only && (k->launch || use->split_site >= 0))
        rc = cuco_buf_puts(out, " when");
    if (rc == 0 && gather_only && k->launch)
        rc = cuco_buf_puts(out, " CUCO_COPY_ENGINE=0");
    if (rc == 0 && gather_only && use->split_site >= 0)
        rc = cuco_buf_printf(out, " CUCO_SPLIT_%ld=0", use->split_site);
    return rc ? rc : cuco_buf_putc(out, '\n');
}

char *cuco_glue_knobs_pruned(const char *glue, const cuco_glue_use *use)
{
    cuco_buf out = CUCO_BUF_INIT;
    int rc = 0;
    for (const char *line = glue; *line && rc == 0;) {
        const char *end = strchr(line, '\n');
        end = end ? end + 1 : line + strlen(line);
        const knob_reads *k = knob_defined_at(line);
        rc = k ? knob_line(&out, k, line, end, use)
               : cuco_buf_append(&out, line, (size_t)(end - line));
        line = end;
    }
    if (rc != 0) {
        cuco_buf_free(&out);
        return NULL;
    }
    return cuco_buf_detach(&out);
}
