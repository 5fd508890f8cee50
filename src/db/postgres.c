/* PostgreSQL engine over libpq. Statements are prepared once per connection (named s<N>),
 * keyed by SQL text plus parameter types: integer parameters are declared int8 and reals
 * float8 so expressions such as `$2 - $3` resolve; text is left for the server to infer.
 * When the server restarts, the next statement finds the connection broken, resets it,
 * forgets its prepared statements and, outside a transaction, runs once more. */
#include "core/log.h"
#include "core/util.h"
#include "db/engine.h"
#include "db/stmt_cache.h"
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INT8OID 20
#define FLOAT8OID 701
#define MAX_PARAMS 64

typedef struct pg_conn {
  PGconn *pg;
  stmt_cache cache;
} pg_conn;

static void pq_clear(void *r) { PQclear(r); }

static void notice_quiet(void *arg, const char *message) { (void)arg, (void)message; }

static void *pg_connect(const char *url, char err[256]) {
  PGconn *pg = PQconnectdb(url);
  if (PQstatus(pg) != CONNECTION_OK) {
    snprintf(err, 256, "postgres connect: %s", PQerrorMessage(pg));
    PQfinish(pg);
    return NULL;
  }
  PQsetNoticeProcessor(pg, notice_quiet, NULL);
  pg_conn *c = xcalloc(1, sizeof *c);
  c->pg = pg;
  return c;
}

static void pg_disconnect(void *h) {
  pg_conn *c = h;
  stmt_cache_clear(&c->cache, NULL);
  PQfinish(c->pg);
  free(c);
}

static db_rc map_result(pg_conn *c, PGresult *r, const char *sql) {
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state && !strncmp(state, "23", 2)) return DB_CONSTRAINT; /* integrity_constraint_violation */
  log_msg(LOG_ERROR, "postgres: %s in: %.200s", r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg), sql);
  return DB_ERROR;
}

/* Recovers a connection the server dropped; true when it is usable again. */
static bool recover(pg_conn *c) {
  if (PQstatus(c->pg) == CONNECTION_OK) return false;
  stmt_cache_clear(&c->cache, NULL);
  PQreset(c->pg);
  bool ok = PQstatus(c->pg) == CONNECTION_OK;
  log_msg(ok ? LOG_WARN : LOG_ERROR, "postgres connection lost; reconnect %s", ok ? "succeeded" : "failed");
  return ok;
}

static PGresult *run(pg_conn *c, const char *sql, const db_val *params, int n, const char **values) {
  char key_types[MAX_PARAMS + 1];
  Oid types[MAX_PARAMS];
  for (int i = 0; i < n; i++) {
    types[i] = params[i].type == DBV_INT ? INT8OID : params[i].type == DBV_REAL ? FLOAT8OID : 0;
    key_types[i] = (char)('0' + params[i].type);
  }
  key_types[n] = 0;
  size_t klen = strlen(sql) + n + 2;
  char *key = xmalloc(klen);
  snprintf(key, klen, "%s\x1f%s", sql, key_types);
  stmt_entry *e = stmt_cache_find(&c->cache, key);
  char name[32];
  if (!e) {
    snprintf(name, sizeof name, "s%d", c->cache.count);
    PGresult *p = PQprepare(c->pg, name, sql, n, types);
    if (PQresultStatus(p) != PGRES_COMMAND_OK) {
      free(key);
      return p;
    }
    PQclear(p);
    e = stmt_cache_add(&c->cache, key);
  }
  free(key);
  snprintf(name, sizeof name, "s%d", e->index);
  return PQexecPrepared(c->pg, name, n, values, NULL, NULL, 0);
}

static db_rc pg_exec(void *h, const char *sql, const db_val *params, int n, db_res **out) {
  pg_conn *c = h;
  if (n > MAX_PARAMS) return DB_ERROR;
  char numbuf[MAX_PARAMS][32];
  const char *values[MAX_PARAMS];
  for (int i = 0; i < n; i++) {
    switch (params[i].type) {
    case DBV_TEXT: values[i] = params[i].s; break;
    case DBV_INT: snprintf(numbuf[i], 32, "%lld", (long long)params[i].i), values[i] = numbuf[i]; break;
    case DBV_REAL: snprintf(numbuf[i], 32, "%.17g", params[i].d), values[i] = numbuf[i]; break;
    default: values[i] = NULL; break;
    }
  }
  /* a broken connection reports PQTRANS_UNKNOWN: that is not a transaction to protect */
  PGTransactionStatusType ts = PQtransactionStatus(c->pg);
  bool in_tx = ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR || ts == PQTRANS_ACTIVE;
  PGresult *r = run(c, sql, params, n, values);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && !in_tx && recover(c)) {
    PQclear(r);
    r = run(c, sql, params, n, values);
    st = PQresultStatus(r);
  }
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    db_rc rc = map_result(c, r, sql);
    PQclear(r);
    if (in_tx) recover(c);
    return rc;
  }
  if (out) { /* the cells stay in the PGresult: nothing is copied */
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
    *out = res;
    return DB_OK;
  }
  PQclear(r);
  return DB_OK;
}

static db_rc pg_script(void *h, const char *sql) {
  pg_conn *c = h;
  PGresult *r = PQexec(c->pg, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK && recover(c)) {
    PQclear(r);
    r = PQexec(c->pg, sql);
  }
  db_rc rc = DB_OK;
  if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) rc = map_result(c, r, "script");
  PQclear(r);
  return rc;
}

const engine_ops postgres_engine_ops = {
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .exec = pg_exec,
    .script = pg_script,
    .begin_sql = "BEGIN",
};
