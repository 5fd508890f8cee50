/* The Open-Meteo client. The answer is checked field by field (dates, codes, finite
 * temperatures) so nothing malformed reaches a response; the upstream's own text (its
 * `reason` on errors) is never passed on. */
#include "ext/weather.h"
#include "core/config.h"
#include "core/log.h"
#include "ext/fetch.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 8000

static bool is_date(const char *s) {
  if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-') return false;
  for (int i = 0; i < 10; i++)
    if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9')) return false;
  return true;
}

bool weather_parse(json_t *answer, weather_day out[WEATHER_DAYS], int *n) {
  json_t *daily = json_object_get(answer, "daily");
  json_t *time = json_object_get(daily, "time"), *code = json_object_get(daily, "weather_code");
  json_t *max = json_object_get(daily, "temperature_2m_max"), *min = json_object_get(daily, "temperature_2m_min");
  size_t len = json_array_size(time);
  if (len == 0 || json_array_size(code) != len || json_array_size(max) != len || json_array_size(min) != len)
    return false;
  if (len > WEATHER_DAYS) len = WEATHER_DAYS;
  for (size_t i = 0; i < len; i++) {
    const char *date = json_string_value(json_array_get(time, i));
    json_t *c = json_array_get(code, i), *hi = json_array_get(max, i), *lo = json_array_get(min, i);
    if (!is_date(date) || !json_is_number(c) || !json_is_number(hi) || !json_is_number(lo)) return false;
    double cv = json_number_value(c), hv = json_number_value(hi), lv = json_number_value(lo);
    if (cv != floor(cv) || cv < 0 || cv > 99 || !isfinite(hv) || !isfinite(lv)) return false;
    memcpy(out[i].date, date, 11);
    out[i].code = (int)cv, out[i].max_f = hv, out[i].min_f = lv;
  }
  *n = (int)len;
  return true;
}

weather_rc weather_fetch(double lat, double lng, weather_day out[WEATHER_DAYS], int *n) {
  char url[1024];
  snprintf(url, sizeof url,
           "%s/v1/forecast?latitude=%.4f&longitude=%.4f"
           "&daily=weather_code,temperature_2m_max,temperature_2m_min"
           "&temperature_unit=fahrenheit&timezone=auto&forecast_days=%d",
           CFG.weather_url, lat, lng, WEATHER_DAYS);
  long status;
  json_t *answer;
  fetch_rc rc = fetch_json(url, TIMEOUT_MS, &status, &answer);
  weather_rc out_rc = WEATHER_OK;
  if (rc == FETCH_OK)
    out_rc = weather_parse(answer, out, n) ? WEATHER_OK : WEATHER_BAD_ANSWER;
  else
    out_rc = rc == FETCH_BAD_BODY ? WEATHER_BAD_ANSWER : WEATHER_UNAVAILABLE;
  if (out_rc != WEATHER_OK)
    log_json(LOG_WARN, "weather service failed",
             json_pack("{s:s,s:I}", "reason",
                       rc == FETCH_TIMEOUT       ? "timeout"
                       : rc == FETCH_UNREACHABLE ? "unreachable"
                       : rc == FETCH_BAD_STATUS  ? "error status"
                                                 : "malformed answer",
                       "status", (json_int_t)status));
  json_decref(answer);
  return out_rc;
}

const char *weather_icon(int code) {
  static const struct {
    int lo, hi;
    const char *icon;
  } icons[] = {
      {0, 0, "\u2600\ufe0f"},       /* clear sky */
      {1, 1, "\U0001F324\ufe0f"},   /* mainly clear */
      {2, 2, "\u26c5"},             /* partly cloudy */
      {3, 3, "\u2601\ufe0f"},       /* overcast */
      {45, 48, "\U0001F32B\ufe0f"}, /* fog, depositing rime fog */
      {51, 57, "\U0001F326\ufe0f"}, /* drizzle, freezing drizzle */
      {61, 67, "\U0001F327\ufe0f"}, /* rain, freezing rain */
      {71, 77, "\u2744\ufe0f"},     /* snow fall, snow grains */
      {80, 82, "\U0001F326\ufe0f"}, /* rain showers */
      {85, 86, "\U0001F328\ufe0f"}, /* snow showers */
      {95, 99, "\u26c8\ufe0f"},     /* thunderstorm, with hail */
  };
  for (size_t i = 0; i < sizeof icons / sizeof *icons; i++)
    if (code >= icons[i].lo && code <= icons[i].hi) return icons[i].icon;
  return "\U0001F321\ufe0f"; /* thermometer */
}

bool weather_is_snow(int code) { return (code >= 71 && code <= 77) || code == 85 || code == 86; }
