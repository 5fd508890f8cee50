/* Geography without outside services: US ZIP centroids (embedded table, see assets/README.md),
 * great-circle distances and the embedded drive-time estimate (distance x 1.3 at 35 mph).
 * Pure functions over read-only data: thread-safe. */
#ifndef EXT_GEO_H
#define EXT_GEO_H
#include <stdbool.h>

/* The centroid of a 5-digit ZIP; false when the ZIP is unknown or malformed. */
bool geo_zip_centroid(const char *zip, double *lat, double *lng);
/* Great-circle distance in miles (haversine, mean Earth radius 3958.8 mi). */
double geo_distance_miles(double lat1, double lng1, double lat2, double lng2);
/* Estimated driving minutes between two points: the road distance is taken as 1.3 times the
 * great-circle distance, driven at 35 mph; rounded up, at least 1. */
int geo_drive_minutes(double lat1, double lng1, double lat2, double lng2);
/* The road distance of that estimate: 1.3 times the great-circle distance, in miles. */
double geo_road_miles(double lat1, double lng1, double lat2, double lng2);
/* Finds the US ZIP code in an address: the last run of exactly five digits that is not part
 * of a longer number (so "12 Main St, Springfield, IL 62704-1234" gives 62704). False when
 * there is none. */
bool geo_zip_in_text(const char *text, char zip[6]);

typedef struct geo_near {
  char zip[6];
  double miles; /* great-circle distance from the point */
} geo_near;
/* The ZIPs of the table whose centroid lies within miles of a point, nearest first, at most
 * cap of them (the nearest); returns how many were written to out. */
int geo_zips_near(double lat, double lng, double miles, geo_near *out, int cap);

#endif
