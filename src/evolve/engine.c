/* engine.c: the engine, the island-based evolution loop (see evolve.h):
 * generation 0 baseline, proposals, duplicate/novelty/frozen checks,
 * concurrent evaluation with the cache (each result recorded as it
 * finishes), migration, budgets and resume. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuco/buf.h"
#include "cuco/config.h"
#include "cuco/evolve.h"
#include "cuco/grow.h"
#include "cuco/hash.h"
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"
#include "cuco/novelty.h"
#include "cuco/patch.h"
#include "cuco/redact.h"
#include "cuco/run_view.h"
#include "retime.h"

/* Seconds on the monotonic clock: budgets and the ETA measure elapsed time,
 * which a change of the wall clock must not move. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct job {
    int64_t id;
    const char *text; /* borrowed */
    char hash[17];
    cuco_eval_outcome out;
    int cached;
    int rc;
    char *fail; /* evaluator failure message (owned) */
} job;

/* Where finished jobs are booked: the main thread records each one as soon
 * as it finishes, so a kill -9 loses only the evaluations still running. */
typedef struct recorder {
    const cuco_evolve_opts *o;
    int64_t run_id;
    double baseline;
    int ok, failed;
} recorder;

/* The jobs shared with the worker threads. Workers only evaluate; the
 * database is touched by the main thread alone (its connection is not
 * shared across threads). */
typedef struct pool {
    const cuco_evolve_opts *o;
    job *jobs;
    size_t n, next;
    size_t *done; /* indices of finished jobs, in finishing order */
    size_t n_done;
    int running; /* workers that have not exited */
    int stop;    /* recording failed: start no more jobs */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

/* Replaces *text by its copy with secrets redacted (cuco/redact.h). */
static void redact_in_place(char **text)
{
    char *r = *text ? cuco_redact_secrets(*text) : NULL;
    if (r) {
        free(*text);
        *text = r;
    }
}

static void run_job(const cuco_evolve_opts *o, int slot, job *j)
{
    cuco_err e = CUCO_ERR_INIT;
    j->rc = o->evaluate(o->eval_ctx, slot, j->text, &j->out, &e);
    if (j->rc < 0) {
        cuco_eval_outcome_free(&j->out);
        j->out.status = CUCO_EVAL_INFRA_ERROR;
        j->fail = cuco_strdup(cuco_err_msg(&e));
    }
    cuco_err_clear(&e);
    /* whatever an evaluator says is stored and may reach a prompt */
    redact_in_place(&j->out.error);
    redact_in_place(&j->out.metrics_json);
    redact_in_place(&j->fail);
}

/* The evaluation cache's scope (see cuco_evolve_opts). */
static const char *cache_scope(const cuco_evolve_opts *o)
{
    return o->cache_scope ? o->cache_scope : o->workload_name;
}

/* Records one job's result in a transaction of its own (main thread). */
static int record_job(recorder *r, job *j, cuco_err *e)
{
    const cuco_evolve_opts *o = r->o;
    int rc = db_begin(o->db, e);
    if (rc < 0)
        return rc;
    int good = j->out.status == CUCO_EVAL_OK && j->out.time_ms > 0;
    double score = good && r->baseline > 0 ? r->baseline / j->out.time_ms : -1;
    const char *err = j->fail ? j->fail : j->out.error;
    rc = db_program_update(o->db, j->id, cuco_eval_status_name(j->out.status), score,
                           good ? j->out.time_ms : -1, j->out.metrics_json, err, j->cached, e);
    if (rc == 0 && good)
        rc = db_timing_add(o->db, r->run_id, j->hash, j->out.time_ms, j->cached ? "cache" : "eval",
                           0, e);
    if (rc == 0 && !j->cached && j->out.status != CUCO_EVAL_INFRA_ERROR) {
        cuco_db_eval v = {(char *)cuco_eval_status_name(j->out.status), good ? j->out.time_ms : -1,
                          j->out.metrics_json, j->out.error};
        rc = db_eval_store(o->db, cache_scope(o), j->hash, &v, e);
    }
    if (rc < 0) {
        db_rollback(o->db);
        return rc;
    }
    if (good)
        r->ok++;
    else
        r->failed++;
    return db_commit(o->db, e);
}

typedef struct worker_arg {
    pool *p;
    int slot;
} worker_arg;

/* The next job to evaluate, or p->n when none is left (caller holds p->mu). */
static size_t pool_take(pool *p)
{
    size_t i = p->next;
    while (i < p->n && p->jobs[i].cached)
        i++;
    if (p->stop)
        i = p->n;
    p->next = i < p->n ? i + 1 : p->n;
    return i;
}

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    pool *p = wa->p;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = pool_take(p);
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            break;
        run_job(p->o, wa->slot, &p->jobs[i]);
        pthread_mutex_lock(&p->mu);
        p->done[p->n_done++] = i;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&p->mu);
    p->running--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Main thread: records jobs as the workers finish them, until every worker
 * has exited. After a failed record it only waits for the workers (which
 * start no more jobs) and returns the first error. */
static int record_finished(pool *p, recorder *r, cuco_err *e)
{
    size_t recorded = 0;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (recorded == p->n_done && p->running > 0)
            pthread_cond_wait(&p->cv, &p->mu);
        if (recorded == p->n_done)
            break;
        size_t i = p->done[recorded++];
        pthread_mutex_unlock(&p->mu);
        if (rc == 0)
            rc = record_job(r, &p->jobs[i], e);
        pthread_mutex_lock(&p->mu);
        if (rc < 0)
            p->stop = 1;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* Takes the cached results of jobs and records them (main thread). */
static int lookup_cached(recorder *r, job *jobs, size_t n, cuco_err *e)
{
    const cuco_evolve_opts *o = r->o;
    for (size_t i = 0; i < n; i++) {
        int found;
        cuco_db_eval v;
        int rc = db_eval_lookup(o->db, cache_scope(o), jobs[i].hash, &found, &v, e);
        if (rc < 0)
            return rc;
        if (!found)
            continue;
        int st = cuco_eval_status_parse(v.status ? v.status : "");
        jobs[i].cached = 1;
        jobs[i].out.status = st < 0 ? CUCO_EVAL_INFRA_ERROR : (cuco_eval_status)st;
        jobs[i].out.time_ms = v.time_ms;
        jobs[i].out.metrics_json = v.metrics_json;
        jobs[i].out.error = v.error;
        v.metrics_json = v.error = NULL;
        db_eval_free(&v);
        if ((rc = record_job(r, &jobs[i], e)) < 0)
            return rc;
    }
    return 0;
}

/* Evaluates jobs on the main thread, recording each as it finishes. */
static int eval_serial(recorder *r, job *jobs, size_t n, cuco_err *e)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (jobs[i].cached)
            continue;
        run_job(r->o, 0, &jobs[i]);
        rc = record_job(r, &jobs[i], e);
    }
    return rc;
}

/* Evaluates and records jobs: cache first (main thread), then up to slots
 * worker threads whose results the main thread records one by one. */
static int eval_jobs(recorder *r, job *jobs, size_t n, cuco_err *e)
{
    const cuco_evolve_opts *o = r->o;
    int rc = lookup_cached(r, jobs, n, e);
    if (rc < 0)
        return rc;
    int slots = o->cfg->slots < 1 ? 1 : o->cfg->slots;
    if (slots == 1 || n <= 1)
        return eval_serial(r, jobs, n, e);
    pool p = {o, jobs, n, 0, NULL, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    if (!(p.done = calloc(n, sizeof *p.done)))
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    pthread_t th[slots];
    worker_arg wa[slots];
    int started = 0;
    for (int s = 0; s < slots && (size_t)s < n; s++) {
        wa[s].p = &p;
        wa[s].slot = s;
        pthread_mutex_lock(&p.mu);
        p.running++;
        pthread_mutex_unlock(&p.mu);
        if (pthread_create(&th[s], NULL, worker, &wa[s]) != 0) {
            pthread_mutex_lock(&p.mu);
            p.running--;
            pthread_mutex_unlock(&p.mu);
            break;
        }
        started++;
    }
    rc = record_finished(&p, r, e);
    for (int s = 0; s < started; s++)
        pthread_join(th[s], NULL);
    /* no thread could start: the main thread evaluates what is left */
    if (rc == 0 && started == 0)
        rc = eval_serial(r, jobs, n, e);
    free(p.done);
    return rc;
}

static void jobs_free(job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cuco_eval_outcome_free(&jobs[i].out);
        free(jobs[i].fail);
    }
    free(jobs);
}

/* Evaluates and records the given pending programs. */
static int eval_programs(const cuco_evolve_opts *o, cuco_db_program *ps, size_t n, double baseline,
                         int *ok, int *failed, cuco_err *e)
{
    if (n == 0)
        return 0;
    job *jobs = calloc(n, sizeof *jobs);
    if (!jobs)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        jobs[i].id = ps[i].id;
        jobs[i].text = ps[i].code ? ps[i].code : "";
        snprintf(jobs[i].hash, sizeof jobs[i].hash, "%s", ps[i].code_hash ? ps[i].code_hash : "");
    }
    recorder r = {o, ps[0].run_id, baseline, 0, 0};
    int rc = eval_jobs(&r, jobs, n, e);
    *ok += r.ok;
    *failed += r.failed;
    jobs_free(jobs, n);
    return rc;
}

static int insert_program(const cuco_evolve_opts *o, cuco_db_program *p, int64_t *id, cuco_err *e)
{
    char *kj = NULL;
    cuco_err ke = CUCO_ERR_INIT;
    if (p->code && !p->knobs_json && cuco_knobs_json(p->code, &kj, &ke) == 0)
        p->knobs_json = kj;
    cuco_err_clear(&ke);
    char hash[17];
    if (p->code && !p->code_hash) {
        cuco_hash_hex(p->code, strlen(p->code), hash);
        p->code_hash = hash;
    }
    /* a mutator's failure can quote a service's answer: no secret is stored */
    char *error = p->error, *redacted = error ? cuco_redact_secrets(error) : NULL;
    if (redacted)
        p->error = redacted;
    int rc = db_program_insert(o->db, p, id, e);
    p->error = error;
    free(redacted);
    if (p->code_hash == hash)
        p->code_hash = NULL;
    if (kj) {
        free(kj);
        p->knobs_json = NULL;
    }
    return rc;
}

/* Budget fraction used so far (max over the set budgets). */
static double budget_fraction(const cuco_evolve_config *c, long evals, int gen, double wall,
                              double usd)
{
    double f = 0;
    if (c->budget_evaluations > 0 && (double)evals / c->budget_evaluations > f)
        f = (double)evals / c->budget_evaluations;
    if (c->budget_generations > 0 && (double)gen / c->budget_generations > f)
        f = (double)gen / c->budget_generations;
    if (c->budget_wall_s > 0 && wall / c->budget_wall_s > f)
        f = wall / c->budget_wall_s;
    if (c->budget_usd > 0 && usd / c->budget_usd > f)
        f = usd / c->budget_usd;
    return f;
}

static int max_generation(cuco_db_program *ps, size_t n)
{
    int g = -1;
    for (size_t i = 0; i < n; i++)
        if (ps[i].generation > g)
            g = ps[i].generation;
    return g;
}

/* Generation 0: the initial program on island 0, copies on the others. */
static int generation_zero(const cuco_evolve_opts *o, int64_t run_id, cuco_err *e)
{
    const char *init = o->init_text ? o->init_text : o->seed_text;
    int rc = cuco_patch_guard(o->seed_text, init, e);
    if (rc < 0)
        return cuco_err_prefix(e, "the initial program");
    cuco_db_program p;
    memset(&p, 0, sizeof p);
    p.run_id = run_id;
    p.code = (char *)init;
    p.mutator = o->init_text ? "init" : "seed";
    p.status = "pending";
    p.score = p.time_ms = -1;
    int64_t id;
    if ((rc = insert_program(o, &p, &id, e)) < 0)
        return rc;
    cuco_db_program got;
    if ((rc = db_program_get(o->db, id, &got, e)) < 0)
        return rc;
    int ok = 0, failed = 0;
    rc = eval_programs(o, &got, 1, 1.0, &ok, &failed, e);
    db_program_free(&got);
    return rc;
}

/* After generation 0 was evaluated: checks it, sets the baseline, makes the
 * island copies. */
static int finish_generation_zero(const cuco_evolve_opts *o, int64_t run_id, double *baseline,
                                  cuco_err *e)
{
    cuco_db_program *ps;
    size_t n;
    int rc = db_programs_list(o->db, run_id, NULL, &ps, &n, e);
    if (rc < 0)
        return rc;
    if (n == 0 || ps[0].generation != 0) {
        db_programs_free(ps, n);
        return cuco_err_set(e, CUCO_EINVAL, "run has no generation-0 program");
    }
    cuco_db_program *g0 = &ps[0];
    if (strcmp(g0->status, "ok") != 0 || g0->time_ms <= 0) {
        rc = cuco_err_set(e, CUCO_EINVAL, "the initial program failed its evaluation (%s)%s%s",
                          g0->status, g0->error ? ": " : "", g0->error ? g0->error : "");
        db_programs_free(ps, n);
        return rc;
    }
    *baseline = g0->time_ms;
    int islands_have = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].generation == 0)
            islands_have++;
    if ((rc = db_begin(o->db, e)) < 0)
        goto out;
    rc = db_run_set_baseline(o->db, run_id, *baseline, e);
    if (rc == 0)
        rc = db_program_update(o->db, g0->id, "ok", 1.0, g0->time_ms, g0->metrics_json, g0->error,
                               g0->cached, e);
    for (int isl = islands_have; isl < o->cfg->islands && rc == 0; isl++) {
        cuco_db_program c = *g0;
        c.id = 0;
        c.parent_id = g0->id;
        c.island = isl;
        c.mutator = "copy";
        c.patch_type = NULL;
        c.description = "generation-0 copy";
        c.score = 1.0;
        rc = db_program_insert(o->db, &c, NULL, e);
    }
    if (rc == 0)
        rc = db_commit(o->db, e);
    else
        db_rollback(o->db);
out:
    db_programs_free(ps, n);
    return rc;
}

/* The best program of island i that counts (not held back: cuco/run_view.h),
 * among its top `MIGRATION_LOOK` by score; *found 0 when none. */
#define MIGRATION_LOOK 8
static int island_best(const cuco_evolve_opts *o, int64_t run_id, int island, cuco_db_program **top,
                       size_t *ntop, size_t *best, int *found, cuco_err *e)
{
    *found = 0;
    int rc = db_programs_top(o->db, run_id, island, MIGRATION_LOOK, top, ntop, e);
    for (size_t j = 0; rc == 0 && j < *ntop && !*found; j++) {
        int held = 0;
        rc = db_program_held_back(o->db, (*top)[j].id, &held, e);
        if (rc == 0 && !held) {
            *best = j;
            *found = 1;
        }
    }
    return rc;
}

/* 1 when island dest has a correct program with the code of hash. */
static int island_has(const cuco_evolve_opts *o, int64_t run_id, int dest, const char *hash,
                      int *there, cuco_err *e)
{
    cuco_db_program *dt;
    size_t nd;
    *there = 0;
    int rc = db_programs_list(o->db, run_id, "ok", &dt, &nd, e);
    if (rc < 0)
        return rc;
    for (size_t j = 0; j < nd; j++)
        if (dt[j].island == dest && dt[j].code_hash && hash && !strcmp(dt[j].code_hash, hash))
            *there = 1;
    db_programs_free(dt, nd);
    return 0;
}

/* Copies the best of island i that counts to island i+1 (ring) unless
 * already there. A program held back by its re-timing does not migrate: its
 * score did not hold. */
static int migrate(const cuco_evolve_opts *o, int64_t run_id, int gen, cuco_err *e)
{
    int k = o->cfg->islands, rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        cuco_db_program *top = NULL;
        size_t ntop = 0, b = 0;
        int found = 0, there = 0, dest = (i + 1) % k;
        rc = island_best(o, run_id, i, &top, &ntop, &b, &found, e);
        if (rc == 0 && found)
            rc = island_has(o, run_id, dest, top[b].code_hash, &there, e);
        if (rc == 0 && found && !there) {
            cuco_db_program c = top[b];
            c.id = 0;
            c.parent_id = top[b].id;
            c.second_parent_id = 0;
            c.island = dest;
            c.generation = gen;
            c.mutator = "migration";
            c.patch_type = NULL;
            c.description = "best of the previous island";
            c.cached = 0;
            rc = db_program_insert(o->db, &c, NULL, e);
        }
        db_programs_free(top, ntop);
    }
    return rc;
}

static size_t pick_mutator(const cuco_evolve_config *c, cuco_rng *rng)
{
    double total = 0;
    for (size_t i = 0; i < c->n_mutators; i++)
        total += c->weights[i];
    double u = cuco_rng_uniform(rng) * total;
    for (size_t i = 0; i < c->n_mutators; i++) {
        if (u < c->weights[i])
            return i;
        u -= c->weights[i];
    }
    return c->n_mutators - 1;
}

/* Highest MinHash similarity of text to the run's programs; *nearest
 * (caller frees, NULL when the run has no code yet) is that program's code. */
static int max_similarity(const cuco_evolve_opts *o, int64_t run_id, const char *text, double *sim,
                          char **nearest, cuco_err *e)
{
    cuco_db_program *ps;
    size_t n, best = 0;
    int found = 0;
    *sim = 0;
    *nearest = NULL;
    int rc = db_programs_list(o->db, run_id, NULL, &ps, &n, e);
    if (rc < 0)
        return rc;
    cuco_minhash a, b;
    cuco_minhash_of(text, &a);
    for (size_t i = 0; i < n; i++) {
        if (!ps[i].code)
            continue;
        cuco_minhash_of(ps[i].code, &b);
        double s = cuco_minhash_similarity(&a, &b);
        if (!found || s > *sim) {
            *sim = s;
            best = i;
            found = 1;
        }
    }
    if (found) {
        *nearest = ps[best].code;
        ps[best].code = NULL;
    }
    db_programs_free(ps, n);
    return 0;
}

/* Asks the novelty judge about a child whose similarity sim to its nearest
 * program lies in the judge's band. Sets c's status (and error, kept in
 * *why) and *budget_stop when the judge's call was refused by the budget. */
static int judge_child(const cuco_evolve_opts *o, int64_t run_id, const char *text,
                       const char *nearest, double sim, cuco_db_program *c, cuco_buf *why,
                       int *budget_stop, cuco_err *e)
{
    int novel = 1;
    cuco_buf reason = CUCO_BUF_INIT;
    int rc = o->judge_fn(o->judge_ctx, run_id, text, nearest, sim, &novel, &reason, e);
    if (rc == CUCO_EBUDGET) {
        /* the child was paid for: evaluate it, then stop like a refused mutator */
        cuco_err_clear(e);
        *budget_stop = 1;
        novel = 1;
        rc = 0;
    }
    if (rc == 0 && !novel) {
        c->status = "rejected_novelty";
        cuco_buf_printf(why, "judge: %s", reason.len ? cuco_buf_str(&reason) : "duplicate");
        c->error = (char *)cuco_buf_str(why);
    } else if (rc == 0) {
        c->status = "pending";
    }
    cuco_buf_free(&reason);
    return rc;
}

/* How many of the run's recent failed children a mutator is shown. */
#define RECENT_FAILURES 4

static int is_failed_child(const cuco_db_program *p)
{
    return p->generation > 0 && p->status && strcmp(p->status, "ok") &&
           strcmp(p->status, "pending") && strcmp(p->status, "rejected_duplicate") &&
           strcmp(p->status, "rejected_novelty");
}

/* The run's most recent failed children, newest first: *all holds the run's
 * programs (db_programs_free) and *fails shallow copies of the failures
 * pointing into it (free() only). */
static int recent_failures(const cuco_evolve_opts *o, int64_t run_id, cuco_db_program **all,
                           size_t *n_all, cuco_db_program **fails, size_t *n_fails, cuco_err *e)
{
    *fails = NULL;
    *n_fails = 0;
    int rc = db_programs_list(o->db, run_id, NULL, all, n_all, e);
    if (rc < 0)
        return rc;
    *fails = calloc(RECENT_FAILURES, sizeof **fails);
    if (!*fails) {
        db_programs_free(*all, *n_all);
        *all = NULL;
        *n_all = 0;
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    for (size_t i = *n_all; i > 0 && *n_fails < RECENT_FAILURES; i--)
        if (is_failed_child(&(*all)[i - 1]))
            (*fails)[(*n_fails)++] = (*all)[i - 1];
    return 0;
}

/* Stores a proposed child and links the LLM calls made for it, in one short
 * transaction of its own: the mutator (an LLM call included) ran outside
 * any transaction, so the live view sees each child once it is proposed. */
static int store_child(const cuco_evolve_opts *o, cuco_db_program *c, int64_t calls_before,
                       int64_t *id, cuco_err *e)
{
    int rc = db_begin(o->db, e);
    if (rc == 0)
        rc = insert_program(o, c, id, e);
    if (rc == 0)
        rc = db_llm_calls_link(o->db, c->run_id, calls_before, *id, e);
    if (rc == 0)
        return db_commit(o->db, e);
    db_rollback(o->db);
    return rc;
}

/* Proposes one child; inserts it (pending or a rejection). *pending_id > 0
 * when it must be evaluated; *exhausted set when the mutator has nothing new;
 * *budget_stop set (nothing inserted) when the mutator's money budget
 * refused the call. */
static int propose_child(const cuco_evolve_opts *o, cuco_mutator **muts, int64_t run_id, int gen,
                         int island, int exploit, cuco_rng *rng, cuco_db_program *top, size_t ntop,
                         int64_t *pending_id, int *exhausted, int *budget_stop, cuco_err *e)
{
    *pending_id = 0;
    double *scores = malloc(ntop * sizeof *scores);
    if (!scores)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    for (size_t i = 0; i < ntop; i++)
        scores[i] = top[i].score;
    size_t pi = cuco_select_parent(o->cfg->selection, scores, ntop, exploit, rng);
    free(scores);
    cuco_db_program *parent = &top[pi], *second = NULL;
    if (ntop > 1) {
        size_t si = cuco_rng_below(rng, ntop - 1);
        second = &top[si >= pi ? si + 1 : si];
    }
    size_t mi = pick_mutator(o->cfg, rng);
    cuco_mutator *m = muts[mi];
    cuco_db_program *all = NULL, *fails = NULL;
    size_t n_all = 0, n_fails = 0;
    /* the LLM calls made from here on are this child's (linked after insertion) */
    int64_t calls_before = 0;
    int rc = db_llm_call_last_id(o->db, run_id, &calls_before, e);
    if (rc < 0)
        return rc;
    rc = recent_failures(o, run_id, &all, &n_all, &fails, &n_fails, e);
    if (rc < 0)
        return rc;
    cuco_mutate_ctx ctx = {o->seed_text, o->workload, parent, second, top, ntop,
                           fails,        n_fails,     o->db,  run_id, rng, exploit};
    cuco_mutation mu;
    cuco_err me = CUCO_ERR_INIT;
    rc = m->propose(m, &ctx, &mu, &me);
    free(fails);
    db_programs_free(all, n_all);
    if (rc == CUCO_EBUDGET) {
        *budget_stop = 1;
        cuco_err_clear(&me);
        cuco_mutation_free(&mu);
        return 0;
    }
    cuco_db_program c;
    memset(&c, 0, sizeof c);
    c.run_id = run_id;
    c.parent_id = parent->id;
    c.second_parent_id =
        second && mu.patch_type && !strcmp(mu.patch_type, "knob:crossover") ? second->id : 0;
    c.island = island;
    c.generation = gen;
    c.mutator = (char *)m->name;
    c.score = c.time_ms = -1;
    if (rc < 0) {
        if (mu.exhausted) {
            *exhausted = 1;
            cuco_err_clear(&me);
            return 0;
        }
        /* a mutator whose own service failed (an LLM call) produced no
         * program to blame: infra_error, not patch_failed */
        c.status = rc == CUCO_ENET ? "infra_error" : "patch_failed";
        c.error = (char *)cuco_err_msg(&me);
        int64_t fid;
        rc = store_child(o, &c, calls_before, &fid, e);
        cuco_err_clear(&me);
        return rc;
    }
    c.code = mu.text;
    c.patch_type = mu.patch_type;
    c.description = mu.description;
    char hash[17];
    cuco_hash_hex(mu.text, strlen(mu.text), hash);
    c.code_hash = hash;
    int seen = 0;
    char *nearest = NULL;
    cuco_buf why = CUCO_BUF_INIT;
    if (cuco_patch_guard(o->seed_text, mu.text, &me) < 0) {
        c.status = "patch_failed";
        c.error = (char *)cuco_err_msg(&me);
    } else if ((rc = db_program_hash_seen(o->db, run_id, hash, &seen, e)) < 0) {
        goto out;
    } else if (seen) {
        c.status = "rejected_duplicate";
        c.error = "identical to a program already in this run";
    } else {
        double sim = 0;
        int is_knob = mu.patch_type && !strncmp(mu.patch_type, "knob:", 5);
        if (!is_knob) {
            if ((rc = max_similarity(o, run_id, mu.text, &sim, &nearest, e)) < 0)
                goto out;
            c.novelty = sim;
        }
        double judge_from = o->cfg->novelty_threshold - o->cfg->novelty_judge_band;
        if (!is_knob && sim >= o->cfg->novelty_threshold) {
            c.status = "rejected_novelty";
            c.error = "near-duplicate of a program already in this run";
        } else if (!is_knob && o->cfg->novelty_judge && o->judge_fn && nearest &&
                   sim >= judge_from) {
            if ((rc = judge_child(o, run_id, mu.text, nearest, sim, &c, &why, budget_stop, e)) < 0)
                goto out;
        } else {
            c.status = "pending";
        }
    }
    int64_t id;
    rc = store_child(o, &c, calls_before, &id, e);
    if (rc == 0 && !strcmp(c.status, "pending"))
        *pending_id = id;
out:
    free(nearest);
    cuco_buf_free(&why);
    cuco_err_clear(&me);
    cuco_mutation_free(&mu);
    return rc;
}

/* Writes the run's meta summary of generation gen (see meta_fn in
 * evolve.h) and keeps it in *o->meta_summary. */
static int write_meta_summary(const cuco_evolve_opts *o, int64_t run_id, int gen, cuco_err *e)
{
    cuco_buf text = CUCO_BUF_INIT;
    const char *previous = o->meta_summary ? *o->meta_summary : NULL;
    int rc = o->meta_fn ? o->meta_fn(o->meta_ctx, run_id, gen, previous, &text, e)
                        : cuco_llm_db_meta_rules(o->db, run_id, &text, e);
    if (rc == 0 && text.len)
        rc = db_meta_insert(o->db, run_id, gen, cuco_buf_str(&text), e);
    if (rc == 0 && text.len && o->meta_summary) {
        char *keep = cuco_strdup(cuco_buf_str(&text));
        if (!keep) {
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        } else {
            free(*o->meta_summary);
            *o->meta_summary = keep;
        }
    }
    cuco_buf_free(&text);
    return rc;
}

/* The run's best as every view names it (cuco/run_view.h). */
static int best_of_run(const cuco_evolve_opts *o, int64_t run_id, cuco_evolve_result *r,
                       cuco_err *e)
{
    run_view_best best;
    int rc = db_run_best(o->db, run_id, &best, e);
    if (rc < 0 || best.id <= 0)
        return rc;
    r->best_id = best.id;
    r->best_score = best.score;
    r->best_time_ms = best.time_ms;
    return 0;
}

/* One search: what the steps of cuco_evolve_run share. */
typedef struct search {
    const cuco_evolve_opts *o;
    const cuco_evolve_config *cfg;
    cuco_mutator **muts; /* the mutators in use (borrowed) */
    cuco_evolve_result *r;
    int64_t run_id;
    double t0;       /* monotonic start (now_s) */
    double baseline; /* the initial program's time */
    int gen;         /* the last generation proposed */
    long pending_made;
} search;

/* Finds the run to resume (the workload's latest, still 'running', unless
 * o->fresh) or creates one. */
static int open_run(search *sr, int *resumed, cuco_err *e)
{
    const cuco_evolve_opts *o = sr->o;
    cuco_db_run run;
    *resumed = 0;
    if (!o->fresh && db_run_find(o->db, o->workload_name, &run, e) == 0) {
        if (!strcmp(run.status, "running")) {
            sr->run_id = run.id;
            *resumed = 1;
        }
        db_run_free(&run);
    }
    cuco_err_clear(e);
    if (!sr->run_id) {
        char *cj = cuco_config_json(sr->cfg);
        int rc = db_run_create(o->db, o->workload_name, cj, sr->cfg->seed, &sr->run_id, e);
        free(cj);
        if (rc < 0)
            return rc;
    }
    sr->r->run_id = sr->run_id;
    if (o->run_id_out)
        *o->run_id_out = sr->run_id;
    return 0;
}

/* Evaluates the run's pending programs (left by a crash); only the first
 * when first_only (generation 0's, which needs no baseline). */
/* The re-timings that follow a generation's evaluations (at most
 * retime_per_generation), timed into the result's retime_s. */
static int retime_generation(search *sr, cuco_err *e)
{
    double t0 = now_s();
    int rc = cuco_evolve_retime(sr->o, sr->run_id, sr->gen, sr->cfg->retime_per_generation,
                                &sr->baseline, e);
    sr->r->retime_s += now_s() - t0;
    return rc;
}

static int eval_pending(search *sr, int first_only, cuco_err *e)
{
    cuco_db_program *ps;
    size_t n;
    int rc = db_programs_pending(sr->o->db, sr->run_id, &ps, &n, e);
    if (rc < 0)
        return rc;
    int ok = 0, failed = 0;
    if (!first_only)
        rc = eval_programs(sr->o, ps, n, sr->baseline, &ok, &failed, e);
    else if (n && ps[0].generation == 0)
        rc = eval_programs(sr->o, ps, 1, 1.0, &ok, &failed, e);
    db_programs_free(ps, n);
    return rc;
}

/* Generation 0 (or, on resume, its pending program), the baseline, then the
 * pending programs a crash left. */
static int start_run(search *sr, int resumed, cuco_err *e)
{
    const cuco_evolve_opts *o = sr->o;
    cuco_db_program *ps = NULL;
    size_t n = 0;
    int rc = db_programs_list(o->db, sr->run_id, NULL, &ps, &n, e);
    if (rc < 0)
        return rc;
    sr->gen = max_generation(ps, n);
    db_programs_free(ps, n);
    if (sr->gen < 0) {
        if ((rc = generation_zero(o, sr->run_id, e)) < 0)
            return rc;
        sr->gen = 0;
    } else if (resumed && (rc = eval_pending(sr, 1, e)) < 0) {
        return rc;
    }
    if ((rc = finish_generation_zero(o, sr->run_id, &sr->baseline, e)) < 0) {
        if (rc == CUCO_EINVAL) {
            cuco_err se = CUCO_ERR_INIT;
            db_run_set_status(o->db, sr->run_id, "failed", &se);
            cuco_err_clear(&se);
        }
        return rc;
    }
    sr->r->baseline_ms = sr->baseline;
    if (!resumed || (rc = eval_pending(sr, 0, e)) < 0)
        return rc < 0 ? rc : 0;
    /* the re-timings the interrupted generation would have made next: the
     * budget counts them, so a resumed run spends it as a whole one does */
    return sr->gen > 0 ? retime_generation(sr, e) : 0;
}

/* What budget.evaluations counts: every program timed (a new evaluation)
 * and every program taken from the cache, so that the budget ends a run
 * even when every child is a cache hit. Re-timing runs are counted and
 * shown (retiming_runs), not budgeted: each re-timing races a program that
 * the budget already let in, so they are bounded by it. */
static int budget_spent(search *sr, long *spent, cuco_err *e)
{
    long evals, cached, retimings, held, runs;
    int rc = db_run_evaluations(sr->o->db, sr->run_id, &evals, &cached, e);
    if (rc == 0)
        rc = db_run_retimings(sr->o->db, sr->run_id, &retimings, &held, &runs, e);
    if (rc < 0)
        return rc;
    sr->r->evaluations = evals;
    sr->r->cached = cached;
    sr->r->retiming_runs = runs;
    *spent = evals + cached;
    return 0;
}

/* Counts what the run spent and sets *stop when a budget is reached;
 * *fraction is the share of the budget spent (budget_fraction). */
static int check_budgets(search *sr, const char **stop, double *fraction, cuco_err *e)
{
    const cuco_evolve_config *cfg = sr->cfg;
    long evals;
    double usd;
    int rc;
    if ((rc = budget_spent(sr, &evals, e)) < 0 ||
        (rc = db_run_cost(sr->o->db, sr->run_id, &usd, e)) < 0)
        return rc;
    double wall = now_s() - sr->t0;
    if (cfg->budget_evaluations > 0 && evals >= cfg->budget_evaluations)
        *stop = "evaluation budget reached";
    else if (cfg->budget_generations > 0 && sr->gen >= cfg->budget_generations)
        *stop = "generation budget reached";
    else if (cfg->budget_wall_s > 0 && wall >= cfg->budget_wall_s)
        *stop = "time budget reached";
    else if (cfg->budget_usd > 0 && usd >= cfg->budget_usd)
        *stop = "money budget reached";
    *fraction = budget_fraction(cfg, evals, sr->gen, wall, usd);
    return 0;
}

/* Migration in a transaction of its own. */
static int migrate_now(search *sr, cuco_err *e)
{
    const cuco_evolve_config *cfg = sr->cfg;
    if (!(cfg->migration_interval > 0 && cfg->islands > 1 &&
          sr->gen % cfg->migration_interval == 0))
        return 0;
    int rc = db_begin(sr->o->db, e);
    if (rc == 0)
        rc = migrate(sr->o, sr->run_id, sr->gen, e);
    if (rc == 0)
        return db_commit(sr->o->db, e);
    db_rollback(sr->o->db);
    return rc;
}

/* The children of one island, appended to *ids (pending ones only). */
static int propose_island(search *sr, int island, int exploit, cuco_rng *rng, long room,
                          int64_t **ids, size_t *nids, size_t *cap, int *exhausted,
                          int *budget_stop, cuco_err *e)
{
    const cuco_evolve_config *cfg = sr->cfg;
    cuco_db_program *top;
    size_t ntop;
    int rc =
        db_programs_top(sr->o->db, sr->run_id, island, (size_t)cfg->archive_size, &top, &ntop, e);
    if (rc < 0)
        return rc;
    for (int c = 0; c < cfg->children_per_island && ntop && rc == 0 && !*budget_stop; c++) {
        if (room >= 0 && (long)*nids >= room)
            break;
        int64_t id = 0;
        rc = propose_child(sr->o, sr->muts, sr->run_id, sr->gen, island, exploit, rng, top, ntop,
                           &id, exhausted, budget_stop, e);
        if (rc == 0 && id > 0) {
            if (CUCO_GROW(*ids, *cap, *nids + 1, 8) < 0)
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            else
                (*ids)[(*nids)++] = id;
        }
    }
    db_programs_free(top, ntop);
    return rc;
}

/* Migration, then every island's children: *ids (malloc'd) the pending
 * ones to evaluate. */
static int propose_generation(search *sr, int exploit, cuco_rng *rng, int64_t **ids, size_t *nids,
                              int *exhausted, int *budget_stop, cuco_err *e)
{
    const cuco_evolve_config *cfg = sr->cfg;
    size_t cap = 0;
    *ids = NULL;
    *nids = 0;
    long spent = 0;
    int brc = cfg->budget_evaluations > 0 ? budget_spent(sr, &spent, e) : 0;
    if (brc < 0)
        return brc;
    long room = cfg->budget_evaluations > 0 ? cfg->budget_evaluations - spent : -1;
    int rc = migrate_now(sr, e);
    for (int isl = 0; isl < cfg->islands && rc == 0 && !*budget_stop; isl++)
        rc =
            propose_island(sr, isl, exploit, rng, room, ids, nids, &cap, exhausted, budget_stop, e);
    if (rc < 0) {
        free(*ids);
        *ids = NULL;
        *nids = 0;
    }
    return rc;
}

/* Evaluates the generation's pending programs, then re-times the apparent
 * improvements. */
static int evaluate_generation(search *sr, const int64_t *ids, size_t nids, int *ok, int *failed,
                               cuco_err *e)
{
    cuco_db_program *gp = calloc(nids ? nids : 1, sizeof *gp);
    if (!gp)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = 0;
    size_t got = 0;
    for (size_t i = 0; i < nids && rc == 0; i++, got++)
        rc = db_program_get(sr->o->db, ids[i], &gp[i], e);
    if (rc == 0)
        rc = eval_programs(sr->o, gp, nids, sr->baseline, ok, failed, e);
    db_programs_free(gp, got);
    return rc == 0 ? retime_generation(sr, e) : rc;
}

/* Tells o->progress where the search stands after a generation. */
static void report_progress(search *sr, int exploit, int ok, int failed, cuco_err *e)
{
    const cuco_evolve_opts *o = sr->o;
    if (!o->progress)
        return;
    cuco_evolve_progress pr;
    memset(&pr, 0, sizeof pr);
    best_of_run(o, sr->run_id, sr->r, e);
    db_run_evaluations(o->db, sr->run_id, &pr.evaluations, &pr.cached, e);
    db_run_cost(o->db, sr->run_id, &pr.usd, e);
    pr.generation = sr->gen;
    pr.best_speedup = sr->r->best_score;
    pr.ok = ok;
    pr.failed = failed;
    pr.elapsed_s = now_s() - sr->t0;
    double f = budget_fraction(sr->cfg, pr.evaluations, sr->gen, pr.elapsed_s, pr.usd);
    pr.eta_s = f > 0 ? pr.elapsed_s * (1 - f) / f : -1;
    pr.exploit = exploit;
    long held = 0;
    db_run_retimings(o->db, sr->run_id, &pr.retimings, &held, &pr.retiming_runs, e);
    o->progress(o->progress_ctx, &pr);
}

/* The meta summary every meta_interval generations; *budget_stop set when
 * the money budget refused it. */
static int meta_step(search *sr, int *budget_stop, cuco_err *e)
{
    if (*budget_stop || sr->cfg->meta_interval <= 0 || sr->gen % sr->cfg->meta_interval != 0)
        return 0;
    int rc = write_meta_summary(sr->o, sr->run_id, sr->gen, e);
    if (rc == CUCO_EBUDGET) {
        cuco_err_clear(e);
        *budget_stop = 1;
        return 0;
    }
    return rc;
}

/* One generation: propose, evaluate, re-time, report, summarize. *stop set
 * (into stop_text when it needs words of its own) when the search ends. */
static int run_generation(search *sr, double fraction, const char **stop, char *stop_text,
                          size_t stop_size, cuco_err *e)
{
    const cuco_evolve_config *cfg = sr->cfg;
    sr->gen++;
    int exploit = fraction >= cfg->explore_fraction;
    cuco_rng rng;
    cuco_rng_seed(&rng, cfg->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)sr->gen);
    int64_t *ids;
    size_t nids;
    int exhausted = 0, budget_stop = 0, ok = 0, failed = 0;
    int rc = propose_generation(sr, exploit, &rng, &ids, &nids, &exhausted, &budget_stop, e);
    if (rc < 0)
        return rc;
    sr->pending_made += (long)nids;
    if (sr->o->crash_after_pending > 0 && sr->pending_made >= sr->o->crash_after_pending) {
        free(ids);
        sr->r->crashed = 1;
        snprintf(sr->r->stop_reason, sizeof sr->r->stop_reason, "simulated crash");
        return 0;
    }
    rc = evaluate_generation(sr, ids, nids, &ok, &failed, e);
    free(ids);
    if (rc < 0)
        return rc;
    sr->r->generations = sr->gen;
    report_progress(sr, exploit, ok, failed, e);
    if ((rc = meta_step(sr, &budget_stop, e)) < 0)
        return rc;
    if (budget_stop) {
        double spent = 0;
        db_run_cost(sr->o->db, sr->run_id, &spent, e);
        snprintf(stop_text, stop_size, "budget reached: $%.4f of $%.4f spent", spent,
                 cfg->budget_usd);
        *stop = stop_text;
    } else if (nids == 0 && exhausted) {
        *stop = "space exhausted";
    }
    return 0;
}

/* The last re-timing (no apparent improvement is left unconfirmed), the
 * run marked done, and the result filled. */
static int finish_run(search *sr, const char *stop, cuco_err *e)
{
    const cuco_evolve_opts *o = sr->o;
    cuco_evolve_result *r = sr->r;
    double t0 = now_s();
    int rc = cuco_evolve_retime(o, sr->run_id, sr->gen, LONG_MAX, &sr->baseline, e);
    r->retime_s += now_s() - t0;
    if (rc < 0)
        return rc;
    r->baseline_ms = sr->baseline;
    if ((rc = db_run_set_status(o->db, sr->run_id, "done", e)) < 0)
        return rc;
    snprintf(r->stop_reason, sizeof r->stop_reason, "%s", stop ? stop : "done");
    r->generations = sr->gen;
    rc = best_of_run(o, sr->run_id, r, e);
    db_run_evaluations(o->db, sr->run_id, &r->evaluations, &r->cached, e);
    db_run_retimings(o->db, sr->run_id, &r->retimings, &r->retimings_held, &r->retiming_runs, e);
    return rc;
}

int cuco_evolve_run(const cuco_evolve_opts *o, cuco_evolve_result *r, cuco_err *e)
{
    const cuco_evolve_config *cfg = o->cfg;
    memset(r, 0, sizeof *r);
    int rc = cuco_config_validate(cfg, e);
    if (rc < 0)
        return rc;
    cuco_mutator **muts = calloc(cfg->n_mutators, sizeof *muts);
    if (!muts)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    for (size_t i = 0; i < cfg->n_mutators && !o->mutators; i++)
        if ((rc = cuco_mutator_create(cfg->mutators[i], &muts[i], e)) < 0)
            goto done;
    search sr = {o, cfg, o->mutators ? (cuco_mutator **)o->mutators : muts, r, 0, now_s(), -1,
                 0, 0};
    int resumed = 0;
    if ((rc = open_run(&sr, &resumed, e)) < 0 || (rc = start_run(&sr, resumed, e)) < 0)
        goto done;
    const char *stop = NULL;
    char stop_text[sizeof r->stop_reason];
    for (;;) {
        double fraction = 0;
        if ((rc = check_budgets(&sr, &stop, &fraction, e)) < 0)
            goto done;
        if (stop)
            break;
        if ((rc = run_generation(&sr, fraction, &stop, stop_text, sizeof stop_text, e)) < 0 ||
            r->crashed)
            goto done;
        if (stop)
            break;
    }
    rc = finish_run(&sr, stop, e);
done:
    for (size_t i = 0; i < cfg->n_mutators; i++)
        cuco_mutator_free(muts[i]);
    free(muts);
    if (r->crashed)
        best_of_run(o, r->run_id, r, e);
    return rc;
}
