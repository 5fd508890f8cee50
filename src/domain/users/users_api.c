/* Handlers for /users/me. */
#include "domain/users/users_api.h"
#include "domain/users/users.h"
#include "domain/users/users_store.h"
#include "http/rowjson.h"

const hs_rj_field USERS_PROFILE_JSON[] = {
    {"id", "id", RJ_STR},
    {"email", "email", RJ_STR},
    {"name", "name", RJ_STR},
    {"phone", "phone", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"lat", "lat", RJ_REAL},
    {"lng", "lng", RJ_REAL},
    {"isPremium", "is_premium", RJ_BOOL},
    {"premiumSince", "premium_since", RJ_ISO},
    {"seasonalAlertsEnabled", "seasonal_alerts_enabled", RJ_BOOL},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

static err_t reply_profile(hs_req *req) {
  db_res *r;
  err_t e = users_store_profile(&req->arena, req->auth.id, &r);
  if (e) return hs_found_or_fail(req, e, "User");
  jw *w = hs_jw(req, 512);
  hs_rj_object(w, hs_rj_bind(&req->arena, USERS_PROFILE_JSON, r), r, 0);
  return hs_ok_jw(req, w);
}

err_t api_users_me(hs_req *req) { return reply_profile(req); }

err_t api_users_update_me(hs_req *req) {
  err_t e = users_store_update_profile(req->auth.id, req->body);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "User");
  return e == ERR_OK ? reply_profile(req) : e;
}
