/* db.c: the SQLite candidate database (schema, migrations, runs, programs,
 * evaluation cache, LLM call costs, meta summaries) and the run lock. */
#define _GNU_SOURCE
#include "cuco/db.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/grow.h"
#include "db_internal.h"

double db_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

int db_sql_error(cuco_db *db, cuco_err *e, const char *what)
{
    return cuco_err_set(e, CUCO_EDB, "database: %s: %s", what, sqlite3_errmsg(db->h));
}

/* Ordered migrations: migrations[i] brings the schema from version i to i+1. */
static const char *const migrations[] = {
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, workload TEXT NOT NULL, config TEXT,"
    " seed INTEGER, baseline_ms REAL, started_at REAL, ended_at REAL, status TEXT);"
    "CREATE TABLE programs(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
    " parent_id INTEGER, second_parent_id INTEGER, island INTEGER, generation INTEGER,"
    " code TEXT, code_hash TEXT, mutator TEXT, patch_type TEXT, description TEXT,"
    " status TEXT, score REAL, time_ms REAL, metrics TEXT, error TEXT, novelty REAL,"
    " knobs TEXT, cached INTEGER DEFAULT 0, created_at REAL);"
    "CREATE INDEX programs_run ON programs(run_id, status);"
    "CREATE INDEX programs_hash ON programs(run_id, code_hash);"
    "CREATE TABLE evaluations(workload TEXT NOT NULL, code_hash TEXT NOT NULL, status TEXT,"
    " time_ms REAL, metrics TEXT, error TEXT, created_at REAL,"
    " PRIMARY KEY(workload, code_hash));"
    "CREATE TABLE llm_calls(id INTEGER PRIMARY KEY, run_id INTEGER, program_id INTEGER,"
    " model TEXT, input_tokens INTEGER, output_tokens INTEGER, cached_tokens INTEGER,"
    " cost_usd REAL, latency_s REAL, prompt_hash TEXT, status TEXT, created_at REAL);"
    "CREATE TABLE meta_summaries(id INTEGER PRIMARY KEY, run_id INTEGER, generation INTEGER,"
    " text TEXT, created_at REAL);",
    /* 2: what each LLM call was for and why it failed; calls found by program */
    "ALTER TABLE llm_calls ADD COLUMN purpose TEXT;"
    "ALTER TABLE llm_calls ADD COLUMN error TEXT;"
    "CREATE INDEX llm_calls_run ON llm_calls(run_id, program_id);",
    /* 3: the verification audit's warning ('cuco bound'), shown next to speedups */
    "ALTER TABLE runs ADD COLUMN warning TEXT;",
    /* 4: when each program's result was written (time to reach a score) */
    "ALTER TABLE programs ADD COLUMN evaluated_at REAL;",
    /* 5: every benchmark measurement of a run, and the re-timing of apparent
     * improvements against the run's best (see db_timing_add) */
    "CREATE TABLE timings(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, code_hash TEXT NOT NULL,"
    " time_ms REAL NOT NULL, source TEXT, retiming_id INTEGER, created_at REAL);"
    "CREATE INDEX timings_run ON timings(run_id, code_hash);"
    "CREATE TABLE retimings(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, generation INTEGER,"
    " challenger_id INTEGER, champion_id INTEGER, claimed_ms REAL, challenger_ms REAL,"
    " champion_ms REAL, rounds INTEGER, runs INTEGER, held INTEGER, note TEXT, created_at REAL);",
    /* 6: the run's best under re-timing, one definition for every reader */
    "CREATE VIEW run_champions AS SELECT r.id AS run_id,"
    " (SELECT t.challenger_id FROM retimings t JOIN programs q ON q.id = t.challenger_id"
    "  WHERE t.run_id = r.id AND t.held = 1 AND q.status = 'ok' ORDER BY t.id DESC LIMIT 1)"
    "  AS challenger_id,"
    " (SELECT min(p.id) FROM programs p WHERE p.run_id = r.id AND p.parent_id IS NULL)"
    "  AS root_id"
    " FROM runs r;",
};
#define N_MIGRATIONS (sizeof migrations / sizeof migrations[0])

int db_schema_version(cuco_db *db, int *version, cuco_err *e)
{
    sqlite3_stmt *st;
    *version = 0;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT name FROM sqlite_master WHERE type='table' AND "
                           "name='schema_version'",
                           -1, &st, NULL) != SQLITE_OK)
        return db_sql_error(db, e, "reading schema");
    int has = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!has)
        return 0;
    if (sqlite3_prepare_v2(db->h, "SELECT max(version) FROM schema_version", -1, &st, NULL) !=
        SQLITE_OK)
        return db_sql_error(db, e, "reading schema version");
    if (sqlite3_step(st) == SQLITE_ROW)
        *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int exec(cuco_db *db, const char *sql, cuco_err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        cuco_err_set(e, CUCO_EDB, "database: %s", msg ? msg : sqlite3_errmsg(db->h));
        sqlite3_free(msg);
        return CUCO_EDB;
    }
    return 0;
}

static int migrate(cuco_db *db, cuco_err *e)
{
    int v, rc;
    if ((rc = exec(db, "BEGIN IMMEDIATE", e)) < 0)
        return rc;
    if ((rc = db_schema_version(db, &v, e)) < 0)
        goto fail;
    if (v > (int)N_MIGRATIONS) {
        rc = cuco_err_set(e, CUCO_EDB, "database schema version %d is newer than this cuco (%d)", v,
                          (int)N_MIGRATIONS);
        goto fail;
    }
    if (v == 0 && (rc = exec(db, "CREATE TABLE schema_version(version INTEGER NOT NULL)", e)) < 0)
        goto fail;
    for (int i = v; i < (int)N_MIGRATIONS; i++) {
        if ((rc = exec(db, migrations[i], e)) < 0)
            goto fail;
        char *sql = cuco_sprintf("INSERT INTO schema_version(version) VALUES(%d)", i + 1);
        rc = sql ? exec(db, sql, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        free(sql);
        if (rc < 0)
            goto fail;
    }
    return exec(db, "COMMIT", e);
fail:
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return cuco_err_prefix(e, "migrating the database");
}

int db_open(const char *path, int readonly, cuco_db **out, cuco_err *e)
{
    *out = NULL;
    cuco_db *db = calloc(1, sizeof *db);
    if (!db)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    db->readonly = readonly;
    int flags = readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (sqlite3_open_v2(path, &db->h, flags | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        cuco_err_set(e, CUCO_EDB, "cannot open database %s: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : "out of memory");
        db_close(db);
        return CUCO_EDB;
    }
    sqlite3_busy_timeout(db->h, 10000);
    int rc = 0, v = 0;
    if (!readonly) {
        if ((rc = exec(db,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                       "PRAGMA foreign_keys=ON",
                       e)) < 0 ||
            (rc = migrate(db, e)) < 0)
            goto fail;
    } else {
        if ((rc = db_schema_version(db, &v, e)) < 0)
            goto fail;
        if (v < 1 || v > (int)N_MIGRATIONS) {
            rc = cuco_err_set(e, CUCO_EDB, "database %s has schema version %d (this cuco: %d)",
                              path, v, (int)N_MIGRATIONS);
            goto fail;
        }
    }
    *out = db;
    return 0;
fail:
    cuco_err_prefix(e, "%s", path);
    db_close(db);
    return rc;
}

void db_close(cuco_db *db)
{
    if (!db)
        return;
    sqlite3_close_v2(db->h);
    free(db);
}

int db_lock_acquire(const char *lock_path, int *fd, cuco_err *e)
{
    *fd = -1;
    int f = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return cuco_err_errno(e, "cannot open lock file %s", lock_path);
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(f);
        if (busy)
            return cuco_err_set(e, CUCO_EBUSY,
                                "workspace is in use by another cuco evolve (lock %s is held)",
                                lock_path);
        return cuco_err_errno(e, "cannot lock %s", lock_path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) == 0 && write(f, pid, (size_t)n) < 0) {
        /* the pid is informative only */
    }
    *fd = f;
    return 0;
}

void db_lock_release(int fd)
{
    if (fd >= 0)
        close(fd);
}

int db_begin(cuco_db *db, cuco_err *e)
{
    return exec(db, "BEGIN IMMEDIATE", e);
}
int db_commit(cuco_db *db, cuco_err *e)
{
    int rc = exec(db, "COMMIT", e);
    if (rc < 0)
        db_rollback(db); /* a failed COMMIT leaves the transaction open */
    return rc;
}
void db_rollback(cuco_db *db)
{
    if (db && !sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

int db_prepare(cuco_db *db, const char *sql, sqlite3_stmt **st, cuco_err *e)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK)
        return db_sql_error(db, e, "prepare");
    return 0;
}

void db_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void db_bind_id_opt(sqlite3_stmt *st, int i, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(st, i, id);
    else
        sqlite3_bind_null(st, i);
}

void db_bind_real_opt(sqlite3_stmt *st, int i, double v)
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

char *db_col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? cuco_strdup((const char *)t) : NULL;
}

double db_col_real_opt(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, i);
}

int db_step_done(cuco_db *db, sqlite3_stmt *st, const char *what, cuco_err *e)
{
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_sql_error(db, e, what);
    return 0;
}

int db_run_create(cuco_db *db, const char *workload, const char *config_json, uint64_t seed,
                  int64_t *id, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "INSERT INTO runs(workload, config, seed, started_at, status)"
                        " VALUES(?,?,?,?, 'running')",
                        &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, workload);
    db_bind_text(st, 2, config_json);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)seed);
    sqlite3_bind_double(st, 4, db_now());
    if ((rc = db_step_done(db, st, "creating run", e)) < 0)
        return rc;
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

void db_run_free(cuco_db_run *r)
{
    free(r->workload);
    free(r->config_json);
    free(r->status);
    memset(r, 0, sizeof *r);
}

int db_run_find(cuco_db *db, const char *workload, cuco_db_run *r, cuco_err *e)
{
    sqlite3_stmt *st;
    memset(r, 0, sizeof *r);
    int rc =
        db_prepare(db,
                   "SELECT id, workload, config, seed, baseline_ms, started_at, ended_at, status"
                   " FROM runs WHERE workload=? ORDER BY id DESC LIMIT 1",
                   &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, workload);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r->id = sqlite3_column_int64(st, 0);
        r->workload = db_col_text(st, 1);
        r->config_json = db_col_text(st, 2);
        r->seed = (uint64_t)sqlite3_column_int64(st, 3);
        r->baseline_ms = db_col_real_opt(st, 4);
        r->started_at = sqlite3_column_double(st, 5);
        r->ended_at = sqlite3_column_double(st, 6);
        r->status = db_col_text(st, 7);
        sqlite3_finalize(st);
        return 0;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return cuco_err_set(e, CUCO_ENOTFOUND, "no run of workload %s", workload);
    return db_sql_error(db, e, "finding run");
}

int db_run_set_baseline(cuco_db *db, int64_t run_id, double baseline_ms, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db, "UPDATE runs SET baseline_ms=? WHERE id=?", &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_double(st, 1, baseline_ms);
    sqlite3_bind_int64(st, 2, run_id);
    return db_step_done(db, st, "setting baseline", e);
}

int db_run_set_status(cuco_db *db, int64_t run_id, const char *status, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db, "UPDATE runs SET status=?, ended_at=? WHERE id=?", &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, status);
    if (strcmp(status, "running") == 0)
        sqlite3_bind_null(st, 2);
    else
        sqlite3_bind_double(st, 2, db_now());
    sqlite3_bind_int64(st, 3, run_id);
    return db_step_done(db, st, "setting run status", e);
}

int db_run_set_warning(cuco_db *db, int64_t run_id, const char *warning, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db, "UPDATE runs SET warning=? WHERE id=?", &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, warning);
    sqlite3_bind_int64(st, 2, run_id);
    return db_step_done(db, st, "setting the run's warning", e);
}

void db_program_free(cuco_db_program *p)
{
    free(p->code);
    free(p->code_hash);
    free(p->mutator);
    free(p->patch_type);
    free(p->description);
    free(p->status);
    free(p->metrics_json);
    free(p->error);
    free(p->knobs_json);
    memset(p, 0, sizeof *p);
}

void db_programs_free(cuco_db_program *ps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        db_program_free(&ps[i]);
    free(ps);
}

int db_program_insert(cuco_db *db, const cuco_db_program *p, int64_t *id, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc =
        db_prepare(db,
                   "INSERT INTO programs(run_id, parent_id, second_parent_id, island, generation,"
                   " code, code_hash, mutator, patch_type, description, status, score, time_ms,"
                   " metrics, error, novelty, knobs, cached, created_at)"
                   " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, p->run_id);
    db_bind_id_opt(st, 2, p->parent_id);
    db_bind_id_opt(st, 3, p->second_parent_id);
    sqlite3_bind_int(st, 4, p->island);
    sqlite3_bind_int(st, 5, p->generation);
    db_bind_text(st, 6, p->code);
    db_bind_text(st, 7, p->code_hash);
    db_bind_text(st, 8, p->mutator);
    db_bind_text(st, 9, p->patch_type);
    db_bind_text(st, 10, p->description);
    db_bind_text(st, 11, p->status ? p->status : "pending");
    db_bind_real_opt(st, 12, p->score);
    db_bind_real_opt(st, 13, p->time_ms);
    db_bind_text(st, 14, p->metrics_json);
    db_bind_text(st, 15, p->error);
    sqlite3_bind_double(st, 16, p->novelty);
    db_bind_text(st, 17, p->knobs_json);
    sqlite3_bind_int(st, 18, p->cached);
    sqlite3_bind_double(st, 19, db_now());
    if ((rc = db_step_done(db, st, "inserting program", e)) < 0)
        return rc;
    if (id)
        *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int db_program_update(cuco_db *db, int64_t id, const char *status, double score, double time_ms,
                      const char *metrics_json, const char *error, int cached, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "UPDATE programs SET status=?, score=?, time_ms=?, metrics=?, error=?,"
                        " cached=?, evaluated_at=? WHERE id=?",
                        &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, status);
    db_bind_real_opt(st, 2, score);
    db_bind_real_opt(st, 3, time_ms);
    db_bind_text(st, 4, metrics_json);
    db_bind_text(st, 5, error);
    sqlite3_bind_int(st, 6, cached);
    sqlite3_bind_double(st, 7, db_now());
    sqlite3_bind_int64(st, 8, id);
    return db_step_done(db, st, "updating program", e);
}

#define PROGRAM_COLS                                                                               \
    "id, run_id, parent_id, second_parent_id, island, generation, code, code_hash, mutator,"       \
    " patch_type, description, status, score, time_ms, metrics, error, novelty, knobs,"            \
    " cached, created_at"

static void read_program(sqlite3_stmt *st, cuco_db_program *p)
{
    p->id = sqlite3_column_int64(st, 0);
    p->run_id = sqlite3_column_int64(st, 1);
    p->parent_id = sqlite3_column_int64(st, 2);
    p->second_parent_id = sqlite3_column_int64(st, 3);
    p->island = sqlite3_column_int(st, 4);
    p->generation = sqlite3_column_int(st, 5);
    p->code = db_col_text(st, 6);
    p->code_hash = db_col_text(st, 7);
    p->mutator = db_col_text(st, 8);
    p->patch_type = db_col_text(st, 9);
    p->description = db_col_text(st, 10);
    p->status = db_col_text(st, 11);
    p->score = db_col_real_opt(st, 12);
    p->time_ms = db_col_real_opt(st, 13);
    p->metrics_json = db_col_text(st, 14);
    p->error = db_col_text(st, 15);
    p->novelty = sqlite3_column_double(st, 16);
    p->knobs_json = db_col_text(st, 17);
    p->cached = sqlite3_column_int(st, 18);
    p->created_at = sqlite3_column_double(st, 19);
}

int db_program_get(cuco_db *db, int64_t id, cuco_db_program *p, cuco_err *e)
{
    sqlite3_stmt *st;
    memset(p, 0, sizeof *p);
    int rc = db_prepare(db, "SELECT " PROGRAM_COLS " FROM programs WHERE id=?", &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        read_program(st, p);
        sqlite3_finalize(st);
        return 0;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return cuco_err_set(e, CUCO_ENOTFOUND, "no program %lld", (long long)id);
    return db_sql_error(db, e, "reading program");
}

static int read_programs(cuco_db *db, sqlite3_stmt *st, cuco_db_program **out, size_t *n,
                         cuco_err *e)
{
    cuco_db_program *ps = NULL;
    size_t cnt = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CUCO_GROW(ps, cap, cnt + 1, 16) < 0) {
            sqlite3_finalize(st);
            db_programs_free(ps, cnt);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        memset(&ps[cnt], 0, sizeof ps[cnt]);
        read_program(st, &ps[cnt++]);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        db_programs_free(ps, cnt);
        return db_sql_error(db, e, "listing programs");
    }
    *out = ps;
    *n = cnt;
    return 0;
}

int db_programs_list(cuco_db *db, int64_t run_id, const char *status, cuco_db_program **out,
                     size_t *n, cuco_err *e)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    int rc = db_prepare(db,
                        "SELECT " PROGRAM_COLS " FROM programs WHERE run_id=?"
                        " AND (?2 IS NULL OR status=?2) ORDER BY id",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    db_bind_text(st, 2, status);
    return read_programs(db, st, out, n, e);
}

int db_programs_pending(cuco_db *db, int64_t run_id, cuco_db_program **out, size_t *n, cuco_err *e)
{
    return db_programs_list(db, run_id, "pending", out, n, e);
}

int db_programs_top(cuco_db *db, int64_t run_id, int island, size_t n, cuco_db_program **out,
                    size_t *nout, cuco_err *e)
{
    sqlite3_stmt *st;
    *out = NULL;
    *nout = 0;
    int rc = db_prepare(db,
                        "SELECT " PROGRAM_COLS " FROM programs WHERE run_id=? AND status='ok'"
                        " AND score IS NOT NULL AND (?2 < 0 OR island=?2)"
                        " ORDER BY score DESC, id LIMIT ?3",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, island);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)n);
    return read_programs(db, st, out, nout, e);
}

static int exists_query(cuco_db *db, const char *sql, int64_t run_id, const char *s, int *seen,
                        cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db, sql, &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    db_bind_text(st, 2, s);
    rc = sqlite3_step(st);
    *seen = rc == SQLITE_ROW;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_sql_error(db, e, "query");
    return 0;
}

int db_program_hash_seen(cuco_db *db, int64_t run_id, const char *code_hash, int *seen, cuco_err *e)
{
    return exists_query(db, "SELECT 1 FROM programs WHERE run_id=? AND code_hash=? LIMIT 1", run_id,
                        code_hash, seen, e);
}

int db_program_knobs_seen(cuco_db *db, int64_t run_id, const char *knobs_json, int *seen,
                          cuco_err *e)
{
    return exists_query(db,
                        "SELECT 1 FROM programs WHERE run_id=? AND knobs=?"
                        " AND status<>'patch_failed' LIMIT 1",
                        run_id, knobs_json, seen, e);
}

void db_eval_free(cuco_db_eval *v)
{
    free(v->status);
    free(v->metrics_json);
    free(v->error);
    memset(v, 0, sizeof *v);
}

int db_eval_lookup(cuco_db *db, const char *workload, const char *code_hash, int *found,
                   cuco_db_eval *v, cuco_err *e)
{
    sqlite3_stmt *st;
    memset(v, 0, sizeof *v);
    *found = 0;
    int rc = db_prepare(db,
                        "SELECT status, time_ms, metrics, error FROM evaluations"
                        " WHERE workload=? AND code_hash=?",
                        &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, workload);
    db_bind_text(st, 2, code_hash);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *found = 1;
        v->status = db_col_text(st, 0);
        v->time_ms = db_col_real_opt(st, 1);
        v->metrics_json = db_col_text(st, 2);
        v->error = db_col_text(st, 3);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_sql_error(db, e, "evaluation lookup");
    return 0;
}

int db_eval_store(cuco_db *db, const char *workload, const char *code_hash, const cuco_db_eval *v,
                  cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "INSERT OR REPLACE INTO evaluations(workload, code_hash, status, time_ms,"
                        " metrics, error, created_at) VALUES(?,?,?,?,?,?,?)",
                        &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, workload);
    db_bind_text(st, 2, code_hash);
    db_bind_text(st, 3, v->status);
    db_bind_real_opt(st, 4, v->time_ms);
    db_bind_text(st, 5, v->metrics_json);
    db_bind_text(st, 6, v->error);
    sqlite3_bind_double(st, 7, db_now());
    return db_step_done(db, st, "storing evaluation", e);
}

int db_llm_call_insert(cuco_db *db, const cuco_db_llm_call *c, int64_t *id, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc =
        db_prepare(db,
                   "INSERT INTO llm_calls(run_id, program_id, model, input_tokens, output_tokens,"
                   " cached_tokens, cost_usd, latency_s, prompt_hash, status, created_at)"
                   " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                   &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, c->run_id);
    db_bind_id_opt(st, 2, c->program_id);
    db_bind_text(st, 3, c->model);
    sqlite3_bind_int64(st, 4, c->input_tokens);
    sqlite3_bind_int64(st, 5, c->output_tokens);
    sqlite3_bind_int64(st, 6, c->cached_tokens);
    sqlite3_bind_double(st, 7, c->cost_usd);
    sqlite3_bind_double(st, 8, c->latency_s);
    db_bind_text(st, 9, c->prompt_hash);
    db_bind_text(st, 10, c->status);
    sqlite3_bind_double(st, 11, db_now());
    if ((rc = db_step_done(db, st, "inserting llm call", e)) < 0)
        return rc;
    if (id)
        *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int db_llm_call_describe(cuco_db *db, int64_t id, const char *purpose, const char *error,
                         cuco_err *e)
{
    sqlite3_stmt *st;
    int rc =
        db_prepare(db,
                   "UPDATE llm_calls SET purpose=coalesce(?1, purpose), error=coalesce(?2, error)"
                   " WHERE id=?3",
                   &st, e);
    if (rc < 0)
        return rc;
    db_bind_text(st, 1, purpose);
    db_bind_text(st, 2, error);
    sqlite3_bind_int64(st, 3, id);
    return db_step_done(db, st, "describing llm call", e);
}

int db_llm_call_last_id(cuco_db *db, int64_t run_id, int64_t *id, cuco_err *e)
{
    sqlite3_stmt *st;
    *id = 0;
    int rc = db_prepare(db, "SELECT coalesce(max(id),0) FROM llm_calls WHERE run_id=?", &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return db_sql_error(db, e, "reading llm calls");
    return 0;
}

int db_llm_calls_link(cuco_db *db, int64_t run_id, int64_t after_id, int64_t program_id,
                      cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "UPDATE llm_calls SET program_id=? WHERE run_id=? AND id>?"
                        " AND program_id IS NULL",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, program_id);
    sqlite3_bind_int64(st, 2, run_id);
    sqlite3_bind_int64(st, 3, after_id);
    return db_step_done(db, st, "linking llm calls to their program", e);
}

int db_run_cost(cuco_db *db, int64_t run_id, double *usd, cuco_err *e)
{
    sqlite3_stmt *st;
    *usd = 0;
    int rc =
        db_prepare(db, "SELECT coalesce(sum(cost_usd),0) FROM llm_calls WHERE run_id=?", &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW)
        *usd = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int db_meta_insert(cuco_db *db, int64_t run_id, int generation, const char *text, cuco_err *e)
{
    sqlite3_stmt *st;
    int rc = db_prepare(db,
                        "INSERT INTO meta_summaries(run_id, generation, text, created_at)"
                        " VALUES(?,?,?,?)",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, generation);
    db_bind_text(st, 3, text);
    sqlite3_bind_double(st, 4, db_now());
    return db_step_done(db, st, "inserting meta summary", e);
}

int db_run_evaluations(cuco_db *db, int64_t run_id, long *evaluations, long *cached, cuco_err *e)
{
    sqlite3_stmt *st;
    *evaluations = *cached = 0;
    int rc = db_prepare(db,
                        "SELECT coalesce(sum(cached=0),0), coalesce(sum(cached=1),0) FROM programs"
                        " WHERE run_id=? AND code IS NOT NULL"
                        " AND status NOT IN ('pending','rejected_duplicate',"
                        "'rejected_novelty','patch_failed')"
                        " AND coalesce(mutator,'') NOT IN ('copy','migration')",
                        &st, e);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *evaluations = (long)sqlite3_column_int64(st, 0);
        *cached = (long)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return 0;
}
