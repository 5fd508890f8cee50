/* Routes and query schemas of GET /weather and GET /drive-time. Both wait on outside services:
 * they run on the slow lane. */
#include "core/util.h"
#include "domain/common.h"
#include "domain/geo/geo.h"
#include "domain/geo/geo_api.h"

static const hs_field weather_fields[] = {{"zip", F_ZIP, F_REQUIRED}, {0}};
static const hs_schema weather_query = {weather_fields};
static const hs_field drive_fields[] = {
    COMMON_POINT("fromLat", "fromLng"),
    COMMON_POINT("toLat", "toLng"),
    {"fromAddress", F_STRING, 0, LEN(1, 300)},
    {"toAddress", F_STRING, 0, LEN(1, 300)},
    {0},
};
static const hs_schema drive_query = {drive_fields};

const hs_route geo_routes[] = {
    {HS_GET, "/weather", api_weather, ROLE_USER | ROLE_PROVIDER, .query = &weather_query, .flags = ROUTE_SLOW,
     .summary = "14-day forecast for a ZIP (cached an hour per ZIP)", .response = "ForecastDay[]",
     .errors = ERRORS(ERR_NOT_FOUND, ERR_GATEWAY_TIMEOUT)},
    {HS_GET, "/drive-time", api_drive_time, ROLE_OPEN, .query = &drive_query, .flags = ROUTE_SLOW,
     .summary = "Driving minutes and miles between two points or addresses", .response = "DriveTime",
     .errors = ERRORS(ERR_UNPROCESSABLE, ERR_GATEWAY_TIMEOUT)},
    {0},
};
