/* Unit tests for the image variants' keys (src/ext/storage.c): which variants a key names, read
 * from the key alone, and that a key made without them never names any. */
#include "core/ids.h"
#include "ext/storage.h"
#include "unit.h"
#include <string.h>

static void expect_variants(int w, int h, int n, const int *sizes) {
  char key[STORAGE_KEY_LEN];
  storage_new_key("png", w, h, key);
  assert_true(storage_key_valid(key));
  assert_int_equal(strlen(key), ID_LEN + 4);
  storage_variant v[STORAGE_VARIANTS_MAX];
  assert_int_equal(storage_variants_of(key, v), n);
  for (int i = 0; i < n; i++) {
    assert_int_equal(v[i].width, sizes[2 * i]);
    assert_int_equal(v[i].height, sizes[2 * i + 1]);
    assert_true(storage_key_valid(v[i].key));
    assert_string_equal(v[i].key + ID_LEN, ".webp");
    assert_memory_equal(v[i].key, key, 21); /* the original's id, but its check */
    assert_string_not_equal(v[i].key, key);
    storage_variant none[STORAGE_VARIANTS_MAX];
    assert_int_equal(storage_variants_of(v[i].key, none), 0); /* a variant has no variants */
  }
}

static void test_sizes_on_the_long_side(void **state) {
  (void)state;
  expect_variants(4000, 3000, 2, (const int[]){256, 192, 1024, 768});
  expect_variants(3000, 4000, 2, (const int[]){192, 256, 768, 1024});
  expect_variants(1300, 1300, 2, (const int[]){256, 256, 1024, 1024});
  expect_variants(65535, 1, 2, (const int[]){256, 1, 1024, 1}); /* the short side is at least 1 */
  expect_variants(600, 1000, 1, (const int[]){154, 256});       /* 153.6 rounds up */
  expect_variants(1024, 300, 1, (const int[]){256, 75});        /* no 1024 copy of a 1024 image */
}

static void test_no_variant_at_or_above_the_original(void **state) {
  (void)state;
  expect_variants(256, 256, 0, NULL);
  expect_variants(200, 120, 0, NULL);
  expect_variants(1, 1, 0, NULL);
  expect_variants(0, 0, 0, NULL); /* not an image */
}

static void test_random_keys_name_no_variants(void **state) {
  (void)state;
  storage_variant v[STORAGE_VARIANTS_MAX];
  char key[STORAGE_KEY_LEN];
  for (int i = 0; i < 200000; i++) { /* keys stored before variants existed */
    id_new(key);
    strcat(key, ".jpg");
    assert_int_equal(storage_variants_of(key, v), 0);
  }
  assert_int_equal(storage_variants_of(NULL, v), 0);
  assert_int_equal(storage_variants_of("../etc/passwd", v), 0);
}

static void test_an_edited_size_names_no_variants(void **state) {
  (void)state;
  char key[STORAGE_KEY_LEN];
  storage_new_key("jpg", 2000, 1500, key);
  storage_variant v[STORAGE_VARIANTS_MAX];
  assert_int_equal(storage_variants_of(key, v), 2);
  key[16] = key[16] == 'z' ? 'y' : 'z'; /* the width's last digit */
  assert_int_equal(storage_variants_of(key, v), 0);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_sizes_on_the_long_side),
          cmocka_unit_test(test_no_variant_at_or_above_the_original), cmocka_unit_test(test_random_keys_name_no_variants),
          cmocka_unit_test(test_an_edited_size_names_no_variants))
