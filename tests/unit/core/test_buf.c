/* Unit tests for src/core/buf.c: the cap reached exactly and passed by one byte (add, addn,
 * addf), the failure kept until reset, printf output that grows the buffer, sizes near SIZE_MAX
 * that must not wrap, dropping from the front, and handing the memory over. */
#include "core/buf.h"
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Under AddressSanitizer an allocation too large to make returns NULL, as malloc does. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void test_empty(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 10);
  assert_null(buf_ptr(&b));
  assert_int_equal(buf_len(&b), 0);
  assert_int_equal(buf_result(&b), BUF_OK);
  assert_int_equal(buf_addn(&b, "", 0), BUF_OK); /* nothing added: the content is "" */
  assert_string_equal(buf_ptr(&b), "");
  buf_free(&b);
  assert_null(buf_ptr(&b));
}

static void test_cap_reached_exactly(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 8);
  assert_int_equal(buf_add(&b, "abcd"), BUF_OK);
  assert_int_equal(buf_addn(&b, "efgh", 4), BUF_OK);
  assert_int_equal(buf_len(&b), 8);
  assert_string_equal(buf_ptr(&b), "abcdefgh");
  assert_true(b.alloc <= 9); /* never more than the cap and its NUL */
  assert_int_equal(buf_addn(&b, "", 0), BUF_OK);
  buf_free(&b);
}

static void test_one_byte_over(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 8);
  assert_int_equal(buf_add(&b, "abcdefg"), BUF_OK);
  assert_int_equal(buf_add(&b, "hi"), BUF_TOO_LARGE);
  assert_int_equal(buf_len(&b), 7); /* unchanged */
  assert_string_equal(buf_ptr(&b), "abcdefg");
  /* the failure stays: a piece that would fit is refused too, until reset */
  assert_int_equal(buf_add(&b, "h"), BUF_TOO_LARGE);
  assert_int_equal(buf_result(&b), BUF_TOO_LARGE);
  buf_reset(&b);
  assert_int_equal(buf_len(&b), 0);
  assert_string_equal(buf_ptr(&b), "");
  assert_int_equal(buf_add(&b, "12345678"), BUF_OK);
  assert_int_equal(buf_addf(&b, "%d", 9), BUF_TOO_LARGE);
  assert_string_equal(buf_ptr(&b), "12345678");
  buf_free(&b);

  buf_init(&b, 0); /* a cap of 0 holds nothing */
  assert_int_equal(buf_add(&b, "x"), BUF_TOO_LARGE);
  assert_null(buf_ptr(&b));
  buf_free(&b);
}

static void test_printf_growth(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1 << 20);
  char want[4096] = "";
  for (int i = 0; i < 300; i++) {
    assert_int_equal(buf_addf(&b, "%d,", i), BUF_OK);
    size_t n = strlen(want);
    snprintf(want + n, sizeof want - n, "%d,", i);
  }
  assert_string_equal(buf_ptr(&b), want);
  assert_int_equal(buf_len(&b), strlen(want));
  /* one piece larger than everything allocated so far */
  char big[3000];
  memset(big, 'x', sizeof big - 1), big[sizeof big - 1] = 0;
  size_t before = buf_len(&b);
  assert_int_equal(buf_addf(&b, "[%s]", big), BUF_OK);
  assert_int_equal(buf_len(&b), before + sizeof big + 1);
  assert_int_equal(buf_ptr(&b)[before], '[');
  assert_int_equal(buf_ptr(&b)[buf_len(&b) - 1], ']');
  assert_int_equal(buf_ptr(&b)[buf_len(&b)], 0);
  buf_free(&b);
}

/* printf output over the cap fails, whether it would have fitted the memory already
 * allocated or not, and leaves the content terminated where it was. */
static void test_printf_over_cap(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 100);
  assert_int_equal(buf_add(&b, "0123456789"), BUF_OK);
  assert_int_equal(buf_addf(&b, "%090d", 7), BUF_OK); /* exactly the cap */
  assert_int_equal(buf_len(&b), 100);
  buf_reset(&b);
  assert_int_equal(buf_add(&b, "abc"), BUF_OK);
  assert_int_equal(buf_addf(&b, "%0100d", 7), BUF_TOO_LARGE);
  assert_int_equal(buf_len(&b), 3);
  assert_string_equal(buf_ptr(&b), "abc");
  buf_free(&b);
}

/* Sizes that would wrap if added up before being compared: refused, nothing allocated. */
static void test_sizes_do_not_wrap(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, SIZE_MAX);
  assert_int_equal(b.cap, BUF_CAP_MAX);
  assert_int_equal(buf_add(&b, "abc"), BUF_OK);
  assert_int_equal(buf_addn(&b, "x", SIZE_MAX), BUF_TOO_LARGE);
  assert_int_equal(buf_len(&b), 3);
  buf_reset(&b);
  assert_int_equal(buf_addn(&b, "x", SIZE_MAX - 2), BUF_TOO_LARGE);
  buf_reset(&b);
  assert_int_equal(buf_addn(&b, "x", BUF_CAP_MAX - 2), BUF_NOMEM); /* within the cap, beyond memory */
  assert_int_equal(buf_len(&b), 0);
  assert_int_equal(buf_result(&b), BUF_NOMEM);
  buf_free(&b);

  buf_init(&b, 16);
  assert_int_equal(buf_add(&b, "0123456789"), BUF_OK);
  assert_int_equal(buf_addn(&b, "x", SIZE_MAX - 5), BUF_TOO_LARGE);
  assert_string_equal(buf_ptr(&b), "0123456789");
  buf_free(&b);
}

static void test_drop_front(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 64);
  buf_drop_front(&b, 3); /* empty: nothing to drop */
  assert_int_equal(buf_addn(&b, "ab\0cdef", 7), BUF_OK);
  buf_drop_front(&b, 2);
  assert_int_equal(buf_len(&b), 5);
  assert_memory_equal(buf_ptr(&b), "\0cdef", 6);
  buf_drop_front(&b, 100);
  assert_int_equal(buf_len(&b), 0);
  assert_string_equal(buf_ptr(&b), "");
  buf_free(&b);
}

static void test_take(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 32);
  size_t n = 99;
  assert_null(buf_take(&b, &n));
  assert_int_equal(n, 0);
  assert_int_equal(buf_add(&b, "kept"), BUF_OK);
  char *p = buf_take(&b, &n);
  assert_string_equal(p, "kept");
  assert_int_equal(n, 4);
  assert_null(buf_ptr(&b));
  assert_int_equal(buf_len(&b), 0);
  assert_int_equal(b.cap, 32);
  free(p);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_empty), cmocka_unit_test(test_cap_reached_exactly),
          cmocka_unit_test(test_one_byte_over), cmocka_unit_test(test_printf_growth),
          cmocka_unit_test(test_printf_over_cap), cmocka_unit_test(test_sizes_do_not_wrap),
          cmocka_unit_test(test_drop_front), cmocka_unit_test(test_take))
