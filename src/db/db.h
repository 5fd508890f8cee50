/* Storage: one interface over two engines (SQLite, PostgreSQL).
 *
 * SQL is written once with $1..$n placeholders and runs on both engines. Values are bound
 * with their type (db_val), never concatenated. Booleans are stored as integers 0/1,
 * timestamps as integer epoch milliseconds, JSON documents as text, money as integer cents.
 *
 * Connections come from process-wide pools (db_acquire/db_release; db_use_pool picks a
 * thread's pool): hold one only for the duration of the statements that need it, never across
 * slow work such as password hashing, and never two at once. A connection is used by one
 * thread at a time; the pools are thread-safe.
 *
 * Outages. A database that cannot be reached, is locked past its timeout, read-only or out of
 * space makes a statement return DB_UNAVAILABLE (the server answers such a request 503,
 * whatever the handler made of it: db_unavailable_seen). Connections are made and statements
 * waited for with deadlines, so nothing hangs on a server that stopped answering: a statement
 * without an answer for a second makes one thread check whether the server still accepts
 * connections, and gives up when it does not. When the server is found unreachable, a breaker
 * opens: for the next second every statement fails at once instead of each worker waiting on a
 * reconnect, then one statement tries again (the others still fail at once) and its success
 * closes the breaker. */
#ifndef DB_DB_H
#define DB_DB_H
#include "core/arena.h"
#include "core/errors.h"
#include <stdbool.h>
#include <stdint.h>

typedef enum {
  DB_OK = 0,
  DB_ERROR,      /* any other failure; logged by the engine */
  DB_CONSTRAINT, /* a unique, foreign-key or check constraint refused the change */
  DB_UNAVAILABLE, /* unreachable, locked past its timeout, read-only or full: try again later */
} db_rc;

typedef enum { DB_SQLITE, DB_POSTGRES } db_engine;

typedef enum { DBV_NULL, DBV_TEXT, DBV_INT, DBV_REAL } db_val_type;
typedef struct db_val {
  db_val_type type;
  const char *s;
  int64_t i;
  double d;
} db_val;

/* Parameter constructors. DB_TEXT(NULL) binds SQL NULL. */
static inline db_val db_val_text(const char *s) { return (db_val){.type = s ? DBV_TEXT : DBV_NULL, .s = s}; }
#define DB_TEXT(x) db_val_text(x)
#define DB_INT(x) ((db_val){.type = DBV_INT, .i = (int64_t)(x)})
#define DB_REAL(x) ((db_val){.type = DBV_REAL, .d = (double)(x)})
#define DB_BOOL(x) ((db_val){.type = DBV_INT, .i = (x) ? 1 : 0})
#define DB_NULL ((db_val){.type = DBV_NULL})
#define DB_ARGS(...) ((const db_val[]){__VA_ARGS__}), (int)(sizeof((const db_val[]){__VA_ARGS__}) / sizeof(db_val))
#define DB_NOARGS NULL, 0

typedef struct db_conn db_conn;

/* A materialised result: every cell as text (NULL for SQL NULL), with its length. The rows a
 * write affected are in changes. */
typedef struct db_res {
  int rows, cols;
  int64_t changes;
  char **colnames;
  char **cells;   /* rows * cols */
  uint32_t *lens; /* rows * cols: bytes of each cell, 0 for NULL */
  int64_t *ints;  /* rows * cols, or NULL: the values of columns whose cells all came as integers */
  bool *int_cols; /* cols, with ints: which columns those are */
  int *col_index; /* built by the first db_col: an open-addressing table of column numbers */
  int col_slots;
  void *store; /* the engine's storage the cells point into, released with the result */
  void (*store_free)(void *);
} db_res;

/* Which pool a thread's connections come from (db_use_pool). DB_POOL_EVENT exists on SQLite
 * only: one connection per HTTP event thread (HTTP_THREADS), for the reads those threads run
 * themselves (db_reads_inline); they never wait for a lock: a read that finds the file locked
 * (by another process) returns DB_UNAVAILABLE at once. */
typedef enum { DB_POOL_REQUESTS, DB_POOL_SLOW, DB_POOL_EVENT, DB_POOL_COUNT } db_pool_kind;

/* Opens the pools for url ("sqlite:PATH", "postgres://...") with pool_size connections for
 * requests and slow_pool_size for the slow lane and background work (and, on SQLite, the event
 * threads' pool). False with a message in err on failure. */
bool db_open(const char *url, int pool_size, int slow_pool_size, char err[256]);
/* Makes the calling thread take its connections from kind's pool (the default is
 * DB_POOL_REQUESTS). Slow-lane workers and queue workers call it once at start. */
void db_use_pool(db_pool_kind kind);
/* Makes the calling thread's statements planned on every run instead of once per connection
 * (PostgreSQL: the unnamed statement, as behind PgBouncer). For the threads whose tables swing
 * from empty to thousands of rows within seconds (the outbox's pump, the queue's workers): a
 * plan PostgreSQL caches while a table is nearly empty scans it whole, and keeps doing so until
 * the table is next analyzed, up to a minute later (docs/performance-history.md, section 18). */
void db_plan_each_run(void);
/* Change generations, for what a process keeps of its reads (a token's check, a profile): where
 * every write to the database passes through this process (SQLite), a number that moves after
 * each commit that changed a row of a watched table. Read before a read, it labels what that
 * read saw, which stays current while the number is the same. db_watch_table adds a table, at
 * start-up before serving. db_watch_generation is 0 where the engine cannot tell (PostgreSQL:
 * other instances write); a keeper then keeps nothing. Another process writing the SQLite file
 * (an operator's sqlite3 shell; no command of the service writes a table any cache watches)
 * goes unseen: a kept answer is dropped DB_WATCH_TTL_MS after its read. */
#define DB_WATCH_TTL_MS 1000
void db_watch_table(const char *table);
uint64_t db_watch_generation(void);
/* Closes every connection; no connection may be in use. */
void db_close(void);
db_engine db_engine_get(void);
/* True when a read never waits (SQLite in WAL mode: no locks, no network), so a thread that
 * must not block, such as an HTTP event thread, may run one on its own connection. Such a read
 * may still find the file locked by another process (DB_UNAVAILABLE, see DB_POOL_EVENT): the
 * caller then runs it where waiting is allowed. */
bool db_reads_inline(void);

/* A pool's state for metrics: its size, the connections open now (the slow pool opens some
 * as they are first needed), those in use, threads waiting for one now, and acquisitions
 * that had to wait since start. */
typedef struct db_pool_stats {
  int size, open, in_use, waiting;
  long waits;
} db_pool_stats;
void db_pool_stats_get(db_pool_kind kind, db_pool_stats *out);
/* The pool's name in metrics and logs: "requests", "slow", "event". */
const char *db_pool_name(db_pool_kind kind);

/* Borrows a connection, waiting for one when all are in use. Never NULL. */
db_conn *db_acquire(void);
/* Returns a connection taken with db_acquire (for statements that need no transaction; a
 * transaction ends with db_end). An open transaction is rolled back first. */
void db_release(db_conn *c);

/* Runs one statement. When out is not NULL it receives a result owned by the arena a (which
 * must then not be NULL). Returns DB_CONSTRAINT for constraint violations. */
db_rc db_exec(db_conn *c, arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* Runs several statements without parameters (migrations). */
db_rc db_script(db_conn *c, const char *sql);
/* Queues one statement of c's open transaction whose answer nothing before the commit waits
 * for (an INSERT, an UPDATE whose count does not matter): on PostgreSQL it is sent with the
 * transaction's next statement or its COMMIT, in the same round trip (libpq's pipeline mode);
 * a failure (a constraint, say) is returned by that later db_exec or db_end, and the statements
 * after it in the round trip do not run. *out (when out is not NULL) is set only once it was
 * sent, owned by a. Outside a transaction, and on SQLite, it runs at once like db_exec. The
 * parameters are copied. */
db_rc db_exec_later(db_conn *c, arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* Statements whose parameters do not depend on each other's results (reads, mostly): on
 * PostgreSQL sent in one round trip, on SQLite one after the other. Each reads[i].res is set
 * (owned by a) when that statement ran; a failure stops the ones after it and is returned. */
typedef struct db_read {
  const char *sql;
  const db_val *params;
  int n;
  db_res *res; /* out */
} db_read;
db_rc db_exec_all(db_conn *c, arena *a, db_read *reads, int n);
/* A read for db_exec_all or db_query_all whose parameters (not the SQL) are copied into a, so a
 * store can build it from its own locals and hand it to the caller. */
db_read db_read_make(arena *a, const char *sql, const db_val *params, int n);
/* Acquire, run reads together (db_exec_all: one round trip on PostgreSQL), release. For a
 * handler that needs several stores' rows at once: each store builds its db_read. */
db_rc db_query_all(arena *a, db_read *reads, int n);
/* Acquire, run one statement, release. */
db_rc db_query(arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* Acquire, run one query, release: ERR_OK with its rows in *out, ERR_NOT_FOUND when it returned
 * none, ERR_INTERNAL when it failed. For a read of one row by its key. */
err_t db_query_row(arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* Acquire, run one query, release: *found tells whether it returned a row (false on failure). */
db_rc db_exists(bool *found, const char *sql, const db_val *params, int n);
/* Acquire, run one write (a conditional update), release: *changed tells whether it changed a
 * row (false on failure). */
db_rc db_changes(bool *changed, const char *sql, const db_val *params, int n);
/* The same with the number of rows it changed in *count (0 on failure). */
db_rc db_changes_count(int64_t *count, const char *sql, const db_val *params, int n);
/* A retention prune's rows a transaction (db_prune_batch: 500; TEST_LIMIT prune-batch). One
 * DELETE of a whole backlog (an hour's finished background work or live-update events at a busy
 * hour) held the writer for its length, every write waiting behind it, and kept every page it
 * changed in memory: the soak's RSS went from 33 to 75-260 MB; 2,000 rows a transaction left
 * it at 46, 500 at 40, as with no prune at all (docs/performance-history.md, sections 29, 30). */
int db_prune_batch(void);
/* Runs sql, a DELETE of at most `batch` rows (the batch among its parameters), again and again,
 * each time in a transaction of its own, until one deletes fewer than batch. */
db_rc db_delete_in_batches(const char *sql, const db_val *params, int n, int64_t batch);

/* Transactions: the one way to run statements that must commit together, and the one way to
 * end them.
 *
 *   db_conn *c;
 *   err_t e = db_begin(&c);                        acquires a connection, opens the transaction
 *   if (!e) e = db_to_err(db_exec(c, ...));
 *   if (!e) db_on_commit(c, wake, arg);            runs only once committed
 *   e = db_end(c, e);                              commits on ERR_OK, else rolls back; releases
 *
 * db_begin takes the write lock at once on SQLite (BEGIN IMMEDIATE) so two writers never
 * deadlock; on PostgreSQL it is a plain BEGIN (READ COMMITTED) and state changes rely on
 * conditional updates. On failure it releases the connection, sets *c to NULL and returns the
 * error, which db_end(NULL, e) passes through, so the pattern above needs no branch. A thread
 * holds one connection at a time: no db_query() or second db_begin() inside a transaction. */
err_t db_begin(db_conn **c);
/* Runs one write (a conditional update, an insert that may do nothing) on c, inside its
 * transaction: *changed tells whether it changed a row (false on failure). */
db_rc db_changes_in(db_conn *c, bool *changed, const char *sql, const db_val *params, int n);
/* db_begin, then the transaction's first statement (db_exec on *c, its result in out when out is
 * not NULL, owned by a): `err_t e = db_begin_exec(&c, NULL, NULL, "UPDATE ...", DB_ARGS(...));`.
 * A failed statement leaves the transaction open, for db_end to roll back. The parameters are
 * evaluated before the transaction begins (as db_tx reads its time): a value that must be read
 * under its lock (a sequence that orders a list) is read after db_begin instead. */
err_t db_begin_exec(db_conn **c, arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* Registers fn(arg) to run after the transaction on c commits and c is released (in the order
 * registered), on the thread that calls db_end; dropped when it rolls back. For work that must
 * follow a commit and never precede it: waking queue workers, dropping caches, events.
 * Registering the same (fn, arg) twice runs it once. */
void db_on_commit(db_conn *c, void (*fn)(void *arg), void *arg);
/* Registers fn(c, arg) to run on c inside the open transaction just before db_end commits it
 * (in the order registered; the same (fn, arg) once): for writes that must be a transaction's
 * last, such as the events outbox, whose rows must exist exactly when the change commits. A
 * result other than DB_OK rolls the transaction back, and db_end returns its error. done(arg),
 * when not NULL, runs once the transaction ended either way (committed or rolled back, on the
 * thread that ended it), so whatever arg holds can go; on a rollback fn never ran. */
void db_before_commit(db_conn *c, db_rc (*fn)(db_conn *c, void *arg), void (*done)(void *arg), void *arg);
/* Ends the transaction on c: runs what db_before_commit registered, then commits when e is
 * ERR_OK (a failed commit rolls back and returns its error), otherwise rolls back and returns
 * e; releases c; then runs what db_on_commit registered if it committed. c may be NULL
 * (db_begin failed): returns e. */
err_t db_end(db_conn *c, err_t e);
/* Whether c holds an open transaction (for functions that must run inside one). */
bool db_in_tx(const db_conn *c);
/* A transaction with scratch memory of its own: its connection, an arena for its statements'
 * results (freed when it ends: nothing read into it outlives the transaction), and the service
 * time its rows are written at (clock_now_ms, read once for the whole change). For a store's
 * change that reads its own statements' results:
 *
 *   db_tx t;
 *   db_res *r;
 *   err_t e = db_tx_begin(&t);                     db_begin, with t.a and t.now ready
 *   if (!e) e = db_to_err(db_exec(t.c, &t.a, &r, "UPDATE ...", DB_ARGS(..., DB_INT(t.now))));
 *   e = db_tx_end(&t, e);                          db_end, then the arena freed
 *
 * A failed db_tx_begin leaves t.c NULL and the arena ready, so db_tx_end needs no branch. */
typedef struct db_tx {
  db_conn *c;
  arena a;
  int64_t now;
} db_tx;
err_t db_tx_begin(db_tx *t);
/* A db_tx not begun yet, its arena ready and its time read, for a change whose first
 * statement needs t.now: `db_tx x = db_tx_new();` then db_tx_begin_exec(&x, ...), which begins
 * it with that statement (db_begin_exec: its result in out, owned by a). db_tx_end ends it. */
db_tx db_tx_new(void);
err_t db_tx_begin_exec(db_tx *t, arena *a, db_res **out, const char *sql, const db_val *params, int n);
/* db_end(t->c, e), then t's arena freed; returns what db_end returned. */
err_t db_tx_end(db_tx *t, err_t e);

/* The service error for a storage result: constraint violations are conflicts (409), an
 * unavailable database 503. */
static inline err_t db_to_err(db_rc rc) {
  return rc == DB_OK ? ERR_OK : rc == DB_CONSTRAINT ? ERR_CONFLICT : rc == DB_UNAVAILABLE ? ERR_UNAVAILABLE : ERR_INTERNAL;
}

/* Notifications between the processes that share a database: PostgreSQL's LISTEN/NOTIFY.
 * SQLite has none (one process serves a SQLite file): db_listen_open returns NULL and
 * db_notify_in does nothing. A listener holds a connection of its own, outside the pools, and
 * is used by one thread. */
typedef struct db_listener db_listener;
/* Opens a connection that listens on channel (a plain lowercase identifier). NULL on SQLite;
 * on PostgreSQL a listener is returned even when the server cannot be reached now: waiting on
 * it connects again. */
db_listener *db_listen_open(const char *channel);
/* Waits up to timeout_ms for notifications on l and consumes every one that arrived: 1 when
 * one or more did (*bare set when one of them carried no payload), 0 when none did, -1 when the
 * connection was (re)made meanwhile, so any sent while it was down were missed (the caller
 * catches up from the database). */
int db_listen_wait(db_listener *l, int timeout_ms, bool *bare);
void db_listen_close(db_listener *l);
/* Notifies channel's listeners on c, inside its transaction, with no payload: delivered when it
 * commits, not at all when it rolls back (several in one transaction arrive as one). DB_OK on
 * SQLite. */
db_rc db_notify_in(db_conn *c, const char *channel);

/* Whether a statement on the calling thread returned DB_UNAVAILABLE since the thread last
 * called db_unavailable_clear() (the server clears it before each request). */
bool db_unavailable_seen(void);
void db_unavailable_clear(void);
/* True while the breaker is open (the server was found unreachable within the last second). */
bool db_breaker_open(void);
/* Readiness: true when a connection answers `SELECT 1` and every embedded migration is applied,
 * all within timeout_ms; otherwise false with a reason for operators that names no host,
 * user or password. Borrows a connection of the calling thread's pool, waiting for one at most
 * timeout_ms. */
bool db_ready(int timeout_ms, char reason[128]);

/* Round trips: every exchange with the engine (on PostgreSQL one network round trip, however
 * many statements it carries; on SQLite one statement) made by the calling thread since
 * db_trips_clear(). The server clears it before each request and reports it per route. */
int db_trips(void);
void db_trips_clear(void);

/* Guards: a query that must return a row for the request to go on (a token's subject still
 * there at its generation). Where a statement costs a round trip (PostgreSQL) and the thread
 * allows it (db_guard_defer), it is not run at once: it goes in front of the thread's next
 * statement, in the same round trip, and when it finds no row, that statement and all sent
 * with it do not run (they fail with DB_ERROR, unlogged) and db_guard_refused() turns true;
 * from then on every statement of the thread fails so, unsent, until db_guard_clear().
 * Elsewhere it runs at once. *found is its answer when run at once, true when deferred. One
 * guard per thread at a time (a second replaces a first not yet sent). */
db_rc db_guard(bool *found, const char *sql, const db_val *params, int n);
/* Whether the thread's guards may wait for its next statement (the server allows it during a
 * request; whatever acts beyond the database calls db_guard_passed() first). */
void db_guard_defer(bool allowed);
/* Runs a guard still waiting (one round trip) and tells whether a guard found no row. */
bool db_guard_refused(void);
/* Whether the request may act beyond the database: runs a guard still waiting and tells
 * whether every guard ran and found its row. Called before anything else acts for a request
 * (an outbound call, a stored file, a password hashed), so a guard that rides with the first
 * statement never lets a refused token act elsewhere first. */
bool db_guard_passed(void);
/* Forgets the thread's guard and its outcome (before each request). */
void db_guard_clear(void);

/* Cell accessors: row and column are zero-based; name lookups return -1 when absent. */
const char *db_text(const db_res *r, int row, int col);
int64_t db_int(const db_res *r, int row, int col);
double db_real(const db_res *r, int row, int col);
bool db_isnull(const db_res *r, int row, int col);
/* Bytes of a cell (0 for NULL or out of range), without scanning it. */
size_t db_len(const db_res *r, int row, int col);
int db_col(const db_res *r, const char *name);
/* The cell of column name in row (NULL when the column is absent or the value is NULL). */
const char *db_field(const db_res *r, int row, const char *name);

/* A copy of r on the heap, owned by the caller (db_res_free), that threads may read at once:
 * nothing in it is built lazily any more. For results kept beyond a request (caches). */
db_res *db_res_copy(const db_res *r);
void db_res_free(db_res *r);

#endif
