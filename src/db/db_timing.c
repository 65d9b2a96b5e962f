/* db_timing.c: the run's benchmark measurements and the re-timing of
 * apparent improvements (tables timings and retimings, see cuco/db.h). */
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/grow.h"
#include "cuco/stats.h"
#include "db_internal.h"

int db_timing_add(cuco_db *db, int64_t run_id, const char *code_hash, double time_ms,
                  const char *source, int64_t retiming_id, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "INSERT INTO timings(run_id, code_hash, time_ms, source, retiming_id,"
                        " created_at) VALUES(?,?,?,?,?,?)",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    db_bind_text(st, 2, code_hash ? code_hash : "");
    sqlite3_bind_double(st, 3, time_ms);
    db_bind_text(st, 4, source);
    db_bind_id_opt(st, 5, retiming_id);
    sqlite3_bind_double(st, 6, db_now());
    return db_step_done(db, st, "storing a timing", e);
}

int db_timing_median(cuco_db *db, int64_t run_id, const char *code_hash, double *median, int *n,
                     cuco_err *e)
{
    *median = -1;
    *n = 0;
    sqlite3_stmt *st;
    int rc = db_prepare(db, "SELECT time_ms FROM timings WHERE run_id=? AND code_hash=?", &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    db_bind_text(st, 2, code_hash ? code_hash : "");
    double *v = NULL;
    size_t cnt = 0, cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CUCO_GROW(v, cap, cnt + 1, 8) < 0) {
            free(v);
            sqlite3_finalize(st);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        v[cnt++] = sqlite3_column_double(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return db_sql_error(db, e, "reading timings");
    }
    if (cnt) {
        *median = cuco_median(v, cnt);
        *n = (int)cnt;
    }
    free(v);
    return 0;
}

int db_programs_set_time(cuco_db *db, int64_t run_id, const char *code_hash, double time_ms,
                         double baseline_ms, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "UPDATE programs SET time_ms=?1,"
                        " score=CASE WHEN ?2 > 0 THEN ?2 / ?1 ELSE score END"
                        " WHERE run_id=?3 AND code_hash=?4 AND status='ok'",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_double(st, 1, time_ms);
    sqlite3_bind_double(st, 2, baseline_ms);
    sqlite3_bind_int64(st, 3, run_id);
    db_bind_text(st, 4, code_hash ? code_hash : "");
    return db_step_done(db, st, "updating program times", e);
}

int db_programs_set_failed(cuco_db *db, int64_t run_id, const char *code_hash, const char *status,
                           const char *error, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "UPDATE programs SET status=?, error=?, score=NULL, time_ms=NULL"
                        " WHERE run_id=? AND code_hash=? AND status='ok'",
                        &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, status);
    db_bind_text(st, 2, error);
    sqlite3_bind_int64(st, 3, run_id);
    db_bind_text(st, 4, code_hash ? code_hash : "");
    return db_step_done(db, st, "marking programs failed", e);
}

int db_run_rescore(cuco_db *db, int64_t run_id, double baseline_ms, cuco_err *e)
{
    int rc = db_run_set_baseline(db, run_id, baseline_ms, e);
    if (rc < 0)
        return rc;
    sqlite3_stmt *st;
    if ((rc = db_prepare(db,
                         "UPDATE programs SET score=?1 / time_ms"
                         " WHERE run_id=?2 AND status='ok' AND time_ms > 0",
                         &st, e)) < 0)
        return rc;
    sqlite3_bind_double(st, 1, baseline_ms);
    sqlite3_bind_int64(st, 2, run_id);
    return db_step_done(db, st, "rescoring programs", e);
}

static void bind_retiming(sqlite3_stmt *st, const cuco_db_retiming *r)
{
    sqlite3_bind_int64(st, 1, r->run_id);
    sqlite3_bind_int(st, 2, r->generation);
    db_bind_id_opt(st, 3, r->challenger_id);
    db_bind_id_opt(st, 4, r->champion_id);
    db_bind_real_opt(st, 5, r->claimed_ms);
    db_bind_real_opt(st, 6, r->challenger_ms);
    db_bind_real_opt(st, 7, r->champion_ms);
    sqlite3_bind_int(st, 8, r->rounds);
    sqlite3_bind_int(st, 9, r->runs);
    sqlite3_bind_int(st, 10, r->held);
    db_bind_text(st, 11, r->note);
}

int db_retiming_insert(cuco_db *db, const cuco_db_retiming *r, int64_t *id, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "INSERT INTO retimings(run_id, generation, challenger_id, champion_id,"
                        " claimed_ms, challenger_ms, champion_ms, rounds, runs, held, note,"
                        " created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                        &st, e);
    if (rc < 0)
        return rc;
    bind_retiming(st, r);
    sqlite3_bind_double(st, 12, db_now());
    if ((rc = db_step_done(db, st, "storing a re-timing", e)) < 0)
        return rc;
    if (id)
        *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int db_retiming_finish(cuco_db *db, int64_t id, const cuco_db_retiming *r, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "UPDATE retimings SET run_id=?1, generation=?2, challenger_id=?3,"
                        " champion_id=?4, claimed_ms=?5, challenger_ms=?6, champion_ms=?7,"
                        " rounds=?8, runs=?9, held=?10, note=?11 WHERE id=?12",
                        &st, e);
    if (rc < 0)
        return rc;
    bind_retiming(st, r);
    sqlite3_bind_int64(st, 12, id);
    return db_step_done(db, st, "updating a re-timing", e);
}

int db_run_retimings(cuco_db *db, int64_t run_id, long *retimings, long *held, long *runs,
                     cuco_err *e)
{
    *retimings = *held = *runs = 0;
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "SELECT (SELECT count(*) FROM retimings WHERE run_id=?1),"
                        " (SELECT coalesce(sum(held),0) FROM retimings WHERE run_id=?1),"
                        " (SELECT coalesce(sum(runs),0) FROM retimings WHERE run_id=?1)",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *retimings = (long)sqlite3_column_int64(st, 0);
        *held = (long)sqlite3_column_int64(st, 1);
        *runs = (long)sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : db_sql_error(db, e, "counting re-timings");
}

int db_run_champion(cuco_db *db, int64_t run_id, int64_t *program_id, char **code_hash, cuco_err *e)
{
    *program_id = 0;
    *code_hash = NULL;
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "SELECT p.id, p.code_hash FROM run_champions c JOIN programs p"
                        " ON p.id = coalesce(c.challenger_id, c.root_id) WHERE c.run_id=?"
                        " AND p.status='ok'",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text(st, 1);
        *program_id = sqlite3_column_int64(st, 0);
        *code_hash = cuco_strdup(h ? (const char *)h : "");
        if (!*code_hash) {
            sqlite3_finalize(st);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_sql_error(db, e, "reading the champion");
}
