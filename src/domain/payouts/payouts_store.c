/* Storage of the payouts domain. A transfer's processor request is written on its row before it
 * is made (pending_op, idem_key, op_cents) and its outcome recorded only while the row still
 * names that request, so of two carriers one records it, and a request whose answer was lost is
 * settled by asking the processor for its key. State changes are conditional updates; claims of
 * one provider's transfers lock its account's row first (PostgreSQL; SQLite's write lock does
 * the same), so two claims never bill or deduct one fee twice. What a change sets going (the
 * making of a transfer, a reversal, an email) is queued in the change's own transaction. Rows
 * of other domains' tables are only read here. Every change a provider can see in its list of
 * transfers (a new one, its status, amount, reversal, dates or failure) is a payout.updated
 * event written in the same transaction (told_in). A change is a db_tx (one clock reading, its
 * own arena); the lease of a request under way is db/lease.h's (po_store_lease). */
#include "domain/payouts/payouts_store.h"
#include "core/clock.h"
#include "core/ids.h"
#include "domain/events/events.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>

/* What a job or tip transfer becomes when it may go out: scheduled with an enabled account,
 * else waiting for one (provider: the SQL expression of the provider's id). */
#define NEXT_STATUS(provider)                                                                                          \
  "CASE WHEN EXISTS (SELECT 1 FROM payout_accounts a WHERE a.provider_id = " provider                                  \
  " AND a.status = 'enabled') THEN 'scheduled' ELSE 'waiting_for_account' END"

#define UNPAID "('scheduled', 'waiting_for_account', 'on_hold', 'failed')"
/* a paid transfer sent more than it earns now less what it netted (its fee and the balance it
 * paid off), and the processor was not yet asked for the difference, or refused it (then it
 * is the provider's balance: debited): a reversal is due (and as 1 or 0) */
#define REVERSAL_DUE "sent_cents - reversed_cents - debited_cents > amount_cents - fee_cents - netted_cents"
#define REVERSAL_DUE_FLAG "CASE WHEN " REVERSAL_DUE " THEN 1 ELSE 0 END"
/* what of a payment the provider bears: the refunds it shares and what lost disputes took */
#define BORNE(p) "(" p ".refunded_cents - " p ".goodwill_cents + " p ".lost_cents)"
/* a dispute of the job (SQL expression of its id) is open: its transfers are held */
#define DISPUTED(job)                                                                                                  \
  "EXISTS (SELECT 1 FROM disputes d WHERE d.job_id = " job " AND d.status NOT IN ('won', 'lost', 'warning_closed'))"
/* when the open report of the job (SQL expression of its id) stops holding its money; NULL when none */
#define REPORT_HOLD(job) "(SELECT rp.created_at + " HOLD_MS_SQL " FROM job_reports rp WHERE rp.job_id = " job " AND rp.status = 'open')"
#define HOLD_MS_SQL "604800000"

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Queues kind with payload { field: id } on c. */
static db_rc queue_in(db_conn *c, const char *kind, const char *field, const char *id) {
  json_t *payload = json_pack("{s:s}", field, id);
  db_rc rc = queue_enqueue(c, kind, payload);
  json_decref(payload);
  return rc;
}

/* payout.updated, on c, for each transfer that where selects (SQL over payout_transfers whose $1
 * is id): the Transfer as GET /providers/me/payouts lists it, to its provider. */
static db_rc told_in(db_conn *c, const char *where, const char *id) {
  arena a;
  arena_init(&a);
  db_res *r;
  char sql[448];
  snprintf(sql, sizeof sql,
           "SELECT id, provider_id, job_id, kind, amount_cents, reversed_cents, fee_cents + netted_cents AS netted, "
           "status, available_at, paid_at, failure_reason FROM payout_transfers WHERE %s",
           where);
  db_rc rc = db_exec(c, &a, &r, sql, DB_ARGS(DB_TEXT(id)));
  const hs_rj *b = rc == DB_OK ? hs_rj_bind(&a, PAYOUTS_TRANSFER_JSON, r) : NULL;
  for (int i = 0; rc == DB_OK && i < r->rows; i++) {
    jw w;
    jw_init(&w, &a, 384);
    hs_rj_object(&w, b, r, i);
    event_new ev = {.kind = "payout.updated", .data = jw_text(&w), .provider_id = db_field(r, i, "provider_id")};
    rc = events_emit_in(c, &ev);
  }
  arena_fini(&a);
  return rc;
}

/* told_in for every transfer of r (rows returning its id first). */
static db_rc told_each_in(db_conn *c, const db_res *r) {
  db_rc rc = DB_OK;
  for (int i = 0; rc == DB_OK && i < r->rows; i++) rc = told_in(c, "id = $1", db_text(r, i, 0));
  return rc;
}

/* ---- accounts ---- */

err_t po_store_account(arena *a, const char *provider_id, account_row *out, bool *found) {
  db_res *r;
  if (db_query(a, &r,
               "SELECT provider_id, processor_account_id, status, requirements, payouts_enabled FROM payout_accounts "
               "WHERE provider_id = $1",
               DB_ARGS(DB_TEXT(provider_id))) != DB_OK)
    return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found)
    *out = (account_row){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3), db_int(r, 0, 4) == 1};
  return ERR_OK;
}

err_t po_store_provider_email(arena *a, const char *provider_id, const char **email) {
  db_res *r;
  err_t e = db_query_row(a, &r, "SELECT email FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(provider_id)));
  if (e != ERR_OK) return e;
  *email = db_text(r, 0, 0);
  return ERR_OK;
}

err_t po_store_insert_account(arena *a, const char *provider_id, const char *processor_id, const char *status,
                              bool payouts_enabled, const char *requirements, const char **winner) {
  db_res *r;
  bool won;
  const db_read claim = {"INSERT INTO payout_accounts (provider_id, processor_account_id, status, payouts_enabled, "
                         "requirements, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6) "
                         "ON CONFLICT (provider_id) DO NOTHING RETURNING processor_account_id",
                         DB_ARGS(DB_TEXT(provider_id), DB_TEXT(processor_id), DB_TEXT(status), DB_BOOL(payouts_enabled),
                                 DB_TEXT(requirements), DB_INT(clock_now_ms()))};
  const db_read find = {"SELECT processor_account_id FROM payout_accounts WHERE provider_id = $1",
                        DB_ARGS(DB_TEXT(provider_id))};
  if (db_claim_first(a, &claim, &find, &r, &won) != DB_OK) return ERR_INTERNAL;
  if (r->rows == 0) return ERR_INTERNAL;
  *winner = db_text(r, 0, 0);
  return ERR_OK;
}

/* A provider's scheduled transfers wait for its account again. SQLite reads them by the
 * provider's index: left to plan without statistics, it searched payout_transfers_due for every
 * scheduled transfer of every provider. */
#define WAITING_SQL(transfers)                                                                                         \
  "UPDATE " transfers " SET status = 'waiting_for_account', updated_at = $2 "                                          \
  "WHERE provider_id = $1 AND kind <> 'fee' AND pending_op IS NULL AND status = 'scheduled' RETURNING id"

err_t po_store_apply_account(arena *a, const char *processor_id, const char *status, bool payouts_enabled,
                             const char *requirements, const char **provider) {
  bool enabled = is(status, "enabled");
  db_res *r = NULL;
  *provider = NULL;
  db_tx x = db_tx_new();
  err_t e = db_tx_begin_exec(
      &x, a, &r, /* the provider's id, in the caller's arena */
      "UPDATE payout_accounts SET status = $2, payouts_enabled = $3, requirements = $4, "
      "updated_at = $5 WHERE processor_account_id = $1 RETURNING provider_id",
      DB_ARGS(DB_TEXT(processor_id), DB_TEXT(status), DB_BOOL(payouts_enabled), DB_TEXT(requirements), DB_INT(x.now)));
  if (!e && r->rows == 1) *provider = db_text(r, 0, 0);
  db_res *moved = NULL;
  if (!e && *provider && enabled)
    e = db_to_err(db_exec(x.c, &x.a, &moved,
                          "UPDATE payout_transfers SET status = 'scheduled', failure_reason = NULL, updated_at = $2 "
                          "WHERE provider_id = $1 AND kind <> 'fee' AND pending_op IS NULL "
                          "AND status IN ('waiting_for_account', 'failed') RETURNING id",
                          DB_ARGS(DB_TEXT(*provider), DB_INT(x.now))));
  if (!e && *provider && enabled) e = db_to_err(queue_in(x.c, "payout_provider", "providerId", *provider));
  if (!e && *provider && !enabled)
    e = db_to_err(db_exec(x.c, &x.a, &moved,
                          db_engine_get() == DB_SQLITE ? WAITING_SQL("payout_transfers INDEXED BY payout_transfers_provider")
                                                       : WAITING_SQL("payout_transfers"),
                          DB_ARGS(DB_TEXT(*provider), DB_INT(x.now))));
  if (!e && moved) e = db_to_err(told_each_in(x.c, moved));
  e = db_tx_end(&x, e);
  if (e) *provider = NULL;
  return e;
}

/* ---- transfers made by other domains' changes ---- */

db_rc po_store_captured_in(db_conn *c, const char *payment_id, bool *added) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t now = clock_now_ms();
  *added = false;
  db_rc rc = db_exec(c, &a, &r,
                     "SELECT p.kind, p.amount_cents, " BORNE("p") ", p.job_id, j.provider_id, j.completed_at, "
                     "q.amount_cents AS quote_cents, rp.created_at AS reported_at, "
                     "COALESCE(p.authorized_cents, p.amount_cents), CASE WHEN " DISPUTED("p.job_id") " THEN 1 ELSE 0 "
                     "END FROM payments p JOIN jobs j ON j.id = p.job_id "
                     "LEFT JOIN quotes q ON q.job_id = p.job_id AND q.status = 'ACCEPTED' "
                     "LEFT JOIN job_reports rp ON rp.job_id = p.job_id AND rp.status = 'open' "
                     "WHERE p.id = $1 AND p.kind IN ('job', 'tip') AND p.status IN ('PAID', 'REFUNDED') "
                     "AND p.released_at IS NULL AND j.provider_id IS NOT NULL",
                     DB_ARGS(DB_TEXT(payment_id)));
  bool job = rc == DB_OK && r->rows == 1 && is(db_text(r, 0, 0), "job");
  if (rc != DB_OK || r->rows != 1 || (job && db_isnull(r, 0, 6))) goto out; /* nothing a provider earned */
  /* a partial capture earns the provider its share of what was captured */
  int64_t charged = db_int(r, 0, 1), authorized = db_int(r, 0, 8);
  int64_t earned = !job                               ? charged
                   : authorized > 0 && charged < authorized ? (db_int(r, 0, 6) * charged + authorized / 2) / authorized
                                                      : db_int(r, 0, 6);
  int64_t amount = payouts_earned_after_refunds(earned, charged, db_int(r, 0, 2));
  int64_t done = db_isnull(r, 0, 5) ? now : db_int(r, 0, 5);
  int64_t reported = db_isnull(r, 0, 7) ? 0 : db_int(r, 0, 7);
  bool disputed = db_int(r, 0, 9) == 1;
  bool held = disputed || (reported && reported + PAYOUTS_HOLD_MS > now);
  char id[ID_LEN + 1];
  id_new(id);
  db_res *ins;
  rc = db_exec(c, &a, &ins,
               "INSERT INTO payout_transfers (id, provider_id, job_id, payment_id, kind, earned_cents, amount_cents, "
               "status, available_at, hold_until, seq, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, "
               "CASE WHEN $8 = 'next' THEN " NEXT_STATUS("$2") " ELSE $8 END, $9, $10, $11, $12, $12) "
                                                               "ON CONFLICT (payment_id) DO NOTHING",
               DB_ARGS(DB_TEXT(id), DB_TEXT(db_text(r, 0, 4)), DB_TEXT(db_text(r, 0, 3)), DB_TEXT(payment_id),
                       DB_TEXT(db_text(r, 0, 0)), DB_INT(earned), DB_INT(amount),
                       DB_TEXT(amount == 0 ? "cancelled"
                               : held      ? "on_hold"
                                           : "next"),
                       DB_INT(done + PAYOUTS_WINDOW_MS),
                       held && !disputed ? DB_INT(reported + PAYOUTS_HOLD_MS) : DB_NULL,
                       DB_INT(clock_sequence()), DB_INT(now)));
  *added = rc == DB_OK && ins->changes == 1;
  if (*added) rc = told_in(c, "id = $1", id);
out:
  arena_fini(&a);
  return rc;
}

err_t po_store_captured(const char *payment_id, bool *added) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(po_store_captured_in(c, payment_id, added));
  return db_end(c, e);
}

db_rc po_store_refunded_in(db_conn *c, const char *payment_id) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t now = clock_now_ms();
  db_rc rc = db_exec(c, &a, &r,
                     "SELECT t.id, t.provider_id, t.earned_cents, t.amount_cents, t.fee_cents, t.status, t.pending_op, "
                     "p.amount_cents, " BORNE("p") ", t.netted_cents, CASE WHEN " DISPUTED("t.job_id") " THEN 1 "
                     "ELSE 0 END FROM payout_transfers t JOIN payments p ON p.id = t.payment_id WHERE t.payment_id = $1",
                     DB_ARGS(DB_TEXT(payment_id)));
  if (rc != DB_OK || r->rows != 1) goto out;
  const char *id = db_text(r, 0, 0), *provider = db_text(r, 0, 1), *status = db_text(r, 0, 5);
  int64_t amount = payouts_earned_after_refunds(db_int(r, 0, 2), db_int(r, 0, 7), db_int(r, 0, 8));
  int64_t fee = db_int(r, 0, 4) < amount ? db_int(r, 0, 4) : amount;
  int64_t netted = db_int(r, 0, 9) < amount - fee ? db_int(r, 0, 9) : amount - fee;
  bool idle = db_isnull(r, 0, 6), disputed = db_int(r, 0, 10) == 1;
  if (amount == db_int(r, 0, 3)) goto out; /* this refund takes nothing of the provider's */
  /* a refund ends a report's hold (not a dispute's): what is left goes out, as scheduled */
  rc = db_exec(c, NULL, NULL,
               "UPDATE payout_transfers SET amount_cents = $2, fee_cents = $3, netted_cents = $5, "
               "status = CASE WHEN pending_op IS NULL AND status IN " UNPAID " AND $2 = 0 THEN 'cancelled' "
               "WHEN pending_op IS NULL AND status = 'on_hold' AND $6 = 0 THEN " NEXT_STATUS(
                   "payout_transfers.provider_id") " "
                                                   "ELSE status END, hold_until = CASE WHEN pending_op IS NULL "
                                                   "AND $6 = 0 THEN NULL ELSE hold_until END, "
                                                   "updated_at = $4 WHERE id = $1",
               DB_ARGS(DB_TEXT(id), DB_INT(amount), DB_INT(fee), DB_INT(now), DB_INT(netted), DB_INT(disputed)));
  if (rc == DB_OK) rc = told_in(c, "id = $1", id);
  /* the balance it paid off shrinks with it; the rest is owed again */
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "UPDATE payout_debts SET amount_cents = $2, status = CASE WHEN $2 = 0 THEN 'cancelled' ELSE status "
                 "END, updated_at = $3 WHERE kind = 'netted' AND transfer_id = $1 AND status IN ('scheduled', 'paid')",
                 DB_ARGS(DB_TEXT(id), DB_INT(-netted), DB_INT(now)));
  /* the fee it carried shrinks with it; the rest is owed again, from the next transfer */
  db_res *fees;
  if (rc == DB_OK)
    rc = db_exec(c, &a, &fees,
                 "UPDATE payout_transfers SET amount_cents = $2, earned_cents = $2, "
                 "status = CASE WHEN $2 = 0 THEN 'cancelled' ELSE status END, updated_at = $3 "
                 "WHERE carrier_id = $1 AND status IN ('scheduled', 'paid') RETURNING id",
                 DB_ARGS(DB_TEXT(id), DB_INT(-fee), DB_INT(now)));
  if (rc == DB_OK) rc = told_each_in(c, fees);
  if (rc == DB_OK && idle && is(status, "on_hold") && amount > 0 && !disputed)
    rc = queue_in(c, "payout_provider", "providerId", provider);
  if (rc == DB_OK && idle && is(status, "paid")) rc = queue_in(c, "payout_reverse", "transferId", id);
out:
  arena_fini(&a);
  return rc;
}

/* Runs a change of one job's transfers on c (an UPDATE ... RETURNING id, provider_id,
 * amount_cents), tells each changed transfer to its provider, sums what they hold into *cents
 * (may be NULL), and, when they may go out now (release), queues their provider's due ones. */
static db_rc moved_in(db_conn *c, const char *sql, const db_val *params, int n, bool release, int64_t *cents) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, sql, params, n);
  for (int i = 0; cents && rc == DB_OK && i < r->rows; i++) *cents += db_int(r, i, 2);
  if (rc == DB_OK) rc = told_each_in(c, r);
  if (rc == DB_OK && release && r->rows > 0) rc = queue_in(c, "payout_provider", "providerId", db_text(r, 0, 1));
  arena_fini(&a);
  return rc;
}

#define MOVED " RETURNING id, provider_id, amount_cents"

db_rc po_store_hold_in(db_conn *c, const char *job_id, int64_t until, int64_t *held_cents) {
  *held_cents = 0;
  return moved_in(c,
                  "UPDATE payout_transfers SET status = 'on_hold', hold_until = $2, updated_at = $3 "
                  "WHERE job_id = $1 AND kind <> 'fee' AND pending_op IS NULL "
                  "AND status IN ('scheduled', 'waiting_for_account')" MOVED,
                  DB_ARGS(DB_TEXT(job_id), DB_INT(until), DB_INT(clock_now_ms())), false, held_cents);
}

db_read po_read_job_transfers(arena *a, const char *job_id) {
  return db_read_make(a,
                      "SELECT id, kind, amount_cents, status, hold_until, available_at FROM payout_transfers "
                      "WHERE job_id = $1 AND kind <> 'fee' ORDER BY seq",
                      DB_ARGS(DB_TEXT(job_id)));
}

db_rc po_store_dispute_in(db_conn *c, const char *job_id, bool open) {
  db_val args[] = {DB_TEXT(job_id), DB_INT(clock_now_ms())};
  if (open)
    return moved_in(c,
                    "UPDATE payout_transfers SET status = 'on_hold', hold_until = NULL, updated_at = $2 "
                    "WHERE job_id = $1 AND kind <> 'fee' AND pending_op IS NULL "
                    "AND status IN ('scheduled', 'waiting_for_account', 'on_hold')" MOVED,
                    args, 2, false, NULL);
  /* no dispute open any more: an open report's hold still running keeps them */
  return moved_in(c,
                  "UPDATE payout_transfers SET status = CASE WHEN " REPORT_HOLD("payout_transfers.job_id") " > $2 "
                  "THEN 'on_hold' ELSE " NEXT_STATUS("payout_transfers.provider_id") " END, "
                  "hold_until = CASE WHEN " REPORT_HOLD("payout_transfers.job_id") " > $2 THEN " REPORT_HOLD(
                      "payout_transfers.job_id") " ELSE NULL END, updated_at = $2 "
                                                 "WHERE job_id = $1 AND kind <> 'fee' AND pending_op IS NULL "
                                                 "AND status = 'on_hold' AND hold_until IS NULL AND NOT " DISPUTED(
                                                     "payout_transfers.job_id") MOVED,
                  args, 2, true, NULL);
}

db_rc po_store_forget_customer_in(db_conn *c, const char *customer_id) {
  /* the transfers by id, found from the customer's payments (CROSS JOIN: SQLite's order; left to
   * plan without statistics, it searched payout_transfers_due for every unpaid transfer) */
  return moved_in(c,
                  "UPDATE payout_transfers SET status = 'cancelled', amount_cents = 0, hold_until = NULL, "
                  "updated_at = $2 WHERE id IN (SELECT t.id FROM payments p CROSS JOIN payout_transfers t "
                  "WHERE t.payment_id = p.id AND t.pending_op IS NULL AND t.status IN " UNPAID " "
                  "AND (p.user_id = $1 OR p.job_id IN (SELECT id FROM jobs WHERE customer_id = $1)))" MOVED,
                  DB_ARGS(DB_TEXT(customer_id), DB_INT(clock_now_ms())), false, NULL);
}

db_rc po_store_release_job_in(db_conn *c, const char *job_id) {
  return moved_in(c,
                  "UPDATE payout_transfers SET status = " NEXT_STATUS("payout_transfers.provider_id") ", "
                  "hold_until = NULL, updated_at = $2 WHERE job_id = $1 AND kind <> 'fee' AND pending_op IS NULL "
                  "AND status = 'on_hold' AND hold_until IS NOT NULL" MOVED,
                  DB_ARGS(DB_TEXT(job_id), DB_INT(clock_now_ms())), true, NULL);
}

/* ---- making transfers ---- */

#define TRANSFER_COLUMNS                                                                                               \
  "t.id, t.provider_id, t.job_id, t.payment_id, t.kind, t.status, t.failure_reason, t.destination, "                   \
  "t.processor_transfer_id, t.pending_op, t.idem_key, pr.email, pr.name, j.service, "                                  \
  "p.processor_payment_intent_id, t.earned_cents, t.amount_cents, t.fee_cents, t.sent_cents, t.reversed_cents, "       \
  "t.op_cents, t.available_at, t.paid_at, t.op_started_at, t.attempts, t.netted_cents"

err_t po_store_get(arena *a, const char *id, transfer_row *out, bool *found) {
  db_res *r;
  if (db_query(a, &r,
               "SELECT " TRANSFER_COLUMNS " FROM payout_transfers t LEFT JOIN providers pr ON pr.id = t.provider_id "
               "LEFT JOIN jobs j ON j.id = t.job_id LEFT JOIN payments p ON p.id = t.payment_id WHERE t.id = $1",
               DB_ARGS(DB_TEXT(id))) != DB_OK)
    return ERR_INTERNAL;
  *found = r->rows == 1;
  if (*found)
    *out = (transfer_row){db_text(r, 0, 0),  db_text(r, 0, 1),  db_text(r, 0, 2),  db_text(r, 0, 3),  db_text(r, 0, 4),
                          db_text(r, 0, 5),  db_text(r, 0, 6),  db_text(r, 0, 7),  db_text(r, 0, 8),  db_text(r, 0, 9),
                          db_text(r, 0, 10), db_text(r, 0, 11), db_text(r, 0, 12), db_text(r, 0, 13), db_text(r, 0, 14),
                          db_int(r, 0, 15),  db_int(r, 0, 16),  db_int(r, 0, 17),  db_int(r, 0, 18),  db_int(r, 0, 19),
                          db_int(r, 0, 20),  db_int(r, 0, 21),  db_int(r, 0, 22),  db_int(r, 0, 23),  db_int(r, 0, 24),
                          db_int(r, 0, 25)};
  return ERR_OK;
}

/* What provider $1 owes: fees_owed_cents (Preferred Pro fees billed, less those transfers
 * deducted) and debts_owed_cents (refunded shares not reversed, less what transfers netted). */
#define OWED_SQL                                                                                                       \
  "SELECT (SELECT COALESCE(SUM(amount_cents), 0) FROM payout_fees WHERE provider_id = $1) + "                          \
  "(SELECT COALESCE(SUM(amount_cents), 0) FROM payout_transfers WHERE provider_id = $1 "                               \
  "AND kind = 'fee' AND status IN ('scheduled', 'paid')) AS fees_owed_cents, "                                         \
  "(SELECT COALESCE(SUM(amount_cents), 0) FROM payout_debts WHERE provider_id = $1 AND status <> 'cancelled') "        \
  "AS debts_owed_cents"

/* The Preferred Pro fee to deduct from a transfer of amount cents of provider, on c inside its
 * claim: a member's month is billed with its first claim (write records it on the provider),
 * then whatever billed fees are still owed comes off, up to amount. */
static db_rc fee_due_in(db_conn *c, arena *a, const char *provider, int64_t amount, int64_t now,
                        payouts_billed_writer write, int64_t *fee) {
  db_res *r;
  *fee = 0;
  /* a member whose cancellation took effect is billed no more (its end came) */
  db_rc rc = db_exec(c, a, &r,
                     "SELECT CASE WHEN is_premium = 1 AND (premium_ends_at IS NULL OR premium_ends_at > $2) THEN 1 "
                     "ELSE 0 END FROM providers WHERE id = $1",
                     DB_ARGS(DB_TEXT(provider), DB_INT(now)));
  if (rc == DB_OK && r->rows == 1 && db_int(r, 0, 0) == 1) {
    char iso[25], month[8];
    clock_format_iso(now, iso);
    snprintf(month, sizeof month, "%.7s", iso);
    rc = db_exec(c, a, &r,
                 "INSERT INTO payout_fees (provider_id, month, amount_cents, created_at) VALUES ($1, $2, $3, $4) "
                 "ON CONFLICT (provider_id, month) DO NOTHING RETURNING month",
                 DB_ARGS(DB_TEXT(provider), DB_TEXT(month), DB_INT(PAYOUTS_PREMIUM_FEE_CENTS), DB_INT(now)));
    if (rc == DB_OK && r->rows == 1) rc = write(c, provider, month);
  }
  if (rc == DB_OK) rc = db_exec(c, a, &r, OWED_SQL, DB_ARGS(DB_TEXT(provider)));
  if (rc == DB_OK && r->rows == 1) {
    int64_t owed = db_int(r, 0, 0);
    *fee = owed <= 0 ? 0 : owed < amount ? owed : amount;
  }
  return rc;
}

/* What else the provider owes (payout_debts) to net from what is left of a transfer, on c. */
static db_rc debts_due_in(db_conn *c, arena *a, const char *provider, int64_t left, int64_t *netted) {
  db_res *r;
  *netted = 0;
  db_rc rc = db_exec(c, a, &r, OWED_SQL, DB_ARGS(DB_TEXT(provider)));
  if (rc == DB_OK && r->rows == 1) {
    int64_t owed = db_int(r, 0, 1);
    *netted = owed <= 0 || left <= 0 ? 0 : owed < left ? owed : left;
  }
  return rc;
}

err_t po_store_claim(const char *id, payouts_billed_writer write, po_claim *result) {
  db_tx x = db_tx_new();
  db_res *t = NULL, *acct = NULL, *claimed = NULL;
  *result = PO_NOT_DUE;
  err_t e = db_tx_begin_exec(&x, &x.a, &t,
                             "SELECT provider_id, job_id, attempts, available_at FROM payout_transfers "
                             "WHERE id = $1 AND status = 'scheduled' AND pending_op IS NULL AND kind <> 'fee' "
                             "AND amount_cents > 0",
                             DB_ARGS(DB_TEXT(id)));
  if (e || t->rows != 1 || db_int(t, 0, 3) > x.now) goto out;
  const char *provider = db_text(t, 0, 0);
  /* the account's row lock: one claim of the provider's at a time (its fee is computed here) */
  e = db_to_err(db_exec(x.c, &x.a, &acct,
                        "UPDATE payout_accounts SET updated_at = updated_at WHERE provider_id = $1 "
                        "RETURNING processor_account_id, status",
                        DB_ARGS(DB_TEXT(provider))));
  if (!e && (acct->rows != 1 || !is(db_text(acct, 0, 1), "enabled"))) {
    bool moved;
    e = db_to_err(db_changes_in(x.c, &moved,
                                "UPDATE payout_transfers SET status = 'waiting_for_account', updated_at = $2 "
                                "WHERE id = $1 AND status = 'scheduled' AND pending_op IS NULL",
                                DB_ARGS(DB_TEXT(id), DB_INT(x.now))));
    if (!e && moved) *result = PO_WAITING;
    if (!e && moved) e = db_to_err(told_in(x.c, "id = $1", id));
    goto out;
  }
  char key[96];
  snprintf(key, sizeof key, "transfer-%s-%lld", id, (long long)db_int(t, 0, 2) + 1);
  if (!e)
    e = db_to_err(db_exec(
        x.c, &x.a, &claimed,
        "UPDATE payout_transfers SET pending_op = 'transfer', idem_key = $2, attempts = attempts + 1, "
        "op_started_at = $3, destination = $4, updated_at = $3 WHERE id = $1 AND status = 'scheduled' "
        "AND pending_op IS NULL AND attempts = $5 RETURNING amount_cents",
        DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_INT(x.now), DB_TEXT(db_text(acct, 0, 0)), DB_INT(db_int(t, 0, 2)))));
  if (e || claimed->rows != 1) goto out; /* someone else claimed it first */
  int64_t amount = db_int(claimed, 0, 0), fee = 0;
  if (!write) { /* the providers domain has not wired the fee: nothing goes out unbilled */
    e = ERR_INTERNAL;
    goto out;
  }
  int64_t netted = 0;
  e = db_to_err(fee_due_in(x.c, &x.a, provider, amount, x.now, write, &fee));
  if (!e) e = db_to_err(debts_due_in(x.c, &x.a, provider, amount - fee, &netted));
  if (!e)
    e = db_to_err(db_exec(x.c, NULL, NULL,
                          "UPDATE payout_transfers SET fee_cents = $2, netted_cents = $3, op_cents = $4 WHERE id = $1",
                          DB_ARGS(DB_TEXT(id), DB_INT(fee), DB_INT(netted), DB_INT(amount - fee - netted))));
  if (!e && netted > 0) {
    char debt_id[ID_LEN + 1];
    id_new(debt_id);
    const char *source = arena_printf(&x.a, "netted-%s", id);
    e = db_to_err(db_exec(x.c, NULL, NULL,
                          "INSERT INTO payout_debts (id, provider_id, kind, job_id, transfer_id, source_key, "
                          "amount_cents, status, created_at, updated_at) VALUES ($1, $2, 'netted', $3, $4, $5, $6, "
                          "'scheduled', $7, $7) ON CONFLICT (source_key) DO UPDATE SET amount_cents = "
                          "excluded.amount_cents, status = 'scheduled', updated_at = excluded.updated_at",
                          DB_ARGS(DB_TEXT(debt_id), DB_TEXT(provider), DB_TEXT(db_text(t, 0, 1)), DB_TEXT(id),
                                  DB_TEXT(source), DB_INT(-netted), DB_INT(x.now))));
  }
  if (!e && fee > 0) {
    char fee_id[ID_LEN + 1];
    id_new(fee_id);
    e = db_to_err(db_exec(
        x.c, NULL, NULL,
        "INSERT INTO payout_transfers (id, provider_id, job_id, carrier_id, kind, earned_cents, amount_cents, status, "
        "available_at, seq, created_at, updated_at) VALUES ($1, $2, $3, $4, 'fee', $5, $5, 'scheduled', $6, $7, $8, "
        "$8) "
        "ON CONFLICT (carrier_id) DO UPDATE SET earned_cents = excluded.earned_cents, "
        "amount_cents = excluded.amount_cents, status = 'scheduled', seq = excluded.seq, updated_at = "
        "excluded.updated_at",
        DB_ARGS(DB_TEXT(fee_id), DB_TEXT(provider), DB_TEXT(db_text(t, 0, 1)), DB_TEXT(id), DB_INT(-fee), DB_INT(x.now),
                DB_INT(clock_sequence()), DB_INT(x.now))));
    if (!e) e = db_to_err(told_in(x.c, "carrier_id = $1", id)); /* the fee, a transfer of its own */
  }
  if (!e) *result = PO_CLAIMED;
out:
  e = db_tx_end(&x, e);
  if (e) *result = PO_NOT_DUE;
  return e;
}

/* What carrier id carried follows its outcome (status paid, or cancelled: the deduction is
 * void), in t: its fee row and the balance it netted. */
static db_rc carrier_followed_in(db_tx *t, const char *id, const char *status) {
  db_res *fees;
  db_rc rc = db_exec(t->c, &t->a, &fees,
                     "UPDATE payout_transfers SET status = $2, paid_at = CASE WHEN $2 = 'paid' THEN $3 ELSE paid_at "
                     "END, updated_at = $3 WHERE carrier_id = $1 AND status = 'scheduled' RETURNING id",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(status), DB_INT(t->now)));
  if (rc == DB_OK) rc = told_each_in(t->c, fees);
  if (rc == DB_OK)
    rc = db_exec(t->c, NULL, NULL,
                 "UPDATE payout_debts SET status = $2, updated_at = $3 WHERE kind = 'netted' AND transfer_id = $1 "
                 "AND status = 'scheduled'",
                 DB_ARGS(DB_TEXT(id), DB_TEXT(status), DB_INT(t->now)));
  return rc;
}

err_t po_store_record_paid(const transfer_row *t, const char *processor_transfer_id, const po_mail *mail, bool *moved) {
  db_tx x = db_tx_new();
  db_res *r = NULL;
  err_t e =
      db_tx_begin_exec(&x, &x.a, &r,
                       "UPDATE payout_transfers SET status = 'paid', paid_at = $3, sent_cents = COALESCE(op_cents, 0), "
                       "processor_transfer_id = $4, failure_reason = NULL, pending_op = NULL, op_cents = NULL, "
                       "op_started_at = NULL, updated_at = $3 WHERE id = $1 AND pending_op = 'transfer' "
                       "AND idem_key = $2 RETURNING " REVERSAL_DUE_FLAG,
                       DB_ARGS(DB_TEXT(t->id), DB_TEXT(t->idem_key), DB_INT(x.now), DB_TEXT(processor_transfer_id)));
  *moved = !e && r->rows == 1;
  bool reversal_due = *moved && db_int(r, 0, 0) == 1;
  if (*moved) e = db_to_err(told_in(x.c, "id = $1", t->id));
  if (!e && *moved) e = db_to_err(carrier_followed_in(&x, t->id, "paid"));
  if (!e && *moved && mail && mail->to) e = db_to_err(mail_enqueue(x.c, mail->to, mail->subject, mail->body));
  if (!e && reversal_due) e = db_to_err(queue_in(x.c, "payout_reverse", "transferId", t->id));
  e = db_tx_end(&x, e);
  if (e) *moved = false;
  return e;
}

err_t po_store_record_refused(const transfer_row *t, const char *status, const char *reason, bool *moved) {
  db_tx x;
  *moved = false;
  err_t e = db_tx_begin(&x);
  /* refunded to nothing meanwhile, it has nothing left to pay */
  if (!e)
    e = db_to_err(
        db_changes_in(x.c, moved,
                      "UPDATE payout_transfers SET status = CASE WHEN amount_cents = 0 THEN 'cancelled' "
                      "ELSE $3 END, failure_reason = $4, fee_cents = 0, netted_cents = 0, pending_op = NULL, "
                      "op_cents = NULL, op_started_at = NULL, updated_at = $5 WHERE id = $1 "
                      "AND pending_op = 'transfer' AND idem_key = $2",
                      DB_ARGS(DB_TEXT(t->id), DB_TEXT(t->idem_key), DB_TEXT(status), DB_TEXT(reason), DB_INT(x.now))));
  if (!e && *moved) e = db_to_err(told_in(x.c, "id = $1", t->id));
  if (!e && *moved) e = db_to_err(carrier_followed_in(&x, t->id, "cancelled"));
  e = db_tx_end(&x, e);
  if (e) *moved = false;
  return e;
}

db_lease po_store_lease(const transfer_row *t) {
  return (db_lease){"payout_transfers", t->id, t->pending_op, t->idem_key};
}

err_t po_store_claim_reversal(const transfer_row *t, bool *claimed) {
  char key[96];
  snprintf(key, sizeof key, "reversal-%s-%lld", t->id, (long long)t->attempts + 1);
  int64_t now = clock_now_ms();
  return db_to_err(db_changes(claimed,
                              "UPDATE payout_transfers SET pending_op = 'reversal', idem_key = $2, "
                              "op_cents = sent_cents - reversed_cents - debited_cents - "
                              "(amount_cents - fee_cents - netted_cents), "
                              "attempts = attempts + 1, op_started_at = $3, updated_at = $3 WHERE id = $1 "
                              "AND status = 'paid' AND pending_op IS NULL AND processor_transfer_id IS NOT NULL "
                              "AND attempts = $4 AND " REVERSAL_DUE,
                              DB_ARGS(DB_TEXT(t->id), DB_TEXT(key), DB_INT(now), DB_INT(t->attempts))));
}

/* t's reversal refused, in x: what the processor will not take back is owed, the provider's
 * balance (a reversal debt, once: under the request's key); *r: the transfer's row when it was
 * still that request. */
static db_rc reversal_refused_in(db_tx *x, const transfer_row *t, const char *refused, db_res **r) {
  db_rc rc = db_exec(x->c, &x->a, r,
                     "UPDATE payout_transfers SET failure_reason = $3, debited_cents = debited_cents + op_cents, "
                     "pending_op = NULL, op_cents = NULL, op_started_at = NULL, updated_at = $4 "
                     "WHERE id = $1 AND pending_op = 'reversal' AND idem_key = $2 RETURNING " REVERSAL_DUE_FLAG,
                     DB_ARGS(DB_TEXT(t->id), DB_TEXT(t->idem_key), DB_TEXT(refused), DB_INT(x->now)));
  if (rc != DB_OK || (*r)->rows != 1) return rc;
  char debt_id[ID_LEN + 1];
  id_new(debt_id);
  return db_exec(x->c, NULL, NULL,
                 "INSERT INTO payout_debts (id, provider_id, kind, job_id, transfer_id, source_key, amount_cents, "
                 "status, created_at, updated_at) VALUES ($1, $2, 'reversal', $3, $4, $5, $6, 'owed', $7, $7) "
                 "ON CONFLICT (source_key) DO NOTHING",
                 DB_ARGS(DB_TEXT(debt_id), DB_TEXT(t->provider_id), DB_TEXT(t->job_id), DB_TEXT(t->id),
                         DB_TEXT(t->idem_key), DB_INT(t->op_cents), DB_INT(x->now)));
}

/* t's reversal made, in x: reversed_cents grows (reversed once all that was sent went back). */
static db_rc reversal_made_in(db_tx *x, const transfer_row *t, db_res **r) {
  return db_exec(x->c, &x->a, r,
                 "UPDATE payout_transfers SET reversed_cents = reversed_cents + op_cents, "
                 "status = CASE WHEN reversed_cents + op_cents >= sent_cents THEN 'reversed' ELSE status END, "
                 "failure_reason = NULL, pending_op = NULL, op_cents = NULL, op_started_at = NULL, "
                 "updated_at = $3 WHERE id = $1 AND pending_op = 'reversal' AND idem_key = $2 "
                 "RETURNING " REVERSAL_DUE_FLAG,
                 DB_ARGS(DB_TEXT(t->id), DB_TEXT(t->idem_key), DB_INT(x->now)));
}

err_t po_store_record_reversal(const transfer_row *t, const char *refused, bool *moved) {
  db_tx x;
  db_res *r = NULL;
  err_t e = db_tx_begin(&x);
  if (!e) e = db_to_err(refused ? reversal_refused_in(&x, t, refused, &r) : reversal_made_in(&x, t, &r));
  *moved = !e && r->rows == 1;
  if (*moved) e = db_to_err(told_in(x.c, "id = $1", t->id));
  /* a refund that came while this reversal ran takes another share */
  if (!e && *moved && db_int(r, 0, 0) == 1) e = db_to_err(queue_in(x.c, "payout_reverse", "transferId", t->id));
  e = db_tx_end(&x, e);
  if (e) *moved = false;
  return e;
}

err_t po_store_release_holds(int64_t now, int *released) {
  db_tx x = db_tx_new();
  db_res *r = NULL;
  err_t e = db_tx_begin_exec(&x, &x.a, &r,
                             "UPDATE payout_transfers SET status = " NEXT_STATUS(
                                 "payout_transfers.provider_id") ", "
                                                                 "hold_until = NULL, updated_at = $1 WHERE status = "
                                                                 "'on_hold' AND hold_until <= $1 "
                                                                 "RETURNING id",
                             DB_ARGS(DB_INT(now)));
  if (!e) e = db_to_err(told_each_in(x.c, r));
  int ended = e ? 0 : r->rows; /* read before the transaction's memory goes */
  e = db_tx_end(&x, e);
  *released = e == ERR_OK ? ended : 0;
  return e;
}

err_t po_store_queue_due(const char *provider_id, int64_t now, int limit, int *queued) {
  db_tx x;
  db_res *r;
  *queued = 0;
  err_t e = db_tx_begin(&x);
  if (!e)
    e = db_to_err(
        provider_id
            ? db_exec(x.c, &x.a, &r,
                      "SELECT id, attempts, updated_at FROM payout_transfers WHERE status = 'scheduled' "
                      "AND pending_op IS NULL AND kind <> 'fee' AND available_at <= $1 AND provider_id = $2 "
                      "ORDER BY available_at LIMIT $3",
                      DB_ARGS(DB_INT(now), DB_TEXT(provider_id), DB_INT(limit)))
            : db_exec(x.c, &x.a, &r,
                      "SELECT id, attempts, updated_at FROM payout_transfers WHERE status = 'scheduled' "
                      "AND pending_op IS NULL AND kind <> 'fee' AND available_at <= $1 ORDER BY available_at LIMIT $2",
                      DB_ARGS(DB_INT(now), DB_INT(limit))));
  for (int i = 0; !e && i < r->rows; i++) {
    const char *key = arena_printf(&x.a, "payout:%s:%s:%s", db_text(r, i, 0), db_text(r, i, 1), db_text(r, i, 2));
    json_t *payload = json_pack("{s:s}", "transferId", db_text(r, i, 0));
    bool added;
    e = db_to_err(queue_enqueue_once(x.c, "payout_transfer", key, payload, &added));
    json_decref(payload);
    if (!e && added) (*queued)++;
  }
  return db_tx_end(&x, e);
}

err_t po_store_uncertain(arena *a, int64_t stale_before, int limit, db_res **out) {
  return db_to_err(db_query(
      a, out,
      "SELECT id, 'pending' FROM payout_transfers WHERE pending_op IS NOT NULL AND op_started_at < $1 "
      "UNION ALL SELECT id, 'reverse' FROM payout_transfers WHERE pending_op IS NULL AND status = 'paid' "
      "AND processor_transfer_id IS NOT NULL AND " REVERSAL_DUE " "
      "UNION ALL SELECT p.id, 'capture' FROM payments_without_transfer w CROSS JOIN payments p "
      "JOIN jobs j ON j.id = p.job_id WHERE p.id = w.payment_id "
      "AND p.kind IN ('job', 'tip') AND p.status = 'PAID' AND p.released_at IS NULL AND j.provider_id IS NOT NULL "
      "AND (p.kind = 'tip' OR EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = p.job_id AND q.status = 'ACCEPTED')) "
      "AND NOT EXISTS (SELECT 1 FROM payout_transfers t WHERE t.payment_id = p.id) "
      "LIMIT $2",
      DB_ARGS(DB_INT(stale_before), DB_INT(limit))));
}

/* ---- reading ---- */

const db_keyset TRANSFERS_KEYSET = {"transfers", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};

err_t po_store_list(arena *a, const char *provider_id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT id, job_id, kind, amount_cents, reversed_cents, fee_cents + netted_cents AS "
                      "netted, status, available_at, paid_at, failure_reason, seq FROM payout_transfers "
                      "WHERE provider_id = $1",
                      provider_id, out);
}

err_t po_store_totals(arena *a, const char *provider_id, db_res **out) {
  return db_to_err(db_query(
      a, out,
      "SELECT COALESCE(SUM(CASE WHEN kind <> 'fee' AND status IN ('scheduled', 'waiting_for_account', 'failed') "
      "THEN amount_cents ELSE 0 END), 0), "
      "COALESCE(SUM(CASE WHEN kind <> 'fee' AND status = 'on_hold' THEN amount_cents ELSE 0 END), 0), "
      "COALESCE(SUM(CASE WHEN kind <> 'fee' AND status IN ('paid', 'reversed') THEN sent_cents - reversed_cents "
      "ELSE 0 END), 0), COALESCE(SUM(reversed_cents), 0), "
      "(SELECT fees_owed_cents + debts_owed_cents FROM (" OWED_SQL ") o) FROM payout_transfers WHERE provider_id = $1",
      DB_ARGS(DB_TEXT(provider_id))));
}

db_read po_read_records(arena *a, const char *provider_id) {
  return db_read_make(a,
                      "SELECT t.kind, t.status, t.amount_cents, t.created_at, t.paid_at, j.service, "
                      "t.fee_cents + t.netted_cents AS netted_cents FROM payout_transfers t "
                      "LEFT JOIN jobs j ON j.id = t.job_id WHERE t.provider_id = $1 AND t.kind <> 'fee' ORDER BY t.seq",
                      DB_ARGS(DB_TEXT(provider_id)));
}

db_read po_read_owed(arena *a, const char *provider_id) {
  return db_read_make(a,
                      "SELECT fees_owed_cents + debts_owed_cents AS owed_cents, fees_owed_cents FROM (" OWED_SQL ") o",
                      DB_ARGS(DB_TEXT(provider_id)));
}

err_t po_store_owing(arena *a, db_res **out) {
  return db_to_err(db_query(
      a, out,
      "SELECT provider_id, SUM(owed) FROM (SELECT provider_id, amount_cents AS owed FROM payout_fees "
      "UNION ALL SELECT provider_id, amount_cents FROM payout_transfers WHERE kind = 'fee' "
      "AND status IN ('scheduled', 'paid') UNION ALL SELECT provider_id, amount_cents FROM payout_debts "
      "WHERE status <> 'cancelled') d GROUP BY provider_id HAVING SUM(owed) > 0 ORDER BY provider_id",
      NULL, 0));
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const PO_EXPORT_SQL[2][2] = {
    {NULL, "SELECT status, payouts_enabled, requirements, created_at, updated_at FROM payout_accounts "
           "WHERE provider_id = $1"},
    {NULL, "SELECT *, fee_cents + netted_cents AS netted FROM payout_transfers WHERE provider_id = $1 ORDER BY seq"},
};
