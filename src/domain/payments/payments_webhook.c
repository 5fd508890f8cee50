/* POST /webhooks: Stripe's signature scheme in both processor modes. The route takes the
 * raw body (no JSON parsing before the check): header `Stripe-Signature: t=<unix>,v1=<hex>`
 * (several v1 allowed, for secret rotation), v1 = HMAC-SHA256("<t>.<body>") under
 * STRIPE_WEBHOOK_SECRET, or under STRIPE_CONNECT_WEBHOOK_SECRET (Stripe signs the events of
 * connected accounts, sent to a Connect endpoint, with that endpoint's own secret), 300 s
 * tolerance against the service clock. account.updated has the payout account's state asked
 * of the processor and recorded (payouts_account_changed) before the event is recorded, so a
 * delivery that failed is applied when Stripe sends it again. A verified event is
 * applied once (pay_store_apply_event); subscription events in the order of their `created`.
 * charge.refunded records the charge's refunds (the event's list when it carries one, else
 * the processor's, as Stripe's events no longer include it) the way the service's own are:
 * on the payment, told to the customer, and in the audit trail. payment_intent.succeeded and
 * charge.captured record what was captured (a partial capture: less than held) and send the
 * customer's receipt; charge.dispute.* record the dispute as the processor has it now (asked,
 * as events come in any order: payments_store.c applies it). The simulated
 * processor's events (its disputes) arrive as queued units of work ("payment_event") and are
 * applied the same way. */
#include "core/clock.h"
#include "core/config.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_ops.h"
#include "domain/payments/payments_store.h"
#include "domain/payouts/payouts.h"
#include "ext/digest.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOLERANCE_S 300

const char *payments_webhook_check(const char *secret, const char *header, const char *body, size_t len,
                                   int64_t now_s) {
  if (!secret) return "Webhooks are not configured";
  if (!header || !*header) return "Missing Stripe-Signature header";
  char *copy = xstrdup(header), *save = NULL;
  long long t = -1;
  const char *sigs[16];
  int nsigs = 0;
  for (char *part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
    while (*part == ' ') part++;
    if (!strncmp(part, "t=", 2)) {
      char *end;
      errno = 0;
      t = strtoll(part + 2, &end, 10);
      if (*end || end == part + 2 || errno) t = -1;
    } else if (!strncmp(part, "v1=", 3) && nsigs < 16) {
      sigs[nsigs++] = part + 3;
    }
  }
  const char *problem = NULL;
  if (t < 0 || nsigs == 0)
    problem = "Malformed Stripe-Signature header";
  else if (t > now_s + TOLERANCE_S || t < now_s - TOLERANCE_S)
    problem = "Webhook timestamp outside the tolerance";
  if (problem) {
    free(copy);
    return problem;
  }
  char prefix[32];
  size_t plen = (size_t)snprintf(prefix, sizeof prefix, "%lld.", t);
  char *payload = xmalloc(plen + len + 1);
  memcpy(payload, prefix, plen);
  if (len) memcpy(payload + plen, body, len);
  char expected[65];
  hmac_sha256_hex(secret, strlen(secret), payload, plen + len, expected);
  free(payload);
  problem = "Invalid webhook signature";
  for (int i = 0; i < nsigs && problem; i++)
    if (digest_equal(sigs[i], expected)) problem = NULL;
  free(copy);
  return problem;
}

const char *payments_webhook_event(const char *body, size_t len, json_t **event, const char **id, const char **type,
                                   json_t **object) {
  *event = json_loadb(body, len, 0, NULL);
  *id = *type = NULL, *object = NULL;
  if (!json_is_object(*event)) return "body: malformed JSON";
  *id = json_string_value(json_object_get(*event, "id"));
  *type = json_string_value(json_object_get(*event, "type"));
  *object = json_object_get(json_object_get(*event, "data"), "object");
  if (!*id || !**id) return "id: is required";
  if (!*type || !**type) return "type: is required";
  if (!json_is_object(*object)) return "data.object: must be an object";
  return NULL;
}

/* Events arrive in any order. A subscription update for a subscription no user holds (it
 * ended, or the user never recorded it) is applied with the subscription's current state
 * read from the processor, so a late "active" update cannot revive an ended subscription.
 * Returns ERR_OK with *object replaced when needed; ERR_UNAVAILABLE when it could not be asked. */
static err_t current_subscription_state(arena *a, json_t **object) {
  const char *sub_id = json_string_value(json_object_get(*object, "id"));
  bool holds;
  if (!sub_id) return ERR_OK;
  err_t e = pay_store_holds_subscription(sub_id, &holds);
  if (e != ERR_OK || holds) return e;
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_retrieve_subscription(sub_id, &sub, &pe);
  if (rc == PAY_UNAVAILABLE) return ERR_UNAVAILABLE;
  json_t *fresh = arena_json(a, json_deep_copy(*object));
  json_object_set_new(fresh, "status", json_string(rc == PAY_OK ? sub.status : "canceled"));
  json_object_set_new(fresh, "cancel_at_period_end", json_boolean(rc == PAY_OK && sub.cancel_at_period_end));
  *object = fresh;
  return ERR_OK;
}

/* Dispute events arrive in any order too: the dispute is read as the processor has it now (a
 * dispute it does not know is recorded as the event says). ERR_UNAVAILABLE when it could not
 * be asked (the webhook answers 503, so it is delivered again). */
static err_t current_dispute_state(arena *a, json_t **object) {
  const char *id = json_string_value(json_object_get(*object, "id"));
  if (!id) return ERR_OK;
  pay_dispute d;
  pay_error pe;
  pay_rc rc = payments_retrieve_dispute(id, &d, &pe);
  if (rc == PAY_UNAVAILABLE) return ERR_UNAVAILABLE;
  if (rc != PAY_OK) return ERR_OK;
  json_t *fresh = arena_json(a, json_deep_copy(*object));
  json_object_set_new(fresh, "status", json_string(d.status));
  json_object_set_new(fresh, "amount", json_integer(d.amount));
  if (d.reason[0]) json_object_set_new(fresh, "reason", json_string(d.reason));
  if (d.evidence_due_by)
    json_object_set_new(fresh, "evidence_details",
                        json_pack("{s:I}", "due_by", (json_int_t)(d.evidence_due_by / 1000)));
  *object = fresh;
  return ERR_OK;
}

/* The key of the request that made a disputed intent no payment records yet (its answer lost,
 * or not recorded yet: a charge is disputed the moment it succeeds), so the dispute finds its
 * payment by the request written down before it was made. */
static err_t dispute_intent_key(arena *a, json_t *dispute, const char **key) {
  const char *intent = json_string_value(json_object_get(dispute, "payment_intent"));
  bool known;
  *key = NULL;
  if (!intent || pay_store_knows_intent(intent, &known) != ERR_OK || known) return ERR_OK;
  pay_intent pi;
  pay_error pe;
  pay_rc rc = payments_retrieve_intent(intent, &pi, &pe);
  if (rc == PAY_UNAVAILABLE) return ERR_UNAVAILABLE;
  if (rc == PAY_OK && pi.idem_key[0]) *key = arena_strdup(a, pi.idem_key);
  return ERR_OK;
}

#define EVENT_REFUNDS 100

/* The refunds of the charge of a charge.refunded event: its own list, or the processor's. */
static err_t charge_refunds(arena *a, json_t *charge, pay_event *ev) {
  pay_refund *list = arena_alloc(a, sizeof *list * EVENT_REFUNDS);
  json_t *data = json_object_get(json_object_get(charge, "refunds"), "data"), *o;
  const char *intent = json_string_value(json_object_get(charge, "payment_intent"));
  size_t i;
  ev->refunds = list;
  if (json_is_array(data)) {
    json_array_foreach(data, i, o) if (ev->nrefunds < EVENT_REFUNDS) payments_read_refund(o, &list[ev->nrefunds++]);
    return ERR_OK;
  }
  if (!intent) return ERR_OK;
  pay_error pe;
  pay_rc rc = payments_list_refunds(intent, list, EVENT_REFUNDS, &ev->nrefunds, &pe);
  return rc == PAY_UNAVAILABLE ? ERR_UNAVAILABLE : ERR_OK; /* an intent the processor does not know: nothing */
}

/* Refunds an event recorded: the customer is told, and those made at the processor go in the
 * audit trail, each after the event's transaction (failures are logged). */
static void tell_refunds(arena *a, const pay_event_effect *fx) {
  payment_row p;
  bool found;
  if (pay_store_get(a, fx->refunded, &p, &found) != ERR_OK || !found) return;
  const pay_news *news = pay_refund_news(a, &p, fx->refunded_cents, "Refunded at the payment processor");
  if (news && pay_store_announce(news) != ERR_OK)
    log_json(LOG_ERROR, "telling a refund failed", json_pack("{s:s}", "paymentId", p.id));
  if (!fx->processor_cents) return;
  json_t *detail = arena_json(
      a, json_pack("{s:s,s:s,s:o}", "jobId", p.job_id, "paymentId", p.id, "amount", jx_money(fx->processor_cents)));
  audit_action act = {NULL, "processor", "payment.refund", p.id, "payment", detail};
  if (audit_log(&act) != ERR_OK) log_json(LOG_ERROR, "auditing a refund failed", json_pack("{s:s}", "paymentId", p.id));
}

/* The receipt of a payment an event made PAID (captured at the processor). */
static void tell_receipt(arena *a, const char *payment_id) {
  payment_row p;
  bool found;
  if (pay_store_get(a, payment_id, &p, &found) != ERR_OK || !found) return;
  const pay_news *news = pay_receipt_news(a, &p);
  if (news && pay_store_announce(news) != ERR_OK)
    log_json(LOG_ERROR, "sending a receipt failed", json_pack("{s:s}", "paymentId", payment_id));
}

err_t payments_apply_event(arena *a, json_t *event, bool *duplicate) {
  json_t *object;
  const char *id, *type;
  *duplicate = false;
  id = json_string_value(json_object_get(event, "id"));
  type = json_string_value(json_object_get(event, "type"));
  object = json_object_get(json_object_get(event, "data"), "object");
  if (!id || !type || !json_is_object(object)) return ERR_BAD_REQUEST;
  err_t e;
  if (!strcmp(type, "customer.subscription.updated") && (e = current_subscription_state(a, &object)) != ERR_OK)
    return e;
  const char *account = json_string_value(json_object_get(object, "id"));
  if (!strcmp(type, "account.updated") && account && (e = payouts_account_changed(account)) != ERR_OK) return e;
  if (!strncmp(type, "charge.dispute.", 15) && (e = current_dispute_state(a, &object)) != ERR_OK) return e;
  pay_event ev = {id, type, object, json_integer_value(json_object_get(event, "created")), NULL, 0, NULL};
  if (!strncmp(type, "charge.dispute.", 15) && (e = dispute_intent_key(a, object, &ev.intent_key)) != ERR_OK) return e;
  if (!strcmp(type, "charge.refunded") && (e = charge_refunds(a, object, &ev)) != ERR_OK) return e;
  pay_event_effect fx;
  if ((e = pay_store_apply_event(a, &ev, &fx)) != ERR_OK) return e;
  *duplicate = fx.duplicate;
  if (fx.failed) payments_tell_failure(fx.failed);
  if (fx.refunded) tell_refunds(a, &fx);
  if (fx.paid) tell_receipt(a, fx.paid);
  return ERR_OK;
}

/* A webhook refused: a field's problem ("id: is required") is a validation error. */
static err_t refuse(hs_req *req, const char *problem) {
  return strstr(problem, ": ") ? hs_fail_invalid(req, problem) : hs_fail(req, ERR_BAD_REQUEST, problem);
}

err_t api_webhooks_receive(hs_req *req) {
  const char *header = hs_header(req, "Stripe-Signature");
  int64_t now_s = clock_now_ms() / 1000;
  const char *problem = payments_webhook_check(CFG.stripe_webhook_secret, header, req->raw_body, req->raw_len, now_s);
  if (problem && CFG.stripe_connect_webhook_secret &&
      !payments_webhook_check(CFG.stripe_connect_webhook_secret, header, req->raw_body, req->raw_len, now_s))
    problem = NULL;
  if (problem) return refuse(req, problem);
  json_t *event, *object;
  const char *id, *type;
  problem = payments_webhook_event(req->raw_body, req->raw_len, &event, &id, &type, &object);
  arena_json(&req->arena, event);
  if (problem) return refuse(req, problem);
  bool duplicate;
  err_t e = payments_apply_event(&req->arena, event, &duplicate);
  if (e == ERR_UNAVAILABLE) return hs_fail(req, e, "Payment processor unavailable");
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b,s:b}", "received", 1, "duplicate", duplicate);
}

/* The simulated processor's events (its disputes), queued as its webhooks would arrive. */
bool pay_event_from_queue(json_t *payload, char err[256]) {
  arena a;
  arena_init(&a);
  bool duplicate;
  err_t e = payments_apply_event(&a, payload, &duplicate);
  arena_fini(&a);
  if (e == ERR_OK || e == ERR_BAD_REQUEST) return true;
  snprintf(err, 256, e == ERR_UNAVAILABLE ? "payment processor unavailable" : "cannot record the event");
  return false;
}
