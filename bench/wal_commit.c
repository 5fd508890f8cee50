/* What a commit costs on the service's VFS against the unix VFS (src/db/sqlite_vfs.c, issue 37):
 * one connection as the service opens one (WAL, synchronous=NORMAL, checkpoints at SQLite's
 * 1,000 frames) commits COMMITS transactions of PAGES rows of 3,000 bytes each (a page a row, and
 * an index's pages), alternating the two VFSs over ROUNDS rounds on a fresh file each; printed:
 * CPU time (user + system) and pwrite64 calls per commit.
 *   make build/wal_commit && build/wal_commit [PAGES...]   (default: 5 25; COMMITS, ROUNDS, DIR)
 */
#include "db/sqlite_vfs.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

static sqlite3_syscall_ptr real_pwrite;
static long pwrites;

static ssize_t counted_pwrite(int fd, const void *buf, size_t n, off_t off) {
  pwrites++;
  return ((ssize_t(*)(int, const void *, size_t, off_t))real_pwrite)(fd, buf, n, off);
}

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* Removes the database at path and its WAL files. */
static void remove_db(const char *path) {
  char side[530];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", path), unlink(side);
}

static void run(const char *dir, const char *vfs, int pages, int commits) {
  char path[512], sql[400];
  snprintf(path, sizeof path, "%s/wal-commit-%d.db", dir, (int)getpid());
  remove_db(path);
  sqlite3 *db;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) != SQLITE_OK ||
      sqlite3_exec(db,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                   "CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, v BLOB); CREATE INDEX t_k ON t (k)",
                   NULL, NULL, NULL) != SQLITE_OK) {
    fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    exit(1);
  }
  snprintf(sql, sizeof sql,
           "INSERT INTO t (k, v) SELECT abs(random()) %% 1000000, randomblob(3000) FROM (WITH RECURSIVE n(i) AS "
           "(SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d) SELECT i FROM n)",
           pages);
  double start = cpu_seconds();
  pwrites = 0;
  for (int i = 0; i < commits; i++)
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
      fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db));
      exit(1);
    }
  double spent = cpu_seconds() - start;
  printf("%-12s %3d rows a commit: %7.1f us CPU, %5.1f pwrite64 a commit\n", vfs ? vfs : "unix", pages,
         spent / commits * 1e6, (double)pwrites / commits);
  sqlite3_close(db);
  remove_db(path);
}

int main(int argc, char **argv) {
  const char *dir = getenv("DIR") ? getenv("DIR") : "/tmp";
  int commits = getenv("COMMITS") ? atoi(getenv("COMMITS")) : 3000;
  int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 4;
  sqlite_vfs_register();
  sqlite3_vfs *unix_vfs = sqlite3_vfs_find("unix");
  real_pwrite = unix_vfs->xGetSystemCall(unix_vfs, "pwrite64");
  unix_vfs->xSetSystemCall(unix_vfs, "pwrite64", (sqlite3_syscall_ptr)counted_pwrite);
  static char *defaults[] = {"5", "25"};
  char **sizes = argc > 1 ? argv + 1 : defaults;
  int nsizes = argc > 1 ? argc - 1 : 2;
  for (int s = 0; s < nsizes; s++)
    for (int r = 0; r < rounds; r++) run(dir, r % 2 ? NULL : SQLITE_VFS_NAME, atoi(sizes[s]), commits);
  return 0;
}
