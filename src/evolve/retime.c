/* retime.c: re-timing of apparent improvements against the run's best (see
 * retime.h). */
#include "retime.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/config.h"

/* One distinct program of the run: the first 'ok' row with its code hash. */
typedef struct entry {
    const cuco_db_program *p; /* borrowed from the pass's list */
    double median;            /* of its timings; its time_ms when it has none */
    int n_timings;
    int tried; /* challenged in this pass already */
} entry;

typedef struct pass {
    const cuco_evolve_opts *o;
    int64_t run_id;
    int generation;
    double *baseline;
    const char *initial_hash; /* borrowed */
    entry *entries;
    size_t n;
} pass;

static int is_initial(const pass *ps, const entry *x)
{
    return ps->initial_hash && !strcmp(x->p->code_hash, ps->initial_hash);
}

/* Writes x's median as the time of its programs; the initial program's median
 * is the baseline, and every score follows it. */
static int publish(pass *ps, entry *x, cuco_err *e)
{
    int rc;
    if (is_initial(ps, x) && x->median > 0 && x->median != *ps->baseline) {
        *ps->baseline = x->median;
        if ((rc = db_programs_set_time(ps->o->db, ps->run_id, x->p->code_hash, x->median, -1, e)) <
            0)
            return rc;
        return db_run_rescore(ps->o->db, ps->run_id, x->median, e);
    }
    return db_programs_set_time(ps->o->db, ps->run_id, x->p->code_hash, x->median, *ps->baseline,
                                e);
}

static int refresh(pass *ps, entry *x, cuco_err *e)
{
    int rc = db_timing_median(ps->o->db, ps->run_id, x->p->code_hash, &x->median, &x->n_timings, e);
    if (rc == 0 && x->n_timings == 0)
        x->median = x->p->time_ms;
    return rc;
}

/* Loads the distinct 'ok' programs, and brings each one's time to the median
 * of its timings (a program without timings, e.g. from an older database,
 * gets its time as its first timing). */
static int load(pass *ps, cuco_db_program *list, size_t n, cuco_err *e)
{
    ps->entries = calloc(n ? n : 1, sizeof *ps->entries);
    if (!ps->entries)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!list[i].code_hash || !list[i].code || list[i].time_ms <= 0)
            continue;
        int dup = 0;
        for (size_t k = 0; k < ps->n && !dup; k++)
            dup = !strcmp(ps->entries[k].p->code_hash, list[i].code_hash);
        if (dup)
            continue;
        entry *x = &ps->entries[ps->n++];
        x->p = &list[i];
        if ((rc = refresh(ps, x, e)) < 0)
            break;
        if (x->n_timings == 0) {
            rc = db_timing_add(ps->o->db, ps->run_id, x->p->code_hash, x->p->time_ms, "eval", 0, e);
            x->n_timings = 1;
        } else if (x->median != x->p->time_ms) {
            rc = publish(ps, x, e);
        }
    }
    return rc;
}

/* The champion (db_run_champion): the program that last won a re-timing
 * and is still correct, else the initial program. (A program that lost one
 * keeps its median, which may be lower than the champion's: it did not beat
 * the champion in every round, so it does not count as faster.) NULL when
 * it is not among the correct programs. */
static int champion(pass *ps, entry **out, cuco_err *e)
{
    *out = NULL;
    int64_t id = 0;
    char *hash = NULL;
    int rc = db_run_champion(ps->o->db, ps->run_id, &id, &hash, e);
    for (size_t i = 0; i < ps->n && hash && !*out; i++)
        if (!strcmp(ps->entries[i].p->code_hash, hash))
            *out = &ps->entries[i];
    free(hash);
    return rc;
}

/* The fastest program with a single timing that beats the champion. */
static entry *next_challenger(pass *ps, const entry *champ)
{
    entry *best = NULL;
    for (size_t i = 0; i < ps->n; i++) {
        entry *x = &ps->entries[i];
        if (x->n_timings == 1 && !x->tried && !is_initial(ps, x) && x->median < champ->median &&
            (!best || x->median < best->median))
            best = x;
    }
    return best;
}

/* Evaluates x once. 1: timed (stored); 0: the program failed (marked, note
 * set); negative: database error. *infra = 1 when the evaluator itself
 * failed (note set, nothing marked). */
static int time_once(pass *ps, entry *x, int64_t retiming_id, int round, double *time_ms,
                     int *infra, cuco_buf *note, cuco_err *e)
{
    cuco_eval_outcome out;
    memset(&out, 0, sizeof out);
    cuco_err ee = CUCO_ERR_INIT;
    int rc = ps->o->evaluate(ps->o->eval_ctx, 0, x->p->code, &out, &ee);
    if (rc < 0 || out.status == CUCO_EVAL_INFRA_ERROR) {
        *infra = 1;
        cuco_buf_printf(note, "program %lld could not be evaluated in round %d: %s",
                        (long long)x->p->id, round,
                        rc < 0 ? cuco_err_msg(&ee) : (out.error ? out.error : "infra_error"));
        cuco_err_clear(&ee);
        cuco_eval_outcome_free(&out);
        return 0;
    }
    cuco_err_clear(&ee);
    if (out.status == CUCO_EVAL_OK && out.time_ms > 0) {
        *time_ms = out.time_ms;
        rc = db_timing_add(ps->o->db, ps->run_id, x->p->code_hash, out.time_ms, "retime",
                           retiming_id, e);
        cuco_eval_outcome_free(&out);
        return rc < 0 ? rc : 1;
    }
    const char *status = cuco_eval_status_name(out.status);
    cuco_buf_printf(note, "program %lld %s when re-timed (round %d)%s%s", (long long)x->p->id,
                    status, round, out.error ? ": " : "", out.error ? out.error : "");
    rc = 0;
    if (!is_initial(ps, x)) {
        char *why = cuco_sprintf("%s when re-timed (round %d)%s%s", status, round,
                                 out.error ? ": " : "", out.error ? out.error : "");
        rc = db_programs_set_failed(ps->o->db, ps->run_id, x->p->code_hash, status,
                                    why ? why : status, e);
        free(why);
        x->median = -1; /* out of the pass */
        x->n_timings = -1;
    }
    cuco_eval_outcome_free(&out);
    return rc < 0 ? rc : 0;
}

/* Re-times challenger x against champion c; returns the new champion. */
static int challenge(pass *ps, entry *c, entry *x, entry **winner, cuco_err *e)
{
    const cuco_evolve_config *cfg = ps->o->cfg;
    cuco_db_retiming r = {ps->run_id, x->p->id, c->p->id, ps->generation, 0, 0, 0, x->median,
                          -1,         -1,       NULL};
    int64_t id = 0;
    int rc = db_retiming_insert(ps->o->db, &r, &id, e);
    if (rc < 0)
        return rc;
    cuco_buf note = CUCO_BUF_INIT;
    int infra = 0, failed = 0, won_every_round = 1;
    for (int round = 1; round <= cfg->retime_rounds && !infra && !failed && rc == 0; round++) {
        /* alternate who runs first, so neither always follows the other */
        entry *order[2] = {round % 2 ? x : c, round % 2 ? c : x};
        double t[2] = {-1, -1};
        for (int k = 0; k < 2 && !infra && !failed && rc == 0; k++) {
            int timed = time_once(ps, order[k], id, round, &t[k], &infra, &note, e);
            r.runs++;
            if (timed < 0)
                rc = timed;
            else if (!timed && !infra)
                failed = 1;
        }
        if (rc == 0 && !infra && !failed) {
            r.rounds = round;
            double tx = order[0] == x ? t[0] : t[1], tc = order[0] == x ? t[1] : t[0];
            if (!(tx < tc))
                won_every_round = 0;
        }
    }
    if (rc < 0)
        goto out;
    if ((rc = db_begin(ps->o->db, e)) < 0)
        goto out;
    for (int k = 0; k < 2 && rc == 0; k++) {
        entry *y = k ? x : c;
        if (y->n_timings < 0)
            continue;
        if ((rc = refresh(ps, y, e)) == 0)
            rc = publish(ps, y, e);
    }
    r.champion_ms = c->n_timings < 0 ? -1 : c->median;
    r.challenger_ms = x->n_timings < 0 ? -1 : x->median;
    /* the challenger holds when it beat the champion in every round and in
     * the medians, or when the champion failed and it did not */
    if (c->n_timings < 0)
        r.held = x->n_timings > 0;
    else
        r.held = x->n_timings > 0 && !failed && r.rounds == cfg->retime_rounds && won_every_round &&
                 x->median < c->median;
    r.note = note.len ? cuco_buf_str(&note) : NULL;
    if (rc == 0)
        rc = db_retiming_finish(ps->o->db, id, &r, e);
    if (rc == 0)
        rc = db_commit(ps->o->db, e);
    else
        db_rollback(ps->o->db);
    *winner = r.held ? x : (c->n_timings < 0 ? NULL : c);
    if (infra) /* the evaluator cannot run now: no more re-timing in this pass */
        *winner = NULL;
out:
    cuco_buf_free(&note);
    return rc;
}

int cuco_evolve_retime(const cuco_evolve_opts *o, int64_t run_id, int generation, long cap,
                       double *baseline, cuco_err *e)
{
    if (o->cfg->retime_rounds < 1)
        return 0;
    cuco_db_program *all;
    size_t n;
    int rc = db_programs_list(o->db, run_id, "ok", &all, &n, e);
    if (rc < 0)
        return rc;
    pass ps = {o, run_id, generation, baseline, NULL, NULL, 0};
    for (size_t i = 0; i < n && !ps.initial_hash; i++)
        if (all[i].generation == 0 && all[i].code_hash)
            ps.initial_hash = all[i].code_hash;
    if ((rc = db_begin(o->db, e)) < 0 || (rc = load(&ps, all, n, e)) < 0 ||
        (rc = db_commit(o->db, e)) < 0) {
        db_rollback(o->db);
        goto out;
    }
    entry *champ = NULL;
    if ((rc = champion(&ps, &champ, e)) < 0)
        goto out;
    for (long done = 0; champ && done < cap && rc == 0; done++) {
        entry *x = next_challenger(&ps, champ);
        if (!x)
            break;
        entry *winner = NULL;
        x->tried = 1; /* never twice in one pass, whatever happened */
        rc = challenge(&ps, champ, x, &winner, e);
        if (rc == 0 && !winner)
            break;
        champ = winner;
    }
out:
    free(ps.entries);
    db_programs_free(all, n);
    return rc;
}
