/* The backup domain's SQL. Table names come from the engine's catalog, never from input, and
 * are quoted as identifiers where a statement names them. */
#include "domain/backup/backup_store.h"
#include "core/util.h"
#include <stdio.h>
#include <string.h>

/* The statement listing the tables (prefix: "snap." for SQLite's attached copy, else ""). */
static void tables_sql(char *sql, size_t cap, const char *prefix) {
  if (db_engine_get() == DB_SQLITE)
    snprintf(sql, cap,
             "SELECT name FROM %ssqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%%' ORDER BY name",
             prefix);
  else
    snprintf(sql, cap,
             "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
             "AND table_type = 'BASE TABLE' ORDER BY table_name");
}

/* Counts every table on c (prefix: "snap." for the attached copy, else ""), into a new object. */
static json_t *count_in(db_conn *c, const char *prefix, backup_count_cb cb, void *ctx, int64_t *schema, char err[256]) {
  arena a;
  arena_init(&a);
  db_res *t, *r;
  json_t *counts = NULL;
  char sql[512];
  tables_sql(sql, sizeof sql, prefix);
  if (db_exec(c, &a, &t, sql, DB_NOARGS) != DB_OK) {
    snprintf(err, 256, "cannot list the database's tables");
    goto out;
  }
  counts = json_object();
  for (int i = 0; i < t->rows; i++) {
    const char *name = db_text(t, i, 0);
    if (strchr(name, '"')) continue; /* none of ours; never quoted wrongly */
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s\"%s\"", prefix, name);
    if (db_exec(c, &a, &r, sql, DB_NOARGS) != DB_OK) {
      snprintf(err, 256, "cannot count the rows of %s", name);
      json_decref(counts), counts = NULL;
      goto out;
    }
    json_object_set_new(counts, name, json_integer(db_int(r, 0, 0)));
    if (cb) cb(ctx, i + 1, t->rows);
  }
  if (schema) {
    snprintf(sql, sizeof sql, "SELECT COALESCE(MAX(version), 0) FROM %sschema_migrations", prefix);
    *schema = db_exec(c, &a, &r, sql, DB_NOARGS) == DB_OK ? db_int(r, 0, 0) : 0;
  }
out:
  arena_fini(&a);
  return counts;
}

bool backup_store_view_begin(backup_view *v, const char *path, backup_count_cb cb, void *ctx, char err[256]) {
  memset(v, 0, sizeof *v);
  arena a;
  arena_init(&a);
  db_res *r;
  bool ok = false;
  if (db_engine_get() == DB_SQLITE) {
    v->c = db_acquire();
    /* a read transaction of its own: writers go on, the copy is the database at one instant */
    if (db_exec(v->c, NULL, NULL, "VACUUM INTO $1", DB_ARGS(DB_TEXT(path))) != DB_OK) {
      snprintf(err, 256, "VACUUM INTO %s failed", path);
      goto out;
    }
    if (db_exec(v->c, NULL, NULL, "ATTACH DATABASE $1 AS snap", DB_ARGS(DB_TEXT(path))) != DB_OK) {
      snprintf(err, 256, "cannot open the copy %s", path);
      goto out;
    }
    v->counts = count_in(v->c, "snap.", cb, ctx, &v->schema_version, err);
    db_exec(v->c, NULL, NULL, "DETACH DATABASE snap", DB_NOARGS);
    ok = v->counts != NULL;
    goto out;
  }
  err_t e = db_begin_exec(&v->c, NULL, NULL, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", DB_NOARGS);
  if (!e)
    e = db_to_err(
        db_exec(v->c, &a, &r, "SELECT pg_export_snapshot(), current_setting('server_version_num')", DB_NOARGS));
  if (e) {
    snprintf(err, 256, "cannot open a snapshot of the database");
    goto out;
  }
  snprintf(v->snapshot, sizeof v->snapshot, "%s", db_text(r, 0, 0));
  snprintf(v->server_version, sizeof v->server_version, "%s", db_text(r, 0, 1));
  v->counts = count_in(v->c, "", cb, ctx, &v->schema_version, err);
  ok = v->counts != NULL;
out:
  arena_fini(&a);
  return ok;
}

void backup_store_view_end(backup_view *v) {
  if (!v->c) return;
  if (db_in_tx(v->c))
    db_end(v->c, ERR_OK); /* read only: nothing to commit, the snapshot ends */
  else
    db_release(v->c);
  v->c = NULL;
}

json_t *backup_store_counts(backup_count_cb cb, void *ctx, char err[256]) {
  db_conn *c = db_acquire();
  json_t *counts = count_in(c, "", cb, ctx, NULL, err);
  db_release(c);
  return counts;
}

int backup_store_table_count(void) {
  arena a;
  arena_init(&a);
  db_res *r;
  char sql[512];
  tables_sql(sql, sizeof sql, "");
  int n = db_query(&a, &r, sql, DB_NOARGS) == DB_OK ? r->rows : -1;
  arena_fini(&a);
  return n;
}

bool backup_store_analyze(void) { return db_query(NULL, NULL, "ANALYZE", DB_NOARGS) == DB_OK; }
