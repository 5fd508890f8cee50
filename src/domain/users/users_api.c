/* Handlers for /users/me. */
#include "domain/users/users.h"
#include "domain/users/users_api.h"
#include "domain/users/users_store.h"

static err_t reply_profile(hs_req *req) {
  json_t *profile;
  err_t e = users_store_profile(&req->arena, req->auth.id, &profile);
  if (e == ERR_NOT_FOUND) return hs_fail(req, ERR_NOT_FOUND, "User not found");
  return e == ERR_OK ? hs_ok(req, profile) : e;
}

err_t api_users_me(hs_req *req) { return reply_profile(req); }

err_t api_users_update_me(hs_req *req) {
  err_t e = users_store_set_location(req->auth.id, req->body);
  if (e == ERR_NOT_FOUND) return hs_fail(req, ERR_NOT_FOUND, "User not found");
  return e == ERR_OK ? reply_profile(req) : e;
}
