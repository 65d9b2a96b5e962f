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

#endif
