/* Pool, breaker and dispatch. The pool is a fixed array of connections guarded by one mutex,
 * with a FIFO of waiting threads; engines know nothing of threads. The breaker is one small
 * state shared by every pool (see db.h): while it is open, statements fail before reaching
 * an engine, so a dead server costs each request microseconds, not a reconnect attempt on
 * every worker; ROLLBACK always reaches the engine, so no connection goes back to the pool
 * with a transaction open. Results are built into one buffer so a row costs a couple of
 * allocations, not one per cell. */
#include "db/db.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/util.h"
#include "core/vec.h"
#include "db/engine.h"
#include "db/migrate.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Work to run once the open transaction commits (db_on_commit). */
typedef struct on_commit {
  void (*fn)(void *);
  void *arg;
} on_commit;

/* Writes to make just before the commit, and what to release once it ended (db_before_commit). */
typedef struct before_commit {
  db_rc (*fn)(db_conn *c, void *arg);
  void (*done)(void *arg);
  void *arg;
} before_commit;
/* A statement queued by db_exec_later: its SQL and parameters copied into block. */
typedef struct later {
  char *block;
  const char *sql;
  db_val *params;
  int n;
  arena *a;
  db_res **out;
} later;

struct db_conn {
  void *handle;
  bool in_use;
  bool in_tx;
  bool begin_pending; /* engines that batch: BEGIN not sent yet, it goes with the first statement */
  bool tx_broken;     /* a batch holding the BEGIN failed: nothing more runs until db_end */
  VEC(later) laters;  /* db_exec_later's statements not sent yet */
  struct pool *home;
  VEC(on_commit) after;      /* registered in the open transaction; kept allocated between transactions */
  VEC(before_commit) before; /* likewise (db_before_commit) */
};

/* A thread waiting for a connection. Released connections go to the oldest waiter directly,
 * so under load no request loses the race for a connection again and again. */
typedef struct waiter {
  struct waiter *next;
  db_conn *given;
  pthread_cond_t cv;
} waiter;

/* Two pools: one for the database lane of request workers (and the main thread), one for the
 * slow lane and background work. A thread that takes a connection may be descheduled before it
 * runs its statement; when a burst of slow-lane threads (a login flood passing the hashing
 * check) queued in the same pool, connections handed to them sat idle and the database lane's
 * requests waited behind them for hundreds of milliseconds. */
typedef struct pool {
  db_conn *conns;
  int size;
  pthread_mutex_t mu;
  waiter *head, *tail;
  long waits; /* acquisitions that had to wait */
} pool;

#define BREAKER_OPEN_MS 1000

_Thread_local int64_t db_deadline_ms;
_Thread_local bool db_replan;
static _Thread_local bool unavailable_seen;
static _Thread_local int trips; /* db_trips */

/* The thread's guard (db_guard): its SQL and parameters in block, sent with the thread's next
 * statement (batch engines: wrapped, so that no row is an error that skips the rest). */
static _Thread_local struct {
  bool pending, deferrable, refused;
  bool failed; /* sent, but it did not run (the database unavailable) */
  char *block;
  const char *sql;
  db_val *params;
  int n;
} guard_state;

static struct {
  pthread_mutex_t mu;
  bool open, trying; /* trying: one statement is testing the server */
  int64_t retry_at;  /* clock_mono_ms */
} breaker = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const engine_ops *ops;
static db_engine engine;
static char *engine_url; /* what listeners connect to */
static pool pools[DB_POOL_COUNT] = {
    {.mu = PTHREAD_MUTEX_INITIALIZER}, {.mu = PTHREAD_MUTEX_INITIALIZER}, {.mu = PTHREAD_MUTEX_INITIALIZER}};
static _Thread_local db_pool_kind thread_pool = DB_POOL_REQUESTS;

/* Opens a pool of size connections, the first `now` of them at once; the others when a thread
 * finds every opened one taken (acquire_until). */
static bool pool_open(pool *p, const char *url, int size, int now, bool no_wait, char err[256]) {
  p->conns = xcalloc((size_t)size, sizeof *p->conns);
  for (p->size = 0; p->size < size; p->size++) {
    p->conns[p->size].home = p;
    if (p->size >= now) continue;
    if (!(p->conns[p->size].handle = ops->connect(url, err))) return false;
    if (no_wait && ops->no_wait) ops->no_wait(p->conns[p->size].handle);
  }
  return true;
}

/* The connection of slot i, which the caller holds (in_use) and which was never opened or
 * failed to open: opened now, outside the pool's lock (p->mu held on entry and on return).
 * NULL, the slot freed, when it cannot be. */
static db_conn *open_slot(pool *p, int i) {
  pthread_mutex_unlock(&p->mu);
  char err[256] = "";
  void *h = ops->connect(engine_url, err);
  if (!h) log_msg(LOG_ERROR, "db: opening a connection of the pool: %s", err);
  pthread_mutex_lock(&p->mu);
  p->conns[i].handle = h;
  if (!h) p->conns[i].in_use = false;
  return h ? &p->conns[i] : NULL;
}

bool db_open(const char *url, int pool_size, int slow_pool_size, char err[256]) {
  if (str_starts_with(url, "sqlite:")) {
    ops = &sqlite_engine_ops, engine = DB_SQLITE;
    url += strlen("sqlite:");
  } else {
    ops = &postgres_engine_ops, engine = DB_POSTGRES;
  }
  free(engine_url);
  engine_url = xstrdup(url);
  /* every event thread holds at most one connection at a time, so it never waits for one */
  /* the slow pool's connections past the first SLOW_OPEN_AT_START (config.c) are opened as a
   * burst first needs them: a process starts with 4, as it did before, and a command that does
   * not run the lanes never opens the rest */
  enum { SLOW_OPEN_AT_START = 4 };
  int slow_now = slow_pool_size < SLOW_OPEN_AT_START ? slow_pool_size : SLOW_OPEN_AT_START;
  if (!pool_open(&pools[DB_POOL_REQUESTS], url, pool_size, pool_size, false, err) ||
      !pool_open(&pools[DB_POOL_SLOW], url, slow_pool_size, slow_now, false, err) ||
      (engine == DB_SQLITE && !pool_open(&pools[DB_POOL_EVENT], url, CFG.http_threads, CFG.http_threads, true, err))) {
    db_close();
    return false;
  }
  return true;
}

void db_close(void) {
  for (int k = 0; k < DB_POOL_COUNT; k++) {
    pool *p = &pools[k];
    for (int i = 0; i < p->size; i++) {
      if (p->conns[i].handle) ops->disconnect(p->conns[i].handle);
      vec_free(&p->conns[i].after);
      vec_free(&p->conns[i].before);
      vec_free(&p->conns[i].laters);
    }
    free(p->conns);
    p->conns = NULL, p->size = 0;
  }
}

db_engine db_engine_get(void) { return engine; }

bool db_reads_inline(void) { return engine == DB_SQLITE && pools[DB_POOL_EVENT].size > 0; }

/* db_watch_table's tables, added at start-up (while background threads may already write: each
 * entry is published by the count) and read by the writer's update hook */
#define WATCHED_MAX 8
static const char *watched[WATCHED_MAX];
static _Atomic int nwatched;
static _Atomic uint64_t watch_gen = 1;

bool db_table_watched(const char *table) {
  int n = atomic_load_explicit(&nwatched, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (!strcmp(watched[i], table)) return true;
  return false;
}

void db_watch_table(const char *table) { /* from the start-up thread alone */
  if (db_table_watched(table)) return;
  int n = atomic_load_explicit(&nwatched, memory_order_relaxed);
  if (n == WATCHED_MAX) die("db_watch_table: more than %d tables", WATCHED_MAX);
  watched[n] = table;
  atomic_store_explicit(&nwatched, n + 1, memory_order_release);
}

void db_watch_moved(void) { atomic_fetch_add_explicit(&watch_gen, 1, memory_order_release); }

uint64_t db_watch_generation(void) {
  return ops && ops->sees_every_write ? atomic_load_explicit(&watch_gen, memory_order_acquire) : 0;
}

void db_use_pool(db_pool_kind kind) { thread_pool = kind; }
void db_plan_each_run(void) { db_replan = true; }

/* Connections this thread holds. A thread that holds one and waits for another can deadlock
 * the pool (every worker of the database lane holds one), so that is a bug: reported, and
 * fatal under APP_ENV=test so the test run finds it. */
static _Thread_local int held;

/* Takes a connection of the thread's pool, waiting at most until deadline (clock_mono_ms; 0:
 * no limit); NULL when the deadline passed first. */
static db_conn *acquire_until(int64_t deadline) {
  if (held++ > 0) {
    log_msg(LOG_ERROR, "db_acquire: nested acquisition on one thread can deadlock the pool");
    if (CFG.env == ENV_TEST) abort();
  }
  pool *p = &pools[thread_pool];
  pthread_mutex_lock(&p->mu);
  if (!p->head) {
    for (int i = 0; i < p->size; i++)
      if (!p->conns[i].in_use && p->conns[i].handle) {
        p->conns[i].in_use = true;
        pthread_mutex_unlock(&p->mu);
        return &p->conns[i];
      }
    for (int i = 0; i < p->size; i++)
      if (!p->conns[i].in_use) { /* not opened yet: every opened one is taken */
        p->conns[i].in_use = true;
        db_conn *c = open_slot(p, i);
        if (!c) break; /* then wait for one to be given back */
        pthread_mutex_unlock(&p->mu);
        return c;
      }
  }
  waiter w = {.next = NULL, .given = NULL};
  p->waits++;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w.cv, &attr);
  pthread_condattr_destroy(&attr);
  if (p->tail)
    p->tail->next = &w;
  else
    p->head = &w;
  p->tail = &w;
  while (!w.given) {
    if (!deadline) {
      pthread_cond_wait(&w.cv, &p->mu);
      continue;
    }
    struct timespec until = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000L};
    if (pthread_cond_timedwait(&w.cv, &p->mu, &until) == ETIMEDOUT && !w.given) { /* leave the queue */
      waiter **q = &p->head, *prev = NULL;
      while (*q != &w) prev = *q, q = &(*q)->next;
      *q = w.next;
      if (p->tail == &w) p->tail = prev;
      break;
    }
  }
  pthread_mutex_unlock(&p->mu);
  pthread_cond_destroy(&w.cv);
  if (!w.given) held--;
  return w.given;
}

db_conn *db_acquire(void) { return acquire_until(0); }

/* The transaction ended: what db_before_commit registered lets go of its state. */
static void before_done(db_conn *c) {
  size_t n = c->before.size;
  c->before.size = 0;
  for (size_t i = 0; i < n; i++)
    if (c->before.items[i].done) c->before.items[i].done(c->before.items[i].arg);
}

static void drop_laters(db_conn *c) {
  for (size_t i = 0; i < c->laters.size; i++) free(c->laters.items[i].block);
  c->laters.size = 0;
}

static void rollback(db_conn *c) {
  drop_laters(c);
  if (!c->begin_pending && !c->tx_broken) { /* a BEGIN never sent, or that did not run, needs none */
    trips++;
    ops->exec(c->handle, "ROLLBACK", NULL, 0, NULL);
  }
  c->in_tx = c->begin_pending = c->tx_broken = false;
  c->after.size = 0;
  before_done(c);
}

void db_release(db_conn *c) {
  if (!c) return;
  held--;
  if (c->in_tx) rollback(c);
  pool *p = c->home;
  pthread_mutex_lock(&p->mu);
  waiter *w = p->head;
  if (w) { /* hand over: the connection stays in use */
    p->head = w->next;
    if (!p->head) p->tail = NULL;
    w->given = c;
    pthread_cond_signal(&w->cv);
  } else {
    c->in_use = false;
  }
  pthread_mutex_unlock(&p->mu);
}

void db_pool_stats_get(db_pool_kind kind, db_pool_stats *out) {
  pool *p = &pools[kind];
  pthread_mutex_lock(&p->mu);
  *out = (db_pool_stats){.size = p->size, .waits = p->waits};
  for (int i = 0; i < p->size; i++) out->in_use += p->conns[i].in_use, out->open += p->conns[i].handle != NULL;
  for (waiter *w = p->head; w; w = w->next) out->waiting++;
  pthread_mutex_unlock(&p->mu);
}

const char *db_pool_name(db_pool_kind kind) {
  switch (kind) { /* no default: a new pool without a name is a compiler warning */
  case DB_POOL_REQUESTS: return "requests";
  case DB_POOL_SLOW: return "slow";
  case DB_POOL_EVENT: return "event";
  case DB_POOL_COUNT: break;
  }
  return "unknown";
}

/* ---- the breaker ---- */

/* Whether a statement may go to the engine now; *trial when it is the one testing the server. */
static bool breaker_admit(bool *trial) {
  *trial = false;
  pthread_mutex_lock(&breaker.mu);
  bool go = !breaker.open;
  if (!go && !breaker.trying && clock_mono_ms() >= breaker.retry_at) go = breaker.trying = *trial = true;
  pthread_mutex_unlock(&breaker.mu);
  return go;
}

/* After a statement: DB_DOWN opens (or keeps open) the breaker; any other outcome of a trial
 * proves the server answers and closes it. */
static void breaker_after(bool trial, db_rc rc) {
  if (!trial && rc != DB_DOWN) return;
  pthread_mutex_lock(&breaker.mu);
  if (trial) breaker.trying = false;
  if (rc == DB_DOWN) {
    if (!breaker.open) log_msg(LOG_ERROR, "database unreachable: failing fast, trying again every second");
    breaker.open = true;
    breaker.retry_at = clock_mono_ms() + BREAKER_OPEN_MS;
  } else if (breaker.open) {
    breaker.open = false;
    log_msg(LOG_WARN, "database reachable again");
  }
  pthread_mutex_unlock(&breaker.mu);
}

bool db_breaker_open(void) {
  pthread_mutex_lock(&breaker.mu);
  bool open = breaker.open;
  pthread_mutex_unlock(&breaker.mu);
  return open;
}

bool db_unavailable_seen(void) { return unavailable_seen; }
void db_unavailable_clear(void) { unavailable_seen = false; }

/* One exchange with the engine through the breaker: a statement, or a batch (n > 1, or a
 * batch of one on an engine that batches). */
static db_rc guarded_batch(db_conn *c, db_stmt *s, int n) {
  bool trial;
  db_rc rc = DB_DOWN;
  if (guard_state.refused) { /* the request is refused: nothing more of it may run */
    for (int i = 0; i < n; i++) s[i].rc = DB_SKIPPED;
    return DB_SKIPPED;
  }
  if (breaker_admit(&trial)) {
    if (ops->batch) {
      rc = ops->batch(c->handle, s, n);
    } else if (n == 2) { /* a guard and the statement after it (guard_then) */
      rc = ops->guard_read(c->handle, s, n);
      trips += (s[0].rc != DB_SKIPPED) + (s[1].rc != DB_SKIPPED) - 1; /* without a network, each statement */
    } else {
      rc = ops->exec(c->handle, s[0].sql, s[0].params, s[0].n, s[0].want ? &s[0].res : NULL);
      s[0].rc = rc;
    }
    trips++;
    breaker_after(trial, rc);
  } else {
    for (int i = 0; i < n; i++) s[i].rc = DB_DOWN;
  }
  if (rc == DB_DOWN) rc = DB_UNAVAILABLE;
  if (rc == DB_UNAVAILABLE) unavailable_seen = true;
  return rc;
}

/* What a caller sees of a statement that did not run because of the request's guard (refused,
 * or skipped behind it): a plain failure; the guard's state says why. */
static db_rc caller_rc(db_rc rc) { return rc == DB_SKIPPED || rc == DB_REFUSED ? DB_ERROR : rc; }

static db_rc guard_then(db_conn *c, const char *sql, const db_val *params, int n, db_res **out);

static db_rc guarded(db_conn *c, const char *sql, const db_val *params, int n, db_res **out) {
  if (guard_state.pending && !ops->batch) return guard_then(c, sql, params, n, out);
  db_stmt st = {.sql = sql, .params = params, .n = n, .want = out != NULL};
  db_rc rc = guarded_batch(c, &st, 1);
  if (out) *out = st.res;
  return caller_rc(rc);
}

/* Engines without batch: the pending guard and then sql (none: the guard alone), in one read
 * transaction where the engine can (guard_read), else one after the other. */
static db_rc guard_then(db_conn *c, const char *sql, const db_val *params, int n, db_res **out) {
  guard_state.pending = false;
  db_stmt s[2] = {
      {.sql = guard_state.sql, .params = guard_state.params, .n = guard_state.n, .want = true, .guard = true},
      {.sql = sql, .params = params, .n = n, .want = out != NULL}};
  bool together = sql && ops->guard_read && !c->in_tx;
  db_rc rc = together ? guarded_batch(c, s, 2) : DB_SKIPPED;
  if (!together || s[0].rc == DB_SKIPPED) { /* not run together: the guard alone */
    together = false;
    rc = guarded_batch(c, s, 1);
    if (rc == DB_OK && s[0].res->rows == 0) rc = s[0].rc = DB_REFUSED;
    db_res_free(s[0].res);
  }
  if (s[0].rc == DB_REFUSED)
    guard_state.refused = true;
  else if (s[0].rc != DB_OK)
    guard_state.failed = true;
  if (!sql || s[0].rc != DB_OK) return caller_rc(rc);
  if (!together) return guarded(c, sql, params, n, out); /* the guard passed alone */
  if (out) *out = s[1].res;
  return rc;
}

static void res_release(void *p) { db_res_free(p); }

static bool waiting(const db_conn *c) { return guard_state.pending || c->begin_pending || c->laters.size; }

/* Sends, in one round trip, what waits to go with the next statement (the thread's guard, the
 * transaction's BEGIN, its deferred statements) and then tail[0..ntail-1] (their rc and heap
 * results set). The results of deferred statements go to their arenas. */
static db_rc send_waiting(db_conn *c, db_stmt *tail, int ntail) {
  int cap = 2 + (int)c->laters.size + ntail, k = 0, at_guard = -1, at_begin = -1, first_later;
  db_stmt local[8], *s = cap <= 8 ? local : xmalloc(sizeof *s * (size_t)cap);
  if (guard_state.pending)
    at_guard = k,
    s[k++] = (db_stmt){.sql = guard_state.sql, .params = guard_state.params, .n = guard_state.n, .guard = true};
  if (c->begin_pending) at_begin = k, s[k++] = (db_stmt){.sql = ops->begin_sql};
  first_later = k;
  for (size_t i = 0; i < c->laters.size; i++) {
    const later *l = &c->laters.items[i];
    s[k++] = (db_stmt){.sql = l->sql, .params = l->params, .n = l->n, .want = l->out != NULL};
  }
  for (int i = 0; i < ntail; i++) s[k++] = tail[i];
  db_rc rc = guarded_batch(c, s, k);
  guard_state.pending = false;
  if (at_guard >= 0 && s[at_guard].rc == DB_REFUSED) guard_state.refused = true;
  if (at_guard >= 0 && s[at_guard].rc != DB_REFUSED && s[at_guard].rc != DB_OK) guard_state.failed = true;
  if (at_begin >= 0) {
    c->begin_pending = false;
    if (s[at_begin].rc != DB_OK) c->tx_broken = true; /* the rest ran outside any transaction, or not at all */
  }
  for (size_t i = 0; i < c->laters.size; i++) {
    later *l = &c->laters.items[i];
    db_stmt *st = &s[first_later + i];
    if (l->out) {
      *l->out = st->res;
      if (st->res) arena_defer(l->a, res_release, st->res);
    }
  }
  drop_laters(c);
  for (int i = 0; i < ntail; i++) tail[i] = s[k - ntail + i];
  if (s != local) free(s);
  return caller_rc(rc);
}

static db_rc send_one(db_conn *c, const char *sql, const db_val *params, int n, db_res **out) {
  db_stmt st = {.sql = sql, .params = params, .n = n, .want = out != NULL};
  db_rc rc = send_waiting(c, &st, 1);
  if (out) *out = st.res;
  return rc;
}

db_rc db_exec_all(db_conn *c, arena *a, db_read *reads, int n) {
  db_rc rc = DB_OK;
  if (!ops->batch || c->tx_broken) {
    for (int i = 0; i < n; i++) reads[i].res = NULL;
    /* one snapshot for them all, and one read lock (SQLite; a broken transaction is one in_tx) */
    bool snapshot = n > 1 && !c->in_tx && ops->read_snapshot && ops->read_snapshot(c->handle, true) == DB_OK;
    for (int i = 0; rc == DB_OK && i < n; i++)
      rc = db_exec(c, a, &reads[i].res, reads[i].sql, reads[i].params, reads[i].n);
    if (snapshot) ops->read_snapshot(c->handle, false);
    return rc;
  }
  db_stmt local[8], *s = n <= 8 ? local : xmalloc(sizeof *s * (size_t)n);
  for (int i = 0; i < n; i++)
    s[i] = (db_stmt){.sql = reads[i].sql, .params = reads[i].params, .n = reads[i].n, .want = true};
  rc = send_waiting(c, s, n);
  for (int i = 0; i < n; i++) {
    reads[i].res = s[i].res;
    if (s[i].res) arena_defer(a, res_release, s[i].res);
  }
  if (s != local) free(s);
  return rc;
}

db_rc db_exec(db_conn *c, arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  db_res *r = NULL;
  db_rc rc = c->tx_broken               ? DB_ERROR
             : waiting(c) && ops->batch ? send_one(c, sql, params, n, out ? &r : NULL)
                                        : guarded(c, sql, params, n, out ? &r : NULL);
  if (out) {
    *out = r;
    if (r) arena_defer(a, res_release, r);
  }
  return rc;
}

/* A statement kept beyond its caller's call (a deferred statement, a guard): one heap block
 * holding a copy of params, their texts included, and the text head + sql + tail; *copy and
 * *text point into it. */
static char *keep_statement(const char *head, const char *sql, const char *tail, const db_val *params, int n,
                            db_val **copy, char **text) {
  size_t bytes = sizeof(db_val) * (size_t)n + strlen(head) + strlen(sql) + strlen(tail) + 1;
  for (int i = 0; i < n; i++)
    if (params[i].type == DBV_TEXT) bytes += strlen(params[i].s) + 1;
  char *block = xmalloc(bytes), *at = block + sizeof(db_val) * (size_t)n;
  *copy = (db_val *)block;
  for (int i = 0; i < n; i++) {
    (*copy)[i] = params[i];
    if (params[i].type == DBV_TEXT) {
      size_t len = strlen(params[i].s) + 1;
      (*copy)[i].s = memcpy(at, params[i].s, len), at += len;
    }
  }
  *text = at;
  sprintf(at, "%s%s%s", head, sql, tail);
  return block;
}

db_rc db_exec_later(db_conn *c, arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  if (!ops->batch || !c->in_tx) return db_exec(c, a, out, sql, params, n);
  if (c->tx_broken) return DB_ERROR;
  if (out) *out = NULL;
  db_val *copy;
  char *text, *block = keep_statement("", sql, "", params, n, &copy, &text);
  *vec_push(NULL, &c->laters) = (later){block, text, copy, n, a, out};
  return DB_OK;
}

int db_trips(void) { return trips; }
void db_trips_clear(void) { trips = 0; }

void db_guard_defer(bool allowed) { guard_state.deferrable = allowed; }

void db_guard_clear(void) {
  free(guard_state.block);
  guard_state.block = NULL;
  guard_state.pending = guard_state.refused = guard_state.failed = false;
}

db_rc db_guard(bool *found, const char *sql, const db_val *params, int n) {
  if (!(ops->batch || ops->guard_read) || !guard_state.deferrable) return db_exists(found, sql, params, n);
  /* batch: the query's rows counted, and 1 divided by the count: no row is a division by zero,
   * which makes the server skip whatever the round trip carries after it */
  db_val *copy;
  char *text;
  free(guard_state.block);
  guard_state.block = ops->batch
                          ? keep_statement("SELECT 1 / count(*) FROM (", sql, ") AS guard", params, n, &copy, &text)
                          : keep_statement("", sql, "", params, n, &copy, &text);
  guard_state.sql = text, guard_state.params = copy, guard_state.n = n;
  guard_state.pending = true;
  *found = true;
  return DB_OK;
}

bool db_guard_refused(void) {
  if (guard_state.pending) {
    db_conn *c = db_acquire();
    if (ops->batch)
      send_waiting(c, NULL, 0);
    else
      guard_then(c, NULL, NULL, 0, NULL);
    db_release(c);
  }
  return guard_state.refused;
}

bool db_guard_passed(void) { return !db_guard_refused() && !guard_state.failed; }

db_rc db_script(db_conn *c, const char *sql) {
  db_rc rc = ops->script(c->handle, sql);
  return rc == DB_DOWN ? DB_UNAVAILABLE : rc;
}

db_read db_read_make(arena *a, const char *sql, const db_val *params, int n) {
  db_val *copy = arena_alloc(a, sizeof *copy * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    copy[i] = params[i];
    if (params[i].type == DBV_TEXT) copy[i].s = arena_strdup(a, params[i].s);
  }
  return (db_read){.sql = sql, .params = copy, .n = n};
}

db_rc db_query_all(arena *a, db_read *reads, int n) {
  db_conn *c = db_acquire();
  db_rc rc = db_exec_all(c, a, reads, n);
  db_release(c);
  return rc;
}

db_rc db_query(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  db_conn *c = db_acquire();
  db_rc rc = db_exec(c, a, out, sql, params, n);
  db_release(c);
  return rc;
}

err_t db_query_row(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  if (db_query(a, out, sql, params, n) != DB_OK) return ERR_INTERNAL;
  return (*out)->rows ? ERR_OK : ERR_NOT_FOUND;
}

/* One statement on a connection of its own; *count: the rows it returned (rows) or changed (0
 * on failure). */
static db_rc query_count(bool rows, int64_t *count, const char *sql, const db_val *params, int n) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, sql, params, n);
  *count = rc != DB_OK ? 0 : rows ? r->rows : r->changes;
  arena_fini(&a);
  return rc;
}

db_rc db_exists(bool *found, const char *sql, const db_val *params, int n) {
  int64_t count;
  db_rc rc = query_count(true, &count, sql, params, n);
  *found = count > 0;
  return rc;
}

db_rc db_changes(bool *changed, const char *sql, const db_val *params, int n) {
  int64_t count;
  db_rc rc = query_count(false, &count, sql, params, n);
  *changed = count > 0;
  return rc;
}

db_rc db_changes_count(int64_t *count, const char *sql, const db_val *params, int n) {
  return query_count(false, count, sql, params, n);
}

int db_prune_batch(void) { return fault_limit("prune-batch", 500); }

db_rc db_delete_in_batches(const char *sql, const db_val *params, int n, int64_t batch) {
  int64_t deleted = batch;
  db_rc rc = DB_OK;
  while (rc == DB_OK && deleted >= batch) rc = db_changes_count(&deleted, sql, params, n);
  return rc;
}

db_rc db_held_begin(db_conn *c) {
  db_rc rc = guarded(c, ops->begin_sql, NULL, 0, NULL);
  if (rc == DB_OK) c->in_tx = true, c->begin_pending = c->tx_broken = false, c->after.size = 0;
  return rc;
}

db_rc db_held_commit(db_conn *c) {
  db_rc rc = DB_OK;
  if (c->tx_broken)
    rc = DB_ERROR;
  else if (c->begin_pending && !c->laters.size) /* nothing was sent: nothing to commit */
    c->begin_pending = false;
  else
    rc = waiting(c) && ops->batch ? send_one(c, "COMMIT", NULL, 0, NULL) : guarded(c, "COMMIT", NULL, 0, NULL);
  if (rc != DB_OK) rollback(c);
  c->in_tx = false;
  return rc;
}

void db_held_rollback(db_conn *c) { rollback(c); }

err_t db_begin(db_conn **out) {
  db_conn *c = db_acquire();
  if (ops->batch) { /* BEGIN goes with the transaction's first statement */
    c->in_tx = c->begin_pending = true, c->tx_broken = false, c->after.size = 0;
    *out = c;
    return ERR_OK;
  }
  db_rc rc = db_held_begin(c);
  if (rc != DB_OK) {
    db_release(c);
    *out = NULL;
    return db_to_err(rc);
  }
  *out = c;
  return ERR_OK;
}

bool db_in_tx(const db_conn *c) { return c && c->in_tx; }

db_rc db_changes_in(db_conn *c, bool *changed, const char *sql, const db_val *params, int n) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, sql, params, n);
  *changed = rc == DB_OK && r->changes > 0;
  arena_fini(&a);
  return rc;
}

err_t db_begin_exec(db_conn **c, arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  err_t e = db_begin(c);
  return e ? e : db_to_err(db_exec(*c, a, out, sql, params, n));
}

db_tx db_tx_new(void) {
  db_tx t = {.now = clock_now_ms()};
  arena_init(&t.a);
  return t;
}

err_t db_tx_begin(db_tx *t) {
  *t = db_tx_new();
  return db_begin(&t->c);
}

err_t db_tx_begin_exec(db_tx *t, arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  return db_begin_exec(&t->c, a, out, sql, params, n);
}

err_t db_tx_end(db_tx *t, err_t e) {
  e = db_end(t->c, e);
  arena_fini(&t->a);
  return e;
}

void db_before_commit(db_conn *c, db_rc (*fn)(db_conn *c, void *arg), void (*done)(void *arg), void *arg) {
  if (!c || !c->in_tx) {
    log_msg(LOG_ERROR, "db_before_commit outside a transaction: the work would never run");
    if (done) done(arg);
    return;
  }
  for (size_t i = 0; i < c->before.size; i++)
    if (c->before.items[i].fn == fn && c->before.items[i].arg == arg) return;
  *vec_push(NULL, &c->before) = (before_commit){fn, done, arg};
}

void db_on_commit(db_conn *c, void (*fn)(void *), void *arg) {
  if (!c || !c->in_tx) {
    log_msg(LOG_ERROR, "db_on_commit outside a transaction: the work would never run");
    return;
  }
  for (size_t i = 0; i < c->after.size; i++)
    if (c->after.items[i].fn == fn && c->after.items[i].arg == arg) return;
  *vec_push(NULL, &c->after) = (on_commit){fn, arg};
}

err_t db_end(db_conn *c, err_t e) {
  if (!c) return e;
  if (!c->in_tx) { /* a programming error: nothing was begun, so nothing can be committed */
    log_msg(LOG_ERROR, "db_end without a transaction");
    db_release(c);
    return e == ERR_OK ? ERR_INTERNAL : e;
  }
  for (size_t i = 0; e == ERR_OK && i < c->before.size; i++)
    e = db_to_err(c->before.items[i].fn(c, c->before.items[i].arg));
  if (e == ERR_OK) {
    e = db_to_err(db_held_commit(c)); /* a failed commit rolled back (and let go) already */
    before_done(c);
  } else {
    rollback(c);
  }
  if (e != ERR_OK) {
    db_release(c);
    return e;
  }
  /* copied out: once released, the connection may be another thread's */
  on_commit local[8], *due = local;
  size_t n = c->after.size;
  if (n > sizeof local / sizeof local[0]) due = xmalloc(n * sizeof *due);
  if (n) memcpy(due, c->after.items, n * sizeof *due);
  c->after.size = 0;
  db_release(c);
  for (size_t i = 0; i < n; i++) due[i].fn(due[i].arg);
  if (due != local) free(due);
  return ERR_OK;
}

/* ---- notifications between processes ---- */

struct db_listener {
  void *handle;
};

db_listener *db_listen_open(const char *channel) {
  if (!ops || !ops->listen_open) return NULL;
  db_listener *l = xcalloc(1, sizeof *l);
  l->handle = ops->listen_open(CFG.database_listen_url ? CFG.database_listen_url : engine_url, channel);
  return l;
}

int db_listen_wait(db_listener *l, int timeout_ms, bool *bare) {
  *bare = false;
  return ops->listen_wait(l->handle, timeout_ms, bare);
}

void db_listen_close(db_listener *l) {
  if (!l) return;
  ops->listen_close(l->handle);
  free(l);
}

db_rc db_notify_in(db_conn *c, const char *channel) {
  if (engine != DB_POSTGRES) return DB_OK;
  return db_exec_later(c, NULL, NULL, "SELECT pg_notify($1, '')", DB_ARGS(DB_TEXT(channel))); /* with the COMMIT */
}

bool db_ready(int timeout_ms, char reason[128]) {
  if (db_breaker_open()) return snprintf(reason, 128, "database unreachable"), false;
  int64_t deadline = clock_mono_ms() + timeout_ms;
  bool seen = unavailable_seen; /* readiness answers for itself */
  db_conn *c = acquire_until(deadline);
  if (!c) return snprintf(reason, 128, "no database connection free within %d ms", timeout_ms), false;
  arena a;
  arena_init(&a);
  db_deadline_ms = deadline;
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, "SELECT 1", DB_NOARGS);
  int pending = rc == DB_OK ? db_migrations_pending(c, &a) : 0;
  db_deadline_ms = 0;
  unavailable_seen = seen;
  bool late = clock_mono_ms() > deadline;
  db_release(c);
  arena_fini(&a);
  if (rc != DB_OK || pending < 0)
    snprintf(reason, 128, late ? "database did not answer within %d ms" : "database unavailable", timeout_ms);
  else if (late)
    snprintf(reason, 128, "database did not answer within %d ms", timeout_ms);
  else if (pending > 0)
    snprintf(reason, 128, "%d database migration%s not applied", pending, pending == 1 ? "" : "s");
  return rc == DB_OK && pending == 0 && !late;
}

const char *db_text(const db_res *r, int row, int col) {
  if (!r || row < 0 || row >= r->rows || col < 0 || col >= r->cols) return NULL;
  return r->cells[row * r->cols + col];
}

int64_t db_int(const db_res *r, int row, int col) {
  const char *s = db_text(r, row, col);
  if (!s) return 0;
  if (r->ints && r->int_cols[col]) return r->ints[row * r->cols + col];
  return strtoll(s, NULL, 10);
}

double db_real(const db_res *r, int row, int col) {
  const char *s = db_text(r, row, col);
  return s ? strtod(s, NULL) : 0;
}

bool db_isnull(const db_res *r, int row, int col) { return db_text(r, row, col) == NULL; }

size_t db_len(const db_res *r, int row, int col) {
  if (!r || row < 0 || row >= r->rows || col < 0 || col >= r->cols) return 0;
  return r->lens[row * r->cols + col];
}

static unsigned name_hash(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* Answers bind fields to columns by name once per result, but a wide result (GET /jobs/:id:
 * 40 columns, 60 lookups) made that a linear scan of strcmp per lookup: a small hash table
 * is built on the first lookup instead. The first column of a name wins, as before. */
int db_col(const db_res *r, const char *name) {
  if (!r) return -1;
  if (r->cols <= 8) {
    for (int i = 0; i < r->cols; i++)
      if (!strcmp(r->colnames[i], name)) return i;
    return -1;
  }
  db_res *m = (db_res *)r; /* a result is used by one thread: the index is built in place */
  if (!m->col_index) {
    int slots = 16;
    while (slots < 2 * r->cols) slots *= 2;
    m->col_index = xmalloc(sizeof *m->col_index * (size_t)slots);
    for (int i = 0; i < slots; i++) m->col_index[i] = -1;
    for (int c = 0; c < r->cols; c++) {
      unsigned h = name_hash(r->colnames[c]) & (unsigned)(slots - 1);
      bool seen = false;
      while (m->col_index[h] >= 0 && !(seen = !strcmp(r->colnames[m->col_index[h]], r->colnames[c])))
        h = (h + 1) & (unsigned)(slots - 1);
      if (!seen) m->col_index[h] = c;
    }
    m->col_slots = slots;
  }
  for (unsigned h = name_hash(name) & (unsigned)(r->col_slots - 1); r->col_index[h] >= 0;
       h = (h + 1) & (unsigned)(r->col_slots - 1))
    if (!strcmp(r->colnames[r->col_index[h]], name)) return r->col_index[h];
  return -1;
}

const char *db_field(const db_res *r, int row, const char *name) { return db_text(r, row, db_col(r, name)); }

/* ---- result building ---- */

/* Appends a cell's text and its NUL; returns where it starts. A result is bounded by memory
 * alone, which running out of ends the process, as every process-lifetime allocation does. */
static size_t text_put(res_builder *b, const char *s, size_t len) {
  size_t at = buf_len(&b->text);
  if (buf_addn(&b->text, s, len) != BUF_OK || buf_addn(&b->text, "", 1) != BUF_OK) oom();
  return at;
}

void res_begin(res_builder *b, int cols, const char *const *names) {
  memset(b, 0, sizeof *b);
  buf_init(&b->text, BUF_CAP_MAX);
  b->res = xcalloc(1, sizeof *b->res);
  b->res->cols = cols;
  size_t text = 0;
  for (int i = 0; i < cols; i++) text += strlen(names[i] ? names[i] : "") + 1;
  char **colnames = xmalloc(((size_t)cols + 1) * sizeof(char *) + text), *p = (char *)(colnames + cols + 1);
  for (int i = 0; i < cols; i++) {
    size_t n = strlen(names[i] ? names[i] : "") + 1;
    memcpy(p, names[i] ? names[i] : "", n);
    colnames[i] = p, p += n;
  }
  colnames[cols] = NULL;
  b->res->colnames = colnames;
  b->int_cols = xmalloc((size_t)cols + 1);
  for (int i = 0; i < cols; i++) b->int_cols[i] = true;
}

static void cell_room(res_builder *b) {
  if (b->ncells < b->cells_cap) return;
  b->cells_cap = b->cells_cap ? b->cells_cap * 2 : 16;
  b->offsets = xrealloc(b->offsets, b->cells_cap * sizeof *b->offsets);
  b->lens = xrealloc(b->lens, b->cells_cap * sizeof *b->lens);
  if (b->ints) b->ints = xrealloc(b->ints, b->cells_cap * sizeof *b->ints);
}

void res_cell(res_builder *b, const char *text, size_t len) {
  cell_room(b);
  if (text) b->int_cols[b->ncells % (size_t)b->res->cols] = false;
  b->lens[b->ncells] = text ? (uint32_t)len : 0;
  b->offsets[b->ncells++] = text ? text_put(b, text, len) : SIZE_MAX;
}

void res_cell_int(res_builder *b, int64_t v) {
  cell_room(b);
  if (!b->ints) b->ints = xmalloc(b->cells_cap * sizeof *b->ints);
  char text[21], *p = text + sizeof text;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do *--p = (char)('0' + u % 10), u /= 10;
  while (u);
  if (v < 0) *--p = '-';
  size_t len = (size_t)(text + sizeof text - p);
  b->ints[b->ncells] = v;
  b->lens[b->ncells] = (uint32_t)len;
  b->offsets[b->ncells++] = text_put(b, p, len);
}

/* The cell pointer and length arrays of a result of n cells, in one block. */
static void cells_alloc(db_res *r, size_t n) {
  r->cells = xmalloc(n * (sizeof(char *) + sizeof(uint32_t)) + 1);
  r->lens = (uint32_t *)(r->cells + n);
}

db_res *res_finish(res_builder *b, int64_t changes) {
  db_res *r = b->res;
  r->changes = changes;
  r->rows = r->cols ? (int)(b->ncells / (size_t)r->cols) : 0;
  cells_alloc(r, b->ncells);
  if (b->ncells) memcpy(r->lens, b->lens, b->ncells * sizeof *b->lens);
  if (b->ints) { /* kept only when some column held nothing but integers */
    bool any = false;
    for (int c = 0; c < r->cols; c++) any |= b->int_cols[c];
    if (any) r->ints = b->ints, r->int_cols = b->int_cols, b->ints = NULL, b->int_cols = NULL;
  }
  char *text = buf_take(&b->text, NULL);
  for (size_t i = 0; i < b->ncells; i++) r->cells[i] = b->offsets[i] == SIZE_MAX ? NULL : text + b->offsets[i];
  r->store = text, r->store_free = free;
  free(b->offsets);
  free(b->lens);
  free(b->ints);
  free(b->int_cols);
  b->res = NULL;
  return r;
}

void res_abort(res_builder *b) {
  db_res_free(b->res);
  buf_free(&b->text);
  free(b->offsets);
  free(b->lens);
  free(b->ints);
  free(b->int_cols);
  b->res = NULL;
}

db_res *res_wrap(int rows, int cols, void *store, void (*store_free)(void *)) {
  db_res *r = xcalloc(1, sizeof *r);
  r->rows = rows, r->cols = cols;
  r->colnames = xcalloc((size_t)cols + 1, sizeof(char *)); /* names in store: not freed one by one */
  cells_alloc(r, (size_t)rows * (size_t)cols);
  r->store = store, r->store_free = store_free;
  return r;
}

db_res *db_res_copy(const db_res *r) {
  res_builder b;
  res_begin(&b, r->cols, (const char *const *)r->colnames);
  for (int i = 0; i < r->rows * r->cols; i++)
    if (r->ints && r->int_cols[i % r->cols])
      res_cell_int(&b, r->ints[i]);
    else
      res_cell(&b, r->cells[i], r->lens[i]);
  db_res *copy = res_finish(&b, r->changes);
  if (copy->cols) db_col(copy, copy->colnames[0]); /* the column index, built before it is shared */
  return copy;
}

void db_res_free(db_res *r) {
  if (!r) return;
  free(r->colnames); /* with their text (res_begin) or pointing into store (res_wrap) */
  free(r->col_index);
  free(r->cells);
  free(r->ints);
  free(r->int_cols);
  if (r->store_free) r->store_free(r->store);
  free(r);
}
