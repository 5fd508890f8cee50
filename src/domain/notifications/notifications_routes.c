/* /users/me and /providers/me notification routes. Each handler serves both roles: the
 * account is the caller's, its kind comes from the token's role. */
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/notifications/notifications.h"
#include "http/rowjson.h"

static const char *role_of(const hs_req *req) { return req->auth.role_bit == ROLE_PROVIDER ? "provider" : "user"; }

static err_t api_push_token(hs_req *req) {
  const char *sql = req->auth.role_bit == ROLE_PROVIDER ? "UPDATE providers SET push_token = $2 WHERE id = $1"
                                                        : "UPDATE users SET push_token = $2 WHERE id = $1";
  if (db_query(NULL, NULL, sql, DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(hs_body_str(req, "token")))) != DB_OK)
    return ERR_INTERNAL;
  return hs_ok(req, json_pack("{s:b}", "ok", 1));
}

static err_t api_notifications_list(hs_req *req) {
  db_res *r;
  if (db_query(&req->arena, &r,
               "SELECT id, title, body, job_id, is_read, created_at FROM notifications "
               "WHERE account_id = $1 AND role = $2 ORDER BY seq DESC LIMIT 50",
               DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(role_of(req)))) != DB_OK)
    return ERR_INTERNAL;
  static const hs_rj_field NOTIFICATION[] = {
      {"id", "id", RJ_STR},
      {"title", "title", RJ_STR},
      {"body", "body", RJ_STR},
      {"jobId", "job_id", RJ_STR},
      {"read", "is_read", RJ_BOOL},
      {"createdAt", "created_at", RJ_ISO},
      {0},
  };
  return hs_ok_rows(req, NOTIFICATION, r, 256);
}

static err_t api_notifications_read(hs_req *req) {
  if (db_query(NULL, NULL, "UPDATE notifications SET is_read = 1 WHERE account_id = $1 AND role = $2 AND is_read = 0",
               DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(role_of(req)))) != DB_OK)
    return ERR_INTERNAL;
  return hs_ok(req, json_pack("{s:b}", "ok", 1));
}

/* The banner is returned and removed by one statement, so two polls never both get it. */
static err_t api_banner_poll(hs_req *req) {
  db_res *r;
  if (db_query(&req->arena, &r, "DELETE FROM banners WHERE account_id = $1 AND role = $2 RETURNING icon, title, body",
               DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(role_of(req)))) != DB_OK)
    return ERR_INTERNAL;
  if (r->rows == 0) return hs_ok(req, json_null());
  return hs_ok(req, json_pack("{s:o,s:s,s:s}", "icon", jx_str_or_null(db_text(r, 0, 0)), "title", db_text(r, 0, 1),
                              "body", db_text(r, 0, 2)));
}

static const hs_field token_fields[] = {{"token", F_STRING, F_REQUIRED, LEN(1, 512)}, {0}};
static const hs_schema token_schema = {token_fields};

const hs_route NOTIFICATIONS_ROUTES[] = {
    {HS_POST, "/users/me/push-token", api_push_token, ROLE_USER, &token_schema,
     .summary = "Register the customer's device push token", .response = "Ok"},
    {HS_POST, "/providers/me/push-token", api_push_token, ROLE_PROVIDER, &token_schema,
     .summary = "Register the provider's device push token", .response = "Ok"},
    {HS_GET, "/users/me/notifications", api_notifications_list, ROLE_USER, .summary = "The last 50 notifications",
     .response = "Notification[]"},
    {HS_GET, "/providers/me/notifications", api_notifications_list, ROLE_PROVIDER,
     .summary = "The last 50 notifications", .response = "Notification[]"},
    {HS_POST, "/users/me/notifications/read", api_notifications_read, ROLE_USER, .summary = "Mark all read",
     .response = "Ok"},
    {HS_POST, "/providers/me/notifications/read", api_notifications_read, ROLE_PROVIDER, .summary = "Mark all read",
     .response = "Ok"},
    {HS_GET, "/users/me/notification", api_banner_poll, ROLE_USER,
     .summary = "The pending in-app banner, returned once", .response = "Banner?"},
    {HS_GET, "/providers/me/notification", api_banner_poll, ROLE_PROVIDER,
     .summary = "The pending in-app banner, returned once", .response = "Banner?"},
};
const size_t NOTIFICATIONS_ROUTES_LEN = ARRAY_LEN(NOTIFICATIONS_ROUTES);
