/* Unit tests for src/db/stmt_cache.c: a key found by its text wherever it lives, the same
 * address holding another text later (a buffer on the stack) finding that text's entry or none,
 * and clearing forgetting the recent entries too. */
#include "db/stmt_cache.h"
#include "unit.h"
#include <stdio.h>
#include <string.h>

static void test_found_by_text_at_any_address(void **state) {
  (void)state;
  stmt_cache c = {0};
  stmt_cache_add(&c, "SELECT 1")->stmt = (void *)1;
  char copy[32];
  snprintf(copy, sizeof copy, "%s", "SELECT 1");
  assert_ptr_equal(stmt_cache_find(&c, "SELECT 1")->stmt, (void *)1);
  assert_ptr_equal(stmt_cache_find(&c, copy)->stmt, (void *)1);
  assert_ptr_equal(stmt_cache_find(&c, copy)->stmt, (void *)1); /* again, from the recent slot */
  assert_null(stmt_cache_find(&c, "SELECT 2"));
  stmt_cache_clear(&c, NULL);
}

static void test_an_address_that_holds_another_text(void **state) {
  (void)state;
  stmt_cache c = {0};
  stmt_cache_add(&c, "SELECT a FROM t")->stmt = (void *)1;
  stmt_cache_add(&c, "SELECT b FROM t")->stmt = (void *)2;
  char sql[32];
  snprintf(sql, sizeof sql, "%s", "SELECT a FROM t");
  assert_ptr_equal(stmt_cache_find(&c, sql)->stmt, (void *)1);
  snprintf(sql, sizeof sql, "%s", "SELECT b FROM t"); /* same address, same length, another text */
  assert_ptr_equal(stmt_cache_find(&c, sql)->stmt, (void *)2);
  snprintf(sql, sizeof sql, "%s", "SELECT c FROM t");
  assert_null(stmt_cache_find(&c, sql));
  snprintf(sql, sizeof sql, "%s", "SELECT a FROM t");
  assert_ptr_equal(stmt_cache_find(&c, sql)->stmt, (void *)1);
  stmt_cache_clear(&c, NULL);
}

static void test_clear_forgets_the_recent_entries(void **state) {
  (void)state;
  stmt_cache c = {0};
  static const char sql[] = "SELECT 3";
  stmt_cache_add(&c, sql)->stmt = (void *)3;
  assert_non_null(stmt_cache_find(&c, sql));
  stmt_cache_clear(&c, NULL);
  assert_null(stmt_cache_find(&c, sql));
  assert_int_equal(c.count, 0);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_found_by_text_at_any_address),
          cmocka_unit_test(test_an_address_that_holds_another_text),
          cmocka_unit_test(test_clear_forgets_the_recent_entries))
