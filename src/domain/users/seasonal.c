/* Seasonal alerts. A daily periodic task (queue_every: one unit per day across every instance
 * sharing the database) fans out one durable unit per ZIP of opted-in premium customers
 * (queued once per day and ZIP: a dedupe key). Each ZIP unit reads the 14-day forecast and,
 * when snow is forecast or the lawn season starts, alerts each customer of the ZIP with a
 * notification and a push. users_store_send_alert records every alert under the primary key
 * (customer, service), so a retried unit, a second instance or an overlapping day cannot
 * alert a customer about a service twice within 7 days (lawncare: once a calendar year). */
#include "core/clock.h"
#include "core/log.h"
#include "domain/geo/geo.h"
#include "domain/users/users_api.h"
#include "domain/users/users_store.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>

#define ALERT_GAP_MS (7 * DAY_MS)
#define LAWN_WARM_F 50.0
#define LAWN_WARM_DAYS 3

/* The first forecast day with snow, or NULL. */
static const char *snow_day(const weather_day *d, int n) {
  for (int i = 0; i < n; i++)
    if (weather_is_snow(d[i].code)) return d[i].date;
  return NULL;
}

/* The first day of LAWN_WARM_DAYS days in a row reaching LAWN_WARM_F, or NULL. */
static const char *lawn_day(const weather_day *d, int n) {
  for (int i = 0, run = 0; i < n; i++) {
    run = d[i].max_f >= LAWN_WARM_F ? run + 1 : 0;
    if (run == LAWN_WARM_DAYS) return d[i - LAWN_WARM_DAYS + 1].date;
  }
  return NULL;
}

/* Midnight UTC of January 1 of the year of now. */
static int64_t year_start(int64_t now) {
  char iso[25], date[11];
  clock_format_iso(now, iso);
  snprintf(date, sizeof date, "%.4s-01-01", iso);
  int64_t ms = 0;
  clock_parse_iso(date, &ms);
  return ms;
}

typedef struct alert {
  const char *service, *title;
  char body[200];
  int64_t cutoff; /* the last alert must be this old or older */
} alert;

static bool alert_customers(const char *zip, int64_t now, const alert *alerts, int n, char err[256]) {
  arena a;
  arena_init(&a);
  db_res *r;
  bool ok = users_store_alert_customers(&a, zip, &r) == ERR_OK;
  for (int i = 0; ok && i < r->rows; i++)
    for (int k = 0; ok && k < n; k++) {
      bool sent;
      ok = users_store_send_alert(db_text(r, i, 0), alerts[k].service, now, alerts[k].cutoff, alerts[k].title,
                                  alerts[k].body, &sent) == ERR_OK;
    }
  if (!ok) snprintf(err, 256, "recording the seasonal alerts of ZIP %s failed", zip);
  arena_fini(&a);
  return ok;
}

/* Queue handler: one ZIP's forecast and its customers' alerts. */
bool users_seasonal_zip(json_t *payload, char err[256]) {
  const char *zip = json_string_value(json_object_get(payload, "zip"));
  weather_day days[WEATHER_DAYS];
  int n = 0;
  err_t e = zip ? geo_forecast(zip, days, &n) : ERR_NOT_FOUND;
  if (e == ERR_NOT_FOUND) return true; /* not a ZIP of the table: no forecast, nothing to do */
  if (e != ERR_OK) {
    snprintf(err, 256, "no forecast for ZIP %s", zip);
    return false;
  }
  /* alerts are dated by their day's slot, so the 7-day rule counts days of the daily run
   * whatever the delay of each run */
  int64_t now = json_integer_value(json_object_get(payload, "slot"));
  if (now <= 0) now = clock_now_ms();
  alert alerts[2];
  int count = 0;
  const char *snow = snow_day(days, n), *lawn = lawn_day(days, n);
  if (snow) {
    alert *s = &alerts[count++];
    *s = (alert){"snowplowing", "Snow in the forecast", "", now - ALERT_GAP_MS};
    snprintf(s->body, sizeof s->body, "Snow is forecast in %s on %s. Book snowplowing before it lands.", zip, snow);
  }
  if (lawn) {
    alert *l = &alerts[count++];
    int64_t season = year_start(now) - 1;
    *l = (alert){"lawncare", "Lawn season is starting", "", season < now - ALERT_GAP_MS ? season : now - ALERT_GAP_MS};
    snprintf(l->body, sizeof l->body, "Warm days reach %s from %s. Book lawncare for the season.", zip, lawn);
  }
  return count == 0 || alert_customers(zip, now, alerts, count, err);
}

/* Queue handler: the day's run, one unit per ZIP (once per day and ZIP whoever queues it). */
bool users_seasonal_day(json_t *payload, char err[256]) {
  arena a;
  arena_init(&a);
  db_res *r;
  int64_t slot = json_integer_value(json_object_get(payload, "slot"));
  bool ok = users_store_alert_zips(&a, &r) == ERR_OK;
  if (ok && r->rows) {
    ok = users_store_queue_alert_zips(r, slot) == ERR_OK;
  }
  if (!ok)
    snprintf(err, 256, "queueing the day's seasonal alerts failed");
  else
    log_json(LOG_INFO, "seasonal alerts queued", json_pack("{s:i}", "zips", r->rows));
  arena_fini(&a);
  return ok;
}
