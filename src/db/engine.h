/* The contract between db.c (pool, dispatch) and each engine file. Internal to src/db. */
#ifndef DB_ENGINE_H
#define DB_ENGINE_H
#include "core/buf.h"
#include "db/db.h"

/* An engine's exec returns this when the server cannot be reached (connect refused or timed
 * out, connection lost and not recovered, no answer while the server accepts no connection):
 * db.c opens the breaker and callers see DB_UNAVAILABLE. */
#define DB_DOWN ((db_rc)100)

/* A batch statement that found no row for a guard (db_guard): the request is refused. */
#define DB_REFUSED ((db_rc)101)
/* A batch statement that did not run because one before it in the same round trip failed. */
#define DB_SKIPPED ((db_rc)102)

/* One statement of a batch (engine_ops.batch). */
typedef struct db_stmt {
  const char *sql;
  const db_val *params;
  int n;
  bool want;   /* keep its result in res */
  bool guard;  /* a guard: its division by zero means DB_REFUSED, not an error to log */
  db_res *res; /* out: the heap result when want and it succeeded */
  db_rc rc;    /* out */
} db_stmt;

/* A deadline (clock_mono_ms) for the calling thread's statements, 0 for none: past it the
 * engine gives up on the statement (and, on PostgreSQL, on the connection) with DB_DOWN. */
extern _Thread_local int64_t db_deadline_ms;
/* Whether the calling thread's statements are planned on every run (db_plan_each_run). */
extern _Thread_local bool db_replan;

typedef struct engine_ops {
  /* Opens one connection; NULL with a message in err. */
  void *(*connect)(const char *url, char err[256]);
  void (*disconnect)(void *h);
  /* Runs one statement; *out (when out != NULL) is a heap result for db_res_free(). Returns
   * DB_UNAVAILABLE for a refusal that says nothing about reaching the server (locked, read-only,
   * full), DB_DOWN when the server cannot be reached. */
  db_rc (*exec)(void *h, const char *sql, const db_val *params, int n, db_res **out);
  db_rc (*script)(void *h, const char *sql);
  /* Optional, for engines where a statement costs a network round trip: runs s[0..n-1] in one
   * round trip, in order, each only when every one before it succeeded (the rest DB_SKIPPED).
   * Returns the first failure (DB_OK when none), DB_DOWN as exec does. */
  db_rc (*batch)(void *h, db_stmt *s, int n);
  /* Optional, for engines without batch whose every read transaction costs more than a short
   * statement (SQLite: the WAL's read lock, taken under a mutex all the process's connections
   * share): runs s[0], a guard (any row: found), and s[1] in one read transaction. s[0].rc is
   * DB_REFUSED (and s[1] not run) when the guard found no row; both DB_SKIPPED, nothing run,
   * when s[1] is not a plain read outside a transaction: db.c then runs them one by one. */
  db_rc (*guard_read)(void *h, db_stmt *s, int n);
  /* Optional, for the same engines: begins (begin) a read transaction on h outside any
   * transaction (DB_SKIPPED inside one), or ends the one it began, so that the reads of one
   * round trip (db_exec_all) see one snapshot under one read lock. */
  db_rc (*read_snapshot)(void *h, bool begin);
  /* Optional: makes h give up at once on a locked database instead of waiting for it (the
   * connections of the HTTP event threads, which must not block). */
  void (*no_wait)(void *h);
  const char *begin_sql;
  /* Every write to the database is made through this process's writer (SQLite), which reports
   * commits that changed a watched table (db_watch_moved), so db_watch_generation can be kept. */
  bool sees_every_write;
  /* Optional (PostgreSQL): a connection of its own that listens on channel; listen_wait as
   * db_listen_wait. */
  void *(*listen_open)(const char *url, const char *channel);
  int (*listen_wait)(void *l, int timeout_ms, bool *bare);
  void (*listen_close)(void *l);
} engine_ops;
/* The members every engine has, its functions prefix_connect, prefix_disconnect, prefix_exec and
 * prefix_script, in an engine_ops initializer (as ext/payments_impl.h's PAY_OPS). */
#define ENGINE_OPS(prefix)                                                                                             \
  .connect = prefix##_connect, .disconnect = prefix##_disconnect, .exec = prefix##_exec, .script = prefix##_script

/* Transactions on a connection the caller already holds, for the db layer's own use (the
 * migration runner keeps one connection, and PostgreSQL's advisory lock, across every
 * migration). Everything else uses db_begin and db_end (db.h). */
db_rc db_held_begin(db_conn *c);
db_rc db_held_commit(db_conn *c); /* rolls back when the commit fails */
void db_held_rollback(db_conn *c);

/* Watched tables (db_watch_table), for engines that see every write: whether a row change of
 * table matters, and the generation's move after a commit (or rollback) that had one. */
bool db_table_watched(const char *table);
void db_watch_moved(void);

extern const engine_ops sqlite_engine_ops;
extern const engine_ops postgres_engine_ops;

/* Result building shared by the engines: cells copied into one growing buffer, which the
 * finished result keeps (no second copy). */
typedef struct res_builder {
  db_res *res;
  struct buf text; /* every cell's text, each followed by a NUL */
  size_t *offsets; /* per cell; SIZE_MAX for NULL */
  uint32_t *lens;
  int64_t *ints;  /* allocated with the first integer cell */
  bool *int_cols; /* per column: every non-NULL cell so far was an integer */
  size_t ncells, cells_cap;
} res_builder;
/* Starts a result of cols columns named names[0..cols-1] (copied, in one allocation). */
void res_begin(res_builder *b, int cols, const char *const *names);
void res_cell(res_builder *b, const char *text, size_t len); /* text NULL: SQL NULL */
/* An integer cell: its decimal text, and the value kept for db_int. */
void res_cell_int(res_builder *b, int64_t v);
db_res *res_finish(res_builder *b, int64_t changes);
void res_abort(res_builder *b);
/* A result over cells and column names that live in the engine's own storage (store,
 * released by store_free with the result): colnames, cells and lens are filled by the
 * caller, cols and rows * cols each. */
db_res *res_wrap(int rows, int cols, void *store, void (*store_free)(void *));
void db_res_free(db_res *r);

#endif
