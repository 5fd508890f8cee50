/* Storage of the payments domain. Status changes are conditional updates, so a late or
 * repeated webhook and a concurrent request can never both move a payment, and PAID is
 * final. */
#include "domain/payments/payments_store.h"
#include "core/clock.h"
#include <string.h>

err_t pay_store_billing(arena *a, const char *user_id, billing *out) {
  db_res *r;
  if (db_query(a, &r,
               "SELECT id, email, name, processor_customer_id, processor_payment_method_id, processor_subscription_id, "
               "premium_subscribe_key, is_premium, premium_cancel_at_period_end, premium_since FROM users WHERE id = $1",
               DB_ARGS(DB_TEXT(user_id))) != DB_OK)
    return ERR_INTERNAL;
  if (r->rows == 0) return ERR_NOT_FOUND;
  *out = (billing){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3), db_text(r, 0, 4),
                   db_text(r, 0, 5), db_text(r, 0, 6), db_int(r, 0, 7) == 1, db_int(r, 0, 8) == 1, db_text(r, 0, 9)};
  return ERR_OK;
}

/* Sets column (customer id or subscribe key) when NULL and returns the value in force. */
static err_t set_once(arena *a, const char *update_sql, const char *select_sql, const char *user_id, const char *value,
                      const char **winner) {
  if (db_query(a, NULL, update_sql, DB_ARGS(DB_TEXT(user_id), DB_TEXT(value), DB_INT(clock_now_ms()))) != DB_OK)
    return ERR_INTERNAL;
  db_res *r;
  if (db_query(a, &r, select_sql, DB_ARGS(DB_TEXT(user_id))) != DB_OK) return ERR_INTERNAL;
  if (r->rows == 0) return ERR_NOT_FOUND;
  *winner = db_text(r, 0, 0);
  return *winner ? ERR_OK : ERR_INTERNAL;
}

err_t pay_store_set_customer(arena *a, const char *user_id, const char *customer_id, const char **winner) {
  return set_once(a,
                  "UPDATE users SET processor_customer_id = $2, updated_at = $3 "
                  "WHERE id = $1 AND processor_customer_id IS NULL",
                  "SELECT processor_customer_id FROM users WHERE id = $1", user_id, customer_id, winner);
}

err_t pay_store_claim_subscribe_key(arena *a, const char *user_id, const char *key, const char **winner) {
  return set_once(a,
                  "UPDATE users SET premium_subscribe_key = $2, updated_at = $3 "
                  "WHERE id = $1 AND premium_subscribe_key IS NULL",
                  "SELECT premium_subscribe_key FROM users WHERE id = $1", user_id, key, winner);
}

err_t pay_store_clear_subscribe_key(const char *user_id) {
  return db_to_err(db_query(NULL, NULL, "UPDATE users SET premium_subscribe_key = NULL WHERE id = $1",
                          DB_ARGS(DB_TEXT(user_id))));
}

err_t pay_store_set_method(const char *user_id, const char *payment_method_id) {
  return db_to_err(db_query(NULL, NULL, "UPDATE users SET processor_payment_method_id = $2, updated_at = $3 WHERE id = $1",
                          DB_ARGS(DB_TEXT(user_id), DB_TEXT(payment_method_id), DB_INT(clock_now_ms()))));
}

err_t pay_store_clear_method(const char *user_id, const char *payment_method_id) {
  return db_to_err(db_query(NULL, NULL,
                          "UPDATE users SET processor_payment_method_id = NULL, updated_at = $3 "
                          "WHERE id = $1 AND processor_payment_method_id = $2",
                          DB_ARGS(DB_TEXT(user_id), DB_TEXT(payment_method_id), DB_INT(clock_now_ms()))));
}

err_t pay_store_set_premium(const char *user_id, const char *subscription_id, bool active, bool cancel_at_period_end) {
  int64_t now = clock_now_ms();
  return db_to_err(db_query(NULL, NULL,
                          "UPDATE users SET processor_subscription_id = $2, is_premium = $3, "
                          "premium_since = CASE WHEN $3 = 1 THEN COALESCE(premium_since, $5) ELSE NULL END, "
                          "premium_cancel_at_period_end = $4, updated_at = $5 WHERE id = $1",
                          DB_ARGS(DB_TEXT(user_id), DB_TEXT(subscription_id), DB_BOOL(active),
                                  DB_BOOL(cancel_at_period_end), DB_INT(now))));
}

err_t pay_store_set_cancel_flag(const char *user_id, bool cancel_at_period_end) {
  return db_to_err(db_query(NULL, NULL,
                          "UPDATE users SET premium_cancel_at_period_end = $2, updated_at = $3 WHERE id = $1",
                          DB_ARGS(DB_TEXT(user_id), DB_BOOL(cancel_at_period_end), DB_INT(clock_now_ms()))));
}

err_t pay_store_insert(const char *id, const char *job_id, const char *user_id, const char *kind, const char *status,
                       int64_t cents, const char *intent_id, const char *failure_reason) {
  int64_t now = clock_now_ms();
  return db_to_err(db_query(NULL, NULL,
                          "INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, "
                          "processor_payment_intent_id, failure_reason, created_at, updated_at) "
                          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(job_id), DB_TEXT(user_id), DB_TEXT(kind), DB_TEXT(status),
                                  DB_INT(cents), DB_TEXT(intent_id), DB_TEXT(failure_reason), DB_INT(now))));
}

err_t pay_store_find(arena *a, const char *job_id, const char *kind, payment_row *out, bool *found) {
  db_res *r;
  if (db_query(a, &r,
               "SELECT id, job_id, user_id, kind, status, processor_payment_intent_id, amount_cents "
               "FROM payments WHERE job_id = $1 AND kind = $2",
               DB_ARGS(DB_TEXT(job_id), DB_TEXT(kind))) != DB_OK)
    return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found)
    *out = (payment_row){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3),
                         db_text(r, 0, 4), db_text(r, 0, 5), db_int(r, 0, 6)};
  return ERR_OK;
}

err_t pay_store_move(const char *id, const char *from, const char *to, const char *intent_id, bool *moved) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r,
                      "UPDATE payments SET status = $3, "
                      "processor_payment_intent_id = COALESCE($4, processor_payment_intent_id), updated_at = $5 "
                      "WHERE id = $1 AND status = $2",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(from), DB_TEXT(to), DB_TEXT(intent_id), DB_INT(clock_now_ms())));
  *moved = rc == DB_OK && r->changes == 1;
  arena_fini(&a);
  return db_to_err(rc);
}

err_t pay_store_job_status(arena *a, const char *job_id, const char **status) {
  db_res *r;
  db_rc rc = db_query(a, &r, "SELECT status FROM jobs WHERE id = $1", DB_ARGS(DB_TEXT(job_id)));
  *status = rc == DB_OK && r->rows ? db_text(r, 0, 0) : NULL;
  return db_to_err(rc);
}

err_t pay_store_job_terms(arena *a, const char *job_id, const char **status, const char **customer, int64_t *cents) {
  db_res *r;
  db_rc rc = db_query(a, &r,
                      "SELECT j.status, j.customer_id, COALESCE(q.total_cents, 0) FROM jobs j "
                      "LEFT JOIN quotes q ON q.job_id = j.id AND q.status = 'ACCEPTED' WHERE j.id = $1",
                      DB_ARGS(DB_TEXT(job_id)));
  bool found = rc == DB_OK && r->rows;
  *status = found ? db_text(r, 0, 0) : NULL;
  *customer = found ? db_text(r, 0, 1) : NULL;
  *cents = found ? db_int(r, 0, 2) : 0;
  return db_to_err(rc);
}

err_t pay_store_delete(const char *id) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM payments WHERE id = $1", DB_ARGS(DB_TEXT(id))));
}

/* ---- webhook events ---- */

err_t pay_store_holds_subscription(const char *subscription_id, bool *holds) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, "SELECT 1 FROM users WHERE processor_subscription_id = $1",
                      DB_ARGS(DB_TEXT(subscription_id)));
  *holds = rc == DB_OK && r->rows > 0;
  arena_fini(&a);
  return rc == DB_OK ? ERR_OK : ERR_INTERNAL;
}

static const char *str(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* Rows a subscription event applies to: the user holding that subscription, or a user of
 * that customer who holds none (the event then names the subscription the user now has). */
#define SUBSCRIPTION_OWNER "(processor_subscription_id = $1 OR (processor_subscription_id IS NULL AND processor_customer_id = $2))"

static db_rc apply(db_conn *c, const char *type, json_t *o) {
  int64_t now = clock_now_ms();
  const char *id = str(o, "id");
  if (!id) return DB_OK; /* nothing to find it by: ignored */
  if (!strcmp(type, "payment_intent.succeeded"))
    return db_exec(c, NULL, NULL,
                   "UPDATE payments SET status = 'PAID', updated_at = $2 "
                   "WHERE processor_payment_intent_id = $1 AND status IN ('AUTHORIZED', 'FAILED')",
                   DB_ARGS(DB_TEXT(id), DB_INT(now)));
  if (!strcmp(type, "payment_intent.payment_failed") || !strcmp(type, "payment_intent.canceled"))
    return db_exec(c, NULL, NULL,
                   "UPDATE payments SET status = 'FAILED', updated_at = $2 "
                   "WHERE processor_payment_intent_id = $1 AND status = 'AUTHORIZED'",
                   DB_ARGS(DB_TEXT(id), DB_INT(now)));
  const char *customer = str(o, "customer");
  const char *status = str(o, "status");
  bool ended = status && (!strcmp(status, "canceled") || !strcmp(status, "incomplete_expired"));
  if (!strcmp(type, "customer.subscription.deleted") || (!strcmp(type, "customer.subscription.updated") && ended))
    return db_exec(c, NULL, NULL,
                   "UPDATE users SET is_premium = 0, processor_subscription_id = NULL, premium_since = NULL, "
                   "premium_cancel_at_period_end = 0, premium_subscribe_key = NULL, updated_at = $3 "
                   "WHERE " SUBSCRIPTION_OWNER,
                   DB_ARGS(DB_TEXT(id), DB_TEXT(customer), DB_INT(now)));
  if (!strcmp(type, "customer.subscription.updated")) {
    bool active = status && (!strcmp(status, "active") || !strcmp(status, "trialing"));
    return db_exec(c, NULL, NULL,
                   /* premiumSince is when the subscription first became active: a spell of
                      past_due does not move it; only its end (deleted, above) clears it */
                   "UPDATE users SET is_premium = $3, processor_subscription_id = $1, "
                   "premium_since = CASE WHEN $3 = 1 THEN COALESCE(premium_since, $5) ELSE premium_since END, "
                   "premium_cancel_at_period_end = $4, updated_at = $5 WHERE " SUBSCRIPTION_OWNER,
                   DB_ARGS(DB_TEXT(id), DB_TEXT(customer), DB_BOOL(active),
                           DB_BOOL(json_is_true(json_object_get(o, "cancel_at_period_end"))), DB_INT(now)));
  }
  return DB_OK; /* other event types (amount_capturable_updated, ...) need no action */
}

err_t pay_store_apply_event(const char *event_id, const char *type, json_t *object, bool *duplicate) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK)
    rc = db_exec(c, &a, &r,
                 "INSERT INTO webhook_events (id, type, received_at) VALUES ($1, $2, $3) "
                 "ON CONFLICT (id) DO NOTHING RETURNING id",
                 DB_ARGS(DB_TEXT(event_id), DB_TEXT(type), DB_INT(clock_now_ms())));
  *duplicate = rc == DB_OK && r->rows == 0;
  if (rc == DB_OK && !*duplicate) rc = apply(c, type, object);
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  arena_fini(&a);
  return rc == DB_OK ? ERR_OK : ERR_INTERNAL;
}
