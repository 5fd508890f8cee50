/* Transfers: made when due, reversed when refunded, settled when their answer was lost, and the
 * background work that drives them.
 *
 * Like the payments of the job flow (payments_jobs.c), every processor request is written on its
 * record before it is made (pending_op, the key transfer-<id>-<attempt> or
 * reversal-<id>-<attempt>, the amount) and its outcome recorded only while the record still
 * names that request. Hence:
 * - a transfer is claimed by one conditional update, so of two workers (or two instances) one
 *   makes it, and the processor sees one request per attempt, under one key;
 * - a request whose answer never came is left to be settled (db/lease.h, as the payments' are):
 *   whoever takes it over (the next run of its unit of work, or the reconciliation, once its
 *   lease is over) first asks the processor what the key made
 *   (payments_find_transfer: transfers carry the key in their metadata) and repeats the
 *   request only when nothing was made; so a crash between the processor's answer and the
 *   record costs nothing and pays nothing twice;
 * - a refusal is explained by asking for the destination account: one that is not enabled (any
 *   more) makes the transfer wait for it; balance_insufficient is tried again at the next run;
 *   anything else is a failure (tried again when the account is next enabled).
 * The periodic task (every 10 minutes of the service clock) ends holds that are over and queues
 * a unit of work per transfer that came due; an account enabled queues its provider's. */
#include "core/clock.h"
#include "core/log.h"
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"
#include "domain/payouts/payouts_store.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>

#define BATCH 500

static payouts_billed_writer billed_writer;

void payouts_follow_premium(payouts_billed_writer write) { billed_writer = write; }

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

int64_t payouts_earned_after_refunds(int64_t earned, int64_t charged, int64_t refunded) {
  if (refunded <= 0 || charged <= 0) return earned;
  if (refunded >= charged) return 0;
  return earned - (earned * refunded + charged / 2) / charged;
}

bool payouts_unpaid(const char *status) {
  return is(status, "scheduled") || is(status, "waiting_for_account") || is(status, "on_hold") || is(status, "failed");
}

bool payouts_paid(const char *status) { return is(status, "paid") || is(status, "reversed"); }

err_t payouts_provider_records(arena *a, const char *provider_id, db_res **out) {
  db_read r = po_read_records(a, provider_id);
  return db_to_err(db_query(a, out, r.sql, r.params, r.n));
}

db_read payouts_read_provider_records(arena *a, const char *provider_id) { return po_read_records(a, provider_id); }

db_rc payouts_captured_in(db_conn *c, const char *payment_id) {
  bool added;
  return po_store_captured_in(c, payment_id, &added);
}

db_rc payouts_refunded_in(db_conn *c, const char *payment_id) { return po_store_refunded_in(c, payment_id); }

db_rc payouts_hold_job_in(db_conn *c, const char *job_id, int64_t reported_at, int64_t *held_cents) {
  return po_store_hold_in(c, job_id, reported_at + PAYOUTS_HOLD_MS, held_cents);
}

db_read payouts_read_job_transfers(arena *a, const char *job_id) { return po_read_job_transfers(a, job_id); }

db_rc payouts_dispute_in(db_conn *c, const char *job_id, bool open) { return po_store_dispute_in(c, job_id, open); }

db_rc payouts_release_job_in(db_conn *c, const char *job_id) { return po_store_release_job_in(c, job_id); }

db_rc payouts_forget_customer_in(db_conn *c, const char *customer_id) {
  return po_store_forget_customer_in(c, customer_id);
}

db_read payouts_read_owed(arena *a, const char *provider_id) { return po_read_owed(a, provider_id); }

err_t payouts_owing(int *providers, int64_t *owed_cents) {
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = po_store_owing(&a, &r);
  *providers = 0, *owed_cents = 0;
  for (int i = 0; e == ERR_OK && i < r->rows; i++) (*providers)++, *owed_cents += db_int(r, i, 1);
  arena_fini(&a);
  return e;
}

err_t payouts_owed(arena *a, const char *provider_id, int64_t *owed_cents, int64_t *fees_owed_cents) {
  db_read rd = po_read_owed(a, provider_id);
  db_res *r;
  err_t e = db_to_err(db_query(a, &r, rd.sql, rd.params, rd.n));
  *owed_cents = *fees_owed_cents = 0;
  if (e == ERR_OK && r->rows == 1) {
    *owed_cents = db_int(r, 0, 0) > 0 ? db_int(r, 0, 0) : 0;
    *fees_owed_cents = db_int(r, 0, 1) > 0 ? db_int(r, 0, 1) : 0;
  }
  return e;
}

/* ---- accounts ---- */

const char *payouts_account_status(const pay_account *acc) {
  if (acc->transfers_active) return "enabled";
  if (acc->details_submitted || !strncmp(acc->disabled_reason, "rejected.", 9)) return "restricted";
  return "pending";
}

err_t payouts_record_account(arena *a, const pay_account *acc) {
  const char *provider;
  err_t e = po_store_apply_account(a, acc->id, payouts_account_status(acc), acc->payouts_enabled, acc->requirements,
                                   &provider);
  if (e == ERR_OK && provider)
    log_json(
        LOG_INFO, "payout account updated",
        json_pack("{s:s,s:s,s:s}", "providerId", provider, "account", acc->id, "status", payouts_account_status(acc)));
  return e;
}

err_t payouts_account_changed(const char *account_id) {
  arena a;
  arena_init(&a);
  pay_account acc;
  pay_error pe;
  pay_rc rc = payments_retrieve_account(account_id, &acc, &pe);
  err_t e = ERR_OK;
  if (rc == PAY_NOT_FOUND) { /* the processor no longer knows it: nothing can be sent there */
    memset(&acc, 0, sizeof acc);
    snprintf(acc.id, sizeof acc.id, "%s", account_id);
    snprintf(acc.disabled_reason, sizeof acc.disabled_reason, "rejected.other");
    snprintf(acc.requirements, sizeof acc.requirements, "[]");
  } else if (rc != PAY_OK) {
    e = ERR_UNAVAILABLE;
  }
  if (e == ERR_OK) e = payouts_record_account(&a, &acc);
  arena_fini(&a);
  return e;
}

/* ---- carrying out a recorded request ---- */

static err_t leave(const transfer_row *t) {
  db_lease l = po_store_lease(t);
  return db_lease_leave(&l);
}

/* The email of a paid transfer: what was earned, what it netted (the Preferred Pro fee, the
 * balance owed), what was sent. One that netted all of it sends nothing and says so. */
static po_mail paid_mail(arena *a, const transfer_row *t) {
  bool tip = is(t->kind, "tip");
  const char *service = t->service ? t->service : "home-service";
  int64_t sent = t->amount_cents - t->fee_cents - t->netted_cents;
  const char *fee =
      t->fee_cents ? arena_printf(a, "Preferred Pro membership fee: -$%.2f\n", (double)t->fee_cents / 100) : "";
  const char *owed = t->netted_cents ? arena_printf(a, "Balance you owed (refunds and disputes): -$%.2f\n",
                                                    (double)t->netted_cents / 100)
                                     : "";
  const char *subject =
      sent > 0           ? arena_printf(a, "You've been paid $%.2f", (double)sent / 100)
      : t->fee_cents > 0 ? arena_printf(a, "Your Preferred Pro fee of $%.2f was collected", (double)t->fee_cents / 100)
                         : "Your earnings paid off your balance";
  const char *opening =
      sent > 0 ? arena_printf(a, "We sent $%.2f to your payout account for", (double)sent / 100)
               : "Nothing was sent to your payout account this time: what was owed took all of what you earned for";
  return (po_mail){t->email, subject,
                   arena_printf(a,
                                "Hello %s,\n\n%s %s %s job (%s).\n\n"
                                "Earned: $%.2f\n%s%sSent: $%.2f\n\nIt reaches your bank on your payout account's "
                                "schedule.\n",
                                t->name ? t->name : "", opening, tip ? "the tip of your" : "your", service,
                                t->job_id ? t->job_id : "", (double)t->amount_cents / 100, fee, owed,
                                (double)sent / 100)};
}

static err_t record_made(arena *a, const transfer_row *t, const char *processor_id) {
  po_mail mail = paid_mail(a, t);
  bool moved;
  err_t e = po_store_record_paid(t, processor_id, &mail, &moved);
  if (e == ERR_OK && moved)
    log_json(LOG_INFO, "transfer recorded",
             json_pack("{s:s,s:s,s:s?,s:s?,s:I,s:I}", "transferId", t->id, "providerId", t->provider_id, "jobId",
                       t->job_id, "processorTransferId", processor_id, "cents", (json_int_t)t->op_cents, "fee",
                       (json_int_t)t->fee_cents));
  return e;
}

/* A refused transfer: waiting for an account that is not enabled (any more), tried again when
 * the platform's balance cannot fund it yet, otherwise failed. */
static err_t refused(arena *a, const transfer_row *t, pay_rc rc, const pay_error *pe) {
  const char *reason = arena_printf(a, "%s: %s",
                                    pe->code[0]           ? pe->code
                                    : rc == PAY_NOT_FOUND ? "resource_missing"
                                                          : "transfer_refused",
                                    pe->message[0] ? pe->message : "The payment processor refused the transfer.");
  const char *status = "failed";
  pay_account acc;
  pay_error asked;
  pay_rc got = payments_retrieve_account(t->destination, &acc, &asked);
  if (got == PAY_UNAVAILABLE) return leave(t); /* unexplained yet: settled later (nothing was made) */
  if (got == PAY_OK && !acc.transfers_active) {
    status = "waiting_for_account";
    payouts_record_account(a, &acc);
  } else if (is(pe->code, "balance_insufficient")) {
    status = "scheduled";
  }
  log_json(LOG_WARN, "transfer refused",
           json_pack("{s:s,s:s,s:s,s:s}", "transferId", t->id, "providerId", t->provider_id, "now", status, "reason",
                     reason));
  bool moved;
  return po_store_record_refused(t, status, reason, &moved);
}

static err_t run_transfer(arena *a, const transfer_row *t, bool settling) {
  pay_transfer tr;
  pay_error pe = {0}, asked;
  pay_rc rc = PAY_NOT_FOUND;
  if (settling && t->op_cents > 0) rc = payments_find_transfer(t->destination, t->idem_key, &tr, &asked);
  if (rc == PAY_OK) return record_made(a, t, tr.id);
  if (rc != PAY_NOT_FOUND) return leave(t);
  if (t->op_cents <= 0) return record_made(a, t, NULL); /* the fee took it all: nothing to move */
  rc = payments_transfer(t->destination, t->op_cents, t->source_intent, t->job_id, t->id, t->idem_key, &tr, &pe);
  if ((rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) &&
      payments_find_transfer(t->destination, t->idem_key, &tr, &asked) == PAY_OK)
    rc = PAY_OK;
  if (rc == PAY_OK) return record_made(a, t, tr.id);
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) {
    log_json(rc == PAY_IDEMPOTENCY ? LOG_ERROR : LOG_WARN, "transfer not completed",
             json_pack("{s:s,s:s,s:s}", "transferId", t->id, "key", t->idem_key, "error", pe.message));
    return leave(t);
  }
  return refused(a, t, rc, &pe);
}

static err_t run_reversal(arena *a, const transfer_row *t, bool settling) {
  pay_reversal rv;
  pay_error pe = {0}, asked;
  pay_rc rc = settling ? payments_find_reversal(t->processor_transfer_id, t->idem_key, &rv, &asked) : PAY_NOT_FOUND;
  if (rc == PAY_NOT_FOUND) rc = payments_reverse_transfer(t->processor_transfer_id, t->op_cents, t->idem_key, &rv, &pe);
  if ((rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) &&
      payments_find_reversal(t->processor_transfer_id, t->idem_key, &rv, &asked) == PAY_OK)
    rc = PAY_OK;
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) return leave(t);
  const char *why = rc == PAY_OK ? NULL
                                 : arena_printf(a, "reversal_refused: %s",
                                                pe.message[0] ? pe.message : "The payment processor refused it.");
  log_json(rc == PAY_OK ? LOG_INFO : LOG_ERROR, rc == PAY_OK ? "transfer reversed" : "transfer reversal refused",
           json_pack("{s:s,s:s,s:I,s:s?}", "transferId", t->id, "providerId", t->provider_id, "cents",
                     (json_int_t)t->op_cents, "reason", why));
  bool moved;
  return po_store_record_reversal(t, why, &moved);
}

static err_t run(arena *a, const transfer_row *t, bool settling) {
  return is(t->pending_op, "reversal") ? run_reversal(a, t, settling) : run_transfer(a, t, settling);
}

/* Reads transfer id again and carries out its request (claimed or taken over just now): the
 * transfers' db_lease_run. */
static err_t run_claimed(arena *a, const char *id, bool settling) {
  transfer_row t;
  bool found;
  err_t e = po_store_get(a, id, &t, &found);
  if (e != ERR_OK || !found) return e == ERR_OK ? ERR_INTERNAL : e;
  return run(a, &t, settling);
}

/* Takes over t's request when it was left unsettled before stale_before, and settles it. */
static err_t take_over(arena *a, const transfer_row *t, int64_t stale_before) {
  db_lease l = po_store_lease(t);
  return db_lease_take_over(a, &l, stale_before, run_claimed);
}

/* Makes transfer id when it is due (or settles its request left unanswered). ERR_OK when done
 * or nothing is to be done; ERR_UNAVAILABLE to be tried again. */
static err_t make_one(const char *id) {
  arena a;
  arena_init(&a);
  transfer_row t;
  bool found;
  po_claim claim;
  err_t e = po_store_get(&a, id, &t, &found);
  if (e != ERR_OK || !found) goto out;
  if (t.pending_op) { /* a request under way: its carrier records it, or it was left to settle */
    if (t.op_started_at < db_lease_over()) e = take_over(&a, &t, db_lease_over());
    goto out;
  }
  if ((e = po_store_claim(id, billed_writer, &claim)) != ERR_OK || claim != PO_CLAIMED) {
    if (e != ERR_OK) log_json(LOG_ERROR, "transfer not claimed", json_pack("{s:s}", "transferId", id));
    goto out;
  }
  e = run_claimed(&a, id, false);
out:
  arena_fini(&a);
  return e;
}

/* Reverses what transfer id sent beyond what it earns now (a refund came after it was made). */
static err_t reverse_one(const char *id) {
  arena a;
  arena_init(&a);
  transfer_row t;
  bool found, claimed;
  err_t e = po_store_get(&a, id, &t, &found);
  if (e != ERR_OK || !found) goto out;
  if (t.pending_op) { /* its request first; the reversal follows from its record */
    e = t.op_started_at < db_lease_over() ? take_over(&a, &t, db_lease_over()) : ERR_UNAVAILABLE;
    goto out;
  }
  if ((e = po_store_claim_reversal(&t, &claimed)) == ERR_OK && claimed) e = run_claimed(&a, id, false);
out:
  arena_fini(&a);
  return e;
}

/* ---- background work ---- */

static bool fail_with(char err[256], err_t e, const char *what) {
  snprintf(err, 256, "%s: %s", what, e == ERR_UNAVAILABLE ? "processor or database unavailable" : "failed");
  return false;
}

bool po_transfer_from_queue(json_t *payload, char err[256]) {
  const char *id = json_string_value(json_object_get(payload, "transferId"));
  err_t e = id ? make_one(id) : ERR_OK;
  return e == ERR_OK || fail_with(err, e, "transfer");
}

bool po_reverse_from_queue(json_t *payload, char err[256]) {
  const char *id = json_string_value(json_object_get(payload, "transferId"));
  err_t e = id ? reverse_one(id) : ERR_OK;
  return e == ERR_OK || fail_with(err, e, "reversal");
}

/* The provider's transfers that are due (an account enabled, a hold ended by a refund). */
bool po_provider_from_queue(json_t *payload, char err[256]) {
  const char *provider = json_string_value(json_object_get(payload, "providerId"));
  int queued;
  err_t e = provider ? po_store_queue_due(provider, clock_now_ms(), BATCH, &queued) : ERR_OK;
  return e == ERR_OK || fail_with(err, e, "due transfers");
}

/* Every 10 minutes: holds that are over end, and every transfer that came due is queued. */
bool po_due_from_queue(json_t *payload, char err[256]) {
  (void)payload;
  int released, queued;
  int64_t now = clock_now_ms();
  err_t e = po_store_release_holds(now, &released);
  if (e == ERR_OK) e = po_store_queue_due(NULL, now, BATCH, &queued);
  if (e == ERR_OK && (released || queued))
    log_json(LOG_INFO, "payouts due", json_pack("{s:i,s:i}", "holdsEnded", released, "queued", queued));
  return e == ERR_OK || fail_with(err, e, "payouts due");
}

err_t payouts_reconcile(int64_t min_age_ms, int *checked, int *corrected) {
  arena a;
  arena_init(&a);
  db_res *r;
  *checked = *corrected = 0;
  int64_t stale_before = min_age_ms > 0 ? clock_now_ms() - min_age_ms : INT64_MAX;
  err_t e = po_store_uncertain(&a, stale_before, BATCH, &r);
  for (int i = 0; e == ERR_OK && i < r->rows; i++) {
    const char *id = db_text(r, i, 0), *what = db_text(r, i, 1);
    transfer_row before, after;
    bool found, added = false;
    (*checked)++;
    if (is(what, "capture")) { /* money captured without its transfer (made before payouts existed) */
      if (po_store_captured(id, &added) == ERR_OK && added) {
        (*corrected)++;
        log_json(LOG_WARN, "transfer reconciled", json_pack("{s:s,s:s}", "paymentId", id, "what", what));
      }
      continue;
    }
    if (po_store_get(&a, id, &before, &found) != ERR_OK || !found) continue;
    if (is(what, "pending"))
      take_over(&a, &before, stale_before);
    else
      reverse_one(id);
    if (po_store_get(&a, id, &after, &found) != ERR_OK || !found) continue;
    if (!is(before.status, after.status) || !is(before.pending_op, after.pending_op) ||
        before.reversed_cents != after.reversed_cents) {
      (*corrected)++;
      log_json(LOG_WARN, "transfer reconciled",
               json_pack("{s:s,s:s,s:s,s:s,s:s?,s:s?}", "transferId", id, "what", what, "from", before.status, "to",
                         after.status, "processorTransferId", after.processor_transfer_id, "pending",
                         after.pending_op));
    }
  }
  arena_fini(&a);
  return e;
}
