/* Unit tests for src/domain/links.c: which redirectUrl APP_REDIRECT_URLS allows, and how a
 * flow's link is built from it or from APP_URL. */
#include "core/arena.h"
#include "core/config.h"
#include "domain/links.h"
#include "unit.h"
#include <string.h>

static int setup(void **state) {
  (void)state;
  CFG.app_url = "https://app.example.com/base";
  CFG.app_redirect_urls = "https://app.example.com,http://localhost:5173,myapp://";
  return 0;
}

static void test_allowed_addresses(void **state) {
  (void)state;
  const char *yes[] = {"https://app.example.com",
                       "https://app.example.com/",
                       "https://APP.example.com/r?x=1#f",
                       "HTTPS://app.example.com/a",
                       "http://localhost:5173/reset",
                       "myapp://reset",
                       "MyApp://x/y?z=1"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) assert_true(links_allowed(yes[i]));
  const char *no[] = {"http://app.example.com/",
                      "https://app.example.com:443/",
                      "https://app.example.com.evil.io/",
                      "https://app.example.com@evil.io/",
                      "https://evil.io/?https://app.example.com",
                      "myapp:x",
                      "otherapp://x",
                      "javascript://app.example.com",
                      "/relative",
                      "",
                      "https://app.example.com/a b",
                      "https://app.example.com/\xc3\xa9",
                      "https://app.example.com/<x>",
                      "https://",
                      "https:///x",
                      "http://localhost:5174/"};
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) assert_false(links_allowed(no[i]));
}

static void test_links_are_built_before_the_fragment(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_string_equal(links_app(&a, NULL, "/reset-password", "token=ab"),
                      "https://app.example.com/base/reset-password?token=ab");
  assert_string_equal(links_app(&a, "myapp://r", "/x", "token=ab"), "myapp://r?token=ab");
  assert_string_equal(links_app(&a, "https://a.io/r?from=mail#top", "/x", "token=ab"),
                      "https://a.io/r?from=mail&token=ab#top");
  assert_string_equal(links_app(&a, "https://a.io/r?", "/x", "token=ab"), "https://a.io/r?token=ab");
  assert_string_equal(links_app(&a, NULL, "/payouts/onboarding/return", NULL),
                      "https://app.example.com/base/payouts/onboarding/return");
  arena_fini(&a);
}

UNIT_MAIN(setup, NULL, cmocka_unit_test(test_allowed_addresses),
          cmocka_unit_test(test_links_are_built_before_the_fragment))
