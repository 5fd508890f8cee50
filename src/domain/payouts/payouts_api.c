/* The provider's payout account (POST and GET /providers/me/payout-account), its transfers
 * (GET /providers/me/payouts) and the simulated processor's onboarding page
 * (GET /payouts/onboarding/:linkId, development and test only).
 *
 * POST makes the provider's connected account once (under a key of the provider's, so two
 * concurrent first calls make one) and answers a fresh onboarding link each time; for an
 * account that exists it first asks the processor for its state, so a provider back from
 * onboarding sees it even before the processor's event arrived. The links' return and refresh
 * addresses are the app's ({APP_URL}/payouts/onboarding/return and /refresh), or the caller's
 * redirectUrl, as it is and with ?onboarding=refresh (domain/links.h). */
#include "domain/payouts/payouts_api.h"
#include "core/config.h"
#include "core/jw.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/links.h"
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_store.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdio.h>
#include <string.h>

#define LIST_MAX 500

static const char UNAVAILABLE[] = "Payment processor unavailable";

/* Answers the processor's failure rc: 503 when it did not answer, else 500 (logged: the
 * platform's processor settings refuse it). */
static err_t processor_failed(hs_req *req, pay_rc rc, const pay_error *pe, const char *what) {
  if (rc == PAY_UNAVAILABLE) return hs_fail(req, ERR_UNAVAILABLE, UNAVAILABLE);
  log_json(
      LOG_ERROR, "payment processor refused a payout account call",
      json_pack("{s:s,s:s,s:s,s:s}", "call", what, "providerId", req->auth.id, "code", pe->code, "error", pe->message));
  return hs_fail(req, ERR_INTERNAL, NULL);
}

static void account_json(jw *w, const char *status, bool payouts_enabled, const char *requirements) {
  jw_key_str(w, "status", status);
  jw_key(w, "payoutsEnabled");
  jw_bool(w, payouts_enabled);
  jw_key(w, "requirements");
  jw_json(w, requirements && requirements[0] == '[' ? requirements : "[]");
}

err_t api_payouts_account_get(hs_req *req) {
  account_row acct;
  bool found;
  err_t e = po_store_account(&req->arena, req->auth.id, &acct, &found);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 256);
  jw_obj(w);
  if (found)
    account_json(w, acct.status, acct.payouts_enabled, acct.requirements);
  else
    account_json(w, "none", false, "[]");
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

err_t api_payouts_account_create(hs_req *req) {
  const char *provider = req->auth.id, *email, *account_id;
  account_row acct;
  bool found;
  pay_account acc;
  pay_error pe;
  pay_rc rc;
  const char *redirect;
  err_t e = links_redirect(req, &redirect);
  if (e != ERR_OK) return e;
  e = po_store_provider_email(&req->arena, provider, &email);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Provider");
  if (e != ERR_OK || (e = po_store_account(&req->arena, provider, &acct, &found)) != ERR_OK) return e;
  if (!found) {
    const char *key = arena_printf(&req->arena, "payout-account-%s", provider);
    if ((rc = payments_create_account(email, provider, key, &acc, &pe)) != PAY_OK)
      return processor_failed(req, rc, &pe, "create account");
    e = po_store_insert_account(&req->arena, provider, acc.id, payouts_account_status(&acc), acc.payouts_enabled,
                                acc.requirements, &account_id);
  } else {
    account_id = acct.processor_account_id;
    rc = payments_retrieve_account(account_id, &acc, &pe);
    if (rc == PAY_UNAVAILABLE) return hs_fail(req, ERR_UNAVAILABLE, UNAVAILABLE);
    if (rc == PAY_OK) e = payouts_record_account(&req->arena, &acc);
  }
  if (e != ERR_OK) return e;
  char url[PAY_URL_LEN];
  /* a redirectUrl is where the provider comes back; an expired link comes back with onboarding=refresh */
  const char *refresh =
      links_app(&req->arena, redirect, "/payouts/onboarding/refresh", redirect ? "onboarding=refresh" : NULL);
  const char *back = links_app(&req->arena, redirect, "/payouts/onboarding/return", NULL);
  if ((rc = payments_account_link(account_id, refresh, back, url, &pe)) != PAY_OK)
    return processor_failed(req, rc, &pe, "account link");
  if ((e = po_store_account(&req->arena, provider, &acct, &found)) != ERR_OK) return e;
  jw *w = hs_jw(req, 512);
  jw_obj(w);
  jw_key_str(w, "onboardingUrl", url);
  jw_key_str(w, "status", found ? acct.status : "pending");
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

const hs_rj_field PAYOUTS_TRANSFER_JSON[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"kind", "kind", RJ_STR},
    {"amount", "amount_cents", RJ_MONEY},
    {"reversedAmount", "reversed_cents", RJ_MONEY},
    {"netted", "netted", RJ_MONEY},
    {"status", "status", RJ_STR},
    {"availableAt", "available_at", RJ_ISO},
    {"paidAt", "paid_at", RJ_ISO},
    {"failureReason", "failure_reason", RJ_STR},
    {0},
};

err_t api_payouts_list(hs_req *req) {
  db_res *list, *totals;
  db_page pg;
  err_t e = hs_page_rows(req, &TRANSFERS_KEYSET, LIST_MAX, po_store_list, req->auth.id, &pg, &list);
  if (!e) e = po_store_totals(&req->arena, req->auth.id, &totals);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 256 + (size_t)list->rows * 300);
  jw_obj(w);
  jw_key(w, "transfers");
  hs_rj_array(w, &req->arena, PAYOUTS_TRANSFER_JSON, list);
  static const char *const TOTALS[] = {"scheduled", "onHold", "paid", "reversed"};
  jw_key(w, "totals");
  jw_obj(w);
  for (int i = 0; i < 4; i++) {
    jw_key(w, TOTALS[i]);
    jw_money(w, totals->rows ? db_int(totals, 0, i) : 0);
  }
  int64_t owed = totals->rows ? db_int(totals, 0, 4) : 0;
  jw_key(w, "balance"); /* negative while the provider owes the platform */
  jw_money(w, owed > 0 ? -owed : 0);
  jw_obj_end(w);
  hs_page_jw_next(w, &pg);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* s with the characters HTML gives a meaning to escaped (arena). */
static const char *html(arena *a, const char *s) {
  size_t n = 0;
  for (const char *p = s; *p; p++) n += strchr("&<>\"'", *p) ? 6 : 1;
  char *out = arena_alloc(a, n + 1), *o = out;
  for (const char *p = s; *p; p++) {
    static const char *const as[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
    const char *hit = strchr("&<>\"'", *p);
    if (hit)
      o += sprintf(o, "%s", as[hit - "&<>\"'"]);
    else
      *o++ = *p;
  }
  *o = 0;
  return out;
}

err_t api_payouts_onboarding_page(hs_req *req) {
  if (strcmp(payments_mode(), "simulated")) return hs_fail(req, ERR_NOT_FOUND, NULL); /* Stripe hosts its own */
  char account[PAY_ID_LEN], back[PAY_URL_LEN];
  pay_error pe;
  pay_rc rc = payments_sim_open_link(hs_param(req, "linkId"), account, back, &pe);
  if (rc == PAY_NOT_FOUND) return hs_not_found(req, "Onboarding link");
  if (rc == PAY_INVALID)
    return hs_fail(req, ERR_CONFLICT, "This onboarding link has expired or was already used; ask for a new one");
  if (rc != PAY_OK) return hs_fail(req, ERR_UNAVAILABLE, UNAVAILABLE);
  err_t e = payouts_account_changed(account);
  if (e != ERR_OK) return e;
  const char *page = arena_printf(
      &req->arena,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Payouts set up</title></head><body>\n"
      "<h1>Payouts set up</h1>\n<p>Your payout account <strong>%s</strong> is enabled: what your jobs earn is sent "
      "to it once each job's 72-hour report window has passed.</p>\n<p><a href=\"%s\">Back to the app</a></p>\n"
      "<p><small>Simulated payment processor: no bank details were asked.</small></p>\n</body></html>\n",
      html(&req->arena, account), html(&req->arena, back));
  return hs_reply_file(req, -1, xstrdup(page), strlen(page), "text/html; charset=utf-8");
}

err_t api_payouts_app_return_page(hs_req *req) {
  return common_reply_page(req, "Payout setup finished",
                           "<p>You can close this page and go back to the app: it shows whether payouts are "
                           "enabled, or what the payment processor still needs.</p>\n",
                           NULL);
}

err_t api_payouts_app_refresh_page(hs_req *req) {
  return common_reply_page(req, "This setup link expired",
                           "<p>Payout setup links last a few minutes and work once. Go back to the app and open "
                           "payout setup again: it gives you a new link.</p>\n",
                           NULL);
}

/* ---- the account's part (domain/domain.h) ---- */

static const hs_rj_field PAYOUT_ACCOUNT[] = {
    {"status", "status", RJ_STR},
    {"payoutsEnabled", "payouts_enabled", RJ_BOOL},
    {"requirements", "requirements", RJ_JSON},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

const account_part PAYOUTS_EXPORT_PARTS[] = {
    {"payoutAccount", PO_EXPORT_SQL[0], PAYOUT_ACCOUNT, .one = true},
    {"transfers", PO_EXPORT_SQL[1], PAYOUTS_TRANSFER_JSON},
    {0},
};
