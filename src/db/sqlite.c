/* SQLite engine: WAL journal, foreign keys on, prepared statements cached per connection.
 * $1..$n are named parameters to SQLite, bound through sqlite3_bind_parameter_index().
 *
 * Reads run on the caller's own connection and never wait (WAL). Every write runs on one
 * connection of the process, the writer, whose users take turns: a transaction from BEGIN
 * IMMEDIATE to COMMIT or ROLLBACK, a writing statement outside a transaction on its own.
 * SQLite lets one writer in at a time anyway; funnelling the writes through one connection
 * keeps the pages they touch in one cache instead of re-reading them in each of a dozen, and
 * lets their commits be shared (group commit): each transaction runs in a SAVEPOINT of the
 * writer's transaction, and the last of the callers that queued meanwhile (or the 64th)
 * commits for all of them; each caller's COMMIT returns only once that commit has succeeded
 * or failed, so a change is acknowledged exactly when it is durable as before. A caller whose
 * transaction fails rolls back to its savepoint; the others' work stands. Before, SQLite's
 * busy handler polled (1, 2, 5 ... 100 ms sleeps) and writers queued hundreds of milliseconds
 * for a lock long free; then a mutex made them take turns with a commit each. The busy
 * timeout stays, for other processes (the CLI, an operator's sqlite3 shell).
 *
 * Outages. Both waits are bounded by DB_BUSY_TIMEOUT_MS: a caller that does not get its turn
 * on the writer, or a writer that does not get the file's write lock, in that time gives up
 * with DB_UNAVAILABLE, as does a write refused because the file is read-only, the disk is
 * full or the disk failed; nothing of that caller's was written then. When such a failure
 * ends the group's transaction (SQLite rolls a transaction back on a full disk or an I/O
 * error, and a failed COMMIT ends it), every member of the group still waiting for its
 * acknowledgement gets the same DB_UNAVAILABLE, and the statements of the member running
 * meanwhile fail with it too instead of running outside a transaction. Connections that
 * answer on the HTTP event threads do not wait for a lock at all (sq_no_wait): a read there
 * that finds the file locked returns DB_UNAVAILABLE at once and the server hands the
 * request to a worker, whose connection waits as any other. */
#include "core/config.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/util.h"
#include "db/engine.h"
#include "db/sqlite_vfs.h"
#include "db/stmt_cache.h"
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef struct sqlite_conn {
  sqlite3 *db;
  stmt_cache cache;
  bool member; /* this caller's transaction runs on the writer (between BEGIN and its end) */
} sqlite_conn;

#define GROUP_MAX 64

/* A caller that ended its transaction and waits for the commit of the group it joined. */
typedef struct group_member {
  struct group_member *next;
  bool done;
  db_rc rc;
} group_member;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t turn;      /* the writer is free */
  pthread_cond_t committed; /* a group's outcome is known */
  sqlite_conn *conn;        /* opened with the first transaction */
  char *path;
  int connections;     /* open connections of the pools: the writer closes with the last */
  bool busy;           /* a caller is running on the writer */
  int waiting;         /* callers waiting for their turn */
  bool open;           /* the group's transaction is open */
  int members;         /* callers in the open group */
  group_member *ended; /* those that ended and wait for its commit */
  db_rc failed;        /* why the group's transaction ended early (turn holder only) */
  bool watched_change; /* the group changed a row of a watched table (turn holder only) */
} writer = {.mu = PTHREAD_MUTEX_INITIALIZER, .turn = PTHREAD_COND_INITIALIZER, .committed = PTHREAD_COND_INITIALIZER};

/* Each connection's page cache, in KiB: without a bound each of the 14-odd connections filled
 * SQLite's default 2 MiB with the pages a long run of writes touched, and the process grew for
 * minutes (docs/performance-history.md, section 8, the soak). The bound is per connection, not
 * a soft heap limit for the process: that needs SQLite's memory accounting, whose one mutex
 * every allocation of every thread then takes (issue 36). */
#define SQLITE_CACHE_KIB 1024
#define STR_(x) #x
#define STR(x) STR_(x)

static sqlite_conn *open_conn(const char *path, char err[256]) {
  sqlite_conn *c = xcalloc(1, sizeof *c);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &c->db, flags, SQLITE_VFS_NAME) != SQLITE_OK) {
    snprintf(err, 256, "sqlite open %s: %s", path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_close(c->db);
    free(c);
    return NULL;
  }
  sqlite3_busy_timeout(c->db, CFG.db_busy_timeout_ms);
  char *msg = NULL;
  /* No mmap_size: in WAL mode every read transaction that follows another connection's commit
   * unmaps the whole mapping (sqlite3OsUnfetch), and the munmaps' TLB shootdowns cost about
   * what the preads they saved did (issue 37, docs/performance-history.md section 13). */
  if (sqlite3_exec(c->db,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                   "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-" STR(SQLITE_CACHE_KIB) ";",
                   NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(err, 256, "sqlite pragmas: %s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(c->db);
    free(c);
    return NULL;
  }
  return c;
}

/* Before SQLite's first use in the process: no memory accounting (see SQLITE_CACHE_KIB). */
static void configure_sqlite(void) {
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  sqlite_vfs_register();
}

static void *sq_connect(const char *path, char err[256]) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, configure_sqlite);
  sqlite_conn *c = open_conn(path, err);
  if (!c) return NULL;
  pthread_mutex_lock(&writer.mu);
  if (!writer.path) writer.path = xstrdup(path);
  writer.connections++;
  pthread_mutex_unlock(&writer.mu);
  return c;
}

static void finalize_stmt(void *s) { sqlite3_finalize(s); }

static void close_conn(sqlite_conn *c) {
  stmt_cache_clear(&c->cache, finalize_stmt);
  sqlite3_close(c->db);
  free(c);
}

static void sq_disconnect(void *h) {
  close_conn(h);
  pthread_mutex_lock(&writer.mu);
  if (--writer.connections == 0) {
    if (writer.conn) close_conn(writer.conn);
    writer.conn = NULL;
    free(writer.path);
    writer.path = NULL;
  }
  pthread_mutex_unlock(&writer.mu);
}

static db_rc map_error(sqlite_conn *c, int rc, const char *sql) {
  int primary = rc & 0xff;
  if (primary == SQLITE_CONSTRAINT) return DB_CONSTRAINT;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_READONLY || primary == SQLITE_FULL ||
      primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_PROTOCOL) {
    log_msg(LOG_WARN, "sqlite unavailable: %s (%d) in: %.120s", sqlite3_errmsg(c->db), rc, sql);
    return DB_UNAVAILABLE;
  }
  log_msg(LOG_ERROR, "sqlite: %s (%d) in: %.200s", sqlite3_errmsg(c->db), rc, sql);
  return DB_ERROR;
}

/* Whether the process logged the plan of the statement of this text already (a hash of it; a
 * full table logs the rest again, harmlessly): once per process, not once per connection. */
static bool plan_logged(const char *sql) {
  static uint64_t seen[4096];
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  uint64_t h = fnv1a(FNV1A_BASIS, sql) | 1; /* never 0, the empty slot */
  bool found = false;
  pthread_mutex_lock(&mu);
  for (size_t i = h % 4096, n = 0; n < 4096; i = (i + 1) % 4096, n++) {
    if (seen[i] == h) found = true;
    if (seen[i] == h || seen[i] == 0) {
      seen[i] = h;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return found;
}

/* Tests only (fault_plan_log): the statement's plan, its steps joined by " | ", a tab, then the
 * statement on one line, appended to the plan log in one write. */
static void log_plan(sqlite3 *db, const char *sql) {
  const char *path = fault_plan_log();
  if (!path || plan_logged(sql)) return;
  char *explain = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
  sqlite3_stmt *plan = NULL;
  if (explain && sqlite3_prepare_v2(db, explain, -1, &plan, NULL) == SQLITE_OK) {
    sqlite3_str *line = sqlite3_str_new(NULL);
    while (sqlite3_step(plan) == SQLITE_ROW) sqlite3_str_appendf(line, "%s | ", sqlite3_column_text(plan, 3));
    sqlite3_str_appendf(line, "\t%s\n", sql);
    int n = sqlite3_str_length(line);
    char *text = sqlite3_str_finish(line);
    for (int i = 0; text && i < n - 1; i++)
      if (text[i] == '\n') text[i] = ' ';
    FILE *f = text ? fopen(path, "a") : NULL;
    if (f) { /* a buffer that holds the line: one write, so connections preparing at once never
              * interleave their lines */
      setvbuf(f, NULL, _IOFBF, (size_t)n + 1);
      fwrite(text, 1, (size_t)n, f);
      fclose(f);
    }
    sqlite3_free(text);
  }
  sqlite3_finalize(plan);
  sqlite3_free(explain);
}

static sqlite3_stmt *prepare(sqlite_conn *c, const char *sql, int *rc) {
  stmt_entry *e = stmt_cache_find(&c->cache, sql);
  if (e) return e->stmt;
  sqlite3_stmt *st = NULL;
  *rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
  if (*rc != SQLITE_OK) return NULL;
  stmt_cache_add(&c->cache, sql)->stmt = st;
  log_plan(c->db, sql);
  return st;
}

static int bind_all(sqlite3_stmt *st, const db_val *params, int n) {
  /* the names of the first parameters written once: an snprintf per parameter was 2% of a read */
  static const char *const names[] = {"$1", "$2",  "$3",  "$4",  "$5",  "$6",  "$7",  "$8",
                                      "$9", "$10", "$11", "$12", "$13", "$14", "$15", "$16"};
  for (int i = 0; i < n; i++) {
    char more[16];
    const char *name = i < (int)(sizeof names / sizeof *names) ? names[i] : more;
    if (name == more) snprintf(more, sizeof more, "$%d", i + 1);
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

/* Runs one statement on c: binds, steps, builds the result. */
static db_rc run_on(sqlite_conn *c, const char *sql, const db_val *params, int n, db_res **out) {
  int rc = SQLITE_OK;
  sqlite3_stmt *st = prepare(c, sql, &rc);
  if (!st) return map_error(c, rc, sql);
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
  if (out && begun) {
    if (result == DB_OK)
      *out = res_finish(&b, sqlite3_changes(c->db));
    else
      res_abort(&b);
  }
  return result;
}

static db_rc run_plain(sqlite_conn *c, const char *sql) { return run_on(c, sql, NULL, 0, NULL); }

/* Runs one statement of the turn holder on the writer. A statement after a failure that ended
 * the group's transaction would run outside it: it fails the same way instead; the failure
 * that ended it is kept for the group's members. */
static db_rc group_failure(void) { return writer.failed != DB_OK ? writer.failed : DB_ERROR; }

static db_rc on_writer(const char *sql, const db_val *params, int n, db_res **out) {
  if (sqlite3_get_autocommit(writer.conn->db)) return group_failure();
  db_rc rc = run_on(writer.conn, sql, params, n, out);
  if (rc != DB_OK && sqlite3_get_autocommit(writer.conn->db))
    writer.failed = rc == DB_UNAVAILABLE ? DB_UNAVAILABLE : DB_ERROR;
  return rc;
}

/* Checkpoints off the writer's path. SQLite's automatic checkpoint runs inside the COMMIT that
 * crosses CHECKPOINT_FRAMES: it copies the WAL back into the database file and syncs it twice
 * while the writer's turn is held, and every writer queues behind it (POST /quotes spent a
 * tenth of its time in iowait). The writer's WAL hook replaces the automatic one and only marks
 * a checkpoint due; the caller whose commit saw it runs a PASSIVE checkpoint (it never waits
 * for readers or writers) on its own connection after giving the turn on, one at a time.
 * SQLite starts the WAL over only in a write transaction whose snapshot needed nothing from
 * it; with the next group begun before such a checkpoint ends, that never happened and the
 * WAL grew by 80 MB a second. So once a checkpoint has copied everything, the next group,
 * before its BEGIN, checkpoints on the writer what was committed since (a few frames): its
 * transaction then starts the WAL over. */
#define CHECKPOINT_FRAMES 1000
static _Atomic bool checkpoint_due, checkpointing, restart_due;

static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames) {
  (void)arg, (void)db, (void)name;
  if (frames >= CHECKPOINT_FRAMES) checkpoint_due = true;
  return SQLITE_OK;
}

static void checkpoint_if_due(sqlite_conn *self) {
  if (!checkpoint_due || atomic_exchange(&checkpointing, true)) return;
  checkpoint_due = false;
  int frames = 0, copied = 0;
  int rc = sqlite3_wal_checkpoint_v2(self->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    log_msg(LOG_WARN, "sqlite checkpoint: %s (%d)", sqlite3_errmsg(self->db), rc);
  if (rc == SQLITE_OK && copied == frames) restart_due = true;
  checkpointing = false;
}

/* The writer's update hook: a row of a watched table (db_watch_table) changed in the group. */
static void on_row_change(void *arg, int op, const char *db, const char *table, sqlite3_int64 rowid) {
  (void)arg, (void)op, (void)db, (void)rowid;
  if (!writer.watched_change && db_table_watched(table)) writer.watched_change = true;
}

/* The group's transaction ended (committed or not): the watched tables' generation moves, before
 * any member of the group is told, so a cache refuses what it kept from before as soon as a
 * change is acknowledged. Rolled-back changes move it too: harmless. */
static void group_ended(void) {
  if (!writer.watched_change) return;
  writer.watched_change = false;
  db_watch_moved();
}

/* Gives the writer to the next caller (under writer.mu). */
static void pass_turn(void) {
  writer.busy = false;
  pthread_cond_signal(&writer.turn);
}

/* Waits for the caller's turn on the writer, opens the group's transaction when none is open,
 * and the caller's savepoint. */
static db_rc join(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += CFG.db_busy_timeout_ms / 1000;
  until.tv_nsec += (CFG.db_busy_timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&writer.mu);
  writer.waiting++;
  while (writer.busy)
    if (pthread_cond_timedwait(&writer.turn, &writer.mu, &until) == ETIMEDOUT && writer.busy) {
      writer.waiting--;
      pthread_mutex_unlock(&writer.mu);
      log_msg(LOG_WARN, "sqlite unavailable: no write turn within %d ms", CFG.db_busy_timeout_ms);
      return DB_UNAVAILABLE;
    }
  writer.waiting--;
  writer.busy = true;
  bool open = writer.open;
  pthread_mutex_unlock(&writer.mu);
  if (!open) writer.failed = DB_OK;
  db_rc rc = DB_OK;
  if (!writer.conn) { /* the turn is ours: nobody else touches the writer meanwhile */
    char err[256];
    if (!(writer.conn = open_conn(writer.path, err))) {
      log_msg(LOG_ERROR, "%s", err);
      rc = DB_ERROR;
    } else {
      sqlite3_wal_hook(writer.conn->db, on_wal_commit, NULL);
      sqlite3_update_hook(writer.conn->db, on_row_change, NULL);
    }
  }
  if (rc == DB_OK && !open && atomic_exchange(&restart_due, false))
    sqlite3_wal_checkpoint_v2(writer.conn->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
  if (rc == DB_OK && !open) rc = run_plain(writer.conn, "BEGIN IMMEDIATE");
  if (rc == DB_OK) rc = run_plain(writer.conn, "SAVEPOINT member");
  pthread_mutex_lock(&writer.mu);
  if (rc == DB_OK) {
    writer.open = true;
    writer.members++;
  } else {
    if (writer.conn && writer.open && sqlite3_get_autocommit(writer.conn->db)) writer.open = false;
    pass_turn();
  }
  pthread_mutex_unlock(&writer.mu);
  return rc;
}

/* Ends the caller's part of the group: kept (ok) or rolled back. Then, when others are
 * waiting for their turn and the group has room, hands the writer on and waits for the
 * group's commit; otherwise commits for everyone who ended before. Returns the outcome of
 * the caller's change: DB_OK only once it is committed. */
static db_rc leave(sqlite_conn *self, bool ok) {
  sqlite_conn *w = writer.conn;
  db_rc rc = DB_OK;
  if (ok && (rc = on_writer("RELEASE member", NULL, 0, NULL)) != DB_OK) ok = false;
  bool aborted = sqlite3_get_autocommit(w->db); /* an error ended the whole transaction */
  if (!ok && !aborted) {
    run_plain(w, "ROLLBACK TO member");
    run_plain(w, "RELEASE member");
  }
  if (!ok && rc == DB_OK) rc = aborted ? group_failure() : DB_ERROR;
  pthread_mutex_lock(&writer.mu);
  if (aborted) writer.open = false;
  if (writer.open && writer.waiting > 0 && writer.members < GROUP_MAX) {
    pass_turn();
    if (!ok) { /* nothing of this caller's to wait for */
      pthread_mutex_unlock(&writer.mu);
      return rc;
    }
    group_member me = {.next = writer.ended};
    writer.ended = &me;
    while (!me.done) pthread_cond_wait(&writer.committed, &writer.mu);
    pthread_mutex_unlock(&writer.mu);
    return me.rc;
  }
  bool commit = writer.open, lost = aborted && writer.ended; /* the ended callers' work went with it */
  pthread_mutex_unlock(&writer.mu);
  db_rc committed = commit ? run_plain(w, "COMMIT") : lost ? group_failure() : DB_OK;
  if (commit && committed != DB_OK && !sqlite3_get_autocommit(w->db)) run_plain(w, "ROLLBACK");
  group_ended();
  pthread_mutex_lock(&writer.mu);
  for (group_member *m = writer.ended; m; m = m->next) m->done = true, m->rc = committed;
  writer.ended = NULL;
  writer.open = false;
  writer.members = 0;
  pthread_cond_broadcast(&writer.committed);
  pass_turn();
  pthread_mutex_unlock(&writer.mu);
  if (commit && committed == DB_OK) checkpoint_if_due(self);
  return ok ? committed : rc;
}

static db_rc sq_exec(void *h, const char *sql, const db_val *params, int n, db_res **out) {
  sqlite_conn *c = h;
  if (!strcmp(sql, "BEGIN IMMEDIATE")) {
    if (c->member) return DB_ERROR;
    db_rc rc = join();
    c->member = rc == DB_OK;
    return rc;
  }
  if (c->member) {
    if (!strcmp(sql, "COMMIT")) return c->member = false, leave(c, true);
    if (!strcmp(sql, "ROLLBACK")) return c->member = false, leave(c, false), DB_OK;
    return on_writer(sql, params, n, out);
  }
  if (!strcmp(sql, "COMMIT") || !strcmp(sql, "ROLLBACK")) return DB_OK; /* ended already (a failed COMMIT) */
  /* outside a transaction: a read runs here, a write as a transaction of its own */
  int rc = SQLITE_OK;
  sqlite3_stmt *st = prepare(c, sql, &rc);
  if (!st) return map_error(c, rc, sql);
  /* VACUUM INTO (a backup) only reads this database, in a read transaction of its own, and
   * writes another file: it runs on the caller's connection, never holding up the writers */
  if (sqlite3_stmt_readonly(st) || !strncmp(sql, "VACUUM INTO ", 12)) return run_on(c, sql, params, n, out);
  db_rc result = join();
  if (result != DB_OK) return result;
  result = on_writer(sql, params, n, out);
  db_rc done = leave(c, result == DB_OK);
  return result != DB_OK ? result : done;
}

/* A plain read: a SELECT (or WITH ... SELECT) that writes nothing. sqlite3_stmt_readonly alone
 * is true of BEGIN and COMMIT too. */
static bool plain_read(sqlite3_stmt *st, const char *sql) {
  while (*sql == ' ' || *sql == '\n') sql++;
  return sqlite3_stmt_readonly(st) && (!strncasecmp(sql, "SELECT", 6) || !strncasecmp(sql, "WITH", 4));
}

/* The token's check and the request's first read in one read transaction (engine_ops.guard_read):
 * one WAL read lock instead of two; each costs a mutex every connection of the process takes,
 * and under load the threads queue on it (issue 36, docs/performance.md). */
static db_rc sq_guard_read(void *h, db_stmt *s, int n) {
  sqlite_conn *c = h;
  int rc = SQLITE_OK;
  sqlite3_stmt *st = n == 2 && !c->member ? prepare(c, s[1].sql, &rc) : NULL;
  if (!st || !plain_read(st, s[1].sql) || !sqlite3_get_autocommit(c->db)) {
    s[0].rc = s[1].rc = DB_SKIPPED;
    return DB_SKIPPED;
  }
  db_rc out = run_plain(c, "BEGIN");
  if (out != DB_OK) {
    s[0].rc = s[1].rc = DB_SKIPPED;
    return out;
  }
  db_res *found = NULL;
  out = s[0].rc = run_on(c, s[0].sql, s[0].params, s[0].n, &found);
  s[1].rc = DB_SKIPPED;
  if (out == DB_OK && found->rows == 0) out = s[0].rc = DB_REFUSED;
  db_res_free(found);
  if (out == DB_OK) out = s[1].rc = run_on(c, s[1].sql, s[1].params, s[1].n, s[1].want ? &s[1].res : NULL);
  if (!sqlite3_get_autocommit(c->db) && run_plain(c, "COMMIT") != DB_OK) run_plain(c, "ROLLBACK");
  return out;
}

static db_rc sq_read_snapshot(void *h, bool begin) {
  sqlite_conn *c = h;
  if (begin) return c->member || !sqlite3_get_autocommit(c->db) ? DB_SKIPPED : run_plain(c, "BEGIN");
  if (!sqlite3_get_autocommit(c->db) && run_plain(c, "COMMIT") != DB_OK) run_plain(c, "ROLLBACK");
  return DB_OK;
}

static db_rc script_on(sqlite_conn *c, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    log_msg(LOG_ERROR, "sqlite script: %s", msg ? msg : "?");
    sqlite3_free(msg);
    return DB_ERROR;
  }
  return DB_OK;
}

/* Scripts (migrations) write: on the writer, in the caller's transaction or one of their own. */
static db_rc sq_script(void *h, const char *sql) {
  sqlite_conn *c = h;
  if (c->member) return script_on(writer.conn, sql);
  db_rc rc = join();
  if (rc != DB_OK) return rc;
  rc = script_on(writer.conn, sql);
  db_rc done = leave(c, rc == DB_OK);
  return rc != DB_OK ? rc : done;
}

static void sq_no_wait(void *h) { sqlite3_busy_timeout(((sqlite_conn *)h)->db, 0); }

const engine_ops sqlite_engine_ops = {
    ENGINE_OPS(sq),
    .no_wait = sq_no_wait,
    .guard_read = sq_guard_read,
    .read_snapshot = sq_read_snapshot,
    .begin_sql = "BEGIN IMMEDIATE",
    .sees_every_write = true, /* only this process writes (the CLI writes no watched table) */
};
