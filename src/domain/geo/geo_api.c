/* GET /weather and GET /drive-time. Outside services' failures become the service's own
 * messages (503, 422, 504); their text never reaches a client. */
#include "domain/geo/geo_api.h"
#include "core/util.h"
#include "domain/geo/geo.h"
#include "ext/router.h"
#include <math.h>
#include <stdio.h>

err_t api_weather(hs_req *req) {
  weather_day days[WEATHER_DAYS];
  int n = 0;
  err_t e = geo_forecast(json_string_value(json_object_get(req->query, "zip")), days, &n);
  if (e == ERR_NOT_FOUND) return hs_fail(req, e, "Unknown ZIP code");
  if (e != ERR_OK) return hs_fail(req, ERR_UNAVAILABLE, "Weather service unavailable");
  jw *w = hs_jw(req, 96 * (size_t)(n + 1));
  jw_arr(w);
  for (int i = 0; i < n; i++) /* one forecast day as the API shows it */
    jw_pack(w, "{s:s,s:s,s:f,s:f}", "date", days[i].date, "icon", weather_icon(days[i].code), "maxF",
            round(days[i].max_f * 10) / 10, "minF", round(days[i].min_f * 10) / 10);
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

static err_t locate(hs_req *req, const char *field, double *lat, double *lng) {
  if (geocoder_lookup(json_string_value(json_object_get(req->query, field)), lat, lng) == GEOCODE_OK) return ERR_OK;
  return hs_fail(req, ERR_UNPROCESSABLE, arena_printf(&req->arena, "Geocoding failed for %s", field));
}

err_t api_drive_time(hs_req *req) {
  static const char *const coords[] = {"fromLat", "fromLng", "toLat", "toLng"};
  double v[4];
  int ncoords = 0, naddrs = json_object_get(req->query, "fromAddress") != NULL;
  naddrs += json_object_get(req->query, "toAddress") != NULL;
  for (int i = 0; i < 4; i++) {
    json_t *x = json_object_get(req->query, coords[i]);
    if (x) v[i] = json_number_value(x), ncoords++;
  }
  if (ncoords && naddrs)
    return hs_fail(req, ERR_BAD_REQUEST,
                   "Give either fromLat, fromLng, toLat and toLng or fromAddress and toAddress, not both");
  err_t e = ERR_OK;
  if (naddrs == 2) {
    if ((e = locate(req, "fromAddress", &v[0], &v[1])) != ERR_OK ||
        (e = locate(req, "toAddress", &v[2], &v[3])) != ERR_OK)
      return e;
  } else if (ncoords != 4) {
    return hs_fail(req, ERR_BAD_REQUEST, "Give fromLat, fromLng, toLat and toLng, or fromAddress and toAddress");
  }
  int minutes;
  double miles;
  switch (router_drive(v[0], v[1], v[2], v[3], &minutes, &miles)) {
  case ROUTE_OK: break;
  case ROUTE_NONE: return hs_fail(req, ERR_UNPROCESSABLE, "No route found");
  case ROUTE_TIMEOUT: return hs_fail(req, ERR_GATEWAY_TIMEOUT, "The routing service did not answer within 7 seconds");
  case ROUTE_UNAVAILABLE: return hs_fail(req, ERR_UNAVAILABLE, "Routing service unavailable");
  }
  char distance[32];
  snprintf(distance, sizeof distance, "%.1f", miles);
  return hs_ok_pack(req, "{s:i,s:s}", "minutes", minutes, "distanceMi", distance);
}
