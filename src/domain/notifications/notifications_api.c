/* Handlers of /users/me and /providers/me notifications, and the queue handler that sends
 * pushes: to PUSH_URL ({to, title, body, data}, Expo's message format) or, without PUSH_URL,
 * only logged. Each handler serves both roles: the account is the caller's, its kind comes
 * from the token's role. */
#include "domain/notifications/notifications_api.h"
#include "core/config.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/events/events.h"
#include "domain/notifications/notifications.h"
#include "domain/notifications/notifications_store.h"
#include "ext/fetch.h"
#include "ext/queue.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdio.h>
#include <stdlib.h>

const hs_rj_field NOTIFICATIONS_JSON[] = {
    {"id", "id", RJ_STR},
    {"title", "title", RJ_STR},
    {"body", "body", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"read", "is_read", RJ_BOOL},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

static const char *role_of(const hs_req *req) { return hs_role_name(req->auth.role_bit); }

err_t api_push_token(hs_req *req) {
  err_t e = notifications_store_set_push_token(role_of(req), req->auth.id, hs_body_str(req, "token"));
  return e ? e : hs_ok_pack(req, "{s:b}", "ok", 1);
}

err_t api_notifications_list(hs_req *req) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_begin(req, &NOTIFICATIONS_KEYSET, NULL, NOTIFICATIONS_CAP, &pg);
  if (!e)
    e = notifications_store_list(&req->arena, role_of(req), req->auth.id,
                                 json_is_true(json_object_get(req->query, "unread")), &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  if (e) return e;
  return hs_ok_rows(req, NOTIFICATIONS_JSON, r, 256);
}

err_t api_notifications_read(hs_req *req) {
  err_t e = notifications_store_mark_read(role_of(req), req->auth.id);
  return e ? e : hs_ok_pack(req, "{s:b}", "ok", 1);
}

/* Another account's notification does not exist for the caller (404). */
err_t api_notification_read(hs_req *req) {
  db_res *r;
  err_t e = notifications_store_mark_one_read(&req->arena, role_of(req), req->auth.id, hs_param(req, "id"), &r);
  if (e) return e;
  if (r->rows == 0) return hs_not_found(req, "Notification");
  jw *w = hs_jw(req, 256);
  hs_rj_object(w, hs_rj_bind(&req->arena, NOTIFICATIONS_JSON, r), r, 0);
  return hs_ok_jw(req, w);
}

/* The Banner JSON of the first row of r (icon, title, body). */
static json_t *banner_json(const db_res *r) {
  return json_pack("{s:o,s:s,s:s}", "icon", jx_str_or_null(db_text(r, 0, 0)), "title", db_text(r, 0, 1), "body",
                   db_text(r, 0, 2));
}

/* The banner is returned and removed by one statement, so two polls never both get it. */
err_t api_banner_poll(hs_req *req) {
  db_res *r;
  err_t e = notifications_store_take_banner(&req->arena, role_of(req), req->auth.id, &r);
  if (e) return e;
  if (r->rows == 0) return hs_ok(req, json_null());
  return hs_ok(req, banner_json(r));
}

/* The banner as a one-shot event kind (events.h): a stream that opens takes the pending banner
 * as the poll would, and one that delivered the banner's event clears it. */
static err_t banner_take(arena *a, const char *role, const char *account_id, int64_t upto, const char **data,
                         int64_t *event_pos) {
  db_res *r;
  *data = NULL, *event_pos = 0;
  err_t e = notifications_store_take_banner_upto(a, role, account_id, upto, &r);
  if (e || r->rows == 0) return e;
  json_t *b = banner_json(r);
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  *data = arena_strdup(a, text);
  free(text);
  *event_pos = db_int(r, 0, 3); /* 0 when NULL: unknown */
  return ERR_OK;
}

static void banner_delivered(const char *role, const char *account_id, int64_t event_id) {
  if (notifications_store_clear_banner(role, account_id, event_id) != ERR_OK)
    log_msg(LOG_WARN, "clearing a delivered banner failed: the next poll returns it again");
}

const events_oneshot NOTIFICATIONS_BANNER = {"banner", banner_take, banner_delivered};

/* Queue handler: one push message to the push service. */
bool notifications_send_push(json_t *msg, char err[256]) {
  if (!CFG.push_url) { /* never the device token or the text: they identify and speak for a person */
    json_t *job = json_object_get(json_object_get(msg, "data"), "jobId");
    log_json(LOG_INFO, "push skipped: PUSH_URL is not set", json_pack("{s:O?}", "jobId", job));
    return true;
  }
  long status = 0;
  fetch_rc rc = fetch_post_json(CFG.push_url, msg, 15000, &status);
  if (rc == FETCH_TIMEOUT || rc == FETCH_UNREACHABLE || status >= 500 || status == 429) {
    snprintf(err, 256, "push service: %s",
             rc == FETCH_TIMEOUT       ? "timed out"
             : rc == FETCH_UNREACHABLE ? "unreachable"
                                       : "server error");
    return false; /* retried with backoff */
  }
  if (status >= 400) log_msg(LOG_WARN, "push service refused a message (%ld)", status); /* not retried */
  return true;
}

/* ---- the account's part (domain/domain.h) ---- */

const account_part NOTIFICATIONS_EXPORT_PARTS[] = {{"notifications", NOTIFICATIONS_EXPORT_SQL, NOTIFICATIONS_JSON},
                                                   {0}};
