/* llm.h: the LLM layer: clients for the Anthropic Messages API and for
 * OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, ...), prices and
 * budget accounting, a UCB1 bandit choosing among several models, and prompt
 * templates.
 *
 * Keys come from environment variables only (ANTHROPIC_API_KEY,
 * OPENAI_API_KEY or a configured variable name); they are read when a request
 * is sent and never logged, stored or copied into results.
 *
 * A model is named "provider:model" ("anthropic:claude-sonnet-4-5",
 * "openai:qwen2.5-coder") or by its bare name, in which case "claude*" goes to
 * Anthropic and everything else to the OpenAI-compatible API.
 */
#ifndef CUCO_LLM_H
#define CUCO_LLM_H

#include "cuco/buf.h"
#include "cuco/err.h"
#include <stddef.h>

/* ---- models ----------------------------------------------------------- */

typedef enum cuco_llm_api {
    CUCO_LLM_ANTHROPIC = 0,
    CUCO_LLM_OPENAI = 1,
} cuco_llm_api;

/* "anthropic" / "openai". */
const char *cuco_llm_api_name(cuco_llm_api api);

/* Splits a model spec into its API and bare model name (*model: caller
 * frees). An unknown "x:" prefix is CUCO_EINVAL. */
int cuco_llm_model_parse(const char *spec, cuco_llm_api *api, char **model, cuco_err *e);

/* ---- requests and responses ------------------------------------------- */

typedef struct cuco_llm_request {
    cuco_llm_api api;
    const char *model;  /* bare model name */
    const char *system; /* system prompt, or NULL */
    const char *user;   /* user message */
    int max_tokens;     /* > 0 */
    double temperature; /* < 0: not sent (server default) */
} cuco_llm_request;

typedef enum cuco_llm_status {
    CUCO_LLM_OK = 0,
    CUCO_LLM_HTTP_ERROR,        /* a non-retryable HTTP status (400, 401, 403, 404 ...) */
    CUCO_LLM_RETRIES_EXHAUSTED, /* 429/5xx/connection errors until max_retries */
    CUCO_LLM_TIMEOUT,           /* every attempt timed out */
    CUCO_LLM_BAD_RESPONSE,      /* 200 but the body is not a usable response */
    CUCO_LLM_NO_KEY,            /* the key variable is not set */
    CUCO_LLM_BUDGET,            /* not sent: it could exceed the budget */
} cuco_llm_status;

/* "ok", "http_error", "retries_exhausted", "timeout", "bad_response",
 * "no_key", "budget". */
const char *cuco_llm_status_name(cuco_llm_status s);

typedef struct cuco_llm_response {
    cuco_llm_status status;
    int http_status;         /* last HTTP status, 0 if none came back */
    char *text;              /* the assistant text (owned) or NULL */
    char *stop_reason;       /* "end_turn", "stop", "max_tokens", "length"... (owned) or NULL */
    char *error;             /* why it failed, with the server's message (owned) or NULL */
    long input_tokens;       /* prompt tokens billed at the input price (cache reads excluded) */
    long cached_tokens;      /* prompt tokens read from the prompt cache */
    long cache_write_tokens; /* Anthropic cache creation tokens (1.25 x input price) */
    long output_tokens;
    double cost_usd;  /* from the price table; 0 when the model has no price */
    double latency_s; /* wall time of all attempts, backoff included */
    int attempts;
} cuco_llm_response;

void cuco_llm_response_free(cuco_llm_response *r);

/* 1 for OpenAI reasoning models (gpt-5*, o1, o3, o4-mini...), which take
 * max_completion_tokens and no temperature. */
int cuco_llm_openai_reasoning_model(const char *model);
/* Request bodies as JSON text (caller frees). The Anthropic system prompt
 * is sent as one text block marked for the prompt cache. */
char *cuco_llm_request_json(const cuco_llm_request *req);
/* Parses a 200 body into r (text, stop_reason, tokens). CUCO_EINVAL with the
 * reason when it is not a usable response. */
int cuco_llm_response_parse(cuco_llm_api api, const char *body, size_t len, cuco_llm_response *r,
                            cuco_err *e);
/* The "error.message" of an error body, or the body itself cut to 500 bytes.
 * Caller frees. */
char *cuco_llm_error_message(const char *body, size_t len);
/* Parses a Retry-After value: seconds, or an HTTP date. < 0 if unusable. */
double cuco_llm_retry_after_parse(const char *value);

/* ---- prices ----------------------------------------------------------- */

typedef struct cuco_llm_price {
    char *model;         /* a model name or a prefix of one (owned) */
    double input;        /* $ per million input tokens */
    double output;       /* $ per million output tokens */
    double cached_input; /* $ per million cached input tokens */
} cuco_llm_price;

typedef struct cuco_llm_prices {
    cuco_llm_price *items; /* owned */
    size_t n;
} cuco_llm_prices;

/* Fills t with the built-in table (current Claude and GPT models). */
int cuco_llm_prices_init(cuco_llm_prices *t, cuco_err *e);
void cuco_llm_prices_free(cuco_llm_prices *t);
/* Adds or replaces a price. */
int cuco_llm_prices_set(cuco_llm_prices *t, const char *model, double input, double output,
                        double cached_input, cuco_err *e);
/* Overrides from a JSON file: {"model": {"input": 3, "output": 15,
 * "cached_input": 0.3}, ...}. Errors name the file. */
int cuco_llm_prices_load(cuco_llm_prices *t, const char *path, cuco_err *e);
/* Overrides from text "model=in,out[,cached];model2=..." (a CLI flag). */
int cuco_llm_prices_parse(cuco_llm_prices *t, const char *spec, cuco_err *e);
/* The entry for model: exact name first, then the longest prefix. NULL if none. */
const cuco_llm_price *cuco_llm_prices_find(const cuco_llm_prices *t, const char *model);
/* Cost of a finished call. */
double cuco_llm_cost(const cuco_llm_price *p, long input_tokens, long cached_tokens,
                     long cache_write_tokens, long output_tokens);
/* Upper estimate of a request's input tokens from its text (3 bytes a token,
 * plus a fixed overhead): prompts of code and English run nearer 4, so the
 * estimate errs on the side of stopping early. */
long cuco_llm_estimate_input_tokens(const cuco_llm_request *req);
/* Upper estimate of a request's cost: estimated input at the input price plus
 * max_tokens at the output price. */
double cuco_llm_estimate_cost(const cuco_llm_price *p, const cuco_llm_request *req);
/* The most input tokens (billed, cached and cache-written together) a reply
 * to req can claim: one a byte of its prompt, plus a million for whatever a
 * provider adds (a sanity bound; the budget check is what keeps the cap). */
long cuco_llm_max_input_tokens(const cuco_llm_request *req);
/* The most output tokens a reply to req can claim: max_tokens with a margin
 * of 10% + 64 for counts that differ from the limit's. */
long cuco_llm_max_output_tokens(const cuco_llm_request *req);
/* 0 when r's token counts are ones a reply to req can have (none negative,
 * none above the two maxima); else CUCO_EINVAL with e saying which. */
int cuco_llm_usage_check(const cuco_llm_request *req, const cuco_llm_response *r, cuco_err *e);

/* ---- budget ----------------------------------------------------------- */

/* A run's spending limit. A call is admitted only if what was spent, plus
 * what calls in flight may still spend, plus its own estimate stays within
 * the limit; when it returns, its reservation is replaced by its real cost. */
typedef struct cuco_llm_budget {
    double limit_usd; /* <= 0: no limit */
    double spent_usd;
    double reserved_usd;
    long calls;   /* finished calls (failed ones included) */
    long refused; /* calls refused because of the limit */
} cuco_llm_budget;

void cuco_llm_budget_init(cuco_llm_budget *b, double limit_usd);
/* 0 and reserves estimate_usd; CUCO_EBUDGET (and e says by how much) if it
 * would exceed the limit. */
int cuco_llm_budget_reserve(cuco_llm_budget *b, double estimate_usd, cuco_err *e);
/* Releases a reservation and adds the real cost. */
void cuco_llm_budget_commit(cuco_llm_budget *b, double estimate_usd, double cost_usd);
/* What is left under the limit (infinity when unlimited). */
double cuco_llm_budget_left(const cuco_llm_budget *b);
/* 1 when replacing a reservation of estimate_usd by cost_usd keeps what was
 * spent and reserved within the limit (always when there is none). */
int cuco_llm_budget_fits(const cuco_llm_budget *b, double estimate_usd, double cost_usd);

/* ---- client ----------------------------------------------------------- */

typedef struct cuco_llm_config {
    const char
        *anthropic_base_url;       /* NULL: $CUCO_ANTHROPIC_BASE_URL or https://api.anthropic.com */
    const char *openai_base_url;   /* NULL: $CUCO_OPENAI_BASE_URL or https://api.openai.com */
    const char *anthropic_key_env; /* NULL: "ANTHROPIC_API_KEY" */
    const char *openai_key_env;    /* NULL: "OPENAI_API_KEY" */
    double timeout_s;              /* per attempt; 0: 300 */
    double connect_timeout_s;      /* 0: 10 */
    int max_retries;               /* retries after the first attempt; 0: 4; < 0: none */
    double backoff_base_s;         /* first backoff; 0: 1 s */
    double backoff_max_s;          /* cap; 0: 60 s */
    int max_parallel;              /* requests in flight at once; 0: 8 */
    unsigned seed;                 /* jitter seed; 0: from the clock */
} cuco_llm_config;

/* Fills the fields of cfg still at 0 from the environment:
 * CUCO_LLM_TIMEOUT_S, CUCO_LLM_RETRIES (0: none), CUCO_LLM_BACKOFF_S,
 * CUCO_LLM_BACKOFF_MAX_S, CUCO_LLM_PARALLEL. (Base URLs and key variables
 * are read by cuco_llm_client_new().) A value that is not a number in range
 * ("5m") is CUCO_EINVAL naming the variable. */
int cuco_llm_config_from_env(cuco_llm_config *cfg, cuco_err *e);

typedef struct cuco_llm_client cuco_llm_client;

/* Copies what it needs from cfg. Free with cuco_llm_client_free(). */
int cuco_llm_client_new(const cuco_llm_config *cfg, const cuco_llm_prices *prices,
                        cuco_llm_client **out, cuco_err *e);
void cuco_llm_client_free(cuco_llm_client *c);
/* The base URL requests of api go to (owned by the client). */
const char *cuco_llm_client_base_url(const cuco_llm_client *c, cuco_llm_api api);

/* 0 when a request to api could be sent: its key variable is set, or the
 * API is an OpenAI-compatible server other than api.openai.com (local
 * servers need no key). CUCO_EINVAL naming the variable otherwise. */
int cuco_llm_client_check_key(const cuco_llm_client *c, cuco_llm_api api, cuco_err *e);

/* Sends n requests at once (up to max_parallel in flight), retrying 429, 5xx
 * and connection errors with exponential backoff and jitter (at least the
 * server's retry-after), and returns when all have finished. Each resps[i]
 * is filled whatever happens (free with cuco_llm_response_free()); the status
 * of each call is in resps[i].status. With a budget, each request is admitted
 * against its estimate first (refused ones get CUCO_LLM_BUDGET and are not
 * sent) and its real cost is committed when it ends. Returns negative only
 * when the batch could not run at all (curl could not start). */
int cuco_llm_batch_run(cuco_llm_client *c, const cuco_llm_request *reqs, cuco_llm_response *resps,
                       size_t n, cuco_llm_budget *budget, cuco_err *e);

/* ---- model bandit ----------------------------------------------------- */

/* UCB1 over models. The reward of a call is the improvement of its child's
 * score over its parent's (0 when worse or failed) per dollar spent; an arm's
 * value is its total improvement over its total cost, scaled by the best
 * arm's value into [0, 1]. */
typedef struct cuco_llm_arm {
    char *model; /* model spec (owned) */
    long pulls;
    double improvement; /* sum of max(0, child - parent) */
    double cost_usd;    /* sum of costs */
} cuco_llm_arm;

typedef struct cuco_llm_bandit {
    cuco_llm_arm *arms; /* owned */
    size_t n;
    long total_pulls;
    double explore; /* exploration weight c in c * sqrt(2 ln N / n_i); default 1 */
} cuco_llm_bandit;

int cuco_llm_bandit_init(cuco_llm_bandit *b, const char *const *models, size_t n, cuco_err *e);
void cuco_llm_bandit_free(cuco_llm_bandit *b);
/* Index of the arm to pull next: an arm never pulled first (in order), then
 * the highest UCB1 value (ties: lowest index). Counts the pull. */
size_t cuco_llm_bandit_choose(cuco_llm_bandit *b);
/* Reports a pulled arm's outcome. */
void cuco_llm_bandit_update(cuco_llm_bandit *b, size_t arm, double improvement, double cost_usd);
/* The UCB1 value of an arm now (for tests and reports). */
double cuco_llm_bandit_value(const cuco_llm_bandit *b, size_t arm);
/* Index of the arm named model, or -1. */
long cuco_llm_bandit_find(const cuco_llm_bandit *b, const char *model);

/* ---- prompt templates ------------------------------------------------- */

/* Named values for a template. Values are borrowed. */
typedef struct cuco_llm_var {
    const char *name;
    const char *value; /* NULL counts as empty */
} cuco_llm_var;

/* Fills a template: "{{name}}" is replaced by the value; a section
 * "{{#name}}...{{/name}}" is kept only when the value is not empty, and
 * "{{^name}}...{{/name}}" only when it is. An unknown name is CUCO_EINVAL
 * (with the template's line), so a typo never reaches a model. Appends to out. */
int cuco_llm_template_fill(const char *tmpl, const char *tmpl_name, const cuco_llm_var *vars,
                           size_t n_vars, cuco_buf *out, cuco_err *e);
/* A template embedded under src/llm/prompts/ ("diff.md"), or, when
 * $CUCO_PROMPTS_DIR is set, the file of that name there. *text: caller frees. */
int cuco_llm_template_load(const char *name, char **text, cuco_err *e);
/* The project notes fed to prompts (docs/context/NAME, embedded). Caller frees. */
int cuco_llm_context_load(const char *name, char **text, cuco_err *e);

/* ---- prompts for the mutators ----------------------------------------- */

typedef enum cuco_llm_prompt_kind {
    CUCO_LLM_PROMPT_DIFF = 0, /* SEARCH/REPLACE edits of the parent */
    CUCO_LLM_PROMPT_FULL,     /* new bodies of every EVOLVE-BLOCK */
    CUCO_LLM_PROMPT_CROSS,    /* combine the parent with a second parent */
} cuco_llm_prompt_kind;

/* "diff", "full", "cross". */
const char *cuco_llm_prompt_kind_name(cuco_llm_prompt_kind k);

/* A program shown in a prompt (borrowed strings; any may be NULL). */
typedef struct cuco_llm_example {
    const char *code;
    double score;       /* speedup; < 0 when it has none */
    const char *status; /* eval status name, "patch_failed"... */
    const char *mutator;
    const char *description; /* what the change was meant to do */
    const char *error;       /* the excerpt that explains a failure */
} cuco_llm_example;

/* What goes into a mutator's prompts (all borrowed; NULL/0 = absent). */
typedef struct cuco_llm_prompt_ctx {
    const char *workload; /* name */
    const char *description;
    const char *design_space; /* text, e.g. from cuco_llm_format_space() */
    const char *hardware;     /* text: GPUs, SMs, links, NCCL version */
    const char *parent_code;
    double parent_score;
    const char *parent_metrics; /* CUCO_RESULT JSON */
    const char *other_code;     /* cross: the second parent */
    double other_score;
    const cuco_llm_example *failures; /* recent failed children, newest first */
    size_t n_failures;
    const cuco_llm_example *top; /* the island's best programs */
    size_t n_top;
    const char *meta_summary;
    size_t max_excerpt;  /* bytes of each failure excerpt; 0: 1500 */
    size_t max_top_code; /* bytes of each top program's blocks; 0: 6000 */
} cuco_llm_prompt_ctx;

/* Builds the system prompt (system.md with docs/context notes) and the user
 * prompt of kind (diff.md, full.md or cross.md). Both caller frees. */
int cuco_llm_prompt_build(cuco_llm_prompt_kind kind, const cuco_llm_prompt_ctx *ctx, char **system,
                          char **user, cuco_err *e);
/* The text of a program's EVOLVE-BLOCKs (markers included), blocks joined
 * by "...\n"; the whole text when it has no markers. Caller frees. */
char *cuco_llm_blocks_text(const char *code);
/* The workload's design space as "name: v1, v2" lines. Appends to out. */
struct cuco_workload;
void cuco_llm_format_space(const struct cuco_workload *w, cuco_buf *out);
/* Hardware lines for the system prompt: gpus (free text from the doctor,
 * e.g. "2x NVIDIA H200, 132 SMs, NVLink NV18", or NULL) and what the
 * toolchain found (nvcc, NCCL version, device API, GIN headers). Appends. */
struct cuco_toolchain;
void cuco_llm_format_hardware(const struct cuco_toolchain *tc, const char *gpus, cuco_buf *out);
/* Number of EVOLVE-BLOCK-START markers in code. */
int cuco_llm_block_count(const char *code);

/* ---- a run's LLM session ---------------------------------------------- */

/* One finished (or refused) call, as the database records it. */
typedef struct cuco_llm_call_record {
    const char *model;   /* spec as given, e.g. "claude-sonnet-4-5" */
    const char *purpose; /* "diff", "full", "cross", "meta", "novelty" */
    const char *status;  /* cuco_llm_status_name() */
    long input_tokens, cached_tokens, cache_write_tokens, output_tokens;
    double cost_usd;
    double latency_s;
    int attempts;
    char prompt_hash[17]; /* xxh3 of system + user */
    const char *error;    /* or NULL */
} cuco_llm_call_record;

typedef int (*cuco_llm_record_fn)(void *ctx, const cuco_llm_call_record *rec, cuco_err *e);

typedef struct cuco_llm_session_opts {
    const char *const *models; /* model specs, NULL-terminated; at least one */
    double budget_usd;         /* <= 0: no limit */
    int max_tokens;            /* per call; 0: 8192 */
    double temperature;        /* < 0: server default */
    cuco_llm_config client;    /* base URLs, key variables, timeouts, retries
                                  (zero fields: cuco_llm_config_from_env()) */
    const char *prices_file;   /* JSON overrides, or NULL */
    const char *prices;        /* "model=in,out[,cached];..." overrides; NULL: $CUCO_LLM_PRICES */
    cuco_llm_record_fn record; /* called after every call (refused ones too), or NULL */
    void *record_ctx;
    double spent_usd; /* already spent by this run (resume) */
} cuco_llm_session_opts;

typedef struct cuco_llm_session cuco_llm_session;

/* Checks the models (a budget needs a price for each) and makes the
 * client. Free with cuco_llm_session_free(). */
int cuco_llm_session_new(const cuco_llm_session_opts *o, cuco_llm_session **out, cuco_err *e);
void cuco_llm_session_free(cuco_llm_session *s);

/* A call's outcome for the caller. */
typedef struct cuco_llm_reply {
    size_t arm;             /* the bandit arm (model) that answered */
    const char *model;      /* its spec (owned by the session) */
    cuco_llm_response resp; /* free with cuco_llm_response_free() */
} cuco_llm_reply;

/* Sends n prompts at once, each to a model the bandit chooses, under the
 * budget; records each call. Returns 0 when every call ran (replies[i].resp.status
 * says how it went), CUCO_EBUDGET when the budget refused at least one call
 * (the run should stop: the others still ran and are filled), other negative
 * codes when nothing could be sent. */
int cuco_llm_session_ask(cuco_llm_session *s, const char *purpose, const char *const *systems,
                         const char *const *users, size_t n, cuco_llm_reply *replies, cuco_err *e);
/* Reports an evaluated child of a call answered by arm. */
void cuco_llm_session_reward(cuco_llm_session *s, size_t arm, double improvement, double cost_usd);
const cuco_llm_budget *cuco_llm_session_budget(const cuco_llm_session *s);
/* Why no further call can work, once a call has shown it: the key variable
 * is not set, the server refused the key or the model (HTTP 401, 403, 404),
 * or it could not be reached after the retries. NULL while calls may still
 * work (timeouts, rate limits and server errors may pass). Owned by the
 * session. */
const char *cuco_llm_session_fatal(const cuco_llm_session *s);
/* Checks every model's key before the first call (cuco_llm_client_check_key),
 * so that a missing key is a usage error rather than a run of failures. */
int cuco_llm_session_check_keys(const cuco_llm_session *s, cuco_err *e);
const cuco_llm_bandit *cuco_llm_session_bandit(const cuco_llm_session *s);
/* Spend per model and in total, one line each. Appends to out. */
void cuco_llm_session_summary(const cuco_llm_session *s, cuco_buf *out);

/* ---- meta summary ----------------------------------------------------- */

/* One evaluated program, for the rule-based summary (borrowed strings). */
typedef struct cuco_meta_entry {
    const char *status;     /* "ok", "compile_error", ... */
    double score;           /* speedup when ok */
    const char *knobs_json; /* {"NAME": "VALUE"} or NULL */
    const char *mutator;
    const char *error; /* failure excerpt or NULL */
} cuco_meta_entry;

/* A summary without an LLM: counts per status, the best programs' knob
 * settings and scores, and the most common failure lines. Appends to out. */
int cuco_meta_summary_rules(const cuco_meta_entry *entries, size_t n, cuco_buf *out, cuco_err *e);
/* The user prompt of an LLM meta summary (meta.md) over the same entries. */
int cuco_meta_summary_prompt(const char *workload, const char *previous,
                             const cuco_meta_entry *entries, size_t n, char **user, cuco_err *e);

/* ---- turning answers into children ------------------------------------ */

/* Applies a model's answer to the parent: for diff, the SEARCH/REPLACE
 * blocks; for full and cross, the new block bodies. Fills *child (caller
 * frees) or returns non-zero with *reason (caller frees) saying why the
 * answer is unusable. The mutators pass the patch engine here. */
typedef int (*cuco_llm_apply_fn)(void *ctx, cuco_llm_prompt_kind kind, const char *parent,
                                 const char *answer, char **child, char **reason);

/* The built-in applier of full and cross answers: the answer must hold, in
 * order, one "// EVOLVE-BLOCK-START" ... "// EVOLVE-BLOCK-END" section per
 * block of the parent; their bodies replace the parent's, so the text outside
 * the blocks cannot change. Code fences around them are ignored. */
int cuco_llm_apply_blocks(const char *parent, const char *answer, char **child, char **reason);

/* A strict applier of diff answers, for builds without the patch engine:
 * every "<<<<<<< SEARCH / ======= / >>>>>>> REPLACE" block must match the
 * current text exactly once, and entirely inside one EVOLVE-BLOCK body; the
 * blocks apply in order. The reason names the block number and the first
 * line of its SEARCH text. */
int cuco_llm_apply_diff(const char *parent, const char *answer, char **child, char **reason);

/* The model's explanation: the text before its first edit, block or code
 * fence, trimmed and cut to 500 bytes. Caller frees; "" when none. */
char *cuco_llm_answer_description(const char *answer);

/* One proposed child. */
typedef struct cuco_llm_candidate {
    char *code;        /* the child (owned), or NULL when unusable */
    char *description; /* the model's explanation (owned) */
    char *failure;     /* why there is no child (owned), or NULL */
    size_t arm;        /* the model that answered, for cuco_llm_session_reward() */
    const char *model; /* its spec (owned by the session) */
    double cost_usd;
    cuco_llm_status status;
} cuco_llm_candidate;

void cuco_llm_candidate_free(cuco_llm_candidate *c);

/* Asks for n children of kind from the same context at once and applies
 * each answer with apply (NULL: cuco_llm_apply_diff for diff,
 * cuco_llm_apply_blocks for full and cross). Every candidate is filled: a failed call or an
 * unusable answer leaves code NULL and failure set. Returns what cuco_llm_session_ask() returns
 * (CUCO_EBUDGET: stop the run). */
int cuco_llm_propose(cuco_llm_session *s, cuco_llm_prompt_kind kind, const cuco_llm_prompt_ctx *ctx,
                     size_t n, cuco_llm_apply_fn apply, void *apply_ctx, cuco_llm_candidate *out,
                     cuco_err *e);

/* ---- novelty judge ---------------------------------------------------- */

/* The user prompt (novelty.md) asking whether candidate is meaningfully
 * different from its nearest existing program. Caller frees. */
int cuco_llm_novelty_prompt(const char *candidate, const char *neighbour, char **user, cuco_err *e);
/* Reads the verdict: 1 novel, 0 duplicate; CUCO_EINVAL when the first word
 * is neither NOVEL nor DUPLICATE. */
int cuco_llm_novelty_parse(const char *answer, int *novel, cuco_err *e);

#endif
