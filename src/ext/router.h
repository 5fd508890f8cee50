/* Driving time and distance between two points, and addresses to points.
 *
 * With ROUTER_URL set, routes come from an OSRM-compatible router (GET
 * /route/v1/driving/{lng},{lat};{lng},{lat}); without it, from the embedded estimate
 * (ext/geo.h: great-circle distance x 1.3 at 35 mph). With GEOCODER_URL set, addresses are
 * looked up in a Nominatim-compatible geocoder (GET /search?format=jsonv2); without it, the
 * 5-digit ZIP found in the address is resolved from the embedded ZIP table. Thread-safe. */
#ifndef EXT_ROUTER_H
#define EXT_ROUTER_H

#define ROUTER_TIMEOUT_MS 7000

typedef enum {
  ROUTE_OK,
  ROUTE_NONE,        /* the router found no route (or could not place a point on a road) */
  ROUTE_TIMEOUT,     /* no answer within ROUTER_TIMEOUT_MS */
  ROUTE_UNAVAILABLE, /* refused connection, an error status other than OSRM's 400, garbage */
} route_rc;

/* Minutes (rounded up, at least 1) and road miles from one point to another. */
route_rc router_drive(double from_lat, double from_lng, double to_lat, double to_lng, int *minutes, double *miles);

typedef enum {
  GEOCODE_OK,
  GEOCODE_NOT_FOUND, /* no match */
  GEOCODE_FAILED,    /* the geocoder did not answer, or not with a usable place */
} geocode_rc;

/* The point of an address. */
geocode_rc geocoder_lookup(const char *address, double *lat, double *lng);

#endif
