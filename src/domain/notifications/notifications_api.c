/* Handlers of /users/me and /providers/me notifications and push devices, and the queue handler
 * that sends pushes: to PUSH_URL ({to, title, body, data}, Expo's message format, one per device
 * of the account; a device whose ticket says DeviceNotRegistered is removed) or, without
 * PUSH_URL, only logged. Each handler serves both roles: the account is the caller's, its kind comes
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
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A device id: 1 to 100 of A-Z a-z 0-9 . _ : - (the schema checks the length). */
static bool device_id_ok(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n > PUSH_DEVICE_ID_MAX) return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("._:-", *s)) return false;
  return true;
}

#define DEVICE_ID_PROBLEM "deviceId: must be 1 to 100 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'"

/* The device is registered in the caller's session (its token's own id without one), so logging
 * that session out removes it. */
err_t api_push_token(hs_req *req) {
  const char *device = hs_body_str(req, "deviceId");
  if (!device) device = PUSH_DEFAULT_DEVICE;
  if (!device_id_ok(device)) return hs_fail_field(req, "deviceId", DEVICE_ID_PROBLEM);
  const char *session = req->auth.session_id ? req->auth.session_id : req->auth.token_id;
  err_t e = notifications_store_put_device(role_of(req), req->auth.id, device, hs_body_str(req, "token"),
                                           session ? session : "");
  return e ? e : hs_ok_pack(req, "{s:b}", "ok", 1);
}

err_t api_push_device_delete(hs_req *req) {
  const char *device = hs_param(req, "deviceId");
  if (!device_id_ok(device)) return hs_fail_field(req, "deviceId", DEVICE_ID_PROBLEM);
  bool found;
  err_t e = notifications_store_delete_device(role_of(req), req->auth.id, device, &found);
  if (e) return e;
  if (!found) return hs_not_found(req, "Device");
  return hs_ok_pack(req, "{s:b}", "ok", 1);
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

/* The Banner JSON of a banners row, as polled and as streamed. */
static const hs_rj_field BANNER[] = {
    {"icon", "icon", RJ_STR}, {"title", "title", RJ_STR}, {"body", "body", RJ_STR}, {0}};

/* The banner is returned and removed by one statement, so two polls never both get it. */
err_t api_banner_poll(hs_req *req) {
  db_res *r;
  err_t e = notifications_store_take_banner(&req->arena, role_of(req), req->auth.id, &r);
  if (e) return e;
  return r->rows ? hs_ok_row(req, BANNER, r) : hs_ok_pack(req, "n");
}

/* The banner as a one-shot event kind (events.h): a stream that opens takes the pending banner
 * as the poll would, and one that delivered the banner's event clears it. */
static err_t banner_take(arena *a, const char *role, const char *account_id, int64_t upto, const char **data,
                         int64_t *event_pos) {
  db_res *r;
  *data = NULL, *event_pos = 0;
  err_t e = notifications_store_take_banner_upto(a, role, account_id, upto, &r);
  if (e || r->rows == 0) return e;
  jw w;
  jw_init(&w, a, 256);
  hs_rj_object(&w, hs_rj_bind(a, BANNER, r), r, 0);
  *data = jw_text(&w);
  *event_pos = db_int(r, 0, 3); /* 0 when NULL: unknown */
  return ERR_OK;
}

static void banner_delivered(const char *role, const char *account_id, int64_t event_id) {
  if (notifications_store_clear_banner(role, account_id, event_id) != ERR_OK)
    log_msg(LOG_WARN, "clearing a delivered banner failed: the next poll returns it again");
}

const events_oneshot NOTIFICATIONS_BANNER = {"banner", banner_take, banner_delivered};

/* The messages of push job msg: one {to, title, body, data} per device of its account (an array),
 * or msg itself when it names its device (a job queued before devices). NULL: no device. */
static json_t *push_messages(arena *a, json_t *msg, err_t *e) {
  *e = ERR_OK;
  if (json_object_get(msg, "to")) return json_pack("[O]", msg);
  db_res *r;
  if ((*e = notifications_store_device_tokens(a, json_string_value(json_object_get(msg, "role")),
                                              json_string_value(json_object_get(msg, "account")), &r)) != ERR_OK)
    return NULL;
  if (r->rows == 0) return NULL;
  json_t *out = json_array();
  for (int i = 0; i < r->rows; i++)
    json_array_append_new(out,
                          json_pack("{s:s,s:O,s:O,s:O}", "to", db_text(r, i, 0), "title", json_object_get(msg, "title"),
                                    "body", json_object_get(msg, "body"), "data", json_object_get(msg, "data")));
  return out;
}

/* The push service's tickets (its answer's data: one ticket, or one per message in order): a
 * device whose ticket says DeviceNotRegistered is removed. */
static void read_tickets(json_t *answer, json_t *messages) {
  json_t *data = json_object_get(answer, "data");
  size_t n = json_array_size(messages);
  for (size_t i = 0; i < n; i++) {
    json_t *ticket = json_is_array(data) ? json_array_get(data, i) : i == 0 ? data : NULL;
    const char *status = json_string_value(json_object_get(ticket, "status"));
    const char *why = json_string_value(json_object_get(json_object_get(ticket, "details"), "error"));
    if (!status || strcmp(status, "error") || !why || strcmp(why, "DeviceNotRegistered")) continue;
    const char *token = json_string_value(json_object_get(json_array_get(messages, i), "to"));
    if (token && notifications_store_forget_token(token) != ERR_OK)
      log_msg(LOG_WARN, "push: a device the push service no longer knows could not be removed");
  }
}

/* Queue handler: one notification's push, to every device of its account at once (Expo takes an
 * array of messages; a single device gets a single message, as before devices). */
bool notifications_send_push(json_t *msg, char err[256]) {
  if (!CFG.push_url) { /* never the device token or the text: they identify and speak for a person */
    json_t *job = json_object_get(json_object_get(msg, "data"), "jobId");
    log_json(LOG_INFO, "push skipped: PUSH_URL is not set", json_pack("{s:O?}", "jobId", job));
    return true;
  }
  arena a;
  arena_init(&a);
  err_t e;
  json_t *messages = push_messages(&a, msg, &e);
  arena_fini(&a);
  if (e != ERR_OK) {
    snprintf(err, 256, "push: the devices could not be read");
    return false;
  }
  if (!messages) return true; /* its devices were removed since */
  long status = 0;
  json_t *answer = NULL;
  json_t *body = json_array_size(messages) == 1 ? json_array_get(messages, 0) : messages;
  fetch_rc rc = fetch_request("POST", CFG.push_url, NULL, body, NULL, 0, 15000, &status, &answer);
  if (rc == FETCH_OK) read_tickets(answer, messages);
  json_decref(answer);
  json_decref(messages);
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
