/* PostgreSQL engine over libpq. Every exchange is one pipeline (libpq's pipeline mode): the
 * statements of a batch (db.c sends a transaction's BEGIN, its deferred statements and the
 * statement that needs an answer together, and a request's token guard before them) go out
 * at once, followed by one Sync, so a batch costs one network round trip; a failure skips what
 * follows it in the batch, as the server does. Statements are prepared once per connection
 * (named s<N>, the preparation sent in the same pipeline as the first execution), keyed by SQL
 * text plus parameter types: integer parameters are declared int8 and reals float8 so
 * expressions such as `$2 - $3` resolve; text is left for the server to infer. With
 * PG_PREPARED_STATEMENTS=0 (PgBouncer in transaction pooling before 1.21, where a prepared
 * statement may not exist on the next transaction's server connection) every statement is the
 * unnamed one, parsed with each execution.
 *
 * Nothing here waits without a deadline. Connections are made with libpq's non-blocking
 * calls under our own deadline (libpq's connect_timeout is whole seconds, at least two, and
 * only for its blocking calls), with TCP keepalives so the kernel notices a dead peer.
 * Statements are sent without blocking and their answer is awaited with poll(): when no byte
 * has come back for STALL_MS, the waiting thread asks whether the server still accepts a new
 * connection (one probe per second for the whole process, shared by every waiting thread); a
 * server that does answers is only slow (a lock wait, a long query) and the wait goes on; one
 * that does not is unreachable, and the connection is given up (DB_DOWN). When the server
 * restarts, the next batch finds the connection broken, reconnects, forgets its prepared
 * statements and, outside a transaction and unless it held a COMMIT, runs once more.
 *
 * A listener (db_listen_open) is one more connection, outside the pools, that only LISTENs: its
 * waits poll the socket, and a connection lost is made again on the next wait, which then
 * tells the caller that notifications may have been missed. */
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "db/engine.h"
#include "db/stmt_cache.h"
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INT8OID 20
#define FLOAT8OID 701
#define MAX_PARAMS 64
#define CONNECT_MS 1500 /* a reconnect (start-up allows START_CONNECT_MS) */
#define START_CONNECT_MS 10000
#define STALL_MS 600 /* no answer for this long: is the server still there? */
#define PROBE_MS 900

typedef struct pg_conn {
  PGconn *pg; /* NULL once given up: the next statement reconnects */
  stmt_cache cache;
  int next_name; /* the next prepared statement is s<next_name> */
  char *url;
} pg_conn;

static void pq_clear(void *r) { PQclear(r); }

static void notice_quiet(void *arg, const char *message) { (void)arg, (void)message; }

/* Connects within timeout_ms; NULL with a message in err (which never holds the URL). */
static PGconn *connect_within(const char *url, int timeout_ms, char err[256]) {
  /* our defaults first: what the URL says overrides them */
  static const char *const keys[] = {"keepalives",
                                     "keepalives_idle",
                                     "keepalives_interval",
                                     "keepalives_count",
                                     "tcp_user_timeout",
                                     "application_name",
                                     "dbname",
                                     NULL};
  const char *values[] = {"1", "10", "3", "3", "10000", "marketplace", url, NULL};
  PGconn *pg = PQconnectStartParams(keys, values, 1);
  int64_t deadline = clock_mono_ms() + timeout_ms;
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (pg && PQstatus(pg) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
    int64_t left = deadline - clock_mono_ms();
    struct pollfd p = {.fd = PQsocket(pg), .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
    int n = left > 0 ? poll(&p, 1, (int)left) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      snprintf(err, 256, "postgres connect: no answer within %d ms", timeout_ms);
      PQfinish(pg);
      return NULL;
    }
    st = PQconnectPoll(pg);
  }
  if (!pg || PQstatus(pg) != CONNECTION_OK) {
    snprintf(err, 256, "postgres connect: %s", pg ? PQerrorMessage(pg) : "out of memory");
    err[strcspn(err, "\n")] = 0;
    PQfinish(pg);
    return NULL;
  }
  PQsetNoticeProcessor(pg, notice_quiet, NULL);
  if (PQsetnonblocking(pg, 1) != 0) {
    snprintf(err, 256, "postgres connect: cannot make the connection non-blocking");
    PQfinish(pg);
    return NULL;
  }
  return pg;
}

static void *pg_connect(const char *url, char err[256]) {
  PGconn *pg = connect_within(url, START_CONNECT_MS, err);
  if (!pg) return NULL;
  pg_conn *c = xcalloc(1, sizeof *c);
  c->pg = pg;
  c->url = xstrdup(url);
  return c;
}

static void give_up(pg_conn *c) {
  stmt_cache_clear(&c->cache, NULL);
  c->next_name = 0;
  PQfinish(c->pg);
  c->pg = NULL;
}

static void pg_disconnect(void *h) {
  pg_conn *c = h;
  give_up(c);
  free(c->url);
  free(c);
}

/* A connection to use: the current one, or a new one when it was lost. False when the server
 * cannot be reached. */
static bool usable(pg_conn *c) {
  if (c->pg && PQstatus(c->pg) == CONNECTION_OK) return true;
  bool lost = c->pg != NULL;
  give_up(c);
  char err[256];
  c->pg = connect_within(c->url, CONNECT_MS, err);
  if (lost || !c->pg)
    log_msg(c->pg ? LOG_WARN : LOG_ERROR, "postgres connection lost; reconnect %s%s%s", c->pg ? "succeeded" : "failed",
            c->pg ? "" : ": ", c->pg ? "" : err);
  return c->pg != NULL;
}

/* Whether the server accepts a new connection, asked at most once per PROBE_MS for the whole
 * process (threads that ask meanwhile wait for the answer in progress and share it). */
static bool server_answers(const char *url) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static int64_t asked_at = INT64_MIN / 2;
  static bool answered;
  pthread_mutex_lock(&mu);
  if (clock_mono_ms() - asked_at >= PROBE_MS) {
    char err[256];
    PGconn *probe = connect_within(url, PROBE_MS, err);
    answered = probe != NULL;
    PQfinish(probe);
    asked_at = clock_mono_ms();
    if (!answered) log_msg(LOG_ERROR, "postgres does not answer: %s", err);
  }
  bool yes = answered;
  pthread_mutex_unlock(&mu);
  return yes;
}

/* Waits until the connection is not busy. False when it broke, or when the server stopped
 * answering or the thread's deadline passed (*stalled). */
static bool await_idle(pg_conn *c, bool *stalled) {
  int64_t last = clock_mono_ms();
  for (;;) {
    int flushing = PQflush(c->pg);
    if (flushing < 0) return false;
    if (!flushing) {
      if (!PQconsumeInput(c->pg)) return false;
      if (!PQisBusy(c->pg)) return true;
    }
    int64_t now = clock_mono_ms(), wait = STALL_MS - (now - last);
    if (db_deadline_ms && now >= db_deadline_ms) return *stalled = true, false;
    if (wait <= 0) {
      if (!server_answers(c->url)) return *stalled = true, false;
      last = clock_mono_ms();
      continue;
    }
    if (db_deadline_ms && db_deadline_ms - now < wait) wait = db_deadline_ms - now;
    struct pollfd p = {.fd = PQsocket(c->pg), .events = (short)(POLLIN | (flushing ? POLLOUT : 0))};
    int n = poll(&p, 1, (int)wait);
    if (n < 0 && errno != EINTR) return false;
    if (n > 0) last = clock_mono_ms();
  }
}

/* Reads the results of the command being read up to libpq's NULL and returns one: the first,
 * except that outside a pipeline an error replaces what was kept (a plain command reports its
 * error rather than a success). In a pipeline the batch's sync result (the batch ended early) is
 * returned at once. NULL when the connection broke or stalled. */
static PGresult *read_results(pg_conn *c, bool *stalled, bool pipeline) {
  PGresult *keep = NULL;
  for (;;) {
    if (!await_idle(c, stalled)) {
      PQclear(keep);
      return NULL;
    }
    PGresult *r = PQgetResult(c->pg);
    if (!r) return keep;
    ExecStatusType st = PQresultStatus(r);
    if (pipeline && st == PGRES_PIPELINE_SYNC) { /* not a command's: the batch ended early */
      PQclear(keep);
      return r;
    }
    bool failed = !pipeline && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
    if (keep && !failed)
      PQclear(r);
    else
      PQclear(keep), keep = r;
  }
}

/* The result of a plain command just sent. */
static PGresult *await_result(pg_conn *c, bool *stalled) { return read_results(c, stalled, false); }

/* SQLSTATE classes that mean "not now" rather than "wrong": connection exceptions (08),
 * insufficient resources such as a full disk (53), operator intervention and shutdowns
 * (57P01-57P03), a cancelled statement (57014), a read-only server (25006), I/O errors (58). */
static bool unavailable_state(const char *s) {
  return s && (!strncmp(s, "08", 2) || !strncmp(s, "53", 2) || !strncmp(s, "58", 2) || !strncmp(s, "57P0", 4) ||
               !strcmp(s, "57014") || !strcmp(s, "25006"));
}

static db_rc map_result(pg_conn *c, PGresult *r, const char *sql) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  if (state && !strncmp(state, "23", 2)) return DB_CONSTRAINT; /* integrity_constraint_violation */
  bool lost = !c->pg || PQstatus(c->pg) != CONNECTION_OK;
  char msg[300];
  snprintf(msg, sizeof msg, "%s", r ? PQresultErrorMessage(r) : c->pg ? PQerrorMessage(c->pg) : "no connection");
  msg[strcspn(msg, "\n")] = 0;
  if (lost || unavailable_state(state)) {
    log_msg(LOG_WARN, "postgres unavailable: %s", msg);
    return DB_UNAVAILABLE;
  }
  log_msg(LOG_ERROR, "postgres: %s in: %.200s", msg, sql);
  return DB_ERROR;
}

/* A result over r's cells (nothing copied; r is released with it). */
static db_res *result_of(PGresult *r) {
  int cols = PQnfields(r), rows = PQntuples(r);
  db_res *res = res_wrap(rows, cols, r, pq_clear);
  for (int i = 0; i < cols; i++) res->colnames[i] = PQfname(r, i);
  for (int row = 0; row < rows; row++)
    for (int i = 0; i < cols; i++) {
      size_t at = (size_t)row * (size_t)cols + (size_t)i;
      bool null = PQgetisnull(r, row, i);
      res->cells[at] = null ? NULL : PQgetvalue(r, row, i);
      res->lens[at] = null ? 0 : (uint32_t)PQgetlength(r, row, i);
    }
  const char *tuples = PQcmdTuples(r);
  res->changes = tuples && *tuples ? strtoll(tuples, NULL, 10) : 0;
  return res;
}

/* One command sent in a pipeline: a statement's execution, or the preparation of a new one. */
typedef struct sent {
  int stmt;     /* index in the batch */
  int prepared; /* >= 0: this command prepares statement name s<prepared> */
  char *key;    /* the cache key of a preparation */
} sent;

/* The cache key of a statement: its text and its parameters' types. */
static char *stmt_key(const db_stmt *st, Oid *types) {
  size_t klen = strlen(st->sql) + (size_t)st->n + 2;
  char *key = xmalloc(klen), *p = key + strlen(st->sql) + 1;
  memcpy(key, st->sql, strlen(st->sql));
  key[strlen(st->sql)] = '\x1f';
  for (int i = 0; i < st->n; i++) {
    types[i] = st->params[i].type == DBV_INT ? INT8OID : st->params[i].type == DBV_REAL ? FLOAT8OID : 0;
    *p++ = (char)('0' + st->params[i].type);
  }
  *p = 0;
  return key;
}

/* Queues one statement's commands in the pipeline: its preparation first when it is new on this
 * connection (named statements), then its execution. False when libpq could not queue them. */
static bool queue_stmt(pg_conn *c, const db_stmt *st, int index, sent *cmds, int *ncmds) {
  char numbuf[MAX_PARAMS][32];
  const char *values[MAX_PARAMS];
  Oid types[MAX_PARAMS];
  for (int i = 0; i < st->n; i++) {
    switch (st->params[i].type) {
    case DBV_TEXT: values[i] = st->params[i].s; break;
    case DBV_INT: snprintf(numbuf[i], 32, "%lld", (long long)st->params[i].i), values[i] = numbuf[i]; break;
    case DBV_REAL: snprintf(numbuf[i], 32, "%.17g", st->params[i].d), values[i] = numbuf[i]; break;
    default: values[i] = NULL; break;
    }
  }
  char *key = stmt_key(st, types);
  if (!CFG.pg_prepared_statements || db_replan) { /* the unnamed statement: PgBouncer, or planned each run */
    free(key);
    cmds[(*ncmds)++] = (sent){index, -1, NULL};
    return PQsendQueryParams(c->pg, st->sql, st->n, types, values, NULL, NULL, 0) == 1;
  }
  stmt_entry *e = stmt_cache_find(&c->cache, key);
  int name_no = e ? e->index : -1;
  for (int k = 0; k < *ncmds && name_no < 0; k++) /* prepared earlier in this batch */
    if (cmds[k].key && !strcmp(cmds[k].key, key)) name_no = cmds[k].prepared;
  char name[32];
  if (name_no < 0) {
    name_no = c->next_name++;
    snprintf(name, sizeof name, "s%d", name_no);
    cmds[(*ncmds)++] = (sent){index, name_no, key};
    if (PQsendPrepare(c->pg, name, st->sql, st->n, types) != 1) return false;
  } else {
    free(key);
  }
  snprintf(name, sizeof name, "s%d", name_no);
  cmds[(*ncmds)++] = (sent){index, -1, NULL};
  return PQsendQueryPrepared(c->pg, name, st->n, values, NULL, NULL, 0) == 1;
}

static db_rc stmt_failure(pg_conn *c, const db_stmt *st, PGresult *r) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  if (st->guard && state && !strcmp(state, "22012")) return DB_REFUSED; /* division_by_zero: no row */
  return map_result(c, r, st->sql);
}

/* Sends the batch in one pipeline and reads every answer. *broken when the connection failed
 * (stalled: the server stopped answering); the statements' rc are set. */
static db_rc run_batch(pg_conn *c, db_stmt *s, int n, bool *broken, bool *stalled) {
  sent *cmds = xmalloc(sizeof *cmds * (size_t)(2 * n + 1));
  int ncmds = 0;
  db_rc rc = DB_OK;
  for (int i = 0; i < n; i++) s[i].rc = DB_SKIPPED, s[i].res = NULL;
  bool queued = PQenterPipelineMode(c->pg) == 1;
  for (int i = 0; queued && i < n; i++) queued = queue_stmt(c, &s[i], i, cmds, &ncmds);
  if (queued) queued = PQpipelineSync(c->pg) == 1;
  if (!queued) {
    *broken = true;
    goto out;
  }
  for (int k = 0; k < ncmds; k++) {
    PGresult *r = read_results(c, stalled, true);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (!r || st == PGRES_PIPELINE_SYNC) { /* broken, stalled, or the pipeline ended early */
      PQclear(r);
      *broken = true;
      goto out;
    }
    db_stmt *stmt = &s[cmds[k].stmt];
    if (cmds[k].prepared >= 0) { /* a preparation: the statement's own result follows */
      if (st == PGRES_COMMAND_OK)
        stmt_cache_add(&c->cache, cmds[k].key)->index = cmds[k].prepared;
      else if (st != PGRES_PIPELINE_ABORTED && rc == DB_OK)
        rc = stmt->rc = stmt_failure(c, stmt, r);
      PQclear(r);
      continue;
    }
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
      stmt->rc = DB_OK;
      if (stmt->want) {
        stmt->res = result_of(r);
        r = NULL;
      }
    } else if (st == PGRES_PIPELINE_ABORTED) {
      if (stmt->rc == DB_SKIPPED && rc == DB_OK) rc = DB_SKIPPED;
    } else if (stmt->rc == DB_SKIPPED) { /* not already failed in its preparation */
      stmt->rc = stmt_failure(c, stmt, r);
      if (rc == DB_OK || rc == DB_SKIPPED) rc = stmt->rc;
    }
    PQclear(r);
  }
  PGresult *sync = read_results(c, stalled, true);
  if (!sync || PQresultStatus(sync) != PGRES_PIPELINE_SYNC) *broken = true;
  PQclear(sync);
out:
  if (!*broken && PQexitPipelineMode(c->pg) != 1) *broken = true;
  for (int k = 0; k < ncmds; k++) free(cmds[k].key);
  free(cmds);
  return rc;
}

static bool commits(const db_stmt *s, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].sql, "COMMIT")) return true;
  return false;
}

static db_rc pg_batch(void *h, db_stmt *s, int n) {
  pg_conn *c = h;
  for (int i = 0; i < n; i++)
    if (s[i].n > MAX_PARAMS) return DB_ERROR;
  if (!usable(c)) return DB_DOWN;
  /* a broken connection reports PQTRANS_UNKNOWN: that is not a transaction to protect */
  PGTransactionStatusType ts = PQtransactionStatus(c->pg);
  bool in_tx = ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR || ts == PQTRANS_ACTIVE;
  bool broken = false, stalled = false;
  db_rc rc = run_batch(c, s, n, &broken, &stalled);
  /* a connection found broken outside a transaction (the server restarted since it was last
   * used) is made again and the batch sent once more, unless it committed: that may have
   * happened before the connection broke */
  if (broken && !stalled && !in_tx && !commits(s, n) && PQstatus(c->pg) != CONNECTION_OK) {
    for (int i = 0; i < n; i++) db_res_free(s[i].res), s[i].res = NULL;
    if (!usable(c)) return DB_DOWN;
    broken = false;
    rc = run_batch(c, s, n, &broken, &stalled);
  }
  if (broken || stalled) { /* an answer may still come, or the pipeline's state is unknown */
    for (int i = 0; i < n; i++) db_res_free(s[i].res), s[i].res = NULL;
    if (!stalled) {
      char msg[300];
      snprintf(msg, sizeof msg, "%s", c->pg ? PQerrorMessage(c->pg) : "no connection");
      msg[strcspn(msg, "\n")] = 0;
      log_msg(LOG_WARN, "postgres unavailable: %s", msg);
    }
    give_up(c);
    return stalled ? DB_DOWN : DB_UNAVAILABLE;
  }
  return rc;
}

static db_rc pg_exec(void *h, const char *sql, const db_val *params, int n, db_res **out) {
  db_stmt st = {.sql = sql, .params = params, .n = n, .want = out != NULL};
  db_rc rc = pg_batch(h, &st, 1);
  if (out) *out = st.res;
  return rc == DB_SKIPPED ? DB_ERROR : rc;
}

static db_rc pg_script(void *h, const char *sql) {
  pg_conn *c = h;
  if (!usable(c)) return DB_DOWN;
  bool stalled = false;
  PGresult *r = PQsendQuery(c->pg, sql) ? await_result(c, &stalled) : NULL;
  if (!r && !stalled && usable(c)) r = PQsendQuery(c->pg, sql) ? await_result(c, &stalled) : NULL;
  if (stalled) {
    give_up(c);
    return DB_DOWN;
  }
  db_rc rc = DB_OK;
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) rc = map_result(c, r, "script");
  PQclear(r);
  return rc;
}

/* ---- LISTEN on a connection of its own ---- */

typedef struct pg_listener {
  pg_conn c;     /* c.pg NULL while down: the next wait connects again */
  char *channel; /* a plain identifier (db_listen_open's contract) */
  bool missed;   /* the connection was lost or never made: the next success says so */
} pg_listener;

/* Connects and LISTENs; false (logged) when the server cannot be reached now. */
static bool listen_connect(pg_listener *l) {
  char err[256], sql[128];
  l->c.pg = connect_within(l->c.url, CONNECT_MS, err);
  if (!l->c.pg) {
    log_msg(LOG_WARN, "postgres listener: %s", err);
    return false;
  }
  snprintf(sql, sizeof sql, "LISTEN %s", l->channel);
  bool stalled = false;
  PGresult *r = PQsendQuery(l->c.pg, sql) ? await_result(&l->c, &stalled) : NULL;
  bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) {
    log_msg(LOG_WARN, "postgres listener: LISTEN %s failed", l->channel);
    give_up(&l->c);
  }
  return ok;
}

static void *pg_listen_open(const char *url, const char *channel) {
  pg_listener *l = xcalloc(1, sizeof *l);
  l->c.url = xstrdup(url);
  l->channel = xstrdup(channel);
  l->missed = true;
  return l;
}

/* Consumes the notifications read so far: how many, *bare set when one had no payload. */
static int take_read(pg_listener *l, bool *bare) {
  int n = 0;
  for (PGnotify *note; (note = PQnotifies(l->c.pg)) != NULL; n++) {
    if (!note->extra || !*note->extra) *bare = true;
    PQfreemem(note);
  }
  return n;
}

/* Consumes what the server sent; the number of notifications among it, -1 when the
 * connection broke. */
static int take_notifications(pg_listener *l, bool *bare) {
  if (!PQconsumeInput(l->c.pg)) return -1;
  return take_read(l, bare);
}

static int pg_listen_wait(void *h, int timeout_ms, bool *bare) {
  pg_listener *l = h;
  if (!l->c.pg) {
    if (!listen_connect(l)) {
      poll(NULL, 0, timeout_ms < 1000 ? timeout_ms : 1000); /* at most one attempt a second */
      return 0;
    }
    if (l->missed) return l->missed = false, -1;
  }
  if (take_read(l, bare)) return 1; /* read along with an earlier answer */
  struct pollfd p = {.fd = PQsocket(l->c.pg), .events = POLLIN};
  int ready = poll(&p, 1, timeout_ms);
  if (ready < 0 && errno != EINTR) ready = 0;
  int n = ready > 0 || PQisBusy(l->c.pg) ? take_notifications(l, bare) : 0;
  if (n < 0 || PQstatus(l->c.pg) != CONNECTION_OK) {
    log_msg(LOG_WARN, "postgres listener: connection lost; listening again");
    give_up(&l->c);
    l->missed = true;
    return 0;
  }
  return n > 0;
}

static void pg_listen_close(void *h) {
  pg_listener *l = h;
  give_up(&l->c);
  free(l->c.url);
  free(l->channel);
  free(l);
}

const engine_ops postgres_engine_ops = {
    ENGINE_OPS(pg),
    .batch = pg_batch,
    .begin_sql = "BEGIN",
    .listen_open = pg_listen_open,
    .listen_wait = pg_listen_wait,
    .listen_close = pg_listen_close,
};
