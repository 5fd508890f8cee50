/* Unit tests for src/core/util.c: the thread-safe errno text. */
/* cmocka.h needs these four headers first. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "core/util.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void test_errno_text(void **state) {
  (void)state;
  char buf[128];
  assert_string_equal(errno_text(ENOENT, buf, sizeof buf), "No such file or directory");
  errno = EACCES;
  assert_string_equal(ERRNO_TEXT(), "Permission denied");
  assert_non_null(strstr(errno_text(123456, buf, sizeof buf), "123456")); /* "Unknown error 123456" */
}

/* Two threads asking for unknown codes at once each get their own text (strerror would let
 * them share one static buffer). */
static void *unknown_code(void *arg) {
  int code = *(int *)arg;
  char buf[128], want[64];
  snprintf(want, sizeof want, "%d", code);
  for (int i = 0; i < 20000; i++)
    if (!strstr(errno_text(code, buf, sizeof buf), want)) return (void *)1;
  return NULL;
}

static void test_errno_text_per_thread(void **state) {
  (void)state;
  int codes[2] = {100001, 200002};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, unknown_code, &codes[i]);
  for (int i = 0; i < 2; i++) {
    void *bad;
    pthread_join(t[i], &bad);
    assert_null(bad);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errno_text),
      cmocka_unit_test(test_errno_text_per_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
