/* Unit tests for src/domain/providers/availability.c: the default week, completing a PUT body,
 * and whether an instant falls within the week. */
#include "core/clock.h"
#include "domain/providers/availability.h"
#include "unit.h"
#include <string.h>

static int64_t at(const char *iso) {
  int64_t ms = 0;
  assert_true(clock_parse_iso(iso, &ms));
  return ms;
}

static void test_default_week(void **state) {
  (void)state;
  json_t *w = availability_json(NULL);
  char *text = json_dumps(w, JSON_COMPACT);
  assert_string_equal(text, "{\"mon\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":true},"
                            "\"tue\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":true},"
                            "\"wed\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":true},"
                            "\"thu\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":true},"
                            "\"fri\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":true},"
                            "\"sat\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":false},"
                            "\"sun\":{\"start\":\"08:00\",\"end\":\"17:00\",\"on\":false}}");
  free(text);
  json_decref(w);
  /* unreadable stored text falls back to the default too */
  w = availability_json("not json");
  assert_true(json_is_true(json_object_get(json_object_get(w, "fri"), "on")));
  json_decref(w);
}

static void test_fits(void **state) {
  (void)state;
  avail_week week;
  json_t *w = availability_json(NULL);
  availability_read(w, &week);
  json_decref(w);
  /* 2026-11-23 is a Monday */
  assert_true(availability_fits(&week, at("2026-11-23T08:00:00Z")));
  assert_true(availability_fits(&week, at("2026-11-23T16:59:59Z")));
  assert_false(availability_fits(&week, at("2026-11-23T17:00:00Z")));
  assert_false(availability_fits(&week, at("2026-11-23T07:59:00Z")));
  assert_true(availability_fits(&week, at("2026-11-27T12:00:00Z")));  /* Friday */
  assert_false(availability_fits(&week, at("2026-11-28T12:00:00Z"))); /* Saturday */
  assert_false(availability_fits(&week, at("2026-11-29T12:00:00Z"))); /* Sunday */
  assert_true(availability_fits(&week, at("1970-01-01T12:00:00Z")));  /* a Thursday */
}

static void test_complete(void **state) {
  (void)state;
  char err[256] = "";
  json_t *given = json_loads("{\"sun\": {\"start\": \"10:00\", \"end\": \"14:30\", \"on\": true}}", 0, NULL);
  json_t *w = availability_complete(given, err);
  assert_non_null(w);
  avail_week week;
  availability_read(w, &week);
  assert_true(week.days[6].on && week.days[6].start == 600 && week.days[6].end == 870);
  for (int i = 0; i < 6; i++) assert_false(week.days[i].on);
  assert_true(availability_fits(&week, at("2026-11-29T14:29:00Z")));
  assert_false(availability_fits(&week, at("2026-11-29T14:30:00Z")));
  json_decref(w);
  json_decref(given);
  given = json_loads("{\"tue\": {\"start\": \"10:00\", \"end\": \"10:00\", \"on\": true}}", 0, NULL);
  assert_null(availability_complete(given, err));
  assert_string_equal(err, "availability.tue: end must be after start");
  json_decref(given);
  /* a day that is off may keep any hours */
  given = json_loads("{\"tue\": {\"start\": \"18:00\", \"end\": \"06:00\", \"on\": false}}", 0, NULL);
  w = availability_complete(given, err);
  assert_non_null(w);
  json_decref(w);
  json_decref(given);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_default_week), cmocka_unit_test(test_fits), cmocka_unit_test(test_complete))
