/* Binary search over the embedded, sorted ZIP table (build/gen/zips.c); a bounding-box scan of
 * the same table for the ZIPs near a point. */
#include "ext/geo.h"
#include "core/util.h"
#include "core/vec.h"
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
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
    if (GEO_ZIPS[mid] < want)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return false;
}

double geo_distance_miles(double lat1, double lng1, double lat2, double lng2) {
  const double rad = M_PI / 180.0;
  double dlat = (lat2 - lat1) * rad, dlng = (lng2 - lng1) * rad;
  double a = sin(dlat / 2) * sin(dlat / 2) + cos(lat1 * rad) * cos(lat2 * rad) * sin(dlng / 2) * sin(dlng / 2);
  return 2 * EARTH_RADIUS_MI * asin(fmin(1.0, sqrt(a)));
}

double geo_road_miles(double lat1, double lng1, double lat2, double lng2) {
  return geo_distance_miles(lat1, lng1, lat2, lng2) * ROAD_FACTOR;
}

int geo_drive_minutes(double lat1, double lng1, double lat2, double lng2) {
  double minutes = geo_road_miles(lat1, lng1, lat2, lng2) / AVERAGE_MPH * 60.0;
  int m = (int)ceil(minutes);
  return m < 1 ? 1 : m;
}

bool geo_zip_in_text(const char *text, char zip[6]) {
  bool found = false;
  for (const char *p = text; p && *p;) {
    if (!isdigit((unsigned char)*p)) {
      p++;
      continue;
    }
    const char *start = p;
    while (isdigit((unsigned char)*p)) p++;
    if (p - start == 5) {
      memcpy(zip, start, 5);
      zip[5] = 0;
      found = true;
    }
  }
  return found;
}

static int by_distance(const void *a, const void *b) {
  const geo_near *x = a, *y = b;
  if (x->miles != y->miles) return x->miles < y->miles ? -1 : 1;
  return strcmp(x->zip, y->zip);
}

int geo_zips_near(double lat, double lng, double miles, geo_near *out, int cap) {
  /* a degree of latitude is about 69 miles; longitude degrees shrink with the cosine */
  double dlat = miles / 68.0, coslat = cos(lat * M_PI / 180.0);
  double dlng = coslat > 0.01 ? miles / (69.2 * coslat) : 360.0;
  VEC(geo_near) all = {0};
  for (int i = 0; i < GEO_ZIP_COUNT; i++) {
    double zlat = GEO_LATLNG[2 * i], zlng = GEO_LATLNG[2 * i + 1];
    if (fabs(zlat - lat) > dlat || fabs(zlng - lng) > dlng) continue;
    double d = geo_distance_miles(lat, lng, zlat, zlng);
    if (d > miles) continue;
    geo_near *near = vec_push(NULL, &all);
    snprintf(near->zip, sizeof near->zip, "%05u", GEO_ZIPS[i] % 100000u);
    near->miles = d;
  }
  int n = (int)all.size;
  if (n) qsort(all.items, all.size, sizeof *all.items, by_distance);
  int out_n = n < cap ? n : cap;
  if (out_n > 0) memcpy(out, all.items, (size_t)out_n * sizeof *out);
  vec_free(&all);
  return out_n;
}
