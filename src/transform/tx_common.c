/* tx_common.c: pieces both transform routes (rules, LLM) use to write and
 * describe gen_0: GPU presence, the seed -> program diff, an eval result as
 * JSON. */
#include "tx_common.h"

#include "cuco/transform.h"

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/embedded.h"
#include "cuco/fs.h"
#include "cuco/hash.h"
#include "cuco/mutate.h"
#include "cuco/proc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The parts of the glue, in the order a program gets them. */
static const char *const runtime_parts[] = {"src/transform/cuco_tx_runtime.cuh",
                                            "src/transform/cuco_tx_p2p.cuh",
                                            "src/transform/cuco_tx_schedules.cuh",
                                            "src/transform/cuco_tx_recv.cuh",
                                            "src/transform/cuco_tx_produce.cuh",
                                            "src/transform/cuco_tx_lend.cuh",
                                            "src/transform/cuco_tx_attention.cuh",
                                            "src/transform/cuco_tx_gemm.cuh",
                                            NULL};

static char *runtime_text; /* the parts joined, made once */

static void runtime_join(void)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (const char *const *p = runtime_parts; *p; p++) {
        size_t n = 0;
        const unsigned char *t = cuco_embedded_find(*p, &n);
        if (!t || cuco_buf_append(&b, t, n) != 0) {
            cuco_buf_free(&b);
            return;
        }
    }
    runtime_text = cuco_buf_detach(&b);
}

/* The runtime glue every rule-route program carries (embedded at build):
 * its parts joined once, kept for the process. */
const char *cuco_transform_runtime(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, runtime_join);
    return runtime_text;
}

/* text without each part from a line `start` to a line `end` (inclusive) */
static char *without_parts(char *text, const char *start, const char *end)
{
    for (char *from = text ? strstr(text, start) : NULL; from; from = strstr(from, start)) {
        char *to = strstr(from, end);
        if (!to)
            break;
        to += strlen(end);
        memmove(from, to, strlen(to) + 1);
    }
    return text;
}

char *cuco_transform_runtime_for(int with_gemm, int with_lt)
{
    const char *rt = cuco_transform_runtime();
    char *text = rt ? cuco_strdup(rt) : NULL;
    if (!with_gemm)
        text = without_parts(text, "#if defined(CUCO_TX_GEMM_SPLIT)\n",
                             "#endif  // CUCO_TX_GEMM_SPLIT\n");
    if (!with_lt)
        text =
            without_parts(text, "#if defined(CUCO_TX_GEMM_LT)\n", "#endif  // CUCO_TX_GEMM_LT\n");
    return text;
}

int cuco_tx_notes_unapply(cuco_tx_notes *notes)
{
    static const char *const planned[] = {"rewrite", "symmetric", "schedule",
                                          "setup",   "teardown",  NULL};
    for (size_t i = 0; i < notes->n; i++) {
        cuco_tx_note *n = &notes->items[i];
        for (const char *const *k = planned; *k; k++) {
            if (strcmp(n->kind, *k) != 0)
                continue;
            char *kind = cuco_strdup("not applied");
            char *text = cuco_sprintf("%s (not done: the program is not transformed)", n->text);
            if (!kind || !text) {
                free(kind);
                free(text);
                return CUCO_ENOMEM;
            }
            free(n->kind);
            free(n->text);
            n->kind = kind;
            n->text = text;
            break;
        }
    }
    return 0;
}

/* Start offsets of the lines of s; count in *n. Caller frees. */
static size_t *line_starts(const char *s, int *n)
{
    size_t len = strlen(s), k = 0;
    int count = 1;
    for (size_t i = 0; i < len; i++)
        count += s[i] == '\n' && i + 1 < len;
    size_t *at = malloc((size_t)count * sizeof(*at));
    if (!at)
        return NULL;
    at[k++] = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\n' && i + 1 < len)
            at[k++] = i + 1;
    *n = count;
    return at;
}

static int same_line(const char *a, size_t ia, const char *b, size_t ib)
{
    size_t la = strcspn(a + ia, "\n"), lb = strcspn(b + ib, "\n");
    return la == lb && memcmp(a + ia, b + ib, la) == 0;
}

/* FNV-1a of each of the n lines of s starting at at[]. Caller frees. */
static uint64_t *line_hashes(const char *s, const size_t *at, int n)
{
    uint64_t *h = malloc(((size_t)n + 1) * sizeof(*h));
    for (int k = 0; h && k < n; k++) {
        h[k] = 1469598103934665603ull;
        for (const char *c = s + at[k]; *c && *c != '\n'; c++)
            h[k] = (h[k] ^ (unsigned char)*c) * 1099511628211ull;
    }
    return h;
}

/* Program lines [p0, p1) stand where seed lines [s0, s1) were: edited
 * lines take the seed's in order; EVOLVE-BLOCK markers and lines beyond
 * the seed's are insertions (0). */
static void fill_gap(const char *program, const size_t *ps, int p0, int p1, int s0, int s1, int *m)
{
    for (int k = p0; k < p1; k++) {
        size_t len = strcspn(program + ps[k], "\n");
        const char *marker = strstr(program + ps[k], "EVOLVE-BLOCK-");
        if ((marker && (size_t)(marker - (program + ps[k])) < len) || s0 >= s1)
            m[k + 1] = 0;
        else
            m[k + 1] = ++s0;
    }
}

int cuco_tx_line_map(const char *seed, const char *program, int **map, int *nlines, cuco_err *e)
{
    int ns = 0, np = 0, rc = 0;
    size_t *ss = line_starts(seed, &ns), *ps = line_starts(program, &np);
    uint64_t *hs = ss ? line_hashes(seed, ss, ns) : NULL,
             *hp = ps ? line_hashes(program, ps, np) : NULL;
    /* lcs[i][j]: longest common subsequence of seed lines i.. and program
     * lines j..; quadratic, so past 24M pairs (a seed of some 5000 lines)
     * nothing is mapped */
    int too_big = ss && ps && (size_t)(ns + 1) * (size_t)(np + 1) > ((size_t)24 << 20);
    unsigned *lcs =
        ss && ps && !too_big ? calloc((size_t)(ns + 1) * (size_t)(np + 1), sizeof(*lcs)) : NULL;
    int *m = calloc((size_t)np + 1, sizeof(*m));
    if (m && too_big) {
        *map = m;
        *nlines = np;
        goto out;
    }
    if (!lcs || !m || !hs || !hp) {
        free(m);
        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        goto out;
    }
    size_t w = (size_t)np + 1;
    for (int i = ns - 1; i >= 0; i--)
        for (int j = np - 1; j >= 0; j--) {
            unsigned down = lcs[(size_t)(i + 1) * w + (size_t)j],
                     right = lcs[(size_t)i * w + (size_t)j + 1];
            lcs[(size_t)i * w + (size_t)j] =
                hs[i] == hp[j] && same_line(seed, ss[i], program, ps[j])
                    ? lcs[(size_t)(i + 1) * w + (size_t)j + 1] + 1
                    : (down > right ? down : right);
        }
    /* walk the matches; the program lines between two of them take the
     * seed lines between them (edited lines), the rest are insertions */
    int i = 0, j = 0, gap_s = 0, gap_p = 0;
    while (i < ns || j < np) {
        if (i < ns && j < np && hs[i] == hp[j] && same_line(seed, ss[i], program, ps[j])) {
            fill_gap(program, ps, gap_p, j, gap_s, i, m);
            m[j + 1] = i + 1;
            gap_s = ++i;
            gap_p = ++j;
        } else if (j >= np || (i < ns && lcs[(size_t)(i + 1) * w + (size_t)j] >=
                                             lcs[(size_t)i * w + (size_t)j + 1])) {
            i++;
        } else {
            j++;
        }
    }
    fill_gap(program, ps, gap_p, np, gap_s, ns, m);
    *map = m;
    *nlines = np;
out:
    free(lcs);
    free(ss);
    free(ps);
    free(hs);
    free(hp);
    return rc;
}

/* The self-check glue (C++), inserted after the runtime. */
static const char self_check_glue[] =
    "// Self-check (cuco transform): the seed prints no verification line, so the\n"
    "// first CUCO_TX_SELF_CHECK device collectives are compared with host NCCL on\n"
    "// the same inputs; each rank prints the verdict when the program exits.\n"
    "#define CUCO_TX_SELF_CHECK 4\n"
    "#include <cmath>\n"
    "namespace cuco_tx {\n"
    "struct SelfCheck {\n"
    "  int checked = 0, bad = 0;\n"
    "  char first[200] = \"\";\n"
    "  ~SelfCheck() {\n"
    "    if (bad)\n"
    "      printf(\"Verification: FAIL %d of %d device collectives differ from host NCCL\"\n"
    "             \" (first: %s)\\n\", bad, checked, first);\n"
    "    else if (checked)\n"
    "      printf(\"Verification: PASS %d device collectives match host NCCL on the same\"\n"
    "             \" inputs\\n\", checked);\n"
    "    else\n"
    "      printf(\"Verification: FAIL no device collective ran\\n\");\n"
    "    fflush(stdout);\n"
    "  }\n"
    "};\n"
    "inline SelfCheck& self_check() { static SelfCheck s; return s; }\n"
    "inline bool self_check_due() { return self_check().checked < CUCO_TX_SELF_CHECK; }\n"
    "inline void self_check_fail(const char* what, const char* why) {\n"
    "  SelfCheck& s = self_check();\n"
    "  s.checked++;\n"
    "  if (!s.bad++) snprintf(s.first, sizeof s.first, \"%s: %s\", what, why);\n"
    "}\n"
    "// got and want: n elements of t on the device, after the stream's work\n"
    "inline void self_check_compare(const void* got, const void* want, size_t n,\n"
    "                               ncclDataType_t t, cudaStream_t st, const char* what) {\n"
    "  size_t es = dtype_size(t), wrong = 0;\n"
    "  std::vector<char> a(n * es + 1), b(n * es + 1);\n"
    "  if (cudaStreamSynchronize(st) != cudaSuccess ||\n"
    "      cudaMemcpy(a.data(), got, n * es, cudaMemcpyDeviceToHost) != cudaSuccess ||\n"
    "      cudaMemcpy(b.data(), want, n * es, cudaMemcpyDeviceToHost) != cudaSuccess)\n"
    "    return self_check_fail(what, \"cannot read the results\");\n"
    "  for (size_t i = 0; i < n; i++) {\n"
    "    double x, y, tol = 0;\n"
    "    if (t == ncclFloat32) {\n"
    "      x = reinterpret_cast<const float*>(a.data())[i];\n"
    "      y = reinterpret_cast<const float*>(b.data())[i], tol = 1e-4;\n"
    "    } else if (t == ncclFloat16) {\n"
    "      x = __half2float(reinterpret_cast<const __half*>(a.data())[i]);\n"
    "      y = __half2float(reinterpret_cast<const __half*>(b.data())[i]), tol = 1e-2;\n"
    "    } else if (t == ncclBfloat16) {\n"
    "      x = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(a.data())[i]);\n"
    "      y = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(b.data())[i]);\n"
    "      tol = 2e-2;\n"
    "    } else {\n"
    "      wrong += memcmp(a.data() + i * es, b.data() + i * es, es) != 0;\n"
    "      continue;\n"
    "    }\n"
    "    wrong += !(std::fabs(x - y) <= tol * (1 + std::fabs(y)));\n"
    "  }\n"
    "  SelfCheck& s = self_check();\n"
    "  s.checked++;\n"
    "  if (wrong && !s.bad++)\n"
    "    snprintf(s.first, sizeof s.first, \"%s: %zu of %zu elements differ\", what, wrong,\n"
    "             n);\n"
    "}\n"
    "// a device copy of n elements of t at p (nullptr: none), or of nothing\n"
    "inline void* self_check_copy(const void* p, size_t bytes, cudaStream_t st) {\n"
    "  void* q = nullptr;\n"
    "  if (cudaMalloc(&q, bytes ? bytes : 1) != cudaSuccess) return nullptr;\n"
    "  if (p && bytes) cudaMemcpyAsync(q, p, bytes, cudaMemcpyDeviceToDevice, st);\n"
    "  return q;\n"
    "}\n"
    "inline int self_check_ranks(ncclComm_t c) {\n"
    "  int n = 1;\n"
    "  ncclCommCount(c, &n);\n"
    "  return n;\n"
    "}\n"
    "// run (the device collective) and, while checks are due, ref (host NCCL\n"
    "// from a copy of the input: inBytes from `from`, nullptr for none) into a\n"
    "// buffer of n elements of t, compared with r. wait: the stream is waited\n"
    "// for after the copy (the producer split reduces in place on a side stream).\n"
    "template <class Run, class Ref>\n"
    "inline ncclResult_t self_checked(const void* from, size_t inBytes, void* r, size_t n, "
    "ncclDataType_t t,\n"
    "                                 cudaStream_t st, bool wait, const char* what, Run run, Ref "
    "ref) {\n"
    "  // (a capturing stream cannot be waited for: captured calls go unchecked)\n"
    "  if (!self_check_due() || !dtype_size(t) || capturing(st)) return run();\n"
    "  void *in = self_check_copy(from, inBytes, st), *want = self_check_copy(nullptr, n * "
    "dtype_size(t), st);\n"
    "  if (wait) cudaStreamSynchronize(st);\n"
    "  ncclResult_t rc = run();\n"
    "  if (rc == ncclSuccess && in && want && (rc = ref(in, want)) == ncclSuccess)\n"
    "    self_check_compare(r, want, n, t, st, what);\n"
    "  cudaFree(in), cudaFree(want);\n"
    "  return rc;\n"
    "}\n"
    "inline ncclResult_t checked_all_reduce(const void* s, void* r, size_t n, ncclDataType_t t,\n"
    "                                       ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {\n"
    "  return self_checked(s, n * dtype_size(t), r, n, t, st, false, \"all_reduce\",\n"
    "                      [&] { return all_reduce(s, r, n, t, op, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclAllReduce(in, want, n, t, op, "
    "c, st); });\n"
    "}\n"
    "inline ncclResult_t checked_all_gather(const void* s, void* r, size_t n, ncclDataType_t t,\n"
    "                                       ncclComm_t c, cudaStream_t st) {\n"
    "  return self_checked(s, n * dtype_size(t), r, n * self_check_ranks(c), t, st, false, "
    "\"all_gather\",\n"
    "                      [&] { return all_gather(s, r, n, t, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclAllGather(in, want, n, t, c, "
    "st); });\n"
    "}\n"
    "// prefetch_next's form: a prefetched gather is compared like any other,\n"
    "// so it lands in its receive buffer (not read in place while checks are due)\n"
    "inline ncclResult_t checked_all_gather(PrefSite ps, const void* s, void* r, size_t n,\n"
    "                                       ncclDataType_t t, ncclComm_t c, cudaStream_t st) {\n"
    "  if (self_check_due()) ps.reads = 0;\n"
    "  return self_checked(s, n * dtype_size(t), r, n * self_check_ranks(c), t, st, false, "
    "\"all_gather\",\n"
    "                      [&] { return all_gather(ps, s, r, n, t, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclAllGather(in, want, n, t, c, "
    "st); });\n"
    "}\n"
    "inline ncclResult_t checked_reduce_scatter(const void* s, void* r, size_t n,\n"
    "                                           ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,\n"
    "                                           cudaStream_t st) {\n"
    "  return self_checked(s, n * dtype_size(t) * self_check_ranks(c), r, n, t, st, false, "
    "\"reduce_scatter\",\n"
    "                      [&] { return reduce_scatter(s, r, n, t, op, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclReduceScatter(in, want, n, t, "
    "op, c, st); });\n"
    "}\n"
    "// the producer split's forms: the input is copied (and the stream waited\n"
    "// for) before the ranges are reduced on the site's side stream\n"
    "inline ncclResult_t checked_all_reduce(ProduceSite ps, const void* s, void* r, size_t n,\n"
    "                                       ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,\n"
    "                                       cudaStream_t st) {\n"
    "  return self_checked(s, n * dtype_size(t), r, n, t, st, true, \"all_reduce\",\n"
    "                      [&] { return all_reduce(ps, s, r, n, t, op, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclAllReduce(in, want, n, t, op, "
    "c, st); });\n"
    "}\n"
    "inline ncclResult_t checked_reduce_scatter(ProduceSite ps, const void* s, void* r, size_t n,\n"
    "                                           ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,\n"
    "                                           cudaStream_t st) {\n"
    "  return self_checked(s, n * dtype_size(t) * self_check_ranks(c), r, n, t, st, true, "
    "\"reduce_scatter\",\n"
    "                      [&] { return reduce_scatter(ps, s, r, n, t, op, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclReduceScatter(in, want, n, t, "
    "op, c, st); });\n"
    "}\n"
    "inline ncclResult_t checked_broadcast(const void* s, void* r, size_t n, ncclDataType_t t,\n"
    "                                      int root, ncclComm_t c, cudaStream_t st) {\n"
    "  return self_checked(comm_rank(c) == root ? s : nullptr, n * dtype_size(t), r, n, t, st, "
    "false, \"broadcast\",\n"
    "                      [&] { return broadcast(s, r, n, t, root, c, st); },\n"
    "                      [&](void* in, void* want) { return ::ncclBroadcast(in, want, n, t, "
    "root, c, st); });\n"
    "}\n"
    "inline ncclResult_t checked_bcast(void* b, size_t n, ncclDataType_t t, int root,\n"
    "                                  ncclComm_t c, cudaStream_t st) {\n"
    "  return checked_broadcast(b, b, n, t, root, c, st);\n"
    "}\n"
    "}  // namespace cuco_tx\n";

int cuco_tx_self_check(char **program, int *added, cuco_err *e)
{
    static const char *const calls[] = {"all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast",  "bcast",      NULL};
    static const char *const unchecked[] = {"cuco_tx::all_to_all(", "cuco_tx::gather(",
                                            "cuco_tx::scatter(",    "cuco_tx::send(",
                                            "cuco_tx::recv(",       NULL};
    *added = 0;
    if (strstr(*program, "#define CUCO_TX_GEMM_SPLIT 1"))
        return 0; /* the split schedule's all-gather has no checked form */
    /* the glue's last line (its knob annotations may differ from the
     * embedded text: glue_knobs.c) */
    static const char glue_end[] = "// cuco_tx: end of the glue\n";
    const char *at = strstr(*program, glue_end);
    if (!at)
        return 0;
    size_t pos = (size_t)(at - *program) + strlen(glue_end);
    for (const char *const *u = unchecked; *u; u++)
        if (strstr(*program + pos, *u))
            return 0; /* calls without a host NCCL twin here: not checked */
    cuco_buf out = CUCO_BUF_INIT;
    cuco_buf_append(&out, *program, pos);
    cuco_buf_puts(&out, self_check_glue);
    for (const char *p = *program + pos; *p;) {
        const char *hit = NULL, *name = NULL;
        for (const char *const *c = calls; *c; c++) {
            char *needle = cuco_sprintf("cuco_tx::%s(", *c);
            const char *h = needle ? strstr(p, needle) : NULL;
            free(needle);
            if (h && (!hit || h < hit)) {
                hit = h;
                name = *c;
            }
        }
        if (!hit) {
            cuco_buf_puts(&out, p);
            break;
        }
        cuco_buf_append(&out, p, (size_t)(hit - p));
        cuco_buf_printf(&out, "cuco_tx::checked_%s(", name);
        p = hit + strlen("cuco_tx::(") + strlen(name);
        (*added)++;
    }
    char *text = cuco_buf_detach(&out);
    if (!text)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (*added == 0) {
        free(text);
        return 0;
    }
    free(*program);
    *program = text;
    return 0;
}

int cuco_tx_have_gpu(void)
{
    if (access("/dev/nvidia0", F_OK) == 0)
        return 1;
    char *smi = cuco_which("nvidia-smi");
    int yes = smi != NULL;
    free(smi);
    return yes;
}

int cuco_tx_make_diff(const char *seed_path, const char *prog_path, const char *label, char **out,
                      cuco_err *e)
{
    char *la = cuco_sprintf("a/%s", label), *lb = cuco_sprintf("b/%s", label);
    const char *argv[] = {"diff", "-u", "--label", la, "--label", lb, seed_path, prog_path, NULL};
    cuco_proc_opts po;
    memset(&po, 0, sizeof(po));
    po.argv = argv;
    po.timeout_s = 30;
    po.capture_cap = 64u << 20;
    cuco_proc_result pr;
    int rc =
        (la && lb) ? cuco_proc_run(&po, &pr, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(la);
    free(lb);
    if (rc != 0)
        return cuco_err_prefix(e, "diff");
    if (!pr.exited || pr.exit_code > 1) {
        rc = cuco_err_set(e, CUCO_EIO, "diff failed: %s", pr.err ? pr.err : "");
        cuco_proc_result_free(&pr);
        return rc;
    }
    *out = cuco_strdup(pr.out ? pr.out : "");
    cuco_proc_result_free(&pr);
    return *out ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

int cuco_tx_write_report(const char *gen0, const json_t *rep, const char *md, char **report_json,
                         cuco_err *e)
{
    char *jtext = json_dumps(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char *jpath = cuco_path_join(gen0, "transform_report.json");
    char *mpath = cuco_path_join(gen0, "transform_report.md");
    int rc = (jtext && jpath && mpath) ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rc == 0)
        rc = cuco_fs_write(jpath, jtext, strlen(jtext), e);
    if (rc == 0)
        rc = cuco_fs_write(mpath, md, strlen(md), e);
    if (rc == 0 && report_json) {
        *report_json = jtext;
        jtext = NULL;
    }
    free(jtext);
    free(jpath);
    free(mpath);
    return rc;
}

json_t *cuco_tx_eval_json(const cuco_eval_result *r)
{
    json_t *o = json_pack("{s:s, s:i, s:s}", "status", cuco_eval_status_name(r->status), "level",
                          r->level, "hash", r->program_hash);
    if (r->level >= 3)
        json_object_set_new(o, "time_ms", json_real(r->time_ms));
    if (r->excerpt)
        json_object_set_new(o, "excerpt", json_string(r->excerpt));
    return o;
}

double cuco_tx_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cuco_tx_insert_root(struct cuco_db *db, const cuco_tx_root *root, int64_t *prog_id, cuco_err *e)
{
    char *knobs = NULL;
    cuco_err ke = CUCO_ERR_INIT; /* a program without knobs is still a root */
    cuco_knobs_json(root->program, &knobs, &ke);
    cuco_err_clear(&ke);
    char hash[17];
    cuco_hash_hex(root->program, strlen(root->program), hash);
    cuco_db_program p;
    memset(&p, 0, sizeof p);
    p.run_id = root->run_id;
    p.code = (char *)root->program;
    p.code_hash = hash;
    p.mutator = (char *)root->mutator;
    p.patch_type = (char *)root->patch_type;
    p.description = (char *)root->description;
    p.status = (char *)root->status;
    p.score = root->seed_ms > 0 && root->time_ms > 0 ? root->seed_ms / root->time_ms : -1;
    p.time_ms = root->time_ms > 0 ? root->time_ms : -1;
    p.metrics_json = (char *)root->metrics_json;
    p.knobs_json = knobs;
    p.created_at = cuco_tx_now_s();
    int rc = db_program_insert(db, &p, prog_id, e);
    free(knobs);
    return rc;
}

/* The end of the string or character literal, or comment, that starts at
 * q (after from, before end); q itself when none starts there. A `'` after
 * a digit or a name's character is a digit separator (`1'024`); a raw
 * string (`R"x(...)x"`) ends at its delimiter; a `//` comment at end. */
const char *cuco_tx_literal_end(const char *from, const char *q, const char *end)
{
    if (*q == '\'' && q > from && cuco_tx_ident_char(q[-1]))
        return q;
    if (*q == '"' && q > from && q[-1] == 'R') {
        const char *open = q + 1;
        while (open < end && *open != '(')
            open++;
        size_t dl = (size_t)(open - q - 1);
        for (const char *r = open; r + dl + 1 < end; r++)
            if (*r == ')' && memcmp(r + 1, q + 1, dl) == 0 && r[dl + 1] == '"')
                return r + dl + 2;
        return end;
    }
    if (*q == '"' || *q == '\'') {
        const char *r = q + 1;
        while (r < end && *r != *q)
            r += *r == '\\' ? 2 : 1;
        return r < end ? r + 1 : end;
    }
    if (q + 1 < end && q[0] == '/' && q[1] == '/')
        return end;
    if (q + 1 < end && q[0] == '/' && q[1] == '*') {
        const char *r = q + 2;
        while (r + 1 < end && !(r[0] == '*' && r[1] == '/'))
            r++;
        return r + 1 < end ? r + 2 : end;
    }
    return q;
}

const char *cuco_tx_next_name(const char *from, const char *q, const char *end, size_t *len)
{
    while (q < end) {
        const char *skip = cuco_tx_literal_end(from, q, end);
        if (skip != q) {
            q = skip;
            continue;
        }
        if (!cuco_tx_ident_char(*q)) {
            q++;
            continue;
        }
        const char *w = q;
        while (q < end && cuco_tx_ident_char(*q))
            q++;
        if (*w >= '0' && *w <= '9')
            continue;
        *len = (size_t)(q - w);
        return w;
    }
    return NULL;
}

const char *cuco_tx_define_name(const char *after, const char *end, size_t *len)
{
    while (after < end && (*after == ' ' || *after == '\t'))
        after++;
    const char *q = after;
    while (q < end && cuco_tx_ident_char(*q))
        q++;
    *len = (size_t)(q - after);
    return after;
}
