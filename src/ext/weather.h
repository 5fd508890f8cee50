/* Daily forecasts from an Open-Meteo-compatible service (WEATHER_URL): GET /v1/forecast with
 * the daily WMO weather code and the maximum and minimum temperature in Fahrenheit.
 * Thread-safe. */
#ifndef EXT_WEATHER_H
#define EXT_WEATHER_H
#include <jansson.h>
#include <stdbool.h>

#define WEATHER_DAYS 14

typedef struct weather_day {
  char date[11]; /* YYYY-MM-DD */
  int code;      /* WMO weather interpretation code */
  double max_f, min_f;
} weather_day;

typedef enum {
  WEATHER_OK,
  WEATHER_UNAVAILABLE, /* no answer in time, refused connection, or an error status */
  WEATHER_BAD_ANSWER,  /* an answer that is not an Open-Meteo daily forecast */
} weather_rc;

/* Fetches up to WEATHER_DAYS days for a point into out; *n receives the count (at least 1 on
 * WEATHER_OK). Waits at most 8 seconds. */
weather_rc weather_fetch(double lat, double lng, weather_day out[WEATHER_DAYS], int *n);
/* Reads an Open-Meteo answer (`daily.time`, `daily.weather_code`, `daily.temperature_2m_max`,
 * `daily.temperature_2m_min`, arrays of one length) into out. False when it is not one. */
bool weather_parse(json_t *answer, weather_day out[WEATHER_DAYS], int *n);
/* The emoji for a WMO weather code (an unknown code has a thermometer). */
const char *weather_icon(int code);
/* True for the WMO codes of snowfall (71-77 snow, 85-86 snow showers). */
bool weather_is_snow(int code);

#endif
