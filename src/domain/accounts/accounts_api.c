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
 * The export is one JSON document of the members every domain writes from the account's rows
 * (their export_in, domain/domain.h): every record in the shape its own route answers with
 * (Job, Quote, UserAddress, Message, Notification, ...), files as signed URLs. */
#include "domain/accounts/accounts_api.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/accounts/accounts_store.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/payments/payments.h"
#include "ext/storage.h"
#include <stdlib.h>
#include <string.h>

/* The one answer to each outcome of an erasure but ERASE_DONE. */
static err_t accounts_fail(hs_req *req, erase_outcome out) {
  switch (out) {
  case ERASE_BUSY:
    return hs_fail_code(req, ERR_CONFLICT, "account_busy",
                        "The account has a job that is accepted, on the way or in progress: finish or cancel it first");
  case ERASE_GONE: return hs_fail(req, ERR_UNAUTHORIZED, NULL); /* deleted meanwhile: its token with it */
  case ERASE_DONE:
  case ERASE_FAILED: break;
  }
  return ERR_INTERNAL;
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
  if (busy) return accounts_fail(req, ERASE_BUSY);
  if (!provider && (e = release_customer(req, acc.id)) != ERR_OK) return e;
  json_t *files = arena_json(&req->arena, json_array());
  erase_outcome out = accounts_store_erase(provider, acc.id, files);
  if (out != ERASE_DONE) return accounts_fail(req, out);
  size_t i;
  json_t *k;
  json_array_foreach(files, i, k) if (!storage_delete(json_string_value(k)))
      log_msg(LOG_WARN, "deleting stored file %s of a deleted account failed", json_string_value(k));
  log_json(LOG_INFO, "account deleted by its owner", json_pack("{s:s,s:s}", "role", req->auth.role, "id", acc.id));
  return hs_reply(req, 204, NULL);
}

/* ---- the export ---- */

/* The document's members in their order (UserExport, ProviderExport); a member a domain writes
 * that is not listed here follows them. */
static const char *const ORDER[] = {
    "account",
    "billing",
    "devicePushToken",
    "addresses",
    "jobs",
    "quotes",
    "payments",
    "reviews",
    "reports",
    "recurringRequests",
    "messages",
    "favorites",
    "proNotes",
    "notifications",
    "supportTickets",
    "seasonalAlerts",
    "payoutAccount",
    "transfers",
    "pendingEmailChange",
};

static bool ordered(const char *key) {
  for (size_t i = 0; i < ARRAY_LEN(ORDER); i++)
    if (!strcmp(ORDER[i], key)) return true;
  return false;
}

static void write_member(jw *w, const account_member *m) {
  jw_key(w, m->key);
  jw_raw_value(w, jw_text(&m->w), jw_len(&m->w));
}

err_t api_accounts_export(hs_req *req) {
  account_export x = {.a = &req->arena};
  err_t e = accounts_store_export(req->auth.role_bit == ROLE_PROVIDER, req->auth.id, &x);
  if (e == ERR_NOT_FOUND) return hs_fail(req, ERR_UNAUTHORIZED, NULL); /* deleted meanwhile */
  if (e != ERR_OK) return e;
  size_t size = 64;
  for (size_t i = 0; i < x.members.size; i++) size += jw_len(&x.members.items[i].w) + 32;
  jw *w = hs_jw(req, size);
  jw_obj(w);
  jw_key(w, "exportedAt");
  jw_iso(w, clock_now_ms());
  for (size_t i = 0; i < ARRAY_LEN(ORDER); i++) {
    const account_member *m = account_export_find(&x, ORDER[i]);
    if (m) write_member(w, m);
  }
  for (size_t i = 0; i < x.members.size; i++)
    if (!ordered(x.members.items[i].key)) write_member(w, &x.members.items[i]);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}
