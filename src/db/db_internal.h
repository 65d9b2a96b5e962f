/* db_internal.h: what the database's source files share (not part of the
 * public interface in cuco/db.h). */
#ifndef CUCO_DB_INTERNAL_H
#define CUCO_DB_INTERNAL_H

#include <sqlite3.h>

#include "cuco/db.h"

struct cuco_db {
    sqlite3 *h;
    int readonly;
};

/* Seconds since the epoch. */
double db_now(void);
/* Sets e to "database: WHAT: <sqlite's message>" and returns CUCO_EDB. */
int db_sql_error(cuco_db *db, cuco_err *e, const char *what);
/* Prepares sql (db_sql_error on failure). */
int db_prepare(cuco_db *db, const char *sql, sqlite3_stmt **st, cuco_err *e);
/* Binds s, or NULL when s is NULL. */
void db_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Binds id, or NULL when id <= 0 (no such row). */
void db_bind_id_opt(sqlite3_stmt *st, int i, int64_t id);
/* Binds v, or NULL when v < 0. */
void db_bind_real_opt(sqlite3_stmt *st, int i, double v);
/* A copy of column i's text (caller frees), NULL for NULL. */
char *db_col_text(sqlite3_stmt *st, int i);
/* Column i as a double, -1 for NULL. */
double db_col_real_opt(sqlite3_stmt *st, int i);
/* Steps st once, finalizes it; 0 when it was done, else db_sql_error(what). */
int db_step_done(cuco_db *db, sqlite3_stmt *st, const char *what, cuco_err *e);

#endif
