/* A private SQLite database for a unit test: a fresh file under /tmp named after the test and
 * the process, opened as the service's pools, and removed with its WAL files. Header-only, as
 * each unit test is one file; include it after cmocka.h. */
#ifndef TESTS_UNIT_UNIT_DB_H
#define TESTS_UNIT_UNIT_DB_H
#include "core/config.h"
#include "db/db.h"
#include <stdio.h>
#include <unistd.h>

static char unit_db_path[64];

/* Opens /tmp/mp-unit-<name>-<pid>.db, new, with pool_size request connections (and one for
 * the slow pool); fails the test when it cannot. */
static inline void unit_db_open(const char *name, int pool_size) {
  snprintf(unit_db_path, sizeof unit_db_path, "/tmp/mp-unit-%s-%d.db", name, (int)getpid());
  unlink(unit_db_path);
  CFG.http_threads = 1;
  CFG.db_busy_timeout_ms = 5000;
  char url[80], err[256];
  snprintf(url, sizeof url, "sqlite:%s", unit_db_path);
  if (!db_open(url, pool_size, 1, err)) fail_msg("%s", err);
}

/* Closes the pools and removes the files. */
static inline void unit_db_close(void) {
  db_close();
  char side[80];
  unlink(unit_db_path);
  snprintf(side, sizeof side, "%s-wal", unit_db_path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", unit_db_path), unlink(side);
}

#endif
