/* The erasure of an account and the reads of its export. The erasure runs in one transaction:
 * the jobs that could still be accepted are closed first (a concurrent acceptance either
 * finished before, and is seen by the check that follows, or finds them closed), then the
 * check that no job of the account runs, then the statements below in order, the account's
 * row last: a row count of 0 there (deleted meanwhile) rolls everything back. */
#include "domain/accounts/accounts_store.h"
#include "core/clock.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/events/events.h"
#include "domain/jobs/jobs.h"
#include "domain/quotes/quotes.h"
#include <string.h>

#define RUNNING "('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS')"

static const char *const busy_sql[] = {
    "SELECT 1 FROM jobs WHERE customer_id = $1 AND status IN " RUNNING,
    "SELECT 1 FROM jobs WHERE provider_id = $1 AND status IN " RUNNING,
};

err_t accounts_store_busy(bool provider, const char *id, bool *busy) {
  return db_to_err(db_exists(busy, busy_sql[provider], DB_ARGS(DB_TEXT(id))));
}

err_t accounts_store_held_jobs(arena *a, const char *id, db_res **out) {
  return db_to_err(db_query(a, out,
                            "SELECT j.id FROM jobs j JOIN payments p ON p.job_id = j.id AND p.kind = 'job' "
                            "AND p.released_at IS NULL WHERE j.customer_id = $1 AND j.status <> 'COMPLETED' "
                            "AND p.status = 'AUTHORIZED'",
                            DB_ARGS(DB_TEXT(id))));
}

/* The cells naming the account's stored files, read inside the erasing transaction. */
static const char *const files_sql[][2] = {
    {"SELECT street_view_photo, service_area_photos FROM user_addresses WHERE user_id = $1",
     "SELECT content FROM messages WHERE sender_id = $1 AND sender_role = 'user' AND content LIKE '[IMAGE]%'"},
    {"SELECT logo_url, headshots, id_doc_front, id_doc_back, ins_doc_url FROM providers WHERE id = $1",
     "SELECT content FROM messages WHERE sender_id = $1 AND sender_role = 'provider' AND content LIKE '[IMAGE]%'"},
};

/* Statements with $1 = the account id and $2 = now, in order; the last erases the account. */
static const char *const erase_user_sql[] = {
    "UPDATE messages SET sender_name = '" ACCOUNTS_DELETED_NAME "', content = CASE WHEN content LIKE '[IMAGE]%' "
    "THEN '[Photo removed]' ELSE content END WHERE sender_id = $1 AND sender_role = 'user'",
    "DELETE FROM user_addresses WHERE user_id = $1",
    "DELETE FROM favorites WHERE user_id = $1",
    "DELETE FROM pro_notes WHERE user_id = $1",
    "DELETE FROM seasonal_alerts WHERE user_id = $1",
    "DELETE FROM recurring_requests WHERE customer_id = $1",
    "DELETE FROM notifications WHERE account_id = $1 AND role = 'user'",
    "DELETE FROM banners WHERE account_id = $1 AND role = 'user'",
    "DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'user'",
    "DELETE FROM password_reset_tokens WHERE role = 'user' AND email = (SELECT email FROM users WHERE id = $1)",
    "DELETE FROM email_changes WHERE account_id = $1 AND role = 'user'",
    /* the processor customer and saved card stay: the ledger's captures and refunds use them */
    "UPDATE users SET name = '" ACCOUNTS_DELETED_NAME "', email = 'deleted-' || id || '@deleted', "
    "phone = NULL, address = '', zip = '', lat = NULL, lng = NULL, push_token = NULL, is_premium = 0, "
    "premium_since = NULL, processor_subscription_id = NULL, premium_cancel_at_period_end = 0, "
    "premium_subscribe_key = NULL, premium_subscribe_unconfirmed = 0, seasonal_alerts_enabled = 0, "
    "password_hash = '!', token_gen = token_gen + 1, deleted_at = $2, updated_at = $2 "
    "WHERE id = $1 AND deleted_at IS NULL",
};

static const char *const erase_provider_sql[] = {
    "UPDATE messages SET sender_name = '" ACCOUNTS_DELETED_NAME "', content = CASE WHEN content LIKE '[IMAGE]%' "
    "THEN '[Photo removed]' ELSE content END WHERE sender_id = $1 AND sender_role = 'provider'",
    "DELETE FROM provider_services WHERE provider_id = $1",
    "DELETE FROM provider_zips WHERE provider_id = $1",
    /* customers' favorites of it and notes about it: it can be booked no more */
    "DELETE FROM favorites WHERE provider_id = $1",
    "DELETE FROM pro_notes WHERE provider_id = $1",
    "DELETE FROM recurring_requests WHERE provider_id = $1",
    "DELETE FROM notifications WHERE account_id = $1 AND role = 'provider'",
    "DELETE FROM banners WHERE account_id = $1 AND role = 'provider'",
    "DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'provider'",
    "DELETE FROM password_reset_tokens WHERE role = 'provider' AND email = (SELECT email FROM providers WHERE id = $1)",
    "DELETE FROM email_changes WHERE account_id = $1 AND role = 'provider'",
    "UPDATE providers SET name = '" ACCOUNTS_DELETED_NAME "', email = 'deleted-' || id || '@deleted', "
    "phone = NULL, company_name = NULL, company_url = NULL, logo_url = NULL, insurance_info = NULL, services = '[]', "
    "service_zips = '[]', headshots = '[]', id_doc_front = NULL, id_doc_back = NULL, availability = NULL, "
    "is_premium = 0, premium_since = NULL, preferred_pro_applied_at = NULL, premium_billed_month = NULL, "
    "id_check_status = NULL, id_check_name = NULL, id_check_dob = NULL, id_check_expiry = NULL, "
    "id_check_state = NULL, id_check_flags = NULL, id_check_at = NULL, ins_doc_url = NULL, ins_check_status = NULL, "
    "ins_check_carrier = NULL, ins_check_policy = NULL, ins_check_effective = NULL, ins_check_expiry = NULL, "
    "ins_check_coverage = NULL, ins_check_flags = NULL, ins_check_at = NULL, push_token = NULL, "
    "password_hash = '!', token_gen = token_gen + 1, deleted_at = $2, updated_at = $2 "
    "WHERE id = $1 AND deleted_at IS NULL",
};

err_t accounts_store_erase(bool provider, const char *id, json_t *files) {
  const char *const *sql = provider ? erase_provider_sql : erase_user_sql;
  size_t n = provider ? ARRAY_LEN(erase_provider_sql) : ARRAY_LEN(erase_user_sql);
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  bool busy = false;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(provider ? quotes_withdraw_provider_in(c, id, now) : jobs_erase_customer_in(c, id, now, files));
  if (!e && !provider) e = db_to_err(jobs_reports_forget_customer_in(c, id)); /* kept for the dispute window */
  if (!e) e = db_to_err(events_forget_account_in(c, provider ? "provider" : "user", id));
  if (!e) e = db_to_err(db_exec(c, &a, &r, busy_sql[provider], DB_ARGS(DB_TEXT(id))));
  if (!e && r->rows > 0) busy = true, e = ERR_CONFLICT;
  for (int f = 0; !e && f < 2; f++) {
    e = db_to_err(db_exec(c, &a, &r, files_sql[provider][f], DB_ARGS(DB_TEXT(id))));
    for (int i = 0; !e && i < r->rows; i++)
      for (int col = 0; col < r->cols; col++) common_cell_keys(files, db_text(r, i, col));
  }
  for (size_t i = 0; !e && i < n; i++) {
    db_val args[] = {DB_TEXT(id), DB_INT(now)};
    e = db_to_err(db_exec(c, &a, &r, sql[i], args, strstr(sql[i], "$2") ? 2 : 1));
  }
  if (!e && r->changes == 0) e = ERR_NOT_FOUND;
  e = db_end(c, e);
  if (e != ERR_OK) json_array_clear(files); /* nothing was erased: no file goes */
  arena_fini(&a);
  return busy ? ERR_CONFLICT : e == ERR_CONFLICT ? ERR_INTERNAL : e; /* only a running job is a conflict */
}

/* ---- the export ---- */

typedef struct part_sql {
  const char *key;
  const char *sql[2]; /* [0] customer, [1] provider; NULL: the part is not the role's */
} part_sql;

/* $1 = the account id, $2 = now. */
static const part_sql PARTS[ACCOUNTS_PARTS] = {
    {"account",
     {"SELECT * FROM users WHERE id = $1 AND deleted_at IS NULL",
      "SELECT * FROM providers WHERE id = $1 AND deleted_at IS NULL"}},
    {"addresses", {"SELECT * FROM user_addresses WHERE user_id = $1 ORDER BY created_at, id", NULL}},
    {"jobs",
     {"SELECT * FROM jobs WHERE customer_id = $1 ORDER BY seq",
      "SELECT * FROM jobs WHERE provider_id = $1 ORDER BY seq"}},
    {"quotes",
     {"SELECT q.* FROM quotes q JOIN jobs j ON j.id = q.job_id WHERE j.customer_id = $1 ORDER BY q.seq",
      "SELECT * FROM quotes WHERE provider_id = $1 ORDER BY seq"}},
    {"payments", {"SELECT * FROM payments WHERE user_id = $1 ORDER BY created_at, id", NULL}},
    {"reviews",
     {"SELECT * FROM reviews WHERE customer_id = $1 ORDER BY created_at, id",
      "SELECT * FROM reviews WHERE provider_id = $1 ORDER BY created_at, id"}},
    {"reports", {"SELECT * FROM job_reports WHERE customer_id = $1 ORDER BY created_at, id", NULL}},
    {"recurringRequests",
     {"SELECT * FROM recurring_requests WHERE customer_id = $1 ORDER BY created_at, id",
      "SELECT * FROM recurring_requests WHERE provider_id = $1 ORDER BY created_at, id"}},
    {"messages",
     {"SELECT m.* FROM messages m JOIN jobs j ON j.id = m.job_id WHERE j.customer_id = $1 ORDER BY m.seq",
      "SELECT * FROM messages WHERE provider_id = $1 ORDER BY seq"}},
    {"favorites", {"SELECT provider_id, created_at FROM favorites WHERE user_id = $1 ORDER BY seq", NULL}},
    {"proNotes",
     {"SELECT provider_id, note, created_at, updated_at FROM pro_notes WHERE user_id = $1 ORDER BY created_at, "
      "provider_id",
      NULL}},
    {"notifications",
     {"SELECT * FROM notifications WHERE account_id = $1 AND role = 'user' ORDER BY seq",
      "SELECT * FROM notifications WHERE account_id = $1 AND role = 'provider' ORDER BY seq"}},
    {"supportTickets",
     {"SELECT * FROM support_tickets WHERE account_id = $1 AND account_role = 'user' ORDER BY seq",
      "SELECT * FROM support_tickets WHERE account_id = $1 AND account_role = 'provider' ORDER BY seq"}},
    {"seasonalAlerts", {"SELECT service, sent_at FROM seasonal_alerts WHERE user_id = $1 ORDER BY service", NULL}},
    {"payoutAccount",
     {NULL, "SELECT status, payouts_enabled, requirements, created_at, updated_at FROM payout_accounts "
            "WHERE provider_id = $1"}},
    {"transfers",
     {NULL, "SELECT *, fee_cents + netted_cents AS netted FROM payout_transfers WHERE provider_id = $1 ORDER BY seq"}},
    {"pendingEmailChange",
     {"SELECT email, expires_at FROM email_changes WHERE account_id = $1 AND role = 'user' AND expires_at > $2",
      "SELECT email, expires_at FROM email_changes WHERE account_id = $1 AND role = 'provider' AND expires_at > $2"}},
};

err_t accounts_store_records(arena *a, bool provider, const char *id, account_part out[ACCOUNTS_PARTS], int *n) {
  *n = 0;
  for (int i = 0; i < ACCOUNTS_PARTS; i++) {
    const char *sql = PARTS[i].sql[provider];
    if (!sql) continue;
    db_val args[] = {DB_TEXT(id), DB_INT(clock_now_ms())};
    db_res *r;
    if (db_query(a, &r, sql, args, strstr(sql, "$2") ? 2 : 1) != DB_OK) return ERR_INTERNAL;
    out[(*n)++] = (account_part){PARTS[i].key, r};
  }
  return ERR_OK;
}
