/* One atomic upsert per request: it restarts the window when the old one has passed and
 * returns the count and the window start, so two instances can never both admit request
 * max+1. */
#include "http/ratelimit.h"
#include "core/clock.h"
#include "core/util.h"
#include "db/db.h"
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

err_t hs_rate_limit_hit(const hs_rate_limit *rule, const char *client, int *retry_after_s) {
  char key[256];
  snprintf(key, sizeof key, "%s:%s", rule->name, client);
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = ERR_INTERNAL;
  if (db_query(&a, &r,
               "INSERT INTO rate_limits (key, window_start, count) VALUES ($1, $2, 1) "
               "ON CONFLICT (key) DO UPDATE SET "
               "count = CASE WHEN rate_limits.window_start <= $3 THEN 1 ELSE rate_limits.count + 1 END, "
               "window_start = CASE WHEN rate_limits.window_start <= $3 THEN $2 ELSE rate_limits.window_start END "
               "RETURNING count, window_start",
               DB_ARGS(DB_TEXT(key), DB_INT(now), DB_INT(now - rule->window_ms))) != DB_OK ||
      r->rows != 1)
    goto out;
  e = ERR_OK;
  if (db_int(r, 0, 0) > rule->max) {
    int64_t reset = db_int(r, 0, 1) + rule->window_ms;
    *retry_after_s = (int)((reset - now + 999) / 1000);
    if (*retry_after_s < 1) *retry_after_s = 1;
    e = ERR_RATE_LIMITED;
    count_refusal(rule->name);
  }
out:
  arena_fini(&a);
  return e;
}
