/* The simulated processor's disputes (chargebacks), as Stripe's test mode makes them.
 *
 * A charge paid by a method attached from pm_card_createDispute is disputed right after it
 * succeeds (reason fraudulent, the charged amount, evidence due in 7 days, the amount and
 * Stripe's 15.00 fee withdrawn from the platform); one from pm_card_createDisputeInquiry gets an
 * inquiry (warning_needs_response, nothing withdrawn). Evidence submitted moves it under review;
 * as in Stripe's test mode, an uncategorized_text of exactly "winning_evidence" then wins it
 * (an inquiry closes: warning_closed) and "losing_evidence" loses it. Each change sends the
 * event Stripe would send (charge.dispute.created, .funds_withdrawn, .updated,
 * .funds_reinstated, .closed) the way its webhooks arrive: a unit of background work
 * "payment_event" queued in the change's own transaction, which the payments domain applies as
 * it applies a verified webhook. Evidence files are file objects (purpose dispute_evidence),
 * their bytes not kept. */
#include "core/log.h"
#include "ext/paysim_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVIDENCE_DAYS 7
#define DISPUTE_FEE_CENTS 1500

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static bool closed(const char *status) {
  return is(status, "won") || is(status, "lost") || is(status, "warning_closed");
}

static bool inquiry(json_t *du) { return !strncmp(json_string_value(json_object_get(du, "status")), "warning_", 8); }

/* Stores du (new: inserted; else replacing its text old) with the events Stripe sends for the
 * change, at once. */
static bool store(json_t *du, const char *old, const char *const *types, int n) {
  json_t *events[4] = {0};
  for (int i = 0; i < n; i++) {
    char id[PAY_ID_LEN];
    sim_new_id("evt", id);
    events[i] = json_pack("{s:s,s:s,s:s,s:I,s:s,s:b,s:{s:O}}", "id", id, "object", "event", "type", types[i], "created",
                          (json_int_t)sim_now_s(), "api_version", "2024-06-20", "livemode", 0, "data", "object", du);
  }
  bool ok = sim_save_announced(du, "dispute", old, events, n);
  for (int i = 0; i < n; i++) json_decref(events[i]);
  return ok;
}

void sim_after_charge(json_t *pi) {
  json_t *pm = sim_load(json_string_value(json_object_get(pi, "payment_method")), NULL);
  const char *kind = json_string_value(json_object_get(pm, "dispute"));
  if (!kind) {
    json_decref(pm);
    return;
  }
  bool ask = is(kind, "inquiry");
  json_int_t amount = json_integer_value(json_object_get(pi, "amount_received"));
  if (!amount) amount = json_integer_value(json_object_get(pi, "amount"));
  char id[PAY_ID_LEN];
  sim_new_id("du", id);
  int64_t now = sim_now_s();
  json_t *du = json_pack(
      "{s:s,s:s,s:I,s:s,s:s?,s:s?,s:s,s:s,s:{},s:{s:I,s:b,s:b,s:i},s:b,s:b,s:I,s:{},s:[]}", "id", id, "object",
      "dispute", "amount", amount, "currency", "usd", "charge",
      json_string_value(json_object_get(json_object_get(pi, "latest_charge"), "id")), "payment_intent",
      json_string_value(json_object_get(pi, "id")), "reason", "fraudulent", "status",
      ask ? "warning_needs_response" : "needs_response", "evidence", "evidence_details", "due_by",
      (json_int_t)(now + EVIDENCE_DAYS * 24 * 3600), "has_evidence", 0, "past_due", 0, "submission_count", 0,
      "is_charge_refundable", 0, "livemode", 0, "created", (json_int_t)now, "metadata", "balance_transactions");
  if (!ask)
    json_array_append_new(json_object_get(du, "balance_transactions"),
                          json_pack("{s:I,s:I,s:s}", "amount", -amount, "fee", (json_int_t)DISPUTE_FEE_CENTS, "type",
                                    "adjustment"));
  static const char *const opened[] = {"charge.dispute.created", "charge.dispute.funds_withdrawn"};
  if (!store(du, NULL, opened, ask ? 1 : 2))
    log_msg(LOG_ERROR, "simulated processor: a dispute of %s could not be stored", json_string_value(json_object_get(pi, "id")));
  json_decref(du);
  json_decref(pm);
}

pay_rc sim_retrieve_dispute(const char *dispute, pay_dispute *out, pay_error *err) {
  json_t *du = sim_load_kind(dispute, "dispute", NULL);
  if (!du) return sim_fail(err, PAY_NOT_FOUND, "No such dispute");
  pay_dispute_from_json(du, out);
  json_decref(du);
  return PAY_OK;
}

pay_rc sim_upload_file(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                       pay_error *err) {
  (void)bytes;
  sim_new_id("file", id);
  const char *ext = strrchr(name, '.');
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:I}", "id", id, "object", "file", "purpose", "dispute_evidence",
                        "filename", name, "type", ext ? ext + 1 : type, "size", (json_int_t)len, "mimetype", type,
                        "created", (json_int_t)sim_now_s());
  bool ok = sim_save_announced(o, "file", NULL, NULL, 0);
  json_decref(o);
  if (!ok) id[0] = 0;
  return ok ? PAY_OK : sim_fail(err, PAY_UNAVAILABLE, "simulated processor storage failed");
}

/* Sets evidence field to value (a file: one of purpose dispute_evidence); false when the file
 * is unknown. */
static bool set_evidence(json_t *evidence, const char *field, const char *value, bool file) {
  if (!value || !*value) return true;
  if (file) {
    json_t *f = sim_load_kind(value, "file", NULL);
    json_decref(f);
    if (!f) return false;
  }
  json_object_set_new(evidence, field, json_string(value));
  return true;
}

/* The dispute as the submission leaves it; the events it sends into events (*n of them). */
static pay_rc submitted(json_t *du, const pay_evidence *ev, const char *idem_key, const char *events[4], int *n,
                        pay_error *err) {
  json_t *evidence = json_object_get(du, "evidence");
  bool files = set_evidence(evidence, "uncategorized_text", ev->text, false) &&
               set_evidence(evidence, "product_description", ev->product_description, false) &&
               set_evidence(evidence, "customer_name", ev->customer_name, false) &&
               set_evidence(evidence, "customer_email_address", ev->customer_email, false) &&
               set_evidence(evidence, "service_date", ev->service_date, false) &&
               set_evidence(evidence, "service_documentation", ev->service_documentation, true) &&
               set_evidence(evidence, "customer_communication", ev->customer_communication, true);
  if (!files) {
    snprintf(err->code, sizeof err->code, "resource_missing");
    return sim_fail(err, PAY_INVALID, "No such file upload");
  }
  bool ask = inquiry(du);
  json_t *details = json_object_get(du, "evidence_details");
  json_object_set_new(details, "has_evidence", json_true());
  json_object_set_new(details, "submission_count",
                      json_integer(json_integer_value(json_object_get(details, "submission_count")) + 1));
  json_object_set_new(json_object_get(du, "metadata"), "evidence_key", json_string(idem_key ? idem_key : ""));
  json_object_set_new(du, "status", json_string(ask ? "warning_under_review" : "under_review"));
  *n = 0;
  events[(*n)++] = "charge.dispute.updated";
  const char *text = ev->text ? ev->text : "";
  bool win = !strcmp(text, "winning_evidence"), lose = !strcmp(text, "losing_evidence");
  if (!win && !lose) return PAY_OK; /* a person at the bank decides, later */
  json_object_set_new(du, "status", json_string(ask ? "warning_closed" : win ? "won" : "lost"));
  if (win && !ask) {
    json_array_append_new(json_object_get(du, "balance_transactions"),
                          json_pack("{s:I,s:I,s:s}", "amount", json_integer_value(json_object_get(du, "amount")), "fee",
                                    (json_int_t)-DISPUTE_FEE_CENTS, "type", "adjustment"));
    events[(*n)++] = "charge.dispute.funds_reinstated";
  }
  events[(*n)++] = "charge.dispute.closed";
  return PAY_OK;
}

pay_rc sim_submit_evidence(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                           pay_error *err) {
  for (int tries = 0; tries < 5; tries++) {
    char *raw;
    json_t *du = sim_load_kind(dispute, "dispute", &raw);
    if (!du) return sim_fail(err, PAY_NOT_FOUND, "No such dispute");
    const char *status = json_string_value(json_object_get(du, "status"));
    const char *key = json_string_value(json_object_get(json_object_get(du, "metadata"), "evidence_key"));
    json_int_t due = json_integer_value(json_object_get(json_object_get(du, "evidence_details"), "due_by"));
    const char *events[4];
    int n = 0;
    pay_rc rc = PAY_OK;
    if (idem_key && is(key, idem_key)) { /* the same request again: its answer */
      rc = PAY_OK;
    } else if (closed(status) || is(status, "under_review") || is(status, "warning_under_review")) {
      snprintf(err->code, sizeof err->code, "dispute_already_submitted");
      rc = sim_fail(err, PAY_INVALID, "This dispute's evidence was already submitted, or the dispute is closed.");
    } else if (due && sim_now_s() > due) {
      snprintf(err->code, sizeof err->code, "dispute_past_due");
      rc = sim_fail(err, PAY_INVALID, "The deadline to submit evidence for this dispute has passed.");
    } else if ((rc = submitted(du, ev, idem_key, events, &n, err)) == PAY_OK && !store(du, raw, events, n)) {
      rc = PAY_UNAVAILABLE; /* changed meanwhile: read again */
    }
    if (rc == PAY_OK) pay_dispute_from_json(du, out);
    json_decref(du);
    free(raw);
    if (rc != PAY_UNAVAILABLE) return rc;
  }
  return sim_fail(err, PAY_UNAVAILABLE, "simulated processor is busy");
}
