/* semantics.c: the vocabulary of declared semantics (cuco/semantics.h):
 * its terms, the check of a declaration against them, and their text for
 * reports and prompts. */
#include "cuco/semantics.h"

#include <stdlib.h>
#include <string.h>

static const cuco_semantic_term terms[] = {
    {"attention", "kernel",
     "over=keys merge=log_sum_exp keys=* args=* first_key=* out=* lse=* out_rows=* out_width=* "
     "queries=* first_query=* query_args=* query_width=* query_grid=x|y|z causal=* params=*",
     "the kernel computes softmax attention; its result over all keys is the log-sum-exp "
     "merge of its results over parts of the keys: launched with its key-indexed pointers "
     "moved to key k0, its key count set to n (and first_key= to its global index plus k0), "
     "it writes the attention of its queries over keys k0..k0+n-1 to out= and the natural log "
     "of each output row's softmax denominator to lse= (float, one per output row, -inf where "
     "no key is visible; the kernel may be given a null lse= by the program). keys= names the "
     "key count's parameter, args= the pointers indexed by key (NAME or NAME:WIDTH, as "
     "rows_independent's), out_rows= and out_width= the output's rows (as many as lse "
     "entries) and elements per row, as expressions over its parameters; params= as for "
     "rows_independent. For moving work between ranks: queries= the query count's parameter, "
     "first_query= the global index of its first query, query_args= the pointers indexed by "
     "query, query_width= their elements per query (an expression), query_grid= the grid "
     "dimension that covers the queries (launched on that dimension scaled to n queries of "
     "its count, rounded up, with the query pointers moved to query q0, the query count set "
     "to n and first_query= raised by q0, it computes queries q0..q0+n-1, whose output rows "
     "are the query's out_rows/queries consecutive rows), causal= the parameter that says "
     "whether a query sees only keys at or before its index (or true)",
     "consume local K/V first and each remote part as it lands, merging partial outputs by "
     "log-sum-exp (context parallelism)",
     "schedule consumer_split_by_source splits a launch that is the first consumer of "
     "all-gathers of its key arguments (one all-gather, or several in one group): one launch "
     "per source rank's keys (own first, each peer's in CUCO_ATTN_CHUNKS parts as they land), "
     "merged by log-sum-exp (needs keys=, args=, out=, lse=, out_rows=, out_width=, and the "
     "kernel's __global__ definition or declaration in the evolve file); with queries=, "
     "first_query=, query_args=, query_width= and query_grid= as well, a rank that sees more "
     "keys than another (a causal mask) lends the last of its queries over one source's keys "
     "to the least busy rank, which attends them and writes their part into the lender's "
     "merge (CUCO_ATTN_LEND)"},
    {"routing_permutation", "call", "dedup=true|false",
     "the exchange moves each token to the ranks of the experts it is routed to (an MoE "
     "dispatch or combine); dedup=true: a token bound for several experts of one rank "
     "needs to travel once",
     "the experts of tokens that stay local run while the rest are dispatched; the combine "
     "of one chunk runs behind the experts of the next; one copy per destination rank",
     NULL},
    {"rows_independent", "kernel", "rows=* args=* params=*",
     "each output row depends only on the same input row (elementwise, layer norm, an "
     "activation): launched with its row-indexed pointers moved to row r0 and its row count "
     "set to n (same grid), the kernel computes rows r0..r0+n-1 and touches no other (so "
     "two such launches on disjoint rows may run at the same time); rows= "
     "names the parameter that holds the row count, args= the pointer parameters indexed by "
     "row, each NAME (as many elements per row as the gathered, received or reduced one) or "
     "NAME:WIDTH "
     "(WIDTH: the parameter that holds its elements per row); params= lists the kernel's "
     "parameter names when neither its definition nor a declaration is in the evolve file",
     "a kernel that consumes gathered rows runs per source rank as the rows land (consumer "
     "split for kernels); a kernel that consumes a received buffer runs piece by piece as it "
     "lands (layer-wise); a kernel that makes an all-reduce's or a reduce-scatter's input runs "
     "in ranges of rows, each reduced as soon as it is made (producer split for kernels)",
     "schedules consumer_split_by_source (a launch that is an all-gather's first consumer), "
     "consume_as_received (a launch that is a receive's first consumer, outside an NCCL "
     "group) and producer_split (a launch right before an in-place all-reduce, or a "
     "reduce-scatter, of a row argument) split it (all need rows= and args=, and the kernel's "
     "__global__ definition or declaration in the evolve file, or params=; "
     "consume_as_received also the received argument's width, NAME:WIDTH)"},
    {"sum_reduction", "kernel", "into=*",
     "the kernel adds its contribution into the output (into= names it): partial results may "
     "be added in any order",
     "partial results are reduced as each part is made (the producer side of a "
     "reduce-scatter or all-reduce)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL}};

const cuco_semantic_term *cuco_semantic_terms(void)
{
    return terms;
}

const cuco_semantic_term *cuco_semantic_term_find(const char *name)
{
    for (const cuco_semantic_term *t = terms; name && t->name; t++)
        if (!strcmp(t->name, name))
            return t;
    return NULL;
}

const char *cuco_semantic_param(const cuco_semantic *s, const char *key)
{
    for (size_t i = 0; i < s->n_params; i++)
        if (!strcmp(s->keys[i], key))
            return s->values[i];
    return NULL;
}

/* The allowed values of parameter key of t ("v1|v2", "*"), or NULL when t
 * has no such parameter. *len gets the length of that text. */
static const char *param_spec(const cuco_semantic_term *t, const char *key, size_t *len)
{
    size_t kl = strlen(key);
    for (const char *p = t->params; *p;) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            *len = n - kl - 1;
            return p + kl + 1;
        }
        p += n + (end != NULL);
    }
    return NULL;
}

static int value_allowed(const char *spec, size_t len, const char *value)
{
    if (len == 1 && spec[0] == '*')
        return *value != '\0';
    size_t vl = strlen(value);
    for (const char *p = spec; p < spec + len;) {
        const char *bar = memchr(p, '|', (size_t)(spec + len - p));
        size_t n = bar ? (size_t)(bar - p) : (size_t)(spec + len - p);
        if (n == vl && !strncmp(p, value, n))
            return 1;
        p += n + 1;
    }
    return 0;
}

static char *term_list(void)
{
    cuco_buf b = CUCO_BUF_INIT;
    for (const cuco_semantic_term *t = terms; t->name; t++)
        cuco_buf_printf(&b, "%s%s (%s)", t == terms ? "" : ", ", t->name, t->applies_to);
    return cuco_buf_detach(&b);
}

const char *cuco_semantic_check(const cuco_semantic *s, char **owned)
{
    *owned = NULL;
    if (!s->term)
        return "missing 'is' (the term of the vocabulary)";
    if (!!s->kernel == !!s->call)
        return "name exactly one of 'kernel' and 'call'";
    const cuco_semantic_term *t = cuco_semantic_term_find(s->term);
    if (!t) {
        char *list = term_list();
        *owned = cuco_sprintf("unknown term '%s' (the vocabulary: %s)", s->term, list ? list : "");
        free(list);
        return *owned;
    }
    if (strcmp(t->applies_to, s->kernel ? "kernel" : "call"))
        return *owned = cuco_sprintf("'%s' describes a %s, not a %s", t->name, t->applies_to,
                                     s->kernel ? "kernel" : "call");
    for (size_t i = 0; i < s->n_params; i++) {
        size_t len = 0;
        const char *spec = param_spec(t, s->keys[i], &len);
        if (!spec)
            return *owned = cuco_sprintf("'%s' takes no parameter '%s' (its parameters: %s)",
                                         t->name, s->keys[i], t->params);
        if (!value_allowed(spec, len, s->values[i]))
            return *owned = cuco_sprintf("'%s' of '%s' must be %.*s, not '%s'", s->keys[i], t->name,
                                         (int)len, spec, s->values[i]);
    }
    return NULL;
}

void cuco_semantics_describe(const cuco_semantic *s, size_t n, const char *prefix, cuco_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        const cuco_semantic_term *t = cuco_semantic_term_find(s[i].term);
        if (!t)
            continue;
        cuco_buf_printf(out, "%s%s %s is %s", prefix, s[i].kernel ? "kernel" : "call",
                        s[i].kernel ? s[i].kernel : s[i].call, t->name);
        for (size_t k = 0; k < s[i].n_params; k++)
            cuco_buf_printf(out, "%s%s=%s", k ? ", " : " (", s[i].keys[k], s[i].values[k]);
        cuco_buf_printf(out, "%s: %s; admits: %s; %s\n", s[i].n_params ? ")" : "", t->means,
                        t->admits,
                        t->schedule ? t->schedule
                                    : "no schedule of the transform uses it yet: a strategy note "
                                      "for the LLM mutators");
    }
}

void cuco_semantic_free(cuco_semantic *s)
{
    free(s->kernel);
    free(s->call);
    free(s->term);
    for (size_t i = 0; i < s->n_params; i++) {
        free(s->keys[i]);
        free(s->values[i]);
    }
    free(s->keys);
    free(s->values);
    memset(s, 0, sizeof *s);
}
