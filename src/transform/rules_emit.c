/* rules_emit.c: the rule route's output: the edits applied to the program, the glue and
 * its knobs put into an EVOLVE-BLOCK at the right place, the window notes. */
#include "rules_int.h"

static int cmp_edit(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

/* Where the glue goes: the start of the first block's body (which must be at
 * file scope), or after the last top-level #include. */
/* Where the glue goes in a program without EVOLVE-BLOCKs: after the last
 * #include before the first line of code (an include inside #if...#endif:
 * after the #endif), or before a header that headers.c inlined (it uses
 * the glue). An #include after code (`#include <vector>` below a helper
 * that calls NCCL) is left where it is: the helper's rewritten calls need
 * the glue before them. */
static size_t includes_end(const cuco_lex *lx)
{
    static const char inlined[] = "// cuco: begin of the program's header";
    size_t after = 0;
    int depth = 0, inside = 0;
    for (size_t i = 0; i < lx->ntoks; i++) {
        const cuco_tok *t = &lx->toks[i];
        if (t->kind == CUCO_TOK_COMMENT && t->len >= sizeof(inlined) - 1 &&
            memcmp(lx->src + t->off, inlined, sizeof(inlined) - 1) == 0)
            return rl_line_start(lx->src, t->off); /* a header inlined by headers.c */
        if (t->kind != CUCO_TOK_PREPROC && t->kind != CUCO_TOK_COMMENT)
            break; /* the first code */
        size_t line_after = rl_line_after(lx->src, t->off + t->len - (t->len > 0));
        if (cuco_tok_directive(lx->src, t, "if") || cuco_tok_directive(lx->src, t, "ifdef") ||
            cuco_tok_directive(lx->src, t, "ifndef"))
            depth++;
        else if (cuco_tok_directive(lx->src, t, "endif") && depth > 0 && --depth == 0 && inside) {
            after = line_after;
            inside = 0;
        } else if (cuco_tok_directive(lx->src, t, "include")) {
            if (depth == 0)
                after = line_after;
            inside |= depth > 0;
        }
    }
    return after;
}

static int glue_position(ctx *c, size_t *pos, int *wrap)
{
    const sview *v = &c->v;
    if (c->nblocks > 0) {
        size_t at = c->blocks[0].body_start;
        for (size_t i = 0; i < v->n; i++) {
            if (tk(v, i)->off >= at) {
                if (v->depth[i] != 0)
                    return rl_refuse(
                               c, c->blocks[0].start_line,
                               "the first EVOLVE-BLOCK is not at file scope: the device library "
                               "include and the glue cannot go into it%s%s",
                               NULL, NULL),
                           1;
                break;
            }
        }
        *pos = at;
        *wrap = 0;
        return 0;
    }
    *pos = includes_end(&v->lx);
    *wrap = 1;
    return 0;
}

/* An all-reduce on managed memory (host-readable scratch) through a
 * symmetric staging buffer, made at the first such call: every rank makes
 * the same calls with the same count, in the same order, as symmetric
 * memory requires. */
static const char staged_glue[] =
    "// All-reduces on managed memory, staged through a symmetric buffer\n"
    "namespace cuco_tx {\n"
    "inline ncclResult_t staged_all_reduce(const void* sendbuff, void* recvbuff, size_t count,\n"
    "                                      ncclDataType_t datatype, ncclRedOp_t op,\n"
    "                                      ncclComm_t comm, cudaStream_t stream) {\n"
    "  static void* stage = nullptr;\n"
    "  static size_t stage_bytes = 0;\n"
    "  size_t bytes = count * dtype_size(datatype);\n"
    "  if (!bytes) return CUCO_TX_FAIL(\"staged_all_reduce: unsupported data type\");\n"
    "  if (capturing(stream))  // stream capture: NCCL's own (cuco_tx::capturing)\n"
    "    return ::ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);\n"
    "  if (bytes > stage_bytes) {\n"
    "    if (stage && symm_free(stage) != cudaSuccess) return CUCO_TX_FAIL(\"freeing the "
    "stage\");\n"
    "    if (symm_malloc(&stage, bytes) != cudaSuccess) return CUCO_TX_FAIL(\"no stage\");\n"
    "    stage_bytes = bytes;\n"
    "  }\n"
    "  if (cudaMemcpyAsync(stage, sendbuff, bytes, cudaMemcpyDefault, stream) != cudaSuccess)\n"
    "    return CUCO_TX_FAIL(\"staged_all_reduce: copy in\");\n"
    "  ncclResult_t r = all_reduce(stage, stage, count, datatype, op, comm, stream);\n"
    "  if (r != ncclSuccess) return r;\n"
    "  if (cudaMemcpyAsync(recvbuff, stage, bytes, cudaMemcpyDefault, stream) != cudaSuccess)\n"
    "    return CUCO_TX_FAIL(\"staged_all_reduce: copy out\");\n"
    "  return ncclSuccess;\n"
    "}\n"
    "}  // namespace cuco_tx\n";

/* The knob lines of the schedules the program got (pieces, parts, ranges,
 * transports), into g. */
static void schedule_knob_lines(const ctx *c, cuco_buf *g)
{
    /* 16 where only sends are made piece by piece (measured 2.5% faster
     * than 8 on 2xH200, bench/README.md "Pieces of a send made piece by
     * piece"); 8 where a receive is consumed piece by piece, each piece a
     * kernel launch */
    if (c->send_made || c->recv_splits.n)
        cuco_buf_printf(g,
                        "// the pieces sends and receives of 2 MiB and more move in\n"
                        "#define CUCO_P2P_PIECES %d // cuco:knob run 1 2 4 8 16\n",
                        c->recv_splits.n ? 8 : 16);
    if (c->glue.reads & CUCO_GLUE_READS_P2P)
        cuco_buf_printf(g,
                        "// large sends and receives by the copy engines (no SM)\n"
                        "#define CUCO_P2P_CE %d // cuco:knob run 0 1\n",
                        c->send_made);
    if (c->splits.n) {
        cuco_buf_puts(g, "// the pieces each peer's gathered block is pulled and consumed in\n"
                         "#define CUCO_SPLIT_CHUNKS 4 // cuco:knob run 1 2 4");
        rl_site_switch_condition(g, &c->splits, "CUCO_SPLIT");
    }
    if (c->attn_splits.n) {
        cuco_buf_puts(g, "// the parts each peer's keys are attended in (merged by log-sum-exp)\n"
                         "#define CUCO_ATTN_CHUNKS 1 // cuco:knob run 1 2 4");
        rl_site_switch_condition(g, &c->attn_splits, "CUCO_SPLIT");
        if (c->attn_lends) {
            cuco_buf_puts(g,
                          "// the busiest rank lends queries to the least busy (declared queries)\n"
                          "#define CUCO_ATTN_LEND 1 // cuco:knob run 0 1");
            rl_site_switch_condition(g, &c->attn_splits, "CUCO_SPLIT");
        }
    }
    if (c->produces.n) {
        cuco_buf_puts(
            g, "// the ranges a GEMM or kernel feeding an all-reduce is made and reduced in\n"
               "#define CUCO_PSPLIT_PIECES 8 // cuco:knob run 2 4 8");
        rl_site_switch_condition(g, &c->produces, "CUCO_PSPLIT");
        cuco_buf_puts(g, "// the ranges reduced by the copy engines (no SM) where they can be\n"
                         "#define CUCO_PSPLIT_CE 1 // cuco:knob run 0 1");
        rl_site_switch_condition(g, &c->produces, "CUCO_PSPLIT");
    }
}

/* Whether the file makes one communicator, once (CUCO_TX_ONE_COMM). */
static int one_comm_made(const ctx *c)
{
    return c->comm_creations == 1 && c->comm_once;
}

/* The report's line on when the windows are registered (CUCO_TX_ONE_COMM
 * or at first use, and why), at the first communicator setup inserted. */
static int window_timing_note(ctx *c)
{
    if (!c->setup_line)
        return 0;
    if (one_comm_made(c))
        return cuco_tx_notes_add(&c->r->notes, c->setup_line, "setup",
                                 "windows registered right after this setup and at each later "
                                 "allocation, which every rank reaches (the program makes one "
                                 "communicator, once)");
    char many[48];
    snprintf(many, sizeof many, "the file makes %d communicators", c->comm_creations);
    const char *why = c->comm_creations > 1 ? many
                                            : "its communicator may be made more than once: in a "
                                              "loop, a lambda, or a function main does not call "
                                              "exactly once";
    return cuco_tx_notes_add(&c->r->notes, c->setup_line, "setup",
                             "windows registered at their first use, so every rank must reach "
                             "a rewritten call (%s); the calls of the communicator set up first "
                             "take the device path, a rewritten call on another one goes "
                             "through NCCL's own",
                             why);
}

int rl_assemble(ctx *c, const char *text)
{
    size_t pos;
    int wrap;
    if (glue_position(c, &pos, &wrap) != 0 || c->r->refused)
        return 0;
    int with_gemm = c->gemm_splits || c->gemm_produces || c->send_made;
    char *whole = cuco_transform_runtime_for(with_gemm, c->gemm_lt);
    /* conditions are 'and': the program's only all-gather, split */
    c->glue.split_site = c->n_gathers == 1 && c->splits.n == 1 ? (long)c->splits.last : -1;
    char *glue = whole ? cuco_glue_knobs_pruned(whole, &c->glue) : NULL;
    free(whole);
    if (!glue)
        return CUCO_ENOMEM;
    cuco_buf g = CUCO_BUF_INIT;
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-START\n");
    if (with_gemm)
        cuco_buf_puts(&g,
                      "// Schedules consumer_split_by_source / producer_split / send_as_produced:\n"
                      "// the cuBLAS part of the glue\n"
                      "#define CUCO_TX_GEMM_SPLIT 1\n");
    if (c->gemm_lt)
        cuco_buf_puts(&g, "// the cublasLtMatmul part of the glue\n"
                          "#define CUCO_TX_GEMM_LT 1\n");
    if (!c->dtypes_unread && (c->dtypes | 1u) != 0xFu)
        cuco_buf_printf(&g,
                        "// the element types the device reductions are built for: float and\n"
                        "// those of the program's reductions (1 float, 2 half, 4 bfloat16,\n"
                        "// 8 int32; another type's reduction goes through NCCL)\n"
                        "#define CUCO_TX_DTYPES 0x%x\n",
                        c->dtypes | 1u);
    if (one_comm_made(c))
        cuco_buf_puts(&g, "// the program makes one communicator, once: windows are\n"
                          "// registered when they are allocated (cuco_tx::eager_comm)\n"
                          "#define CUCO_TX_ONE_COMM 1\n");
    if (window_timing_note(c) != 0) {
        cuco_buf_free(&g);
        return CUCO_ENOMEM;
    }
    schedule_knob_lines(c, &g);
    cuco_buf_puts(&g, glue);
    free(glue);
    if (g.len && g.data[g.len - 1] != '\n')
        cuco_buf_putc(&g, '\n');
    if (c->nccl_mem)
        cuco_buf_puts(
            &g, "// ncclMemAlloc / ncclMemFree of buffers made symmetric: the runtime's windows,\n"
                "// answering ncclResult_t like the calls they replace\n"
                "namespace cuco_tx {\n"
                "inline ncclResult_t symm_mem_alloc(void** p, size_t bytes) {\n"
                "  if (windows_full()) return ncclMemAlloc(p, bytes);\n"
                "  return symm_malloc_window(p, bytes) == cudaSuccess ? ncclSuccess : "
                "ncclSystemError;\n"
                "}\n"
                "template <typename T> inline ncclResult_t symm_mem_alloc(T** p, size_t bytes) {\n"
                "  return symm_mem_alloc(reinterpret_cast<void**>(p), bytes);\n"
                "}\n"
                "inline ncclResult_t symm_mem_free(void* p) {\n"
                "  for (Buf* b : bufs())\n"
                "    if (b->base == p) return symm_free(p) == cudaSuccess ? ncclSuccess : "
                "ncclSystemError;\n"
                "  return ncclMemFree(p);\n"
                "}\n"
                "}  // namespace cuco_tx\n");
    if (c->staged)
        cuco_buf_puts(&g, staged_glue);
    if (c->knobs.len) {
        cuco_buf_puts(
            &g, "// Schedules early_start_late_wait (CUCO_EARLY_<n>, cuco_tx::early_start),\n"
                "// consumer_split_by_source (CUCO_SPLIT_<n>), warm_read (CUCO_WARM_<n>) and\n"
                "// prefetch_next (CUCO_PREF_<n>), one knob each per call\n");
        cuco_buf_puts(&g, cuco_buf_str(&c->knobs));
    }
    if (wrap)
        cuco_buf_puts(&g, "// EVOLVE-BLOCK-END\n");
    /* line ranges to wrap (program without blocks), merged */
    size_t nr = 0;
    size_t(*ranges)[2] = malloc((c->nedits + 1) * sizeof(*ranges));
    if (!ranges) {
        cuco_buf_free(&g);
        return CUCO_ENOMEM;
    }
    for (size_t i = 0; i < c->nedits; i++) {
        if (!c->edits[i].wrap)
            continue;
        ranges[nr][0] = sview_pragma_lines_before(text, rl_line_start(text, c->edits[i].stmt_lo));
        ranges[nr][1] = rl_line_after(text, c->edits[i].stmt_hi > 0 ? c->edits[i].stmt_hi - 1 : 0);
        nr++;
    }
    /* merge overlapping or touching ranges until none is left (small n) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < nr; i++)
            for (size_t j = 0; j < nr; j++)
                if (i != j && ranges[i][1] > ranges[i][0] && ranges[j][1] > ranges[j][0] &&
                    ranges[i][0] <= ranges[j][1] && ranges[j][0] <= ranges[i][1]) {
                    if (ranges[j][0] < ranges[i][0])
                        ranges[i][0] = ranges[j][0];
                    if (ranges[j][1] > ranges[i][1])
                        ranges[i][1] = ranges[j][1];
                    ranges[j][0] = ranges[j][1] = 0;
                    changed = 1;
                }
    }
    int rc = 0;
    for (size_t i = 0; i < nr && rc == 0; i++) {
        if (ranges[i][1] <= ranges[i][0])
            continue;
        rc = rl_add_edit(c, 0, ranges[i][0], 0, "// EVOLVE-BLOCK-START\n");
        if (rc == 0)
            rc = rl_add_edit(c, 0, ranges[i][1], 0,
                             text[ranges[i][1] - 1] != '\n' ? "\n// EVOLVE-BLOCK-END\n"
                                                            : "// EVOLVE-BLOCK-END\n");
    }
    free(ranges);
    if (rc == 0)
        rc = rl_add_edit(c, 0, pos, 0, cuco_buf_str(&g));
    if (rc == 0)
        c->edits[c->nedits - 1].seq = -1; /* the glue goes before a marker at the same place */
    cuco_buf_free(&g);
    if (rc != 0)
        return rc;
    /* insertions at the same offset: markers end before code starts; a START
     * marker at a line start goes before the glue; stable otherwise */
    if (c->nedits > 1)
        qsort(c->edits, c->nedits, sizeof(*c->edits), cmp_edit);
    cuco_buf out = CUCO_BUF_INIT;
    size_t at = 0;
    for (size_t i = 0; i < c->nedits; i++) {
        edit *x = &c->edits[i];
        if (x->off < at)
            continue; /* overlapping edit: cannot happen with token-level edits */
        cuco_buf_append(&out, text + at, x->off - at);
        cuco_buf_puts(&out, x->text);
        at = x->off + x->len;
    }
    cuco_buf_puts(&out, text + at);
    c->r->program = cuco_buf_detach(&out);
    return c->r->program ? 0 : CUCO_ENOMEM;
}
