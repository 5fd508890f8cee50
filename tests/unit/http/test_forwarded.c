/* Unit tests for src/http/forwarded.c: the client address picked from X-Forwarded-For lines
 * with N trusted proxies, entries with ports and brackets, spaces, empty entries, entries that
 * are not addresses, and the cap on kept lines; the group a client is counted in (an IPv6
 * address's /64). */
#include "http/forwarded.h"
#include "unit.h"
#include <stdio.h>
#include <string.h>

/* The client picked from lines (NULL-terminated) with trusted proxies; NULL when none. */
static const char *pick(int trusted, const char *const *lines) {
  static char out[INET6_ADDRSTRLEN];
  hs_forwarded f = {.n = 0};
  for (; *lines; lines++) hs_forwarded_add(&f, *lines);
  strcpy(out, "untouched");
  return hs_forwarded_client(&f, trusted, out) ? out : NULL;
}

#define LINES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_from_the_right(void **state) {
  (void)state;
  assert_string_equal(pick(1, LINES("198.51.100.1, 198.51.100.2")), "198.51.100.2");
  assert_string_equal(pick(2, LINES("198.51.100.1, 198.51.100.2")), "198.51.100.1");
  /* fewer entries than proxies: the leftmost, which a trusted proxy wrote */
  assert_string_equal(pick(5, LINES("198.51.100.1, 198.51.100.2")), "198.51.100.1");
  /* repeated lines are one list, in arrival order */
  assert_string_equal(pick(2, LINES("10.0.0.1, 198.51.100.1", "198.51.100.2")), "198.51.100.1");
  assert_string_equal(pick(3, LINES("10.0.0.1, 198.51.100.1", "198.51.100.2")), "10.0.0.1");
}

static void test_entry_forms(void **state) {
  (void)state;
  assert_string_equal(pick(1, LINES("203.0.113.7:8080")), "203.0.113.7");
  assert_string_equal(pick(1, LINES("[2001:db8::1]:443")), "2001:db8::1");
  assert_string_equal(pick(1, LINES("2001:DB8:0:0::1")), "2001:db8::1"); /* canonical text */
  assert_string_equal(pick(1, LINES(" \t203.0.113.7 \t")), "203.0.113.7");
  assert_string_equal(pick(1, LINES("203.0.113.7, ,")), "203.0.113.7"); /* empty entries do not count */
}

static void test_not_an_address(void **state) {
  (void)state;
  assert_null(pick(1, LINES("unknown")));
  assert_null(pick(1, LINES("[2001:db8::1")));
  assert_null(pick(1, LINES("203.0.113.7:80:80")));
  assert_null(pick(1, LINES("")));
  /* what the client wrote left of the trusted entries is never parsed, even when it is junk */
  assert_string_equal(pick(1, LINES("<script>, 203.0.113.7")), "203.0.113.7");
  assert_null(pick(2, LINES("<script>, 203.0.113.7")));
  char out[INET6_ADDRSTRLEN] = "";
  hs_forwarded none = {.n = 0};
  assert_false(hs_forwarded_client(&none, 1, out));
}

/* Only the last HS_FORWARDED_LINES lines are kept: the oldest (the client's own) go first. */
static void test_line_cap(void **state) {
  (void)state;
  hs_forwarded f = {.n = 0};
  char lines[HS_FORWARDED_LINES + 4][32];
  for (int i = 0; i < HS_FORWARDED_LINES + 4; i++) {
    snprintf(lines[i], sizeof lines[i], "198.51.100.%d", i + 1);
    hs_forwarded_add(&f, lines[i]);
  }
  assert_int_equal(f.n, HS_FORWARDED_LINES);
  char out[INET6_ADDRSTRLEN];
  assert_true(hs_forwarded_client(&f, 1, out));
  assert_string_equal(out, "198.51.100.20");
  assert_true(hs_forwarded_client(&f, 100, out));
  assert_string_equal(out, "198.51.100.5");
}

static const char *group(const char *ip) {
  static char out[HS_ADDRESS_GROUP_LEN];
  hs_address_group(ip, out);
  return out;
}

static void test_address_group(void **state) {
  (void)state;
  assert_string_equal(group("203.0.113.7"), "203.0.113.7"); /* IPv4: the address */
  assert_string_equal(group("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  assert_string_equal(group("2001:db8:1:2::1"), "2001:db8:1:2::/64"); /* one /64, any spelling */
  assert_string_equal(group("2001:DB8:1:2:0::ffff"), "2001:db8:1:2::/64");
  assert_string_equal(group("2001:db8:1:3::1"), "2001:db8:1:3::/64"); /* the next /64 is another */
  assert_string_equal(group("::1"), "::/64");
  assert_string_equal(group("::ffff:198.51.100.7"), "198.51.100.7"); /* IPv4-mapped: the IPv4 address */
  assert_string_equal(group("unknown"), "unknown");
  assert_string_equal(group(NULL), "unknown");
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_from_the_right), cmocka_unit_test(test_entry_forms),
          cmocka_unit_test(test_not_an_address), cmocka_unit_test(test_line_cap), cmocka_unit_test(test_address_group))
