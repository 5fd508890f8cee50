/* Deleting and exporting the caller's own account.
 *
 * Deletion checks the password (through the login throttle, on the hashing pool), refuses
 * while a job of the account runs (409 account_busy), then releases what the processor holds
 * for a customer (card holds of jobs not completed, voided; the premium subscription set to
 * end with its period), erases the account in one transaction (accounts_store_erase) and, once
 * that committed, deletes its stored files: a file whose deletion fails is logged and left,
 * never a row pointing at a missing file. Nothing is erased when the processor cannot be
 * reached (503).
 *
 * The export is one JSON document written from the account's rows: every record in the
 * shape its own route answers with (Job, Quote, UserAddress, Message, Notification, ...),
 * files as signed URLs. */
#include "domain/accounts/accounts_api.h"
#include "core/clock.h"
#include "core/log.h"
#include "domain/accounts/accounts_store.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/messages/messages.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers.h"
#include "domain/shapes.h"
#include "domain/users/users.h"
#include "ext/storage.h"
#include <stdlib.h>
#include <string.h>

static err_t fail_busy(hs_req *req) {
  return hs_fail_code(req, ERR_CONFLICT, "account_busy",
                      "The account has a job that is accepted, on the way or in progress: finish or cancel it first");
}

/* A customer's holds on jobs that will not be completed are voided (queued and retried when the
 * processor does not answer now), and its premium subscription is set to end. */
static err_t release_customer(hs_req *req, const char *id) {
  db_res *held;
  err_t e = accounts_store_held_jobs(&req->arena, id, &held);
  for (int i = 0; !e && i < held->rows; i++) e = payments_void_job(db_text(held, i, 0));
  if (!e) e = payments_end_premium(id);
  return e == ERR_UNAVAILABLE ? hs_fail(req, e, "Payment processor unavailable") : e;
}

err_t api_accounts_delete(hs_req *req) {
  bool provider = req->auth.role_bit == ROLE_PROVIDER;
  account_card acc;
  err_t e = auth_check_own_password(req, hs_body_str(req, "password"), &acc);
  if (e != ERR_OK) return e;
  bool busy;
  if ((e = accounts_store_busy(provider, acc.id, &busy)) != ERR_OK) return e;
  if (busy) return fail_busy(req);
  if (!provider && (e = release_customer(req, acc.id)) != ERR_OK) return e;
  json_t *files = arena_json(&req->arena, json_array());
  e = accounts_store_erase(provider, acc.id, files);
  if (e == ERR_CONFLICT) return fail_busy(req);
  if (e == ERR_NOT_FOUND) return hs_fail(req, ERR_UNAUTHORIZED, NULL); /* deleted meanwhile */
  if (e != ERR_OK) return e;
  size_t i;
  json_t *k;
  json_array_foreach(files, i, k) if (!storage_delete(json_string_value(k)))
      log_msg(LOG_WARN, "deleting stored file %s of a deleted account failed", json_string_value(k));
  log_json(LOG_INFO, "account deleted by its owner", json_pack("{s:s,s:s}", "role", req->auth.role, "id", acc.id));
  return hs_reply(req, 204, NULL);
}

/* ---- the export ---- */

static const hs_rj_field PAYMENT[] = {
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
static const hs_rj_field REVIEW[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"rating", "rating", RJ_INT},
    {"comment", "comment", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
static const hs_rj_field REPORT[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"customerId", "customer_id", RJ_STR},
    {"description", "description", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
static const hs_rj_field RECURRING[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"customerId", "customer_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"dayOfWeek", "day_of_week", RJ_INT},
    {"timeSlot", "time_slot", RJ_STR},
    {"endDate", "end_date", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
static const hs_rj_field FAVORITE[] = {{"providerId", "provider_id", RJ_STR}, {"createdAt", "created_at", RJ_ISO}, {0}};
static const hs_rj_field NOTE[] = {
    {"providerId", "provider_id", RJ_STR},
    {"note", "note", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};
static const hs_rj_field TICKET[] = {
    {"id", "id", RJ_STR},
    {"subject", "subject", RJ_STR},
    {"body", "body", RJ_STR},
    {"category", "category", RJ_STR},
    {"status", "status", RJ_STR},
    {"notes", "notes", RJ_STR},
    {"resolvedAt", "resolved_at", RJ_ISO},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};
static const hs_rj_field ALERT[] = {{"service", "service", RJ_STR}, {"sentAt", "sent_at", RJ_ISO}, {0}};
static const hs_rj_field PAYOUT_ACCOUNT[] = {
    {"status", "status", RJ_STR},
    {"payoutsEnabled", "payouts_enabled", RJ_BOOL},
    {"requirements", "requirements", RJ_JSON},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};
static const hs_rj_field EMAIL_CHANGE[] = {{"email", "email", RJ_STR}, {"expiresAt", "expires_at", RJ_ISO}, {0}};
static const hs_rj_field BILLING[] = {
    {"processorCustomerId", "processor_customer_id", RJ_STR},
    {"processorPaymentMethodId", "processor_payment_method_id", RJ_STR},
    {"processorSubscriptionId", "processor_subscription_id", RJ_STR},
    {"premiumCancelAtPeriodEnd", "premium_cancel_at_period_end", RJ_BOOL},
    {0},
};

/* How each part is written: a plain array of field-table objects, unless special. */
static const struct {
  const char *key;
  const hs_rj_field *fields;
} PLAIN[] = {
    {"addresses", USERS_ADDRESS_JSON},
    {"quotes", SHAPE_QUOTE},
    {"payments", PAYMENT},
    {"reviews", REVIEW},
    {"reports", REPORT},
    {"recurringRequests", RECURRING},
    {"favorites", FAVORITE},
    {"proNotes", NOTE},
    {"notifications", NOTIFICATIONS_JSON},
    {"supportTickets", TICKET},
    {"seasonalAlerts", ALERT},
    {"transfers", PAYOUTS_TRANSFER_JSON},
};

/* account, devicePushToken and (customers) billing, from the account's row */
static err_t write_account(hs_req *req, jw *w, bool provider, const db_res *r) {
  jw_key(w, "account");
  if (provider) {
    json_t *p = arena_json(&req->arena, providers_profile_json(&req->arena, db_field(r, 0, "id")));
    if (!p) return ERR_INTERNAL;
    char *text = json_dumps(p, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!text) return ERR_INTERNAL;
    jw_raw_value(w, text, strlen(text));
    free(text);
  } else {
    hs_rj_object(w, hs_rj_bind(&req->arena, USERS_PROFILE_JSON, r), r, 0);
    jw_key(w, "billing");
    hs_rj_object(w, hs_rj_bind(&req->arena, BILLING, r), r, 0);
  }
  jw_key(w, "devicePushToken");
  jw_str(w, db_field(r, 0, "push_token"));
  return ERR_OK;
}

static void write_part(hs_req *req, jw *w, const account_part *part) {
  const db_res *r = part->rows;
  jw_key(w, part->key);
  bool email = !strcmp(part->key, "pendingEmailChange");
  if (email || !strcmp(part->key, "payoutAccount")) { /* one record, or null */
    if (r->rows)
      hs_rj_object(w, hs_rj_bind(&req->arena, email ? EMAIL_CHANGE : PAYOUT_ACCOUNT, r), r, 0);
    else
      jw_null(w);
    return;
  }
  if (!strcmp(part->key, "jobs")) {
    shape_jobs *b = shape_jobs_bind(&req->arena, r);
    jw_arr(w);
    for (int i = 0; i < r->rows; i++)
      if (shape_job_open(w, b, r, i)) jw_obj_end(w);
    jw_arr_end(w);
    return;
  }
  if (!strcmp(part->key, "messages")) { /* the Message JSON and the thread it is in */
    hs_rj *b = hs_rj_bind(&req->arena, MESSAGES_JSON, r);
    jw_arr(w);
    for (int i = 0; i < r->rows; i++) {
      jw_obj(w);
      messages_write_members(&req->arena, w, b, r, i);
      jw_key(w, "jobId");
      jw_str(w, db_field(r, i, "job_id"));
      jw_key(w, "providerId");
      jw_str(w, db_field(r, i, "provider_id"));
      jw_obj_end(w);
    }
    jw_arr_end(w);
    return;
  }
  for (size_t i = 0; i < sizeof PLAIN / sizeof *PLAIN; i++)
    if (!strcmp(part->key, PLAIN[i].key)) return hs_rj_array(w, &req->arena, PLAIN[i].fields, r);
}

err_t api_accounts_export(hs_req *req) {
  bool provider = req->auth.role_bit == ROLE_PROVIDER;
  account_part parts[ACCOUNTS_PARTS];
  int n;
  err_t e = accounts_store_records(&req->arena, provider, req->auth.id, parts, &n);
  if (e != ERR_OK) return e;
  if (parts[0].rows->rows == 0) return hs_fail(req, ERR_UNAUTHORIZED, NULL); /* deleted meanwhile */
  jw *w = hs_jw(req, 16 * 1024);
  jw_obj(w);
  jw_key(w, "exportedAt");
  jw_iso(w, clock_now_ms());
  if ((e = write_account(req, w, provider, parts[0].rows)) != ERR_OK) return e;
  for (int i = 1; i < n; i++) write_part(req, w, &parts[i]);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
