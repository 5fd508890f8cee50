/* POST /webhooks: Stripe's signature scheme in both processor modes. The route takes the
 * raw body (no JSON parsing before the check): header `Stripe-Signature: t=<unix>,v1=<hex>`
 * (several v1 allowed, for secret rotation), v1 = HMAC-SHA256("<t>.<body>") under
 * STRIPE_WEBHOOK_SECRET, 300 s tolerance against the service clock. A verified event is
 * applied once (pay_store_apply_event). */
#include "core/clock.h"
#include "core/config.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_store.h"
#include "ext/digest.h"
#include "ext/payments.h"
#include <stdlib.h>
#include <string.h>

#define TOLERANCE_S 300

/* Parses "t=...,v1=...,v1=..." and checks one v1 against the expected MAC. */
static err_t verify(hs_req *req) {
  if (!CFG.stripe_webhook_secret) return hs_fail(req, ERR_BAD_REQUEST, "Webhooks are not configured");
  const char *header = hs_header(req, "Stripe-Signature");
  if (!header || !*header) return hs_fail(req, ERR_BAD_REQUEST, "Missing Stripe-Signature header");
  char *copy = arena_strdup(&req->arena, header), *save = NULL;
  long long t = -1;
  const char *sigs[16];
  int nsigs = 0;
  for (char *part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
    while (*part == ' ') part++;
    if (!strncmp(part, "t=", 2)) {
      char *end;
      t = strtoll(part + 2, &end, 10);
      if (*end || end == part + 2) t = -1;
    } else if (!strncmp(part, "v1=", 3) && nsigs < 16) {
      sigs[nsigs++] = part + 3;
    }
  }
  if (t < 0 || nsigs == 0) return hs_fail(req, ERR_BAD_REQUEST, "Malformed Stripe-Signature header");
  long long now = clock_now_ms() / 1000;
  if (llabs(now - t) > TOLERANCE_S) return hs_fail(req, ERR_BAD_REQUEST, "Webhook timestamp outside the tolerance");
  char *signed_payload = arena_printf(&req->arena, "%lld.", t);
  size_t prefix = strlen(signed_payload);
  char *payload = arena_alloc(&req->arena, prefix + req->raw_len + 1);
  memcpy(payload, signed_payload, prefix);
  memcpy(payload + prefix, req->raw_body, req->raw_len);
  char expected[65];
  hmac_sha256_hex(CFG.stripe_webhook_secret, strlen(CFG.stripe_webhook_secret), payload, prefix + req->raw_len,
                  expected);
  for (int i = 0; i < nsigs; i++)
    if (digest_equal(sigs[i], expected)) return ERR_OK;
  return hs_fail(req, ERR_BAD_REQUEST, "Invalid webhook signature");
}

/* Events arrive in any order. A subscription update for a subscription no user holds (it
 * ended, or the user never recorded it) is applied with the subscription's current state
 * read from the processor, so a late "active" update cannot revive an ended subscription.
 * Returns ERR_OK with *object replaced when needed. */
static err_t current_subscription_state(hs_req *req, json_t **object) {
  const char *sub_id = json_string_value(json_object_get(*object, "id"));
  bool holds;
  if (!sub_id) return ERR_OK;
  err_t e = pay_store_holds_subscription(sub_id, &holds);
  if (e != ERR_OK || holds) return e;
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_retrieve_subscription(sub_id, &sub, &pe);
  if (rc == PAY_UNAVAILABLE) return hs_fail(req, ERR_UNAVAILABLE, "Payment processor unavailable");
  json_t *fresh = arena_json(&req->arena, json_deep_copy(*object));
  json_object_set_new(fresh, "status", json_string(rc == PAY_OK ? sub.status : "canceled"));
  json_object_set_new(fresh, "cancel_at_period_end", json_boolean(rc == PAY_OK && sub.cancel_at_period_end));
  *object = fresh;
  return ERR_OK;
}

err_t api_webhooks_receive(hs_req *req) {
  err_t e = verify(req);
  if (e != ERR_OK) return e;
  json_t *event = arena_json(&req->arena, json_loadb(req->raw_body, req->raw_len, 0, NULL));
  if (!json_is_object(event)) return hs_fail(req, ERR_BAD_REQUEST, "body: malformed JSON");
  const char *id = json_string_value(json_object_get(event, "id"));
  const char *type = json_string_value(json_object_get(event, "type"));
  json_t *object = json_object_get(json_object_get(event, "data"), "object");
  if (!id || !*id) return hs_fail(req, ERR_BAD_REQUEST, "id: is required");
  if (!type || !*type) return hs_fail(req, ERR_BAD_REQUEST, "type: is required");
  if (!json_is_object(object)) return hs_fail(req, ERR_BAD_REQUEST, "data.object: must be an object");
  if (!strcmp(type, "customer.subscription.updated") && (e = current_subscription_state(req, &object)) != ERR_OK)
    return e;
  bool duplicate;
  const char *failed;
  if ((e = pay_store_apply_event(&req->arena, id, type, object, &duplicate, &failed)) != ERR_OK) return e;
  if (failed) payments_tell_failure(failed);
  return hs_ok(req, json_pack("{s:b,s:b}", "received", 1, "duplicate", duplicate));
}
