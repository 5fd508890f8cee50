/* Handlers for /users/me. */
#include "domain/users/users_api.h"
#include "core/gencache.h"
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

/* Profiles as GET /users/me last answered them, by account, on SQLite until a commit changes
 * the users' rows or a second passes (core/gencache.h, db_watch_generation): the same answer
 * without a read. */
static gencache *profiles;
#define PROFILE_SLOTS 4096

void users_profiles_init(void) {
  db_watch_table("users");
  profiles = gencache_new(PROFILE_SLOTS, DB_WATCH_TTL_MS);
}

void users_profiles_stop(void) {
  gencache_free(profiles);
  profiles = NULL;
}

static err_t reply_profile(hs_req *req) {
  db_res *r;
  err_t e = users_store_profile(&req->arena, req->auth.id, &r);
  if (e) return hs_found_or_fail(req, e, "User");
  return hs_ok_row(req, USERS_PROFILE_JSON, r);
}

err_t api_users_me(hs_req *req) {
  uint64_t gen = profiles ? db_watch_generation() : 0; /* before the read, which it labels */
  jw *w = hs_jw(req, 512);
  if (gencache_get(profiles, req->auth.id, gen, w)) return hs_ok_jw(req, w);
  err_t e = reply_profile(req);
  if (e == ERR_OK && req->res_json) gencache_put(profiles, req->auth.id, gen, req->res_json, req->res_json_len);
  return e;
}

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
