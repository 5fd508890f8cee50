/* One atomic upsert per counted event: it restarts the window when the old one has passed
 * and returns the count and the window start, so two instances can never both admit request
 * max+1. The login throttle reads its two counters first (a plain SELECT, so refused attempts
 * write nothing) and counts only failures. */
#include "http/ratelimit.h"
#include "core/clock.h"
#include "core/log.h"
#include "db/db.h"
#include <stdio.h>
#include <string.h>

#define LOGIN_WINDOW_MS (15 * 60 * 1000)
static const hs_rate_limit login_per_account = {"login-fail", 10, LOGIN_WINDOW_MS};
static const hs_rate_limit login_per_address = {"login-fail-address", 50, LOGIN_WINDOW_MS};

/* Counts one event under key in a window of window_ms; the count and the window start. */
static err_t count_event(arena *a, const char *key, int64_t window_ms, int64_t now, int64_t *count,
                         int64_t *window_start) {
  db_res *r;
  if (db_query(a, &r,
               "INSERT INTO rate_limits (key, window_start, count) VALUES ($1, $2, 1) "
               "ON CONFLICT (key) DO UPDATE SET "
               "count = CASE WHEN rate_limits.window_start <= $3 THEN 1 ELSE rate_limits.count + 1 END, "
               "window_start = CASE WHEN rate_limits.window_start <= $3 THEN $2 ELSE rate_limits.window_start END "
               "RETURNING count, window_start",
               DB_ARGS(DB_TEXT(key), DB_INT(now), DB_INT(now - window_ms))) != DB_OK ||
      r->rows != 1)
    return ERR_INTERNAL;
  *count = db_int(r, 0, 0), *window_start = db_int(r, 0, 1);
  return ERR_OK;
}

static int seconds_left(int64_t window_start, int64_t window_ms, int64_t now) {
  int s = (int)((window_start + window_ms - now + 999) / 1000);
  return s < 1 ? 1 : s;
}

err_t hs_rate_limit_hit(const hs_rate_limit *rule, const char *client, int *retry_after_s) {
  char key[256];
  snprintf(key, sizeof key, "%s:%s", rule->name, client);
  int64_t now = clock_now_ms(), count, start;
  arena a;
  arena_init(&a);
  err_t e = count_event(&a, key, rule->window_ms, now, &count, &start);
  if (e == ERR_OK && count > rule->max) {
    *retry_after_s = seconds_left(start, rule->window_ms, now);
    e = ERR_RATE_LIMITED;
  }
  arena_fini(&a);
  return e;
}

err_t hs_rate_limit_prune(int64_t before_ms) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM rate_limits WHERE window_start < $1", DB_ARGS(DB_INT(before_ms))));
}

err_t hs_login_begin(hs_req *req, const char *account, hs_login_attempt *a) {
  a->account_key = arena_printf(&req->arena, "%s:%s:%s", login_per_account.name, account, req->ip);
  a->address_key = arena_printf(&req->arena, "%s:%s", login_per_address.name, req->ip);
  a->account_failures = false;
  int64_t now = clock_now_ms();
  db_res *r;
  if (db_query(&req->arena, &r, "SELECT key, count, window_start FROM rate_limits WHERE key IN ($1, $2)",
               DB_ARGS(DB_TEXT(a->account_key), DB_TEXT(a->address_key))) != DB_OK)
    return hs_fail(req, ERR_INTERNAL, NULL);
  int retry = 0;
  for (int i = 0; i < r->rows; i++) {
    bool per_account = !strcmp(db_text(r, i, 0), a->account_key);
    const hs_rate_limit *rule = per_account ? &login_per_account : &login_per_address;
    int64_t count = db_int(r, i, 1), start = db_int(r, i, 2);
    if (start <= now - rule->window_ms) continue; /* that window has passed */
    if (per_account) a->account_failures = count > 0;
    if (count >= rule->max && seconds_left(start, rule->window_ms, now) > retry)
      retry = seconds_left(start, rule->window_ms, now);
  }
  if (retry == 0) return ERR_OK;
  req->retry_after = retry;
  return hs_fail(req, ERR_RATE_LIMITED, NULL);
}

void hs_login_failed(const hs_login_attempt *a) {
  arena ar;
  arena_init(&ar);
  int64_t now = clock_now_ms(), count, start;
  if (count_event(&ar, a->account_key, login_per_account.window_ms, now, &count, &start) != ERR_OK ||
      count_event(&ar, a->address_key, login_per_address.window_ms, now, &count, &start) != ERR_OK)
    log_msg(LOG_ERROR, "a login failure could not be counted");
  arena_fini(&ar);
}

void hs_login_succeeded(const hs_login_attempt *a) {
  if (!a->account_failures) return; /* nothing to clear: no write on the common path */
  if (db_query(NULL, NULL, "DELETE FROM rate_limits WHERE key = $1", DB_ARGS(DB_TEXT(a->account_key))) != DB_OK)
    log_msg(LOG_ERROR, "a login throttle counter could not be cleared");
}
