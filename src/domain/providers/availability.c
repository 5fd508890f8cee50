/* Weekly availability. Times are "HH:MM" (the schema checks them) compared as minutes after
 * midnight UTC; the week starts on Monday (index 0). */
#include "domain/providers/availability.h"
#include "core/clock.h"
#include <stdio.h>
#include <stdlib.h>

static const char *const DAYS[7] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

static json_t *day_json(const char *start, const char *end, bool on) {
  return json_pack("{s:s,s:s,s:b}", "start", start, "end", end, "on", on);
}

json_t *availability_json(const char *stored) {
  json_t *week = stored ? json_loads(stored, 0, NULL) : NULL;
  if (json_is_object(week)) return week;
  json_decref(week);
  week = json_object();
  for (int i = 0; i < 7; i++) json_object_set_new(week, DAYS[i], day_json("08:00", "17:00", i < 5));
  return week;
}

void availability_jw(jw *w, const char *stored) {
  json_t *week = availability_json(stored);
  char *text = json_dumps(week, JSON_COMPACT);
  jw_json(w, text);
  free(text);
  json_decref(week);
}

static int minutes(json_t *hhmm) {
  const char *s = json_string_value(hhmm);
  return s ? atoi(s) * 60 + atoi(s + 3) : 0;
}

json_t *availability_complete(json_t *given, char err[256]) {
  json_t *week = json_object();
  for (int i = 0; i < 7; i++) {
    json_t *day = json_object_get(given, DAYS[i]);
    if (!day) {
      json_object_set_new(week, DAYS[i], day_json("08:00", "17:00", false));
      continue;
    }
    json_t *start = json_object_get(day, "start"), *end = json_object_get(day, "end");
    bool on = json_is_true(json_object_get(day, "on"));
    if (on && minutes(end) <= minutes(start)) {
      snprintf(err, 256, "availability.%s: end must be after start", DAYS[i]);
      json_decref(week);
      return NULL;
    }
    json_object_set_new(week, DAYS[i], day_json(json_string_value(start), json_string_value(end), on));
  }
  return week;
}

void availability_read(json_t *schedule, avail_week *w) {
  for (int i = 0; i < 7; i++) {
    json_t *day = json_object_get(schedule, DAYS[i]);
    w->days[i] = (avail_day){json_is_true(json_object_get(day, "on")), minutes(json_object_get(day, "start")),
                             minutes(json_object_get(day, "end"))};
  }
}

bool availability_fits(const avail_week *w, int64_t at) {
  int64_t day = at >= 0 ? at / DAY_MS : (at - DAY_MS + 1) / DAY_MS;
  int weekday = (int)((day + 3) % 7); /* 1970-01-01 was a Thursday */
  int minute = (int)((at - day * DAY_MS) / 60000);
  const avail_day *d = &w->days[weekday];
  return d->on && minute >= d->start && minute < d->end;
}
