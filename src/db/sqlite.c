/* SQLite engine: WAL journal, foreign keys on, prepared statements cached per connection.
 * $1..$n are named parameters to SQLite, bound through sqlite3_bind_parameter_index().
 *
 * Writers take turns on a mutex of this process: from BEGIN IMMEDIATE to COMMIT or
 * ROLLBACK, and around each writing statement outside a transaction. SQLite's own busy
 * handler would also make them queue, but it polls, sleeping 1, 2, 5, 10 ... 100 ms between
 * tries: under concurrent writes (POST /quotes at 64 connections) requests waited hundreds
 * of milliseconds for a lock that had long been free. The busy timeout stays, for other
 * processes (the CLI, an operator's sqlite3 shell). Reads never wait (WAL). */
#include "core/log.h"
#include "core/util.h"
#include "db/engine.h"
#include "db/stmt_cache.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sqlite_conn {
  sqlite3 *db;
  stmt_cache cache;
  bool writing; /* holds `writer` */
} sqlite_conn;

static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;

static void writer_take(sqlite_conn *c) {
  if (c->writing) return;
  pthread_mutex_lock(&writer);
  c->writing = true;
}

static void writer_give(sqlite_conn *c) {
  if (!c->writing) return;
  c->writing = false;
  pthread_mutex_unlock(&writer);
}

/* All connections' page caches together stay near this size: without a bound each of the
 * 14-odd connections filled its own 2 MiB cache with the pages a long run of writes touched,
 * and the process grew for minutes (docs/performance.md, the soak). SQLite recycles cached
 * pages instead of allocating more once the total passes it. */
#define SQLITE_HEAP_SOFT_LIMIT (16LL * 1024 * 1024)

static void *sq_connect(const char *path, char err[256]) {
  sqlite3_soft_heap_limit64(SQLITE_HEAP_SOFT_LIMIT);
  sqlite_conn *c = xcalloc(1, sizeof *c);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &c->db, flags, NULL) != SQLITE_OK) {
    snprintf(err, 256, "sqlite open %s: %s", path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_close(c->db);
    free(c);
    return NULL;
  }
  sqlite3_busy_timeout(c->db, 10000);
  char *msg = NULL;
  if (sqlite3_exec(c->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", NULL, NULL,
                   &msg) != SQLITE_OK) {
    snprintf(err, 256, "sqlite pragmas: %s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(c->db);
    free(c);
    return NULL;
  }
  return c;
}

static void finalize_stmt(void *s) { sqlite3_finalize(s); }

static void sq_disconnect(void *h) {
  sqlite_conn *c = h;
  writer_give(c);
  stmt_cache_clear(&c->cache, finalize_stmt);
  sqlite3_close(c->db);
  free(c);
}

static db_rc map_error(sqlite_conn *c, int rc, const char *sql) {
  if ((rc & 0xff) == SQLITE_CONSTRAINT) return DB_CONSTRAINT;
  log_msg(LOG_ERROR, "sqlite: %s (%d) in: %.200s", sqlite3_errmsg(c->db), rc, sql);
  return DB_ERROR;
}

static sqlite3_stmt *prepare(sqlite_conn *c, const char *sql, int *rc) {
  stmt_entry *e = stmt_cache_find(&c->cache, sql);
  if (e) return e->stmt;
  sqlite3_stmt *st = NULL;
  *rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
  if (*rc != SQLITE_OK) return NULL;
  stmt_cache_add(&c->cache, sql)->stmt = st;
  return st;
}

static int bind_all(sqlite3_stmt *st, const db_val *params, int n) {
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "$%d", i + 1);
    int idx = sqlite3_bind_parameter_index(st, name);
    if (idx == 0) continue; /* the statement does not use this parameter */
    int rc;
    switch (params[i].type) {
    case DBV_TEXT: rc = sqlite3_bind_text(st, idx, params[i].s, -1, SQLITE_STATIC); break;
    case DBV_INT: rc = sqlite3_bind_int64(st, idx, params[i].i); break;
    case DBV_REAL: rc = sqlite3_bind_double(st, idx, params[i].d); break;
    default: rc = sqlite3_bind_null(st, idx); break;
    }
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static db_rc sq_exec(void *h, const char *sql, const db_val *params, int n, db_res **out) {
  sqlite_conn *c = h;
  int rc = SQLITE_OK;
  sqlite3_stmt *st = prepare(c, sql, &rc);
  if (!st) return map_error(c, rc, sql);
  if (!strcmp(sql, "BEGIN IMMEDIATE") || (sqlite3_get_autocommit(c->db) && !sqlite3_stmt_readonly(st))) writer_take(c);
  db_rc result = DB_OK;
  res_builder b;
  int cols = 0;
  bool begun = false;
  if ((rc = bind_all(st, params, n)) != SQLITE_OK) {
    result = map_error(c, rc, sql);
    goto out;
  }
  for (;;) {
    rc = sqlite3_step(st);
    /* the columns are read after the first step: a statement prepared before a schema change
     * (another connection's migration) is prepared again by it, and `*` may then name more */
    if (out && !begun && (rc == SQLITE_ROW || rc == SQLITE_DONE)) {
      cols = sqlite3_column_count(st);
      const char *small[64], **names = cols <= 64 ? small : xmalloc(sizeof *names * (size_t)cols);
      for (int i = 0; i < cols; i++) names[i] = sqlite3_column_name(st, i);
      res_begin(&b, cols, names);
      if (names != small) free(names);
      begun = true;
    }
    if (rc != SQLITE_ROW) break;
    if (!out) continue;
    for (int i = 0; i < cols; i++) {
      if (sqlite3_column_type(st, i) == SQLITE_INTEGER) { /* formatted here, and kept as a number */
        res_cell_int(&b, sqlite3_column_int64(st, i));
        continue;
      }
      const unsigned char *t = sqlite3_column_text(st, i);
      res_cell(&b, (const char *)t, t ? (size_t)sqlite3_column_bytes(st, i) : 0);
    }
  }
  if (rc != SQLITE_DONE) result = map_error(c, rc, sql);
out:
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  /* the turn ends when no transaction is open: after a single write, COMMIT, ROLLBACK or a
   * BEGIN that failed (a COMMIT that failed leaves it open until the ROLLBACK) */
  if (sqlite3_get_autocommit(c->db)) writer_give(c);
  if (out && begun) {
    if (result == DB_OK)
      *out = res_finish(&b, sqlite3_changes(c->db));
    else
      res_abort(&b);
  }
  return result;
}

static db_rc sq_script(void *h, const char *sql) {
  sqlite_conn *c = h;
  char *msg = NULL;
  if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    log_msg(LOG_ERROR, "sqlite script: %s", msg ? msg : "?");
    sqlite3_free(msg);
    return DB_ERROR;
  }
  return DB_OK;
}

const engine_ops sqlite_engine_ops = {
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .exec = sq_exec,
    .script = sq_script,
    .begin_sql = "BEGIN IMMEDIATE",
};
