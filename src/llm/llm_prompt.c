/* llm_prompt.c: assembles the prompts of the LLM mutators from the template
 * files (src/llm/prompts/) and the project notes (docs/context/): the
 * workload and its design space, the hardware, the parent's code and score,
 * the island's best programs, recent failures with the log lines that explain
 * them, and the run's meta summary. */
#include "cuco/llm.h"
#include "cuco/semantics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/toolchain.h"
#include "cuco/workload.h"

const char *cuco_llm_prompt_kind_name(cuco_llm_prompt_kind k)
{
    switch (k) {
    case CUCO_LLM_PROMPT_DIFF:
        return "diff";
    case CUCO_LLM_PROMPT_FULL:
        return "full";
    case CUCO_LLM_PROMPT_CROSS:
        return "cross";
    }
    return "unknown";
}

/* Start of the line holding p. */
static const char *line_start(const char *base, const char *p)
{
    while (p > base && p[-1] != '\n')
        p--;
    return p;
}

/* Next marker line of the given kind at or after p; NULL if none. A marker is
 * a line whose trimmed text starts with "//" and contains the word. */
static const char *find_marker(const char *base, const char *p, const char *word)
{
    for (const char *hit = strstr(p, word); hit; hit = strstr(hit + 1, word)) {
        const char *ls = line_start(base, hit);
        while (*ls == ' ' || *ls == '\t')
            ls++;
        if (ls[0] == '/' && ls[1] == '/')
            return line_start(base, hit);
    }
    return NULL;
}

int cuco_llm_block_count(const char *code)
{
    int n = 0;
    for (const char *p = code ? find_marker(code, code, "EVOLVE-BLOCK-START") : NULL; p;
         p = find_marker(code, strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p),
                         "EVOLVE-BLOCK-START"))
        n++;
    return n;
}

char *cuco_llm_blocks_text(const char *code)
{
    if (!code)
        return cuco_strdup("");
    cuco_buf out = CUCO_BUF_INIT;
    const char *p = code;
    int blocks = 0;
    for (;;) {
        const char *start = find_marker(code, p, "EVOLVE-BLOCK-START");
        if (!start)
            break;
        const char *end = find_marker(code, start, "EVOLVE-BLOCK-END");
        if (!end)
            break;
        const char *after = strchr(end, '\n');
        after = after ? after + 1 : end + strlen(end);
        if (blocks++)
            cuco_buf_puts(&out, "...\n");
        cuco_buf_append(&out, start, (size_t)(after - start));
        p = after;
    }
    if (!blocks)
        return cuco_strdup(code);
    return cuco_buf_detach(&out);
}

void cuco_llm_format_space(const struct cuco_workload *w, cuco_buf *out)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_space; i++) {
        cuco_buf_printf(out, "%s: ", w->space[i].name);
        for (size_t j = 0; j < w->space[i].values.n; j++)
            cuco_buf_printf(out, "%s%s", j ? ", " : "", w->space[i].values.items[j]);
        cuco_buf_putc(out, '\n');
    }
    if (w->n_semantics) {
        cuco_buf_puts(out, "\nSemantics the workload's manifest declares (what the code does "
                           "not show; use them):\n");
        cuco_semantics_describe(w->semantics, w->n_semantics, "- ", out);
    }
}

void cuco_llm_format_hardware(const struct cuco_toolchain *tc, const char *gpus, cuco_buf *out)
{
    if (gpus && *gpus)
        cuco_buf_printf(out, "GPUs: %s\n", gpus);
    if (!tc)
        return;
    if (tc->nvcc_version)
        cuco_buf_printf(out, "CUDA: nvcc %s\n", tc->nvcc_version);
    if (tc->nccl_version) {
        int v = tc->nccl_version;
        cuco_buf_printf(out, "NCCL: %d.%d.%d, device API %s, GIN headers %s\n", v / 10000,
                        v / 100 % 100, v % 100, tc->nccl_device_api ? "yes" : "no",
                        tc->nccl_gin ? "yes" : "no");
    }
}

/* Appends s cut to max bytes (keeping the end, where compilers and crashes
 * put the useful lines). */
static void put_tail(cuco_buf *out, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) {
        cuco_buf_printf(out, "[... %zu bytes omitted ...]\n", n - max);
        s += n - max;
    }
    cuco_buf_puts(out, s);
    if (n && s[strlen(s) - 1] != '\n')
        cuco_buf_putc(out, '\n');
}

static void format_failures(const cuco_llm_prompt_ctx *ctx, cuco_buf *out)
{
    size_t max = ctx->max_excerpt ? ctx->max_excerpt : 1500;
    for (size_t i = 0; i < ctx->n_failures; i++) {
        const cuco_llm_example *f = &ctx->failures[i];
        cuco_buf_printf(out, "## Attempt %zu: %s", i + 1, f->status ? f->status : "failed");
        if (f->description && *f->description)
            cuco_buf_printf(out, " (change: %s)", f->description);
        cuco_buf_puts(out, "\n");
        if (f->error && *f->error) {
            cuco_buf_puts(out, "```\n");
            put_tail(out, f->error, max);
            cuco_buf_puts(out, "```\n");
        }
    }
}

static void format_top(const cuco_llm_prompt_ctx *ctx, cuco_buf *out)
{
    size_t max = ctx->max_top_code ? ctx->max_top_code : 6000;
    for (size_t i = 0; i < ctx->n_top; i++) {
        const cuco_llm_example *t = &ctx->top[i];
        cuco_buf_printf(out, "## Program %zu: score %.4f", i + 1, t->score);
        if (t->description && *t->description)
            cuco_buf_printf(out, " (%s)", t->description);
        cuco_buf_puts(out, "\n");
        if (t->code) {
            char *blocks = cuco_llm_blocks_text(t->code);
            cuco_buf_puts(out, "```cuda\n");
            if (blocks && strlen(blocks) > max) {
                cuco_buf_append(out, blocks, max);
                cuco_buf_puts(out, "\n[... cut ...]\n");
            } else {
                cuco_buf_puts(out, blocks ? blocks : "");
            }
            cuco_buf_puts(out, "```\n");
            free(blocks);
        }
    }
}

int cuco_llm_prompt_build(cuco_llm_prompt_kind kind, const cuco_llm_prompt_ctx *ctx, char **system,
                          char **user, cuco_err *e)
{
    static const char *const names[] = {"diff.md", "full.md", "cross.md"};
    char *sys_t = NULL, *user_t = NULL, *api = NULL, *strategies = NULL;
    cuco_buf failures = CUCO_BUF_INIT, top = CUCO_BUF_INIT, sys = CUCO_BUF_INIT,
             usr = CUCO_BUF_INIT;
    char score[32], other_score[32], nblocks[16];
    int rc;
    if (kind > CUCO_LLM_PROMPT_CROSS)
        return cuco_err_set(e, CUCO_EINVAL, "unknown prompt kind %d", (int)kind);
    if (!ctx->parent_code)
        return cuco_err_set(e, CUCO_EINVAL, "prompt without a parent program");
    if (kind == CUCO_LLM_PROMPT_CROSS && !ctx->other_code)
        return cuco_err_set(e, CUCO_EINVAL, "crossover prompt without a second parent");
    if ((rc = cuco_llm_template_load("system.md", &sys_t, e)) ||
        (rc = cuco_llm_template_load(names[kind], &user_t, e)) ||
        (rc = cuco_llm_context_load("nccl_device_api.md", &api, e)) ||
        (rc = cuco_llm_context_load("strategies.md", &strategies, e)))
        goto out;
    format_failures(ctx, &failures);
    format_top(ctx, &top);
    snprintf(score, sizeof score, "%.4f", ctx->parent_score);
    snprintf(other_score, sizeof other_score, "%.4f", ctx->other_score);
    snprintf(nblocks, sizeof nblocks, "%d", cuco_llm_block_count(ctx->parent_code));
    const cuco_llm_var vars[] = {
        {"workload", ctx->workload ? ctx->workload : "(unnamed)"},
        {"description", ctx->description},
        {"design_space", ctx->design_space},
        {"hardware", ctx->hardware},
        {"api_notes", api},
        {"strategies", strategies},
        {"parent_code", ctx->parent_code},
        {"parent_score", score},
        {"parent_metrics", ctx->parent_metrics},
        {"other_code", ctx->other_code},
        {"other_score", other_score},
        {"failures", cuco_buf_str(&failures)},
        {"top_programs", cuco_buf_str(&top)},
        {"meta_summary", ctx->meta_summary},
        {"block_count", nblocks},
    };
    size_t nv = sizeof vars / sizeof vars[0];
    if ((rc = cuco_llm_template_fill(sys_t, "src/llm/prompts/system.md", vars, nv, &sys, e)))
        goto out;
    char *tname = cuco_sprintf("src/llm/prompts/%s", names[kind]);
    rc = cuco_llm_template_fill(user_t, tname, vars, nv, &usr, e);
    free(tname);
    if (rc)
        goto out;
    *system = cuco_buf_detach(&sys);
    *user = cuco_buf_detach(&usr);
out:
    free(sys_t);
    free(user_t);
    free(api);
    free(strategies);
    cuco_buf_free(&failures);
    cuco_buf_free(&top);
    cuco_buf_free(&sys);
    cuco_buf_free(&usr);
    return rc;
}
