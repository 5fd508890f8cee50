/* Binary search over the embedded, sorted ZIP table (build/gen/zips.c). */
#include "ext/geo.h"
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern const int GEO_ZIP_COUNT;
extern const uint32_t GEO_ZIPS[];
extern const double GEO_LATLNG[];

#define EARTH_RADIUS_MI 3958.8
#define ROAD_FACTOR 1.3
#define AVERAGE_MPH 35.0

bool geo_zip_centroid(const char *zip, double *lat, double *lng) {
  if (!zip || strlen(zip) != 5) return false;
  for (int i = 0; i < 5; i++)
    if (!isdigit((unsigned char)zip[i])) return false;
  uint32_t want = (uint32_t)strtoul(zip, NULL, 10);
  int lo = 0, hi = GEO_ZIP_COUNT - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (GEO_ZIPS[mid] == want) {
      *lat = GEO_LATLNG[2 * mid], *lng = GEO_LATLNG[2 * mid + 1];
      return true;
    }
    if (GEO_ZIPS[mid] < want) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

double geo_distance_miles(double lat1, double lng1, double lat2, double lng2) {
  const double rad = M_PI / 180.0;
  double dlat = (lat2 - lat1) * rad, dlng = (lng2 - lng1) * rad;
  double a = sin(dlat / 2) * sin(dlat / 2) + cos(lat1 * rad) * cos(lat2 * rad) * sin(dlng / 2) * sin(dlng / 2);
  return 2 * EARTH_RADIUS_MI * asin(fmin(1.0, sqrt(a)));
}

int geo_drive_minutes(double lat1, double lng1, double lat2, double lng2) {
  double minutes = geo_distance_miles(lat1, lng1, lat2, lng2) * ROAD_FACTOR / AVERAGE_MPH * 60.0;
  int m = (int)ceil(minutes);
  return m < 1 ? 1 : m;
}
