/* OSRM and Nominatim clients, each falling back to the embedded tables when its URL is not
 * configured. OSRM answers errors with HTTP 400 and a `code` (NoRoute, NoSegment, ...): those
 * mean "no route"; anything else that is not a route is the router failing. */
#include "ext/router.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/fetch.h"
#include "ext/geo.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEOCODER_TIMEOUT_MS 5000
#define METERS_PER_MILE 1609.344

route_rc router_drive(double from_lat, double from_lng, double to_lat, double to_lng, int *minutes, double *miles) {
  if (!CFG.router_url) {
    *minutes = geo_drive_minutes(from_lat, from_lng, to_lat, to_lng);
    *miles = geo_road_miles(from_lat, from_lng, to_lat, to_lng);
    return ROUTE_OK;
  }
  char url[1024];
  snprintf(url, sizeof url, "%s/route/v1/driving/%.6f,%.6f;%.6f,%.6f?overview=false", CFG.router_url, from_lng,
           from_lat, to_lng, to_lat);
  long status;
  json_t *answer;
  fetch_rc rc = fetch_json(url, ROUTER_TIMEOUT_MS, &status, &answer);
  route_rc out = ROUTE_UNAVAILABLE;
  const char *code = json_string_value(json_object_get(answer, "code"));
  json_t *route = json_array_get(json_object_get(answer, "routes"), 0);
  json_t *meters = json_object_get(route, "distance"), *seconds = json_object_get(route, "duration");
  if (rc == FETCH_TIMEOUT) {
    out = ROUTE_TIMEOUT;
  } else if (rc == FETCH_OK && code && !strcmp(code, "Ok") && json_is_number(meters) && json_is_number(seconds) &&
             json_number_value(meters) >= 0 && json_number_value(seconds) >= 0) {
    int m = (int)ceil(json_number_value(seconds) / 60.0);
    *minutes = m < 1 ? 1 : m;
    *miles = json_number_value(meters) / METERS_PER_MILE;
    out = ROUTE_OK;
  } else if ((rc == FETCH_OK || (rc == FETCH_BAD_STATUS && status == 400)) && code) {
    out = ROUTE_NONE; /* NoRoute, NoSegment, or an empty route list */
  }
  if (out == ROUTE_TIMEOUT || out == ROUTE_UNAVAILABLE)
    log_json(LOG_WARN, "router failed",
             json_pack("{s:s,s:I}", "reason", out == ROUTE_TIMEOUT ? "timeout" : "no usable answer", "status",
                       (json_int_t)status));
  json_decref(answer);
  return out;
}

/* A coordinate from Nominatim, which writes them as strings ("40.7484"). */
static bool coordinate(json_t *v, double lo, double hi, double *out) {
  const char *s = json_string_value(v);
  char *end = NULL;
  double d = s ? strtod(s, &end) : json_is_number(v) ? json_number_value(v) : NAN;
  if (s && (end == s || *end)) return false;
  if (!isfinite(d) || d < lo || d > hi) return false;
  *out = d;
  return true;
}

geocode_rc geocoder_lookup(const char *address, double *lat, double *lng) {
  if (!CFG.geocoder_url) {
    char zip[6];
    return geo_zip_in_text(address, zip) && geo_zip_centroid(zip, lat, lng) ? GEOCODE_OK : GEOCODE_NOT_FOUND;
  }
  char *q = fetch_escape(address);
  size_t len = strlen(CFG.geocoder_url) + strlen(q) + 64;
  char *url = xmalloc(len);
  snprintf(url, len, "%s/search?q=%s&format=jsonv2&limit=1", CFG.geocoder_url, q);
  free(q);
  long status;
  json_t *answer;
  fetch_rc rc = fetch_json(url, GEOCODER_TIMEOUT_MS, &status, &answer);
  free(url);
  geocode_rc out = GEOCODE_FAILED;
  if (rc == FETCH_OK && json_is_array(answer)) {
    json_t *place = json_array_get(answer, 0);
    if (!place)
      out = GEOCODE_NOT_FOUND;
    else if (coordinate(json_object_get(place, "lat"), -90, 90, lat) &&
             coordinate(json_object_get(place, "lon"), -180, 180, lng))
      out = GEOCODE_OK;
  }
  if (out == GEOCODE_FAILED) log_json(LOG_WARN, "geocoder failed", json_pack("{s:I}", "status", (json_int_t)status));
  json_decref(answer);
  return out;
}
