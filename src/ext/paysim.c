/* The simulated processor: Stripe's test-mode behaviour with its state in the database
 * (processor_sim_objects), so it survives restarts and is shared by every instance.
 *
 * Stripe's test PaymentMethod ids (pm_card_visa, ...) attach as a new pm_sim_* method, as
 * Stripe itself creates a new method from a test token; pm_card_chargeDeclined* attach but
 * every charge on them is declined. Objects are Stripe-shaped JSON; a state change is an
 * optimistic update (WHERE data = old), so concurrent calls on one object serialise. An
 * idempotency key maps to the object it produced, so repeating a call returns it again, and
 * reusing it with other parameters is refused as Stripe refuses it. Card authorizations hold
 * for 7 days of the service clock (capture_before on the charge); past that the intent is
 * cancelled and a capture fails with charge_expired_for_capture. Intents, subscriptions and
 * refunds carry their key in metadata, so a request whose answer was lost can be looked up.
 * A refund is a Stripe refund object (kind "refund"); what was refunded of a charge is its
 * amount_refunded, moved with the refund in one transaction. Connect: connected accounts
 * (kind "account") wait for their onboarding until one of their account links is opened on the
 * service's own page; transfers need the destination's transfers capability active and, with
 * a source intent, a captured charge to fund them; a reversal moves its transfer's
 * amount_reversed in the same transaction, never past the transfer's amount. */
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "db/db.h"
#include "ext/paysim_impl.h"
#include "ext/queue.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PERIOD_MS (30LL * 24 * 3600 * 1000)

/* Stripe's test PaymentMethods; dispute: every charge on it is disputed ("fraudulent") or
 * inquired about ("inquiry") right after it succeeds. */
static const struct test_card {
  const char *token, *brand, *last4, *decline, *dispute;
} test_cards[] = {
    {"pm_card_visa", "visa", "4242", NULL, NULL},
    {"pm_card_mastercard", "mastercard", "4444", NULL, NULL},
    {"pm_card_amex", "amex", "8431", NULL, NULL},
    {"pm_card_chargeDeclined", "visa", "0002", "generic_decline", NULL},
    {"pm_card_chargeDeclinedInsufficientFunds", "visa", "9995", "insufficient_funds", NULL},
    {"pm_card_createDispute", "visa", "0259", NULL, "fraudulent"},
    {"pm_card_createDisputeInquiry", "visa", "1976", NULL, "inquiry"},
};

/* ---- object storage ---- */

json_t *sim_load(const char *id, char **raw) {
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

/* On c: inserts o, object id of kind. */
static err_t insert_in(db_conn *c, const char *id, const char *kind, json_t *o, int64_t now) {
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  err_t e = db_to_err(
      db_exec(c, NULL, NULL,
              "INSERT INTO processor_sim_objects (id, kind, data, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
              DB_ARGS(DB_TEXT(id), DB_TEXT(kind), DB_TEXT(text), DB_INT(now))));
  free(text);
  return e;
}

/* On c: replaces object id, stored as old, with o; ERR_CONFLICT when it changed meanwhile. */
static err_t replace_in(db_conn *c, const char *id, const char *old, json_t *o, int64_t now) {
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = db_to_err(db_exec(c, &a, &r,
                              "UPDATE processor_sim_objects SET data = $3, updated_at = $4 WHERE id = $1 AND data = $2",
                              DB_ARGS(DB_TEXT(id), DB_TEXT(old), DB_TEXT(text), DB_INT(now))));
  if (!e && r->changes != 1) e = ERR_CONFLICT;
  arena_fini(&a);
  free(text);
  return e;
}

/* insert_in and replace_in alone: one statement, no transaction (as db_query runs it). */
static bool insert(const char *id, const char *kind, json_t *o) {
  db_conn *c = db_acquire();
  err_t e = insert_in(c, id, kind, o, clock_now_ms());
  db_release(c);
  return e == ERR_OK;
}

bool sim_save_announced(json_t *o, const char *kind, const char *old, json_t *const *events, int n) {
  const char *id = json_string_value(json_object_get(o, "id"));
  int64_t now = clock_now_ms();
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = old ? replace_in(c, id, old, o, now) : insert_in(c, id, kind, o, now);
  for (int i = 0; !e && i < n; i++) e = db_to_err(queue_enqueue(c, "payment_event", events[i]));
  return db_end(c, e) == ERR_OK;
}

bool sim_replace(const char *id, const char *old, json_t *o) {
  db_conn *c = db_acquire();
  err_t e = replace_in(c, id, old, o, clock_now_ms());
  db_release(c);
  return e == ERR_OK;
}

void sim_new_id(const char *prefix, char out[PAY_ID_LEN]) {
  char id[ID_LEN + 1];
  id_new(id);
  snprintf(out, PAY_ID_LEN, "%s_sim_%s", prefix, id + 1);
}

/* ---- idempotency keys ----
 *
 * As Stripe: the first request under a key wins, a later request with the key gets what it
 * made back, and with other parameters it is refused (PAY_IDEMPOTENCY); a request refused
 * before it made anything (validation, a declined subscription) leaves the key free, as Stripe
 * keeps no result for those. The key's row ("idem:<key>", the request's fingerprint and the id
 * of what it made) is inserted in the transaction that stores what the request made, so the
 * first to commit wins: a twin that ran meanwhile finds the key taken when it stores, throws
 * its object away with its transaction and answers with the winner's. One write transaction a
 * request: claiming the key in a transaction of its own first cost an acceptance a second
 * turn on SQLite's writer (docs/performance-history.md section 21). A key's row without an
 * object is one an earlier version claimed before making its object: a request waits for it
 * as it did then. An operation goes from its look at the key to what it made through the
 * keyed_* functions below. */

/* KEY_AGAIN: nothing could be read, look again at once (only inside look_key). */
typedef enum { KEY_NEW, KEY_REPLAY, KEY_MISMATCH, KEY_BUSY, KEY_AGAIN } key_state;

static void key_id(const char *idem_key, char out[PAY_ID_LEN + 8]) {
  snprintf(out, PAY_ID_LEN + 8, "idem:%s", idem_key);
}

/* One look at the row of key: KEY_NEW when there is none, else what it says to a request with
 * fingerprint fp (a replay's object in *replay, owned). */
static key_state key_read(const char *key, const char *fp, json_t **replay) {
  arena a;
  arena_init(&a);
  db_res *r;
  if (db_query(&a, &r, "SELECT data FROM processor_sim_objects WHERE id = $1", DB_ARGS(DB_TEXT(key))) != DB_OK) {
    arena_fini(&a);
    return KEY_AGAIN;
  }
  json_t *ref = r->rows == 1 ? json_loads(db_text(r, 0, 0), 0, NULL) : NULL;
  const char *first = json_string_value(json_object_get(ref, "fingerprint"));
  const char *object = json_string_value(json_object_get(ref, "object"));
  key_state st = r->rows == 0 ? KEY_NEW : KEY_BUSY;
  if (first && strcmp(first, fp))
    st = KEY_MISMATCH;
  else if (object && (*replay = sim_load(object, NULL)))
    st = KEY_REPLAY;
  json_decref(ref);
  arena_fini(&a);
  return st;
}

/* What idem_key says to a request with fingerprint fp: KEY_NEW (free), KEY_REPLAY (*replay,
 * owned), KEY_MISMATCH, or KEY_BUSY when its row still has no object after 2 s. taken: the key
 * was just found taken when storing, so a row not seen yet is a winner's whose commit is still
 * to come (SQLite commits a group of writers' transactions at once): look again. */
static key_state look_key(const char *idem_key, const char *fp, bool taken, json_t **replay) {
  *replay = NULL;
  if (!idem_key) return KEY_NEW;
  char key[PAY_ID_LEN + 8];
  key_id(idem_key, key);
  key_state st = KEY_AGAIN;
  for (int tries = 0; tries < 100 && (st == KEY_BUSY || st == KEY_AGAIN || (taken && st == KEY_NEW)); tries++)
    if ((st = key_read(key, fp, replay)) == KEY_BUSY || st == KEY_NEW) usleep(st == KEY_BUSY ? 20000 : 1000);
  return st == KEY_AGAIN || (taken && st == KEY_NEW) ? KEY_BUSY : st;
}

/* A request under an idempotency key, from its look at the key to what it made. */
typedef struct keyed {
  const char *key; /* the caller's idempotency key; NULL: none, nothing is kept */
  const char *fp;  /* the request's fingerprint: what it asked, as one string */
  json_t *made;    /* what the request made, or what the first request with the key made (owned), or NULL */
  bool replayed;   /* made was found under the key, not made by this call */
} keyed;

/* The pay_rc of a key that did not give the caller a fresh start. */
static pay_rc key_refusal(key_state st, pay_error *err) {
  if (st == KEY_MISMATCH) {
    snprintf(err->code, sizeof err->code, "idempotency_key_in_use");
    snprintf(err->message, sizeof err->message,
             "Keys for idempotent requests can only be used with the same parameters they were first used with.");
    return PAY_IDEMPOTENCY;
  }
  snprintf(err->message, sizeof err->message, "simulated processor is busy with this idempotency key");
  return PAY_UNAVAILABLE;
}

/* Looks at r's key (look_key; taken as it says): PAY_OK for a new request (r->made NULL) or a
 * replay (r->made what the first made); otherwise the refusal (the key used with other
 * parameters, or still busy). */
static pay_rc keyed_look(keyed *r, bool taken, pay_error *err) {
  key_state st = look_key(r->key, r->fp, taken, &r->made);
  r->replayed = st == KEY_REPLAY;
  return st == KEY_NEW || st == KEY_REPLAY ? PAY_OK : key_refusal(st, err);
}

/* Looks at idem_key (keyed_look) for the request whose fingerprint fmt prints into fp (size
 * bytes, cut there as snprintf cuts). */
__attribute__((format(printf, 6, 7))) static pay_rc keyed_open(keyed *r, char *fp, size_t size, const char *idem_key,
                                                               pay_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fp, size, fmt, ap);
  va_end(ap);
  *r = (keyed){idem_key, fp};
  return keyed_look(r, false, err);
}

/* Another object's change stored with a new one: `id` from `old` (its stored text) to `now`. */
typedef struct sim_change {
  const char *id, *old;
  json_t *now;
} sim_change;

/* Stores o (object id of kind) as what r made, with r's key taken for it, and applies change
 * (NULL: none) while its object still reads as it did, atomically. PAY_OK once stored (r->made
 * is o, a reference taken), or when a twin took the key first (r->made is what it made, nothing
 * of r's is stored); the key's refusal when another request took it; PAY_UNAVAILABLE without a
 * reason when change's object changed meanwhile or storage failed (nothing stored). */
static pay_rc keyed_store(keyed *r, const char *id, const char *kind, json_t *o, const sim_change *change,
                          pay_error *err) {
  char key[PAY_ID_LEN + 8] = "";
  if (r->key) key_id(r->key, key);
  json_t *ref = json_pack("{s:s,s:s}", "fingerprint", r->fp ? r->fp : "", "object", id);
  char *ref_text = json_dumps(ref, JSON_COMPACT | JSON_SORT_KEYS);
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *claim;
  db_conn *c;
  bool taken = false;
  err_t e = db_begin(&c);
  if (!e && r->key) { /* first: a key taken ends the transaction before anything else is written */
    e = db_to_err(db_exec(c, &a, &claim,
                          "INSERT INTO processor_sim_objects (id, kind, data, created_at, updated_at) "
                          "VALUES ($1, 'idempotency_key', $2, $3, $3) ON CONFLICT (id) DO NOTHING RETURNING id",
                          DB_ARGS(DB_TEXT(key), DB_TEXT(ref_text), DB_INT(now))));
    if (!e && claim->rows == 0) taken = true, e = ERR_CONFLICT;
  }
  if (!e && change) e = replace_in(c, change->id, change->old, change->now, now); /* changed: nothing stored */
  if (!e) e = insert_in(c, id, kind, o, now);
  e = db_end(c, e);
  arena_fini(&a);
  free(ref_text);
  json_decref(ref);
  if (e == ERR_OK) {
    r->made = json_incref(o);
    return PAY_OK;
  }
  return taken ? keyed_look(r, true, err) : PAY_UNAVAILABLE;
}

/* r made nothing (refused before storing): the key stays free, as Stripe keeps no result for
 * it; but a twin that made something under the key meanwhile is the answer instead (as when
 * r had waited for it). Returns rc, or what the key says now. */
static pay_rc keyed_refused(keyed *r, pay_rc rc, pay_error *err) {
  if (!r->key) return rc;
  char key[PAY_ID_LEN + 8];
  key_id(r->key, key);
  json_t *replay = NULL;
  key_state st = key_read(key, r->fp, &replay);
  if (st == KEY_REPLAY) {
    *err = (pay_error){0};
    r->made = replay, r->replayed = true;
    return PAY_OK;
  }
  if (st == KEY_MISMATCH) *err = (pay_error){0};
  return st == KEY_MISMATCH ? key_refusal(st, err) : rc;
}

/* keyed_store of a new object alone; when it cannot be stored: PAY_UNAVAILABLE. */
static pay_rc keyed_insert(keyed *r, const char *id, const char *kind, json_t *o, pay_error *err) {
  pay_rc rc = keyed_store(r, id, kind, o, NULL, err);
  return rc == PAY_UNAVAILABLE && !err->message[0] ? sim_fail(err, rc, "simulated processor storage failed") : rc;
}

/* What r made, as it stands now (owned; NULL when it is gone): a replay reads its object of kind
 * again, which may have moved on since (an intent lapsed, an account onboarded). */
static json_t *keyed_now(const keyed *r, const char *kind) {
  const char *id = json_string_value(json_object_get(r->made, "id"));
  if (!r->replayed) return json_incref(r->made);
  return !strcmp(kind, "payment_intent") ? sim_load_intent(id) : sim_load_kind(id, kind, NULL);
}

/* What a request under a key makes out of another object that it changes with it (a refund of
 * a charge, a reversal of a transfer): that object (the target), read again for every try. */
typedef struct keyed_change {
  const char *target, *kind;                   /* the target's id; the kind of object made */
  json_t *(*load)(const char *id, char **raw); /* the target and its stored text, or NULL */
  const char *missing;                         /* the refusal when there is no such target */
  /* builds the object made (its id into id) out of target as it stands, and changes target to
     what it becomes with it; or refuses. ask: the request's own parameters */
  pay_rc (*make)(keyed *r, json_t *target, const void *ask, char id[PAY_ID_LEN], json_t **made, pay_error *err);
} keyed_change;

/* One try of k: PAY_OK once the object and the target's change are stored together (or a twin
 * made it first), PAY_UNAVAILABLE without a reason when the target changed meanwhile, else a
 * refusal. */
static pay_rc keyed_try(keyed *r, const keyed_change *k, const void *ask, pay_error *err) {
  char *raw = NULL, id[PAY_ID_LEN];
  json_t *target = k->load(k->target, &raw), *made = NULL;
  pay_rc rc = target ? k->make(r, target, ask, id, &made, err) : sim_fail(err, PAY_NOT_FOUND, k->missing);
  if (rc == PAY_OK) rc = keyed_store(r, id, k->kind, made, &(sim_change){k->target, raw, target}, err);
  json_decref(made), json_decref(target), free(raw);
  return rc;
}

/* Makes r's object as k says, up to 5 times while the target changes meanwhile. */
static pay_rc keyed_retry(keyed *r, const keyed_change *k, const void *ask, pay_error *err) {
  pay_rc rc = PAY_UNAVAILABLE;
  for (int tries = 0; tries < 5 && rc == PAY_UNAVAILABLE && !err->message[0]; tries++) rc = keyed_try(r, k, ask, err);
  if (rc != PAY_OK && rc != PAY_IDEMPOTENCY) rc = keyed_refused(r, rc, err);
  if (rc == PAY_UNAVAILABLE && !err->message[0]) sim_fail(err, rc, "simulated processor is busy");
  return rc;
}

pay_rc sim_fail(pay_error *err, pay_rc rc, const char *message) {
  snprintf(err->message, sizeof err->message, "%s", message);
  return rc;
}

/* ---- operations ---- */

static pay_rc sim_create_customer(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                                  pay_error *err) {
  char fp[600];
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "customer|%s|%s", email, name);
  if (rc == PAY_OK && !r.made) {
    sim_new_id("cus", id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "object", "customer", "email", email, "name", name);
    rc = keyed_insert(&r, id, "customer", o, err);
    json_decref(o);
  }
  if (rc == PAY_OK) snprintf(id, PAY_ID_LEN, "%s", json_string_value(json_object_get(r.made, "id")));
  json_decref(r.made);
  return rc;
}

static bool customer_exists(const char *customer) {
  json_t *c = sim_load(customer, NULL);
  const char *kind = json_string_value(json_object_get(c, "object"));
  bool ok = kind && !strcmp(kind, "customer");
  json_decref(c);
  return ok;
}

static pay_rc sim_create_setup_intent(const char *customer, char secret[PAY_ID_LEN], pay_error *err) {
  if (!customer_exists(customer)) return sim_fail(err, PAY_NOT_FOUND, "No such customer");
  char id[PAY_ID_LEN], tail[ID_LEN + 1];
  sim_new_id("seti", id);
  id_new(tail);
  json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "object", "setup_intent", "customer", customer, "status",
                        "requires_payment_method");
  bool ok = insert(id, "setup_intent", o);
  json_decref(o);
  if (!ok) return sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  snprintf(secret, PAY_ID_LEN, "%s_secret_%s", id, tail + 1);
  return PAY_OK;
}

static pay_rc sim_attach_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  const struct test_card *t = NULL;
  for (size_t i = 0; i < sizeof test_cards / sizeof *test_cards; i++)
    if (!strcmp(test_cards[i].token, payment_method)) t = &test_cards[i];
  if (!t) return sim_fail(err, PAY_INVALID, "No such PaymentMethod");
  if (!customer_exists(customer)) return sim_fail(err, PAY_NOT_FOUND, "No such customer");
  char id[PAY_ID_LEN];
  sim_new_id("pm", id);
  json_t *o = json_pack("{s:s,s:s,s:s,s:{s:s,s:s,s:i,s:i},s:s?,s:s?}", "id", id, "object", "payment_method", "customer",
                        customer, "card", "brand", t->brand, "last4", t->last4, "exp_month", 12, "exp_year", 2034,
                        "decline_code", t->decline, "dispute", t->dispute);
  bool ok = insert(id, "payment_method", o);
  if (ok) pay_card_from_json(o, card);
  json_decref(o);
  return ok ? PAY_OK : sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
}

static pay_rc sim_retrieve_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err) {
  json_t *o = sim_load(payment_method, NULL);
  const char *owner = json_string_value(json_object_get(o, "customer"));
  pay_rc rc = o && owner && !strcmp(owner, customer) ? PAY_OK : sim_fail(err, PAY_NOT_FOUND, "No such PaymentMethod");
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

int64_t sim_now_s(void) { return clock_now_ms() / 1000; }

/* An uncaptured authorization past its capture_before lapses, as at Stripe: the intent is
 * cancelled (cancellation_reason "automatic"). Applied when the intent is next read. */
static bool lapsed(json_t *pi) {
  const char *status = json_string_value(json_object_get(pi, "status"));
  json_t *card =
      json_object_get(json_object_get(json_object_get(pi, "latest_charge"), "payment_method_details"), "card");
  json_int_t before = json_integer_value(json_object_get(card, "capture_before"));
  return status && !strcmp(status, "requires_capture") && before && sim_now_s() >= before;
}

/* Loads an intent, applying a lapse that is due; NULL when there is no such intent. */
json_t *sim_load_intent(const char *intent) {
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *o = sim_load(intent, &raw);
    const char *kind = json_string_value(json_object_get(o, "object"));
    if (!o || !kind || strcmp(kind, "payment_intent")) {
      json_decref(o), free(raw);
      return NULL;
    }
    if (!lapsed(o)) return free(raw), o;
    json_object_set_new(o, "status", json_string("canceled"));
    json_object_set_new(o, "cancellation_reason", json_string("automatic"));
    bool ok = sim_replace(intent, raw, o);
    free(raw);
    if (ok) return o;
    json_decref(o); /* changed meanwhile: read again */
  }
  return NULL;
}

/* The outcome of a stored intent as a create call answers it (a replay answers the same). */
static pay_rc intent_answer(json_t *pi, pay_intent *out, pay_error *err) {
  pay_intent_from_json(pi, out);
  json_t *e = json_object_get(pi, "last_payment_error");
  if (!e || !json_is_object(e)) return PAY_OK;
  snprintf(err->intent_id, sizeof err->intent_id, "%s", out->id);
  snprintf(err->code, sizeof err->code, "%s", out->error_code);
  snprintf(err->decline_code, sizeof err->decline_code, "%s", json_string_value(json_object_get(e, "decline_code")));
  return sim_fail(err, PAY_DECLINED, out->error_message);
}

/* The description, transfer_group and metadata of info on an intent or its charge. */
static void describe(json_t *o, const pay_charge_info *info, const char *idem_key) {
  json_t *meta = json_pack("{s:s?}", "idempotency_key", idem_key);
  if (info && info->job_id) json_object_set_new(meta, "job_id", json_string(info->job_id));
  if (info && info->quote_id) json_object_set_new(meta, "quote_id", json_string(info->quote_id));
  if (info && info->kind) json_object_set_new(meta, "kind", json_string(info->kind));
  json_object_set_new(o, "metadata", meta);
  if (info && info->description) json_object_set_new(o, "description", json_string(info->description));
  if (info && info->job_id) json_object_set_new(o, "transfer_group", json_string(info->job_id));
  if (CFG.statement_descriptor_suffix)
    json_object_set_new(o, "statement_descriptor_suffix", json_string(CFG.statement_descriptor_suffix));
}

/* A new intent of customer's for cents on payment_method (capture_now: a charge, else a hold),
 * made under r: its charge carries the card's details, or the decline of a declined card. */
static pay_rc new_intent(keyed *r, const char *customer, const char *payment_method, int64_t cents, bool capture_now,
                         const pay_charge_info *info, pay_error *err) {
  json_t *pm = sim_load(payment_method, NULL);
  const char *found = method_decline(pm, customer);
  char decline[64];
  snprintf(decline, sizeof decline, "%s", found ? found : "");
  json_t *card = json_deep_copy(json_object_get(pm, "card"));
  json_decref(pm); /* `decline` is a copy: pm's strings die with it */
  if (cents < 50 || !found) {
    json_decref(card);
    return keyed_refused(
        r, sim_fail(err, PAY_INVALID, cents < 50 ? "Amount must be at least $0.50 usd" : "No such PaymentMethod"), err);
  }
  char id[PAY_ID_LEN], charge[PAY_ID_LEN];
  sim_new_id("pi", id);
  sim_new_id("ch", charge);
  bool declined = *decline != 0;
  const char *status = declined ? "requires_payment_method" : capture_now ? "succeeded" : "requires_capture";
  json_int_t created = sim_now_s();
  json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:I}", "id", id, "object", "payment_intent", "amount",
                        (json_int_t)cents, "amount_received", (json_int_t)(capture_now && !declined ? cents : 0),
                        "currency", "usd", "customer", customer, "payment_method", payment_method, "capture_method",
                        capture_now ? "automatic" : "manual", "status", status, "created", created);
  describe(o, info, r->key);
  if (declined) {
    json_object_set_new(o, "last_payment_error",
                        json_pack("{s:s,s:s,s:s}", "code", "card_declined", "decline_code", decline, "message",
                                  !strcmp(decline, "insufficient_funds") ? "Your card has insufficient funds."
                                                                         : "Your card was declined."));
  } else {
    /* a card authorization holds for 7 days (Stripe's capture_before on the charge) */
    json_int_t before = capture_now ? 0 : created + 7 * 24 * 3600;
    json_t *details = json_pack("{s:s?,s:s?,s:o*}", "brand", json_string_value(json_object_get(card, "brand")), "last4",
                                json_string_value(json_object_get(card, "last4")), "capture_before",
                                before ? json_integer(before) : NULL);
    json_t *ch = json_pack("{s:s,s:s,s:I,s:s,s:{s:o}}", "id", charge, "object", "charge", "amount", (json_int_t)cents,
                           "payment_intent", id, "payment_method_details", "card", details);
    describe(ch, info, r->key);
    json_object_set_new(o, "latest_charge", ch);
  }
  json_decref(card);
  pay_rc rc = keyed_insert(r, id, "payment_intent", o, err);
  if (rc == PAY_OK && !r->replayed && capture_now && !declined) sim_after_charge(o);
  json_decref(o);
  return rc;
}

static pay_rc sim_create_intent(const char *customer, const char *payment_method, int64_t cents, bool capture_now,
                                const pay_charge_info *info, const char *idem_key, pay_intent *out, pay_error *err) {
  char fp[PAY_ID_LEN * 2 + 64];
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "intent|%s|%s|%lld|%d", customer, payment_method,
                         (long long)cents, capture_now);
  if (rc == PAY_OK && !r.made) rc = new_intent(&r, customer, payment_method, cents, capture_now, info, err);
  json_t *pi = rc == PAY_OK ? keyed_now(&r, "payment_intent") : NULL;
  if (rc == PAY_OK)
    rc = pi ? intent_answer(pi, out, err) : sim_fail(err, PAY_UNAVAILABLE, "simulated processor lost an intent");
  json_decref(pi), json_decref(r.made);
  return rc;
}

/* Moves an intent from `from` to `to`; repeating a finished move is not an error. */
static pay_rc move_intent(const char *intent, const char *from, const char *to, pay_intent *out, pay_error *err) {
  for (int tries = 0; tries < 5; tries++) {
    json_t *o = sim_load_intent(intent);
    if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such payment_intent");
    char *raw = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    const char *status = json_string_value(json_object_get(o, "status"));
    const char *why = json_string_value(json_object_get(o, "cancellation_reason"));
    pay_rc rc = PAY_OK;
    if (!strcmp(status, to)) {
      pay_intent_from_json(o, out);
    } else if (!strcmp(to, "succeeded") && !strcmp(status, "canceled") && why && !strcmp(why, "automatic")) {
      snprintf(err->code, sizeof err->code, "charge_expired_for_capture");
      snprintf(
          err->message, sizeof err->message,
          "The charge has expired and can no longer be captured: an authorization must be captured within 7 days.");
      rc = PAY_INVALID;
    } else if (strcmp(status, from)) {
      snprintf(err->code, sizeof err->code, "payment_intent_unexpected_state");
      snprintf(err->message, sizeof err->message, "This PaymentIntent's status is %s", status);
      rc = PAY_INVALID;
    } else {
      json_object_set_new(o, "status", json_string(to));
      if (!strcmp(to, "canceled")) json_object_set_new(o, "cancellation_reason", json_string("requested_by_customer"));
      if (!sim_replace(intent, raw, o)) {
        rc = PAY_UNAVAILABLE; /* changed meanwhile: read again */
      } else {
        pay_intent_from_json(o, out);
        if (!strcmp(to, "succeeded")) sim_after_charge(o);
      }
    }
    json_decref(o);
    free(raw);
    if (rc != PAY_UNAVAILABLE) return rc;
  }
  return sim_fail(err, PAY_UNAVAILABLE, "simulated processor is busy");
}

static pay_rc sim_capture(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  (void)idem_key; /* capturing twice is harmless here: the second finds it succeeded */
  return move_intent(intent, "requires_capture", "succeeded", out, err);
}

static pay_rc sim_cancel(const char *intent, const char *idem_key, pay_intent *out, pay_error *err) {
  (void)idem_key;
  return move_intent(intent, "requires_capture", "canceled", out, err);
}

static pay_rc sim_retrieve_intent(const char *intent, pay_intent *out, pay_error *err) {
  json_t *o = sim_load_intent(intent);
  if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such payment_intent");
  pay_intent_from_json(o, out);
  json_decref(o);
  return PAY_OK;
}

/* The object recorded under idem_key whose field `owner_field` is owner (owned), or NULL. */
static json_t *keyed_by(const char *owner_field, const char *owner, const char *idem_key) {
  char key[PAY_ID_LEN + 8];
  key_id(idem_key, key);
  json_t *ref = sim_load(key, NULL);
  json_t *o = ref ? sim_load(json_string_value(json_object_get(ref, "object")), NULL) : NULL;
  const char *found = json_string_value(json_object_get(o, owner_field));
  json_decref(ref);
  if (o && (!found || strcmp(found, owner))) json_decref(o), o = NULL;
  return o;
}

/* The object of kind recorded under idem_key when its owner_field is owner; otherwise NULL,
 * with err saying missing. */
static json_t *keyed_kind(const char *owner_field, const char *owner, const char *idem_key, const char *kind,
                          const char *missing, pay_error *err) {
  json_t *o = keyed_by(owner_field, owner, idem_key);
  const char *k = json_string_value(json_object_get(o, "object"));
  if (k && !strcmp(k, kind)) return o;
  json_decref(o);
  sim_fail(err, PAY_NOT_FOUND, missing);
  return NULL;
}

/* The object recorded under idem_key when it belongs to customer (owned), or NULL. */
static json_t *keyed_object(const char *customer, const char *idem_key) {
  return keyed_by("customer", customer, idem_key);
}

static pay_rc sim_find_intent(const char *customer, const char *idem_key, pay_intent *out, pay_error *err) {
  json_t *o = keyed_object(customer, idem_key);
  if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such payment_intent");
  json_t *now = sim_load_intent(json_string_value(json_object_get(o, "id")));
  json_decref(o);
  if (!now) return sim_fail(err, PAY_NOT_FOUND, "No such payment_intent");
  pay_intent_from_json(now, out);
  json_decref(now);
  return PAY_OK;
}

/* A new subscription of customer's to price, paid by payment_method, made under r; a declined
 * card makes none (error_if_incomplete), and Stripe keeps no result for it. */
static pay_rc new_subscription(keyed *r, const char *customer, const char *price, const char *payment_method,
                               pay_error *err) {
  json_t *pm = sim_load(payment_method, NULL);
  const char *decline = method_decline(pm, customer);
  pay_rc rc = PAY_OK;
  if (!decline)
    rc = sim_fail(err, PAY_INVALID, "No such PaymentMethod");
  else if (*decline) {
    snprintf(err->code, sizeof err->code, "card_declined");
    snprintf(err->decline_code, sizeof err->decline_code, "%s", decline);
    rc = sim_fail(err, PAY_DECLINED, "Your card was declined.");
  }
  json_decref(pm); /* after the last use of decline, which points into pm */
  if (rc != PAY_OK) return keyed_refused(r, rc, err);
  char id[PAY_ID_LEN];
  sim_new_id("sub", id);
  int64_t end = clock_now_ms() + PERIOD_MS;
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:I,s:{s:s?}}", "id", id, "object", "subscription", "customer",
                        customer, "price", price, "status", "active", "cancel_at_period_end", 0, "current_period_end",
                        (json_int_t)(end / 1000), "metadata", "idempotency_key", r->key);
  rc = keyed_insert(r, id, "subscription", o, err);
  json_decref(o);
  return rc;
}

static pay_rc sim_create_subscription(const char *customer, const char *price, const char *payment_method,
                                      const char *idem_key, pay_subscription *out, pay_error *err) {
  char fp[PAY_ID_LEN * 3 + 32];
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "subscription|%s|%s|%s", customer, price, payment_method);
  if (rc == PAY_OK && !r.made) rc = new_subscription(&r, customer, price, payment_method, err);
  return pay_subscription_answer(r.made, rc, out);
}

static pay_rc sim_update_subscription(const char *subscription, bool cancel_at_period_end, const char *idem_key,
                                      pay_subscription *out, pay_error *err) {
  (void)idem_key; /* setting a flag is idempotent by nature */
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *o = sim_load(subscription, &raw);
    if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such subscription");
    json_object_set_new(o, "cancel_at_period_end", json_boolean(cancel_at_period_end));
    bool ok = sim_replace(subscription, raw, o);
    if (ok) pay_subscription_from_json(o, out);
    json_decref(o);
    free(raw);
    if (ok) return PAY_OK;
  }
  return sim_fail(err, PAY_UNAVAILABLE, "simulated processor is busy");
}

static pay_rc sim_retrieve_subscription(const char *subscription, pay_subscription *out, pay_error *err) {
  json_t *o = sim_load(subscription, NULL);
  if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such subscription");
  pay_subscription_from_json(o, out);
  json_decref(o);
  return PAY_OK;
}

static pay_rc sim_find_subscription(const char *customer, const char *idem_key, pay_subscription *out, pay_error *err) {
  json_t *o = keyed_object(customer, idem_key);
  const char *kind = json_string_value(json_object_get(o, "object"));
  pay_rc rc = kind && !strcmp(kind, "subscription") ? PAY_OK : sim_fail(err, PAY_NOT_FOUND, "No such subscription");
  if (rc == PAY_OK) pay_subscription_from_json(o, out);
  json_decref(o);
  return rc;
}

/* ---- refunds ---- */

/* Refuses a refund as Stripe does: invalid_request_error with code. */
static pay_rc refund_refusal(pay_error *err, const char *code, const char *message) {
  snprintf(err->code, sizeof err->code, "%s", code);
  return sim_fail(err, PAY_INVALID, message);
}

/* What a refund asks of its intent. */
typedef struct refund_ask {
  const char *reason;
  int64_t cents; /* 0: all that is left */
} refund_ask;

/* A refund of intent pi as it stands (keyed_change's make): its charge's amount_refunded grows
 * with it; never past what was captured. */
static pay_rc refund_make(keyed *r, json_t *pi, const void *asked, char id[PAY_ID_LEN], json_t **refund,
                          pay_error *err) {
  const refund_ask *ask = asked;
  const char *intent = json_string_value(json_object_get(pi, "id"));
  json_t *charge = json_object_get(pi, "latest_charge");
  json_int_t amount = json_integer_value(json_object_get(pi, "amount"));
  json_int_t refunded = json_integer_value(json_object_get(charge, "amount_refunded"));
  const char *status = json_string_value(json_object_get(pi, "status"));
  json_int_t take = ask->cents > 0 ? (json_int_t)ask->cents : amount - refunded;
  char message[160];
  if (!status || strcmp(status, "succeeded") || !json_is_object(charge)) {
    snprintf(message, sizeof message, "This PaymentIntent (%s) does not have a successful charge to refund.", intent);
    return refund_refusal(err, "", message); /* Stripe gives no code here, only param payment_intent */
  }
  if (refunded >= amount) {
    snprintf(message, sizeof message, "Charge %s has already been refunded.",
             json_string_value(json_object_get(charge, "id")));
    return refund_refusal(err, "charge_already_refunded", message);
  }
  if (take > amount - refunded) {
    snprintf(message, sizeof message, "Refund amount ($%.2f) is greater than unrefunded amount on charge ($%.2f)",
             (double)take / 100, (double)(amount - refunded) / 100);
    return refund_refusal(err, "amount_too_large", message);
  }
  sim_new_id("re", id);
  *refund = json_pack("{s:s,s:s,s:I,s:s,s:s?,s:s,s:s,s:s?,s:I,s:{s:s?}}", "id", id, "object", "refund", "amount", take,
                      "currency", "usd", "charge", json_string_value(json_object_get(charge, "id")), "payment_intent",
                      intent, "status", "succeeded", "reason", ask->reason, "created", (json_int_t)sim_now_s(),
                      "metadata", "idempotency_key", r->key);
  json_object_set_new(charge, "amount_refunded", json_integer(refunded + take));
  json_object_set_new(charge, "refunded", json_boolean(refunded + take >= amount));
  return PAY_OK;
}

/* An intent (a lapse that is due applied) with its text as it would be stored. */
static json_t *load_intent(const char *intent, char **raw) {
  json_t *pi = sim_load_intent(intent);
  *raw = pi ? json_dumps(pi, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  return pi;
}

static pay_rc sim_refund(const char *intent, int64_t cents, const char *reason, const char *idem_key, pay_refund *out,
                         pay_error *err) {
  char fp[PAY_ID_LEN + 96];
  const keyed_change refund = {intent, "refund", load_intent, "No such payment_intent", refund_make};
  keyed r;
  pay_rc rc =
      keyed_open(&r, fp, sizeof fp, idem_key, err, "refund|%s|%lld|%s", intent, (long long)cents, reason ? reason : "");
  if (rc == PAY_OK && !r.made) rc = keyed_retry(&r, &refund, &(refund_ask){reason, cents}, err);
  return pay_refund_answer(r.made, rc, out);
}

static pay_rc sim_list_refunds(const char *intent, pay_refund *out, int max, int *n, pay_error *err) {
  json_t *pi = sim_load_intent(intent);
  if (!pi) return sim_fail(err, PAY_NOT_FOUND, "No such payment_intent");
  json_decref(pi);
  arena a;
  arena_init(&a);
  db_res *r;
  char *pattern = arena_printf(&a, "%%\"payment_intent\":\"%s\"%%", intent);
  db_rc rc = db_query(&a, &r,
                      "SELECT data FROM processor_sim_objects WHERE kind = 'refund' AND data LIKE $1 "
                      "ORDER BY created_at DESC, id DESC",
                      DB_ARGS(DB_TEXT(pattern)));
  for (int i = 0; rc == DB_OK && i < r->rows && *n < max; i++) {
    json_t *o = json_loads(db_text(r, i, 0), 0, NULL);
    const char *of = json_string_value(json_object_get(o, "payment_intent"));
    if (of && !strcmp(of, intent)) pay_refund_from_json(o, &out[(*n)++]); /* LIKE's _ matches any character */
    json_decref(o);
  }
  arena_fini(&a);
  return rc == DB_OK ? PAY_OK : sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
}

/* ---- Connect: accounts, their onboarding, transfers and reversals ----
 *
 * A new account waits for its onboarding (transfers capability inactive, requirements due), as
 * a new Express account does at Stripe. Its account links point at the service's own page
 * (GET /payouts/onboarding/<link>, development and test only), which plays Stripe's hosted
 * onboarding: opening a link once, within 5 minutes of the service clock, finishes it. */

#define LINK_TTL_S 300
static const char SIM_DUE[] = "[\"external_account\",\"individual.dob.day\",\"individual.first_name\","
                              "\"individual.last_name\",\"tos_acceptance.date\",\"tos_acceptance.ip\"]";

json_t *sim_load_kind(const char *id, const char *kind, char **raw) {
  json_t *o = sim_load(id, raw);
  const char *k = json_string_value(json_object_get(o, "object"));
  if (o && (!k || strcmp(k, kind))) {
    json_decref(o), o = NULL;
    if (raw) free(*raw), *raw = NULL;
  }
  return o;
}

static pay_rc sim_create_account(const char *email, const char *provider_id, const char *idem_key, pay_account *out,
                                 pay_error *err) {
  char fp[600];
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "account|%s|%s", email, provider_id);
  if (rc == PAY_OK && !r.made) {
    char id[PAY_ID_LEN];
    sim_new_id("acct", id);
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:{s:s},s:b,s:b,s:b,s:{s:o,s:o,s:o,s:s},s:I,s:{s:s,s:s?}}", "id", id, "object",
                  "account", "type", "express", "country", "US", "email", email, "capabilities", "transfers",
                  "inactive", "charges_enabled", 0, "payouts_enabled", 0, "details_submitted", 0, "requirements",
                  "currently_due", json_loads(SIM_DUE, 0, NULL), "eventually_due", json_loads(SIM_DUE, 0, NULL),
                  "past_due", json_array(), "disabled_reason", "requirements.past_due", "created",
                  (json_int_t)sim_now_s(), "metadata", "provider_id", provider_id, "idempotency_key", idem_key);
    rc = keyed_insert(&r, id, "account", o, err);
    json_decref(o);
  }
  json_t *now = rc == PAY_OK ? keyed_now(&r, "account") : NULL; /* its onboarding may have moved on since */
  if (rc == PAY_OK && !now) rc = sim_fail(err, PAY_UNAVAILABLE, "simulated processor lost an account");
  if (rc == PAY_OK) pay_account_from_json(now, out);
  json_decref(now), json_decref(r.made);
  return rc;
}

static pay_rc sim_retrieve_account(const char *account, pay_account *out, pay_error *err) {
  json_t *o = sim_load_kind(account, "account", NULL);
  if (!o) return sim_fail(err, PAY_NOT_FOUND, "No such account");
  pay_account_from_json(o, out);
  json_decref(o);
  return PAY_OK;
}

static pay_rc sim_account_link(const char *account, const char *refresh_url, const char *return_url,
                               char url[PAY_URL_LEN], pay_error *err) {
  json_t *acct = sim_load_kind(account, "account", NULL);
  json_decref(acct);
  if (!acct) return sim_fail(err, PAY_NOT_FOUND, "No such account");
  char id[PAY_ID_LEN];
  sim_new_id("link", id);
  snprintf(url, PAY_URL_LEN, "%s/payouts/onboarding/%s", CFG.public_url, id);
  json_int_t created = sim_now_s();
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:b}", "id", id, "object", "account_link", "account", account,
                        "url", url, "refresh_url", refresh_url, "return_url", return_url, "created", created,
                        "expires_at", created + LINK_TTL_S, "used", 0);
  bool ok = insert(id, "account_link", o);
  json_decref(o);
  if (!ok) url[0] = 0;
  return ok ? PAY_OK : sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
}

/* Finishes the onboarding of account: what Stripe's hosted pages do once the person gave
 * everything asked. */
static bool finish_onboarding(const char *account) {
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *o = sim_load_kind(account, "account", &raw);
    if (!o) return false;
    json_object_set_new(o, "capabilities", json_pack("{s:s}", "transfers", "active"));
    json_object_set_new(o, "payouts_enabled", json_true());
    json_object_set_new(o, "details_submitted", json_true());
    json_object_set_new(
        o, "requirements",
        json_pack("{s:[],s:[],s:[],s:n}", "currently_due", "eventually_due", "past_due", "disabled_reason"));
    bool ok = sim_replace(account, raw, o);
    json_decref(o);
    free(raw);
    if (ok) return true;
  }
  return false;
}

static pay_rc sim_open_link(const char *link_id, char account[PAY_ID_LEN], char return_url[PAY_URL_LEN],
                            pay_error *err) {
  char *raw;
  json_t *link = sim_load_kind(link_id, "account_link", &raw);
  if (!link) return sim_fail(err, PAY_NOT_FOUND, "No such account link");
  bool fresh = !json_is_true(json_object_get(link, "used")) &&
               sim_now_s() < json_integer_value(json_object_get(link, "expires_at"));
  snprintf(account, PAY_ID_LEN, "%s", json_string_value(json_object_get(link, "account")));
  snprintf(return_url, PAY_URL_LEN, "%s", json_string_value(json_object_get(link, "return_url")));
  json_object_set_new(link, "used", json_true());
  pay_rc rc = PAY_OK;
  if (!fresh) { /* Stripe sends the person to the refresh address instead */
    snprintf(err->code, sizeof err->code, "account_link_expired");
    rc = sim_fail(err, PAY_INVALID, "This account link has expired or was already used");
  } else if (!sim_replace(link_id, raw, link)) {
    snprintf(err->code, sizeof err->code, "account_link_expired");
    rc = sim_fail(err, PAY_INVALID, "This account link was already used");
  } else if (!finish_onboarding(account)) {
    rc = sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  }
  json_decref(link);
  free(raw);
  return rc;
}

/* What a transfer asks. */
typedef struct transfer_ask {
  const char *destination, *source_intent, *job_id, *transfer_id;
  int64_t cents;
} transfer_ask;

/* A new transfer as ask says, made under r: the destination's transfers capability must be
 * active and, with a source intent, its captured charge must fund it. */
static pay_rc new_transfer(keyed *r, const transfer_ask *ask, pay_error *err) {
  json_t *acct = sim_load_kind(ask->destination, "account", NULL);
  const char *cap = json_string_value(json_object_get(json_object_get(acct, "capabilities"), "transfers"));
  bool active = cap && !strcmp(cap, "active");
  json_decref(acct);
  json_t *pi = ask->source_intent ? sim_load_intent(ask->source_intent) : NULL;
  const char *pi_status = json_string_value(json_object_get(pi, "status"));
  const char *charge_id = json_string_value(json_object_get(json_object_get(pi, "latest_charge"), "id"));
  char charge[PAY_ID_LEN];
  snprintf(charge, sizeof charge, "%s", charge_id ? charge_id : "");
  bool funded = !ask->source_intent || (pi_status && !strcmp(pi_status, "succeeded") && charge[0] &&
                                        ask->cents <= json_integer_value(json_object_get(pi, "amount")));
  json_decref(pi);
  if (!acct) return keyed_refused(r, sim_fail(err, PAY_NOT_FOUND, "No such destination"), err);
  if (!active) {
    snprintf(err->code, sizeof err->code, "insufficient_capabilities_for_transfer");
    return keyed_refused(r,
                         sim_fail(err, PAY_INVALID,
                                  "Your destination account needs to have at least one of the following "
                                  "capabilities enabled: transfers, crypto_transfers, legacy_payments"),
                         err);
  }
  if (ask->cents < 1 || !funded)
    return keyed_refused(
        r,
        sim_fail(err, PAY_INVALID,
                 ask->cents < 1 ? "Invalid positive integer" : "The source_transaction cannot fund it"),
        err);
  char id[PAY_ID_LEN];
  sim_new_id("tr", id);
  json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s,s:s?,s:b,s:I,s:{s:s,s:s?,s:s?}}", "id", id, "object", "transfer",
                        "amount", (json_int_t)ask->cents, "amount_reversed", (json_int_t)0, "currency", "usd",
                        "destination", ask->destination, "source_transaction", charge[0] ? charge : NULL, "reversed", 0,
                        "created", (json_int_t)sim_now_s(), "metadata", "idempotency_key", r->key, "job_id",
                        ask->job_id, "transfer_id", ask->transfer_id);
  if (ask->job_id) json_object_set_new(o, "transfer_group", json_string(ask->job_id));
  pay_rc rc = keyed_insert(r, id, "transfer", o, err);
  json_decref(o);
  return rc;
}

static pay_rc sim_transfer(const char *destination, int64_t cents, const char *source_intent, const char *job_id,
                           const char *transfer_id, const char *idem_key, pay_transfer *out, pay_error *err) {
  char fp[PAY_ID_LEN * 4 + 64];
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "transfer|%s|%lld|%s|%s|%s", destination, (long long)cents,
                         source_intent ? source_intent : "", job_id ? job_id : "", transfer_id ? transfer_id : "");
  if (rc == PAY_OK && !r.made)
    rc = new_transfer(&r, &(transfer_ask){destination, source_intent, job_id, transfer_id, cents}, err);
  return pay_transfer_answer(r.made, rc, out);
}

static pay_rc sim_find_transfer(const char *destination, const char *idem_key, pay_transfer *out, pay_error *err) {
  json_t *o = keyed_kind("destination", destination, idem_key, "transfer", "No such transfer", err);
  return pay_transfer_answer(o, o ? PAY_OK : PAY_NOT_FOUND, out);
}

/* A connected account's balance is paid out to its bank PAYOUT_DELAY_S after each transfer
 * (Stripe's default US schedule: daily, two days after the funds arrive). */
#define PAYOUT_DELAY_S (2 * 24 * 3600)

/* What destination still holds at the processor: what the transfers of the last
 * PAYOUT_DELAY_S brought less what was reversed of them; -1 when it cannot be read. */
static int64_t account_balance(const char *destination) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t held = 0, since = sim_now_s() - PAYOUT_DELAY_S;
  char *pattern = arena_printf(&a, "%%\"destination\":\"%s\"%%", destination);
  if (db_query(&a, &r, "SELECT data FROM processor_sim_objects WHERE kind = 'transfer' AND data LIKE $1",
               DB_ARGS(DB_TEXT(pattern))) != DB_OK)
    held = -1;
  for (int i = 0; held >= 0 && i < r->rows; i++) {
    json_t *o = json_loads(db_text(r, i, 0), 0, NULL);
    const char *to = json_string_value(json_object_get(o, "destination"));
    if (to && !strcmp(to, destination) && json_integer_value(json_object_get(o, "created")) > since)
      held +=
          json_integer_value(json_object_get(o, "amount")) - json_integer_value(json_object_get(o, "amount_reversed"));
    json_decref(o);
  }
  arena_fini(&a);
  return held;
}

/* A reversal of cents (*asked) of transfer tr as it stands (keyed_change's make): its
 * amount_reversed grows with it; never past what is left of the transfer, nor what its
 * destination still holds. */
static pay_rc reversal_make(keyed *r, json_t *tr, const void *asked, char id[PAY_ID_LEN], json_t **rev,
                            pay_error *err) {
  int64_t cents = *(const int64_t *)asked;
  json_int_t amount = json_integer_value(json_object_get(tr, "amount"));
  json_int_t reversed = json_integer_value(json_object_get(tr, "amount_reversed"));
  int64_t balance = account_balance(json_string_value(json_object_get(tr, "destination")));
  if (cents < 1 || cents > amount - reversed) {
    char message[160];
    snprintf(message, sizeof message, "Amount requested ($%.2f) is greater than the unreversed amount ($%.2f)",
             (double)cents / 100, (double)(amount - reversed) / 100);
    return sim_fail(err, PAY_INVALID, message);
  }
  if (balance >= 0 && cents > balance) { /* paid out to the bank already */
    snprintf(err->code, sizeof err->code, "balance_insufficient");
    return sim_fail(err, PAY_INVALID,
                    "Insufficient funds in the destination account to reverse this transfer: its balance was paid "
                    "out to its bank.");
  }
  if (balance < 0) return sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
  sim_new_id("trr", id);
  *rev = json_pack("{s:s,s:s,s:I,s:s,s:s,s:I,s:{s:s}}", "id", id, "object", "transfer_reversal", "amount",
                   (json_int_t)cents, "currency", "usd", "transfer", json_string_value(json_object_get(tr, "id")),
                   "created", (json_int_t)sim_now_s(), "metadata", "idempotency_key", r->key);
  json_object_set_new(tr, "amount_reversed", json_integer(reversed + cents));
  json_object_set_new(tr, "reversed", json_boolean(reversed + cents >= amount));
  return PAY_OK;
}

static json_t *load_transfer(const char *transfer, char **raw) { return sim_load_kind(transfer, "transfer", raw); }

static pay_rc sim_reverse_transfer(const char *transfer, int64_t cents, const char *idem_key, pay_reversal *out,
                                   pay_error *err) {
  char fp[PAY_ID_LEN + 64];
  const keyed_change reversal = {transfer, "transfer_reversal", load_transfer, "No such transfer", reversal_make};
  keyed r;
  pay_rc rc = keyed_open(&r, fp, sizeof fp, idem_key, err, "reversal|%s|%lld", transfer, (long long)cents);
  if (rc == PAY_OK && !r.made) rc = keyed_retry(&r, &reversal, &cents, err);
  return pay_reversal_answer(r.made, rc, out);
}

static pay_rc sim_find_reversal(const char *transfer, const char *idem_key, pay_reversal *out, pay_error *err) {
  json_t *o = keyed_kind("transfer", transfer, idem_key, "transfer_reversal", "No such reversal", err);
  return pay_reversal_answer(o, o ? PAY_OK : PAY_NOT_FOUND, out);
}

const pay_ops paysim_ops = PAY_OPS(sim, "simulated", sim_open_link);
