/* Stripe: form-encoded requests to STRIPE_API_BASE with the secret key, each attempt one
 * exchange of ext/fetch.h (http and https only, 5 s to connect, 20 s in all, answers up to
 * 4 MiB).
 *
 * Every POST carries an Idempotency-Key (the caller's, or a fresh one for calls that do not
 * move money) which stays the same across retries, so a retry after a timeout or a 5xx can
 * never charge twice. Network errors, 409 (the same key in flight), 429 and 5xx are retried
 * twice with a short backoff; an answer over the cap is not (it would come back the same);
 * Stripe's error objects map to pay_rc (card_error -> PAY_DECLINED, idempotency_error ->
 * PAY_IDEMPOTENCY, resource_missing -> PAY_NOT_FOUND, other 4xx -> PAY_INVALID).
 *
 * PaymentIntents, subscriptions, refunds, transfers and transfer reversals carry their
 * idempotency key in metadata[idempotency_key], so what a request whose answer was lost did can
 * be found again by listing the customer's (the destination's, the transfer's) objects (lists
 * are consistent at once, unlike search; and a key is pruned by Stripe after 24 hours, after
 * which only the metadata still tells).
 *
 * Connect (separate charges and transfers): providers get Express accounts (US, transfers
 * capability requested) onboarded through Account Links; a transfer names the job's charge as
 * its source_transaction, so it goes out before the charge's funds are available, and the
 * job's id as its transfer_group, as the job's charges do.
 *
 * Card PaymentIntents name payment_method_types[]=card, carry the job in description,
 * transfer_group and metadata, and STATEMENT_DESCRIPTOR_SUFFIX when set. Disputes are answered
 * with evidence whose files go to the Files API (STRIPE_FILES_BASE). A 401 or 403 is the key
 * refused, not an outage (payments_unauthorized). */
#include "core/buf.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/fetch.h"
#include "ext/payments_impl.h"
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STRIPE_VERSION "2024-06-20"
#define ATTEMPTS 3

#define FORM_MAX (64 * 1024)         /* a request's form body */
#define ANSWER_MAX (4 * 1024 * 1024) /* a Stripe object is never this large */

/* Appends key=value (both URL-encoded) to a form body; a failure stays in f (call). */
static void form_add(struct buf *f, const char *key, const char *value) {
  char *k = curl_easy_escape(NULL, key, 0), *v = curl_easy_escape(NULL, value, 0);
  if (!k || !v) oom();
  buf_addf(f, "%s%s=%s", buf_len(f) ? "&" : "", k, v);
  curl_free(k), curl_free(v);
}

static void form_add_int(struct buf *f, const char *key, int64_t value) {
  char n[32];
  snprintf(n, sizeof n, "%lld", (long long)value);
  form_add(f, key, n);
}

/* A form for one call (form_add fills it, post sends it and releases it). */
static struct buf form_new(void) {
  struct buf f;
  buf_init(&f, FORM_MAX);
  return f;
}

/* Maps a Stripe error answer to pay_rc and fills err. */
static pay_rc map_error(long status, json_t *body, pay_error *err) {
  json_t *e = json_object_get(body, "error");
  const char *type = json_string_value(json_object_get(e, "type"));
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *message = json_string_value(json_object_get(e, "message"));
  snprintf(err->message, sizeof err->message, "%s", message ? message : "payment processor error");
  snprintf(err->code, sizeof err->code, "%s", code ? code : "");
  const char *decline = json_string_value(json_object_get(e, "decline_code"));
  snprintf(err->decline_code, sizeof err->decline_code, "%s", decline ? decline : code ? code : "");
  const char *pi = json_string_value(json_object_get(json_object_get(e, "payment_intent"), "id"));
  if (pi) snprintf(err->intent_id, sizeof err->intent_id, "%s", pi);
  if (status == 402 || (type && !strcmp(type, "card_error"))) return PAY_DECLINED;
  if (type && !strcmp(type, "idempotency_error")) return PAY_IDEMPOTENCY;
  if (status == 404 || (code && !strcmp(code, "resource_missing"))) return PAY_NOT_FOUND;
  if (status == 400) return PAY_INVALID;
  log_msg(LOG_ERROR, "stripe answered %ld: %s", status, err->message);
  return PAY_UNAVAILABLE;
}

/* One API exchange with retries through the shared engine (ext/fetch.h): a POST of body
 * (content_type; form-encoded unless said) to base + path, or a GET when body is NULL. *out
 * receives the parsed object on PAY_OK. A transport failure, 409, 429 and 5xx are tried again;
 * an answer over ANSWER_MAX is not (the same answer would come back). 401 and 403 mean the
 * key itself was refused: not tried again, and the processor is unauthorized until a call
 * succeeds (ext/payments.h), during which nothing is sent but an hourly probe. */
static pay_rc exchange(const char *base, const char *path, const struct buf *body, const char *content_type,
                       const char *idem_key, json_t **out, pay_error *err) {
  char url[2048], auth[512], idem[300], key[ID_LEN + 1], type[160];
  snprintf(url, sizeof url, "%s%s", base, path);
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", CFG.stripe_secret_key);
  snprintf(type, sizeof type, "Content-Type: %s", content_type ? content_type : "application/x-www-form-urlencoded");
  if (!idem_key) id_new(key), idem_key = key;
  snprintf(idem, sizeof idem, "Idempotency-Key: %s", idem_key);
  const char *get_headers[] = {auth, "Stripe-Version: " STRIPE_VERSION, NULL};
  const char *post_headers[] = {auth, "Stripe-Version: " STRIPE_VERSION, type, idem, NULL};
  fetch_req rq = {.method = body ? "POST" : "GET",
                  .url = url,
                  .headers = body ? post_headers : get_headers,
                  .body = body ? (buf_ptr(body) ? buf_ptr(body) : "") : NULL,
                  .body_len = body ? buf_len(body) : 0,
                  .max_answer = ANSWER_MAX,
                  .timeout_ms = 20000,
                  .connect_timeout_ms = 5000};
  pay_rc rc = PAY_UNAVAILABLE;
  *out = NULL;
  if (body && buf_result(body) != BUF_OK) {
    snprintf(err->message, sizeof err->message, "payment processor request too large");
    return PAY_UNAVAILABLE;
  }
  if (!pay_auth_may_call()) {
    snprintf(err->code, sizeof err->code, "unauthorized");
    snprintf(err->message, sizeof err->message, "payment processor unauthorized: the service's key was refused");
    return PAY_UNAVAILABLE;
  }
  for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
    fetch_res res;
    fetch_rc got = fetch_exchange(&rq, &res);
    long status = res.status;
    const char *why = res.error;
    json_t *answer = res.body ? json_loads(res.body, 0, NULL) : NULL;
    fetch_res_fini(&res);
    bool answered = got == FETCH_OK || got == FETCH_BAD_STATUS;
    if (answered && (status == 401 || status == 403)) { /* the key, not this request */
      const char *message = json_string_value(json_object_get(json_object_get(answer, "error"), "message"));
      log_json(LOG_ERROR, "stripe refused the key",
               json_pack("{s:s,s:I,s:s?}", "path", path, "status", (json_int_t)status, "error", message));
      json_decref(answer);
      pay_auth_result(true);
      snprintf(err->code, sizeof err->code, "unauthorized");
      snprintf(err->message, sizeof err->message, "payment processor unauthorized (%ld)", status);
      return PAY_UNAVAILABLE;
    }
    if (answered && status < 500) pay_auth_result(false);
    /* 409: a request with the same Idempotency-Key is still in flight; its answer comes soon */
    bool retry = (!answered && got != FETCH_TOO_LARGE) || status == 409 || status == 429 || status >= 500;
    if (!retry && got == FETCH_OK && json_is_object(answer)) {
      *out = answer;
      rc = PAY_OK;
      break;
    }
    if (!retry && answered) {
      rc = map_error(status, answer, err);
      json_decref(answer);
      break;
    }
    json_decref(answer);
    snprintf(err->message, sizeof err->message, "payment processor unavailable (%s)", !answered ? why : "server error");
    log_json(LOG_WARN, "stripe call failed",
             json_pack("{s:s,s:i,s:I,s:s}", "path", path, "attempt", attempt, "status", (json_int_t)status, "error",
                       err->message));
    if (!retry) break;
    if (attempt < ATTEMPTS) usleep((useconds_t)(200000 * attempt));
  }
  return rc;
}

/* An API call to STRIPE_API_BASE: a POST of form, or a GET when form is NULL. */
static pay_rc call(const char *path, const struct buf *form, const char *idem_key, json_t **out, pay_error *err) {
  return exchange(CFG.stripe_api_base, path, form, NULL, idem_key, out, err);
}

/* A POST of form f to path (call), which releases f. */
static pay_rc post(const char *path, struct buf *f, const char *idem_key, json_t **out, pay_error *err) {
  pay_rc rc = call(path, f, idem_key, out, err);
  buf_free(f);
  return rc;
}

/* "/v1/<collection>/<escaped id><suffix>" */
static void object_path(char *out, size_t cap, const char *collection, const char *id, const char *suffix) {
  char *e = curl_easy_escape(NULL, id, 0);
  snprintf(out, cap, "/v1/%s/%s%s", collection, e, suffix);
  curl_free(e);
}

/* GET /v1/<collection>/<id><suffix>: the object in *out on PAY_OK. */
static pay_rc get_object(const char *collection, const char *id, const char *suffix, json_t **out, pay_error *err) {
  char path[700];
  object_path(path, sizeof path, collection, id, suffix);
  return call(path, NULL, NULL, out, err);
}

static pay_rc st_create_customer(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                                 pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "email", email);
  form_add(&f, "name", name);
  json_t *o;
  pay_rc rc = post("/v1/customers", &f, idem_key, &o, err);
  if (rc == PAY_OK) snprintf(id, PAY_ID_LEN, "%s", json_string_value(json_object_get(o, "id")));
  json_decref(o);
  return rc;
}

static pay_rc st_create_setup_intent(const char *customer, char secret[PAY_ID_LEN], pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "customer", customer);
  form_add(&f, "usage", "off_session");
  form_add(&f, "payment_method_types[]", "card");
  json_t *o;
  pay_rc rc = post("/v1/setup_intents", &f, NULL, &o, err);
  if (rc == PAY_OK) snprintf(secret, PAY_ID_LEN, "%s", json_string_value(json_object_get(o, "client_secret")));
  json_decref(o);
  return rc;
}

static pay_rc st_attach_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  char path[600];
  object_path(path, sizeof path, "payment_methods", payment_method, "/attach");
  struct buf f = form_new();
  form_add(&f, "customer", customer);
  json_t *o;
  pay_rc rc = post(path, &f, NULL, &o, err);
  if (rc == PAY_NOT_FOUND) rc = PAY_INVALID; /* an unknown method is the client's mistake here */
  if (rc != PAY_OK) return rc;
  pay_card_from_json(o, card);
  json_decref(o);
  /* the default for invoices, so the premium subscription charges this card */
  object_path(path, sizeof path, "customers", customer, "");
  struct buf d = form_new();
  form_add(&d, "invoice_settings[default_payment_method]", card->id);
  rc = post(path, &d, NULL, &o, err);
  json_decref(o);
  return rc;
}

static pay_rc st_retrieve_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("payment_methods", payment_method, "", &o, err);
  if (rc == PAY_INVALID) rc = PAY_NOT_FOUND;
  if (rc != PAY_OK) return rc;
  const char *owner = json_string_value(json_object_get(o, "customer"));
  if (!owner || strcmp(owner, customer))
    rc = PAY_NOT_FOUND; /* detached from this customer */
  else
    pay_card_from_json(o, card);
  json_decref(o);
  return rc;
}

/* A card PaymentIntent confirmed at once, off-session. payment_method_types[]=card: without
 * it, API versions since 2023-08-16 turn on automatic payment methods with redirects allowed,
 * and a server-side confirmation is then refused for want of a return_url. */
static pay_rc st_create_intent(const char *customer, const char *payment_method, int64_t cents, bool capture_now,
                               const pay_charge_info *info, const char *idem_key, pay_intent *out, pay_error *err) {
  struct buf f = form_new();
  form_add_int(&f, "amount", cents);
  form_add(&f, "currency", "usd");
  form_add(&f, "customer", customer);
  form_add(&f, "payment_method", payment_method);
  form_add(&f, "payment_method_types[]", "card");
  form_add(&f, "off_session", "true");
  form_add(&f, "confirm", "true");
  form_add(&f, "capture_method", capture_now ? "automatic" : "manual");
  if (info && info->description) form_add(&f, "description", info->description);
  if (CFG.statement_descriptor_suffix) form_add(&f, "statement_descriptor_suffix", CFG.statement_descriptor_suffix);
  if (info && info->job_id) form_add(&f, "transfer_group", info->job_id), form_add(&f, "metadata[job_id]", info->job_id);
  if (info && info->quote_id) form_add(&f, "metadata[quote_id]", info->quote_id);
  if (info && info->kind) form_add(&f, "metadata[kind]", info->kind);
  form_add(&f, "metadata[idempotency_key]", idem_key);
  form_add(&f, "expand[]", "latest_charge"); /* its capture_before is when the hold lapses */
  json_t *o;
  pay_rc rc = post("/v1/payment_intents", &f, idem_key, &o, err);
  if (rc != PAY_OK) return rc;
  pay_intent_from_json(o, out);
  json_decref(o);
  const char *expected = capture_now ? "succeeded" : "requires_capture";
  if (strcmp(out->status, expected)) { /* e.g. requires_action: off-session, nobody can authenticate */
    snprintf(err->message, sizeof err->message, "payment not completed (status %s)", out->status);
    snprintf(err->code, sizeof err->code, "%s", out->error_code[0] ? out->error_code : "authentication_required");
    snprintf(err->intent_id, sizeof err->intent_id, "%s", out->id);
    return PAY_DECLINED;
  }
  return PAY_OK;
}

static pay_rc intent_action(const char *intent, const char *action, const char *idem_key, pay_intent *out,
                            pay_error *err) {
  char path[600];
  object_path(path, sizeof path, "payment_intents", intent, action);
  struct buf f = form_new();
  json_t *o;
  pay_rc rc = post(path, &f, idem_key, &o, err);
  return pay_intent_answer(o, rc, out);
}

static pay_rc st_capture(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  return intent_action(intent, "/capture", idem_key, out, err);
}

static pay_rc st_cancel(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  return intent_action(intent, "/cancel", idem_key, out, err);
}

static pay_rc st_create_subscription(const char *customer, const char *price, const char *payment_method,
                                     const char *idem_key, pay_subscription *out, pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "customer", customer);
  form_add(&f, "items[0][price]", price);
  form_add(&f, "default_payment_method", payment_method);
  form_add(&f, "off_session", "true");
  form_add(&f, "payment_behavior", "error_if_incomplete");
  form_add(&f, "metadata[idempotency_key]", idem_key);
  json_t *o;
  pay_rc rc = post("/v1/subscriptions", &f, idem_key, &o, err);
  return pay_subscription_answer(o, rc, out);
}

static pay_rc st_update_subscription(const char *subscription, bool cancel_at_period_end, const char *idem_key,
                                     pay_subscription *out, pay_error *err) {
  char path[600];
  object_path(path, sizeof path, "subscriptions", subscription, "");
  struct buf f = form_new();
  form_add(&f, "cancel_at_period_end", cancel_at_period_end ? "true" : "false");
  json_t *o;
  pay_rc rc = post(path, &f, idem_key, &o, err);
  return pay_subscription_answer(o, rc, out);
}

static pay_rc st_retrieve_subscription(const char *subscription, pay_subscription *out, pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("subscriptions", subscription, "", &o, err);
  return pay_subscription_answer(o, rc, out);
}

static pay_rc st_retrieve_intent(const char *intent, pay_intent *out, pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("payment_intents", intent, "?expand%5B%5D=latest_charge", &o, err);
  return pay_intent_answer(o, rc, out);
}

#define LIST_PAGES 10 /* at most 1,000 objects of one customer are searched, newest first */

/* Walks the list GET <path>limit=100<extra> (path: under /v1, its query so far ending with '?'
 * or '&'; extra: "" or "&..."; both escaped by the caller) page by page, newest first, at most
 * LIST_PAGES pages: visit(o, arg) sees each object until it returns true (enough). PAY_OK once
 * walked (or stopped), else why a page could not be read. */
static pay_rc walk_list(const char *path, const char *extra, bool (*visit)(json_t *o, void *arg), void *arg,
                        pay_error *err) {
  char after[PAY_ID_LEN] = "";
  pay_rc rc = PAY_OK;
  bool enough = false;
  for (int page = 0; page < LIST_PAGES && !enough; page++) {
    char url[1400];
    snprintf(url, sizeof url, "%slimit=100%s%s%s", path, extra, after[0] ? "&starting_after=" : "", after);
    json_t *list;
    if ((rc = call(url, NULL, NULL, &list, err)) != PAY_OK) break;
    json_t *data = json_object_get(list, "data"), *o;
    size_t i;
    json_array_foreach(data, i, o) if (!enough) enough = visit(o, arg);
    const char *last = json_string_value(json_object_get(json_array_get(data, json_array_size(data) - 1), "id"));
    bool more = json_is_true(json_object_get(list, "has_more")) && last;
    if (more) snprintf(after, sizeof after, "%s", last);
    json_decref(list);
    if (!more) break;
  }
  return rc;
}

/* What find_by_key looks for, and what it found (owned). */
typedef struct keyed_search {
  const char *idem_key;
  json_t *found;
} keyed_search;

static bool carries_key(json_t *o, void *arg) {
  keyed_search *k = arg;
  const char *key = pay_metadata_key(o);
  if (key && !strcmp(key, k->idem_key)) k->found = json_incref(o);
  return k->found != NULL;
}

/* The first object of GET <collection>?<filter>=<value>&<extra> (filter NULL: no filter) whose
 * metadata carries idem_key, in *found (owned by the caller), or NULL: PAY_NOT_FOUND. The
 * collection is a path under /v1, escaped by the caller. */
static pay_rc find_by_key(const char *collection, const char *filter, const char *value, const char *extra,
                          const char *idem_key, json_t **found, pay_error *err) {
  char *owner = curl_easy_escape(NULL, filter ? value : "", 0);
  char path[1200];
  snprintf(path, sizeof path, "/v1/%s?%s%s%s%s", collection, filter ? filter : "", filter ? "=" : "",
           filter ? owner : "", filter ? "&" : "");
  curl_free(owner);
  keyed_search k = {idem_key, NULL};
  pay_rc rc = walk_list(path, extra, carries_key, &k, err);
  *found = k.found;
  if (rc != PAY_OK) return rc == PAY_NOT_FOUND ? PAY_UNAVAILABLE : rc; /* the owner exists: a miss is Stripe's */
  return k.found ? PAY_OK : PAY_NOT_FOUND;
}

static pay_rc st_find_intent(const char *customer, const char *idem_key, pay_intent *out, pay_error *err) {
  json_t *o;
  pay_rc rc =
      find_by_key("payment_intents", "customer", customer, "&expand%5B%5D=data.latest_charge", idem_key, &o, err);
  return pay_intent_answer(o, rc, out);
}

static pay_rc st_find_subscription(const char *customer, const char *idem_key, pay_subscription *out, pay_error *err) {
  json_t *o;
  pay_rc rc = find_by_key("subscriptions", "customer", customer, "&status=all", idem_key, &o, err);
  return pay_subscription_answer(o, rc, out);
}

static pay_rc st_refund(const char *intent, int64_t cents, const char *reason, const char *idem_key, pay_refund *out,
                        pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "payment_intent", intent);
  if (cents > 0) form_add_int(&f, "amount", cents);
  if (reason) form_add(&f, "reason", reason);
  form_add(&f, "metadata[idempotency_key]", idem_key);
  json_t *o;
  pay_rc rc = post("/v1/refunds", &f, idem_key, &o, err);
  return pay_refund_answer(o, rc, out);
}

/* Where st_list_refunds puts what it reads. */
typedef struct refund_list {
  pay_refund *out;
  int max, *n;
} refund_list;

static bool read_refund(json_t *o, void *arg) {
  refund_list *l = arg;
  if (*l->n < l->max) pay_refund_from_json(o, &l->out[(*l->n)++]);
  return *l->n >= l->max;
}

static pay_rc st_list_refunds(const char *intent, pay_refund *out, int max, int *n, pay_error *err) {
  char *pi = curl_easy_escape(NULL, intent, 0);
  char path[700];
  snprintf(path, sizeof path, "/v1/refunds?payment_intent=%s&", pi);
  curl_free(pi);
  return walk_list(path, "", read_refund, &(refund_list){out, max, n}, err);
}

/* ---- Connect ---- */

static pay_rc st_create_account(const char *email, const char *provider_id, const char *idem_key, pay_account *out,
                                pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "type", "express");
  form_add(&f, "country", "US");
  form_add(&f, "email", email);
  form_add(&f, "capabilities[transfers][requested]", "true");
  form_add(&f, "metadata[provider_id]", provider_id);
  form_add(&f, "metadata[idempotency_key]", idem_key);
  json_t *o;
  pay_rc rc = post("/v1/accounts", &f, idem_key, &o, err);
  return pay_account_answer(o, rc, out);
}

static pay_rc st_retrieve_account(const char *account, pay_account *out, pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("accounts", account, "", &o, err);
  if (rc == PAY_INVALID) rc = PAY_NOT_FOUND; /* Stripe answers an account of another platform 400 */
  return pay_account_answer(o, rc, out);
}

static pay_rc st_account_link(const char *account, const char *refresh_url, const char *return_url,
                              char url[PAY_URL_LEN], pay_error *err) {
  struct buf f = form_new();
  form_add(&f, "account", account);
  form_add(&f, "refresh_url", refresh_url);
  form_add(&f, "return_url", return_url);
  form_add(&f, "type", "account_onboarding");
  json_t *o;
  pay_rc rc = post("/v1/account_links", &f, NULL, &o, err);
  const char *link = json_string_value(json_object_get(o, "url"));
  if (rc == PAY_OK && link) snprintf(url, PAY_URL_LEN, "%s", link);
  if (rc == PAY_OK && !link)
    rc = PAY_UNAVAILABLE, snprintf(err->message, sizeof err->message, "account link without a url");
  json_decref(o);
  return rc;
}

/* The charge of a PaymentIntent (its latest_charge) into charge; "" when it has none. */
static pay_rc intent_charge(const char *intent, char charge[PAY_ID_LEN], pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("payment_intents", intent, "", &o, err);
  json_t *latest = json_object_get(o, "latest_charge"); /* an id, or the object when expanded */
  const char *id =
      json_is_string(latest) ? json_string_value(latest) : json_string_value(json_object_get(latest, "id"));
  snprintf(charge, PAY_ID_LEN, "%s", rc == PAY_OK && id ? id : "");
  json_decref(o);
  return rc;
}

static pay_rc st_transfer(const char *destination, int64_t cents, const char *source_intent, const char *job_id,
                          const char *transfer_id, const char *idem_key, pay_transfer *out, pay_error *err) {
  char charge[PAY_ID_LEN] = "";
  if (source_intent) {
    pay_rc rc = intent_charge(source_intent, charge, err);
    if (rc == PAY_UNAVAILABLE) return rc; /* an intent that is gone funds nothing: the balance does */
  }
  struct buf f = form_new();
  form_add_int(&f, "amount", cents);
  form_add(&f, "currency", "usd");
  form_add(&f, "destination", destination);
  if (charge[0]) form_add(&f, "source_transaction", charge);
  if (job_id) form_add(&f, "transfer_group", job_id), form_add(&f, "metadata[job_id]", job_id);
  if (transfer_id) form_add(&f, "metadata[transfer_id]", transfer_id);
  form_add(&f, "metadata[idempotency_key]", idem_key);
  json_t *o;
  pay_rc rc = post("/v1/transfers", &f, idem_key, &o, err);
  return pay_transfer_answer(o, rc, out);
}

static pay_rc st_find_transfer(const char *destination, const char *idem_key, pay_transfer *out, pay_error *err) {
  json_t *o;
  pay_rc rc = find_by_key("transfers", "destination", destination, "", idem_key, &o, err);
  return pay_transfer_answer(o, rc, out);
}

static pay_rc st_reverse_transfer(const char *transfer, int64_t cents, const char *idem_key, pay_reversal *out,
                                  pay_error *err) {
  char path[600];
  object_path(path, sizeof path, "transfers", transfer, "/reversals");
  struct buf f = form_new();
  form_add_int(&f, "amount", cents);
  form_add(&f, "metadata[idempotency_key]", idem_key);
  json_t *o;
  pay_rc rc = post(path, &f, idem_key, &o, err);
  return pay_reversal_answer(o, rc, out);
}

static pay_rc st_find_reversal(const char *transfer, const char *idem_key, pay_reversal *out, pay_error *err) {
  char collection[600];
  object_path(collection, sizeof collection, "transfers", transfer, "/reversals");
  json_t *o;
  pay_rc rc = find_by_key(collection + 4, NULL, NULL, "", idem_key, &o, err); /* the path names the transfer */
  return pay_reversal_answer(o, rc, out);
}

/* ---- disputes ---- */

static pay_rc st_retrieve_dispute(const char *dispute, pay_dispute *out, pay_error *err) {
  json_t *o;
  pay_rc rc = get_object("disputes", dispute, "", &o, err);
  return pay_dispute_answer(o, rc, out);
}

#define FILE_MAX (16 * 1024 * 1024) /* Stripe takes dispute evidence files up to 5 MB each */

/* Stripe's Files API (STRIPE_FILES_BASE): one file as multipart/form-data, purpose
 * dispute_evidence. */
static pay_rc st_upload_file(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                             pay_error *err) {
  char boundary[ID_LEN + 16], content_type[96];
  id_new(boundary + 8), memcpy(boundary, "--------", 8);
  snprintf(content_type, sizeof content_type, "multipart/form-data; boundary=%s", boundary);
  struct buf b;
  buf_init(&b, FILE_MAX);
  buf_addf(&b, "--%s\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\ndispute_evidence\r\n", boundary);
  buf_addf(&b, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\nContent-Type: %s\r\n\r\n",
           boundary, name, type);
  buf_addn(&b, bytes, len);
  buf_addf(&b, "\r\n--%s--\r\n", boundary);
  json_t *o;
  pay_rc rc = exchange(CFG.stripe_files_base, "/v1/files", &b, content_type, NULL, &o, err);
  buf_free(&b);
  const char *file = json_string_value(json_object_get(o, "id"));
  if (rc == PAY_OK && file) snprintf(id, PAY_ID_LEN, "%s", file);
  if (rc == PAY_OK && !file) rc = PAY_UNAVAILABLE, snprintf(err->message, sizeof err->message, "file without an id");
  json_decref(o);
  return rc;
}

static void evidence_add(struct buf *f, const char *field, const char *value) {
  char key[64];
  snprintf(key, sizeof key, "evidence[%s]", field);
  if (value && *value) form_add(f, key, value);
}

static pay_rc st_submit_evidence(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                                 pay_error *err) {
  char path[600];
  object_path(path, sizeof path, "disputes", dispute, "");
  struct buf f = form_new();
  evidence_add(&f, "uncategorized_text", ev->text);
  evidence_add(&f, "product_description", ev->product_description);
  evidence_add(&f, "customer_name", ev->customer_name);
  evidence_add(&f, "customer_email_address", ev->customer_email);
  evidence_add(&f, "service_date", ev->service_date);
  evidence_add(&f, "service_documentation", ev->service_documentation);
  evidence_add(&f, "customer_communication", ev->customer_communication);
  form_add(&f, "submit", "true");
  json_t *o;
  pay_rc rc = post(path, &f, idem_key, &o, err);
  return pay_dispute_answer(o, rc, out);
}

const pay_ops stripe_ops = PAY_OPS(st, "stripe", NULL);
