/* Unit tests for If-None-Match matching (src/http/handler.c, hs_etag_matches). */
#include "http/http.h"
#include "unit.h"

static void test_matches(void **state) {
  (void)state;
  const char *tag = "\"cabc.png\"";
  assert_true(hs_etag_matches("\"cabc.png\"", tag));
  assert_true(hs_etag_matches("*", tag));
  assert_true(hs_etag_matches("W/\"cabc.png\"", tag)); /* weak comparison, as RFC 9110 says */
  assert_true(hs_etag_matches("\"x\", \"cabc.png\"", tag));
  assert_true(hs_etag_matches("\"x\",W/\"cabc.png\"", tag));
  assert_true(hs_etag_matches("  \"cabc.png\"  ", tag));
  assert_true(hs_etag_matches("junk, \"cabc.png\"", tag));
}

static void test_does_not_match(void **state) {
  (void)state;
  const char *tag = "\"cabc.png\"";
  assert_false(hs_etag_matches(NULL, tag));
  assert_false(hs_etag_matches("", tag));
  assert_false(hs_etag_matches("cabc.png", tag)); /* not quoted */
  assert_false(hs_etag_matches("\"cabc.pn\"", tag));
  assert_false(hs_etag_matches("\"cabc.png", tag)); /* unterminated */
  assert_false(hs_etag_matches("\"x\", \"y\"", tag));
  assert_false(hs_etag_matches("\"cabc.png\"", NULL));
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_matches), cmocka_unit_test(test_does_not_match))
