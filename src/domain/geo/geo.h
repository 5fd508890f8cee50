/* Weather and drive time: GET /weather (a 14-day forecast for a ZIP, cached per ZIP for an
 * hour in this instance) and GET /drive-time (minutes and miles between two points or two
 * addresses), over the outside-service adapters ext/weather.h and ext/router.h. */
#ifndef DOMAIN_GEO_H
#define DOMAIN_GEO_H
#include "domain/domain.h"
#include "ext/weather.h"
#include "http/http.h"

extern const domain_def geo_domain;

/* The forecast of a ZIP (up to WEATHER_DAYS days into out, *n of them), from this instance's
 * cache when it is less than an hour old; otherwise fetched once however many threads ask
 * at the same time (they wait for that fetch and share its outcome). Failures are not
 * cached. ERR_NOT_FOUND: a ZIP not in the embedded table; ERR_UNAVAILABLE: the weather
 * service failed. Thread-safe. */
err_t geo_forecast(const char *zip, weather_day out[WEATHER_DAYS], int *n);

#endif
