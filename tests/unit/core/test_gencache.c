/* Unit tests for src/core/gencache.c: a hit only at the generation an entry was kept at and
 * within its lifetime, nothing kept or found at generation 0, the value appended as kept, a key
 * that takes another's slot, and values of no bytes. */
#include "core/arena.h"
#include "core/gencache.h"
#include "unit.h"
#include <string.h>
#include <time.h>

static void test_hit_only_at_its_generation(void **state) {
  (void)state;
  gencache *c = gencache_new(16, 60000);
  arena a;
  arena_init(&a);
  jw w;
  jw_init(&w, &a, 0);
  assert_false(gencache_get(c, "k", 7, &w)); /* nothing kept yet */
  gencache_put(c, "k", 7, "{\"a\":1}", 7);
  assert_true(gencache_get(c, "k", 7, &w));
  assert_int_equal(jw_len(&w), 7);
  assert_memory_equal(jw_text(&w), "{\"a\":1}", 7);
  assert_false(gencache_get(c, "k", 8, NULL)); /* the generation moved on */
  assert_false(gencache_get(c, "other", 7, NULL));
  gencache_put(c, "k", 0, "x", 1); /* generation 0: nothing is kept */
  assert_false(gencache_get(c, "k", 0, NULL));
  assert_true(gencache_get(c, "k", 7, NULL));
  gencache_put(c, "k", 9, "", 0); /* a plain yes */
  assert_true(gencache_get(c, "k", 9, NULL));
  assert_false(gencache_get(c, "k", 7, NULL));
  arena_fini(&a);
  gencache_free(c);
}

static void test_a_key_that_takes_the_slot(void **state) {
  (void)state;
  gencache *c = gencache_new(1, 60000); /* one slot: every key shares it */
  gencache_put(c, "first", 1, "1", 1);
  gencache_put(c, "second", 1, "2", 1);
  assert_false(gencache_get(c, "first", 1, NULL));
  assert_true(gencache_get(c, "second", 1, NULL));
  gencache_free(c);
}

static void test_lifetime(void **state) {
  (void)state;
  gencache *c = gencache_new(4, 20);
  gencache_put(c, "k", 1, "v", 1);
  assert_true(gencache_get(c, "k", 1, NULL));
  nanosleep(&(struct timespec){0, 40 * 1000000L}, NULL);
  assert_false(gencache_get(c, "k", 1, NULL));
  gencache_free(c);
  gencache_free(NULL);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_hit_only_at_its_generation),
          cmocka_unit_test(test_a_key_that_takes_the_slot), cmocka_unit_test(test_lifetime))
