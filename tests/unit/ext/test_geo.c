/* Unit tests for src/ext/geo.c: ZIP centroids, distances, drive-time estimate. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */
#include "ext/geo.h"

static void test_known_zips(void **state) {
  (void)state;
  double lat, lng;
  assert_true(geo_zip_centroid("10001", &lat, &lng));
  assert_true(lat > 40.75 && lat < 40.76 && lng > -74.0 && lng < -73.99);
  assert_true(geo_zip_centroid("00601", &lat, &lng)); /* first row */
  assert_true(lat > 18.1 && lat < 18.2);
  assert_true(geo_zip_centroid("99929", &lat, &lng)); /* Alaska, near the end */
  assert_true(lat > 55 && lng < -130);
}

static void test_unknown_or_malformed(void **state) {
  (void)state;
  double lat = 1, lng = 2;
  assert_false(geo_zip_centroid("00000", &lat, &lng));
  assert_false(geo_zip_centroid("1234", &lat, &lng));
  assert_false(geo_zip_centroid("123456", &lat, &lng));
  assert_false(geo_zip_centroid("1000a", &lat, &lng));
  assert_false(geo_zip_centroid(NULL, &lat, &lng));
}

static void test_distance(void **state) {
  (void)state;
  /* New York (Times Square) to Los Angeles (downtown): about 2,450 miles */
  double d = geo_distance_miles(40.758, -73.9855, 34.0522, -118.2437);
  assert_true(d > 2430 && d < 2470);
  assert_true(geo_distance_miles(40, -75, 40, -75) < 1e-9);
}

static void test_drive_minutes(void **state) {
  (void)state;
  /* 10 miles apart: 13 road miles at 35 mph = 22.3 minutes -> 23 */
  double lat2 = 40.0 + 10.0 / 69.05; /* one degree of latitude is about 69.05 miles */
  int m = geo_drive_minutes(40.0, -75.0, lat2, -75.0);
  assert_true(m == 23 || m == 22);
  assert_int_equal(geo_drive_minutes(40, -75, 40, -75), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_zips),
      cmocka_unit_test(test_unknown_or_malformed),
      cmocka_unit_test(test_distance),
      cmocka_unit_test(test_drive_minutes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
