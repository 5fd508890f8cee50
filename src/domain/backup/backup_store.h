/* The backup domain's SQL: a consistent view of the database to copy and count. */
#ifndef DOMAIN_BACKUP_STORE_H
#define DOMAIN_BACKUP_STORE_H
#include "db/db.h"
#include <jansson.h>
#include <stdint.h>

/* Called after each table counted (done of total), for the progress display. */
typedef void (*backup_count_cb)(void *ctx, int done, int total);

/* A view of the database held open while it is copied: on SQLite a copy made with VACUUM INTO
 * (path) and attached to read its counts; on PostgreSQL a REPEATABLE READ transaction whose
 * snapshot is exported for pg_dump (snapshot) and held until backup_store_view_end. */
typedef struct backup_view {
  db_conn *c;
  char snapshot[128]; /* PostgreSQL: pg_export_snapshot()'s id */
  json_t *counts;     /* {table: rows} in the view (new reference, the caller's after begin) */
  int64_t schema_version;
  char server_version[32]; /* PostgreSQL: server_version_num; "" on SQLite */
} backup_view;

/* SQLite: copies the live database into path with VACUUM INTO (a consistent copy while
 * writers go on), then counts each table's rows in the copy. PostgreSQL: opens the exported
 * snapshot's transaction and counts in it (path unused). False with err on failure; the view
 * must be ended either way. */
bool backup_store_view_begin(backup_view *v, const char *path, backup_count_cb cb, void *ctx, char err[256]);
/* Ends the view: detaches the copy or ends the transaction; releases the connection. */
void backup_store_view_end(backup_view *v);

/* The tables of the database now and their rows ({table: rows}, new reference), read on a
 * connection of its own; NULL with err when the database cannot be read. */
json_t *backup_store_counts(backup_count_cb cb, void *ctx, char err[256]);
/* How many tables the database holds (0: an empty database to restore into); -1 on failure. */
int backup_store_table_count(void);
/* Gathers every table's statistics (ANALYZE) after a restore: PostgreSQL's pg_restore leaves
 * none, and the first plans would scan the restored tables whole; false on failure. */
bool backup_store_analyze(void);

#endif
