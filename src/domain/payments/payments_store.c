/* Storage of the payments domain. Status changes are conditional updates, so a late or
 * repeated webhook and a concurrent request can never both move a payment, and PAID is
 * final (only refunds move it on, to REFUNDED). The outcome of a processor request is
 * recorded only while the row still names that request (pending_op and idem_key), so of two
 * carriers of one request one records it; and what the change tells people is queued in the
 * same transaction. No statement here deletes a payment: a job that goes back to PENDING moves
 * its payments to its history (released_at). A refund is a payment_refunds row, completed at
 * most once (by its carrier or by the processor's event, whichever comes first), which is
 * when its amount is added to the payment. Every change a client can see in a job's current
 * payment (its status, amount, intent, hold, failure, refunds) writes a payment.updated event
 * in its transaction (told_in). A change is a db_tx: its rows written at one clock reading,
 * its results in the transaction's own arena. The lease of a request under way (taken over,
 * let go) is db/lease.h's, on this store's table (pay_store_lease). */
#include "domain/payments/payments_store.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/jw.h"
#include "domain/events/events.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>

static payments_tip_writer tip_writer;

void payments_follow_tips(payments_tip_writer write) { tip_writer = write; }

err_t pay_store_billing(arena *a, const char *user_id, billing *out) {
  db_res *r;
  err_t e = db_query_row(
      a, &r,
      "SELECT id, email, name, processor_customer_id, processor_payment_method_id, processor_subscription_id, "
      "premium_subscribe_key, is_premium, premium_cancel_at_period_end, premium_since, "
      "premium_subscribe_unconfirmed FROM users WHERE id = $1",
      DB_ARGS(DB_TEXT(user_id)));
  if (e != ERR_OK) return e;
  *out = (billing){db_text(r, 0, 0),     db_text(r, 0, 1),      db_text(r, 0, 2), db_text(r, 0, 3),
                   db_text(r, 0, 4),     db_text(r, 0, 5),      db_text(r, 0, 6), db_int(r, 0, 7) == 1,
                   db_int(r, 0, 8) == 1, db_int(r, 0, 10) == 1, db_text(r, 0, 9)};
  return ERR_OK;
}

/* Sets column (customer id or subscribe key) when NULL and returns the value in force: the
 * first claim wins, and the others read what it set. */
static err_t set_once(arena *a, const char *update_sql, const char *select_sql, const char *user_id, const char *value,
                      const char **winner) {
  db_res *r;
  bool won;
  const db_read claim = {update_sql, DB_ARGS(DB_TEXT(user_id), DB_TEXT(value), DB_INT(clock_now_ms()))};
  const db_read find = {select_sql, DB_ARGS(DB_TEXT(user_id))};
  if (db_claim_first(a, &claim, &find, &r, &won) != DB_OK) return ERR_INTERNAL;
  if (r->rows == 0) return ERR_NOT_FOUND;
  *winner = db_text(r, 0, 0);
  return *winner ? ERR_OK : ERR_INTERNAL;
}

err_t pay_store_set_customer(arena *a, const char *user_id, const char *customer_id, const char **winner) {
  return set_once(a,
                  "UPDATE users SET processor_customer_id = $2, updated_at = $3 "
                  "WHERE id = $1 AND processor_customer_id IS NULL RETURNING processor_customer_id",
                  "SELECT processor_customer_id FROM users WHERE id = $1", user_id, customer_id, winner);
}

err_t pay_store_claim_subscribe_key(arena *a, const char *user_id, const char *key, const char **winner) {
  return set_once(a,
                  "UPDATE users SET premium_subscribe_key = $2, premium_subscribe_unconfirmed = 0, updated_at = $3 "
                  "WHERE id = $1 AND premium_subscribe_key IS NULL RETURNING premium_subscribe_key",
                  "SELECT premium_subscribe_key FROM users WHERE id = $1", user_id, key, winner);
}

err_t pay_store_clear_subscribe_key(const char *user_id, const char *key) {
  if (!key)
    return db_to_err(db_query(NULL, NULL,
                              "UPDATE users SET premium_subscribe_key = NULL, premium_subscribe_unconfirmed = 0 "
                              "WHERE id = $1",
                              DB_ARGS(DB_TEXT(user_id))));
  return db_to_err(db_query(NULL, NULL,
                            "UPDATE users SET premium_subscribe_key = NULL, premium_subscribe_unconfirmed = 0 "
                            "WHERE id = $1 AND premium_subscribe_key = $2",
                            DB_ARGS(DB_TEXT(user_id), DB_TEXT(key))));
}

err_t pay_store_mark_subscribe_unconfirmed(const char *user_id, const char *key) {
  return db_to_err(db_query(
      NULL, NULL, "UPDATE users SET premium_subscribe_unconfirmed = 1 WHERE id = $1 AND premium_subscribe_key = $2",
      DB_ARGS(DB_TEXT(user_id), DB_TEXT(key))));
}

err_t pay_store_set_method(const char *user_id, const char *payment_method_id) {
  json_t *payload = json_pack("{s:s,s:s}", "userId", user_id, "paymentMethodId", payment_method_id);
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) /* with the queue's insert and the COMMIT */
    e = db_to_err(db_exec_later(c, NULL, NULL,
                                "UPDATE users SET processor_payment_method_id = $2, updated_at = $3 WHERE id = $1",
                                DB_ARGS(DB_TEXT(user_id), DB_TEXT(payment_method_id), DB_INT(clock_now_ms()))));
  if (!e) e = db_to_err(queue_enqueue(c, "payment_recover", payload));
  json_decref(payload);
  return db_end(c, e);
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

/* payment.updated for payment id, on c, when it is a job's current payment (the `payment` of GET
 * /jobs/:id): to the job's customer and provider and to the support roles that read them. */
static db_rc told_in(db_conn *c, const char *id) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r,
                     "SELECT p.id, p.status, p.amount_cents, p.processor_payment_intent_id, p.hold_expires_at, "
                     "p.failure_reason, p.refunded_cents, p.dispute_json, p.job_id, j.customer_id, j.provider_id "
                     "FROM payments p "
                     "JOIN jobs j ON j.id = p.job_id WHERE p.id = $1 AND p.kind = 'job' AND p.released_at IS NULL",
                     DB_ARGS(DB_TEXT(id)));
  if (rc == DB_OK && r->rows == 1) {
    jw w;
    jw_init(&w, &a, 512);
    jw_obj(&w);
    jw_key_str(&w, "jobId", db_field(r, 0, "job_id"));
    jw_key(&w, "payment");
    hs_rj_object(&w, hs_rj_bind(&a, PAYMENTS_JSON, r), r, 0);
    jw_obj_end(&w);
    event_new ev = {.kind = "payment.updated",
                    .data = jw_text(&w),
                    .user_id = db_field(r, 0, "customer_id"),
                    .provider_id = db_field(r, 0, "provider_id"),
                    .staff = ROLE_CUSTOMER_SUPPORT | ROLE_PROFESSIONAL_SUPPORT};
    rc = events_emit_in(c, &ev);
  }
  arena_fini(&a);
  return rc;
}

/* The news of a change, on c. */
static db_rc announce(db_conn *c, const pay_news *news) {
  db_rc rc = DB_OK;
  if (news && news->to) rc = mail_enqueue(c, news->to, news->subject, news->body);
  for (int i = 0; news && rc == DB_OK && i < news->nnotes; i++) rc = notify_in(c, &news->notes[i]);
  return rc;
}

pay_insert_outcome pay_store_insert(const payment_row *p, const pay_news *news) {
  bool pending = p->pending_op != NULL;
  db_tx x;
  err_t e = db_tx_begin(&x);
  if (!e)
    e = db_to_err(db_exec(
        x.c, NULL, NULL,
        "INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, failure_reason, pending_op, "
        "idem_key, payment_method_id, op_started_at, attempts, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)",
        DB_ARGS(DB_TEXT(p->id), DB_TEXT(p->job_id), DB_TEXT(p->user_id), DB_TEXT(p->kind), DB_TEXT(p->status),
                DB_INT(p->amount_cents), DB_TEXT(p->failure_reason), DB_TEXT(p->pending_op), DB_TEXT(p->idem_key),
                DB_TEXT(p->method_id), pending ? DB_INT(x.now) : DB_NULL, DB_INT(pending ? 1 : 0), DB_INT(x.now))));
  if (!e) e = db_to_err(told_in(x.c, p->id));
  if (!e) e = db_to_err(announce(x.c, news));
  e = db_tx_end(&x, e);
  if (e == ERR_OK) return PAY_INSERTED;
  return e == ERR_CONFLICT ? PAY_INSERT_TAKEN : e == ERR_UNAVAILABLE ? PAY_INSERT_UNAVAILABLE : PAY_INSERT_FAILED;
}

#define ROW_COLUMNS                                                                                                    \
  "id, job_id, user_id, kind, status, processor_payment_intent_id, failure_reason, pending_op, idem_key, "             \
  "payment_method_id, hold_method_id, amount_cents, op_started_at, attempts, hold_expires_at, refunded_cents, "        \
  "released_at, card_brand, card_last4, lost_cents, dispute_json"

#define CURRENT "job_id = $1 AND kind = $2 AND released_at IS NULL"

static db_rc read_rows(arena *a, const char *where, const char *key, const char *kind, db_res **r) {
  const char *sql = arena_printf(a, "SELECT " ROW_COLUMNS " FROM payments WHERE %s", where);
  return kind ? db_query(a, r, sql, DB_ARGS(DB_TEXT(key), DB_TEXT(kind))) : db_query(a, r, sql, DB_ARGS(DB_TEXT(key)));
}

static err_t read_row(arena *a, const char *where, const char *key, const char *kind, payment_row *out, bool *found) {
  db_res *r;
  if (read_rows(a, where, key, kind, &r) != DB_OK) return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found)
    *out = (payment_row){db_text(r, 0, 0),  db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3), db_text(r, 0, 4),
                         db_text(r, 0, 5),  db_text(r, 0, 6), db_text(r, 0, 7), db_text(r, 0, 8), db_text(r, 0, 9),
                         db_text(r, 0, 10), db_int(r, 0, 11), db_int(r, 0, 12), db_int(r, 0, 13), db_int(r, 0, 14),
                         db_int(r, 0, 15),  db_int(r, 0, 16), db_text(r, 0, 17), db_text(r, 0, 18), db_int(r, 0, 19),
                         db_text(r, 0, 20)};
  return ERR_OK;
}

err_t pay_store_find(arena *a, const char *job_id, const char *kind, payment_row *out, bool *found) {
  return read_row(a, CURRENT, job_id, kind, out, found);
}

err_t pay_store_find_rows(arena *a, const char *job_id, const char *kind, db_res **out) {
  return db_to_err(read_rows(a, CURRENT, job_id, kind, out));
}

err_t pay_store_get(arena *a, const char *id, payment_row *out, bool *found) {
  return read_row(a, "id = $1", id, NULL, out, found);
}

/* Runs a conditional update of payment id; *changed tells whether it changed a row. told: the
 * change is one a client sees (payment.updated in the same transaction). */
static err_t update(const char *id, bool told, const char *sql, const db_val *params, int n, bool *changed) {
  db_tx x;
  db_res *r;
  err_t e = db_tx_begin(&x);
  if (!e) e = db_to_err(db_exec(x.c, &x.a, &r, sql, params, n));
  *changed = !e && r->changes == 1;
  if (*changed && told) e = db_to_err(told_in(x.c, id));
  e = db_tx_end(&x, e);
  if (e) *changed = false;
  return e;
}

err_t pay_store_claim(const char *id, const char *from, const char *op, const char *key, const char *method,
                      int64_t cents, bool *claimed) {
  return update(
      id, true,
      "UPDATE payments SET pending_op = $3, idem_key = $4, payment_method_id = COALESCE($5, payment_method_id), "
      "amount_cents = CASE WHEN $6 > 0 THEN $6 ELSE amount_cents END, op_started_at = $7, "
      "status = CASE WHEN $3 IN ('authorize', 'charge', 'tip') THEN 'PENDING' ELSE status END, "
      "attempts = attempts + 1, updated_at = $7 WHERE id = $1 AND status = $2 AND pending_op IS NULL",
      DB_ARGS(DB_TEXT(id), DB_TEXT(from), DB_TEXT(op), DB_TEXT(key), DB_TEXT(method), DB_INT(cents),
              DB_INT(clock_now_ms())),
      claimed);
}

db_lease pay_store_lease(const payment_row *p) { return (db_lease){"payments", p->id, p->pending_op, p->idem_key}; }

err_t pay_store_switch(const payment_row *p, const char *op, const char *key, const char *method, bool *switched) {
  return update(
      p->id, true,
      "UPDATE payments SET pending_op = $4, idem_key = $5, payment_method_id = COALESCE($6, payment_method_id), "
      "status = 'PENDING', hold_expires_at = NULL, attempts = attempts + 1, op_started_at = $7, updated_at = $7 "
      "WHERE id = $1 AND pending_op = $2 AND idem_key = $3",
      DB_ARGS(DB_TEXT(p->id), DB_TEXT(p->pending_op), DB_TEXT(p->idem_key), DB_TEXT(op), DB_TEXT(key), DB_TEXT(method),
              DB_INT(clock_now_ms())),
      switched);
}

/* A payment captured for less than it held (a partial capture: cents, the captured amount, is
 * above 0 and below amount_cents) records the captured amount, and keeps what it held. */
#define CAPTURED(cents) "CASE WHEN " cents " > 0 AND " cents " < amount_cents THEN " cents " ELSE amount_cents END"
#define AUTHORIZED(cents)                                                                                              \
  "CASE WHEN " cents " > 0 AND " cents " < amount_cents THEN amount_cents ELSE authorized_cents END"

/* Ends p's pending request in x when it is still that request (*cleared), its outcome recorded
 * by the caller. */
static db_rc clear_request(db_tx *x, const payment_row *p, bool *cleared) {
  db_res *r;
  db_rc rc = db_exec(x->c, &x->a, &r,
                     "UPDATE payments SET pending_op = NULL, op_started_at = NULL, updated_at = $4 "
                     "WHERE id = $1 AND pending_op = $2 AND idem_key = $3",
                     DB_ARGS(DB_TEXT(p->id), DB_TEXT(p->pending_op), DB_TEXT(p->idem_key), DB_INT(x->now)));
  *cleared = rc == DB_OK && r->changes == 1;
  return rc;
}

/* What follows the outcome s of p's request once recorded, on c: a replaced hold's
 * cancellation, a paid tip's amount on its job, payment.updated, the provider's transfer of a
 * payment PAID, and the news. */
static db_rc settled_in(db_conn *c, const payment_row *p, const pay_settle *s) {
  db_rc rc = DB_OK;
  bool paid = !strcmp(s->status, "PAID");
  if (s->cancel_intent) {
    json_t *payload = json_pack("{s:s}", "intentId", s->cancel_intent);
    rc = queue_enqueue(c, "payment_cancel_hold", payload);
    json_decref(payload);
  }
  if (rc == DB_OK && !strcmp(p->kind, "tip") && paid) rc = tip_writer(c, p->job_id, p->amount_cents);
  if (rc == DB_OK) rc = told_in(c, p->id);
  if (rc == DB_OK && paid) rc = payouts_captured_in(c, p->id); /* the provider's share */
  if (rc == DB_OK) rc = announce(c, s->news);
  return rc;
}

err_t pay_store_settle(const payment_row *p, const pay_settle *s, bool *moved) {
  db_tx x;
  db_res *r = NULL;
  err_t e = db_tx_begin(&x);
  db_rc rc = e ? DB_ERROR : DB_OK;
  /* PAID is final: a payment a processor event made PAID while this request ran keeps it */
  if (rc == DB_OK)
    rc = db_exec(
        x.c, &x.a, &r,
        "UPDATE payments SET status = $4, processor_payment_intent_id = COALESCE($5, processor_payment_intent_id), "
        "hold_expires_at = $6, hold_method_id = COALESCE($7, hold_method_id), failure_reason = $8, "
        "paid_at = CASE WHEN $4 = 'PAID' THEN $9 ELSE paid_at END, pending_op = NULL, op_started_at = NULL, "
        "amount_cents = " CAPTURED("$10") ", authorized_cents = " AUTHORIZED(
            "$10") ", "
                   "card_brand = COALESCE($11, card_brand), card_last4 = COALESCE($12, card_last4), "
                   "updated_at = $9 WHERE id = $1 AND pending_op = $2 AND idem_key = $3 AND status <> 'PAID'",
        DB_ARGS(DB_TEXT(p->id), DB_TEXT(p->pending_op), DB_TEXT(p->idem_key), DB_TEXT(s->status), DB_TEXT(s->intent_id),
                s->hold_expires_at ? DB_INT(s->hold_expires_at) : DB_NULL, DB_TEXT(s->hold_method),
                DB_TEXT(s->failure_reason), DB_INT(x.now), DB_INT(s->captured_cents), DB_TEXT(s->card_brand),
                DB_TEXT(s->card_last4)));
  bool changed = rc == DB_OK && r->changes == 1, cleared;
  if (rc == DB_OK && !changed) rc = clear_request(&x, p, &cleared);
  if (rc == DB_OK && changed) rc = settled_in(x.c, p, s);
  e = db_tx_end(&x, e ? e : db_to_err(rc));
  *moved = !e && changed;
  return e;
}

/* ---- refunds ---- */

err_t pay_store_claim_refund(const payment_row *p, const refund_row *f, const audit_action *act, bool *claimed) {
  db_tx x = db_tx_new();
  db_res *r = NULL;
  err_t e = db_tx_begin_exec(&x, &x.a, &r,
                             "UPDATE payments SET pending_op = 'refund', idem_key = $2, op_started_at = $4, "
                             "attempts = attempts + 1, updated_at = $4 WHERE id = $1 AND status = 'PAID' "
                             "AND pending_op IS NULL AND refunded_cents + $3 <= amount_cents",
                             DB_ARGS(DB_TEXT(p->id), DB_TEXT(f->idem_key), DB_INT(f->amount_cents), DB_INT(x.now)));
  *claimed = !e && r->changes == 1;
  if (*claimed)
    e = db_to_err(
        db_exec(x.c, NULL, NULL,
                "INSERT INTO payment_refunds (id, payment_id, amount_cents, reason, source, staff_id, status, "
                "idem_key, provider_share, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, $8, "
                "$9, $9)",
                DB_ARGS(DB_TEXT(f->id), DB_TEXT(p->id), DB_INT(f->amount_cents), DB_TEXT(f->reason), DB_TEXT(f->source),
                        DB_TEXT(f->staff_id), DB_TEXT(f->idem_key),
                        DB_TEXT(f->provider_share ? f->provider_share : "prorata"), DB_INT(x.now))));
  if (!e && *claimed && act) e = audit_log_in(x.c, act); /* the transaction's last write */
  e = db_tx_end(&x, e);                                  /* unclaimed, nothing was written */
  if (e) *claimed = false;
  return e;
}

#define REFUND_COLUMNS                                                                                                 \
  "id, payment_id, reason, source, staff_id, status, idem_key, processor_refund_id, failure_reason, amount_cents, "    \
  "created_at, provider_share"

static void refund_from(const db_res *r, int i, refund_row *out) {
  *out = (refund_row){db_text(r, i, 0), db_text(r, i, 1), db_text(r, i, 2),  db_text(r, i, 3),
                      db_text(r, i, 4), db_text(r, i, 5), db_text(r, i, 6),  db_text(r, i, 7),
                      db_text(r, i, 8), db_int(r, i, 9),  db_int(r, i, 10), db_text(r, i, 11)};
}

err_t pay_store_refund_by_key(arena *a, const char *idem_key, refund_row *out, bool *found) {
  db_res *r;
  if (db_query(a, &r, "SELECT " REFUND_COLUMNS " FROM payment_refunds WHERE idem_key = $1",
               DB_ARGS(DB_TEXT(idem_key))) != DB_OK)
    return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found) refund_from(r, 0, out);
  return ERR_OK;
}

/* Adds cents to what was refunded of payment id (REFUNDED once it is all), on c; the
 * provider's transfer follows (reduced, or its refunded share reversed), unless the platform
 * bears the refund alone (goodwill: providerShare "none"). */
static db_rc add_refunded(db_conn *c, const char *id, int64_t cents, bool goodwill, int64_t now) {
  db_rc rc = db_exec(c, NULL, NULL,
                     "UPDATE payments SET refunded_cents = CASE WHEN refunded_cents + $2 > amount_cents THEN "
                     "amount_cents ELSE refunded_cents + $2 END, status = CASE WHEN refunded_cents + $2 >= "
                     "amount_cents THEN 'REFUNDED' ELSE status END, goodwill_cents = goodwill_cents + $4, "
                     "updated_at = $3 WHERE id = $1 AND status IN ('PAID', 'REFUNDED')",
                     DB_ARGS(DB_TEXT(id), DB_INT(cents), DB_INT(now), DB_INT(goodwill ? cents : 0)));
  if (rc == DB_OK) rc = told_in(c, id);
  return rc == DB_OK ? payouts_refunded_in(c, id) : rc;
}

/* Completes the PENDING refund under idem_key as made (the processor's refund_id) and adds its
 * amount to its payment; *added is that amount, 0 when it was completed before. */
static db_rc complete_refund(db_conn *c, arena *a, const char *idem_key, const char *refund_id, int64_t now,
                             int64_t *added) {
  db_res *r;
  *added = 0;
  db_rc rc = db_exec(c, a, &r,
                     "UPDATE payment_refunds SET status = 'SUCCEEDED', processor_refund_id = $2, updated_at = $3 "
                     "WHERE idem_key = $1 AND status = 'PENDING' RETURNING payment_id, amount_cents, provider_share",
                     DB_ARGS(DB_TEXT(idem_key), DB_TEXT(refund_id), DB_INT(now)));
  if (rc != DB_OK || r->rows != 1) return rc;
  *added = db_int(r, 0, 1);
  return add_refunded(c, db_text(r, 0, 0), *added, !strcmp(db_text(r, 0, 2), "none"), now);
}

err_t pay_store_settle_refund(const payment_row *p, const char *processor_refund_id, const char *failure_reason,
                              const pay_news *news, bool *moved) {
  int64_t added = 0;
  bool changed = false;
  db_tx x;
  err_t e = db_tx_begin(&x);
  db_rc rc = e ? DB_ERROR : DB_OK;
  if (rc == DB_OK) rc = clear_request(&x, p, &changed);
  if (rc == DB_OK && changed && processor_refund_id)
    rc = complete_refund(x.c, &x.a, p->idem_key, processor_refund_id, x.now, &added);
  else if (rc == DB_OK && changed)
    rc = db_exec(x.c, NULL, NULL,
                 "UPDATE payment_refunds SET status = 'FAILED', failure_reason = $2, updated_at = $3 "
                 "WHERE idem_key = $1 AND status = 'PENDING'",
                 DB_ARGS(DB_TEXT(p->idem_key), DB_TEXT(failure_reason), DB_INT(x.now)));
  if (rc == DB_OK && added) rc = announce(x.c, news);
  e = db_tx_end(&x, e ? e : db_to_err(rc));
  *moved = !e && changed;
  return e;
}

/* Records the refunds of a charge that the processor reports (charge.refunded) on the
 * payment of its intent: each completes the service's own refund of that key, or is recorded
 * as one made at the processor, once (by the processor's refund id). */
static db_rc processor_refunds(db_conn *c, arena *a, json_t *charge, const pay_event *ev, pay_event_effect *out) {
  const char *intent = json_string_value(json_object_get(charge, "payment_intent"));
  db_res *r;
  if (!intent) return DB_OK;
  db_rc rc =
      db_exec(c, a, &r, "SELECT id FROM payments WHERE processor_payment_intent_id = $1", DB_ARGS(DB_TEXT(intent)));
  if (rc != DB_OK || r->rows != 1) return rc;
  const char *payment = db_text(r, 0, 0);
  int64_t now = clock_now_ms(), total = 0;
  for (int i = 0; rc == DB_OK && i < ev->nrefunds; i++) {
    const pay_refund *f = &ev->refunds[i];
    int64_t added = 0;
    if (strcmp(f->status, "succeeded") && strcmp(f->status, "pending")) continue; /* failed or canceled */
    if (f->idem_key[0]) rc = complete_refund(c, a, f->idem_key, f->id, now, &added);
    if (rc == DB_OK && !added) {
      char id[ID_LEN + 1];
      id_new(id);
      db_res *ins;
      rc = db_exec(c, a, &ins,
                   "INSERT INTO payment_refunds (id, payment_id, amount_cents, reason, source, status, "
                   "processor_refund_id, created_at, updated_at) VALUES ($1, $2, $3, "
                   "'Refunded at the payment processor', 'processor', 'SUCCEEDED', $4, $5, $5) "
                   "ON CONFLICT (processor_refund_id) DO NOTHING RETURNING id",
                   DB_ARGS(DB_TEXT(id), DB_TEXT(payment), DB_INT(f->amount), DB_TEXT(f->id), DB_INT(now)));
      if (rc == DB_OK && ins->rows == 1 && (rc = add_refunded(c, payment, f->amount, false, now)) == DB_OK)
        added = f->amount, out->processor_cents += added;
    }
    total += added;
  }
  if (rc == DB_OK && total) out->refunded = payment, out->refunded_cents = total;
  return rc;
}

/* ---- a job's payment history ---- */

db_rc pay_store_history_in(db_conn *c, const char *job_id, const char *provider_id, bool stale_only, int *released) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t now = clock_now_ms();
  *released = 0;
  db_rc rc = provider_id ? db_exec(c, &a, &r,
                                   "SELECT p.id, p.kind, p.job_id FROM payments p JOIN jobs j ON j.id = p.job_id "
                                   "WHERE p.released_at IS NULL AND j.provider_id = $1 AND j.status <> 'CANCELLED'",
                                   DB_ARGS(DB_TEXT(provider_id)))
             : stale_only
                 ? db_exec(c, &a, &r,
                           "SELECT p.id, p.kind, p.job_id FROM payments p JOIN jobs j ON j.id = p.job_id "
                           "WHERE p.released_at IS NULL AND p.job_id = $1 "
                           "AND p.created_at < COALESCE(j.accepted_at, 0)",
                           DB_ARGS(DB_TEXT(job_id)))
                 : db_exec(c, &a, &r, "SELECT id, kind, job_id FROM payments WHERE released_at IS NULL AND job_id = $1",
                           DB_ARGS(DB_TEXT(job_id)));
  for (int i = 0; rc == DB_OK && i < r->rows; i++) {
    const char *id = db_text(r, i, 0);
    db_res *u;
    rc = db_exec(c, &a, &u,
                 "UPDATE payments SET released_at = $2, updated_at = $2 WHERE id = $1 AND released_at IS NULL",
                 DB_ARGS(DB_TEXT(id), DB_INT(now)));
    if (rc != DB_OK || u->changes != 1) continue;
    (*released)++;
    if (!strcmp(db_text(r, i, 1), "tip")) /* the job's tipAmount goes with it */
      rc = tip_writer(c, db_text(r, i, 2), -1);
    json_t *payload = json_pack("{s:s}", "paymentId", id);
    if (rc == DB_OK) rc = queue_enqueue(c, "payment_release", payload);
    json_decref(payload);
  }
  arena_fini(&a);
  return rc;
}

err_t pay_store_history(const char *job_id, bool stale_only, int *released) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(pay_store_history_in(c, job_id, NULL, stale_only, released));
  return db_end(c, e);
}

err_t pay_store_record_duplicate(arena *a, const payment_row *p, const char *intent, int64_t cents, const char **id) {
  char fresh[ID_LEN + 1];
  id_new(fresh);
  *id = NULL;
  json_t *payload = json_pack("{s:s}", "paymentId", fresh);
  db_tx x = db_tx_new();
  db_res *r = NULL;
  err_t e = db_tx_begin_exec(
      &x, &x.a, &r,
      "INSERT INTO payments (id, job_id, user_id, kind, status, amount_cents, "
      "processor_payment_intent_id, attempts, created_at, updated_at, paid_at, released_at) "
      "VALUES ($1, $2, $3, 'duplicate', 'PAID', $4, $5, 0, $6, $6, $6, $6) "
      "ON CONFLICT (processor_payment_intent_id) DO NOTHING RETURNING id",
      DB_ARGS(DB_TEXT(fresh), DB_TEXT(p->job_id), DB_TEXT(p->user_id), DB_INT(cents), DB_TEXT(intent), DB_INT(x.now)));
  if (!e && r->rows == 1) e = db_to_err(queue_enqueue(x.c, "payment_release", payload)); /* refunds it */
  json_decref(payload);
  e = db_tx_end(&x, e);
  /* the charge's record, this one or one made first */
  if (!e &&
      db_query(a, &r, "SELECT id FROM payments WHERE processor_payment_intent_id = $1", DB_ARGS(DB_TEXT(intent))) ==
          DB_OK &&
      r->rows == 1)
    *id = db_text(r, 0, 0);
  return e ? e : *id ? ERR_OK : ERR_INTERNAL;
}

err_t pay_store_context(arena *a, const char *job_id, pay_context *out) {
  db_res *r;
  err_t e = db_query_row(a, &r,
                         "SELECT u.email, u.name, j.provider_id, j.service, j.status, q.id, pr.name, q.amount_cents, "
                         "q.total_cents FROM jobs j JOIN users u ON u.id = j.customer_id "
                         "LEFT JOIN quotes q ON q.job_id = j.id AND q.status = 'ACCEPTED' "
                         "LEFT JOIN providers pr ON pr.id = j.provider_id WHERE j.id = $1",
                         DB_ARGS(DB_TEXT(job_id)));
  if (e != ERR_OK) return e;
  *out = (pay_context){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3), db_text(r, 0, 4),
                       db_text(r, 0, 5), db_text(r, 0, 6), db_int(r, 0, 7),  db_int(r, 0, 8)};
  return ERR_OK;
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

#define JOB_OPEN "('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS')"

err_t pay_store_holds_due(arena *a, int64_t before, int limit, db_res **out) {
  return db_query(a, out,
                  /* a hold recorded without its expiry lapses 7 days after the payment was made, at the latest */
                  "SELECT p.id FROM payments p JOIN jobs j ON j.id = p.job_id WHERE p.status = 'AUTHORIZED' "
                  "AND p.kind = 'job' AND p.released_at IS NULL AND p.pending_op IS NULL "
                  "AND COALESCE(p.hold_expires_at, p.created_at + 604800000) < $1 AND j.status IN " JOB_OPEN
                  " ORDER BY p.hold_expires_at LIMIT $2",
                  DB_ARGS(DB_INT(before), DB_INT(limit))) == DB_OK
             ? ERR_OK
             : ERR_INTERNAL;
}

err_t pay_store_recoverable(arena *a, const char *user_id, db_res **out) {
  return db_query(a, out,
                  "SELECT p.id, j.status FROM payments p JOIN jobs j ON j.id = p.job_id "
                  "WHERE p.user_id = $1 AND p.kind = 'job' AND p.status IN ('FAILED', 'PENDING') "
                  "AND p.released_at IS NULL AND j.status IN ('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS', 'COMPLETED') "
                  "ORDER BY p.created_at",
                  DB_ARGS(DB_TEXT(user_id))) == DB_OK
             ? ERR_OK
             : ERR_INTERNAL;
}

/* What the reconciliation does with a settled payment (pay_store_uncertain), and which settled
 * payments it looks at: each of its statements below adds to these the index it reads through,
 * and together they partition the payments by status and release, so that each payment is
 * found once and a table that grows with every job is never read whole. */
#define SETTLED_WHAT                                                                                                   \
  "CASE WHEN p.released_at IS NOT NULL THEN 'release' WHEN j.status IN ('PENDING', 'QUOTED') THEN 'reopen' "           \
  "WHEN p.status = 'AUTHORIZED' AND j.status = 'CANCELLED' THEN 'void' "                                               \
  "WHEN p.status = 'AUTHORIZED' OR (j.status = 'COMPLETED' AND (p.idem_key IS NULL OR p.idem_key NOT LIKE "            \
  "'charge-%')) THEN 'capture' ELSE 'recover' END, j.status"
#define SETTLED_UNCERTAIN                                                                                              \
  "p.pending_op IS NULL AND j.updated_at < $1 AND ("                                                                   \
  "(p.released_at IS NOT NULL AND (p.status = 'AUTHORIZED' OR (p.status = 'PAID' "                                     \
  "AND p.refunded_cents < p.amount_cents))) "                                                                          \
  "OR (p.released_at IS NULL AND j.status IN ('PENDING', 'QUOTED')) "                                                  \
  "OR (p.released_at IS NULL AND p.kind = 'job' AND p.status = 'AUTHORIZED' "                                          \
  "AND j.status IN ('COMPLETED', 'CANCELLED')) "                                                                       \
  "OR (p.released_at IS NULL AND p.kind = 'job' AND p.status = 'FAILED' AND j.status = 'COMPLETED' "                   \
  "AND (p.idem_key IS NULL OR p.idem_key NOT LIKE 'charge-%')) "                                                       \
  "OR (p.released_at IS NULL AND p.kind = 'job' AND p.status = 'FAILED' "                                              \
  "AND j.status IN ('ACCEPTED', 'ON_THE_WAY', 'IN_PROGRESS', 'COMPLETED') "                                            \
  "AND u.processor_payment_method_id IS NOT NULL "                                                                     \
  "AND (p.payment_method_id IS NULL OR p.payment_method_id <> u.processor_payment_method_id)))"

/* a payment of a status the first statement leaves, whose job is open again (jobs: the jobs' table
 * as the engine reads it) */
#define OPEN_JOBS_UNCERTAIN(jobs)                                                                                      \
  "SELECT p.id, p.job_id, " SETTLED_WHAT " FROM " jobs " CROSS JOIN payments p JOIN users u ON u.id = p.user_id "      \
  "WHERE j.status IN ('PENDING', 'QUOTED') AND p.job_id = j.id AND p.released_at IS NULL "                             \
  "AND p.status NOT IN ('AUTHORIZED', 'FAILED') AND " SETTLED_UNCERTAIN " LIMIT $2"

err_t pay_store_uncertain(arena *a, int64_t stale_before, int limit, db_res *out[2]) {
  /* a FAILED payment of a completed job was charged at completion when its key says so; a job
   * moved since stale_before is left to the request that moved it (a reconciliation that
   * captured in between had the completion answer AUTHORIZED and queue its own capture).
   * First the requests left pending (payments_pending), the AUTHORIZED and FAILED payments
   * (payments_holds) and the released ones with money to give back (payments_released); then,
   * apart, a payment of another status whose job is open again, found from the open jobs (the
   * feed's partial index: the open jobs, not every job there ever was) */
  db_read reads[2] = {
      db_read_make(a,
                   "SELECT p.id, p.job_id, 'pending', j.status FROM payments p JOIN jobs j ON j.id = p.job_id "
                   "WHERE p.pending_op IS NOT NULL AND p.op_started_at < $1 "
                   "UNION ALL SELECT p.id, p.job_id, " SETTLED_WHAT " "
                   "FROM payments p JOIN jobs j ON j.id = p.job_id JOIN users u ON u.id = p.user_id "
                   "WHERE p.status IN ('AUTHORIZED', 'FAILED') AND " SETTLED_UNCERTAIN " "
                   "UNION ALL SELECT p.id, p.job_id, " SETTLED_WHAT " "
                   "FROM payments p JOIN jobs j ON j.id = p.job_id JOIN users u ON u.id = p.user_id "
                   "WHERE p.released_at IS NOT NULL AND p.status = 'PAID' AND p.refunded_cents < p.amount_cents AND "
                   SETTLED_UNCERTAIN " LIMIT $2",
                   DB_ARGS(DB_INT(stale_before), DB_INT(limit))),
      db_read_make(a,
                   db_engine_get() == DB_SQLITE ? OPEN_JOBS_UNCERTAIN("jobs j INDEXED BY jobs_feed_open")
                                                : OPEN_JOBS_UNCERTAIN("jobs j"),
                   DB_ARGS(DB_INT(stale_before), DB_INT(limit)))};
  if (db_query_all(a, reads, 2) != DB_OK) return ERR_INTERNAL;
  out[0] = reads[0].res, out[1] = reads[1].res;
  return ERR_OK;
}

/* ---- webhook events ---- */

err_t pay_store_knows_intent(const char *intent, bool *known) {
  return db_to_err(
      db_exists(known, "SELECT 1 FROM payments WHERE processor_payment_intent_id = $1", DB_ARGS(DB_TEXT(intent))));
}

err_t pay_store_holds_subscription(const char *subscription_id, bool *holds) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc =
      db_query(&a, &r, "SELECT 1 FROM users WHERE processor_subscription_id = $1", DB_ARGS(DB_TEXT(subscription_id)));
  *holds = rc == DB_OK && r->rows > 0;
  arena_fini(&a);
  return rc == DB_OK ? ERR_OK : ERR_INTERNAL;
}

static const char *str(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* ---- disputes ---- */

bool pay_dispute_closed(const char *status) {
  return status && (!strcmp(status, "won") || !strcmp(status, "lost") || !strcmp(status, "warning_closed"));
}

#define DISPUTE_COLUMNS                                                                                                \
  "id, processor_dispute_id, payment_id, job_id, status, reason, evidence_text, evidence_files, amount_cents, "        \
  "evidence_due_by, evidence_submitted_at, closed_at, created_at, lost_cents, funds_withdrawn"

err_t pay_store_dispute(arena *a, const char *id, dispute_row *out, bool *found) {
  db_res *r;
  if (db_query(a, &r, "SELECT " DISPUTE_COLUMNS " FROM disputes WHERE id = $1", DB_ARGS(DB_TEXT(id))) != DB_OK)
    return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found)
    *out = (dispute_row){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2),  db_text(r, 0, 3),  db_text(r, 0, 4),
                         db_text(r, 0, 5), db_text(r, 0, 6), db_text(r, 0, 7),  db_int(r, 0, 8),   db_int(r, 0, 9),
                         db_int(r, 0, 10), db_int(r, 0, 11), db_int(r, 0, 12), db_int(r, 0, 13), db_int(r, 0, 14) == 1};
  return ERR_OK;
}

/* The Payment JSON's dispute member of a processor dispute. */
static const char *dispute_member(arena *a, const pay_dispute *d) {
  jw w;
  jw_init(&w, a, 256);
  jw_obj(&w);
  jw_key_str(&w, "status", d->status);
  jw_key_str(&w, "reason", d->reason[0] ? d->reason : "general");
  jw_key(&w, "amount");
  jw_money(&w, d->amount);
  jw_key(&w, "evidenceDueBy");
  if (d->evidence_due_by) {
    char iso[25];
    clock_format_iso(d->evidence_due_by, iso);
    jw_str(&w, iso);
  } else {
    jw_null(&w);
  }
  jw_obj_end(&w);
  return jw_text(&w);
}

/* The dispute's record d (its status as the processor has it; a closed one stays closed) on
 * row id, with its payment's dispute member and the news of the change. */
static db_rc dispute_record_in(db_conn *c, arena *a, const char *id, const char *payment_id, const pay_dispute *d,
                               int withdrawn, int64_t now) {
  db_rc rc = db_exec(c, NULL, NULL,
                     "UPDATE disputes SET status = CASE WHEN status IN ('won', 'lost', 'warning_closed') THEN status "
                     "ELSE $2 END, reason = $3, amount_cents = $4, evidence_due_by = $5, "
                     "funds_withdrawn = CASE WHEN $6 < 0 THEN funds_withdrawn ELSE $6 END, "
                     "closed_at = CASE WHEN closed_at IS NULL AND $2 IN ('won', 'lost', 'warning_closed') THEN $7 "
                     "ELSE closed_at END, updated_at = $7 WHERE id = $1",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(d->status), DB_TEXT(d->reason[0] ? d->reason : "general"),
                             DB_INT(d->amount), d->evidence_due_by ? DB_INT(d->evidence_due_by) : DB_NULL,
                             DB_INT(withdrawn), DB_INT(now)));
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "UPDATE payments SET dispute_json = $2, updated_at = $3 WHERE id = $1",
                 DB_ARGS(DB_TEXT(payment_id), DB_TEXT(dispute_member(a, d)), DB_INT(now)));
  return rc;
}

/* Records dispute d of payment payment_id on c, the event's kind (type; NULL: an answer of the
 * processor's to the service's own request) saying whether funds moved: the dispute (a closed
 * one stays closed, whatever arrives after), the payment's dispute member; on opening, the
 * job's unpaid transfers held, the provider told and customer support emailed; on closing,
 * lost: what it took borne as a refund would be (the provider's transfer reduced or reversed,
 * the rest its balance), then the hold ended. Whoever records a change first (an event, or the
 * evidence's answer) applies its effects; the other finds nothing to do. */
static db_rc dispute_change_in(db_conn *c, arena *a, const char *payment, pay_dispute *d, const char *type) {
  db_res *p, *r;
  int64_t now = clock_now_ms();
  db_rc rc = db_exec(c, a, &p,
                     "SELECT p.job_id, j.provider_id, j.service, u.name FROM payments p "
                     "JOIN jobs j ON j.id = p.job_id JOIN users u ON u.id = p.user_id WHERE p.id = $1",
                     DB_ARGS(DB_TEXT(payment)));
  if (rc != DB_OK || p->rows != 1) return rc;
  const char *job = db_text(p, 0, 0), *provider = db_text(p, 0, 1);
  char fresh[ID_LEN + 1];
  id_new(fresh);
  rc = db_exec(c, a, &r,
               "INSERT INTO disputes (id, processor_dispute_id, payment_id, job_id, status, reason, amount_cents, "
               "seq, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) "
               "ON CONFLICT (processor_dispute_id) DO NOTHING RETURNING id",
               DB_ARGS(DB_TEXT(fresh), DB_TEXT(d->id), DB_TEXT(payment), DB_TEXT(job), DB_TEXT(d->status),
                       DB_TEXT(d->reason[0] ? d->reason : "general"), DB_INT(d->amount), DB_INT(clock_sequence()),
                       DB_INT(now)));
  bool opened = rc == DB_OK && r->rows == 1 && !pay_dispute_closed(d->status);
  if (rc == DB_OK)
    rc = db_exec(c, a, &r, "SELECT id, status, lost_cents, closed_at FROM disputes WHERE processor_dispute_id = $1",
                 DB_ARGS(DB_TEXT(d->id)));
  if (rc != DB_OK || r->rows != 1) return rc;
  const char *id = db_text(r, 0, 0);
  bool was_closed = !db_isnull(r, 0, 3), closing = !was_closed && pay_dispute_closed(d->status);
  if (was_closed) snprintf(d->status, sizeof d->status, "%s", db_text(r, 0, 1)); /* closed is final */
  int withdrawn = type && !strcmp(type, "charge.dispute.funds_withdrawn")    ? 1
                  : type && !strcmp(type, "charge.dispute.funds_reinstated") ? 0
                                                                             : -1;
  rc = dispute_record_in(c, a, id, payment, d, withdrawn, now);
  if (rc == DB_OK && opened) rc = payouts_dispute_in(c, job, true);
  if (rc == DB_OK && closing && !strcmp(d->status, "lost") && db_int(r, 0, 2) == 0) {
    rc = db_exec(c, NULL, NULL, "UPDATE disputes SET lost_cents = amount_cents WHERE id = $1", DB_ARGS(DB_TEXT(id)));
    if (rc == DB_OK)
      rc = db_exec(c, NULL, NULL,
                   "UPDATE payments SET lost_cents = CASE WHEN lost_cents + $2 > amount_cents - refunded_cents "
                   "THEN amount_cents - refunded_cents ELSE lost_cents + $2 END WHERE id = $1",
                   DB_ARGS(DB_TEXT(payment), DB_INT(d->amount)));
    if (rc == DB_OK) rc = payouts_refunded_in(c, payment); /* the provider bears its share */
  }
  if (rc == DB_OK && closing) rc = payouts_dispute_in(c, job, false);
  if (rc == DB_OK) rc = told_in(c, payment);
  if (rc == DB_OK && (opened || closing) && provider) {
    const char *body =
        opened ? arena_printf(a,
                              "The customer disputed the payment for this %s job with their bank ($%.2f, %s). What "
                              "the job earns you is held until the dispute is decided; we answer it with the job's "
                              "photos and messages.",
                              db_text(p, 0, 2), (double)d->amount / 100, d->reason)
               : arena_printf(a, "The dispute of the payment for this %s job was decided: %s.", db_text(p, 0, 2),
                              !strcmp(d->status, "lost") ? "lost, so its amount goes back to the customer"
                              : !strcmp(d->status, "won") ? "won, so what you earned is paid as scheduled"
                                                          : "closed");
    notice n = {provider, "provider", opened ? "Payment disputed" : "Dispute decided", body, job};
    rc = notify_in(c, &n);
  }
  if (rc == DB_OK && opened) {
    char due[25] = "no deadline given";
    if (d->evidence_due_by) clock_format_iso(d->evidence_due_by, due);
    rc = notify_staff_in(
        c, "customer_support", arena_printf(a, "Payment disputed: $%.2f for job %s", (double)d->amount / 100, job),
        arena_printf(a,
                     "A customer (%s) disputed the payment %s of job %s with their bank.\n\nAmount: $%.2f\n"
                     "Reason: %s\nStatus: %s\nEvidence due by: %s\nDispute: %s (at the processor: %s)\n\n"
                     "Answer it in the staff portal: GET /staff/disputes, then POST /staff/disputes/%s/evidence "
                     "with the job's photos and messages. Without evidence the dispute is lost.\n",
                     db_text(p, 0, 3), payment, job, (double)d->amount / 100, d->reason, d->status, due, id, d->id,
                     id));
  }
  return rc;
}

/* A charge.dispute.* event (its object a dispute, as the processor has it now) of a charge of
 * ours: recorded by dispute_change_in; one of a charge the service did not make changes nothing. */
static db_rc apply_dispute(db_conn *c, arena *a, const pay_event *ev) {
  pay_dispute d;
  payments_read_dispute(ev->object, &d);
  db_res *p;
  /* an intent whose request's answer is not recorded yet (lost, or still on its way) is known by
     the request's key, which the intent carries */
  db_rc rc = db_exec(c, a, &p,
                     "SELECT id FROM payments WHERE processor_payment_intent_id = $1 "
                     "UNION SELECT id FROM payments WHERE idem_key = $2",
                     DB_ARGS(DB_TEXT(d.intent_id), DB_TEXT(ev->intent_key ? ev->intent_key : "")));
  if (rc != DB_OK || p->rows != 1 || !d.id[0]) return rc;
  return dispute_change_in(c, a, db_text(p, 0, 0), &d, ev->type);
}

err_t pay_store_dispute_evidence(const char *id, const char *text, const char *files, const char *staff_id,
                                 const pay_dispute *d, const audit_action *act) {
  db_tx x = db_tx_new();
  db_res *r = NULL;
  err_t e = db_tx_begin_exec(&x, &x.a, &r,
                             "UPDATE disputes SET evidence_text = $2, evidence_files = $3, evidence_staff_id = $4, "
                             "evidence_submitted_at = $5, updated_at = $5 WHERE id = $1 RETURNING payment_id",
                             DB_ARGS(DB_TEXT(id), DB_TEXT(text), DB_TEXT(files), DB_TEXT(staff_id), DB_INT(x.now)));
  pay_dispute answered = *d; /* as the processor answered: a decision at once is applied now */
  if (!e && r->rows == 1) e = db_to_err(dispute_change_in(x.c, &x.a, db_text(r, 0, 0), &answered, NULL));
  if (!e) e = audit_log_in(x.c, act);
  return db_tx_end(&x, e);
}

const db_keyset DISPUTES_KEYSET = {"disputes", {{"d.seq", "seq", 'i', true}, {"d.id", "id", 's', true}}};

#define DISPUTES_SQL                                                                                                   \
  "SELECT d.id, d.processor_dispute_id, d.payment_id, d.job_id, d.status, d.reason, d.amount_cents, "                  \
  "d.evidence_due_by, d.funds_withdrawn, d.evidence_submitted_at, d.closed_at, d.created_at, d.lost_cents, d.seq, "    \
  "j.service, j.status AS job_status, j.customer_id, u.name AS customer_name, u.email AS customer_email, "             \
  "j.provider_id, pr.name AS provider_name, p.kind AS payment_kind FROM disputes d "                                   \
  "JOIN jobs j ON j.id = d.job_id JOIN users u ON u.id = j.customer_id JOIN payments p ON p.id = d.payment_id "        \
  "LEFT JOIN providers pr ON pr.id = j.provider_id WHERE "

err_t pay_store_disputes(arena *a, const char *which, const db_page *pg, db_res **out) {
  const char *filter = !which                    ? "1 = 1"
                       : !strcmp(which, "closed") ? "d.status IN ('won', 'lost', 'warning_closed')"
                                                  : "d.status NOT IN ('won', 'lost', 'warning_closed')";
  db_val args[DB_PAGE_ARGS(0)];
  return db_to_err(db_page_query(a, pg, arena_printf(a, DISPUTES_SQL "%s", filter), args, 0, out));
}

err_t pay_store_dispute_listed(arena *a, const char *id, db_res **out) {
  return db_to_err(db_query(a, out, DISPUTES_SQL "d.id = $1", DB_ARGS(DB_TEXT(id))));
}

err_t pay_store_evidence_context(arena *a, const char *job_id, pay_evidence_context *out) {
  db_res *r;
  err_t e = db_query_row(a, &r,
                         "SELECT u.name, u.email, j.service, j.description, j.completed_at FROM jobs j "
                         "JOIN users u ON u.id = j.customer_id WHERE j.id = $1",
                         DB_ARGS(DB_TEXT(job_id)));
  if (e != ERR_OK) return e;
  *out = (pay_evidence_context){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3),
                                db_isnull(r, 0, 4) ? 0 : db_int(r, 0, 4)};
  return ERR_OK;
}

err_t pay_store_job_files(arena *a, const char *job_id, db_res **out) {
  /* photos of the job (the customer's, before, after) and photos sent in its threads */
  return db_to_err(db_query(a, out,
                            "SELECT images, before_images, after_images FROM jobs WHERE id = $1 "
                            "UNION ALL SELECT content, NULL, NULL FROM messages WHERE job_id = $1 "
                            "AND content LIKE '[IMAGE]%'",
                            DB_ARGS(DB_TEXT(job_id))));
}

/* Rows a subscription event applies to: the user holding that subscription, or a user of
 * that customer who holds none (the event then names the subscription the user now has); never
 * an account its owner deleted (its subscription was set to end with it). */
#define SUBSCRIPTION_OWNER                                                                                             \
  "(deleted_at IS NULL AND (processor_subscription_id = $1 OR (processor_subscription_id IS NULL AND "                 \
  "processor_customer_id = $2)))"

/* False when a subscription event is older than the last one applied to its subscription
 * (then it changes nothing); otherwise it becomes the last one. An event without `created`
 * cannot be placed and is applied. */
static db_rc subscription_event_in_order(db_conn *c, arena *a, const char *subscription, int64_t created,
                                         bool *in_order) {
  db_res *r;
  *in_order = true;
  if (created <= 0) return DB_OK;
  db_rc rc = db_exec(c, a, &r,
                     "INSERT INTO subscription_events (subscription_id, last_created) VALUES ($1, $2) "
                     "ON CONFLICT (subscription_id) DO UPDATE SET last_created = excluded.last_created "
                     "WHERE subscription_events.last_created <= excluded.last_created RETURNING subscription_id",
                     DB_ARGS(DB_TEXT(subscription), DB_INT(created)));
  *in_order = rc == DB_OK && r->rows == 1;
  return rc;
}

static db_rc apply(db_conn *c, arena *a, const pay_event *ev, pay_event_effect *out) {
  int64_t now = clock_now_ms();
  const char *type = ev->type;
  json_t *o = ev->object;
  const char *id = str(o, "id");
  if (!id) return DB_OK; /* nothing to find it by: ignored */
  if (!strcmp(type, "charge.refunded")) return processor_refunds(c, a, o, ev, out);
  if (!strncmp(type, "charge.dispute.", 15)) return apply_dispute(c, a, ev);
  /* final; a request of the service's own still under way on it is settled by its carrier,
     which gives back whatever else it made (a hold cancelled, a second charge refunded) */
  bool captured = !strcmp(type, "charge.captured");
  if (!strcmp(type, "payment_intent.succeeded") || captured) {
    /* what was captured: less than held after a partial capture (in the Dashboard, say) */
    const char *intent = captured ? str(o, "payment_intent") : id;
    json_int_t cents = json_integer_value(json_object_get(o, captured ? "amount_captured" : "amount_received"));
    db_res *r;
    db_rc rc = db_exec(c, a, &r,
                       "UPDATE payments SET status = 'PAID', hold_expires_at = NULL, failure_reason = NULL, "
                       "paid_at = $2, amount_cents = " CAPTURED("$3") ", authorized_cents = " AUTHORIZED("$3") ", "
                       "updated_at = $2 WHERE processor_payment_intent_id = $1 "
                       "AND status IN ('AUTHORIZED', 'FAILED', 'PENDING') RETURNING id",
                       DB_ARGS(DB_TEXT(intent), DB_INT(now), DB_INT(cents)));
    for (int i = 0; rc == DB_OK && i < r->rows; i++) {
      rc = told_in(c, db_text(r, i, 0));
      if (rc == DB_OK) rc = payouts_captured_in(c, db_text(r, i, 0));
      if (rc == DB_OK) out->paid = db_text(r, i, 0);
    }
    return rc;
  }
  if (!strcmp(type, "payment_intent.payment_failed") || !strcmp(type, "payment_intent.canceled")) {
    json_t *e = json_object_get(o, "last_payment_error");
    const char *code = str(e, "code"), *message = str(e, "message"), *why = str(o, "cancellation_reason");
    char reason[400];
    if (code || message)
      snprintf(reason, sizeof reason, "%s: %s", code ? code : "payment_failed",
               message ? message : "The payment failed.");
    else
      snprintf(reason, sizeof reason, "canceled: The authorization was cancelled at the payment processor (%s).",
               why ? why : "no reason given");
    /* a request of the service's own on the payment (a void, a renewal) records its outcome itself */
    db_res *r;
    db_rc rc =
        db_exec(c, a, &r,
                "UPDATE payments SET status = 'FAILED', hold_expires_at = NULL, failure_reason = $3, updated_at = $2 "
                "WHERE processor_payment_intent_id = $1 AND status = 'AUTHORIZED' AND pending_op IS NULL "
                "RETURNING id",
                DB_ARGS(DB_TEXT(id), DB_INT(now), DB_TEXT(reason)));
    if (rc == DB_OK && r->rows == 1) out->failed = db_text(r, 0, 0);
    if (rc == DB_OK && r->rows == 1) rc = told_in(c, out->failed);
    return rc;
  }
  if (strncmp(type, "customer.subscription.", 22)) return DB_OK; /* other types need no action */
  bool in_order;
  db_rc rc = subscription_event_in_order(c, a, id, ev->created, &in_order);
  if (rc != DB_OK || !in_order) return rc;
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
  return DB_OK; /* other subscription events (created, ...) need no action */
}

err_t pay_store_prune_webhook_events(int64_t before_ms) {
  return db_to_err(
      db_query(NULL, NULL, "DELETE FROM webhook_events WHERE received_at < $1", DB_ARGS(DB_INT(before_ms))));
}

err_t pay_store_apply_event(arena *a, const pay_event *ev, pay_event_effect *out) {
  db_res *r;
  *out = (pay_event_effect){0};
  db_tx x = db_tx_new();
  err_t e = db_tx_begin_exec(&x, &x.a, &r,
                             "INSERT INTO webhook_events (id, type, received_at) VALUES ($1, $2, $3) "
                             "ON CONFLICT (id) DO NOTHING RETURNING id",
                             DB_ARGS(DB_TEXT(ev->id), DB_TEXT(ev->type), DB_INT(x.now)));
  out->duplicate = !e && r->rows == 0;
  if (!e && !out->duplicate) e = db_to_err(apply(x.c, a, ev, out)); /* what it changed: in the caller's arena */
  e = db_tx_end(&x, e);
  if (e) *out = (pay_event_effect){0};
  return e ? ERR_INTERNAL : ERR_OK;
}

err_t pay_store_announce(const pay_news *news) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(announce(c, news));
  return db_end(c, e);
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const PAY_EXPORT_SQL[2] = {"SELECT * FROM payments WHERE user_id = $1 ORDER BY created_at, id", NULL};

db_rc payments_forget_customer_in(db_conn *c, const char *customer_id) {
  db_rc rc = payouts_forget_customer_in(c, customer_id); /* nothing goes out for them */
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "DELETE FROM payments WHERE user_id = $1 OR job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
                 DB_ARGS(DB_TEXT(customer_id)));
  return rc;
}

err_t pay_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  /* the processor customer and saved card stay: the ledger's captures and refunds use them */
  static const char *const sql[] = {
      "UPDATE users SET is_premium = 0, premium_since = NULL, processor_subscription_id = NULL, "
      "premium_cancel_at_period_end = 0, premium_subscribe_key = NULL, premium_subscribe_unconfirmed = 0 "
      "WHERE id = $1"};
  return mode == FORGET_ERASE && !who->provider ? account_exec_in(c, who, sql, 1, NULL) : ERR_OK;
}
