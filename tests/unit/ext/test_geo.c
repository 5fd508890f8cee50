/* Unit tests for src/ext/geo.c: ZIP centroids, distances, drive-time estimate. */
#include "ext/geo.h"
#include "unit.h"
#include <math.h>

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

static void test_road_miles(void **state) {
  (void)state;
  double d = geo_distance_miles(40, -75, 41, -75);
  assert_true(fabs(geo_road_miles(40, -75, 41, -75) - d * 1.3) < 1e-9);
}

static void test_zip_in_text(void **state) {
  (void)state;
  char zip[6];
  assert_true(geo_zip_in_text("350 Fifth Ave, New York, NY 10118", zip));
  assert_string_equal(zip, "10118");
  /* the last 5-digit run wins; a house number of five digits comes first */
  assert_true(geo_zip_in_text("12345 Main St, Springfield, IL 62704-1234", zip));
  assert_string_equal(zip, "62704");
  assert_true(geo_zip_in_text("02134", zip));
  assert_string_equal(zip, "02134");
  /* longer or shorter digit runs are not ZIPs */
  assert_false(geo_zip_in_text("1 Main St 1234567", zip));
  assert_false(geo_zip_in_text("Apt 1234, Main St", zip));
  assert_false(geo_zip_in_text("", zip));
  assert_false(geo_zip_in_text(NULL, zip));
}

static void test_zips_near(void **state) {
  (void)state;
  geo_near near[50];
  double lat, lng;
  assert_true(geo_zip_centroid("10001", &lat, &lng));
  int n = geo_zips_near(lat, lng, 2.0, near, 50);
  assert_true(n > 3);
  assert_string_equal(near[0].zip, "10001"); /* itself, at distance 0 */
  for (int i = 0; i < n; i++) {
    assert_true(near[i].miles <= 2.0);
    if (i) assert_true(near[i - 1].miles <= near[i].miles);
    double zl, zg;
    assert_true(geo_zip_centroid(near[i].zip, &zl, &zg));
    assert_true(fabs(geo_distance_miles(lat, lng, zl, zg) - near[i].miles) < 1e-9);
  }
  /* cap keeps the nearest */
  geo_near few[2];
  assert_int_equal(geo_zips_near(lat, lng, 2.0, few, 2), 2);
  assert_string_equal(few[1].zip, near[1].zip);
  /* leading zeros are kept (Puerto Rico) and the open sea has none */
  assert_true(geo_zips_near(18.180555, -66.749961, 0.5, near, 50) >= 1);
  assert_string_equal(near[0].zip, "00601");
  assert_int_equal(geo_zips_near(0, -30, 100, near, 50), 0);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_known_zips), cmocka_unit_test(test_unknown_or_malformed),
          cmocka_unit_test(test_distance), cmocka_unit_test(test_drive_minutes), cmocka_unit_test(test_road_miles),
          cmocka_unit_test(test_zip_in_text), cmocka_unit_test(test_zips_near))
