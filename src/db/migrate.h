/* Versioned schema migrations, embedded in the binary at build time from
 * migrations/{sqlite,postgres}/NNNN_name.sql (both folders hold the same version numbers). */
#ifndef DB_MIGRATE_H
#define DB_MIGRATE_H
#include "db/db.h"
#include <stdbool.h>

/* Applies every migration newer than the database's version, each in its own transaction,
 * recording it in schema_migrations. Safe when several instances start at once (an
 * advisory lock on PostgreSQL, the write lock on SQLite). False on the first failure. */
bool db_migrate(void);
/* How many embedded migrations the database on c has not recorded; -1 when it cannot be read. */
int db_migrations_pending(db_conn *c, arena *a);

/* The newest embedded migration's version for engine ("sqlite" or "postgres"): the schema
 * version this binary knows. */
int db_migrations_latest(const char *engine);

#endif
