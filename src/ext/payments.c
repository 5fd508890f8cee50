/* Dispatch to the configured processor, plus the Stripe-object readers both share. */
#include "ext/payments.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "ext/payments_impl.h"
#include "ext/queue.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_PREMIUM_PRICE "price_sim_premium_monthly_999"

static const pay_ops *ops = &paysim_ops;

void payments_init(void) { ops = CFG.stripe_secret_key ? &stripe_ops : &paysim_ops; }
const char *payments_mode(void) { return ops->name; }

const char *payments_premium_price(void) {
  if (CFG.stripe_premium_price_id) return CFG.stripe_premium_price_id;
  return ops == &paysim_ops ? SIM_PREMIUM_PRICE : NULL; /* Stripe needs a configured price */
}

static void copy(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

void pay_card_from_json(json_t *pm, pay_card *card) {
  json_t *c = json_object_get(pm, "card");
  copy(card->id, sizeof card->id, json_string_value(json_object_get(pm, "id")));
  copy(card->brand, sizeof card->brand, json_string_value(json_object_get(c, "brand")));
  copy(card->last4, sizeof card->last4, json_string_value(json_object_get(c, "last4")));
  card->exp_month = (int)json_integer_value(json_object_get(c, "exp_month"));
  card->exp_year = (int)json_integer_value(json_object_get(c, "exp_year"));
}

void pay_intent_from_json(json_t *pi, pay_intent *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(pi, "id")));
  copy(out->status, sizeof out->status, json_string_value(json_object_get(pi, "status")));
  out->amount = json_integer_value(json_object_get(pi, "amount"));
  out->amount_received = json_integer_value(json_object_get(pi, "amount_received"));
  if (!out->amount_received && !strcmp(out->status, "succeeded")) out->amount_received = out->amount;
  /* an uncaptured card authorization lapses at the charge's capture_before (latest_charge expanded) */
  json_t *card =
      json_object_get(json_object_get(json_object_get(pi, "latest_charge"), "payment_method_details"), "card");
  out->capture_before = json_integer_value(json_object_get(card, "capture_before")) * 1000;
  copy(out->card_brand, sizeof out->card_brand, json_string_value(json_object_get(card, "brand")));
  copy(out->card_last4, sizeof out->card_last4, json_string_value(json_object_get(card, "last4")));
  copy(out->idem_key, sizeof out->idem_key, pay_metadata_key(pi));
  json_t *e = json_object_get(pi, "last_payment_error");
  copy(out->error_code, sizeof out->error_code, json_string_value(json_object_get(e, "code")));
  copy(out->error_message, sizeof out->error_message, json_string_value(json_object_get(e, "message")));
}

const char *pay_metadata_key(json_t *o) {
  return json_string_value(json_object_get(json_object_get(o, "metadata"), "idempotency_key"));
}

void pay_subscription_from_json(json_t *sub, pay_subscription *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(sub, "id")));
  copy(out->status, sizeof out->status, json_string_value(json_object_get(sub, "status")));
  out->cancel_at_period_end = json_is_true(json_object_get(sub, "cancel_at_period_end"));
  json_t *end = json_object_get(sub, "current_period_end");
  if (!end) { /* newer API versions keep the period on the subscription item */
    json_t *items = json_object_get(json_object_get(sub, "items"), "data");
    end = json_object_get(json_array_get(items, 0), "current_period_end");
  }
  out->current_period_end = json_integer_value(end) * 1000;
}

void pay_refund_from_json(json_t *re, pay_refund *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(re, "id")));
  copy(out->status, sizeof out->status, json_string_value(json_object_get(re, "status")));
  out->amount = json_integer_value(json_object_get(re, "amount"));
  copy(out->idem_key, sizeof out->idem_key, pay_metadata_key(re));
}

void pay_account_from_json(json_t *acct, pay_account *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(acct, "id")));
  const char *transfers = json_string_value(json_object_get(json_object_get(acct, "capabilities"), "transfers"));
  out->transfers_active = transfers && !strcmp(transfers, "active");
  out->payouts_enabled = json_is_true(json_object_get(acct, "payouts_enabled"));
  out->details_submitted = json_is_true(json_object_get(acct, "details_submitted"));
  json_t *req = json_object_get(acct, "requirements");
  copy(out->disabled_reason, sizeof out->disabled_reason, json_string_value(json_object_get(req, "disabled_reason")));
  json_t *due = json_object_get(req, "currently_due");
  char *text = json_is_array(due) ? json_dumps(due, JSON_COMPACT) : NULL;
  /* a list too long for the record is cut at a whole item */
  if (text && strlen(text) >= sizeof out->requirements) {
    json_t *cut = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(due, i, item) {
      json_array_append(cut, item);
      char *t = json_dumps(cut, JSON_COMPACT);
      bool fits = t && strlen(t) < sizeof out->requirements;
      free(t);
      if (!fits) {
        json_array_remove(cut, json_array_size(cut) - 1);
        break;
      }
    }
    free(text);
    text = json_dumps(cut, JSON_COMPACT);
    json_decref(cut);
  }
  copy(out->requirements, sizeof out->requirements, text ? text : "[]");
  free(text);
}

void pay_transfer_from_json(json_t *tr, pay_transfer *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(tr, "id")));
  copy(out->destination, sizeof out->destination, json_string_value(json_object_get(tr, "destination")));
  out->amount = json_integer_value(json_object_get(tr, "amount"));
  out->amount_reversed = json_integer_value(json_object_get(tr, "amount_reversed"));
  copy(out->idem_key, sizeof out->idem_key, pay_metadata_key(tr));
}

void pay_reversal_from_json(json_t *trr, pay_reversal *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(trr, "id")));
  out->amount = json_integer_value(json_object_get(trr, "amount"));
  copy(out->idem_key, sizeof out->idem_key, pay_metadata_key(trr));
}

void pay_dispute_from_json(json_t *du, pay_dispute *out) {
  copy(out->id, sizeof out->id, json_string_value(json_object_get(du, "id")));
  copy(out->intent_id, sizeof out->intent_id, json_string_value(json_object_get(du, "payment_intent")));
  json_t *charge = json_object_get(du, "charge"); /* an id, or the object when expanded */
  copy(out->charge_id, sizeof out->charge_id,
       json_is_string(charge) ? json_string_value(charge) : json_string_value(json_object_get(charge, "id")));
  copy(out->status, sizeof out->status, json_string_value(json_object_get(du, "status")));
  copy(out->reason, sizeof out->reason, json_string_value(json_object_get(du, "reason")));
  out->amount = json_integer_value(json_object_get(du, "amount"));
  json_t *details = json_object_get(du, "evidence_details");
  out->evidence_due_by = json_integer_value(json_object_get(details, "due_by")) * 1000;
  out->submissions = (int)json_integer_value(json_object_get(details, "submission_count"));
}

#define PAY_ANSWER(type)                                                                                               \
  pay_rc pay_##type##_answer(json_t *o, pay_rc rc, pay_##type *out) {                                                  \
    if (rc == PAY_OK) pay_##type##_from_json(o, out);                                                                  \
    json_decref(o);                                                                                                    \
    return rc;                                                                                                         \
  }
PAY_ANSWER(intent)
PAY_ANSWER(subscription)
PAY_ANSWER(refund)
PAY_ANSWER(account)
PAY_ANSWER(transfer)
PAY_ANSWER(reversal)
PAY_ANSWER(dispute)

void payments_read_dispute(json_t *dispute, pay_dispute *out) {
  memset(out, 0, sizeof *out);
  pay_dispute_from_json(dispute, out);
}

void payments_read_account(json_t *account, pay_account *out) {
  memset(out, 0, sizeof *out);
  pay_account_from_json(account, out);
}

void payments_read_refund(json_t *refund, pay_refund *out) {
  memset(out, 0, sizeof *out);
  pay_refund_from_json(refund, out);
}

static void clear(pay_error *err) { memset(err, 0, sizeof *err); }

/* err cleared and the size bytes of out zeroed, before an operation writes them; returns out. */
static void *cleared(pay_error *err, void *out, size_t size) {
  clear(err);
  return memset(out, 0, size);
}

/* ---- the processor's refusal of the key ---- */

#define PROBE_EVERY_MS (60LL * 60 * 1000)

static pthread_mutex_t auth_mu = PTHREAD_MUTEX_INITIALIZER;
static bool unauthorized;
static int64_t next_probe; /* service clock: when the next call may be sent while unauthorized */
static long auth_failures;

void pay_auth_result(bool refused) {
  pthread_mutex_lock(&auth_mu);
  bool was = unauthorized;
  unauthorized = refused;
  if (refused) auth_failures++, next_probe = clock_now_ms() + PROBE_EVERY_MS;
  int64_t wait_until = next_probe;
  pthread_mutex_unlock(&auth_mu);
  if (refused && queue_current()) queue_retry_at(wait_until);
  if (refused && !was)
    log_msg(LOG_ERROR, "the payment processor refused the service's key (401/403): payments are stopped until a "
                       "call succeeds; check STRIPE_SECRET_KEY");
  else if (!refused && was)
    log_msg(LOG_INFO, "the payment processor accepts the service's key again");
}

bool pay_auth_may_call(void) {
  pthread_mutex_lock(&auth_mu);
  int64_t now = clock_now_ms();
  bool may = !unauthorized || now >= next_probe;
  if (unauthorized && may) next_probe = now + PROBE_EVERY_MS; /* this call is the hour's probe */
  int64_t wait_until = next_probe;
  pthread_mutex_unlock(&auth_mu);
  if (!may && queue_current()) queue_retry_at(wait_until);
  return may;
}

bool payments_unauthorized(void) {
  pthread_mutex_lock(&auth_mu);
  bool u = unauthorized;
  pthread_mutex_unlock(&auth_mu);
  return u;
}

long payments_auth_failures(void) {
  pthread_mutex_lock(&auth_mu);
  long n = auth_failures;
  pthread_mutex_unlock(&auth_mu);
  return n;
}

pay_rc payments_create_customer(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                                pay_error *err) {
  clear(err);
  return ops->create_customer(email, name, idem_key, id, err);
}

pay_rc payments_create_setup_intent(const char *customer, char secret[PAY_ID_LEN], pay_error *err) {
  clear(err);
  return ops->create_setup_intent(customer, secret, err);
}

pay_rc payments_attach_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  return ops->attach_method(customer, payment_method, cleared(err, card, sizeof *card), err);
}

pay_rc payments_retrieve_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  return ops->retrieve_method(customer, payment_method, cleared(err, card, sizeof *card), err);
}

pay_rc payments_authorize(const char *customer, const char *payment_method, int64_t cents,
                          const pay_charge_info *info, const char *idem_key, pay_intent *out, pay_error *err) {
  return ops->create_intent(customer, payment_method, cents, false, info, idem_key, cleared(err, out, sizeof *out),
                            err);
}

pay_rc payments_charge(const char *customer, const char *payment_method, int64_t cents, const pay_charge_info *info,
                       const char *idem_key, pay_intent *out, pay_error *err) {
  return ops->create_intent(customer, payment_method, cents, true, info, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_retrieve_intent(const char *intent, pay_intent *out, pay_error *err) {
  return ops->retrieve_intent(intent, cleared(err, out, sizeof *out), err);
}

pay_rc payments_find_intent(const char *customer, const char *idem_key, pay_intent *out, pay_error *err) {
  return ops->find_intent(customer, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_capture(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  return ops->capture(intent, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_void(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  return ops->cancel(intent, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_create_subscription(const char *customer, const char *price, const char *payment_method,
                                    const char *idem_key, pay_subscription *out, pay_error *err) {
  return ops->create_subscription(customer, price, payment_method, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_set_cancel_at_period_end(const char *subscription, bool cancel, const char *idem_key,
                                         pay_subscription *out, pay_error *err) {
  return ops->update_subscription(subscription, cancel, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_retrieve_subscription(const char *subscription, pay_subscription *out, pay_error *err) {
  return ops->retrieve_subscription(subscription, cleared(err, out, sizeof *out), err);
}

pay_rc payments_find_subscription(const char *customer, const char *idem_key, pay_subscription *out, pay_error *err) {
  return ops->find_subscription(customer, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_refund(const char *intent, int64_t cents, const char *reason, const char *idem_key, pay_refund *out,
                       pay_error *err) {
  return ops->refund(intent, cents, reason, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_list_refunds(const char *intent, pay_refund *out, int max, int *n, pay_error *err) {
  clear(err);
  *n = 0;
  return ops->list_refunds(intent, out, max, n, err);
}

pay_rc payments_create_account(const char *email, const char *provider_id, const char *idem_key, pay_account *out,
                               pay_error *err) {
  return ops->create_account(email, provider_id, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_retrieve_account(const char *account, pay_account *out, pay_error *err) {
  return ops->retrieve_account(account, cleared(err, out, sizeof *out), err);
}

pay_rc payments_account_link(const char *account, const char *refresh_url, const char *return_url,
                             char url[PAY_URL_LEN], pay_error *err) {
  clear(err);
  url[0] = 0;
  return ops->account_link(account, refresh_url, return_url, url, err);
}

pay_rc payments_transfer(const char *destination, int64_t cents, const char *source_intent, const char *job_id,
                         const char *transfer_id, const char *idem_key, pay_transfer *out, pay_error *err) {
  return ops->transfer(destination, cents, source_intent, job_id, transfer_id, idem_key, cleared(err, out, sizeof *out),
                       err);
}

pay_rc payments_find_transfer(const char *destination, const char *idem_key, pay_transfer *out, pay_error *err) {
  return ops->find_transfer(destination, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_reverse_transfer(const char *transfer, int64_t cents, const char *idem_key, pay_reversal *out,
                                 pay_error *err) {
  return ops->reverse_transfer(transfer, cents, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_find_reversal(const char *transfer, const char *idem_key, pay_reversal *out, pay_error *err) {
  return ops->find_reversal(transfer, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_retrieve_dispute(const char *dispute, pay_dispute *out, pay_error *err) {
  return ops->retrieve_dispute(dispute, cleared(err, out, sizeof *out), err);
}

pay_rc payments_upload_file(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                            pay_error *err) {
  clear(err);
  id[0] = 0;
  return ops->upload_file(name, type, bytes, len, id, err);
}

pay_rc payments_submit_evidence(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                                pay_error *err) {
  return ops->submit_evidence(dispute, ev, idem_key, cleared(err, out, sizeof *out), err);
}

pay_rc payments_sim_open_link(const char *link_id, char account[PAY_ID_LEN], char return_url[PAY_URL_LEN],
                              pay_error *err) {
  clear(err);
  account[0] = return_url[0] = 0;
  if (!ops->open_link) {
    snprintf(err->message, sizeof err->message, "onboarding links are hosted by the payment processor");
    return PAY_INVALID;
  }
  return ops->open_link(link_id, account, return_url, err);
}
