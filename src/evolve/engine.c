/* engine.c: the island-based evolution loop (see evolve.h): generation 0
 * baseline, proposals, duplicate/novelty/frozen checks, concurrent
 * evaluation with the cache (each result recorded as it finishes),
 * migration, budgets and resume. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cuco/buf.h"
#include "cuco/evolve.h"
#include "cuco/grow.h"
#include "cuco/hash.h"
#include "cuco/llm_mutate.h"
#include "cuco/mutate.h"
#include "cuco/patch.h"
#include "cuco/redact.h"
#include "retime.h"

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
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
    if (rc < 0)
        return rc;
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
out:
    db_programs_free(ps, n);
    return rc;
}

/* Copies the best of island i to island i+1 (ring) unless already there. */
static int migrate(const cuco_evolve_opts *o, int64_t run_id, int gen, cuco_err *e)
{
    int k = o->cfg->islands, rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        cuco_db_program *best;
        size_t nb;
        if ((rc = db_programs_top(o->db, run_id, i, 1, &best, &nb, e)) < 0)
            return rc;
        if (nb == 1) {
            int dest = (i + 1) % k;
            cuco_db_program *dt;
            size_t nd;
            int there = 0;
            rc = db_programs_list(o->db, run_id, "ok", &dt, &nd, e);
            for (size_t j = 0; rc == 0 && j < nd; j++)
                if (dt[j].island == dest && dt[j].code_hash && best[0].code_hash &&
                    !strcmp(dt[j].code_hash, best[0].code_hash))
                    there = 1;
            if (rc == 0)
                db_programs_free(dt, nd);
            if (rc == 0 && !there) {
                cuco_db_program c = best[0];
                c.id = 0;
                c.parent_id = best[0].id;
                c.second_parent_id = 0;
                c.island = dest;
                c.generation = gen;
                c.mutator = "migration";
                c.patch_type = NULL;
                c.description = "best of the previous island";
                c.cached = 0;
                rc = db_program_insert(o->db, &c, NULL, e);
            }
        }
        db_programs_free(best, nb);
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
        rc = insert_program(o, &c, &fid, e);
        if (rc == 0)
            rc = db_llm_calls_link(o->db, run_id, calls_before, fid, e);
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
    rc = insert_program(o, &c, &id, e);
    if (rc == 0)
        rc = db_llm_calls_link(o->db, run_id, calls_before, id, e);
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

/* With re-timing, the best is the champion: the program that last won a
 * re-timing, else the initial program (db_run_champion). */
static int champion_of_run(const cuco_evolve_opts *o, int64_t run_id, cuco_evolve_result *r,
                           cuco_err *e)
{
    int64_t id = 0;
    char *hash = NULL;
    int rc = db_run_champion(o->db, run_id, &id, &hash, e);
    free(hash);
    cuco_db_program p;
    if (rc < 0 || id <= 0 || (rc = db_program_get(o->db, id, &p, e)) < 0)
        return rc;
    r->best_id = p.id;
    r->best_score = p.score;
    r->best_time_ms = p.time_ms;
    db_program_free(&p);
    return 0;
}

static int best_of_run(const cuco_evolve_opts *o, int64_t run_id, cuco_evolve_result *r,
                       cuco_err *e)
{
    if (o->cfg->retime_rounds > 0)
        return champion_of_run(o, run_id, r, e);
    cuco_db_program *b;
    size_t nb;
    int rc = db_programs_top(o->db, run_id, -1, 1, &b, &nb, e);
    if (rc < 0)
        return rc;
    if (nb) {
        r->best_id = b[0].id;
        r->best_score = b[0].score;
        r->best_time_ms = b[0].time_ms;
        /* prefer the original over its copies */
        if (b[0].parent_id &&
            (!strcmp(b[0].mutator, "copy") || !strcmp(b[0].mutator, "migration"))) {
            cuco_db_program *all;
            size_t na;
            if (db_programs_list(o->db, run_id, "ok", &all, &na, e) == 0) {
                for (size_t i = 0; i < na; i++)
                    if (!strcmp(all[i].code_hash, b[0].code_hash)) {
                        r->best_id = all[i].id;
                        break;
                    }
                db_programs_free(all, na);
            }
        }
    }
    db_programs_free(b, nb);
    return 0;
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
    cuco_mutator **use = o->mutators ? (cuco_mutator **)o->mutators : muts;

    double t0 = now_s();
    int64_t run_id = 0;
    cuco_db_run run;
    int resumed = 0;
    if (!o->fresh && db_run_find(o->db, o->workload_name, &run, e) == 0) {
        if (!strcmp(run.status, "running")) {
            run_id = run.id;
            resumed = 1;
        }
        db_run_free(&run);
    }
    cuco_err_clear(e);
    if (!run_id) {
        char *cj = cuco_config_json(cfg);
        rc = db_run_create(o->db, o->workload_name, cj, cfg->seed, &run_id, e);
        free(cj);
        if (rc < 0)
            goto done;
    }
    r->run_id = run_id;
    if (o->run_id_out)
        *o->run_id_out = run_id;

    /* pending programs left by a crash: evaluate them first */
    cuco_db_program *ps = NULL;
    size_t n = 0;
    double baseline = -1;
    if ((rc = db_programs_list(o->db, run_id, NULL, &ps, &n, e)) < 0)
        goto done;
    int gen = max_generation(ps, n);
    db_programs_free(ps, n);
    if (gen < 0) {
        if ((rc = generation_zero(o, run_id, e)) < 0)
            goto done;
        gen = 0;
    } else if (resumed) {
        /* re-queue generation 0's pending first (needs no baseline) */
        if ((rc = db_programs_pending(o->db, run_id, &ps, &n, e)) < 0)
            goto done;
        if (n && ps[0].generation == 0) {
            int ok = 0, failed = 0;
            rc = eval_programs(o, ps, 1, 1.0, &ok, &failed, e);
        }
        db_programs_free(ps, n);
        if (rc < 0)
            goto done;
    }
    if ((rc = finish_generation_zero(o, run_id, &baseline, e)) < 0) {
        if (rc == CUCO_EINVAL) {
            cuco_err se = CUCO_ERR_INIT;
            db_run_set_status(o->db, run_id, "failed", &se);
            cuco_err_clear(&se);
        }
        goto done;
    }
    r->baseline_ms = baseline;
    if (resumed) {
        if ((rc = db_programs_pending(o->db, run_id, &ps, &n, e)) < 0)
            goto done;
        int ok = 0, failed = 0;
        rc = eval_programs(o, ps, n, baseline, &ok, &failed, e);
        db_programs_free(ps, n);
        if (rc < 0)
            goto done;
    }

    long pending_made = 0;
    const char *stop = NULL;
    char stop_text[sizeof r->stop_reason];
    for (;;) {
        long evals, cached;
        double usd;
        if ((rc = db_run_evaluations(o->db, run_id, &evals, &cached, e)) < 0 ||
            (rc = db_run_cost(o->db, run_id, &usd, e)) < 0)
            goto done;
        r->evaluations = evals;
        r->cached = cached;
        double wall = now_s() - t0;
        if (cfg->budget_evaluations > 0 && evals >= cfg->budget_evaluations)
            stop = "evaluation budget reached";
        else if (cfg->budget_generations > 0 && gen >= cfg->budget_generations)
            stop = "generation budget reached";
        else if (cfg->budget_wall_s > 0 && wall >= cfg->budget_wall_s)
            stop = "time budget reached";
        else if (cfg->budget_usd > 0 && usd >= cfg->budget_usd)
            stop = "money budget reached";
        if (stop)
            break;
        gen++;
        double frac = budget_fraction(cfg, evals, gen - 1, wall, usd);
        int exploit = frac >= cfg->explore_fraction;
        cuco_rng rng;
        cuco_rng_seed(&rng, cfg->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)gen);

        if ((rc = db_begin(o->db, e)) < 0)
            goto done;
        if (cfg->migration_interval > 0 && cfg->islands > 1 && gen % cfg->migration_interval == 0)
            rc = migrate(o, run_id, gen, e);
        int64_t *ids = NULL;
        size_t nids = 0, cap = 0;
        int exhausted = 0, budget_stop = 0;
        long room = cfg->budget_evaluations > 0 ? cfg->budget_evaluations - evals : -1;
        for (int isl = 0; isl < cfg->islands && rc == 0 && !budget_stop; isl++) {
            cuco_db_program *top;
            size_t ntop;
            if ((rc = db_programs_top(o->db, run_id, isl, (size_t)cfg->archive_size, &top, &ntop,
                                      e)) < 0)
                break;
            for (int c = 0; c < cfg->children_per_island && ntop && rc == 0 && !budget_stop; c++) {
                if (room >= 0 && (long)nids >= room)
                    break;
                int64_t id = 0;
                rc = propose_child(o, use, run_id, gen, isl, exploit, &rng, top, ntop, &id,
                                   &exhausted, &budget_stop, e);
                if (rc == 0 && id > 0) {
                    if (CUCO_GROW(ids, cap, nids + 1, 8) < 0) {
                        rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                        break;
                    }
                    ids[nids++] = id;
                }
            }
            db_programs_free(top, ntop);
        }
        if (rc < 0) {
            free(ids);
            goto done;
        }
        if ((rc = db_commit(o->db, e)) < 0) {
            free(ids);
            goto done;
        }
        pending_made += (long)nids;
        if (o->crash_after_pending > 0 && pending_made >= o->crash_after_pending) {
            free(ids);
            r->crashed = 1;
            snprintf(r->stop_reason, sizeof r->stop_reason, "simulated crash");
            rc = 0;
            goto done;
        }
        /* evaluate this generation */
        cuco_db_program *gp = calloc(nids ? nids : 1, sizeof *gp);
        int ok = 0, failed = 0;
        if (!gp)
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        size_t got = 0;
        for (size_t i = 0; i < nids && rc == 0; i++, got++)
            rc = db_program_get(o->db, ids[i], &gp[i], e);
        free(ids);
        if (rc == 0)
            rc = eval_programs(o, gp, nids, baseline, &ok, &failed, e);
        db_programs_free(gp, got);
        if (rc == 0)
            rc = cuco_evolve_retime(o, run_id, gen, cfg->retime_per_generation, &baseline, e);
        if (rc < 0)
            goto done;
        r->generations = gen;
        if (o->progress) {
            cuco_evolve_progress pr;
            memset(&pr, 0, sizeof pr);
            best_of_run(o, run_id, r, e);
            db_run_evaluations(o->db, run_id, &pr.evaluations, &pr.cached, e);
            db_run_cost(o->db, run_id, &pr.usd, e);
            pr.generation = gen;
            pr.best_speedup = r->best_score;
            pr.ok = ok;
            pr.failed = failed;
            pr.elapsed_s = now_s() - t0;
            double f = budget_fraction(cfg, pr.evaluations, gen, pr.elapsed_s, pr.usd);
            pr.eta_s = f > 0 ? pr.elapsed_s * (1 - f) / f : -1;
            pr.exploit = exploit;
            long held = 0;
            db_run_retimings(o->db, run_id, &pr.retimings, &held, &pr.retiming_runs, e);
            o->progress(o->progress_ctx, &pr);
        }
        if (!budget_stop && cfg->meta_interval > 0 && gen % cfg->meta_interval == 0) {
            rc = write_meta_summary(o, run_id, gen, e);
            if (rc == CUCO_EBUDGET) {
                cuco_err_clear(e);
                budget_stop = 1;
                rc = 0;
            } else if (rc < 0) {
                goto done;
            }
        }
        if (budget_stop) {
            double spent = 0;
            db_run_cost(o->db, run_id, &spent, e);
            snprintf(stop_text, sizeof stop_text, "budget reached: $%.4f of $%.4f spent", spent,
                     cfg->budget_usd);
            stop = stop_text;
            break;
        }
        if (nids == 0 && exhausted) {
            stop = "space exhausted";
            break;
        }
    }
    /* no apparent improvement is left unconfirmed when the run ends */
    if ((rc = cuco_evolve_retime(o, run_id, gen, LONG_MAX, &baseline, e)) < 0)
        goto done;
    r->baseline_ms = baseline;
    if ((rc = db_run_set_status(o->db, run_id, "done", e)) < 0)
        goto done;
    snprintf(r->stop_reason, sizeof r->stop_reason, "%s", stop ? stop : "done");
    r->generations = gen;
    rc = best_of_run(o, run_id, r, e);
    db_run_evaluations(o->db, run_id, &r->evaluations, &r->cached, e);
    db_run_retimings(o->db, run_id, &r->retimings, &r->retimings_held, &r->retiming_runs, e);
done:
    for (size_t i = 0; i < cfg->n_mutators; i++)
        cuco_mutator_free(muts[i]);
    free(muts);
    if (r->crashed)
        best_of_run(o, run_id, r, e);
    return rc;
}
