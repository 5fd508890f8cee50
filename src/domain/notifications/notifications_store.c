/* Notifications' SQL: a notification row, its push job and its notification.created event are
 * written in one transaction (the push's sending is notifications_api.c's), the caller's
 * history, push devices and the banner, which a stream takes when it opens and clears once it
 * delivered the banner's event. */
#include "domain/notifications/notifications_store.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "domain/events/events.h"
#include "domain/notifications/notifications.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const device_sql = "SELECT 1 FROM push_devices WHERE account_id = $1 AND role = $2 LIMIT 1";

/* The notification.created event of notification id (n, made at now), on c. */
static db_rc announce(db_conn *c, const char *id, const notice *n, int64_t now, bool provider) {
  char at[25];
  clock_format_iso(now, at);
  json_t *o = json_pack("{s:s,s:s,s:s,s:s?,s:b,s:s}", "id", id, "title", n->title, "body", n->body, "jobId", n->job_id,
                        "read", 0, "createdAt", at);
  char *data = json_dumps(o, JSON_COMPACT);
  event_new ev = {.kind = "notification.created", .data = data};
  if (provider)
    ev.provider_id = n->account_id;
  else
    ev.user_id = n->account_id;
  db_rc rc = events_emit_in(c, &ev);
  free(data);
  json_decref(o);
  return rc;
}

/* Records n; with known, pushes when has_device says so instead of looking it up. The push names
 * the account: its devices are read when it is sent, so a device removed meanwhile gets none. */
static db_rc record(db_conn *c, const notice *n, bool known, bool has_device) {
  bool provider = !strcmp(n->role, "provider");
  char id[ID_LEN + 1];
  id_new(id);
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t now = clock_now_ms();
  db_rc rc = db_exec_later(c, NULL, NULL,
                           "INSERT INTO notifications (id, account_id, role, title, body, job_id, created_at, seq) "
                           "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                           DB_ARGS(DB_TEXT(id), DB_TEXT(n->account_id), DB_TEXT(n->role), DB_TEXT(n->title),
                                   DB_TEXT(n->body), DB_TEXT(n->job_id), DB_INT(now), DB_INT(clock_sequence())));
  if (rc == DB_OK) rc = announce(c, id, n, now, provider);
  if (rc == DB_OK && !known) {
    rc = db_exec(c, &a, &r, device_sql, DB_ARGS(DB_TEXT(n->account_id), DB_TEXT(n->role)));
    has_device = rc == DB_OK && r->rows;
  }
  if (rc == DB_OK && has_device) {
    json_t *push = json_pack("{s:s,s:s,s:s,s:s,s:{s:s?}}", "account", n->account_id, "role", n->role, "title", n->title,
                             "body", n->body, "data", "jobId", n->job_id);
    rc = queue_enqueue(c, "push", push);
    json_decref(push);
  }
  arena_fini(&a);
  return rc;
}

db_rc notify_in(db_conn *c, const notice *n) { return record(c, n, false, false); }

db_rc notify_in_known(db_conn *c, const notice *n, bool has_device) { return record(c, n, true, has_device); }

void notify(const char *account_id, const char *role, const char *title, const char *body, const char *job_id) {
  notice n = {account_id, role, title, body, job_id};
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(notify_in(c, &n));
  if (db_end(c, e) != ERR_OK) log_msg(LOG_ERROR, "recording a notification for %s failed", account_id);
}

db_rc notify_staff_in(db_conn *c, const char *role, const char *subject, const char *body) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, "SELECT email FROM staff WHERE role = $1 ORDER BY seq", DB_ARGS(DB_TEXT(role)));
  for (int i = 0; rc == DB_OK && i < r->rows; i++) rc = mail_enqueue(c, db_text(r, i, 0), subject, body);
  if (rc == DB_OK && r->rows == 0) rc = mail_enqueue(c, CFG.support_email, subject, body);
  arena_fini(&a);
  return rc;
}

db_rc notify_matching_providers_in(db_conn *c, const char *service, const char *zip, const char *title,
                                   const char *body, const char *job_id) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc =
      db_exec(c, &a, &r,
              "SELECT s.provider_id FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
              "WHERE s.service = $1 AND z.zip = $2",
              DB_ARGS(DB_TEXT(service), DB_TEXT(zip)));
  for (int i = 0; rc == DB_OK && i < r->rows; i++) {
    notice n = {db_text(r, i, 0), "provider", title, body, job_id};
    rc = notify_in(c, &n);
  }
  arena_fini(&a);
  return rc;
}

err_t notifications_store_put_device(const char *role, const char *id, const char *device_id, const char *token,
                                     const char *session_id) {
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL,
                          "DELETE FROM push_devices WHERE account_id = $1 AND role = $2 AND token = $3 "
                          "AND device_id <> $4",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(role), DB_TEXT(token), DB_TEXT(device_id)));
  if (!e)
    e = db_to_err(db_exec_later(
        c, NULL, NULL,
        "INSERT INTO push_devices (account_id, role, device_id, token, session_id, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (account_id, role, device_id) DO UPDATE SET "
        "token = excluded.token, session_id = excluded.session_id, updated_at = excluded.updated_at",
        DB_ARGS(DB_TEXT(id), DB_TEXT(role), DB_TEXT(device_id), DB_TEXT(token), DB_TEXT(session_id),
                DB_INT(clock_now_ms()))));
  return db_end(c, e);
}

err_t notifications_store_delete_device(const char *role, const char *id, const char *device_id, bool *found) {
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = db_to_err(db_query(&a, &r,
                               "DELETE FROM push_devices WHERE account_id = $1 AND role = $2 AND device_id = $3 "
                               "RETURNING device_id",
                               DB_ARGS(DB_TEXT(id), DB_TEXT(role), DB_TEXT(device_id))));
  *found = !e && r->rows > 0;
  arena_fini(&a);
  return e;
}

err_t notifications_store_device_tokens(arena *a, const char *role, const char *id, db_res **out) {
  return db_to_err(db_query(a, out,
                            "SELECT token FROM push_devices WHERE account_id = $1 AND role = $2 ORDER BY device_id",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(role))));
}

err_t notifications_store_forget_token(const char *token) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM push_devices WHERE token = $1", DB_ARGS(DB_TEXT(token))));
}

db_rc notifications_forget_session_devices_in(db_conn *c, const char *role, const char *account_id,
                                              const char *session_id) {
  return db_exec_later(c, NULL, NULL,
                       "DELETE FROM push_devices WHERE account_id = $1 AND role = $2 AND session_id = $3",
                       DB_ARGS(DB_TEXT(account_id), DB_TEXT(role), DB_TEXT(session_id)));
}

db_rc notifications_forget_account_devices_in(db_conn *c, const char *role, const char *account_id) {
  return db_exec_later(c, NULL, NULL, "DELETE FROM push_devices WHERE account_id = $1 AND role = $2",
                       DB_ARGS(DB_TEXT(account_id), DB_TEXT(role)));
}

const db_keyset NOTIFICATIONS_KEYSET = {"notifications", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};

err_t notifications_store_list(arena *a, const char *role, const char *id, bool unread, const db_page *pg,
                               db_res **out) {
  db_val args[DB_PAGE_ARGS(3)] = {DB_TEXT(id), DB_TEXT(role), DB_BOOL(unread)};
  return db_to_err(db_page_query(a, pg,
                                 "SELECT id, title, body, job_id, is_read, created_at, seq FROM notifications "
                                 "WHERE account_id = $1 AND role = $2 AND ($3 = 0 OR is_read = 0)",
                                 args, 3, out));
}

err_t notifications_store_mark_read(const char *role, const char *id) {
  return db_to_err(db_query(NULL, NULL,
                            "UPDATE notifications SET is_read = 1 WHERE account_id = $1 AND role = $2 AND is_read = 0",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(role))));
}

err_t notifications_store_mark_one_read(arena *a, const char *role, const char *id, const char *notification_id,
                                        db_res **out) {
  return db_to_err(db_query(a, out,
                            "UPDATE notifications SET is_read = 1 WHERE id = $1 AND account_id = $2 AND role = $3 "
                            "RETURNING id, title, body, job_id, is_read, created_at",
                            DB_ARGS(DB_TEXT(notification_id), DB_TEXT(id), DB_TEXT(role))));
}

/* The banner keeps the id of the event that announced it (a stream that delivers that event
 * clears it; a stream that opens compares that event's position, the outbox's, with its own). */
static db_rc banner_event_written(db_conn *c, const char *id_sql, const char *user_id, const char *provider_id) {
  char sql[192];
  snprintf(sql, sizeof sql, "UPDATE banners SET event_id = %s WHERE account_id = $1 AND role = $2", id_sql);
  return db_exec_later(c, NULL, NULL, sql,
                       DB_ARGS(DB_TEXT(user_id ? user_id : provider_id), DB_TEXT(user_id ? "user" : "provider")));
}

db_rc notifications_put_banner_in(db_conn *c, const char *account_id, const char *role, const char *icon,
                                  const char *title, const char *body) {
  bool provider = !strcmp(role, "provider");
  json_t *b = json_pack("{s:s?,s:s,s:s}", "icon", icon, "title", title, "body", body);
  char *data = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  event_new ev = {.kind = "banner",
                  .data = data,
                  .user_id = provider ? NULL : account_id,
                  .provider_id = provider ? account_id : NULL,
                  .written = banner_event_written};
  db_rc rc =
      db_exec(c, NULL, NULL,
              "INSERT INTO banners (account_id, role, icon, title, body, created_at) VALUES ($1, $2, $3, $4, $5, "
              "$6) ON CONFLICT (account_id, role) DO UPDATE SET icon = excluded.icon, title = excluded.title, "
              "body = excluded.body, created_at = excluded.created_at",
              DB_ARGS(DB_TEXT(account_id), DB_TEXT(role), DB_TEXT(icon), DB_TEXT(title), DB_TEXT(body),
                      DB_INT(clock_now_ms())));
  if (rc == DB_OK) rc = events_emit_in(c, &ev);
  free(data);
  return rc;
}

err_t notifications_store_take_banner(arena *a, const char *role, const char *id, db_res **out) {
  return db_to_err(db_query(a, out,
                            "DELETE FROM banners WHERE account_id = $1 AND role = $2 RETURNING icon, title, body",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(role))));
}

err_t notifications_store_take_banner_upto(arena *a, const char *role, const char *id, int64_t upto, db_res **out) {
  return db_to_err(db_query(a, out,
                            "DELETE FROM banners WHERE account_id = $1 AND role = $2 AND (event_id IS NULL OR NOT "
                            "EXISTS (SELECT 1 FROM events e WHERE e.id = banners.event_id AND (e.pos IS NULL OR "
                            "e.pos > $3))) RETURNING icon, title, body, "
                            "(SELECT pos FROM events e WHERE e.id = banners.event_id)",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(role), DB_INT(upto))));
}

err_t notifications_store_clear_banner(const char *role, const char *id, int64_t event_id) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM banners WHERE account_id = $1 AND role = $2 AND event_id = $3",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(role), DB_INT(event_id))));
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const NOTIFICATIONS_EXPORT_SQL[2] = {
    "SELECT * FROM notifications WHERE account_id = $1 AND role = 'user' ORDER BY seq",
    "SELECT * FROM notifications WHERE account_id = $1 AND role = 'provider' ORDER BY seq",
};

/* $1 = the account's id: [mode][provider]. */
static const char *const forget_sql[][2][4] = {
    [FORGET_ERASE] = {{"DELETE FROM notifications WHERE account_id = $1 AND role = 'user'",
                       "DELETE FROM banners WHERE account_id = $1 AND role = 'user'",
                       "DELETE FROM push_devices WHERE account_id = $1 AND role = 'user'"},
                      {"DELETE FROM notifications WHERE account_id = $1 AND role = 'provider'",
                       "DELETE FROM banners WHERE account_id = $1 AND role = 'provider'",
                       "DELETE FROM push_devices WHERE account_id = $1 AND role = 'provider'"}},
    /* other accounts' notifications about a deleted customer's jobs keep their text, not the link */
    [FORGET_DELETE] = {{"UPDATE notifications SET job_id = NULL WHERE job_id IN (SELECT id FROM jobs WHERE "
                        "customer_id = $1) AND NOT (account_id = $1 AND role = 'user')",
                        "DELETE FROM notifications WHERE account_id = $1 AND role = 'user'",
                        "DELETE FROM banners WHERE account_id = $1 AND role = 'user'",
                        "DELETE FROM push_devices WHERE account_id = $1 AND role = 'user'"},
                       {"DELETE FROM notifications WHERE account_id = $1 AND role = 'provider'",
                        "DELETE FROM banners WHERE account_id = $1 AND role = 'provider'",
                        "DELETE FROM push_devices WHERE account_id = $1 AND role = 'provider'"}},
};

err_t notifications_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  return account_exec_in(c, who, forget_sql[mode][who->provider], 4, NULL);
}
