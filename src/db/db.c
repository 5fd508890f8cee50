/* Pool and dispatch. The pool is a fixed array of connections guarded by one mutex, with a
 * FIFO of waiting threads; engines know nothing of threads. Results are built into one buffer so
 * a row costs a couple of allocations, not one per cell. */
#include "db/db.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "db/engine.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct db_conn {
  void *handle;
  bool in_use;
  bool in_tx;
};

/* A thread waiting for a connection. Released connections go to the oldest waiter directly,
 * so under load no request loses the race for a connection again and again. */
typedef struct waiter {
  struct waiter *next;
  db_conn *given;
  pthread_cond_t cv;
} waiter;

static struct {
  const engine_ops *ops;
  db_engine engine;
  db_conn *conns;
  int size;
  pthread_mutex_t mu;
  waiter *head, *tail;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

bool db_open(const char *url, int pool_size, char err[256]) {
  if (str_starts_with(url, "sqlite:")) {
    pool.ops = &sqlite_engine_ops, pool.engine = DB_SQLITE;
    url += strlen("sqlite:");
  } else {
    pool.ops = &postgres_engine_ops, pool.engine = DB_POSTGRES;
  }
  pool.conns = xcalloc((size_t)pool_size, sizeof *pool.conns);
  pool.size = pool_size;
  for (int i = 0; i < pool_size; i++) {
    pool.conns[i].handle = pool.ops->connect(url, err);
    if (!pool.conns[i].handle) {
      pool.size = i;
      db_close();
      return false;
    }
  }
  return true;
}

void db_close(void) {
  for (int i = 0; i < pool.size; i++) pool.ops->disconnect(pool.conns[i].handle);
  free(pool.conns);
  pool.conns = NULL, pool.size = 0;
}

db_engine db_engine_get(void) { return pool.engine; }

/* Connections this thread holds. A thread that holds one and waits for another can deadlock
 * the pool (every worker of the database lane holds one), so that is a bug: reported, and
 * fatal under APP_ENV=test so the test run finds it. */
static _Thread_local int held;

db_conn *db_acquire(void) {
  if (held++ > 0) {
    log_msg(LOG_ERROR, "db_acquire: nested acquisition on one thread can deadlock the pool");
    if (CFG.env == ENV_TEST) abort();
  }
  pthread_mutex_lock(&pool.mu);
  if (!pool.head)
    for (int i = 0; i < pool.size; i++)
      if (!pool.conns[i].in_use) {
        pool.conns[i].in_use = true;
        pthread_mutex_unlock(&pool.mu);
        return &pool.conns[i];
      }
  waiter w = {.next = NULL, .given = NULL};
  pthread_cond_init(&w.cv, NULL);
  if (pool.tail)
    pool.tail->next = &w;
  else
    pool.head = &w;
  pool.tail = &w;
  while (!w.given) pthread_cond_wait(&w.cv, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_cond_destroy(&w.cv);
  return w.given;
}

void db_release(db_conn *c) {
  if (!c) return;
  held--;
  if (c->in_tx) db_rollback(c);
  pthread_mutex_lock(&pool.mu);
  waiter *w = pool.head;
  if (w) { /* hand over: the connection stays in use */
    pool.head = w->next;
    if (!pool.head) pool.tail = NULL;
    w->given = c;
    pthread_cond_signal(&w->cv);
  } else {
    c->in_use = false;
  }
  pthread_mutex_unlock(&pool.mu);
}

static void res_release(void *p) { db_res_free(p); }

db_rc db_exec(db_conn *c, arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  db_res *r = NULL;
  db_rc rc = pool.ops->exec(c->handle, sql, params, n, out ? &r : NULL);
  if (out) {
    *out = r;
    if (r) arena_defer(a, res_release, r);
  }
  return rc;
}

db_rc db_script(db_conn *c, const char *sql) { return pool.ops->script(c->handle, sql); }

db_rc db_query(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  db_conn *c = db_acquire();
  db_rc rc = db_exec(c, a, out, sql, params, n);
  db_release(c);
  return rc;
}

db_rc db_begin(db_conn *c) {
  db_rc rc = pool.ops->exec(c->handle, pool.ops->begin_sql, NULL, 0, NULL);
  if (rc == DB_OK) c->in_tx = true;
  return rc;
}

db_rc db_commit(db_conn *c) {
  db_rc rc = pool.ops->exec(c->handle, "COMMIT", NULL, 0, NULL);
  if (rc != DB_OK) {
    db_rollback(c);
    return rc;
  }
  c->in_tx = false;
  return DB_OK;
}

void db_rollback(db_conn *c) {
  pool.ops->exec(c->handle, "ROLLBACK", NULL, 0, NULL);
  c->in_tx = false;
}

const char *db_text(const db_res *r, int row, int col) {
  if (!r || row < 0 || row >= r->rows || col < 0 || col >= r->cols) return NULL;
  return r->cells[row * r->cols + col];
}

int64_t db_int(const db_res *r, int row, int col) {
  const char *s = db_text(r, row, col);
  return s ? strtoll(s, NULL, 10) : 0;
}

double db_real(const db_res *r, int row, int col) {
  const char *s = db_text(r, row, col);
  return s ? strtod(s, NULL) : 0;
}

bool db_isnull(const db_res *r, int row, int col) { return db_text(r, row, col) == NULL; }

int db_col(const db_res *r, const char *name) {
  for (int i = 0; r && i < r->cols; i++)
    if (!strcmp(r->colnames[i], name)) return i;
  return -1;
}

const char *db_field(const db_res *r, int row, const char *name) { return db_text(r, row, db_col(r, name)); }

/* ---- result building ---- */

static size_t buf_put(res_builder *b, const char *s, size_t len) {
  if (b->len + len + 1 > b->cap) {
    while (b->len + len + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 256;
    b->buf = xrealloc(b->buf, b->cap);
  }
  size_t at = b->len;
  memcpy(b->buf + at, s, len);
  b->buf[at + len] = 0;
  b->len += len + 1;
  return at;
}

void res_begin(res_builder *b, int cols) {
  memset(b, 0, sizeof *b);
  b->res = xcalloc(1, sizeof *b->res);
  b->res->cols = cols;
  b->res->colnames = xcalloc((size_t)cols + 1, sizeof(char *));
}

void res_colname(res_builder *b, int col, const char *name) { b->res->colnames[col] = xstrdup(name ? name : ""); }

void res_cell(res_builder *b, const char *text, size_t len) {
  if (b->ncells == b->cells_cap) {
    b->cells_cap = b->cells_cap ? b->cells_cap * 2 : 16;
    b->offsets = xrealloc(b->offsets, b->cells_cap * sizeof *b->offsets);
  }
  b->offsets[b->ncells++] = text ? buf_put(b, text, len) : SIZE_MAX;
}

db_res *res_finish(res_builder *b, int64_t changes) {
  db_res *r = b->res;
  r->changes = changes;
  r->rows = r->cols ? (int)(b->ncells / (size_t)r->cols) : 0;
  /* one allocation: the cell pointer array followed by the text */
  char **cells = xmalloc(b->ncells * sizeof(char *) + b->len + 1);
  char *text = (char *)(cells + b->ncells);
  if (b->len) memcpy(text, b->buf, b->len);
  for (size_t i = 0; i < b->ncells; i++) cells[i] = b->offsets[i] == SIZE_MAX ? NULL : text + b->offsets[i];
  r->cells = cells;
  free(b->buf);
  free(b->offsets);
  b->res = NULL;
  return r;
}

void res_abort(res_builder *b) {
  db_res_free(b->res);
  free(b->buf);
  free(b->offsets);
  b->res = NULL;
}

void db_res_free(db_res *r) {
  if (!r) return;
  for (int i = 0; r->colnames && i < r->cols; i++) free(r->colnames[i]);
  free(r->colnames);
  free(r->cells);
  free(r);
}
