/* users table access: the profile, the premium features (favorites, notes, spend, seasonal
 * alerts) and the seasonal-alert task's reads and its guarded record of each alert sent. */
#include "domain/users/users_store.h"
#include "core/clock.h"
#include "core/jsonx.h"
#include "domain/notifications/notifications.h"
#include "ext/queue.h"
#include <stdio.h>

err_t users_store_profile(arena *a, const char *id, db_res **out) {
  return db_query_row(a, out,
                      "SELECT id, email, name, phone, address, zip, lat, lng, is_premium, premium_since, "
                      "seasonal_alerts_enabled, created_at FROM users WHERE id = $1 AND deleted_at IS NULL",
                      DB_ARGS(DB_TEXT(id)));
}

err_t users_store_update_profile(const char *id, json_t *patch) {
  json_t *name = json_object_get(patch, "name"), *phone = json_object_get(patch, "phone");
  json_t *lat = json_object_get(patch, "lat"), *lng = json_object_get(patch, "lng");
  const char *phone_text = json_string_value(phone);
  /* CASE keeps what the patch does not name; an empty phone clears it */
  int64_t changed;
  db_rc rc =
      db_changes_count(&changed,
                       "UPDATE users SET name = CASE WHEN $2 = 1 THEN $3 ELSE name END, "
                       "phone = CASE WHEN $4 = 1 THEN $5 ELSE phone END, "
                       "lat = CASE WHEN $6 = 1 THEN $7 ELSE lat END, lng = CASE WHEN $8 = 1 THEN $9 ELSE lng END, "
                       "updated_at = $10 WHERE id = $1 AND deleted_at IS NULL",
                       DB_ARGS(DB_TEXT(id), DB_BOOL(name), DB_TEXT(json_string_value(name)), DB_BOOL(phone),
                               phone_text && *phone_text ? DB_TEXT(phone_text) : DB_NULL, DB_BOOL(lat),
                               lat ? DB_REAL(json_number_value(lat)) : DB_NULL, DB_BOOL(lng),
                               lng ? DB_REAL(json_number_value(lng)) : DB_NULL, DB_INT(clock_now_ms())));
  return rc != DB_OK ? ERR_INTERNAL : changed == 0 ? ERR_NOT_FOUND : ERR_OK;
}

/* The customer's row lock: concurrent transactions about the customer run one after another
 * (on SQLite, the database's write lock). */
db_rc users_store_lock_in(db_conn *c, const char *id) {
  return db_exec(c, NULL, NULL, "UPDATE users SET updated_at = updated_at WHERE id = $1", DB_ARGS(DB_TEXT(id)));
}

/* ---- premium features ---- */

/* Runs a write; *changes receives the row count. */
static err_t change(const char *sql, const db_val *params, int n, int64_t *changes) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, sql, params, n);
  if (changes) *changes = rc == DB_OK ? r->changes : 0;
  arena_fini(&a);
  return db_to_err(rc);
}

static err_t provider_exists(const char *provider_id) {
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = db_to_err(db_query(&a, &r, "SELECT 1 FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(provider_id))));
  if (e == ERR_OK && r->rows == 0) e = ERR_NOT_FOUND;
  arena_fini(&a);
  return e;
}

err_t users_store_premium(const char *id, bool *premium) {
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e =
      db_to_err(db_query(&a, &r, "SELECT CASE WHEN " USERS_HAS_PREMIUM " THEN 1 ELSE 0 END FROM users WHERE id = $1",
                         DB_ARGS(DB_TEXT(id))));
  if (e == ERR_OK && r->rows == 0) e = ERR_NOT_FOUND;
  if (e == ERR_OK) *premium = db_int(r, 0, 0) == 1;
  arena_fini(&a);
  return e;
}

const db_keyset FAVORITES_KEYSET = {"favorites", {{"f.seq", "seq", 'i', true}, {"f.provider_id", "id", 's', true}}};

err_t users_store_favorites(arena *a, const char *id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT p.id, p.name, p.company_name, p.logo_url, p.headshots, p.services, f.seq "
                      "FROM favorites f JOIN providers p ON p.id = f.provider_id WHERE f.user_id = $1",
                      id, out);
}

err_t users_store_add_favorite(const char *id, const char *provider_id) {
  int64_t changes;
  err_t e =
      change("INSERT INTO favorites (user_id, provider_id, created_at, seq) "
             "SELECT $1, id, $3, $4 FROM providers WHERE id = $2 ON CONFLICT (user_id, provider_id) DO NOTHING",
             DB_ARGS(DB_TEXT(id), DB_TEXT(provider_id), DB_INT(clock_now_ms()), DB_INT(clock_sequence())), &changes);
  if (e == ERR_CONFLICT) return ERR_NOT_FOUND; /* the provider was deleted meanwhile */
  return e == ERR_OK && changes == 0 ? provider_exists(provider_id) : e;
}

err_t users_store_remove_favorite(const char *id, const char *provider_id) {
  return change("DELETE FROM favorites WHERE user_id = $1 AND provider_id = $2",
                DB_ARGS(DB_TEXT(id), DB_TEXT(provider_id)), NULL);
}

err_t users_store_pro_notes(arena *a, const char *id, db_res **out) {
  return db_to_err(
      db_query(a, out, "SELECT provider_id, note FROM pro_notes WHERE user_id = $1 ORDER BY created_at, provider_id",
               DB_ARGS(DB_TEXT(id))));
}

err_t users_store_set_pro_note(const char *id, const char *provider_id, const char *note) {
  int64_t changes;
  err_t e =
      change("INSERT INTO pro_notes (user_id, provider_id, note, created_at, updated_at) "
             "SELECT $1, id, $3, $4, $4 FROM providers WHERE id = $2 "
             "ON CONFLICT (user_id, provider_id) DO UPDATE SET note = excluded.note, updated_at = excluded.updated_at",
             DB_ARGS(DB_TEXT(id), DB_TEXT(provider_id), DB_TEXT(note), DB_INT(clock_now_ms())), &changes);
  if (e == ERR_CONFLICT) return ERR_NOT_FOUND;
  return e == ERR_OK && changes == 0 ? ERR_NOT_FOUND : e;
}

err_t users_store_delete_pro_note(const char *id, const char *provider_id) {
  return change("DELETE FROM pro_notes WHERE user_id = $1 AND provider_id = $2",
                DB_ARGS(DB_TEXT(id), DB_TEXT(provider_id)), NULL);
}

/* What was refunded is not spent; fully refunded payments (REFUNDED) are left out. SQLite reads
 * the user's payments by their index: left to plan without statistics, it searched
 * payments_holds for every PAID payment there is. */
#define SPEND_SQL(payments)                                                                                            \
  "SELECT p.kind, p.job_id, p.amount_cents - p.refunded_cents AS amount_cents, "                                       \
  "COALESCE(p.paid_at, p.updated_at) AS paid_at, j.service, j.provider_id, "                                           \
  "pr.name AS provider_name, pr.company_name FROM " payments " JOIN jobs j ON j.id = p.job_id "                        \
  "LEFT JOIN providers pr ON pr.id = j.provider_id WHERE p.user_id = $1 AND p.status = 'PAID' "                        \
  "AND p.kind IN ('job', 'tip') "                                                                                      \
  "AND COALESCE(p.paid_at, p.updated_at) >= $2 ORDER BY COALESCE(p.paid_at, p.updated_at), p.id"

err_t users_store_spend(arena *a, const char *id, int64_t since, db_res **out) {
  return db_to_err(db_query(a, out,
                            db_engine_get() == DB_SQLITE ? SPEND_SQL("payments p INDEXED BY payments_user")
                                                         : SPEND_SQL("payments p"),
                            DB_ARGS(DB_TEXT(id), DB_INT(since))));
}

users_outcome users_store_set_seasonal_alerts(const char *id, bool enabled) {
  int64_t changes;
  /* one statement: the premium check and the change cannot be separated by a cancellation */
  err_t e = change("UPDATE users SET seasonal_alerts_enabled = $2, updated_at = $3 "
                   "WHERE id = $1 AND ($2 = 0 OR " USERS_HAS_PREMIUM ")",
                   DB_ARGS(DB_TEXT(id), DB_BOOL(enabled), DB_INT(clock_now_ms())), &changes);
  if (e == ERR_OK && !changes) { /* no customer, or no premium */
    bool premium;
    e = users_store_premium(id, &premium);
    if (e == ERR_OK) return USERS_NEEDS_PREMIUM;
  }
  return e == ERR_OK ? USERS_CHANGED : e == ERR_NOT_FOUND ? USERS_NO_USER : USERS_FAILED;
}

/* ---- seasonal alerts ---- */

err_t users_store_alert_zips(arena *a, db_res **out) {
  return db_to_err(db_query(
      a, out, "SELECT DISTINCT zip FROM users WHERE seasonal_alerts_enabled = 1 AND " USERS_HAS_PREMIUM " ORDER BY zip",
      DB_NOARGS));
}

err_t users_store_alert_customers(arena *a, const char *zip, db_res **out) {
  return db_to_err(db_query(a, out,
                            "SELECT id FROM users WHERE zip = $1 AND seasonal_alerts_enabled = 1 AND " USERS_HAS_PREMIUM
                            " ORDER BY id",
                            DB_ARGS(DB_TEXT(zip))));
}

err_t users_store_send_alert(const char *id, const char *service, int64_t now, int64_t cutoff, const char *title,
                             const char *body, bool *sent) {
  arena a;
  arena_init(&a);
  db_res *r;
  *sent = false;
  db_conn *c;
  err_t e = db_begin_exec(&c, &a, &r,
                          "INSERT INTO seasonal_alerts (user_id, service, sent_at) VALUES ($1, $2, $3) "
                          "ON CONFLICT (user_id, service) DO UPDATE SET sent_at = excluded.sent_at "
                          "WHERE seasonal_alerts.sent_at <= $4",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(service), DB_INT(now), DB_INT(cutoff)));
  if (!e && r->changes > 0) {
    notice n = {id, "user", title, body, NULL};
    e = db_to_err(notify_in(c, &n));
    *sent = !e;
  }
  e = db_end(c, e);
  if (e) *sent = false;
  arena_fini(&a);
  return e;
}

err_t users_store_queue_alert_zips(const db_res *zips, int64_t slot) {
  db_conn *c;
  err_t e = db_begin(&c);
  for (int i = 0; !e && i < zips->rows; i++) {
    char key[64];
    snprintf(key, sizeof key, "seasonal_zip@%lld:%s", (long long)slot, db_text(zips, i, 0));
    json_t *unit = json_pack("{s:s,s:I}", "zip", db_text(zips, i, 0), "slot", (json_int_t)slot);
    e = db_to_err(queue_enqueue_once(c, "seasonal_zip", key, unit, NULL));
    json_decref(unit);
  }
  return db_end(c, e);
}

/* ---- the account's part (domain/domain.h) ---- */

/* $1 = the customer's id, $2 = now: [0] a customer's, [1] a provider's. */
const char *const USERS_EXPORT_SQL[USERS_EXPORT_PARTS][2] = {
    /* devicePushToken: the token of the device registered last */
    {"SELECT u.*, (SELECT d.token FROM push_devices d WHERE d.account_id = u.id AND d.role = 'user' "
     "ORDER BY d.updated_at DESC, d.device_id LIMIT 1) AS push_token FROM users u WHERE u.id = $1 "
     "AND u.deleted_at IS NULL",
     NULL},
    {"SELECT * FROM user_addresses WHERE user_id = $1 ORDER BY created_at, id", NULL},
    {"SELECT provider_id, created_at FROM favorites WHERE user_id = $1 ORDER BY seq", NULL},
    {"SELECT provider_id, note, created_at, updated_at FROM pro_notes WHERE user_id = $1 ORDER BY created_at, "
     "provider_id",
     NULL},
    {"SELECT service, sent_at FROM seasonal_alerts WHERE user_id = $1 ORDER BY service", NULL},
};

/* $1 = the account's id: [mode][provider]. A provider's favorites and notes go at both: it can
 * be booked no more. */
static const char *const forget_sql[][2][4] = {
    [FORGET_ERASE] = {{"DELETE FROM favorites WHERE user_id = $1", "DELETE FROM pro_notes WHERE user_id = $1",
                       "DELETE FROM seasonal_alerts WHERE user_id = $1",
                       "UPDATE users SET name = '" ACCOUNT_DELETED_NAME "', phone = NULL, address = '', zip = '', "
                       "lat = NULL, lng = NULL, seasonal_alerts_enabled = 0 WHERE id = $1"},
                      {"DELETE FROM favorites WHERE provider_id = $1", "DELETE FROM pro_notes WHERE provider_id = $1"}},
    [FORGET_DELETE] = {{"DELETE FROM favorites WHERE user_id = $1", "DELETE FROM pro_notes WHERE user_id = $1",
                        "DELETE FROM seasonal_alerts WHERE user_id = $1"},
                       {"DELETE FROM favorites WHERE provider_id = $1",
                        "DELETE FROM pro_notes WHERE provider_id = $1"}},
};

err_t users_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  return account_exec_in(c, who, forget_sql[mode][who->provider], 4, NULL);
}
