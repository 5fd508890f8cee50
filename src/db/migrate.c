/* Migration runner over the embedded scripts (build/gen/migrations.c). Several instances may
 * start at once: on PostgreSQL each migration's transaction takes an advisory lock first and
 * skips a migration another instance recorded meanwhile. */
#include "db/migrate.h"
#include "core/clock.h"
#include "core/log.h"
#include "db/db.h"
#include "db/engine.h"
#include <string.h>

typedef struct migration {
  const char *engine; /* "sqlite" or "postgres" */
  int version;
  const char *name;
  const char *sql;
} migration;
extern const migration EMBEDDED_MIGRATIONS[];
extern const int EMBEDDED_MIGRATION_COUNT;

static const char *engine_name(void) { return db_engine_get() == DB_SQLITE ? "sqlite" : "postgres"; }

static bool applied(const db_res *r, int version) {
  for (int i = 0; i < r->rows; i++)
    if (db_int(r, i, 0) == version) return true;
  return false;
}

/* PostgreSQL's lock of the migrations, taken inside each of their transactions (a transaction's
 * advisory lock, released by its COMMIT or ROLLBACK): behind PgBouncer in transaction pooling a
 * session's lock would stay with whichever server connection took it. */
#define PG_LOCK "SELECT pg_advisory_xact_lock(7261001)"

/* Applies, in version order, every embedded migration not recorded yet: a version merged
 * later with a lower number than one already applied still runs. On PostgreSQL each runs
 * under the lock and only if no other instance recorded it meanwhile. */
static bool apply_pending(db_conn *c, arena *a) {
  db_res *r;
  bool pg = db_engine_get() == DB_POSTGRES;
  if (db_exec(c, a, &r, "SELECT version FROM schema_migrations", DB_NOARGS) != DB_OK) return false;
  for (int i = 0; i < EMBEDDED_MIGRATION_COUNT; i++) {
    const migration *m = &EMBEDDED_MIGRATIONS[i];
    if (strcmp(m->engine, engine_name()) || applied(r, m->version)) continue;
    if (db_held_begin(c) != DB_OK) return false;
    db_res *done = NULL;
    bool ok = !pg || (db_script(c, PG_LOCK) == DB_OK &&
                      db_exec(c, a, &done, "SELECT 1 FROM schema_migrations WHERE version = $1",
                              DB_ARGS(DB_INT(m->version))) == DB_OK);
    if (ok && done && done->rows) { /* another instance applied it meanwhile */
      ok = db_held_commit(c) == DB_OK;
      if (!ok) return false;
      continue;
    }
    if (!ok || db_script(c, m->sql) != DB_OK ||
        db_exec(c, a, NULL, "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                DB_ARGS(DB_INT(m->version), DB_TEXT(m->name), DB_INT(clock_now_ms()))) != DB_OK ||
        db_held_commit(c) != DB_OK) {
      db_held_rollback(c);
      log_msg(LOG_ERROR, "migration %04d_%s failed", m->version, m->name);
      return false;
    }
    log_msg(LOG_INFO, "applied migration %04d_%s", m->version, m->name);
  }
  return true;
}

int db_migrations_latest(const char *engine) {
  int latest = 0;
  for (int i = 0; i < EMBEDDED_MIGRATION_COUNT; i++)
    if (!strcmp(EMBEDDED_MIGRATIONS[i].engine, engine) && EMBEDDED_MIGRATIONS[i].version > latest)
      latest = EMBEDDED_MIGRATIONS[i].version;
  return latest;
}

int db_migrations_pending(db_conn *c, arena *a) {
  db_res *r;
  if (db_exec(c, a, &r, "SELECT version FROM schema_migrations", DB_NOARGS) != DB_OK) return -1;
  int pending = 0;
  for (int i = 0; i < EMBEDDED_MIGRATION_COUNT; i++)
    pending += !strcmp(EMBEDDED_MIGRATIONS[i].engine, engine_name()) && !applied(r, EMBEDDED_MIGRATIONS[i].version);
  return pending;
}

bool db_migrate(void) {
  arena a;
  arena_init(&a);
  db_conn *c = db_acquire();
  bool pg = db_engine_get() == DB_POSTGRES;
  /* the lock comes first so two instances never race to create the bookkeeping table */
  bool ok = !pg || db_held_begin(c) == DB_OK;
  if (ok && pg) ok = db_script(c, PG_LOCK) == DB_OK;
  if (ok)
    ok = db_script(c, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                      "name TEXT NOT NULL, applied_at BIGINT NOT NULL)") == DB_OK;
  if (pg && db_in_tx(c)) {
    if (ok)
      ok = db_held_commit(c) == DB_OK;
    else
      db_held_rollback(c);
  }
  if (ok) ok = apply_pending(c, &a);
  db_release(c);
  arena_fini(&a);
  return ok;
}
