/* Unit tests for src/db/sqlite_vfs.c, the VFS that writes a commit's WAL frames together: a
 * commit of many pages is one write where the unix VFS makes two a page, and another connection
 * reads it at once; a large transaction, one rolled back after its frames spilled, another
 * connection's commits on the plain unix VFS in between, and a process killed between commits
 * all leave the database whole, with every acknowledged commit in it. The unix VFS's pwrite64
 * is counted through its own hook for tests (xSetSystemCall). */
#include "db/sqlite_vfs.h"
#include "unit.h"
#include "unit_db.h"
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static sqlite3_syscall_ptr real_pwrite;
static int pwrites;

static ssize_t counted_pwrite(int fd, const void *buf, size_t n, off_t off) {
  pwrites++;
  return ((ssize_t(*)(int, const void *, size_t, off_t))real_pwrite)(fd, buf, n, off);
}

static int setup(void **state) {
  (void)state;
  unit_db_name("vfs");
  assert_string_equal(sqlite_vfs_register(), SQLITE_VFS_NAME);
  sqlite3_vfs *unix_vfs = sqlite3_vfs_find("unix");
  real_pwrite = unix_vfs->xGetSystemCall(unix_vfs, "pwrite64");
  assert_non_null(real_pwrite);
  assert_int_equal(unix_vfs->xSetSystemCall(unix_vfs, "pwrite64", (sqlite3_syscall_ptr)counted_pwrite), SQLITE_OK);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sqlite3_vfs *unix_vfs = sqlite3_vfs_find("unix");
  unix_vfs->xSetSystemCall(unix_vfs, "pwrite64", real_pwrite);
  unit_db_remove();
  return 0;
}

static void exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) fail_msg("%s: %s", sql, msg ? msg : "?");
}

static int64_t number(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

/* A connection as the service opens one (vfs NULL: the plain unix VFS), the WAL checkpointed
 * only when asked, so that a commit's writes are its frames alone. */
static sqlite3 *open_db(const char *vfs) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(unit_db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs), SQLITE_OK);
  exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0");
  return db;
}

static void check_whole(sqlite3 *db) {
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
}

/* 20 rows of 3,000 bytes, each on a page of its own: the commit's frames */
#define INSERT_20                                                                                                      \
  "INSERT INTO t (v) SELECT randomblob(3000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "    \
  "WHERE i < 20) SELECT i FROM n)"

static int commit_writes(sqlite3 *db) {
  exec(db, "BEGIN IMMEDIATE");
  exec(db, INSERT_20);
  pwrites = 0;
  exec(db, "COMMIT");
  return pwrites;
}

static void test_a_commit_is_one_write_and_read_at_once(void **state) {
  (void)state;
  sqlite3 *db = open_db(SQLITE_VFS_NAME), *reader = open_db(SQLITE_VFS_NAME), *plain = open_db(NULL);
  exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
  assert_int_equal(commit_writes(db), 1);
  assert_int_equal(number(reader, "SELECT count(*) FROM t"), 20);
  assert_int_equal(number(plain, "SELECT count(*) FROM t"), 20);
  /* the unix VFS alone: a header and a page, each a write, for each of the 20-odd frames */
  assert_true(commit_writes(plain) >= 40);
  assert_int_equal(commit_writes(db), 1);
  assert_int_equal(number(reader, "SELECT count(*) FROM t"), 60);
  check_whole(reader);
  sqlite3_close(plain);
  sqlite3_close(reader);
  sqlite3_close(db);
  unit_db_remove();
}

/* A transaction larger than the page cache spills frames before its commit, past the buffer's
 * bound; another is rolled back after spilling; a connection on the unix VFS commits in between
 * and then checkpoints: every committed row is there, none of the rolled-back ones. */
static void test_spills_rollbacks_and_other_writers(void **state) {
  (void)state;
  sqlite3 *db = open_db(SQLITE_VFS_NAME), *plain = open_db(NULL);
  exec(db, "PRAGMA cache_size=10; CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
  exec(db, "BEGIN IMMEDIATE");
  for (int i = 0; i < 30; i++) exec(db, INSERT_20); /* 600 pages, 2.4 MB of frames */
  exec(db, "COMMIT");
  assert_int_equal(number(plain, "SELECT count(*) FROM t"), 600);
  exec(db, "BEGIN IMMEDIATE");
  for (int i = 0; i < 5; i++) exec(db, INSERT_20);
  exec(db, "ROLLBACK");
  exec(plain, INSERT_20);
  assert_int_equal(number(db, "SELECT count(*) FROM t"), 620);
  exec(db, INSERT_20);
  assert_int_equal(number(plain, "SELECT count(*) FROM t"), 640);
  exec(plain, "PRAGMA wal_checkpoint(TRUNCATE)");
  exec(db, INSERT_20);
  assert_int_equal(number(plain, "SELECT count(*) FROM t"), 660);
  check_whole(plain);
  sqlite3_close(plain);
  sqlite3_close(db);
  unit_db_remove();
}

/* A child commits until it is killed; every commit it reported is in the database after. */
static void test_a_process_killed_between_commits_loses_nothing_acknowledged(void **state) {
  (void)state;
  sqlite3 *db = open_db(SQLITE_VFS_NAME);
  exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
  sqlite3_close(db);
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(pipefd[0]);
    sqlite3 *c = open_db(SQLITE_VFS_NAME);
    for (int i = 1;; i++) {
      exec(c, INSERT_20);
      if (write(pipefd[1], &i, sizeof i) != sizeof i) _exit(1);
    }
  }
  close(pipefd[1]);
  int acknowledged = 0, n;
  while (acknowledged < 200 && read(pipefd[0], &n, sizeof n) == sizeof n) acknowledged = n;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  while (read(pipefd[0], &n, sizeof n) == sizeof n) acknowledged = n;
  close(pipefd[0]);
  db = open_db(SQLITE_VFS_NAME);
  int64_t rows = number(db, "SELECT count(*) FROM t");
  assert_true(rows >= (int64_t)acknowledged * 20 && rows <= ((int64_t)acknowledged + 1) * 20);
  assert_int_equal(rows % 20, 0);
  check_whole(db);
  sqlite3_close(db);
  unit_db_remove();
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_a_commit_is_one_write_and_read_at_once),
          cmocka_unit_test(test_spills_rollbacks_and_other_writers),
          cmocka_unit_test(test_a_process_killed_between_commits_loses_nothing_acknowledged))
