/* Unit tests for src/ext/weather.c: reading Open-Meteo answers, icons and snow codes. */
#include "ext/weather.h"
#include "unit.h"
#include <string.h>

static bool parse(const char *text, weather_day *out, int *n) {
  json_t *v = json_loads(text, 0, NULL);
  bool ok = weather_parse(v, out, n);
  json_decref(v);
  return ok;
}

static void test_parse_open_meteo_answer(void **state) {
  (void)state;
  weather_day d[WEATHER_DAYS];
  int n = 0;
  assert_true(parse("{\"latitude\": 40.7, \"daily_units\": {\"temperature_2m_max\": \"\\u00b0F\"}, \"daily\": {"
                    "\"time\": [\"2026-11-23\", \"2026-11-24\"], \"weather_code\": [71, 0],"
                    "\"temperature_2m_max\": [31.5, 45], \"temperature_2m_min\": [20.1, -3.2]}}",
                    d, &n));
  assert_int_equal(n, 2);
  assert_string_equal(d[0].date, "2026-11-23");
  assert_int_equal(d[0].code, 71);
  assert_true(d[0].max_f == 31.5 && d[1].min_f == -3.2 && d[1].max_f == 45);
}

static void test_parse_keeps_at_most_14_days(void **state) {
  (void)state;
  char text[4096] = "{\"daily\": {\"time\": [";
  for (int i = 0; i < 16; i++) sprintf(text + strlen(text), "%s\"2026-12-%02d\"", i ? "," : "", i + 1);
  strcat(text, "], \"weather_code\": [");
  for (int i = 0; i < 16; i++) strcat(text, i ? ",1" : "1");
  strcat(text, "], \"temperature_2m_max\": [");
  for (int i = 0; i < 16; i++) strcat(text, i ? ",50" : "50");
  strcat(text, "], \"temperature_2m_min\": [");
  for (int i = 0; i < 16; i++) strcat(text, i ? ",40" : "40");
  strcat(text, "]}}");
  weather_day d[WEATHER_DAYS];
  int n = 0;
  assert_true(parse(text, d, &n));
  assert_int_equal(n, 14);
  assert_string_equal(d[13].date, "2026-12-14");
}

static void test_parse_refuses_what_is_not_a_forecast(void **state) {
  (void)state;
  static const char *const bad[] = {
      "{}",
      "{\"error\": true, \"reason\": \"Latitude must be in range\"}",
      "{\"daily\": {\"time\": [], \"weather_code\": [], \"temperature_2m_max\": [], \"temperature_2m_min\": []}}",
      /* arrays of different lengths */
      "{\"daily\": {\"time\": [\"2026-11-23\"], \"weather_code\": [1, 2], \"temperature_2m_max\": [1], "
      "\"temperature_2m_min\": [1]}}",
      /* a null temperature, a fractional code, a code out of range, a bad date */
      "{\"daily\": {\"time\": [\"2026-11-23\"], \"weather_code\": [1], \"temperature_2m_max\": [null], "
      "\"temperature_2m_min\": [1]}}",
      "{\"daily\": {\"time\": [\"2026-11-23\"], \"weather_code\": [1.5], \"temperature_2m_max\": [1], "
      "\"temperature_2m_min\": [1]}}",
      "{\"daily\": {\"time\": [\"2026-11-23\"], \"weather_code\": [100], \"temperature_2m_max\": [1], "
      "\"temperature_2m_min\": [1]}}",
      "{\"daily\": {\"time\": [\"23/11/2026\"], \"weather_code\": [1], \"temperature_2m_max\": [1], "
      "\"temperature_2m_min\": [1]}}",
      "{\"daily\": {\"time\": [20261123], \"weather_code\": [1], \"temperature_2m_max\": [1], "
      "\"temperature_2m_min\": [1]}}",
  };
  weather_day d[WEATHER_DAYS];
  int n;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (parse(bad[i], d, &n)) fail_msg("accepted %s", bad[i]);
  assert_false(weather_parse(NULL, d, &n));
}

static void test_icons_and_snow(void **state) {
  (void)state;
  assert_string_equal(weather_icon(0), "\u2600\ufe0f");
  assert_string_equal(weather_icon(3), "\u2601\ufe0f");
  assert_string_equal(weather_icon(63), "\U0001F327\ufe0f");
  assert_string_equal(weather_icon(75), "\u2744\ufe0f");
  assert_string_equal(weather_icon(86), "\U0001F328\ufe0f");
  assert_string_equal(weather_icon(96), "\u26c8\ufe0f");
  assert_string_equal(weather_icon(4), "\U0001F321\ufe0f"); /* not a WMO code: a thermometer */
  for (int code = 0; code < 100; code++)
    assert_int_equal(weather_is_snow(code), (code >= 71 && code <= 77) || code == 85 || code == 86);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_parse_open_meteo_answer),
          cmocka_unit_test(test_parse_keeps_at_most_14_days),
          cmocka_unit_test(test_parse_refuses_what_is_not_a_forecast), cmocka_unit_test(test_icons_and_snow))
