/* The simulated processor: Stripe's test-mode behaviour with its state in the database
 * (processor_sim_objects), so it survives restarts and is shared by every instance.
 *
 * Stripe's test PaymentMethod ids (pm_card_visa, ...) attach as a new pm_sim_* method, as
 * Stripe itself creates a new method from a test token; pm_card_chargeDeclined* attach but
 * every charge on them is declined. Objects are Stripe-shaped JSON; a state change is an
 * optimistic update (WHERE data = old), so concurrent calls on one object serialise. An
 * idempotency key maps to the object it produced, so repeating a call returns it again. */
#include "core/clock.h"
#include "core/ids.h"
#include "core/log.h"
#include "db/db.h"
#include "ext/payments_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERIOD_MS (30LL * 24 * 3600 * 1000)

static const struct test_card {
  const char *token, *brand, *last4, *decline;
} test_cards[] = {
    {"pm_card_visa", "visa", "4242", NULL},
    {"pm_card_mastercard", "mastercard", "4444", NULL},
    {"pm_card_amex", "amex", "8431", NULL},
    {"pm_card_chargeDeclined", "visa", "0002", "generic_decline"},
    {"pm_card_chargeDeclinedInsufficientFunds", "visa", "9995", "insufficient_funds"},
};

/* ---- object storage ---- */

static json_t *load(const char *id, char **raw) {
  arena a;
  arena_init(&a);
  db_res *r;
  json_t *o = NULL;
  if (raw) *raw = NULL;
  if (db_query(&a, &r, "SELECT data FROM processor_sim_objects WHERE id = $1", DB_ARGS(DB_TEXT(id))) == DB_OK &&
      r->rows == 1) {
    o = json_loads(db_text(r, 0, 0), 0, NULL);
    if (raw) *raw = strdup(db_text(r, 0, 0));
  }
  arena_fini(&a);
  return o;
}

static bool insert(const char *id, const char *kind, json_t *o) {
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  int64_t now = clock_now_ms();
  db_rc rc = db_query(NULL, NULL,
                      "INSERT INTO processor_sim_objects (id, kind, data, created_at, updated_at) "
                      "VALUES ($1, $2, $3, $4, $4)",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now)));
  free(text);
  return rc == DB_OK;
}

/* Replaces the stored object when it still reads `old`; false when someone changed it first. */
static bool replace(const char *id, const char *old, json_t *o) {
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  arena a;
  arena_init(&a);
  db_res *r;
  bool ok = db_query(&a, &r, "UPDATE processor_sim_objects SET data = $3, updated_at = $4 WHERE id = $1 AND data = $2",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(old), DB_TEXT(text), DB_INT(clock_now_ms()))) == DB_OK &&
            r->changes == 1;
  arena_fini(&a);
  free(text);
  return ok;
}

static void new_id(const char *prefix, char out[PAY_ID_LEN]) {
  char id[ID_LEN + 1];
  id_new(id);
  snprintf(out, PAY_ID_LEN, "%s_sim_%s", prefix, id + 1);
}

/* The object an idempotency key produced earlier, or NULL. */
static json_t *replayed(const char *idem_key) {
  if (!idem_key) return NULL;
  char key[PAY_ID_LEN + 8];
  snprintf(key, sizeof key, "idem:%s", idem_key);
  json_t *ref = load(key, NULL);
  if (!ref) return NULL;
  json_t *o = load(json_string_value(json_object_get(ref, "object")), NULL);
  json_decref(ref);
  return o;
}

static void remember(const char *idem_key, const char *object_id) {
  if (!idem_key) return;
  char key[PAY_ID_LEN + 8];
  snprintf(key, sizeof key, "idem:%s", idem_key);
  json_t *ref = json_pack("{s:s}", "object", object_id);
  insert(key, "idempotency_key", ref); /* a concurrent twin may win; either maps to a valid object */
  json_decref(ref);
}

static pay_rc fail(pay_error *err, pay_rc rc, const char *message) {
  snprintf(err->message, sizeof err->message, "%s", message);
  return rc;
}

/* ---- operations ---- */

static pay_rc sim_create_customer(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                                  pay_error *err) {
  json_t *old = replayed(idem_key);
  if (old) {
    snprintf(id, PAY_ID_LEN, "%s", json_string_value(json_object_get(old, "id")));
    json_decref(old);
    return PAY_OK;
  }
  new_id("cus", id);
  json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "object", "customer", "email", email, "name", name);
  bool ok = insert(id, "customer", o);
  json_decref(o);
  if (!ok) return fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  remember(idem_key, id);
  return PAY_OK;
}

static bool customer_exists(const char *customer) {
  json_t *c = load(customer, NULL);
  const char *kind = json_string_value(json_object_get(c, "object"));
  bool ok = kind && !strcmp(kind, "customer");
  json_decref(c);
  return ok;
}

static pay_rc sim_create_setup_intent(const char *customer, char secret[PAY_ID_LEN], pay_error *err) {
  if (!customer_exists(customer)) return fail(err, PAY_NOT_FOUND, "No such customer");
  char id[PAY_ID_LEN], tail[ID_LEN + 1];
  new_id("seti", id);
  id_new(tail);
  json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "object", "setup_intent", "customer", customer, "status",
                        "requires_payment_method");
  bool ok = insert(id, "setup_intent", o);
  json_decref(o);
  if (!ok) return fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  snprintf(secret, PAY_ID_LEN, "%s_secret_%s", id, tail + 1);
  return PAY_OK;
}

static pay_rc sim_attach_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  const struct test_card *t = NULL;
  for (size_t i = 0; i < sizeof test_cards / sizeof *test_cards; i++)
    if (!strcmp(test_cards[i].token, payment_method)) t = &test_cards[i];
  if (!t) return fail(err, PAY_INVALID, "No such PaymentMethod");
  if (!customer_exists(customer)) return fail(err, PAY_NOT_FOUND, "No such customer");
  char id[PAY_ID_LEN];
  new_id("pm", id);
  json_t *o = json_pack("{s:s,s:s,s:s,s:{s:s,s:s,s:i,s:i},s:s?}", "id", id, "object", "payment_method", "customer",
                        customer, "card", "brand", t->brand, "last4", t->last4, "exp_month", 12, "exp_year", 2034,
                        "decline_code", t->decline);
  bool ok = insert(id, "payment_method", o);
  if (ok) pay_card_from_json(o, card);
  json_decref(o);
  return ok ? PAY_OK : fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
}

static pay_rc sim_retrieve_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  json_t *o = load(payment_method, NULL);
  const char *owner = json_string_value(json_object_get(o, "customer"));
  pay_rc rc = o && owner && !strcmp(owner, customer) ? PAY_OK : fail(err, PAY_NOT_FOUND, "No such PaymentMethod");
  if (rc == PAY_OK) pay_card_from_json(o, card);
  json_decref(o);
  return rc;
}

/* The decline code of a stored method ("" when it charges fine); NULL when it is unusable. */
static const char *method_decline(json_t *pm, const char *customer) {
  const char *owner = json_string_value(json_object_get(pm, "customer"));
  if (!pm || !owner || strcmp(owner, customer)) return NULL;
  const char *d = json_string_value(json_object_get(pm, "decline_code"));
  return d ? d : "";
}

static pay_rc sim_create_intent(const char *customer, const char *payment_method, int64_t cents, bool capture_now,
                                const char *idem_key, pay_intent *out, pay_error *err) {
  json_t *old = replayed(idem_key);
  if (old) {
    pay_intent_from_json(old, out);
    const char *d = json_string_value(json_object_get(old, "decline_code"));
    bool was_declined = d != NULL;
    if (d) snprintf(err->decline_code, sizeof err->decline_code, "%s", d);
    json_decref(old);
    if (was_declined) {
      snprintf(err->intent_id, sizeof err->intent_id, "%s", out->id);
      return fail(err, PAY_DECLINED, "Your card was declined.");
    }
    return PAY_OK;
  }
  if (cents < 50) return fail(err, PAY_INVALID, "Amount must be at least $0.50 usd");
  json_t *pm = load(payment_method, NULL);
  const char *found = method_decline(pm, customer);
  char decline[64];
  snprintf(decline, sizeof decline, "%s", found ? found : "");
  json_decref(pm); /* `decline` is a copy: pm's strings die with it */
  if (!found) return fail(err, PAY_INVALID, "No such PaymentMethod");
  char id[PAY_ID_LEN];
  new_id("pi", id);
  bool declined = *decline != 0;
  const char *status = declined ? "requires_payment_method" : capture_now ? "succeeded" : "requires_capture";
  json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s,s:s,s:s?}", "id", id, "object", "payment_intent", "amount",
                        (json_int_t)cents, "currency", "usd", "customer", customer, "payment_method", payment_method,
                        "capture_method", capture_now ? "automatic" : "manual", "status", status, "decline_code",
                        declined ? decline : NULL);
  bool ok = insert(id, "payment_intent", o);
  json_decref(o);
  if (!ok) return fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  remember(idem_key, id);
  snprintf(out->id, sizeof out->id, "%s", id);
  snprintf(out->status, sizeof out->status, "%s", status);
  if (declined) {
    snprintf(err->intent_id, sizeof err->intent_id, "%s", id);
    snprintf(err->decline_code, sizeof err->decline_code, "%s", decline);
    return fail(err, PAY_DECLINED, !strcmp(decline, "insufficient_funds") ? "Your card has insufficient funds."
                                                                           : "Your card was declined.");
  }
  return PAY_OK;
}

/* Moves an intent from `from` to `to`; repeating a finished move is not an error. */
static pay_rc move_intent(const char *intent, const char *from, const char *to, pay_intent *out, pay_error *err) {
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *o = load(intent, &raw);
    if (!o) return fail(err, PAY_NOT_FOUND, "No such payment_intent");
    const char *status = json_string_value(json_object_get(o, "status"));
    pay_rc rc = PAY_OK;
    if (!strcmp(status, to)) {
      pay_intent_from_json(o, out);
    } else if (strcmp(status, from)) {
      snprintf(err->message, sizeof err->message, "This PaymentIntent's status is %s", status);
      rc = PAY_INVALID;
    } else {
      json_object_set_new(o, "status", json_string(to));
      if (!replace(intent, raw, o)) rc = PAY_UNAVAILABLE; /* changed meanwhile: read again */
      else pay_intent_from_json(o, out);
    }
    json_decref(o);
    free(raw);
    if (rc != PAY_UNAVAILABLE) return rc;
  }
  return fail(err, PAY_UNAVAILABLE, "simulated processor is busy");
}

static pay_rc sim_capture(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  (void)idem_key; /* capturing twice is harmless here: the second finds it succeeded */
  return move_intent(intent, "requires_capture", "succeeded", out, err);
}

static pay_rc sim_cancel(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  (void)idem_key;
  return move_intent(intent, "requires_capture", "canceled", out, err);
}

static pay_rc sim_create_subscription(const char *customer, const char *price, const char *payment_method,
                                      const char *idem_key, pay_subscription *out, pay_error *err) {
  json_t *old = replayed(idem_key);
  if (old) {
    pay_subscription_from_json(old, out);
    json_decref(old);
    return PAY_OK;
  }
  json_t *pm = load(payment_method, NULL);
  const char *decline = method_decline(pm, customer);
  pay_rc rc = PAY_OK;
  if (!decline) rc = fail(err, PAY_INVALID, "No such PaymentMethod");
  else if (*decline) {
    snprintf(err->decline_code, sizeof err->decline_code, "%s", decline);
    rc = fail(err, PAY_DECLINED, "Your card was declined.");
  }
  json_decref(pm); /* after the last use of decline, which points into pm */
  if (rc != PAY_OK) return rc;
  char id[PAY_ID_LEN];
  new_id("sub", id);
  int64_t end = clock_now_ms() + PERIOD_MS;
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:I}", "id", id, "object", "subscription", "customer", customer,
                        "price", price, "status", "active", "cancel_at_period_end", 0, "current_period_end",
                        (json_int_t)(end / 1000));
  bool ok = insert(id, "subscription", o);
  if (ok) pay_subscription_from_json(o, out);
  json_decref(o);
  if (!ok) return fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  remember(idem_key, id);
  return PAY_OK;
}

static pay_rc sim_update_subscription(const char *subscription, bool cancel_at_period_end, const char *idem_key,
                                      pay_subscription *out, pay_error *err) {
  (void)idem_key; /* setting a flag is idempotent by nature */
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *o = load(subscription, &raw);
    if (!o) return fail(err, PAY_NOT_FOUND, "No such subscription");
    json_object_set_new(o, "cancel_at_period_end", json_boolean(cancel_at_period_end));
    bool ok = replace(subscription, raw, o);
    if (ok) pay_subscription_from_json(o, out);
    json_decref(o);
    free(raw);
    if (ok) return PAY_OK;
  }
  return fail(err, PAY_UNAVAILABLE, "simulated processor is busy");
}

static pay_rc sim_retrieve_subscription(const char *subscription, pay_subscription *out, pay_error *err) {
  json_t *o = load(subscription, NULL);
  if (!o) return fail(err, PAY_NOT_FOUND, "No such subscription");
  pay_subscription_from_json(o, out);
  json_decref(o);
  return PAY_OK;
}

const pay_ops paysim_ops = {
    .name = "simulated",
    .create_customer = sim_create_customer,
    .create_setup_intent = sim_create_setup_intent,
    .attach_method = sim_attach_method,
    .retrieve_method = sim_retrieve_method,
    .create_intent = sim_create_intent,
    .capture = sim_capture,
    .cancel = sim_cancel,
    .create_subscription = sim_create_subscription,
    .update_subscription = sim_update_subscription,
    .retrieve_subscription = sim_retrieve_subscription,
};
