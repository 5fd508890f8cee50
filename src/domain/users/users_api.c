/* Handlers for /users/me. */
#include "domain/users/users_api.h"
#include "domain/shapes.h"
#include "domain/users/users.h"
#include "domain/users/users_store.h"
#include "http/rowjson.h"

const hs_rj_field USERS_PROFILE_JSON[] = {
    {"", "", RJ_INCLUDE, SHAPE_CUSTOMER},
    {"phone", "phone", RJ_STR},
    {"seasonalAlertsEnabled", "seasonal_alerts_enabled", RJ_BOOL},
    {0},
};

static err_t reply_profile(hs_req *req) {
  db_res *r;
  err_t e = users_store_profile(&req->arena, req->auth.id, &r);
  if (e) return hs_found_or_fail(req, e, "User");
  return hs_ok_row(req, USERS_PROFILE_JSON, r);
}

err_t api_users_me(hs_req *req) { return reply_profile(req); }

err_t api_users_update_me(hs_req *req) {
  err_t e = users_store_update_profile(req->auth.id, req->body);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "User");
  return e == ERR_OK ? reply_profile(req) : e;
}

/* ---- the account's part (domain/domain.h) ---- */

static const hs_rj_field BILLING[] = {
    {"processorCustomerId", "processor_customer_id", RJ_STR},
    {"processorPaymentMethodId", "processor_payment_method_id", RJ_STR},
    {"processorSubscriptionId", "processor_subscription_id", RJ_STR},
    {"premiumCancelAtPeriodEnd", "premium_cancel_at_period_end", RJ_BOOL},
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
static const hs_rj_field ALERT[] = {{"service", "service", RJ_STR}, {"sentAt", "sent_at", RJ_ISO}, {0}};

err_t users_export_in(db_conn *c, const account_ref *who, account_export *x) {
  if (who->provider) return ERR_OK;
  db_res *r[USERS_EXPORT_PARTS];
  err_t e = account_read_in(c, x->a, who, USERS_EXPORT_SQL, USERS_EXPORT_PARTS, r);
  if (e) return e;
  if (r[0]->rows == 0) return ERR_NOT_FOUND; /* deleted meanwhile */
  account_export_one(x, "account", USERS_PROFILE_JSON, r[0]);
  account_export_one(x, "billing", BILLING, r[0]);
  jw_str(account_export_member(x, "devicePushToken"), db_field(r[0], 0, "push_token"));
  account_export_rows(x, "addresses", USERS_ADDRESS_JSON, r[1]);
  account_export_rows(x, "favorites", FAVORITE, r[2]);
  account_export_rows(x, "proNotes", NOTE, r[3]);
  account_export_rows(x, "seasonalAlerts", ALERT, r[4]);
  return ERR_OK;
}
