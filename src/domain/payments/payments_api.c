/* Handlers for /payments/... : the saved card and the premium subscription. Processor
 * failures map to: declined -> 402, refused input -> 400, unreachable -> 503. */
#include "domain/payments/payments_api.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_store.h"
#include "ext/payments.h"
#include <stdio.h>
#include <string.h>

static err_t processor_failed(hs_req *req, pay_rc rc, const pay_error *e) {
  switch (rc) {
  case PAY_DECLINED: return hs_fail(req, ERR_PAYMENT_REQUIRED, e->message[0] ? e->message : "Your card was declined.");
  case PAY_INVALID:
  case PAY_NOT_FOUND:
    return hs_fail(req, ERR_BAD_REQUEST, e->message[0] ? e->message : "Rejected by the payment processor");
  default: return hs_fail(req, ERR_UNAVAILABLE, "Payment processor unavailable");
  }
}

static err_t load_billing(hs_req *req, billing *b) {
  err_t e = pay_store_billing(&req->arena, req->auth.id, b);
  return e == ERR_NOT_FOUND ? hs_not_found(req, "User") : e;
}

/* The user's processor customer, created on first use. The idempotency key is the user id,
 * so two concurrent first calls make one customer. */
static err_t ensure_customer(hs_req *req, billing *b, const char **customer) {
  if (b->customer_id) return *customer = b->customer_id, ERR_OK;
  char id[PAY_ID_LEN], key[64];
  pay_error pe;
  snprintf(key, sizeof key, "customer-%s", b->id);
  pay_rc rc = payments_create_customer(b->email, b->name, key, id, &pe);
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  return pay_store_set_customer(&req->arena, b->id, id, customer);
}

static err_t reply_card(hs_req *req, const pay_card *c) {
  return hs_ok_pack(req, "{s:s,s:s,s:i,s:i}", "brand", c->brand, "last4", c->last4, "expMonth", c->exp_month, "expYear",
                    c->exp_year);
}

err_t api_payments_setup_intent(hs_req *req) {
  billing b;
  const char *customer;
  char secret[PAY_ID_LEN];
  pay_error pe;
  err_t e = load_billing(req, &b);
  if (e == ERR_OK) e = ensure_customer(req, &b, &customer);
  if (e != ERR_OK) return e;
  pay_rc rc = payments_create_setup_intent(customer, secret, &pe);
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  return hs_ok_pack(req, "{s:s}", "clientSecret", secret);
}

err_t api_payments_save_method(hs_req *req) {
  billing b;
  const char *customer;
  pay_card card;
  pay_error pe;
  err_t e = load_billing(req, &b);
  if (e == ERR_OK) e = ensure_customer(req, &b, &customer);
  if (e != ERR_OK) return e;
  pay_rc rc = payments_attach_method(customer, hs_body_str(req, "paymentMethodId"), &card, &pe);
  if (rc == PAY_INVALID || rc == PAY_NOT_FOUND) return hs_fail_invalid(req, "paymentMethodId: unknown payment method");
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  if ((e = pay_store_set_method(b.id, card.id)) != ERR_OK) return e;
  return reply_card(req, &card);
}

err_t api_payments_get_method(hs_req *req) {
  billing b;
  pay_card card;
  pay_error pe;
  err_t e = load_billing(req, &b);
  if (e != ERR_OK) return e;
  if (!b.payment_method_id || !b.customer_id) return hs_ok_pack(req, "n");
  pay_rc rc = payments_retrieve_method(b.customer_id, b.payment_method_id, &card, &pe);
  if (rc == PAY_NOT_FOUND) { /* the card is gone at the processor: forget it */
    if ((e = pay_store_clear_method(b.id, b.payment_method_id)) != ERR_OK) return e;
    return hs_ok_pack(req, "n");
  }
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  return reply_card(req, &card);
}

err_t api_payments_premium_status(hs_req *req) {
  billing b;
  err_t e = load_billing(req, &b);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 256);
  jw_obj(w);
  jw_key(w, "isPremium");
  jw_bool(w, b.is_premium);
  jw_key(w, "premiumSince");
  jw_cell_iso(w, b.premium_since);
  jw_key_str(w, "processorSubscriptionId", b.subscription_id);
  jw_key(w, "cancelAtPeriodEnd");
  jw_bool(w, b.cancel_at_period_end);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* The user holds a subscription that is not active. Active again at the processor: premium is
 * restored (answered here). Ended: a new subscription may be created (returns with no answer).
 * Anything else (past_due, unpaid, incomplete): 402, nothing new is created. */
static err_t sync_existing_subscription(hs_req *req, billing *b) {
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_retrieve_subscription(b->subscription_id, &sub, &pe);
  if (rc == PAY_NOT_FOUND ||
      (rc == PAY_OK && (!strcmp(sub.status, "canceled") || !strcmp(sub.status, "incomplete_expired")))) {
    pay_store_clear_subscribe_key(b->id, NULL);
    return pay_store_set_premium(b->id, NULL, false, false);
  }
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  bool active = !strcmp(sub.status, "active") || !strcmp(sub.status, "trialing");
  if (!active)
    return hs_fail(req, ERR_PAYMENT_REQUIRED,
                   "The premium subscription has an unpaid invoice; update your payment method");
  err_t e = pay_store_set_premium(b->id, sub.id, true, sub.cancel_at_period_end);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b,s:s,s:s}", "isPremium", 1, "subscriptionId", sub.id, "status", sub.status);
}

static void subscribe_key(char key[80], const char *claimed) { snprintf(key, 80, "premium-%s", claimed); }

/* The user's last subscribe attempt got no answer. The processor is asked what its key
 * made: a subscription found is the user's (answered here); none, and the key is dropped so
 * this attempt is a new request (returns with no answer). */
static err_t adopt_unconfirmed_subscription(hs_req *req, billing *b) {
  char key[80];
  pay_subscription sub;
  pay_error pe;
  subscribe_key(key, b->subscribe_key);
  pay_rc rc = payments_find_subscription(b->customer_id, key, &sub, &pe);
  if (rc == PAY_NOT_FOUND) return pay_store_clear_subscribe_key(b->id, b->subscribe_key);
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  bool active = !strcmp(sub.status, "active") || !strcmp(sub.status, "trialing");
  err_t e = pay_store_set_premium(b->id, sub.id, active, sub.cancel_at_period_end);
  if (e != ERR_OK) return e;
  log_json(LOG_INFO, "subscription found after a lost answer",
           json_pack("{s:s,s:s}", "userId", b->id, "subscription", sub.id));
  if (!active)
    return hs_fail(req, ERR_PAYMENT_REQUIRED,
                   "The premium subscription has an unpaid invoice; update your payment method");
  return hs_ok_pack(req, "{s:b,s:s,s:s}", "isPremium", 1, "subscriptionId", sub.id, "status", sub.status);
}

/* The user's active subscription is set to end at the period's end: subscribing again resumes
 * it (the processor's cancel_at_period_end set false), answered here. One that ended at the
 * processor meanwhile is forgotten, and a new one may be created (returns with no answer). */
static err_t resume_subscription(hs_req *req, billing *b) {
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_set_cancel_at_period_end(b->subscription_id, false, NULL, &sub, &pe);
  if (rc == PAY_INVALID || rc == PAY_NOT_FOUND) { /* a canceled subscription cannot be resumed */
    log_json(LOG_INFO, "resuming an ended subscription: a new one is made",
             json_pack("{s:s,s:s}", "userId", b->id, "subscription", b->subscription_id));
    pay_store_clear_subscribe_key(b->id, NULL);
    b->subscription_id = NULL, b->is_premium = false;
    return pay_store_set_premium(b->id, NULL, false, false);
  }
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  bool active = !strcmp(sub.status, "active") || !strcmp(sub.status, "trialing");
  err_t e = pay_store_set_premium(b->id, sub.id, active, sub.cancel_at_period_end);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b,s:s,s:s,s:b}", "isPremium", active, "subscriptionId", sub.id, "status", sub.status,
                    "cancelAtPeriodEnd", sub.cancel_at_period_end);
}

err_t api_payments_premium_subscribe(hs_req *req) {
  billing b;
  err_t e = load_billing(req, &b);
  if (e != ERR_OK) return e;
  if (b.is_premium && b.subscription_id && b.cancel_at_period_end) {
    e = resume_subscription(req, &b);
    if (e != ERR_OK || req->status) return e;
  }
  if (b.is_premium && b.subscription_id)
    return hs_ok_pack(req, "{s:s,s:b,s:s,s:s}", "message", "Already subscribed to premium", "isPremium", 1,
                      "subscriptionId", b.subscription_id, "status", "active");
  if (!b.payment_method_id || !b.customer_id)
    return hs_fail(req, ERR_BAD_REQUEST, "A saved payment method is required");
  if (b.subscription_id) { /* a subscription that is not active: ask the processor how it stands */
    e = sync_existing_subscription(req, &b);
    if (e != ERR_OK || req->status) return e;
  }
  const char *price = payments_premium_price();
  if (!price) {
    log_msg(LOG_ERROR, "premium subscribe refused: STRIPE_PREMIUM_PRICE_ID is not set");
    return hs_fail(req, ERR_UNAVAILABLE, "Premium subscriptions are not configured");
  }
  if (b.subscribe_key && b.subscribe_unconfirmed) {
    e = adopt_unconfirmed_subscription(req, &b);
    if (e != ERR_OK || req->status) return e;
  }
  /* one idempotency key per subscription attempt, shared by concurrent requests */
  char fresh[ID_LEN + 1], key[80];
  const char *claimed;
  id_new(fresh);
  if ((e = pay_store_claim_subscribe_key(&req->arena, b.id, fresh, &claimed)) != ERR_OK) return e;
  subscribe_key(key, claimed);
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_create_subscription(b.customer_id, price, b.payment_method_id, key, &sub, &pe);
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) /* it may exist: the next attempt asks first */
    pay_store_mark_subscribe_unconfirmed(b.id, claimed);
  else if (rc != PAY_OK) /* refused, nothing made: the next attempt is a new request (a new card may try) */
    pay_store_clear_subscribe_key(b.id, claimed);
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  bool active = !strcmp(sub.status, "active") || !strcmp(sub.status, "trialing");
  if ((e = pay_store_set_premium(b.id, sub.id, active, sub.cancel_at_period_end)) != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b,s:s,s:s}", "isPremium", active, "subscriptionId", sub.id, "status", sub.status);
}

err_t api_payments_premium_cancel(hs_req *req) {
  billing b;
  err_t e = load_billing(req, &b);
  if (e != ERR_OK) return e;
  if (!b.is_premium || !b.subscription_id)
    return hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE, "No active subscription");
  /* a fresh key: setting the flag is idempotent by nature, and a cancel after a resume must
   * reach the processor rather than replay the first cancel's answer */
  pay_subscription sub;
  pay_error pe;
  pay_rc rc = payments_set_cancel_at_period_end(b.subscription_id, true, NULL, &sub, &pe);
  if (rc != PAY_OK) return processor_failed(req, rc, &pe);
  if ((e = pay_store_set_cancel_flag(b.id, true)) != ERR_OK) return e;
  static const char message[] = "Premium is cancelled and stays active until the end of the current billing period";
  if (!sub.current_period_end)
    return hs_ok_pack(req, "{s:s,s:b,s:n}", "message", message, "cancelAtPeriodEnd", 1, "currentPeriodEnd");
  return hs_ok_pack(req, "{s:s,s:b,s:T}", "message", message, "cancelAtPeriodEnd", 1, "currentPeriodEnd",
                    (int64_t)sub.current_period_end);
}

err_t payments_end_premium(const char *user_id) {
  arena a;
  arena_init(&a);
  billing b;
  err_t e = pay_store_billing(&a, user_id, &b);
  if (e == ERR_OK && b.subscription_id && !b.cancel_at_period_end) {
    pay_subscription sub;
    pay_error pe;
    pay_rc rc = payments_set_cancel_at_period_end(b.subscription_id, true, NULL, &sub, &pe);
    if (rc == PAY_OK)
      e = pay_store_set_cancel_flag(b.id, true);
    else if (rc != PAY_INVALID && rc != PAY_NOT_FOUND) /* refused: the subscription ended already */
      e = ERR_UNAVAILABLE;
  }
  arena_fini(&a);
  return e == ERR_NOT_FOUND ? ERR_OK : e;
}

/* ---- the account's part (domain/domain.h) ---- */

const hs_rj_field PAYMENTS_ROW_JSON[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"kind", "kind", RJ_STR},
    {"status", "status", RJ_STR},
    {"amount", "amount_cents", RJ_MONEY},
    {"refundedAmount", "refunded_cents", RJ_MONEY},
    {"processorPaymentIntentId", "processor_payment_intent_id", RJ_STR},
    {"failureReason", "failure_reason", RJ_STR},
    {"releasedAt", "released_at", RJ_ISO},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

const account_part PAYMENTS_EXPORT_PARTS[] = {{"payments", PAY_EXPORT_SQL, PAYMENTS_ROW_JSON}, {0}};
