/* A private SQLite database for a unit test: a fresh file under /tmp named after the test and
 * the process, opened as the service's pools (or by the test itself: unit_db_name), and removed
 * with its WAL files; and a count on whichever database is open. Header-only, as each unit test
 * is one file; include it after cmocka.h. */
#ifndef TESTS_UNIT_UNIT_DB_H
#define TESTS_UNIT_UNIT_DB_H
#include "core/config.h"
#include "db/db.h"
#include <stdio.h>
#include <unistd.h>

static char unit_db_path[64];

/* Removes the database's file and its WAL files. */
static inline void unit_db_remove(void) {
  char side[80];
  unlink(unit_db_path);
  snprintf(side, sizeof side, "%s-wal", unit_db_path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", unit_db_path), unlink(side);
}

/* Names the database /tmp/mp-unit-<name>-<pid>.db (unit_db_path), with no file there yet. */
static inline void unit_db_name(const char *name) {
  snprintf(unit_db_path, sizeof unit_db_path, "/tmp/mp-unit-%s-%d.db", name, (int)getpid());
  unit_db_remove();
}

/* Opens unit_db_name(name), new, with pool_size request connections and slow_size for the slow
 * pool; fails the test when it cannot. */
static inline void unit_db_open_pools(const char *name, int pool_size, int slow_size) {
  unit_db_name(name);
  CFG.http_threads = 1;
  CFG.db_busy_timeout_ms = 5000;
  char url[80], err[256];
  snprintf(url, sizeof url, "sqlite:%s", unit_db_path);
  if (!db_open(url, pool_size, slow_size, err)) fail_msg("%s", err);
}

/* unit_db_open_pools with one slow connection. */
static inline void unit_db_open(const char *name, int pool_size) { unit_db_open_pools(name, pool_size, 1); }

/* Closes the pools and removes the files. */
static inline void unit_db_close(void) {
  db_close();
  unit_db_remove();
}

/* The count that sql (a SELECT count(*) with one text parameter, $1 = arg) answers on the open
 * database; fails the test when the query does. */
static inline int64_t unit_db_count(const char *sql, const char *arg) {
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, &r, sql, DB_ARGS(DB_TEXT(arg))), DB_OK);
  int64_t n = db_int(r, 0, 0);
  arena_fini(&a);
  return n;
}

#endif
