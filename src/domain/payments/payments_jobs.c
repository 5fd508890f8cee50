/* The payment operations of the job flow, and the background work that keeps them true.
 *
 * Every processor request is written on its Payment before it is made (pending_op, the
 * idempotency key, the card and the amount) and its outcome after it (pay_store_settle, which
 * records it only while the row still names that request). Hence:
 * - a retry repeats the very request: same key, card and amount, so the processor replays it
 *   rather than moving money again; a new attempt (a new card after a refusal, a renewal)
 *   gets a new key;
 * - an answer that never came, or an idempotency error, is settled by asking the processor
 *   what the key made (payments_find_intent), before anything is repeated; the record is
 *   never dropped;
 * - one carrier at a time: a request is claimed by a conditional update, and taken over by
 *   someone else only once it was left unsettled (db/lease.h): let go by its carrier when no
 *   answer came (pay_leave), or older than a lease (DB_LEASE_MS). The periodic reconciliation
 *   waits one more lease, so a customer's own retry comes first.
 * A payment whose first hold or charge is under way, or unanswered, reads PENDING until its
 * outcome is known. Failures are told to the customer (email and notification) and the
 * provider (notification) in the transaction that records them; a recovery is told to the
 * provider. A card saved while a request of the customer's is running is tried once that
 * request settled (the recovery waits for it), and the reconciliation tries every failed
 * payment again whose card is no longer the saved one. A renewal refused on the saved card
 * keeps the live hold, and the next one is made on the hold's own card. Refunds and the job's
 * payment history are in payments_refunds.c. The states and their moves are listed in
 * docs/internals/payments.md. */
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_ops.h"
#include "domain/payments/payments_store.h"
#include "domain/payouts/payouts.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RENEW_WITHIN_MS (24 * HOUR_MS) /* holds that lapse sooner are renewed */
#define HOLD_MS (7 * 24 * HOUR_MS)     /* a card authorization, when the processor does not say */
#define BATCH 200
#define KEY_LEN 96

static const char NO_CARD[] = "no_payment_method: No saved payment method";

/* What a request came to. status NULL: not known (no answer). */
typedef struct outcome {
  const char *status; /* AUTHORIZED, PAID, FAILED, CANCELED */
  char intent[PAY_ID_LEN];
  int64_t hold;     /* when an AUTHORIZED hold lapses */
  int64_t captured; /* PAID: what was captured (less than the amount after a partial capture) */
  char card_brand[32], card_last4[8];
  char reason[400];
  bool kept;               /* a refused renewal: the payment keeps its hold (AUTHORIZED, reason shown) */
  const char *reason_then; /* the failureReason of a payment that did not fail (NULL: none) */
} outcome;

static void new_key(char key[KEY_LEN], const char *op, const payment_row *p) {
  snprintf(key, KEY_LEN, "%s-%s-%lld", op, p->id, (long long)p->attempts + 1);
}

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static void fail_with(outcome *o, const char *code, const char *message) {
  o->status = "FAILED";
  snprintf(o->reason, sizeof o->reason, "%s: %s", code && *code ? code : "payment_failed",
           message && *message ? message : "The payment could not be processed.");
}

static void from_intent(const pay_intent *pi, outcome *o) {
  snprintf(o->intent, sizeof o->intent, "%s", pi->id);
  snprintf(o->card_brand, sizeof o->card_brand, "%s", pi->card_brand);
  snprintf(o->card_last4, sizeof o->card_last4, "%s", pi->card_last4);
  if (is(pi->status, "succeeded"))
    o->status = "PAID", o->captured = pi->amount_received;
  else if (is(pi->status, "requires_capture")) {
    o->status = "AUTHORIZED";
    o->hold = pi->capture_before ? pi->capture_before : clock_now_ms() + HOLD_MS;
  } else if (is(pi->status, "canceled") && !pi->error_code[0])
    fail_with(o, "canceled", "The payment was cancelled at the payment processor.");
  else if (!is(pi->status, "processing")) /* requires_payment_method, requires_action: refused off-session */
    fail_with(o, pi->error_code[0] ? pi->error_code : "authentication_required", pi->error_message);
}

static void from_answer(pay_rc rc, const pay_intent *pi, const pay_error *pe, outcome *o) {
  if (rc == PAY_OK) return from_intent(pi, o);
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) return;
  snprintf(o->intent, sizeof o->intent, "%s", pe->intent_id);
  fail_with(o, pe->code[0] ? pe->code : pe->decline_code, pe->message);
}

/* ---- what people are told ---- */

static const pay_news *failure_news(arena *a, const payment_row *p, const pay_context *cx, const char *reason,
                                    bool tell_provider) {
  pay_news *n = arena_alloc(a, sizeof *n);
  double dollars = (double)p->amount_cents / 100;
  *n = (pay_news){
      cx->customer_email,
      "Your payment failed: please update your card",
      arena_printf(a,
                   "Hello %s,\n\nWe could not charge your card $%.2f for your %s job (%s).\nReason: %s\n\n"
                   "Please update your card in the app (Payments > Card). We will try again as soon as you save "
                   "one, so your booking stays confirmed.\n",
                   cx->customer_name, dollars, cx->service, p->job_id, reason),
      {{p->user_id, "user", "Payment failed",
        arena_printf(a, "Your card was refused for your %s job (%s). Please update your card.", cx->service, reason),
        p->job_id}},
      1};
  if (tell_provider && cx->provider_id)
    n->notes[n->nnotes++] = (notice){cx->provider_id, "provider", "Payment failed",
                                     arena_printf(a,
                                                  "The customer's payment for this %s job failed; we asked them to "
                                                  "update their card.",
                                                  cx->service),
                                     p->job_id};
  return n;
}

static const pay_news *recovery_news(arena *a, const payment_row *p, const pay_context *cx) {
  pay_news *n = arena_alloc(a, sizeof *n);
  *n = (pay_news){NULL, NULL, NULL, {{0}}, 0};
  if (cx->provider_id)
    n->notes[n->nnotes++] =
        (notice){cx->provider_id, "provider", "Payment recovered",
                 arena_printf(a, "The customer's payment for this %s job went through.", cx->service), p->job_id};
  return n;
}

/* The customer's receipt for p captured (cents of it) on the card brand/last4: what the
 * provider earns of it, the platform's fee, the job and the card; the provider is told of a
 * recovered payment when recovered (notes). Into n, whose email it fills. */
static void receipt(arena *a, pay_news *n, const payment_row *p, const pay_context *cx, int64_t cents,
                    const char *brand, const char *last4) {
  bool tip = is(p->kind, "tip");
  /* a partial capture earns the provider its share of what was captured */
  int64_t share = tip                   ? cents
                  : cx->total_cents > 0 ? (cx->quote_cents * cents + cx->total_cents / 2) / cx->total_cents
                                        : cents;
  char date[25];
  clock_format_iso(clock_now_ms(), date);
  date[10] = 0;
  n->to = cx->customer_email;
  n->subject =
      arena_printf(a, "Your receipt: $%.2f for your %s job%s", (double)cents / 100, cx->service, tip ? " (tip)" : "");
  n->body =
      arena_printf(a,
                   "Hello %s,\n\nThank you: your card was charged $%.2f on %s.\n\n"
                   "Job: %s (%s)\nProvider: %s\n%s: $%.2f\nPlatform fee: $%.2f\nTotal charged: $%.2f\n"
                   "Card: %s ending in %s\nPayment: %s\n\nKeep this email as your receipt.\n",
                   cx->customer_name, (double)cents / 100, date, cx->service, p->job_id,
                   cx->provider_name ? cx->provider_name : "your provider", tip ? "Tip for your provider" : "Service",
                   (double)share / 100, (double)(cents - share) / 100, (double)cents / 100,
                   brand && *brand ? brand : "card", last4 && *last4 ? last4 : "----", p->id);
}

const pay_news *pay_receipt_news(arena *a, const payment_row *p) {
  pay_context cx;
  if (pay_store_context(a, p->job_id, &cx) != ERR_OK) return NULL;
  pay_news *n = arena_alloc(a, sizeof *n);
  *n = (pay_news){0};
  receipt(a, n, p, &cx, p->amount_cents, p->card_brand, p->card_last4);
  return n;
}

const pay_news *pay_refund_news(arena *a, const payment_row *p, int64_t cents, const char *reason) {
  pay_context cx;
  if (pay_store_context(a, p->job_id, &cx) != ERR_OK) return NULL;
  pay_news *n = arena_alloc(a, sizeof *n);
  *n = (pay_news){
      cx.customer_email,
      "Your payment was refunded",
      arena_printf(a,
                   "Hello %s,\n\nWe refunded $%.2f of your payment for your %s job (%s).\nReason: %s\n\n"
                   "The money goes back to the card you paid with; your bank shows it within 5 to 10 "
                   "business days.\n",
                   cx.customer_name, (double)cents / 100, cx.service, p->job_id, reason),
      {{p->user_id, "user", "Payment refunded",
        arena_printf(a, "$%.2f of your payment for your %s job was refunded.", (double)cents / 100, cx.service),
        p->job_id}},
      1};
  return n;
}

void payments_tell_failure(const char *payment_id) {
  arena a;
  arena_init(&a);
  payment_row p;
  pay_context cx;
  bool found;
  if (pay_store_get(&a, payment_id, &p, &found) == ERR_OK && found && is(p.kind, "job") && is(p.status, "FAILED") &&
      p.failure_reason && pay_store_context(&a, p.job_id, &cx) == ERR_OK &&
      pay_store_announce(failure_news(&a, &p, &cx, p.failure_reason, true)) != ERR_OK)
    log_json(LOG_ERROR, "telling a payment failure failed", json_pack("{s:s}", "paymentId", payment_id));
  arena_fini(&a);
}

/* ---- carrying out a recorded request ---- */

/* A hold or charge made by a request whose outcome someone else recorded differently (a
 * webhook marked the payment PAID meanwhile): a hold is given back, a charge refunded. */
static void orphan(arena *a, const payment_row *p, const outcome *o) {
  payment_row now;
  bool found;
  if (!o->intent[0] || o->kept || pay_store_get(a, p->id, &now, &found) != ERR_OK || !found ||
      is(now.intent_id, o->intent))
    return;
  if (is(o->status, "AUTHORIZED")) {
    json_t *payload = json_pack("{s:s}", "intentId", o->intent);
    queue_now("payment_cancel_hold", payload);
    json_decref(payload);
  } else if (is(o->status, "PAID")) {
    log_json(LOG_ERROR, "payment made twice: refunding the second charge",
             json_pack("{s:s,s:s,s:s?}", "paymentId", p->id, "intent", o->intent, "recorded", now.intent_id));
    pay_refund_duplicate(a, p, o->intent, p->amount_cents);
  }
}

err_t pay_leave(const payment_row *p) {
  db_lease l = pay_store_lease(p);
  return db_lease_leave(&l);
}

/* Records o as the outcome of p's request; ERR_UNAVAILABLE (the request left to be settled)
 * when it is not known. */
static err_t record(arena *a, const payment_row *p, const outcome *o, const char *cancel_intent) {
  if (!o->status) return pay_leave(p);
  const pay_news *news = NULL;
  pay_context cx;
  bool failed = is(o->status, "FAILED"), hold = is(o->status, "AUTHORIZED");
  /* a failure the people concerned were told of (a renewal refused while the hold stays is not one) */
  bool announced = p->failure_reason != NULL && !is(p->status, "AUTHORIZED");
  bool paid = is(o->status, "PAID");
  bool tell = is(p->kind, "job") && (failed || (announced && !is(o->status, "CANCELED")));
  bool receipt_due = paid && (is(p->kind, "job") || is(p->kind, "tip"));
  /* the job's context only when someone is told (a first authorization tells no one) */
  bool has_cx = (tell || receipt_due) && !o->kept && pay_store_context(a, p->job_id, &cx) == ERR_OK;
  if (has_cx && tell) news = failed ? failure_news(a, p, &cx, o->reason, !announced) : recovery_news(a, p, &cx);
  if (has_cx && receipt_due) { /* the customer's receipt */
    pay_news *n = arena_alloc(a, sizeof *n);
    *n = news ? *news : (pay_news){0};
    int64_t cents = o->captured > 0 && o->captured < p->amount_cents ? o->captured : p->amount_cents;
    receipt(a, n, p, &cx, cents, o->card_brand[0] ? o->card_brand : p->card_brand,
            o->card_last4[0] ? o->card_last4 : p->card_last4);
    news = n;
  }
  pay_settle s = {.status = o->status,
                  .intent_id = o->intent[0] && !o->kept ? o->intent : NULL,
                  .captured_cents = paid ? o->captured : 0,
                  .card_brand = o->card_brand[0] ? o->card_brand : NULL,
                  .card_last4 = o->card_last4[0] ? o->card_last4 : NULL,
                  .hold_expires_at = hold ? o->hold : 0,
                  .hold_method = hold && !o->kept ? p->method_id : NULL,
                  .failure_reason = failed || o->kept ? o->reason : o->reason_then,
                  .cancel_intent = cancel_intent,
                  .news = news};
  bool moved;
  err_t e = pay_store_settle(p, &s, &moved);
  if (e != ERR_OK) return e;
  if (!moved) return orphan(a, p, o), ERR_OK;
  log_json(is(o->status, "FAILED") ? LOG_WARN : LOG_INFO, "payment recorded",
           json_pack("{s:s,s:s,s:s,s:s,s:s,s:s?}", "paymentId", p->id, "jobId", p->job_id, "op", p->pending_op, "from",
                     p->status, "to", o->status, "reason", s.failure_reason));
  return ERR_OK;
}

static bool captures_now(const char *op) { return is(op, "charge") || is(op, "tip"); }

/* authorize, renew, charge, tip: a request that makes an intent. Settling (the answer was
 * lost), the processor is asked first what the key made; the request is repeated only when
 * it made nothing. */
static void make_intent(arena *a, const payment_row *p, const char *customer, bool settling, outcome *o) {
  pay_intent pi;
  pay_error pe, asked;
  pay_rc rc = PAY_NOT_FOUND;
  pay_context cx = {0};
  pay_store_context(a, p->job_id, &cx); /* what the charge says of itself; unread, it says less */
  bool tip = is(p->pending_op, "tip");
  pay_charge_info info = {.description = arena_printf(a, "%s%s job %s", cx.service ? cx.service : "Home-service",
                                                      tip ? " tip for" : "", p->job_id),
                          .job_id = p->job_id,
                          .quote_id = tip ? NULL : cx.quote_id,
                          .kind = tip ? "tip" : "job"};
  if (settling && customer) rc = payments_find_intent(customer, p->idem_key, &pi, &asked);
  if (rc != PAY_NOT_FOUND) return from_answer(rc, &pi, &asked, o);
  if (!customer || !p->method_id) {
    if (settling)
      log_json(LOG_ERROR, "an unsettled payment cannot be repeated: no card recorded",
               json_pack("{s:s}", "paymentId", p->id));
    else
      fail_with(o, "no_payment_method", "No saved payment method");
    return;
  }
  rc = captures_now(p->pending_op)
           ? payments_charge(customer, p->method_id, p->amount_cents, &info, p->idem_key, &pi, &pe)
           : payments_authorize(customer, p->method_id, p->amount_cents, &info, p->idem_key, &pi, &pe);
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) {
    pay_rc found = payments_find_intent(customer, p->idem_key, &pi, &asked);
    if (found == PAY_OK)
      rc = PAY_OK;
    else if (rc == PAY_IDEMPOTENCY)
      log_json(LOG_ERROR, "idempotency key refused and nothing found under it",
               json_pack("{s:s,s:s}", "paymentId", p->id, "key", p->idem_key));
  }
  if (rc != PAY_OK)
    log_json(
        LOG_WARN, "payment request not completed",
        json_pack("{s:s,s:s,s:s,s:s}", "paymentId", p->id, "op", p->pending_op, "code", pe.code, "error", pe.message));
  from_answer(rc, &pi, &pe, o);
}

/* The capture found no live hold (lapsed or cancelled): the accepted total is charged to
 * the saved card instead, as a new request. */
static err_t charge_instead(arena *a, const payment_row *p) {
  billing b;
  char key[KEY_LEN];
  bool switched, found;
  err_t e = pay_store_billing(a, p->user_id, &b);
  if (e != ERR_OK) return e;
  new_key(key, "charge", p);
  log_json(LOG_WARN, "no live authorization at capture: charging instead",
           json_pack("{s:s,s:s,s:s?}", "paymentId", p->id, "jobId", p->job_id, "intent", p->intent_id));
  if ((e = pay_store_switch(p, "charge", key, b.payment_method_id, &switched)) != ERR_OK || !switched) return e;
  payment_row q;
  if ((e = pay_store_get(a, p->id, &q, &found)) != ERR_OK || !found) return e;
  return pay_run(a, &q, false);
}

static err_t run_capture(arena *a, const payment_row *p) {
  pay_intent pi;
  pay_error pe;
  outcome o = {0};
  pay_rc rc = payments_capture(p->intent_id, p->idem_key, &pi, &pe);
  if (rc == PAY_OK || rc == PAY_UNAVAILABLE) {
    if (rc == PAY_OK) from_intent(&pi, &o), o.status = "PAID", snprintf(o.intent, sizeof o.intent, "%s", p->intent_id);
    return record(a, p, &o, NULL);
  }
  if (!is(pe.code, "charge_expired_for_capture")) { /* refused: what became of the hold? */
    rc = payments_retrieve_intent(p->intent_id, &pi, &pe);
    if (rc == PAY_UNAVAILABLE) return record(a, p, &o, NULL);
    if (rc == PAY_OK && (is(pi.status, "succeeded") || is(pi.status, "requires_capture"))) {
      if (is(pi.status, "requires_capture")) { /* still capturable, refused for another reason: later */
        log_json(LOG_ERROR, "capture refused", json_pack("{s:s,s:s}", "paymentId", p->id, "error", pe.message));
        return record(a, p, &o, NULL);
      }
      from_intent(&pi, &o);
      return record(a, p, &o, NULL);
    }
  }
  return charge_instead(a, p);
}

static err_t run_void(arena *a, const payment_row *p) {
  pay_intent pi;
  pay_error pe;
  outcome o = {0};
  pay_rc rc = payments_void(p->intent_id, p->idem_key, &pi, &pe);
  if (rc != PAY_OK && rc != PAY_UNAVAILABLE) { /* refused: already captured, cancelled or gone? */
    rc = payments_retrieve_intent(p->intent_id, &pi, &pe);
    if (rc == PAY_OK && is(pi.status, "succeeded"))
      o.status = "PAID";
    else if (rc == PAY_OK && is(pi.status, "requires_capture"))
      log_json(LOG_ERROR, "void refused", json_pack("{s:s}", "paymentId", p->id)), rc = PAY_UNAVAILABLE;
    else if (rc != PAY_UNAVAILABLE)
      rc = PAY_OK;
  }
  if (rc == PAY_OK && !o.status) o.status = "CANCELED";
  return record(a, p, &o, NULL);
}

/* A renewal made a new hold: it replaces the old one, which is given back; renewed on the
 * hold's own card (the saved one was refused), the refusal's reason stays shown. Refused, the
 * payment keeps its hold and shows the reason while that hold lasts; past it, it has failed. */
static err_t record_renewal(arena *a, const payment_row *p, const billing *b, outcome *o) {
  if (is(o->status, "AUTHORIZED")) {
    o->reason_then = is(p->method_id, b->payment_method_id) ? NULL : p->failure_reason;
    return record(a, p, o, p->intent_id);
  }
  if (is(o->status, "FAILED") && p->hold_expires_at > clock_now_ms()) {
    o->status = "AUTHORIZED", o->kept = true, o->hold = p->hold_expires_at;
    log_json(LOG_WARN, "renewal refused: the payment keeps its hold",
             json_pack("{s:s,s:s,s:s}", "paymentId", p->id, "jobId", p->job_id, "reason", o->reason));
  }
  return record(a, p, o, NULL);
}

/* pay_run, with the customer's billing when the caller has just read it (NULL: read here). */
static err_t run_billed(arena *a, payment_row *p, bool settling, const billing *known) {
  if (is(p->pending_op, "capture")) return run_capture(a, p);
  if (is(p->pending_op, "void")) return run_void(a, p);
  if (is(p->pending_op, "refund")) return pay_run_refund(a, p, settling);
  billing b;
  err_t e = known ? (b = *known, ERR_OK) : pay_store_billing(a, p->user_id, &b);
  if (e != ERR_OK) return e;
  outcome o = {0};
  make_intent(a, p, b.customer_id, settling, &o);
  if (is(p->pending_op, "renew") && o.status) return record_renewal(a, p, &b, &o);
  return record(a, p, &o, NULL);
}

err_t pay_run(arena *a, payment_row *p, bool settling) { return run_billed(a, p, settling, NULL); }

err_t pay_run_claimed(arena *a, const char *id, bool settling) {
  payment_row p;
  bool found;
  err_t e = pay_store_get(a, id, &p, &found);
  if (e != ERR_OK || !found) return e == ERR_OK ? ERR_INTERNAL : e;
  return pay_run(a, &p, settling);
}

err_t pay_attempt(arena *a, const payment_row *p, const char *op, const char *method, int64_t cents) {
  char key[KEY_LEN];
  if (is(op, "capture") || is(op, "void")) /* one operation on one intent: one key, whoever asks */
    snprintf(key, sizeof key, "%s-%s", is(op, "void") ? "cancel" : "capture", p->intent_id);
  else
    new_key(key, op, p);
  bool claimed;
  err_t e = pay_store_claim(p->id, p->status, op, key, method, cents, &claimed);
  if (e != ERR_OK) return e;
  return claimed ? pay_run_claimed(a, p->id, false) : ERR_UNAVAILABLE;
}

err_t pay_take_over(arena *a, const payment_row *p, int64_t stale_before) {
  db_lease l = pay_store_lease(p);
  return db_lease_take_over(a, &l, stale_before, pay_run_claimed);
}

bool pay_queue(const char *kind, const char *field, const char *id) {
  json_t *payload = json_pack("{s:s}", field, id);
  db_rc rc = queue_now(kind, payload);
  json_decref(payload);
  return rc == DB_OK;
}

/* ---- the job's payment: capture, void, follow-up ---- */

/* Does what a job's payment needs now (act: capture or void it), after settling a request
 * left unanswered. ERR_OK when done or nothing is to be done; ERR_UNAVAILABLE when it must
 * be tried again later (the processor away, or the payment busy with another request). */
static err_t act_on_job(const char *job_id, err_t (*act)(arena *, const payment_row *)) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found;
  err_t e = ERR_OK;
  for (int pass = 0; pass < 2; pass++) {
    e = pay_store_find(&a, job_id, "job", &p, &found);
    if (e != ERR_OK || !found) break;
    if (!p.pending_op) {
      e = act(&a, &p);
      break;
    }
    /* its last request first: it may have placed a hold or moved money */
    if ((e = pay_take_over(&a, &p, db_lease_over())) != ERR_OK) break;
    e = ERR_UNAVAILABLE;
  }
  arena_fini(&a);
  return e;
}

/* Captures the live hold, or charges the accepted total when there is none (FAILED). */
static err_t capture_act(arena *a, const payment_row *p) {
  if (is(p->status, "AUTHORIZED")) return pay_attempt(a, p, "capture", NULL, 0);
  if (!is(p->status, "FAILED")) return ERR_OK; /* PAID or CANCELED */
  billing b;
  err_t e = pay_store_billing(a, p->user_id, &b);
  return e == ERR_OK ? pay_attempt(a, p, "charge", b.payment_method_id, 0) : e;
}

static err_t void_act(arena *a, const payment_row *p) {
  return is(p->status, "AUTHORIZED") ? pay_attempt(a, p, "void", NULL, 0) : ERR_OK;
}

static err_t capture_now(const char *job_id) { return act_on_job(job_id, capture_act); }
static err_t void_now(const char *job_id) { return act_on_job(job_id, void_act); }

/* After a request settled: a hold on a job that was cancelled or completed meanwhile is
 * voided or captured. */
static err_t follow_job(const char *job_id) {
  arena a;
  arena_init(&a);
  payment_row p;
  pay_context cx;
  bool found;
  err_t e = pay_store_find(&a, job_id, "job", &p, &found);
  if (e == ERR_OK && found && !p.pending_op && is(p.status, "AUTHORIZED") &&
      (e = pay_store_context(&a, job_id, &cx)) == ERR_OK) {
    if (is(cx.job_status, "CANCELLED"))
      e = void_now(job_id);
    else if (is(cx.job_status, "COMPLETED"))
      e = capture_now(job_id);
  }
  arena_fini(&a);
  return e;
}

/* whatever could not be done now is queued and tried again */
err_t payments_capture_job(const char *job_id) {
  if (capture_now(job_id) == ERR_OK) return ERR_OK;
  return pay_queue("payment_capture", "jobId", job_id) ? ERR_OK : ERR_INTERNAL;
}

err_t payments_void_job(const char *job_id) {
  if (void_now(job_id) == ERR_OK) return ERR_OK;
  return pay_queue("payment_void", "jobId", job_id) ? ERR_OK : ERR_INTERNAL;
}

/* The error a payment's recording came to, for the functions whose contract speaks in errors:
 * a payment the job has already is ERR_CONFLICT (payments_authorize_job, payments_charge_tip). */
static err_t insert_err(pay_insert_outcome in) {
  switch (in) {
  case PAY_INSERTED: return ERR_OK;
  case PAY_INSERT_TAKEN: return ERR_CONFLICT;
  case PAY_INSERT_UNAVAILABLE: return ERR_UNAVAILABLE;
  case PAY_INSERT_FAILED: break;
  }
  return ERR_INTERNAL;
}

/* Inserts p as the job's payment. One the job kept from an acceptance before its current one
 * (it went back to PENDING by a path that did not release it) moves to the history first. */
static err_t insert_current(const payment_row *p, const pay_news *news) {
  pay_insert_outcome in = pay_store_insert(p, news);
  int released = 0;
  if (in == PAY_INSERT_TAKEN && pay_store_history(p->job_id, true, &released) == ERR_OK && released) {
    log_json(LOG_WARN, "a payment of an earlier acceptance moved to the job's history",
             json_pack("{s:s,s:i}", "jobId", p->job_id, "payments", released));
    in = pay_store_insert(p, news);
  }
  return insert_err(in);
}

err_t payments_authorize_job(const char *job_id, const char *user_id, int64_t cents) {
  arena a;
  arena_init(&a);
  billing b;
  char id[ID_LEN + 1], key[KEY_LEN];
  id_new(id);
  err_t e = pay_store_billing(&a, user_id, &b);
  if (e != ERR_OK) goto out;
  payment_row p = {
      .id = id, .job_id = job_id, .user_id = user_id, .kind = "job", .status = "FAILED", .amount_cents = cents};
  if (!b.customer_id || !b.payment_method_id) { /* nothing to authorize: a failure to tell */
    pay_context cx;
    p.failure_reason = NO_CARD;
    if ((e = pay_store_context(&a, job_id, &cx)) == ERR_OK)
      e = insert_current(&p, failure_news(&a, &p, &cx, NO_CARD, true));
    goto out;
  }
  new_key(key, "authorize", &p);
  p.status = "PENDING", p.pending_op = "authorize", p.idem_key = key, p.method_id = b.payment_method_id;
  if ((e = insert_current(&p, NULL)) != ERR_OK) goto out;
  bool found;
  if ((e = pay_store_get(&a, id, &p, &found)) != ERR_OK || !found) goto out;
  e = run_billed(&a, &p, false, &b);
  if (e == ERR_UNAVAILABLE) e = pay_queue("payment_settle", "paymentId", id) ? ERR_OK : ERR_INTERNAL;
out:
  arena_fini(&a);
  return e;
}

/* ---- tips ---- */

err_t payments_charge_tip(const char *job_id, const char *user_id, int64_t *cents, char msg[256]) {
  arena a;
  arena_init(&a);
  billing b;
  payment_row p;
  char id[ID_LEN + 1], key[KEY_LEN];
  bool found;
  err_t e = pay_store_billing(&a, user_id, &b);
  if (e != ERR_OK || (e = pay_store_find(&a, job_id, "tip", &p, &found)) != ERR_OK) goto out;
  if (!found || (is(p.status, "FAILED") && !p.pending_op)) { /* a first tip, or one after a refusal */
    if (!b.customer_id || !b.payment_method_id) {
      snprintf(msg, 256, "A saved payment method is required");
      e = ERR_BAD_REQUEST;
      goto out;
    }
    if (!found) { /* the row claims the tip: a concurrent tip hits the unique (job, kind) index */
      id_new(id);
      payment_row fresh = {.id = id,
                           .job_id = job_id,
                           .user_id = user_id,
                           .kind = "tip",
                           .status = "PENDING",
                           .amount_cents = *cents,
                           .pending_op = "tip",
                           .idem_key = key,
                           .method_id = b.payment_method_id};
      new_key(key, "tip", &fresh);
      e = insert_err(pay_store_insert(&fresh, NULL)); /* taken: another request is charging it */
      if (e == ERR_OK) e = pay_store_get(&a, id, &p, &found);
      if (e == ERR_OK) e = found ? pay_run(&a, &p, false) : ERR_INTERNAL;
    } else {
      e = pay_attempt(&a, &p, "tip", b.payment_method_id, *cents);
    }
  } else if (p.pending_op) {
    /* a tip whose answer was lost: settled as the very request it was (card, amount, key) */
    e = pay_take_over(&a, &p, db_lease_over());
  } else {
    e = ERR_CONFLICT; /* PAID */
  }
  if (e == ERR_OK || e == ERR_UNAVAILABLE) {
    bool again;
    if (pay_store_find(&a, job_id, "tip", &p, &again) != ERR_OK || !again) e = ERR_INTERNAL;
  }
  if (e == ERR_UNAVAILABLE && p.pending_op &&
      p.op_started_at < db_lease_over()) { /* left to the next tip, or the reconciliation */
    snprintf(msg, 256, "Payment processor unavailable");
  } else if (e == ERR_UNAVAILABLE || e == ERR_CONFLICT) { /* another request is charging it */
    snprintf(msg, 256, "A tip was already submitted for this job");
    e = ERR_CONFLICT;
  } else if (e == ERR_OK && is(p.status, "PAID")) {
    *cents = p.amount_cents;
  } else if (e == ERR_OK) { /* refused: FAILED, so the customer may try another card */
    const char *why = p.failure_reason ? strstr(p.failure_reason, ": ") : NULL;
    snprintf(msg, 256, "%s", why ? why + 2 : "The payment could not be processed");
    e = ERR_PAYMENT_REQUIRED;
  }
out:
  arena_fini(&a);
  return e;
}

/* ---- background work ---- */

/* The outcome of a unit of payment work that ended with e: done, or why not (busy: the message
 * when the payment or the processor was unavailable). */
static bool work_done(err_t e, char err[256], const char *busy) {
  if (e == ERR_OK) return true;
  snprintf(err, 256, "%s", e == ERR_UNAVAILABLE ? busy : "cannot record the payment");
  return false;
}

/* Payment id, as it stands: a request it was left in is carried out, then its job's follow-up. */
static err_t settle(const char *id) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found;
  err_t e = pay_store_get(&a, id, &p, &found);
  if (e == ERR_OK && found && p.pending_op) e = pay_take_over(&a, &p, db_lease_over());
  if (e == ERR_OK && found) e = follow_job(p.job_id);
  arena_fini(&a);
  return e;
}

bool pay_settle_from_queue(json_t *payload, char err[256]) {
  const char *id = json_string_value(json_object_get(payload, "paymentId"));
  return work_done(id ? settle(id) : ERR_OK, err, "payment processor unavailable");
}

static bool job_from_queue(json_t *payload, char err[256], err_t (*fn)(const char *)) {
  const char *job_id = json_string_value(json_object_get(payload, "jobId"));
  return work_done(job_id ? fn(job_id) : ERR_OK, err, "payment busy or processor unavailable");
}

bool pay_capture_from_queue(json_t *payload, char err[256]) { return job_from_queue(payload, err, capture_now); }
bool pay_void_from_queue(json_t *payload, char err[256]) { return job_from_queue(payload, err, void_now); }

/* A hold replaced by a renewal (or made by a request recorded otherwise) is given back. */
bool pay_cancel_hold_from_queue(json_t *payload, char err[256]) {
  const char *intent = json_string_value(json_object_get(payload, "intentId"));
  if (!intent) return true;
  char key[PAY_ID_LEN + 16];
  snprintf(key, sizeof key, "cancel-%s", intent);
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_void(intent, key, &pi, &pe);
  if (rc == PAY_UNAVAILABLE) return snprintf(err, 256, "payment processor unavailable"), false;
  if (rc != PAY_OK)
    log_json(LOG_INFO, "replaced hold not cancelled (already gone)",
             json_pack("{s:s,s:s}", "intent", intent, "error", pe.message));
  return true;
}

/* Payment id of a customer whose saved card is now `method`: a failed payment not yet tried
 * on that card is tried again on it as a new request (an authorization for a job not done
 * yet, a charge for a completed one), after the request under way on it, if any, settled.
 * ERR_UNAVAILABLE while a request is still running (or its answer not known): try again
 * after it. */
static err_t recover_one(arena *a, const char *id, const char *method) {
  payment_row p;
  pay_context cx;
  bool found;
  err_t e = pay_store_get(a, id, &p, &found);
  if (e != ERR_OK || !found || p.released_at) return e;
  if (p.pending_op) { /* its request first: it may have gone through, or been made on an older card */
    if ((e = pay_take_over(a, &p, db_lease_over())) != ERR_OK) return e;
    if ((e = pay_store_get(a, id, &p, &found)) != ERR_OK || !found) return e;
    if (p.pending_op) return ERR_UNAVAILABLE;
  }
  /* a payment already refused on this very card is not asked again */
  if (!method || !is(p.status, "FAILED") || is(p.method_id, method)) return ERR_OK;
  if ((e = pay_store_context(a, p.job_id, &cx)) != ERR_OK) return e;
  bool done = is(cx.job_status, "COMPLETED");
  if (!done && !is(cx.job_status, "ACCEPTED") && !is(cx.job_status, "ON_THE_WAY") && !is(cx.job_status, "IN_PROGRESS"))
    return ERR_OK; /* cancelled, or back to PENDING: nothing to pay */
  e = pay_attempt(a, &p, done ? "charge" : "authorize", method, 0);
  if (e == ERR_OK) follow_job(p.job_id);
  return e;
}

/* A card was saved: every failed payment of the customer's jobs still to be paid is tried
 * again on it (recover_one). A request still running is waited for: the work is tried again
 * after it, so a card saved while a charge on the old one is in flight is used once it
 * settles. */
bool pay_recover_from_queue(json_t *payload, char err[256]) {
  const char *user = json_string_value(json_object_get(payload, "userId"));
  const char *method = json_string_value(json_object_get(payload, "paymentMethodId"));
  if (!user || !method) return true;
  arena a;
  arena_init(&a);
  billing b;
  db_res *r;
  bool done = true, waiting = false;
  err_t e = pay_store_billing(&a, user, &b);
  if (e == ERR_NOT_FOUND || (e == ERR_OK && !is(b.payment_method_id, method))) goto out; /* a newer card's turn */
  if (e != ERR_OK || (e = pay_store_recoverable(&a, user, &r)) != ERR_OK) goto fail;
  for (int i = 0; i < r->rows; i++) {
    e = recover_one(&a, db_text(r, i, 0), method);
    if (e == ERR_UNAVAILABLE)
      waiting = true;
    else if (e != ERR_OK)
      goto fail;
  }
  if (!waiting) goto out;
  snprintf(err, 256, "a payment request of %s is still under way: tried again after it", user);
  done = false;
  goto out;
fail:
  snprintf(err, 256, "cannot recover the payments of %s", user);
  done = false;
out:
  arena_fini(&a);
  return done;
}

/* Renews hold p: a new authorization of the same amount, under its own key, on the saved card;
 * on the hold's own card when none is saved, or when the last renewal was refused on the saved
 * card (the payment kept its hold then, and is still due: the next run tries the hold's card). */
static void renew_hold(arena *a, const payment_row *p) {
  billing b;
  if (pay_store_billing(a, p->user_id, &b) != ERR_OK) return;
  const char *card = b.payment_method_id;
  bool refused_there = p->failure_reason && is(p->method_id, card); /* AUTHORIZED with a reason: kept */
  if ((!card || refused_there) && p->hold_method_id) card = p->hold_method_id;
  log_json(LOG_INFO, "renewing a card hold",
           json_pack("{s:s,s:s,s:b}", "paymentId", p->id, "jobId", p->job_id, "holdCard", is(card, p->hold_method_id)));
  if (pay_attempt(a, p, "renew", card, 0) == ERR_UNAVAILABLE)
    pay_queue("payment_settle", "paymentId", p->id);
  else
    follow_job(p->job_id);
}

/* Hourly: a hold that lapses within 24 hours while its job is still to be done is renewed
 * (renew_hold), the old hold cancelled once a new one is made. */
bool pay_renew_holds_from_queue(json_t *payload, char err[256]) {
  (void)payload;
  arena a;
  arena_init(&a);
  db_res *r;
  bool done = true;
  if (pay_store_holds_due(&a, clock_now_ms() + RENEW_WITHIN_MS, BATCH, &r) != ERR_OK) {
    snprintf(err, 256, "cannot read the holds due");
    done = false;
    goto out;
  }
  for (int i = 0; i < r->rows; i++) {
    payment_row p;
    bool found;
    if (pay_store_get(&a, db_text(r, i, 0), &p, &found) == ERR_OK && found) renew_hold(&a, &p);
  }
out:
  arena_fini(&a);
  return done;
}

/* One payment of the reconciliation, by what pay_store_uncertain found. */
static void reconcile_one(arena *a, const payment_row *p, const char *what, int64_t stale_before) {
  if (is(what, "pending")) {
    if (pay_take_over(a, p, stale_before) == ERR_UNAVAILABLE) return;
    if (p->released_at)
      pay_release_one(p->id);
    else
      follow_job(p->job_id);
  } else if (is(what, "void") || is(what, "capture")) {
    (is(what, "void") ? void_now : capture_now)(p->job_id);
  } else if (is(what, "recover")) {
    billing b;
    if (pay_store_billing(a, p->user_id, &b) == ERR_OK) recover_one(a, p->id, b.payment_method_id);
  } else { /* release, or reopen: a job back to PENDING whose payment was not moved to its history */
    int released;
    if (is(what, "release") || pay_store_history(p->job_id, false, &released) == ERR_OK) pay_release_one(p->id);
  }
}

/* Reconciles row i of what pay_store_uncertain found, counting it in checked and, when it
 * changed, in corrected. */
static void reconcile_row(arena *a, const db_res *r, int i, int64_t stale_before, int *checked, int *corrected) {
  const char *id = db_text(r, i, 0), *job_id = db_text(r, i, 1), *what = db_text(r, i, 2);
  payment_row before, after;
  bool found;
  if (pay_store_get(a, id, &before, &found) != ERR_OK || !found) return;
  (*checked)++;
  reconcile_one(a, &before, what, stale_before);
  if (pay_store_get(a, id, &after, &found) != ERR_OK || !found) return;
  if (!is(before.status, after.status) || !is(before.pending_op, after.pending_op) ||
      before.released_at != after.released_at || before.refunded_cents != after.refunded_cents) {
    (*corrected)++;
    log_json(LOG_WARN, "payment reconciled",
             json_pack("{s:s,s:s,s:s,s:s,s:s,s:s?,s:s?,s:I}", "paymentId", id, "jobId", job_id, "what", what, "from",
                       before.status, "to", after.status, "intent", after.intent_id, "pending", after.pending_op,
                       "refunded", (json_int_t)after.refunded_cents));
  }
}

err_t payments_reconcile(int64_t min_age_ms, int *checked, int *corrected) {
  arena a;
  arena_init(&a);
  db_res *uncertain[2];
  *checked = *corrected = 0;
  int64_t stale_before = min_age_ms > 0 ? clock_now_ms() - min_age_ms : INT64_MAX; /* 0: every one */
  err_t e = pay_store_uncertain(&a, stale_before, 500, uncertain);
  for (int k = 0; e == ERR_OK && k < 2; k++)
    for (int i = 0; i < uncertain[k]->rows; i++) reconcile_row(&a, uncertain[k], i, stale_before, checked, corrected);
  arena_fini(&a);
  int transfers_checked, transfers_corrected; /* then the money on its way to providers */
  if (e == ERR_OK) e = payouts_reconcile(min_age_ms, &transfers_checked, &transfers_corrected);
  if (e == ERR_OK) *checked += transfers_checked, *corrected += transfers_corrected;
  return e;
}

bool pay_reconcile_from_queue(json_t *payload, char err[256]) {
  (void)payload;
  int checked, corrected;
  if (payments_reconcile(2 * DB_LEASE_MS, &checked, &corrected) == ERR_OK) return true;
  snprintf(err, 256, "cannot read the payments to reconcile");
  return false;
}

db_rc payments_follow_up(db_conn *c, const char *job_id) {
  json_t *payload = json_pack("{s:s}", "jobId", job_id);
  db_rc rc = queue_enqueue_at(c, "payment_follow_up", payload, clock_now_ms() + PAYMENT_FOLLOW_UP_MS);
  json_decref(payload);
  return rc;
}

bool pay_follow_up_from_queue(json_t *payload, char err[256]) {
  const char *job_id = json_string_value(json_object_get(payload, "jobId"));
  if (!job_id) return true;
  arena a;
  arena_init(&a);
  const char *status, *customer;
  int64_t cents;
  payment_row p;
  bool found = false, done = false;
  if (pay_store_job_terms(&a, job_id, &status, &customer, &cents) != ERR_OK ||
      pay_store_find(&a, job_id, "job", &p, &found) != ERR_OK) {
    snprintf(err, 256, "cannot read the job and its payment");
    goto out;
  }
  done = true;
  if (found || !status || cents <= 0 || is(status, "CANCELLED")) goto out;
  err_t e = payments_authorize_job(job_id, customer, cents); /* conflict: recorded meanwhile */
  if (e == ERR_OK)
    log_json(LOG_WARN, "payment authorized by the follow-up of an acceptance", json_pack("{s:s}", "jobId", job_id));
  else if (e != ERR_CONFLICT)
    done = false, snprintf(err, 256, "cannot record the authorization");
out:
  arena_fini(&a);
  return done;
}

const hs_rj_field PAYMENTS_JSON[] = {
    {"id", "id", RJ_STR},
    {"status", "status", RJ_STR},
    {"amount", "amount_cents", RJ_MONEY},
    {"processorPaymentIntentId", "processor_payment_intent_id", RJ_STR},
    {"holdExpiresAt", "hold_expires_at", RJ_ISO},
    {"failureReason", "failure_reason", RJ_STR},
    {"refundedAmount", "refunded_cents", RJ_MONEY},
    {"dispute", "dispute_json", RJ_JSON},
    {0},
};
