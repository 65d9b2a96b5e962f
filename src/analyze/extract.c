/* extract.c: finds NCCL, CUDA and cuBLAS calls in lexed sources and builds
 * the analysis JSON (schema: docs/analyze.md).
 *
 * The scan works on tokens with comments and preprocessor lines removed, so
 * calls in comments and strings are never seen. It keeps a brace stack to
 * know the enclosing function and loops, finds each call's arguments and the
 * full statement around it (what a rewriter replaces), resolves buffer
 * expressions to base variable names, and builds a per-function dependency
 * graph from buffer use, stream order and event waits.
 */
#include "cuco/analyze.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/fs.h"
#include "cuco/grow.h"

struct src_file {
    char *path;
    char *text;
    size_t len;
    cuco_lex lx;
    size_t *sig; /* indices of code tokens (no comments, no preprocessor) */
    size_t nsig;
};

#define T(F, k) (&(F)->lx.toks[(F)->sig[(k)]])

static int tis(const struct src_file *F, size_t k, const char *s)
{
    return k < F->nsig && cuco_tok_is(&F->lx, T(F, k), s);
}

static int tident(const struct src_file *F, size_t k)
{
    return k < F->nsig && T(F, k)->kind == CUCO_TOK_IDENT;
}

static char *ttext(const struct src_file *F, size_t k)
{
    return cuco_strndup(F->text + T(F, k)->off, T(F, k)->len);
}

/* Source text from token a to token b inclusive, whitespace runs collapsed. */
static char *range_text(const struct src_file *F, size_t a, size_t b)
{
    cuco_buf out = CUCO_BUF_INIT;
    if (a > b || b >= F->nsig)
        return cuco_strdup("");
    size_t s = T(F, a)->off, e = T(F, b)->off + T(F, b)->len;
    int space = 0;
    for (size_t i = s; i < e; i++) {
        char c = F->text[i];
        if (isspace((unsigned char)c)) {
            space = 1;
            continue;
        }
        if (space && out.len)
            cuco_buf_putc(&out, ' ');
        space = 0;
        cuco_buf_putc(&out, c);
    }
    return cuco_buf_detach(&out);
}

static void end_pos(const struct src_file *F, const cuco_tok *t, int *line, int *col)
{
    *line = t->line;
    *col = t->col;
    for (size_t i = 0; i < t->len; i++) {
        if (F->text[t->off + i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* {start, end (exclusive byte offsets), line, col, end_line, end_col} */
static json_t *span_json(const struct src_file *F, size_t a, size_t b)
{
    const cuco_tok *ta = T(F, a), *tb = T(F, b);
    int el, ec;
    end_pos(F, tb, &el, &ec);
    return json_pack("{s:I,s:I,s:i,s:i,s:i,s:i}", "start", (json_int_t)ta->off, "end",
                     (json_int_t)(tb->off + tb->len), "line", ta->line, "col", ta->col, "end_line",
                     el, "end_col", ec);
}

/* Index of the token closing the group opened at k ((, [, {), or nsig. */
static size_t match_close(const struct src_file *F, size_t k)
{
    int depth = 0;
    for (size_t i = k; i < F->nsig; i++) {
        const cuco_tok *t = T(F, i);
        if (t->kind != CUCO_TOK_PUNCT || t->len != 1)
            continue;
        char c = F->text[t->off];
        if (c == '(' || c == '[' || c == '{')
            depth++;
        else if (c == ')' || c == ']' || c == '}') {
            if (--depth == 0)
                return i;
        }
    }
    return F->nsig;
}

/* Index of the '<' matching the '>' at k (template arguments), or k. */
static size_t match_angle_back(const struct src_file *F, size_t k)
{
    int depth = 0;
    for (size_t i = k + 1; i-- > 0;) {
        if (tis(F, i, ">"))
            depth++;
        else if (tis(F, i, ">>"))
            depth += 2;
        else if (tis(F, i, "<")) {
            if (--depth == 0)
                return i;
        } else if (tis(F, i, ";") || tis(F, i, "{") || tis(F, i, "}"))
            break;
    }
    return k;
}

struct arg_range {
    size_t a, b; /* inclusive token range; a > b when empty */
};

/* Splits the arguments between open (a '(' or '<<<') and close. */
static size_t split_args(const struct src_file *F, size_t open, size_t close,
                         struct arg_range **out)
{
    size_t n = 0, cap = 4;
    struct arg_range *v = malloc(cap * sizeof *v);
    if (!v) {
        *out = NULL;
        return 0;
    }
    size_t start = open + 1;
    int depth = 0;
    for (size_t i = open + 1; i <= close && i < F->nsig; i++) {
        const cuco_tok *t = T(F, i);
        int at_end = (i == close);
        if (!at_end && t->kind == CUCO_TOK_PUNCT && t->len == 1) {
            char c = F->text[t->off];
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}')
                depth--;
        }
        if (at_end || (depth == 0 && tis(F, i, ","))) {
            if (at_end && start == close && n == 0)
                break; /* no arguments */
            if (CUCO_GROW(v, cap, n + 1, 4) < 0)
                break;
            v[n].a = start;
            v[n].b = i - 1;
            n++;
            start = i + 1;
        }
    }
    *out = v;
    return n;
}

static int is_type_word(const char *s)
{
    static const char *const words[] = {
        "const",   "volatile",      "void",     "char",   "short",    "int",     "long",
        "float",   "double",        "unsigned", "signed", "struct",   "size_t",  "half",
        "__half",  "__nv_bfloat16", "uint8_t",  "int8_t", "uint16_t", "int16_t", "uint32_t",
        "int32_t", "uint64_t",      "int64_t",  "bool",   "auto",     NULL};
    for (int i = 0; words[i]; i++)
        if (!strcmp(s, words[i]))
            return 1;
    return 0;
}

/* Resolves a buffer expression to its base variable ("&x", "(float*)x + 4",
 * "static_cast<T*>(p)", "bufs[i]", "s.ptr", "v.data()", "thrust::raw_pointer_cast(v.data())").
 * Caller frees; NULL
 * when there is none (a literal, nullptr, an empty expression). */
static char *resolve_base(const struct src_file *F, size_t a, size_t b)
{
    {
        /* "c ? p : nullptr": the first branch that names a buffer */
        int d = 0;
        size_t q = b + 1, colon = b + 1;
        for (size_t k = a; k <= b && k < F->nsig && colon > b; k++) {
            if (tis(F, k, "(") || tis(F, k, "[") || tis(F, k, "{"))
                d++;
            else if (tis(F, k, ")") || tis(F, k, "]") || tis(F, k, "}"))
                d--;
            else if (d == 0 && tis(F, k, "?") && q > b)
                q = k;
            else if (d == 0 && tis(F, k, ":") && q <= b)
                colon = k;
        }
        if (q <= b && colon <= b && q > a) {
            char *first = q + 1 < colon ? resolve_base(F, q + 1, colon - 1) : NULL;
            return first ? first : (colon < b ? resolve_base(F, colon + 1, b) : NULL);
        }
    }
    size_t i = a;
    while (i <= b && i < F->nsig) {
        if (tis(F, i, "&") || tis(F, i, "*") || tis(F, i, "+") || tis(F, i, "-")) {
            i++;
            continue;
        }
        if (tis(F, i, "static_cast") || tis(F, i, "reinterpret_cast") || tis(F, i, "const_cast") ||
            tis(F, i, "dynamic_cast")) {
            i++;
            int depth = 0;
            while (i <= b) {
                if (tis(F, i, "<"))
                    depth++;
                else if (tis(F, i, ">"))
                    depth--;
                else if (tis(F, i, ">>"))
                    depth -= 2;
                i++;
                if (depth <= 0)
                    break;
            }
            continue;
        }
        if (tis(F, i, "(")) {
            size_t c = match_close(F, i);
            int typeish = c < b;
            for (size_t k = i + 1; typeish && k < c; k++) {
                const cuco_tok *t = T(F, k);
                if (!(t->kind == CUCO_TOK_IDENT || tis(F, k, "*") || tis(F, k, "::") ||
                      tis(F, k, "<") || tis(F, k, ">") || tis(F, k, "&") || tis(F, k, ",")))
                    typeish = 0;
            }
            /* A cast "(T*)x" needs a pointer star or a type word inside. */
            if (typeish) {
                int looks = 0;
                for (size_t k = i + 1; k < c; k++) {
                    char *w = ttext(F, k);
                    if (w && (!strcmp(w, "*") || is_type_word(w)))
                        looks = 1;
                    free(w);
                }
                typeish = looks;
            }
            i = typeish ? c + 1 : i + 1;
            continue;
        }
        break;
    }
    if (i > b || !tident(F, i))
        return NULL;
    {
        /* thrust::raw_pointer_cast(v.data()), std::addressof(x): the pointer is the argument's */
        size_t q = i;
        while (q + 2 <= b && tis(F, q + 1, "::") && tident(F, q + 2))
            q += 2;
        if (q + 1 <= b && tis(F, q + 1, "(") &&
            (tis(F, q, "raw_pointer_cast") || tis(F, q, "addressof") || tis(F, q, "to_address"))) {
            size_t c = match_close(F, q + 1);
            if (c <= b && c > q + 2)
                return resolve_base(F, q + 2, c - 1);
        }
    }
    char *first = ttext(F, i);
    if (!first || !strcmp(first, "nullptr") || !strcmp(first, "NULL") || !strcmp(first, "sizeof")) {
        free(first);
        return NULL;
    }
    free(first);
    /* ident ((. | -> | ::) ident)* ; a trailing method call is dropped; a
     * member of an array element keeps the member: "ls[i].out" -> "ls[].out". */
    size_t end = i;
    cuco_buf name = CUCO_BUF_INIT;
    char *head = ttext(F, i);
    cuco_buf_puts(&name, head ? head : "");
    free(head);
    for (;;) {
        size_t k = end + 1, subscripts = 0;
        while (k <= b && tis(F, k, "[")) {
            size_t c = match_close(F, k);
            if (c > b)
                break;
            k = c + 1;
            subscripts++;
        }
        if (!(k + 1 <= b && (tis(F, k, ".") || tis(F, k, "->") || tis(F, k, "::")) &&
              tident(F, k + 1)))
            break;
        if (k + 2 <= b && tis(F, k + 2, "(") && !tis(F, k, "::"))
            break;
        for (size_t n = 0; n < subscripts; n++)
            cuco_buf_puts(&name, "[]");
        char *sep = ttext(F, k), *member = ttext(F, k + 1);
        cuco_buf_puts(&name, sep ? sep : "");
        cuco_buf_puts(&name, member ? member : "");
        free(sep);
        free(member);
        end = k + 1;
    }
    return cuco_buf_detach(&name);
}

/* ---- API tables ------------------------------------------------------ */

enum api_class {
    API_COLL,
    API_P2P,
    API_GROUP_START,
    API_GROUP_END,
    API_COMM,
    API_ALLOC,
    API_STREAM,
    API_EVENT,
    API_SYNC,
    API_MEMCPY,
    API_COMPUTE,
    API_LAUNCH,
    API_CUBLAS_STREAM,
};

struct api {
    const char *name;
    enum api_class cls;
    const char *kind;
    const char *fields[20]; /* NULL-terminated positional names */
};

static const struct api apis[] = {
    {"ncclAllReduce",
     API_COLL,
     "all_reduce",
     {"sendbuff", "recvbuff", "count", "datatype", "op", "comm", "stream"}},
    {"ncclBroadcast",
     API_COLL,
     "broadcast",
     {"sendbuff", "recvbuff", "count", "datatype", "root", "comm", "stream"}},
    {"ncclBcast", API_COLL, "broadcast", {"buff", "count", "datatype", "root", "comm", "stream"}},
    {"ncclReduce",
     API_COLL,
     "reduce",
     {"sendbuff", "recvbuff", "count", "datatype", "op", "root", "comm", "stream"}},
    {"ncclAllGather",
     API_COLL,
     "all_gather",
     {"sendbuff", "recvbuff", "count", "datatype", "comm", "stream"}},
    {"ncclReduceScatter",
     API_COLL,
     "reduce_scatter",
     {"sendbuff", "recvbuff", "count", "datatype", "op", "comm", "stream"}},
    {"ncclAlltoAll",
     API_COLL,
     "all_to_all",
     {"sendbuff", "recvbuff", "count", "datatype", "comm", "stream"}},
    {"ncclGather",
     API_COLL,
     "gather",
     {"sendbuff", "recvbuff", "count", "datatype", "root", "comm", "stream"}},
    {"ncclScatter",
     API_COLL,
     "scatter",
     {"sendbuff", "recvbuff", "count", "datatype", "root", "comm", "stream"}},
    {"ncclSend", API_P2P, "send", {"sendbuff", "count", "datatype", "peer", "comm", "stream"}},
    {"ncclRecv", API_P2P, "recv", {"recvbuff", "count", "datatype", "peer", "comm", "stream"}},
    {"ncclGroupStart", API_GROUP_START, "group_start", {NULL}},
    {"ncclGroupEnd", API_GROUP_END, "group_end", {NULL}},
    {"ncclGetUniqueId", API_COMM, "get_unique_id", {"id"}},
    {"ncclCommInitRank", API_COMM, "init_rank", {"comm", "nranks", "id", "rank"}},
    {"ncclCommInitRankConfig", API_COMM, "init_rank", {"comm", "nranks", "id", "rank", "config"}},
    {"ncclCommInitAll", API_COMM, "init_all", {"comm", "ndev", "devlist"}},
    {"ncclCommSplit", API_COMM, "split", {"parent", "color", "key", "comm", "config"}},
    {"ncclCommDestroy", API_COMM, "destroy", {"comm"}},
    {"ncclCommFinalize", API_COMM, "finalize", {"comm"}},
    {"ncclCommAbort", API_COMM, "abort", {"comm"}},
    {"cudaMalloc", API_ALLOC, "cudaMalloc", {"ptr", "size"}},
    {"cudaMallocAsync", API_ALLOC, "cudaMallocAsync", {"ptr", "size", "stream"}},
    {"cudaMallocManaged", API_ALLOC, "cudaMallocManaged", {"ptr", "size", "flags"}},
    {"cudaMallocHost", API_ALLOC, "cudaMallocHost", {"ptr", "size"}},
    {"cudaHostAlloc", API_ALLOC, "cudaHostAlloc", {"ptr", "size", "flags"}},
    {"ncclMemAlloc", API_ALLOC, "ncclMemAlloc", {"ptr", "size"}},
    {"malloc", API_ALLOC, "malloc", {"size"}},
    {"calloc", API_ALLOC, "calloc", {"n", "size"}},
    {"cudaStreamCreate", API_STREAM, "stream_create", {"stream"}},
    {"cudaStreamCreateWithFlags", API_STREAM, "stream_create", {"stream", "flags"}},
    {"cudaStreamCreateWithPriority", API_STREAM, "stream_create", {"stream", "flags", "priority"}},
    {"cudaStreamDestroy", API_STREAM, "stream_destroy", {"stream"}},
    {"cudaEventCreate", API_EVENT, "event_create", {"event"}},
    {"cudaEventCreateWithFlags", API_EVENT, "event_create", {"event", "flags"}},
    {"cudaEventRecord", API_EVENT, "event_record", {"event", "stream"}},
    {"cudaStreamWaitEvent", API_EVENT, "stream_wait_event", {"stream", "event", "flags"}},
    {"cudaStreamSynchronize", API_SYNC, "stream_sync", {"stream"}},
    {"cudaDeviceSynchronize", API_SYNC, "device_sync", {NULL}},
    {"cudaEventSynchronize", API_SYNC, "event_sync", {"event"}},
    {"cudaStreamBeginCapture", API_SYNC, "capture_begin", {"stream", "mode"}},
    {"cudaStreamEndCapture", API_SYNC, "capture_end", {"stream", "graph"}},
    {"cudaGraphLaunch", API_SYNC, "graph_launch", {"graph_exec", "stream"}},
    {"cudaMemcpy", API_MEMCPY, "memcpy", {"dst", "src", "size", "kind"}},
    {"cudaMemcpyAsync", API_MEMCPY, "memcpy", {"dst", "src", "size", "kind", "stream"}},
    {"cudaMemset", API_MEMCPY, "memset", {"dst", "value", "size"}},
    {"cudaMemsetAsync", API_MEMCPY, "memset", {"dst", "value", "size", "stream"}},
    {"cudaMemcpyPeerAsync",
     API_MEMCPY,
     "memcpy",
     {"dst", "dstDevice", "src", "srcDevice", "size", "stream"}},
    {"cublasSetStream", API_CUBLAS_STREAM, "cublas_set_stream", {"handle", "stream"}},
    {"cublasGemmEx",
     API_COMPUTE,
     "gemm",
     {"handle", "transa", "transb", "m", "n", "k", "alpha", "A", "Atype", "lda", "B", "Btype",
      "ldb", "beta", "C", "Ctype", "ldc", "computeType", "algo"}},
    {"cublasLtMatmul",
     API_COMPUTE,
     "gemm",
     {"handle", "desc", "alpha", "A", "Adesc", "B", "Bdesc", "beta", "C", "Cdesc", "D", "Ddesc",
      "algo", "workspace", "workspaceSize", "stream"}},
    {"cudaLaunchKernel", API_LAUNCH, "launch", {"func", "grid", "block", "args", "smem", "stream"}},
    {"cudaLaunchCooperativeKernel",
     API_LAUNCH,
     "launch",
     {"func", "grid", "block", "args", "smem", "stream"}},
    {NULL, API_COLL, NULL, {NULL}},
};

/* cublas<t>gemm, cublas<t>gemmBatched, cublas<t>gemmStridedBatched ... */
static const struct api cublas_gemm = {"cublas?gemm",
                                       API_COMPUTE,
                                       "gemm",
                                       {"handle", "transa", "transb", "m", "n", "k", "alpha", "A",
                                        "lda", "B", "ldb", "beta", "C", "ldc"}};

static const struct api *find_api(const char *name)
{
    for (int i = 0; apis[i].name; i++)
        if (!strcmp(apis[i].name, name))
            return &apis[i];
    if (!strncmp(name, "cublas", 6) && strstr(name, "gemm") && !strstr(name, "Ex") &&
        !strstr(name, "Lt"))
        return &cublas_gemm;
    return NULL;
}

static int field_index(const struct api *a, const char *f)
{
    for (int i = 0; i < 20 && a->fields[i]; i++)
        if (!strcmp(a->fields[i], f))
            return i;
    return -1;
}

/* ---- analysis state --------------------------------------------------- */

struct kernel_sig {
    char *name;
    int nparams;
    int *ptr_kind; /* per param: 0 scalar, 1 const pointer (read), 2 pointer (read/write) */
};

struct node {
    char *function;
    char *file;
    char *stream;
    char **reads, **writes;
    size_t nreads, nwrites;
    int file_idx;
    double pos; /* program order: a node's id, a call node sits between two of them */
};

struct event_mark {
    char *event;
    char *function;
    long node; /* last node on the recording stream, -1 if none */
};

struct pending_wait {
    char *stream;
    char *function;
    long node;
};

struct analysis {
    json_t *root, *files, *communicators, *collectives, *groups, *comm_calls, *allocations,
        *launches, *streams, *events, *syncs, *memcpys, *macros, *nodes, *edges, *notes;
    struct kernel_sig *kernels;
    size_t nkernels;
    struct node *graph;
    size_t ngraph;
    struct event_mark *marks;
    size_t nmarks;
    struct pending_wait *waits;
    size_t nwaits;
    json_t *cublas_streams; /* handle -> stream text */
    json_t
        *call_sites; /* callee -> [{file, line, function, loop}] for calls of non-API functions */
    json_t *aliases; /* function -> [[name, name]]: pointer assignments and swaps in it */
    json_t *params;  /* function -> [parameter names], from its definition */
    json_t *calls;   /* [{callee, function, file, line, before, args: [base|null], texts}] */
    long group_id;
};

static void note(struct analysis *A, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(struct analysis *A, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    cuco_buf b = CUCO_BUF_INIT;
    va_start(ap, fmt);
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    json_array_append_new(A->notes, json_pack("{s:s,s:i,s:s}", "file", file, "line", line,
                                              "message", cuco_buf_str(&b)));
    cuco_buf_free(&b);
}

static char *norm_stream(const char *text)
{
    if (!text || !*text || !strcmp(text, "0") || !strcmp(text, "nullptr") ||
        !strcmp(text, "NULL") || !strcmp(text, "cudaStreamDefault") ||
        !strcmp(text, "cudaStreamLegacy") || !strcmp(text, "(cudaStream_t)0"))
        return cuco_strdup("default");
    return cuco_strdup(text);
}

/* ---- per-file scan ---------------------------------------------------- */

enum brace_kind { BR_OTHER, BR_FUNCTION, BR_LOOP };

struct brace {
    enum brace_kind kind;
    char *name;      /* function name or loop keyword */
    int line;        /* loop or function line */
    size_t loop_tok; /* sig index of the loop keyword */
};

struct scan {
    struct analysis *A;
    struct src_file *F;
    int file_idx;
    struct brace *br;
    size_t nbr, cbr;
    struct brace single[64]; /* loops over a single statement; depth bounded, extra ones ignored */
    size_t nsingle_loops;
    size_t single_depth[64];
    /* open ncclGroupStart */
    int group_depth;
    long group_id;
    size_t group_start_tok;
    json_t *group;
};

static const char *cur_function(const struct scan *S)
{
    for (size_t i = S->nbr; i-- > 0;)
        if (S->br[i].kind == BR_FUNCTION)
            return S->br[i].name;
    return NULL;
}

/* Innermost loop around the current position, or NULL. */
static const struct brace *cur_loop(const struct scan *S)
{
    const struct brace *best = NULL;
    for (size_t i = S->nbr; i-- > 0;)
        if (S->br[i].kind == BR_LOOP) {
            best = &S->br[i];
            break;
        }
    if (S->nsingle_loops) {
        const struct brace *s = &S->single[S->nsingle_loops - 1];
        if (!best || s->loop_tok > best->loop_tok)
            best = s;
    }
    return best;
}

static json_t *loop_json(const struct brace *l)
{
    if (!l)
        return json_null();
    return json_pack("{s:s,s:i}", "kind", l->name, "line", l->line);
}

/* Start of the statement containing token k: after the last ; { } at the
 * same nesting level, or after a control header (if/for/while/switch (...)),
 * else, do. */
static size_t stmt_start(const struct src_file *F, size_t k)
{
    int depth = 0;
    for (size_t i = k; i-- > 0;) {
        const cuco_tok *t = T(F, i);
        if (t->kind == CUCO_TOK_PUNCT && t->len == 1) {
            char c = F->text[t->off];
            if (c == ')' || c == ']') {
                depth++;
                continue;
            }
            if (c == '(' || c == '[') {
                if (depth == 0)
                    return i + 1; /* inside an argument list: the call is the statement part */
                depth--;
                if (depth == 0 && c == '(' && i > 0 &&
                    (tis(F, i - 1, "if") || tis(F, i - 1, "for") || tis(F, i - 1, "while") ||
                     tis(F, i - 1, "switch"))) {
                    /* we just walked back over a control header: the statement starts after it */
                    size_t close = match_close(F, i);
                    return close < k ? close + 1 : k; /* unbalanced input: the call itself */
                }
                continue;
            }
            if (depth == 0 && (c == ';' || c == '{' || c == '}'))
                return i + 1;
        }
        if (depth == 0 && (tis(F, i, "else") || tis(F, i, "do")))
            return i + 1;
    }
    return 0;
}

/* Span start for a call used as an argument of a wrapper (NCCLCHECK(...)):
 * walk out through enclosing calls to the real statement start. */
static size_t full_stmt_start(const struct src_file *F, size_t k)
{
    size_t s = stmt_start(F, k);
    while (s > 0 && tis(F, s - 1, "(")) {
        size_t up = s - 1;
        if (up > 0 && (tis(F, up - 1, "if") || tis(F, up - 1, "while") || tis(F, up - 1, "for") ||
                       tis(F, up - 1, "switch")))
            break; /* the call is a condition; keep the call itself */
        s = stmt_start(F, up);
    }
    return s;
}

/* End of the statement that contains the call ending at close: the next ';'
 * at the same level, or the last token before an unmatched closer. */
static size_t stmt_end(const struct src_file *F, size_t from)
{
    int depth = 0;
    for (size_t i = from; i < F->nsig; i++) {
        const cuco_tok *t = T(F, i);
        if (t->kind == CUCO_TOK_PUNCT && t->len == 1) {
            char c = F->text[t->off];
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}') {
                if (depth == 0)
                    return i > from ? i - 1 : from; /* "i - 1" of the first token would wrap */
                depth--;
            } else if (c == ';' && depth == 0)
                return i;
        }
    }
    return F->nsig - 1;
}

/* The generic record of a call: api, file, spans, function, loop, args. */
static json_t *call_record(struct scan *S, const char *api, size_t name_tok, size_t open,
                           size_t close, struct arg_range *args, size_t nargs)
{
    const struct src_file *F = S->F;
    size_t ss = full_stmt_start(F, name_tok);
    if (ss > name_tok)
        ss = name_tok;
    size_t se = stmt_end(F, ss);
    if (se < close)
        se = stmt_end(F, close + 1);
    const char *fn = cur_function(S);
    json_t *jargs = json_array();
    for (size_t i = 0; i < nargs; i++) {
        char *text = range_text(F, args[i].a, args[i].b);
        json_t *ja = json_pack("{s:s}", "text", text ? text : "");
        if (args[i].a <= args[i].b)
            json_object_set_new(ja, "span", span_json(F, args[i].a, args[i].b));
        free(text);
        json_array_append_new(jargs, ja);
    }
    (void)open;
    /* The wrapper (macro or function) whose argument this call is. */
    json_t *wrapper = json_null();
    if (ss < name_tok && tident(F, ss) && tis(F, ss + 1, "(") && ss + 1 < name_tok) {
        char *w = ttext(F, ss);
        wrapper = json_string(w);
        free(w);
    }
    return json_pack("{s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "api", api, "file", F->path,
                     "line", T(F, name_tok)->line, "col", T(F, name_tok)->col, "span",
                     span_json(F, name_tok, close), "statement", span_json(F, ss, se), "function",
                     fn ? json_string(fn) : json_null(), "loop", loop_json(cur_loop(S)), "wrapper",
                     wrapper, "args", jargs);
}

static void add_fields(const struct src_file *F, json_t *rec, const struct api *a,
                       struct arg_range *args, size_t nargs)
{
    json_t *fields = json_object();
    for (size_t i = 0; i < nargs && i < 20 && a->fields[i]; i++) {
        char *text = range_text(F, args[i].a, args[i].b);
        char *base = resolve_base(F, args[i].a, args[i].b);
        json_object_set_new(fields, a->fields[i],
                            json_pack("{s:s,s:o}", "text", text ? text : "", "base",
                                      base ? json_string(base) : json_null()));
        free(text);
        free(base);
    }
    json_object_set_new(rec, "fields", fields);
}

static const char *field_base(json_t *rec, const char *f)
{
    json_t *v = json_object_get(json_object_get(json_object_get(rec, "fields"), f), "base");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *field_text(json_t *rec, const char *f)
{
    json_t *v = json_object_get(json_object_get(json_object_get(rec, "fields"), f), "text");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int str_list_add(char ***v, size_t *n, const char *s)
{
    if (!s)
        return 0;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s))
            return 0;
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return CUCO_ENOMEM;
    *v = nv;
    nv[(*n)++] = cuco_strdup(s);
    return 0;
}

/* Adds a graph node; returns its id. Edges are computed at the end. */
static long add_node(struct scan *S, json_t *rec, const char *kind, const char *label,
                     const char *stream, struct node *proto)
{
    struct analysis *A = S->A;
    struct node *g = realloc(A->graph, (A->ngraph + 1) * sizeof *g);
    if (!g)
        return -1;
    A->graph = g;
    struct node *n = &g[A->ngraph];
    *n = *proto;
    const char *fn = cur_function(S);
    n->function = cuco_strdup(fn ? fn : "");
    n->stream = norm_stream(stream);
    n->file_idx = S->file_idx;
    n->pos = (double)A->ngraph;
    long id = (long)A->ngraph++;
    json_t *jr = json_array(), *jw = json_array();
    for (size_t i = 0; i < n->nreads; i++)
        json_array_append_new(jr, json_string(n->reads[i]));
    for (size_t i = 0; i < n->nwrites; i++)
        json_array_append_new(jw, json_string(n->writes[i]));
    json_array_append_new(
        A->nodes, json_pack("{s:i,s:s,s:s,s:s,s:i,s:s,s:s,s:o,s:o}", "id", (int)id, "kind", kind,
                            "label", label, "file", S->F->path, "line",
                            (int)json_integer_value(json_object_get(rec, "line")), "function",
                            n->function, "stream", n->stream, "reads", jr, "writes", jw));
    json_object_set_new(rec, "node", json_integer(id));
    /* Streams that waited on an event: the event's node precedes this one. */
    for (size_t i = 0; i < A->nwaits; i++) {
        struct pending_wait *w = &A->waits[i];
        if (w->node >= 0 && !strcmp(w->stream, n->stream) && !strcmp(w->function, n->function)) {
            json_array_append_new(A->edges,
                                  json_pack("{s:i,s:i,s:s,s:s}", "from", (int)w->node, "to",
                                            (int)id, "kind", "event", "via", n->stream));
            w->node = -1;
        }
    }
    return id;
}

static void handle_group_end(struct scan *S, size_t name_tok, size_t close)
{
    if (S->group_depth <= 0) {
        note(S->A, S->F->path, T(S->F, name_tok)->line, "ncclGroupEnd without ncclGroupStart");
        return;
    }
    if (--S->group_depth > 0)
        return;
    json_t *g = S->group;
    json_object_set_new(g, "end",
                        span_json(S->F, full_stmt_start(S->F, name_tok),
                                  stmt_end(S->F, full_stmt_start(S->F, name_tok))));
    size_t nsend = 0, nrecv = 0, ncoll = 0, in_loop = 0;
    json_t *peers = json_object();
    json_t *members = json_object_get(g, "members");
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m)
    {
        json_t *c = json_array_get(S->A->collectives, (size_t)json_integer_value(m));
        const char *k = json_string_value(json_object_get(c, "kind"));
        if (!strcmp(k, "send"))
            nsend++;
        else if (!strcmp(k, "recv"))
            nrecv++;
        else
            ncoll++;
        if (json_is_true(json_object_get(c, "loop_in_group")))
            in_loop++;
        const char *peer = field_text(c, "peer");
        if (peer)
            json_object_set_new(peers, peer, json_true());
    }
    const char *cls;
    if (ncoll && (nsend || nrecv))
        cls = "grouped";
    else if (ncoll)
        cls = "grouped_collectives";
    else if (in_loop && nsend && nrecv)
        cls = "all_to_all";
    else if (nsend + nrecv >= 3 && json_object_size(peers) >= 2 && nsend && nrecv)
        cls = "all_to_all";
    else if (nsend || nrecv)
        cls = "point_to_point";
    else
        cls = "empty";
    json_object_set_new(g, "classification", json_string(cls));
    json_object_set_new(g, "sends", json_integer((json_int_t)nsend));
    json_object_set_new(g, "recvs", json_integer((json_int_t)nrecv));
    json_decref(peers);
    json_array_foreach(members, i, m)
    {
        json_t *c = json_array_get(S->A->collectives, (size_t)json_integer_value(m));
        json_object_set_new(c, "classification", json_string(cls));
    }
    json_array_append(S->A->groups, g);
    json_decref(g);
    S->group = NULL;
}

/* A collective or point-to-point call: its buffers, stream, communicator,
 * group, and its node of the dependency graph. */
static void on_comm_call(struct scan *S, const struct api *a, const char *name, json_t *rec,
                         const struct arg_range *args, size_t nargs, int line)
{
    struct src_file *F = S->F;
    struct analysis *A = S->A;
    struct node proto;
    memset(&proto, 0, sizeof proto);
    json_object_set_new(rec, "id", json_integer((json_int_t)json_array_size(A->collectives)));
    const char *st = field_text(rec, "stream");
    char *ns = norm_stream(st);
    json_object_set_new(rec, "stream", json_string(ns));
    free(ns);
    const char *comm = field_base(rec, "comm");
    json_object_set_new(rec, "comm", comm ? json_string(comm) : json_null());
    static const char *const bufs[] = {"sendbuff", "recvbuff", "buff"};
    for (int b = 0; b < 3; b++) {
        if (field_index(a, bufs[b]) < 0)
            continue;
        const char *base = field_base(rec, bufs[b]);
        if (!base)
            note(A, F->path, line, "%s: %s '%s' does not resolve to a variable", name, bufs[b],
                 field_text(rec, bufs[b]) ? field_text(rec, bufs[b]) : "(missing)");
        else if (b == 0)
            str_list_add(&proto.reads, &proto.nreads, base);
        else if (b == 1)
            str_list_add(&proto.writes, &proto.nwrites, base);
        else {
            str_list_add(&proto.reads, &proto.nreads, base);
            str_list_add(&proto.writes, &proto.nwrites, base);
        }
    }
    if ((size_t)nargs != (size_t)(field_index(a, "stream") + 1))
        note(A, F->path, line, "%s has %zu arguments, nccl.h declares %d", name, nargs,
             field_index(a, "stream") + 1);
    /* a data type or reduction computed by an expression (a traits member, a
     * mapping function) is known only at run time */
    static const char *const consts[] = {"datatype", "op"};
    for (int q = 0; q < 2; q++) {
        int fi = field_index(a, consts[q]);
        if (fi >= 0 && (size_t)fi < nargs && args[fi].a != args[fi].b)
            note(A, F->path, line,
                 "%s: %s '%s' is an expression, not an NCCL constant: its value is known "
                 "only at run time",
                 name, consts[q], field_text(rec, consts[q]));
    }
    if (S->group_depth > 0) {
        json_object_set_new(rec, "group", json_integer(S->group_id));
        const struct brace *l = cur_loop(S);
        json_object_set_new(rec, "loop_in_group",
                            json_boolean(l && l->loop_tok > S->group_start_tok));
        json_array_append_new(json_object_get(S->group, "members"),
                              json_integer((json_int_t)json_array_size(A->collectives)));
    } else {
        json_object_set_new(rec, "group", json_null());
        json_object_set_new(rec, "classification",
                            json_string(a->cls == API_P2P ? "point_to_point" : a->kind));
    }
    char *label = cuco_sprintf("%s(%s)", a->kind, comm ? comm : "?");
    add_node(S, rec, a->cls == API_P2P ? "p2p" : "collective", label ? label : a->kind, st, &proto);
    free(label);
    json_array_append(A->collectives, rec);
}

static void on_group_start(struct scan *S, json_t *rec, size_t k, int line)
{
    if (S->group_depth++ != 0)
        return;
    S->group_id = S->A->group_id++;
    S->group_start_tok = k;
    S->group =
        json_pack("{s:i,s:s,s:i,s:o,s:o,s:o}", "id", (int)S->group_id, "file", S->F->path, "line",
                  line, "function", cur_function(S) ? json_string(cur_function(S)) : json_null(),
                  "start", json_incref(json_object_get(rec, "statement")), "members", json_array());
}

static void on_alloc(struct scan *S, const struct api *a, const char *name, json_t *rec, size_t k,
                     int line)
{
    struct src_file *F = S->F;
    struct analysis *A = S->A;
    const char *var = field_base(rec, "ptr");
    char *owned = NULL;
    if (field_index(a, "ptr") < 0) {
        /* p = (T*)malloc(n): the variable left of '=' in the statement. */
        size_t ss = stmt_start(F, k);
        for (size_t i = k; i-- > ss;)
            if (tis(F, i, "=")) {
                for (size_t m = i; m-- > ss;)
                    if (tident(F, m)) {
                        owned = ttext(F, m);
                        break;
                    }
                break;
            }
        var = owned;
    }
    json_object_set_new(rec, "var", var ? json_string(var) : json_null());
    if (!var)
        note(A, F->path, line, "%s: cannot tell which variable receives the allocation", name);
    free(owned);
    json_array_append(A->allocations, rec);
}

/* cudaEventRecord marks the last node of its stream; cudaStreamWaitEvent
 * waits for the node its event marked. */
static void on_event(struct scan *S, const struct api *a, json_t *rec)
{
    struct analysis *A = S->A;
    const char *fn = cur_function(S) ? cur_function(S) : "";
    if (!strcmp(a->kind, "event_record")) {
        char *st = norm_stream(field_text(rec, "stream"));
        long last = -1;
        for (size_t i = A->ngraph; i-- > 0;)
            if (!strcmp(A->graph[i].stream, st) && !strcmp(A->graph[i].function, fn)) {
                last = (long)i;
                break;
            }
        struct event_mark *m = realloc(A->marks, (A->nmarks + 1) * sizeof *m);
        if (m) {
            A->marks = m;
            m[A->nmarks].event =
                cuco_strdup(field_base(rec, "event") ? field_base(rec, "event") : "?");
            m[A->nmarks].function = cuco_strdup(fn);
            m[A->nmarks].node = last;
            A->nmarks++;
        }
        free(st);
    } else if (!strcmp(a->kind, "stream_wait_event")) {
        const char *ev = field_base(rec, "event");
        long node = -1;
        for (size_t i = A->nmarks; ev && i-- > 0;)
            if (!strcmp(A->marks[i].event, ev) && !strcmp(A->marks[i].function, fn)) {
                node = A->marks[i].node;
                break;
            }
        struct pending_wait *w = realloc(A->waits, (A->nwaits + 1) * sizeof *w);
        if (w) {
            A->waits = w;
            w[A->nwaits].stream = norm_stream(field_text(rec, "stream"));
            w[A->nwaits].function = cuco_strdup(fn);
            w[A->nwaits].node = node;
            A->nwaits++;
        }
    }
    json_array_append(A->events, rec);
}

/* A library computation (cuBLAS) or a kernel launched through an API. */
static void on_launch(struct scan *S, const struct api *a, const char *name, json_t *rec, int line)
{
    struct src_file *F = S->F;
    struct analysis *A = S->A;
    struct node proto;
    memset(&proto, 0, sizeof proto);
    const char *st = field_text(rec, "stream");
    if (!st && field_base(rec, "handle"))
        st = json_string_value(json_object_get(A->cublas_streams, field_base(rec, "handle")));
    char *ns = norm_stream(st);
    json_object_set_new(rec, "stream", json_string(ns));
    free(ns);
    if (a->cls == API_COMPUTE) {
        static const char *const reads[] = {"A", "B", NULL};
        for (int i = 0; reads[i]; i++)
            str_list_add(&proto.reads, &proto.nreads, field_base(rec, reads[i]));
        const char *out = field_index(a, "D") >= 0 ? "D" : "C";
        if (field_index(a, "D") >= 0)
            str_list_add(&proto.reads, &proto.nreads, field_base(rec, "C"));
        str_list_add(&proto.writes, &proto.nwrites, field_base(rec, out));
        json_object_set_new(rec, "launch", json_string("library"));
    } else {
        const char *fnb = field_base(rec, "func");
        json_object_set_new(rec, "kernel", fnb ? json_string(fnb) : json_null());
        json_object_set_new(rec, "launch", json_string("api"));
        note(A, F->path, line, "%s: kernel arguments are passed through '%s'; buffers not resolved",
             name, field_text(rec, "args") ? field_text(rec, "args") : "?");
    }
    add_node(S, rec, a->cls == API_COMPUTE ? "compute" : "kernel", name, st, &proto);
    json_array_append(A->launches, rec);
}

static void handle_call(struct scan *S, const struct api *a, const char *name, size_t k,
                        size_t open, size_t close)
{
    struct src_file *F = S->F;
    struct analysis *A = S->A;
    struct arg_range *args = NULL;
    size_t nargs = split_args(F, open, close, &args);
    json_t *rec = call_record(S, name, k, open, close, args, nargs);
    add_fields(F, rec, a, args, nargs);
    json_object_set_new(rec, "kind", json_string(a->kind));
    int line = T(F, k)->line;

    switch (a->cls) {
    case API_COLL:
    case API_P2P:
        on_comm_call(S, a, name, rec, args, nargs, line);
        break;
    case API_GROUP_START:
        on_group_start(S, rec, k, line);
        break;
    case API_GROUP_END:
        handle_group_end(S, k, close);
        break;
    case API_COMM:
        json_array_append(A->comm_calls, rec);
        break;
    case API_ALLOC:
        on_alloc(S, a, name, rec, k, line);
        break;
    case API_STREAM:
        json_array_append(A->streams, rec);
        break;
    case API_EVENT:
        on_event(S, a, rec);
        break;
    case API_SYNC:
        if (!strcmp(a->kind, "capture_begin"))
            note(A, F->path, line,
                 "%s: the work enqueued on this stream until its cudaStreamEndCapture is recorded "
                 "into a CUDA graph and runs at each cudaGraphLaunch, not where it stands",
                 name);
        json_array_append(A->syncs, rec);
        break;
    case API_MEMCPY:
        json_array_append(A->memcpys, rec);
        break;
    case API_CUBLAS_STREAM:
        if (field_base(rec, "handle"))
            json_object_set_new(
                A->cublas_streams, field_base(rec, "handle"),
                json_string(field_text(rec, "stream") ? field_text(rec, "stream") : "0"));
        break;
    case API_COMPUTE:
    case API_LAUNCH:
        on_launch(S, a, name, rec, line);
        break;
    }
    json_decref(rec);
    free(args);
}

static const struct kernel_sig *find_kernel(const struct analysis *A, const char *name)
{
    for (size_t i = 0; i < A->nkernels; i++)
        if (!strcmp(A->kernels[i].name, name))
            return &A->kernels[i];
    return NULL;
}

/* kernel<T, N><<<grid, block, smem, stream>>>(args) with '<<<' at k. */
static void handle_launch(struct scan *S, size_t k)
{
    struct src_file *F = S->F;
    struct analysis *A = S->A;
    int line = T(F, k)->line;
    size_t name_end = k - 1, name_tok = k - 1;
    if (k == 0)
        return;
    if (tis(F, name_end, ">") || tis(F, name_end, ">>"))
        name_tok = match_angle_back(F, name_end) - 1;
    if (name_tok >= F->nsig || !tident(F, name_tok)) {
        note(A, F->path, line, "kernel launch through an expression that is not a kernel name");
        return;
    }
    while (name_tok >= 2 && tis(F, name_tok - 1, "::") && tident(F, name_tok - 2))
        name_tok -= 2;
    size_t cfg_close = k + 1;
    int depth = 0;
    while (cfg_close < F->nsig && !(depth == 0 && tis(F, cfg_close, ">>>"))) {
        if (tis(F, cfg_close, "(") || tis(F, cfg_close, "[") || tis(F, cfg_close, "{"))
            depth++;
        else if (tis(F, cfg_close, ")") || tis(F, cfg_close, "]") || tis(F, cfg_close, "}"))
            depth--;
        if (tis(F, cfg_close, ";"))
            break;
        cfg_close++;
    }
    if (!tis(F, cfg_close, ">>>") || !tis(F, cfg_close + 1, "(")) {
        note(A, F->path, line, "malformed kernel launch (no '>>>(' after '<<<')");
        return;
    }
    size_t open = cfg_close + 1, close = match_close(F, open);
    if (close >= F->nsig) {
        note(A, F->path, line, "kernel launch arguments not closed");
        return;
    }
    struct arg_range *cfg = NULL, *args = NULL;
    size_t ncfg = split_args(F, k, cfg_close, &cfg);
    size_t nargs = split_args(F, open, close, &args);
    char *kname = range_text(F, name_tok, name_end);
    char *base = range_text(F, name_tok,
                            tis(F, name_end, ">") || tis(F, name_end, ">>")
                                ? match_angle_back(F, name_end) - 1
                                : name_end);
    json_t *rec = call_record(S, kname, name_tok, open, close, args, nargs);
    json_object_set_new(rec, "span", span_json(F, name_tok, close));
    json_object_set_new(rec, "kind", json_string("kernel"));
    json_object_set_new(rec, "launch", json_string("triple_chevron"));
    json_object_set_new(rec, "kernel", json_string(base));
    static const char *const cfg_names[] = {"grid", "block", "smem", "stream"};
    json_t *jc = json_object();
    for (size_t i = 0; i < ncfg && i < 4; i++) {
        char *t = range_text(F, cfg[i].a, cfg[i].b);
        json_object_set_new(
            jc, cfg_names[i],
            json_pack("{s:s,s:o}", "text", t, "span", span_json(F, cfg[i].a, cfg[i].b)));
        free(t);
    }
    json_object_set_new(rec, "config", jc);
    char *st = ncfg >= 4 ? range_text(F, cfg[3].a, cfg[3].b) : NULL;
    char *ns = norm_stream(st);
    json_object_set_new(rec, "stream", json_string(ns));
    free(ns);

    struct node proto;
    memset(&proto, 0, sizeof proto);
    const struct kernel_sig *sig = find_kernel(A, base);
    json_t *bufs = json_array();
    for (size_t i = 0; i < nargs; i++) {
        char *b = resolve_base(F, args[i].a, args[i].b);
        if (!b)
            continue;
        int pk = sig && (int)i < sig->nparams ? sig->ptr_kind[i] : -1;
        const char *access = "unknown";
        if (pk == 1) {
            str_list_add(&proto.reads, &proto.nreads, b);
            access = "read";
        } else if (pk == 2 || pk == -1) {
            /* without the kernel's signature a buffer may be read and written */
            str_list_add(&proto.reads, &proto.nreads, b);
            str_list_add(&proto.writes, &proto.nwrites, b);
            access = pk == 2 ? "readwrite" : "unknown";
        } else {
            access = "value";
        }
        if (pk != 0)
            json_array_append_new(
                bufs, json_pack("{s:i,s:s,s:s}", "arg", (int)i, "base", b, "access", access));
        free(b);
    }
    json_object_set_new(rec, "buffers", bufs);
    if (!sig)
        note(A, F->path, line,
             "kernel '%s' is not defined in the analyzed files; its arguments count as read+write",
             base);
    add_node(S, rec, "kernel", base, st, &proto);
    json_array_append(A->launches, rec);
    json_decref(rec);
    free(st);
    free(kname);
    free(base);
    free(cfg);
    free(args);
}

/* A use of a macro whose body itself calls a collective: the call is hidden
 * in the macro, so the rewriter cannot see its arguments. */
static void note_macro_use(struct scan *S, const char *name, size_t k)
{
    size_t i;
    json_t *m;
    json_array_foreach(S->A->macros, i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "name")), name))
            continue;
        size_t j;
        json_t *c;
        json_array_foreach(json_object_get(m, "nccl_calls"), j, c)
        {
            const struct api *a = find_api(json_string_value(c));
            if (a && (a->cls == API_COLL || a->cls == API_P2P)) {
                note(S->A, S->F->path, T(S->F, k)->line,
                     "macro %s expands to %s (defined at %s:%d); that call is not analyzed", name,
                     json_string_value(c), json_string_value(json_object_get(m, "file")),
                     (int)json_integer_value(json_object_get(m, "line")));
                return;
            }
        }
    }
}

/* "new T[n]" (an array: memory for data), not "new ncclComm_t" or "new
 * Layer(...)" (one object, a handle or a class instance). */
static int new_is_array(const struct src_file *F, size_t k)
{
    for (size_t j = k + 1; j < F->nsig && j < k + 32; j++) {
        if (tis(F, j, "["))
            return 1;
        if (tis(F, j, ";") || tis(F, j, "(") || tis(F, j, "{") || tis(F, j, ","))
            return 0;
    }
    return 0;
}

/* p = new T[n]: an allocation of p (kind "new"). */
static void handle_new(struct scan *S, size_t k)
{
    struct src_file *F = S->F;
    size_t ss = stmt_start(F, k), se = stmt_end(F, k);
    char *var = NULL;
    for (size_t m = k - 1; m-- > ss;)
        if (tident(F, m)) {
            var = ttext(F, m);
            break;
        }
    char *expr = range_text(F, k, se > k && tis(F, se, ";") ? se - 1 : se);
    const char *fn = cur_function(S);
    json_array_append_new(
        S->A->allocations,
        json_pack("{s:s,s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:s}", "api", "new", "kind", "new",
                  "file", F->path, "line", T(F, k)->line, "col", T(F, k)->col, "span",
                  span_json(F, k, se > k && tis(F, se, ";") ? se - 1 : se), "statement",
                  span_json(F, ss, se), "function", fn ? json_string(fn) : json_null(), "loop",
                  loop_json(cur_loop(S)), "var", var ? json_string(var) : json_null(), "expr",
                  expr ? expr : ""));
    free(var);
    free(expr);
}

static int push_brace(struct scan *S, enum brace_kind kind, const char *name, int line, size_t tok)
{
    if (S->nbr == S->cbr) {
        size_t nc = S->cbr ? S->cbr * 2 : 16;
        struct brace *b = realloc(S->br, nc * sizeof *b);
        if (!b)
            return CUCO_ENOMEM;
        S->br = b;
        S->cbr = nc;
    }
    S->br[S->nbr].kind = kind;
    S->br[S->nbr].name = cuco_strdup(name);
    S->br[S->nbr].line = line;
    S->br[S->nbr].loop_tok = tok;
    S->nbr++;
    return 0;
}

static int is_keyword(const char *s)
{
    static const char *const kw[] = {"if",
                                     "for",
                                     "while",
                                     "switch",
                                     "return",
                                     "sizeof",
                                     "do",
                                     "else",
                                     "case",
                                     "catch",
                                     "new",
                                     "delete",
                                     "decltype",
                                     "alignof",
                                     "static_assert",
                                     "__launch_bounds__",
                                     "defined",
                                     NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(s, kw[i]))
            return 1;
    return 0;
}

/* The parameter list before the body '{' at token k: its '(' and ')' tokens
 * (past trailing qualifiers such as const or noexcept). 0 when there is none. */
static int params_before_body(const struct src_file *F, size_t k, size_t *open, size_t *close)
{
    size_t j = k;
    while (j > 0 &&
           (tis(F, j - 1, "const") || tis(F, j - 1, "noexcept") || tis(F, j - 1, "override") ||
            tis(F, j - 1, "final") || tis(F, j - 1, "mutable")))
        j--;
    if (j == 0 || !tis(F, j - 1, ")"))
        return 0;
    /* walk back to the matching '(' */
    int depth = 0;
    size_t i = j - 1;
    for (;; i--) {
        if (tis(F, i, ")"))
            depth++;
        else if (tis(F, i, "(") && --depth == 0)
            break;
        if (i == 0)
            return 0;
    }
    *open = i;
    *close = j - 1;
    return 1;
}

/* Name of the function whose body opens at '{' k (at namespace/class level),
 * or NULL. Caller frees. */
static char *function_at(const struct src_file *F, size_t k)
{
    size_t i, close;
    if (!params_before_body(F, k, &i, &close))
        return NULL;
    if (i == 0 || !tident(F, i - 1))
        return NULL;
    char *name = ttext(F, i - 1);
    if (name && is_keyword(name)) {
        free(name);
        return NULL;
    }
    return name;
}

/* ---- pointer aliases ------------------------------------------------- */

static void alias_add(struct scan *S, const char *x, const char *y)
{
    const char *fn = cur_function(S);
    if (!fn || !x || !y || !strcmp(x, y))
        return;
    json_t *pairs = json_object_get(S->A->aliases, fn);
    if (!pairs) {
        pairs = json_array();
        json_object_set_new(S->A->aliases, fn, pairs);
    }
    json_array_append_new(pairs, json_pack("[s,s]", x, y));
}

/* lhs takes the value of the expression in tokens a..b; each branch of a
 * conditional expression counts ("c ? p.tx : p.results + off"). */
static void alias_rhs(struct scan *S, const char *lhs, size_t a, size_t b, int depth)
{
    const struct src_file *F = S->F;
    if (a > b || depth > 8)
        return;
    size_t q = b + 1, colon = b + 1;
    int d = 0, nested = 0;
    for (size_t k = a; k <= b; k++) {
        if (tis(F, k, "(") || tis(F, k, "[") || tis(F, k, "{"))
            d++;
        else if (tis(F, k, ")") || tis(F, k, "]") || tis(F, k, "}"))
            d--;
        else if (d == 0 && tis(F, k, "?")) {
            if (q > b)
                q = k;
            else
                nested++;
        } else if (d == 0 && tis(F, k, ":") && q <= b) {
            if (nested == 0) {
                colon = k;
                break;
            }
            nested--;
        }
    }
    if (q <= b && colon <= b) {
        alias_rhs(S, lhs, q + 1, colon - 1, depth + 1);
        alias_rhs(S, lhs, colon + 1, b, depth + 1);
        return;
    }
    char *base = resolve_base(F, a, b);
    alias_add(S, lhs, base);
    free(base);
}

/* At an '=' inside a function: "T *p = q + off;", "p = q;", "s.buf = x;"
 * make the two names one buffer for the dependency graph. Stores through a
 * pointer ("*p = v", "a[i] = v") are not aliases. */
static void alias_array_init(struct scan *S, size_t k);

static void alias_assignment(struct scan *S, size_t k)
{
    const struct src_file *F = S->F;
    if (cur_function(S) && k > 0 && tis(F, k - 1, "]") && tis(F, k + 1, "{")) {
        alias_array_init(S, k);
        return;
    }
    if (!cur_function(S) || k == 0 || !tident(F, k - 1))
        return;
    size_t s = k - 1;
    while (s >= 2 && (tis(F, s - 1, ".") || tis(F, s - 1, "->")) && tident(F, s - 2))
        s -= 2;
    if (s > 0) {
        if (tis(F, s - 1, ".") || tis(F, s - 1, "->") || tis(F, s - 1, "::") || tis(F, s - 1, "]"))
            return;
        /* "*p = v" stores through p; "T *p = v" declares p */
        if (tis(F, s - 1, "*") &&
            !(s >= 2 && (tident(F, s - 2) || tis(F, s - 2, ">") || tis(F, s - 2, "*"))))
            return;
    }
    size_t e = k + 1;
    int d = 0;
    for (; e < F->nsig; e++) {
        if (tis(F, e, "(") || tis(F, e, "[") || tis(F, e, "{"))
            d++;
        else if (tis(F, e, ")") || tis(F, e, "]") || tis(F, e, "}")) {
            if (--d < 0)
                break;
        } else if (d == 0 && (tis(F, e, ";") || tis(F, e, ",")))
            break;
    }
    if (e == k + 1)
        return;
    char *lhs = range_text(F, s, k - 1);
    alias_rhs(S, lhs, k + 1, e - 1, 0);
    free(lhs);
}

/* "void *outs[] = {out, tmp};" (at its '=' k): a table of pointers passed
 * on as one argument (plugin enqueue(inputs, outputs), per-tensor pointer
 * lists) is one buffer with each element it holds. Elements that take an
 * address ("&t->w") are pointers to pointers, not buffers: left out. */
static void alias_array_init(struct scan *S, size_t k)
{
    const struct src_file *F = S->F;
    size_t s = k - 1;
    while (s > 0 && tis(F, s, "]")) {
        int d = 0;
        for (; s > 0; s--) {
            if (tis(F, s, "]"))
                d++;
            else if (tis(F, s, "[") && --d == 0)
                break;
        }
        if (s == 0)
            return;
        s--;
    }
    if (!tident(F, s))
        return;
    size_t close = match_close(F, k + 1);
    if (close >= F->nsig)
        return;
    char *table = ttext(F, s);
    struct arg_range *elems = NULL;
    size_t n = split_args(F, k + 1, close, &elems);
    for (size_t i = 0; i < n && table; i++) {
        if (tis(F, elems[i].a, "&") || elems[i].a > elems[i].b)
            continue;
        alias_rhs(S, table, elems[i].a, elems[i].b, 0);
    }
    free(elems);
    free(table);
}

/* swap(a, b) of two pointers (std::swap of a double buffer). */
static void alias_swap(struct scan *S, size_t k)
{
    const struct src_file *F = S->F;
    struct arg_range *args = NULL;
    size_t close = match_close(F, k + 1);
    if (close >= F->nsig)
        return;
    size_t n = split_args(F, k + 1, close, &args);
    if (n == 2) {
        char *x = resolve_base(F, args[0].a, args[0].b), *y = resolve_base(F, args[1].a, args[1].b);
        alias_add(S, x, y);
        free(x);
        free(y);
    }
    free(args);
}

/* ---- calls of the program's own functions ----------------------------- */

/* Parameter names of the function whose body opens at token k. */
static json_t *function_params(const struct src_file *F, size_t k)
{
    json_t *names = json_array();
    size_t open, close;
    if (!params_before_body(F, k, &open, &close))
        return names;
    struct arg_range *args = NULL;
    size_t n = split_args(F, open, close, &args);
    for (size_t i = 0; i < n; i++) {
        size_t last = args[i].b;
        for (size_t q = args[i].a; q <= args[i].b && q < F->nsig; q++)
            if (tis(F, q, "=")) {
                last = q - 1;
                break;
            }
        while (last > args[i].a && tis(F, last, "]")) {
            while (last > args[i].a && !tis(F, last, "["))
                last--;
            last--;
        }
        char *w =
            (last >= args[i].a && last > args[i].a && tident(F, last)) ? ttext(F, last) : NULL;
        json_array_append_new(names, w ? json_string(w) : json_null());
        free(w);
    }
    free(args);
    return names;
}

/* The '(' of a call with explicit template arguments, "f<T, 4>(x)", with the
 * name at k; nsig when k + 1 does not open template arguments followed by a
 * call. Casts and kernel launches ("k<T><<<") are not such calls. */
static size_t template_call_open(const struct src_file *F, size_t k)
{
    static const char *const casts[] = {"static_cast",  "reinterpret_cast", "const_cast",
                                        "dynamic_cast", "template",         NULL};
    if (!tis(F, k + 1, "<"))
        return F->nsig;
    for (int i = 0; casts[i]; i++)
        if (tis(F, k, casts[i]))
            return F->nsig;
    int depth = 0;
    for (size_t j = k + 1; j < F->nsig && j < k + 64; j++) {
        if (tis(F, j, "<"))
            depth++;
        else if (tis(F, j, ">"))
            depth--;
        else if (tis(F, j, ">>"))
            depth -= 2;
        else if (tis(F, j, ";") || tis(F, j, "{") || tis(F, j, "}") || tis(F, j, "<<<") ||
                 tis(F, j, "&&") || tis(F, j, "||"))
            return F->nsig;
        if (depth <= 0)
            return depth == 0 && tis(F, j + 1, "(") ? j + 1 : F->nsig;
    }
    return F->nsig;
}

/* A call of a non-API function inside a function: where it is in program
 * order, and the buffers and texts of its arguments. */
static void record_call(struct scan *S, const char *callee, size_t k, size_t open)
{
    const struct src_file *F = S->F;
    size_t close = match_close(F, open);
    if (close >= F->nsig)
        return;
    struct arg_range *args = NULL;
    size_t n = split_args(F, open, close, &args);
    json_t *bases = json_array(), *texts = json_array();
    for (size_t i = 0; i < n; i++) {
        char *b = resolve_base(F, args[i].a, args[i].b), *t = range_text(F, args[i].a, args[i].b);
        json_array_append_new(bases, b ? json_string(b) : json_null());
        json_array_append_new(texts, json_string(t ? t : ""));
        free(b);
        free(t);
    }
    free(args);
    json_array_append_new(S->A->calls,
                          json_pack("{s:s,s:s,s:s,s:i,s:i,s:I,s:o,s:o}", "callee", callee,
                                    "function", cur_function(S), "file", F->path, "file_idx",
                                    S->file_idx, "line", T(F, k)->line, "before",
                                    (json_int_t)S->A->ngraph, "args", bases, "texts", texts));
}

static void scan_file(struct analysis *A, struct src_file *F, int file_idx)
{
    struct scan S;
    memset(&S, 0, sizeof S);
    S.A = A;
    S.F = F;
    S.file_idx = file_idx;
    size_t pending_loop_tok = 0;
    const char *pending_loop =
        NULL; /* a for/while/do header just ended: the next '{' is its body */
    int pending_loop_line = 0;
    size_t header_close = (size_t)-1;
    int closed_do = 0; /* the last '}' closed a do-loop body: its "while (...)" is not a loop */

    for (size_t k = 0; k < F->nsig; k++) {
        const cuco_tok *t = T(F, k);
        if (k == header_close) {
            header_close = (size_t)-1;
            if (pending_loop && !tis(F, k + 1, "{")) {
                if (S.nsingle_loops < 64) {
                    S.single[S.nsingle_loops] = (struct brace){BR_LOOP, (char *)pending_loop,
                                                               pending_loop_line, pending_loop_tok};
                    S.single_depth[S.nsingle_loops] = S.nbr;
                    S.nsingle_loops++;
                }
                pending_loop = NULL;
            }
            continue;
        }
        if (t->kind == CUCO_TOK_IDENT) {
            if (tis(F, k, "new") && k > 0 && tis(F, k - 1, "=") && new_is_array(F, k)) {
                handle_new(&S, k);
                continue;
            }
            if ((tis(F, k, "for") || tis(F, k, "while")) && tis(F, k + 1, "(")) {
                /* "} while (x);" closing a do-loop is not a new loop */
                if (!(tis(F, k, "while") && k > 0 && tis(F, k - 1, "}") && closed_do)) {
                    pending_loop = tis(F, k, "for") ? "for" : "while";
                    pending_loop_line = t->line;
                    pending_loop_tok = k;
                }
                header_close = match_close(F, k + 1);
                continue;
            }
            if (tis(F, k, "do")) {
                pending_loop = "do";
                pending_loop_line = t->line;
                pending_loop_tok = k;
                if (!tis(F, k + 1, "{") && S.nsingle_loops < 64) {
                    S.single[S.nsingle_loops] = (struct brace){BR_LOOP, "do", t->line, k};
                    S.single_depth[S.nsingle_loops++] = S.nbr;
                    pending_loop = NULL;
                }
                continue;
            }
            if (tis(F, k, "swap") && tis(F, k + 1, "("))
                alias_swap(&S, k);
            size_t open = tis(F, k + 1, "(") ? k + 1 : template_call_open(F, k);
            if (open < F->nsig) {
                char *name = ttext(F, k);
                const struct api *a = name ? find_api(name) : NULL;
                /* member calls of the API (x.ncclSend) and declarations (ncclResult_t
                 * ncclSend(...)) are not calls; a member call of the program's own method
                 * (comm.allReduce(buf, n)) is a call of that method, recorded like any other call
                 */
                int member = k > 0 && (tis(F, k - 1, ".") || tis(F, k - 1, "->"));
                int decl = k > 0 && tident(F, k - 1) && !tis(F, k - 1, "return") &&
                           !tis(F, k - 1, "else") && !tis(F, k - 1, "do");
                if (!a && !decl && name && !is_keyword(name)) {
                    note_macro_use(&S, name, k);
                    json_t *sites = json_object_get(A->call_sites, name);
                    if (!sites) {
                        sites = json_array();
                        json_object_set_new(A->call_sites, name, sites);
                    }
                    const char *fn = cur_function(&S);
                    json_array_append_new(sites, json_pack("{s:s,s:i,s:o,s:o}", "file", F->path,
                                                           "line", t->line, "function",
                                                           fn ? json_string(fn) : json_null(),
                                                           "loop", loop_json(cur_loop(&S))));
                    if (fn)
                        record_call(&S, name, k, open);
                }
                if (a && !member && !decl && open == k + 1) {
                    size_t close = match_close(F, k + 1);
                    if (close >= F->nsig)
                        note(A, F->path, t->line, "call to %s is not closed", name);
                    else
                        handle_call(&S, a, name, k, k + 1, close);
                }
                free(name);
            }
            continue;
        }
        if (tis(F, k, "<<<")) {
            handle_launch(&S, k);
            continue;
        }
        if (tis(F, k, "{")) {
            if (pending_loop) {
                push_brace(&S, BR_LOOP, pending_loop, pending_loop_line, pending_loop_tok);
                pending_loop = NULL;
            } else if (!cur_function(&S)) {
                char *fn = function_at(F, k);
                if (fn && !json_object_get(A->params, fn))
                    json_object_set_new(A->params, fn, function_params(F, k));
                push_brace(&S, fn ? BR_FUNCTION : BR_OTHER, fn ? fn : "", t->line, k);
                free(fn);
            } else {
                push_brace(&S, BR_OTHER, "", t->line, k);
            }
            continue;
        }
        if (tis(F, k, "}")) {
            closed_do = 0;
            if (S.nbr > 0) {
                S.nbr--;
                closed_do = S.br[S.nbr].kind == BR_LOOP && !strcmp(S.br[S.nbr].name, "do");
                free(S.br[S.nbr].name);
            }
            while (S.nsingle_loops && S.single_depth[S.nsingle_loops - 1] >= S.nbr &&
                   !tis(F, k + 1, "else"))
                S.nsingle_loops--;
            continue;
        }
        if (tis(F, k, "=")) {
            alias_assignment(&S, k);
            continue;
        }
        if (tis(F, k, ";")) {
            while (S.nsingle_loops && S.single_depth[S.nsingle_loops - 1] == S.nbr)
                S.nsingle_loops--;
        }
    }
    if (S.group_depth > 0) {
        note(A, F->path, T(F, S.group_start_tok)->line,
             "ncclGroupStart without a matching ncclGroupEnd");
        json_decref(S.group);
    }
    for (size_t i = 0; i < S.nbr; i++)
        free(S.br[i].name);
    free(S.br);
}

/* __global__ kernels: which parameters are pointers, and which are const. */
static void collect_kernels(struct analysis *A, struct src_file *F)
{
    for (size_t k = 0; k < F->nsig; k++) {
        if (!tis(F, k, "__global__"))
            continue;
        size_t j = k + 1;
        while (j < F->nsig && !tis(F, j, ";") && !tis(F, j, "{")) {
            if (tis(F, j, "(")) {
                /* __launch_bounds__(...) and __attribute__((...)) come before the name */
                if (tident(F, j - 1) &&
                    (tis(F, j - 1, "__launch_bounds__") || tis(F, j - 1, "__attribute__") ||
                     tis(F, j - 1, "alignas") || tis(F, j - 1, "__declspec"))) {
                    j = match_close(F, j) + 1;
                    continue;
                }
                break;
            }
            j++;
        }
        if (!tis(F, j, "(") || !tident(F, j - 1))
            continue;
        size_t close = match_close(F, j);
        if (close >= F->nsig)
            continue;
        struct arg_range *params = NULL;
        size_t np = split_args(F, j, close, &params);
        struct kernel_sig sig = {ttext(F, j - 1), (int)np, calloc(np ? np : 1, sizeof(int))};
        for (size_t p = 0; p < np && sig.ptr_kind; p++) {
            int ptr = 0, cst = 0;
            for (size_t q = params[p].a; q <= params[p].b && q < F->nsig; q++) {
                if (tis(F, q, "*") || tis(F, q, "&"))
                    ptr = 1;
                if (tis(F, q, "const") && !ptr)
                    cst = 1;
            }
            sig.ptr_kind[p] = ptr ? (cst ? 1 : 2) : 0;
        }
        free(params);
        struct kernel_sig *v = realloc(A->kernels, (A->nkernels + 1) * sizeof *v);
        if (v) {
            A->kernels = v;
            v[A->nkernels++] = sig;
        } else {
            free(sig.name);
            free(sig.ptr_kind);
        }
    }
}

/* #define lines whose body calls NCCL: recorded so wrappers are visible. */
static void collect_macros(struct analysis *A, struct src_file *F)
{
    for (size_t i = 0; i < F->lx.ntoks; i++) {
        const cuco_tok *t = &F->lx.toks[i];
        if (t->kind != CUCO_TOK_PREPROC || t->dir_len != 6 ||
            memcmp(F->text + t->dir_off, "define", 6))
            continue;
        cuco_lex sub;
        cuco_err e = CUCO_ERR_INIT;
        size_t body = t->dir_off + 6;
        if (cuco_lex_run(&sub, F->text + body, t->off + t->len - body, &e)) {
            cuco_err_clear(&e);
            continue;
        }
        char *mname = NULL;
        json_t *calls = json_array();
        for (size_t s = 0; s < sub.ntoks; s++) {
            const cuco_tok *st = &sub.toks[s];
            if (st->kind != CUCO_TOK_IDENT)
                continue;
            char *w = cuco_strndup(sub.src + st->off, st->len);
            if (!mname)
                mname = w;
            else {
                /* nccl functions called in the body (types like ncclResult_t are not calls) */
                int called = s + 1 < sub.ntoks && cuco_tok_is(&sub, &sub.toks[s + 1], "(");
                if (!strncmp(w, "nccl", 4) && called)
                    json_array_append_new(calls, json_string(w));
                free(w);
            }
        }
        if (mname && json_array_size(calls))
            json_array_append_new(A->macros,
                                  json_pack("{s:s,s:s,s:i,s:o}", "name", mname, "file", F->path,
                                            "line", t->line, "nccl_calls", json_incref(calls)));
        json_decref(calls);
        free(mname);
        cuco_lex_free(&sub);
    }
}

/* Appends an edge unless the same (from, to, kind, via) is already there. */
static void add_edge(struct analysis *A, size_t from, size_t to, const char *kind, const char *via)
{
    size_t i;
    json_t *e;
    json_array_foreach(A->edges, i, e)
    {
        if ((size_t)json_integer_value(json_object_get(e, "from")) == from &&
            (size_t)json_integer_value(json_object_get(e, "to")) == to &&
            !strcmp(json_string_value(json_object_get(e, "kind")), kind) &&
            !strcmp(json_string_value(json_object_get(e, "via")), via))
            return;
    }
    json_array_append_new(A->edges, json_pack("{s:i,s:i,s:s,s:s}", "from", (int)from, "to", (int)to,
                                              "kind", kind, "via", via));
}

/* The alias class of buffer `name` in function fn: the smallest name that
 * the function's pointer assignments and swaps connect to it (flow-
 * insensitive: after "p = a; ... p = b;" p, a and b are one class). Caller
 * frees. */
static json_t *alias_members(const struct analysis *A, const char *fn, const char *name);

static char *alias_class(const struct analysis *A, const char *fn, const char *name)
{
    json_t *seen = alias_members(A, fn, name);
    char *best = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(seen, k, v)
    {
        if (!best || strcmp(k, best) < 0) {
            free(best);
            best = cuco_strdup(k);
        }
    }
    json_decref(seen);
    return best ? best : cuco_strdup(name);
}

/* The names connected to `name` in fn (name included), as a set. */
static json_t *alias_members(const struct analysis *A, const char *fn, const char *name)
{
    json_t *pairs = json_object_get(A->aliases, fn);
    json_t *seen = json_object();
    json_object_set_new(seen, name, json_true());
    if (!pairs)
        return seen;
    for (int changed = 1; changed;) {
        changed = 0;
        size_t i;
        json_t *pair;
        json_array_foreach(pairs, i, pair)
        {
            const char *x = json_string_value(json_array_get(pair, 0));
            const char *y = json_string_value(json_array_get(pair, 1));
            int hx = json_object_get(seen, x) != NULL, hy = json_object_get(seen, y) != NULL;
            if (hx == hy)
                continue;
            json_object_set_new(seen, hx ? y : x, json_true());
            changed = 1;
        }
    }
    return seen;
}

/* Length of the head of a buffer name: "L->out" -> "L", "ls[].x" -> "ls". */
static size_t name_head(const char *name)
{
    size_t n = 0;
    while (name[n] && name[n] != '.' && name[n] != '[' && !(name[n] == '-' && name[n + 1] == '>'))
        n++;
    return n;
}

/* The canonical buffer name: the alias class of its head, then its members
 * with "->", "." and "[]" alike ("L->out" with L = &layers[i] and
 * "layers[].out" are one buffer). Caller frees. */
/* Appends the member path p with "->" as "." and "[]" left out. */
static void append_member_path(cuco_buf *b, const char *p)
{
    while (*p) {
        if (p[0] == '[' && p[1] == ']')
            p += 2;
        else if (p[0] == '-' && p[1] == '>') {
            cuco_buf_putc(b, '.');
            p += 2;
        } else
            cuco_buf_putc(b, *p++);
    }
}

static char *member_path(const char *name);

static char *buffer_key(const struct analysis *A, const char *fn, const char *name)
{
    size_t h = name_head(name);
    if (!name[h])
        return alias_class(A, fn, name);
    /* a member path assigned as a whole ("float *g = raw(m.grads[l].data())"):
     * the smallest of its alias set, paths written alike */
    json_t *set = alias_members(A, fn, name);
    if (json_object_size(set) > 1) {
        char *best = NULL;
        const char *k;
        json_t *v;
        json_object_foreach(set, k, v)
        {
            char *m = member_path(k);
            if (m && (!best || strcmp(m, best) < 0)) {
                free(best);
                best = m;
            } else {
                free(m);
            }
        }
        json_decref(set);
        if (best)
            return best;
    } else {
        json_decref(set);
    }
    char *head = cuco_strndup(name, h);
    char *cls = head ? alias_class(A, fn, head) : NULL;
    free(head);
    if (!cls)
        return NULL;
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_puts(&b, cls);
    free(cls);
    append_member_path(&b, name + h);
    return cuco_buf_detach(&b);
}

/* name with "->" as "." and "[]" left out. Caller frees. */
static char *member_path(const char *name)
{
    cuco_buf b = CUCO_BUF_INIT;
    append_member_path(&b, name);
    return cuco_buf_detach(&b);
}

/* Canonical names of a node's reads (pass 0) or writes (pass 1). */
static char **node_classes(const struct analysis *A, const struct node *n, int pass)
{
    char **bufs = pass ? n->writes : n->reads;
    size_t nb = pass ? n->nwrites : n->nreads;
    char **cls = calloc(nb + 1, sizeof *cls);
    for (size_t b = 0; cls && b < nb; b++)
        cls[b] = buffer_key(A, n->function, bufs[b]);
    return cls;
}

/* What a call passes for callee buffer `name`: the argument's buffer when
 * name is (a member of) a parameter, with the member kept ("p->rx" called
 * with &pipe -> "pipe.rx"); NULL when name is not a parameter's. Caller frees. */
static char *call_buffer(const struct analysis *A, json_t *call, const char *callee,
                         const char *name)
{
    json_t *params = json_object_get(A->params, callee);
    json_t *args = json_object_get(call, "args"), *texts = json_object_get(call, "texts");
    size_t h = name_head(name);
    char *head = cuco_strndup(name, h);
    /* the head, or any name it aliases ("in" = p.rx[mb & 1] with p a parameter) */
    json_t *members = head ? alias_members(A, callee, head) : json_object();
    char *out = NULL;
    const char *m;
    json_t *unused;
    json_object_foreach(members, m, unused)
    {
        size_t mh = name_head(m);
        size_t k;
        json_t *pn;
        json_array_foreach(params, k, pn)
        {
            const char *param = json_string_value(pn);
            const char *arg = json_string_value(json_array_get(args, k));
            if (!param || !arg || strlen(param) != mh || strncmp(param, m, mh) != 0)
                continue;
            const char *text = json_string_value(json_array_get(texts, k));
            /* the member path: the alias's own, then the name's */
            char *rest = cuco_sprintf("%s%s", m + mh, name + h);
            if (!rest)
                break;
            if (text && text[0] == '&' && rest[0] == '-' &&
                rest[1] == '>') /* &x passed, p->f used: x.f */
                out = cuco_sprintf("%s.%s", arg, rest + 2);
            else
                out = cuco_sprintf("%s%s", arg, rest);
            free(rest);
            break;
        }
        if (out)
            break;
    }
    json_decref(members);
    free(head);
    return out;
}

/* A node for each call of a function of the program that has nodes of its
 * own (a helper that launches kernels or issues collectives), in the
 * caller, between the caller's nodes around the call: it reads and writes
 * what the helper's nodes read and write through its parameters, on the
 * stream passed for the helper's stream. Appended after the other nodes;
 * their `pos` keeps program order. A helper's own helper calls are done
 * before the calls of that helper (four rounds: helpers four deep). */
static void build_call_nodes(struct analysis *A)
{
    size_t ncalls = json_array_size(A->calls);
    char *done = calloc(ncalls + 1, 1);
    if (!done)
        return;
    for (int round = 0; round < 4; round++) {
        size_t first_new = A->ngraph;
        for (size_t c = 0; c < ncalls; c++) {
            if (done[c])
                continue;
            json_t *call = json_array_get(A->calls, c);
            const char *callee = json_string_value(json_object_get(call, "callee"));
            const char *caller = json_string_value(json_object_get(call, "function"));
            if (!json_object_get(A->params, callee) || !strcmp(callee, caller))
                continue;
            /* the helper's own calls of helpers first (the last round takes what is left) */
            int pending = 0;
            for (size_t d = 0; round < 3 && d < ncalls && !pending; d++) {
                json_t *inner = json_array_get(A->calls, d);
                const char *in_callee = json_string_value(json_object_get(inner, "callee"));
                pending = !done[d] && d != c &&
                          !strcmp(json_string_value(json_object_get(inner, "function")), callee) &&
                          strcmp(in_callee, callee) && json_object_get(A->params, in_callee);
            }
            if (pending)
                continue;
            struct node proto;
            memset(&proto, 0, sizeof proto);
            const char *stream = NULL;
            int mixed = 0, any = 0;
            for (size_t i = 0; i < first_new; i++) {
                struct node *cn = &A->graph[i];
                if (strcmp(cn->function, callee))
                    continue;
                any = 1;
                for (int pass = 0; pass < 2; pass++) {
                    char **bufs = pass ? cn->writes : cn->reads;
                    size_t nb = pass ? cn->nwrites : cn->nreads;
                    for (size_t b = 0; b < nb; b++) {
                        char *mine = call_buffer(A, call, callee, bufs[b]);
                        char ***list = pass ? &proto.writes : &proto.reads;
                        size_t *nlist = pass ? &proto.nwrites : &proto.nreads;
                        /* one name per buffer ("layers->x" and "layers[].x" are one) */
                        char *key = mine ? buffer_key(A, caller, mine) : NULL;
                        int seen = 0;
                        for (size_t q = 0; key && q < *nlist && !seen; q++) {
                            char *other = buffer_key(A, caller, (*list)[q]);
                            seen = other && !strcmp(other, key);
                            free(other);
                        }
                        if (mine && !seen)
                            str_list_add(list, nlist, mine);
                        free(key);
                        free(mine);
                    }
                }
                if (!stream)
                    stream = cn->stream;
                else if (strcmp(stream, cn->stream))
                    mixed = 1;
            }
            if (!any)
                continue;
            done[c] = 1;
            /* the helper's stream: the argument passed for it, when it is a parameter */
            char *st = NULL;
            json_t *params = json_object_get(A->params, callee);
            size_t k;
            json_t *pn;
            json_array_foreach(params, k, pn)
            {
                /* two parameters of one name (a broken program): the first */
                if (!st && !mixed && stream && json_string_value(pn) &&
                    !strcmp(json_string_value(pn), stream))
                    st = norm_stream(
                        json_string_value(json_array_get(json_object_get(call, "texts"), k)));
            }
            if (!st)
                st = cuco_strdup(mixed ? "mixed" : stream ? stream : "default");
            struct node *g = realloc(A->graph, (A->ngraph + 1) * sizeof *g);
            if (!g) {
                free(st);
                break;
            }
            A->graph = g;
            struct node *n = &g[A->ngraph];
            *n = proto;
            n->function = cuco_strdup(caller);
            n->stream = st;
            n->file_idx = (int)json_integer_value(json_object_get(call, "file_idx"));
            n->pos = (double)json_integer_value(json_object_get(call, "before")) - 0.5 +
                     (double)c / (2.0 * (double)(ncalls + 1));
            long id = (long)A->ngraph++;
            json_t *jr = json_array(), *jw = json_array();
            for (size_t i = 0; i < n->nreads; i++)
                json_array_append_new(jr, json_string(n->reads[i]));
            for (size_t i = 0; i < n->nwrites; i++)
                json_array_append_new(jw, json_string(n->writes[i]));
            json_array_append_new(
                A->nodes,
                json_pack("{s:i,s:s,s:s,s:s,s:i,s:s,s:s,s:o,s:o}", "id", (int)id, "kind", "call",
                          "label", callee, "file", json_string_value(json_object_get(call, "file")),
                          "line", (int)json_integer_value(json_object_get(call, "line")),
                          "function", n->function, "stream", n->stream, "reads", jr, "writes", jw));
        }
    }
    free(done);
}

static void free_classes(char **cls, size_t n)
{
    if (!cls)
        return;
    for (size_t i = 0; i < n; i++)
        free(cls[i]);
    free(cls);
}

static const struct analysis *order_of; /* for cmp_pos (qsort has no context argument) */

static int cmp_pos(const void *a, const void *b)
{
    double x = order_of->graph[*(const size_t *)a].pos, y = order_of->graph[*(const size_t *)b].pos;
    return x < y ? -1 : x > y;
}

static void build_edges(struct analysis *A)
{
    /* per node: canonical names of what it writes */
    char ***wcls = calloc(A->ngraph + 1, sizeof *wcls);
    for (size_t j = 0; wcls && j < A->ngraph; j++)
        wcls[j] = node_classes(A, &A->graph[j], 1);
    /* nodes in program order (call nodes sit between the others) */
    size_t *ord = malloc((A->ngraph + 1) * sizeof *ord);
    if (!ord) {
        for (size_t j = 0; wcls && j < A->ngraph; j++)
            free_classes(wcls[j], A->graph[j].nwrites);
        free(wcls);
        return;
    }
    for (size_t j = 0; j < A->ngraph; j++)
        ord[j] = j;
    order_of = A;
    qsort(ord, A->ngraph, sizeof *ord, cmp_pos);
    for (size_t oj = 0; oj < A->ngraph; oj++) {
        size_t j = ord[oj];
        struct node *n = &A->graph[j];
        /* data: the latest earlier writer of each buffer this node touches,
         * under any name that aliases it in this function */
        for (int pass = 0; pass < 2; pass++) {
            char **bufs = pass ? n->writes : n->reads;
            size_t nb = pass ? n->nwrites : n->nreads;
            char **cls = pass ? (wcls ? wcls[j] : NULL) : node_classes(A, n, 0);
            for (size_t b = 0; b < nb; b++) {
                const char *want = cls && cls[b] ? cls[b] : bufs[b];
                for (size_t oi = oj; oi-- > 0;) {
                    size_t i = ord[oi];
                    struct node *p = &A->graph[i];
                    if (strcmp(p->function, n->function))
                        continue;
                    int writes = 0;
                    for (size_t w = 0; w < p->nwrites; w++) {
                        const char *have =
                            wcls && wcls[i] && wcls[i][w] ? wcls[i][w] : p->writes[w];
                        if (!strcmp(have, want))
                            writes = 1;
                    }
                    if (!writes)
                        continue;
                    add_edge(A, i, j, "data", bufs[b]);
                    break;
                }
            }
            if (!pass)
                free_classes(cls, nb);
        }
        for (size_t oi = oj; oi-- > 0;) {
            size_t i = ord[oi];
            struct node *p = &A->graph[i];
            if (!strcmp(p->function, n->function) && !strcmp(p->stream, n->stream)) {
                add_edge(A, i, j, "order", n->stream);
                break;
            }
        }
    }
    free(ord);
    for (size_t j = 0; wcls && j < A->ngraph; j++)
        free_classes(wcls[j], A->graph[j].nwrites);
    free(wcls);
}

/* A group with no call of its own whose body calls helpers that issue
 * collectives ("ncclGroupStart(); for (b : buckets) reduce(b); ncclGroupEnd();"):
 * the group holds what the helpers issue. It gets `helpers` (their names)
 * and the classification grouped_collectives when they issue collectives
 * only, grouped when they also send or receive (the peers are unknown). */
static void classify_helper_groups(struct analysis *A)
{
    size_t gi;
    json_t *g;
    json_array_foreach(A->groups, gi, g)
    {
        if (json_array_size(json_object_get(g, "members")) != 0)
            continue;
        const char *file = json_string_value(json_object_get(g, "file"));
        const char *fn = json_string_value(json_object_get(g, "function"));
        json_int_t lo = json_integer_value(json_object_get(g, "line"));
        json_int_t hi = json_integer_value(json_object_get(json_object_get(g, "end"), "line"));
        json_t *helpers = json_array();
        int p2p = 0;
        size_t ci;
        json_t *call;
        json_array_foreach(A->calls, ci, call)
        {
            const char *callee = json_string_value(json_object_get(call, "callee"));
            json_int_t line = json_integer_value(json_object_get(call, "line"));
            if (!fn || !file || strcmp(json_string_value(json_object_get(call, "file")), file) ||
                strcmp(json_string_value(json_object_get(call, "function")), fn) || line < lo ||
                line > hi)
                continue;
            int issues = 0;
            size_t k;
            json_t *c;
            json_array_foreach(A->collectives, k, c)
            {
                if (!json_is_string(json_object_get(c, "function")) ||
                    strcmp(json_string_value(json_object_get(c, "function")), callee))
                    continue;
                issues = 1;
                const char *kind = json_string_value(json_object_get(c, "kind"));
                p2p |= !strcmp(kind, "send") || !strcmp(kind, "recv");
            }
            int listed = 0;
            size_t h;
            json_t *hn;
            json_array_foreach(helpers, h, hn) listed |= !strcmp(json_string_value(hn), callee);
            if (issues && !listed)
                json_array_append_new(helpers, json_string(callee));
        }
        if (json_array_size(helpers)) {
            json_object_set_new(g, "classification",
                                json_string(p2p ? "grouped" : "grouped_collectives"));
            json_object_set_new(g, "helpers", helpers);
        } else {
            json_decref(helpers);
        }
    }
}

/* Communicators: one entry per base name, with setup calls and users. */
static void build_communicators(struct analysis *A)
{
    json_t *by = json_object();
    size_t i;
    json_t *c;
    json_array_foreach(A->comm_calls, i, c)
    {
        const char *name = field_base(c, "comm");
        if (!name)
            continue;
        json_t *e = json_object_get(by, name);
        if (!e) {
            e = json_pack("{s:s,s:o,s:o,s:o}", "name", name, "setup", json_array(), "collectives",
                          json_array(), "parent", json_null());
            json_object_set_new(by, name, e);
        }
        json_array_append_new(json_object_get(e, "setup"),
                              json_pack("{s:s,s:s,s:i}", "api",
                                        json_string_value(json_object_get(c, "api")), "file",
                                        json_string_value(json_object_get(c, "file")), "line",
                                        (int)json_integer_value(json_object_get(c, "line"))));
        if (field_base(c, "parent"))
            json_object_set_new(e, "parent", json_string(field_base(c, "parent")));
    }
    json_array_foreach(A->collectives, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "comm"));
        if (!name)
            continue;
        json_t *e = json_object_get(by, name);
        if (!e) {
            e = json_pack("{s:s,s:o,s:o,s:o}", "name", name, "setup", json_array(), "collectives",
                          json_array(), "parent", json_null());
            json_object_set_new(by, name, e);
        }
        json_array_append_new(json_object_get(e, "collectives"), json_integer((json_int_t)i));
    }
    const char *k;
    json_t *v;
    json_object_foreach(by, k, v)
    {
        json_array_append(A->communicators, v);
    }
    json_decref(by);
}

/* Functions that issue collectives, with the sites that call them, so a
 * collective inside a helper can be traced to its callers (and their loops). */
static json_t *build_functions(struct analysis *A)
{
    json_t *by = json_object(), *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(A->collectives, i, c)
    {
        const char *fn = json_string_value(json_object_get(c, "function"));
        if (!fn)
            continue;
        json_t *e = json_object_get(by, fn);
        if (!e) {
            json_t *sites = json_object_get(A->call_sites, fn);
            e = json_pack("{s:s,s:o,s:O}", "name", fn, "collectives", json_array(), "called_from",
                          sites ? sites : json_array());
            if (!sites)
                json_decref(json_object_get(e, "called_from"));
            json_object_set_new(by, fn, e);
            json_array_append(out, e);
        }
        json_array_append_new(json_object_get(e, "collectives"), json_integer((json_int_t)i));
    }
    json_decref(by);
    return out;
}

/* ---- input files ------------------------------------------------------ */

static int has_source_ext(const char *name)
{
    static const char *const exts[] = {".cu", ".cuh", ".cpp", ".cc", ".cxx",
                                       ".c",  ".h",   ".hpp", NULL};
    for (int i = 0; exts[i]; i++)
        if (cuco_str_ends_with(name, exts[i]))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct file_list {
    struct src_file *v;
    size_t n;
};

static int list_has(const struct file_list *L, const char *path)
{
    for (size_t i = 0; i < L->n; i++)
        if (!strcmp(L->v[i].path, path))
            return 1;
    return 0;
}

static int load_file(struct file_list *L, const char *path, cuco_err *e)
{
    if (list_has(L, path))
        return 0;
    struct src_file f;
    memset(&f, 0, sizeof f);
    int rc = cuco_fs_read(path, &f.text, &f.len, e);
    if (rc) {
        char *why = cuco_strdup(cuco_err_msg(e));
        cuco_err_set_at(e, CUCO_EIO, path, 0, "%s", why ? why : "cannot read");
        free(why);
        return CUCO_EIO;
    }
    f.path = cuco_strdup(path);
    rc = cuco_lex_run(&f.lx, f.text, f.len, e);
    if (!rc) {
        f.sig = malloc((f.lx.ntoks ? f.lx.ntoks : 1) * sizeof *f.sig);
        if (!f.sig)
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < f.lx.ntoks; i++)
            if (f.lx.toks[i].kind != CUCO_TOK_COMMENT && f.lx.toks[i].kind != CUCO_TOK_PREPROC)
                f.sig[f.nsig++] = i;
    }
    struct src_file *nv = rc ? NULL : realloc(L->v, (L->n + 1) * sizeof *nv);
    if (!nv) {
        free(f.path);
        free(f.text);
        free(f.sig);
        cuco_lex_free(&f.lx);
        return rc ? rc : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    L->v = nv;
    L->v[L->n++] = f;
    /* Follow #include "x" of files next to this one. */
    struct src_file *F = &L->v[L->n - 1];
    char *dir = cuco_path_dirname(path);
    for (size_t i = 0; i < F->lx.ntoks; i++) {
        const cuco_tok *t = &F->lx.toks[i];
        if (t->kind != CUCO_TOK_PREPROC || t->dir_len != 7 ||
            memcmp(F->text + t->dir_off, "include", 7))
            continue;
        const char *q = memchr(F->text + t->dir_off, '"', t->off + t->len - t->dir_off);
        if (!q)
            continue;
        const char *q2 = memchr(q + 1, '"', (size_t)(F->text + t->off + t->len - (q + 1)));
        if (!q2)
            continue;
        char *inc = cuco_strndup(q + 1, (size_t)(q2 - q - 1));
        char *full = cuco_path_join(dir, inc);
        if (full && cuco_fs_exists(full) && !cuco_fs_is_dir(full)) {
            cuco_err ie = CUCO_ERR_INIT;
            if (load_file(L, full, &ie)) /* an unreadable include is a note, not a failure */
                cuco_err_clear(&ie);
        }
        free(full);
        free(inc);
        /* the list may have moved: find this file again */
        for (size_t j = 0; j < L->n; j++)
            if (!strcmp(L->v[j].path, path))
                F = &L->v[j];
    }
    free(dir);
    return 0;
}

static int load_dir(struct file_list *L, const char *path, cuco_err *e)
{
    DIR *d = opendir(path);
    if (!d)
        return cuco_err_set_at(e, CUCO_EIO, path, 0, "cannot open folder '%s'", path);
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_source_ext(de->d_name))
            continue;
        char **nv = realloc(names, (n + 1) * sizeof *nv);
        if (!nv)
            break;
        names = nv;
        names[n++] = cuco_path_join(path, de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rc && !cuco_fs_is_dir(names[i]))
            rc = load_file(L, names[i], e);
        free(names[i]);
    }
    free(names);
    return rc;
}

static void analysis_free(struct analysis *A)
{
    for (size_t i = 0; i < A->nkernels; i++) {
        free(A->kernels[i].name);
        free(A->kernels[i].ptr_kind);
    }
    free(A->kernels);
    for (size_t i = 0; i < A->ngraph; i++) {
        struct node *n = &A->graph[i];
        free(n->function);
        free(n->stream);
        for (size_t j = 0; j < n->nreads; j++)
            free(n->reads[j]);
        for (size_t j = 0; j < n->nwrites; j++)
            free(n->writes[j]);
        free(n->reads);
        free(n->writes);
    }
    free(A->graph);
    for (size_t i = 0; i < A->nmarks; i++) {
        free(A->marks[i].event);
        free(A->marks[i].function);
    }
    free(A->marks);
    for (size_t i = 0; i < A->nwaits; i++) {
        free(A->waits[i].stream);
        free(A->waits[i].function);
    }
    free(A->waits);
    json_decref(A->cublas_streams);
    json_decref(A->call_sites);
    json_decref(A->aliases);
    json_decref(A->params);
    json_decref(A->calls);
    json_decref(A->comm_calls);
}

int cuco_analyze_paths(const char *const *paths, size_t npaths, json_t **out, cuco_err *e)
{
    struct file_list L = {NULL, 0};
    int rc = 0;
    *out = NULL;
    for (size_t i = 0; !rc && i < npaths; i++)
        rc = cuco_fs_is_dir(paths[i]) ? load_dir(&L, paths[i], e) : load_file(&L, paths[i], e);
    struct analysis A;
    memset(&A, 0, sizeof A);
    if (!rc) {
        A.root = json_object();
        A.files = json_array();
        A.communicators = json_array();
        A.collectives = json_array();
        A.groups = json_array();
        A.comm_calls = json_array();
        A.allocations = json_array();
        A.launches = json_array();
        A.streams = json_array();
        A.events = json_array();
        A.syncs = json_array();
        A.memcpys = json_array();
        A.macros = json_array();
        A.nodes = json_array();
        A.edges = json_array();
        A.notes = json_array();
        A.cublas_streams = json_object();
        A.call_sites = json_object();
        A.aliases = json_object();
        A.params = json_object();
        A.calls = json_array();
        for (size_t i = 0; i < L.n; i++) {
            json_array_append_new(A.files, json_pack("{s:s,s:I,s:I}", "path", L.v[i].path, "bytes",
                                                     (json_int_t)L.v[i].len, "tokens",
                                                     (json_int_t)L.v[i].lx.ntoks));
            for (size_t d = 0; d < L.v[i].lx.ndiags; d++)
                note(&A, L.v[i].path, L.v[i].lx.diags[d].line, "%s", L.v[i].lx.diags[d].msg);
            collect_kernels(&A, &L.v[i]);
            collect_macros(&A, &L.v[i]);
        }
        for (size_t i = 0; i < L.n; i++)
            scan_file(&A, &L.v[i], (int)i);
        classify_helper_groups(&A);
        build_call_nodes(&A);
        build_edges(&A);
        build_communicators(&A);
        json_t *comm_setup = A.comm_calls;
        A.comm_calls = NULL;
        json_t *graph = json_pack("{s:o,s:o}", "nodes", A.nodes, "edges", A.edges);
        json_object_set_new(A.root, "version", json_integer(1));
        json_object_set_new(A.root, "files", A.files);
        json_object_set_new(A.root, "communicators", A.communicators);
        json_object_set_new(A.root, "comm_setup", comm_setup);
        json_object_set_new(A.root, "collectives", A.collectives);
        json_object_set_new(A.root, "groups", A.groups);
        json_object_set_new(A.root, "allocations", A.allocations);
        json_object_set_new(A.root, "launches", A.launches);
        json_object_set_new(A.root, "streams", A.streams);
        json_object_set_new(A.root, "events", A.events);
        json_object_set_new(A.root, "syncs", A.syncs);
        json_object_set_new(A.root, "memcpys", A.memcpys);
        json_object_set_new(A.root, "macros", A.macros);
        json_object_set_new(A.root, "functions", build_functions(&A));
        json_object_set_new(A.root, "graph", graph);
        json_object_set_new(A.root, "notes", A.notes);
        *out = A.root;
        analysis_free(&A);
    }
    for (size_t i = 0; i < L.n; i++) {
        free(L.v[i].path);
        free(L.v[i].text);
        free(L.v[i].sig);
        cuco_lex_free(&L.v[i].lx);
    }
    free(L.v);
    return rc;
}
