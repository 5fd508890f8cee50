/* The lease's two statements (lease.h), over the owning store's table: both are conditional on
 * the row still naming the request as it was read (op and key), so a request recorded or
 * replaced meanwhile is never touched; the take-over also on nobody having started it since
 * the lease ran out, so of several takers one wins. The table name comes from the store's code,
 * never from input. */
#include "db/lease.h"
#include "core/clock.h"
#include <stdio.h>

/* "UPDATE <l's table> SET <set> WHERE <its row still names the request><also>", in sql. */
static const char *lease_sql(char sql[320], const db_lease *l, const char *set, const char *also) {
  snprintf(sql, 320, "UPDATE %s SET %s WHERE id = $1 AND pending_op = $2 AND idem_key = $3%s", l->table, set, also);
  return sql;
}

int64_t db_lease_over(void) { return clock_now_ms() - DB_LEASE_MS + 1; }

err_t db_lease_take_over(arena *a, const db_lease *l, int64_t stale_before, db_lease_run run) {
  char sql[320];
  bool taken;
  err_t e = db_to_err(db_changes(
      &taken, lease_sql(sql, l, "op_started_at = $4, updated_at = $4", " AND op_started_at < $5"),
      DB_ARGS(DB_TEXT(l->id), DB_TEXT(l->op), DB_TEXT(l->key), DB_INT(clock_now_ms()), DB_INT(stale_before))));
  if (e != ERR_OK) return e;
  if (!taken) return ERR_UNAVAILABLE;
  return run(a, l->id, true);
}

err_t db_lease_leave(const db_lease *l) {
  char sql[320];
  bool left;
  db_changes(&left, lease_sql(sql, l, "op_started_at = $4", ""),
             DB_ARGS(DB_TEXT(l->id), DB_TEXT(l->op), DB_TEXT(l->key), DB_INT(clock_now_ms() - DB_LEASE_MS)));
  return ERR_UNAVAILABLE;
}

db_rc db_claim_first(arena *a, const db_read *claim, const db_read *find, db_res **out, bool *won) {
  db_rc rc = db_query(a, out, claim->sql, claim->params, claim->n);
  *won = rc == DB_OK && (*out)->rows > 0;
  if (rc == DB_OK && !*won) rc = db_query(a, out, find->sql, find->params, find->n);
  return rc;
}
