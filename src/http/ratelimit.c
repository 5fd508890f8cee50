/* One atomic upsert per request: it restarts the window when the old one has passed and
 * returns the count and the window start, so two instances can never both admit request
 * max+1. */
#include "http/ratelimit.h"
#include "core/clock.h"
#include "db/db.h"
#include <stdio.h>

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
  }
out:
  arena_fini(&a);
  return e;
}
