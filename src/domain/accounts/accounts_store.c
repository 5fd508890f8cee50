/* The erasure of an account and the reads of its export, both by the domains' parts of an
 * account (domain/domain.h: forget_in, export_in). The erasure runs in one transaction: each
 * domain erases its rows, those naming others' first, the account's row last (a row count of 0
 * there, deleted meanwhile, rolls everything back); the jobs that could still be accepted are
 * closed on the way (a concurrent acceptance either finished before, and is seen by the check
 * that follows, or finds them closed), then the check that no job of the account runs. */
#include "domain/accounts/accounts_store.h"
#include "core/clock.h"

#define RUNNING "('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS')"

static const char *const busy_sql[] = {
    "SELECT 1 FROM jobs WHERE customer_id = $1 AND status IN " RUNNING,
    "SELECT 1 FROM jobs WHERE provider_id = $1 AND status IN " RUNNING,
};

err_t accounts_store_busy(bool provider, const char *id, bool *busy) {
  return db_to_err(db_exists(busy, busy_sql[provider], DB_ARGS(DB_TEXT(id))));
}

err_t accounts_store_held_jobs(arena *a, const char *id, db_res **out) {
  /* from the customer's jobs (CROSS JOIN: SQLite's order), not from every AUTHORIZED payment */
  return db_to_err(db_query(a, out,
                            "SELECT j.id FROM jobs j CROSS JOIN payments p WHERE p.job_id = j.id AND p.kind = 'job' "
                            "AND p.released_at IS NULL AND j.customer_id = $1 AND j.status <> 'COMPLETED' "
                            "AND p.status = 'AUTHORIZED'",
                            DB_ARGS(DB_TEXT(id))));
}

erase_outcome accounts_store_erase(bool provider, const char *id, json_t *files) {
  const account_ref who = {id, provider ? "provider" : "user", provider, clock_now_ms(), files};
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  bool busy = false;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = domains_forget_in(c, &who, FORGET_ERASE);
  if (!e) e = db_to_err(db_exec(c, &a, &r, busy_sql[provider], DB_ARGS(DB_TEXT(id))));
  if (!e && r->rows > 0) busy = true, e = ERR_CONFLICT; /* rolls back */
  e = db_end(c, e);
  if (e != ERR_OK) json_array_clear(files); /* nothing was erased: no file goes */
  arena_fini(&a);
  return busy ? ERASE_BUSY : e == ERR_NOT_FOUND ? ERASE_GONE : e ? ERASE_FAILED : ERASE_DONE;
}

err_t accounts_store_export(bool provider, const char *id, account_export *x) {
  const account_ref who = {id, provider ? "provider" : "user", provider, clock_now_ms(), NULL};
  db_conn *c = db_acquire();
  err_t e = domains_export_in(c, &who, x);
  db_release(c);
  return e;
}
