/* The payment operations of the job flow. The Payment row is written before or right after
 * the processor call, and every processor call carries a key derived from the Payment id,
 * so repeating an operation (a retry, a queued capture, a concurrent request) reaches the
 * processor as the same request and money moves once. */
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_store.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>

static void log_payment(const char *what, const char *job_id, const pay_error *pe) {
  log_json(LOG_WARN, what, json_pack("{s:s,s:s,s:s}", "jobId", job_id, "error", pe->message, "declineCode",
                                      pe->decline_code));
}

err_t payments_authorize_job(const char *job_id, const char *user_id, int64_t cents) {
  arena a;
  arena_init(&a);
  billing b;
  char id[ID_LEN + 1], key[64];
  id_new(id);
  err_t e = pay_store_billing(&a, user_id, &b);
  if (e != ERR_OK) goto out;
  if (!b.customer_id || !b.payment_method_id) {
    e = pay_store_insert(id, job_id, user_id, "job", "FAILED", cents, NULL, "no saved payment method");
    goto out;
  }
  snprintf(key, sizeof key, "authorize-%s", job_id);
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_authorize(b.customer_id, b.payment_method_id, cents, key, &pi, &pe);
  if (rc != PAY_OK) log_payment("payment authorization failed", job_id, &pe);
  const char *intent = rc == PAY_OK ? pi.id : pe.intent_id[0] ? pe.intent_id : NULL;
  e = pay_store_insert(id, job_id, user_id, "job", rc == PAY_OK ? "AUTHORIZED" : "FAILED", cents, intent,
                       rc == PAY_OK ? NULL : pe.message);
  if (e == ERR_OK && rc == PAY_UNAVAILABLE) {
    /* no answer: the hold may exist all the same; ask again, the same request, until one comes */
    json_t *payload = json_pack("{s:s,s:s,s:s,s:I}", "jobId", job_id, "customerId", b.customer_id, "paymentMethodId",
                                b.payment_method_id, "cents", (json_int_t)cents);
    if (queue_now("payment_authorize_confirm", payload) != DB_OK) e = ERR_INTERNAL;
    json_decref(payload);
  }
out:
  arena_fini(&a);
  return e;
}

/* Captures payment p; PAY_UNAVAILABLE leaves it AUTHORIZED for a retry. */
static pay_rc capture(const payment_row *p) {
  char key[64];
  snprintf(key, sizeof key, "capture-%s", p->id);
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_capture(p->intent_id, key, &pi, &pe);
  bool moved;
  if (rc == PAY_OK) pay_store_move(p->id, "AUTHORIZED", "PAID", NULL, &moved);
  else if (rc != PAY_UNAVAILABLE) {
    log_payment("payment capture refused", p->job_id, &pe);
    pay_store_move(p->id, "AUTHORIZED", "FAILED", NULL, &moved);
  }
  return rc;
}

static bool capture_job_from_queue(json_t *payload, char err[256]) {
  const char *job_id = json_string_value(json_object_get(payload, "jobId"));
  arena a;
  arena_init(&a);
  payment_row p;
  bool found, done = true;
  if (!job_id || pay_store_find(&a, job_id, "job", &p, &found) != ERR_OK) {
    snprintf(err, 256, "cannot read the payment");
    done = false;
  } else if (found && !strcmp(p.status, "AUTHORIZED") && capture(&p) == PAY_UNAVAILABLE) {
    snprintf(err, 256, "payment processor unavailable");
    done = false;
  }
  arena_fini(&a);
  return done;
}

/* An authorization that got no answer at all (every try lost or refused with 5xx) was
 * recorded FAILED, but the processor may have placed the hold. This repeats the very request
 * under the same idempotency key until the processor answers: Stripe then returns the stored
 * result of the first one, or, if that never arrived, makes the hold now, once. A hold found
 * this way makes the Payment AUTHORIZED, and is voided or captured at once when the job was
 * cancelled or completed meanwhile. */
static bool confirm_authorization_from_queue(json_t *payload, char err[256]) {
  const char *job_id = json_string_value(json_object_get(payload, "jobId"));
  const char *customer = json_string_value(json_object_get(payload, "customerId"));
  const char *method = json_string_value(json_object_get(payload, "paymentMethodId"));
  json_int_t cents = json_integer_value(json_object_get(payload, "cents"));
  if (!job_id || !customer || !method || cents <= 0) return true; /* malformed: nothing to retry */
  arena a;
  arena_init(&a);
  payment_row p;
  bool found, done = true, moved;
  if (pay_store_find(&a, job_id, "job", &p, &found) != ERR_OK) {
    snprintf(err, 256, "cannot read the payment");
    done = false;
    goto out;
  }
  if (!found || strcmp(p.status, "FAILED") || p.intent_id) goto out; /* settled meanwhile (a webhook) */
  char key[64];
  snprintf(key, sizeof key, "authorize-%s", job_id);
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_authorize(customer, method, (int64_t)cents, key, &pi, &pe);
  if (rc == PAY_UNAVAILABLE) {
    snprintf(err, 256, "payment processor unavailable");
    done = false;
    goto out;
  }
  if (rc != PAY_OK) { /* a definite refusal: FAILED was right; keep the declined intent's id */
    log_payment("payment authorization failed", job_id, &pe);
    if (pe.intent_id[0]) pay_store_move(p.id, "FAILED", "FAILED", pe.intent_id, &moved);
    goto out;
  }
  if (pay_store_move(p.id, "FAILED", "AUTHORIZED", pi.id, &moved) != ERR_OK) {
    snprintf(err, 256, "cannot record the authorization");
    done = false;
    goto out;
  }
  log_json(LOG_INFO, "payment authorization confirmed after lost answers", json_pack("{s:s}", "jobId", job_id));
  const char *job_status = NULL;
  if (moved && pay_store_job_status(&a, job_id, &job_status) == ERR_OK && job_status) {
    if (!strcmp(job_status, "CANCELLED") && payments_void_job(job_id) == ERR_UNAVAILABLE) {
      snprintf(err, 256, "payment processor unavailable for the void"); /* retried: the row is AUTHORIZED now */
      done = false;
    } else if (!strcmp(job_status, "COMPLETED")) {
      payments_capture_job(job_id); /* queues its own retry when the processor is away */
    }
  }
out:
  arena_fini(&a);
  return done;
}

db_rc payments_follow_up(db_conn *c, const char *job_id) {
  json_t *payload = json_pack("{s:s}", "jobId", job_id);
  db_rc rc = queue_enqueue_at(c, "payment_follow_up", payload, clock_now_ms() + PAYMENT_FOLLOW_UP_MS);
  json_decref(payload);
  return rc;
}

static bool follow_up_from_queue(json_t *payload, char err[256]) {
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
  if (!found && status && cents > 0 && strcmp(status, "CANCELLED")) {
    err_t e = payments_authorize_job(job_id, customer, cents);
    if (e != ERR_OK && e != ERR_CONFLICT) { /* conflict: the request's own authorization recorded it meanwhile */
      snprintf(err, 256, "cannot record the authorization");
      goto out;
    }
    if (e == ERR_OK) log_json(LOG_WARN, "payment authorized by the follow-up of an acceptance", json_pack("{s:s}", "jobId", job_id));
    if (pay_store_find(&a, job_id, "job", &p, &found) != ERR_OK) {
      snprintf(err, 256, "cannot read the payment");
      goto out;
    }
  }
  done = true;
  if (found && status && !strcmp(p.status, "AUTHORIZED")) {
    if (!strcmp(status, "COMPLETED")) payments_capture_job(job_id); /* queues its own retry */
    else if (!strcmp(status, "CANCELLED") && payments_void_job(job_id) == ERR_UNAVAILABLE)
      snprintf(err, 256, "payment processor unavailable for the void"), done = false;
  }
out:
  arena_fini(&a);
  return done;
}

void payments_domain_init(void) {
  queue_register("payment_capture", capture_job_from_queue);
  queue_register("payment_authorize_confirm", confirm_authorization_from_queue);
  queue_register("payment_follow_up", follow_up_from_queue);
}

err_t payments_capture_job(const char *job_id) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found;
  err_t e = pay_store_find(&a, job_id, "job", &p, &found);
  if (e == ERR_OK && found && !strcmp(p.status, "AUTHORIZED") && capture(&p) == PAY_UNAVAILABLE) {
    /* try again in the background until the processor answers */
    json_t *payload = json_pack("{s:s}", "jobId", job_id);
    if (queue_now("payment_capture", payload) != DB_OK) e = ERR_INTERNAL;
    json_decref(payload);
  }
  arena_fini(&a);
  return e;
}

err_t payments_void_job(const char *job_id) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found, moved;
  err_t e = pay_store_find(&a, job_id, "job", &p, &found);
  if (e == ERR_OK && found && !strcmp(p.status, "AUTHORIZED")) {
    char key[64];
    snprintf(key, sizeof key, "void-%s", p.id);
    pay_intent pi;
    pay_error pe;
    pay_rc rc = payments_void(p.intent_id, key, &pi, &pe);
    if (rc == PAY_OK) e = pay_store_move(p.id, "AUTHORIZED", "CANCELED", NULL, &moved);
    else if (rc == PAY_UNAVAILABLE) e = ERR_UNAVAILABLE;
    else log_payment("payment void refused", job_id, &pe); /* e.g. already captured: leave it to the webhook */
  }
  arena_fini(&a);
  return e;
}

err_t payments_charge_tip(const char *job_id, const char *user_id, int64_t cents, char msg[256]) {
  arena a;
  arena_init(&a);
  billing b;
  payment_row prior;
  char fresh[ID_LEN + 1], key[64];
  const char *id = fresh;
  id_new(fresh);
  bool moved, found;
  err_t e = pay_store_billing(&a, user_id, &b);
  if (e != ERR_OK) goto out;
  if (!b.customer_id || !b.payment_method_id) {
    snprintf(msg, 256, "A saved payment method is required");
    e = ERR_BAD_REQUEST;
    goto out;
  }
  /* the row claims the tip: a second tip on the job hits the unique (job, kind) index */
  if ((e = pay_store_insert(fresh, job_id, user_id, "tip", "PENDING", cents, NULL, NULL)) == ERR_CONFLICT) {
    /* an UNCONFIRMED row is a tip whose answer was lost: retry it under its own key, so the
     * processor replays that charge instead of making a second one */
    if ((e = pay_store_find(&a, job_id, "tip", &prior, &found)) != ERR_OK) goto out;
    /* only a tip whose outcome is unknown is retried (and claimed back, so by one request) */
    if (!found || strcmp(prior.status, "UNCONFIRMED") ||
        pay_store_move(prior.id, "UNCONFIRMED", "PENDING", NULL, &moved) != ERR_OK || !moved) {
      snprintf(msg, 256, "A tip was already submitted for this job");
      e = ERR_CONFLICT;
      goto out;
    }
    id = prior.id, cents = prior.amount_cents;
  } else if (e != ERR_OK) {
    goto out;
  }
  snprintf(key, sizeof key, "tip-%s", id);
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_charge(b.customer_id, b.payment_method_id, cents, key, &pi, &pe);
  if (rc == PAY_OK) {
    e = pay_store_move(id, "PENDING", "PAID", pi.id, &moved);
    goto out;
  }
  log_payment("tip charge failed", job_id, &pe);
  if (rc == PAY_UNAVAILABLE) { /* unknown outcome: keep the row for a retry under the same key */
    pay_store_move(id, "PENDING", "UNCONFIRMED", NULL, &moved);
    snprintf(msg, 256, "Payment processor unavailable");
    e = ERR_UNAVAILABLE;
    goto out;
  }
  pay_store_delete(id); /* refused: nothing was charged, the customer may tip again */
  snprintf(msg, 256, "%s", pe.message[0] ? pe.message : "The payment could not be processed");
  e = ERR_PAYMENT_REQUIRED;
out:
  arena_fini(&a);
  return e;
}

json_t *payments_job_json(const char *job_id, const char *kind) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found = false;
  json_t *out = json_null();
  if (pay_store_find(&a, job_id, kind, &p, &found) == ERR_OK && found)
    out = json_pack("{s:s,s:s,s:o,s:o}", "id", p.id, "status", p.status, "amount", jx_money(p.amount_cents),
                    "processorPaymentIntentId", jx_str_or_null(p.intent_id));
  arena_fini(&a);
  return out;
}
