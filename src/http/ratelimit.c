/* One atomic upsert per counted event: it restarts the window when the old one has passed
 * and returns the count and the window start, so two instances can never both admit request
 * max+1. The login throttle reads its three counters first (a plain SELECT, so attempts refused
 * by a full counter write nothing), then counts the attempt in all three with one upsert before
 * the password is hashed, and takes it back unless it failed: failures and attempts still being
 * checked are what a counter holds, so parallel attempts cannot pass its maximum. */
#include "http/ratelimit.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include "http/forwarded.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Refusals per rule, for metrics; touched only when a request is refused. */
static struct {
  const char *name;
  long n;
} refusals[32];
static pthread_mutex_t refusals_mu = PTHREAD_MUTEX_INITIALIZER;

static void count_refusal(const char *name) {
  pthread_mutex_lock(&refusals_mu);
  size_t i = 0;
  while (i < ARRAY_LEN(refusals) && refusals[i].name && strcmp(refusals[i].name, name)) i++;
  if (i < ARRAY_LEN(refusals)) refusals[i].name = name, refusals[i].n++;
  pthread_mutex_unlock(&refusals_mu);
}

void hs_rate_limit_refusals(void (*fn)(void *ctx, const char *rule, long n), void *ctx) {
  pthread_mutex_lock(&refusals_mu);
  for (size_t i = 0; i < ARRAY_LEN(refusals) && refusals[i].name; i++) fn(ctx, refusals[i].name, refusals[i].n);
  pthread_mutex_unlock(&refusals_mu);
}

#define LOGIN_WINDOW_MS (15 * 60 * 1000)
#define LOCK_WINDOW_MS (60 * 60 * 1000)
static const hs_rate_limit login_per_pair = {"login-fail", 10, LOGIN_WINDOW_MS};
static const hs_rate_limit login_per_address = {"login-fail-address", 50, LOGIN_WINDOW_MS};
static const hs_rate_limit login_per_account[] = {
    [HS_LOGIN_ACCOUNT] = {"login-fail-account", 10, LOGIN_WINDOW_MS},
    [HS_LOGIN_PRIVILEGED] = {"login-lock-staff", 20, LOCK_WINDOW_MS},
};

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
    count_refusal(rule->name);
  }
  arena_fini(&a);
  return e;
}

err_t hs_rate_limit_prune(int64_t before_ms) {
  return db_to_err(db_query(NULL, NULL, "DELETE FROM rate_limits WHERE window_start < $1", DB_ARGS(DB_INT(before_ms))));
}

const char *hs_rate_client(hs_req *req) {
  char group[HS_ADDRESS_GROUP_LEN];
  hs_address_group(req->ip, group);
  return arena_strdup(&req->arena, group);
}

/* The rules of an attempt's three counters, in the order of its keys (and of every statement
 * that locks their rows, so two attempts can never wait on each other in a circle). */
static void login_rules(hs_login_kind kind, const hs_rate_limit *rules[3]) {
  rules[0] = &login_per_pair, rules[1] = &login_per_address, rules[2] = &login_per_account[kind];
}

/* Over rows (key, count, window_start) of an attempt's counters: the seconds until the longest
 * window whose count passed its rule's maximum (over: count > max; else count >= max) ends, 0
 * when none did; the rule that refused in *refusing. Windows that have passed are ignored. */
static int login_retry(const hs_login_attempt *a, const db_res *r, bool over, int64_t now,
                       const hs_rate_limit **refusing) {
  const hs_rate_limit *rules[3];
  login_rules(a->kind, rules);
  int retry = 0;
  for (int i = 0; i < r->rows; i++)
    for (int k = 0; k < 3; k++) {
      if (strcmp(db_text(r, i, 0), a->keys[k])) continue;
      int64_t count = db_int(r, i, 1), start = db_int(r, i, 2);
      if (start <= now - rules[k]->window_ms || count < rules[k]->max + (over ? 1 : 0)) continue;
      int left = seconds_left(start, rules[k]->window_ms, now);
      if (left > retry) retry = left, *refusing = rules[k];
    }
  return retry;
}

/* Takes an attempt back from its counters (only from the windows it counted itself in),
 * clearing the (account, client) counter when clear_pair. */
static void login_take_back(const hs_login_attempt *a, bool clear_pair) {
  if (db_query(NULL, NULL,
               "INSERT INTO rate_limits (key, window_start, count) VALUES ($1, $4, 0), ($2, $5, 0), ($3, $6, 0) "
               "ON CONFLICT (key) DO UPDATE SET count = CASE "
               "WHEN rate_limits.window_start <> excluded.window_start THEN rate_limits.count "
               "WHEN rate_limits.key = $1 AND $7 = 1 THEN 0 "
               "WHEN rate_limits.count > 0 THEN rate_limits.count - 1 ELSE 0 END",
               DB_ARGS(DB_TEXT(a->keys[0]), DB_TEXT(a->keys[1]), DB_TEXT(a->keys[2]), DB_INT(a->starts[0]),
                       DB_INT(a->starts[1]), DB_INT(a->starts[2]), DB_INT(clear_pair ? 1 : 0))) != DB_OK)
    log_msg(LOG_ERROR, "a login attempt could not be taken back from the login throttle");
}

static err_t login_refuse(hs_req *req, const hs_rate_limit *rule, int retry) {
  count_refusal(rule->name);
  req->retry_after = retry;
  return hs_fail(req, ERR_RATE_LIMITED, NULL);
}

err_t hs_login_begin(hs_req *req, const char *account, hs_login_kind kind, hs_login_attempt *a) {
  const char *client = hs_rate_client(req);
  const hs_rate_limit *rules[3], *refusing = NULL;
  login_rules(kind, rules);
  *a = (hs_login_attempt){.kind = kind};
  a->keys[0] = arena_printf(&req->arena, "%s:%s:%s", rules[0]->name, account, client);
  a->keys[1] = arena_printf(&req->arena, "%s:%s", rules[1]->name, client);
  a->keys[2] = arena_printf(&req->arena, "%s:%s", rules[2]->name, account);
  int64_t now = clock_now_ms();
  /* a counter already full refuses with a read: a flood of refused attempts writes nothing */
  db_res *r;
  if (db_query(&req->arena, &r, "SELECT key, count, window_start FROM rate_limits WHERE key IN ($1, $2, $3)",
               DB_ARGS(DB_TEXT(a->keys[0]), DB_TEXT(a->keys[1]), DB_TEXT(a->keys[2]))) != DB_OK)
    return hs_fail(req, ERR_INTERNAL, NULL);
  int retry = login_retry(a, r, false, now, &refusing);
  if (retry) return login_refuse(req, refusing, retry);
  /* the attempt counts itself in all three at once; attempts that raced past the read and
   * find a counter over its maximum are refused and taken back */
  if (db_query(&req->arena, &r,
               "INSERT INTO rate_limits (key, window_start, count) VALUES ($1, $4, 1), ($2, $4, 1), ($3, $4, 1) "
               "ON CONFLICT (key) DO UPDATE SET "
               "count = CASE WHEN rate_limits.window_start <= CASE WHEN rate_limits.key = $3 THEN $6 ELSE $5 END "
               "THEN 1 ELSE rate_limits.count + 1 END, "
               "window_start = CASE WHEN rate_limits.window_start <= CASE WHEN rate_limits.key = $3 THEN $6 ELSE $5 "
               "END THEN $4 ELSE rate_limits.window_start END "
               "RETURNING key, count, window_start",
               DB_ARGS(DB_TEXT(a->keys[0]), DB_TEXT(a->keys[1]), DB_TEXT(a->keys[2]), DB_INT(now),
                       DB_INT(now - LOGIN_WINDOW_MS), DB_INT(now - rules[2]->window_ms))) != DB_OK ||
      r->rows != 3)
    return hs_fail(req, ERR_INTERNAL, NULL);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++)
      if (!strcmp(db_text(r, i, 0), a->keys[k])) a->starts[k] = db_int(r, i, 2);
  for (int i = 0; i < 3; i++)
    if (!strcmp(db_text(r, i, 0), a->keys[2])) a->account_count = db_int(r, i, 1);
  retry = login_retry(a, r, true, now, &refusing);
  if (retry == 0) return ERR_OK;
  login_take_back(a, false);
  return login_refuse(req, refusing, retry);
}

void hs_login_end(const hs_login_attempt *a, hs_login_result result) {
  if (result != HS_LOGIN_WRONG) {
    login_take_back(a, result == HS_LOGIN_RIGHT);
    return;
  }
  const hs_rate_limit *rule = &login_per_account[a->kind];
  if (a->kind == HS_LOGIN_PRIVILEGED && a->account_count == rule->max)
    log_json(LOG_WARN, "login throttle: account locked",
             json_pack("{s:s,s:i,s:i}", "account", strchr(a->keys[2], ':') + 1, "failures", rule->max, "retryAfter",
                       seconds_left(a->starts[2], rule->window_ms, clock_now_ms())));
}

err_t hs_login_unlock(const char *account, hs_login_kind kind, bool *was_locked) {
  const hs_rate_limit *rules[3];
  login_rules(kind, rules);
  arena a;
  arena_init(&a);
  char *account_key = arena_printf(&a, "%s:%s", rules[2]->name, account);
  char *pair_prefix = arena_printf(&a, "%s:%s:", rules[0]->name, account);
  int64_t now = clock_now_ms();
  db_res *r = NULL;
  /* the (account, client) rows first, then the account's: one row locked at a time per kind */
  err_t e = db_to_err(
      db_query(NULL, NULL, "DELETE FROM rate_limits WHERE substr(key, 1, length(CAST($1 AS TEXT))) = CAST($1 AS TEXT)",
               DB_ARGS(DB_TEXT(pair_prefix))));
  if (!e)
    e = db_to_err(db_query(&a, &r, "DELETE FROM rate_limits WHERE key = $1 RETURNING count, window_start",
                           DB_ARGS(DB_TEXT(account_key))));
  *was_locked = !e && r->rows == 1 && db_int(r, 0, 0) >= rules[2]->max && db_int(r, 0, 1) > now - rules[2]->window_ms;
  arena_fini(&a);
  return e;
}
