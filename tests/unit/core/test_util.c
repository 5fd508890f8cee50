/* Unit tests for src/core/util.c: the thread-safe errno text, base64url. */
#include "core/util.h"
#include "unit.h"
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

/* RFC 4648's test vectors, without padding, and a round trip of every length and byte. */
static void test_b64url(void **state) {
  (void)state;
  static const char *const vectors[][2] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
  char text[64];
  unsigned char bytes[64];
  size_t n;
  for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++) {
    assert_int_equal(b64url_encode((const unsigned char *)vectors[i][0], strlen(vectors[i][0]), text),
                     strlen(vectors[i][1]));
    assert_string_equal(text, vectors[i][1]);
    assert_true(b64url_decode(text, strlen(text), bytes, sizeof bytes, &n));
    assert_int_equal(n, strlen(vectors[i][0]));
    assert_memory_equal(bytes, vectors[i][0], n);
  }
  unsigned char all[40];
  for (size_t len = 0; len <= sizeof all; len++) {
    for (size_t i = 0; i < len; i++) all[i] = (unsigned char)(251 - 37 * i);
    size_t chars = b64url_encode(all, len, text);
    assert_true(b64url_decode(text, chars, bytes, sizeof bytes, &n));
    assert_int_equal(n, len);
    assert_memory_equal(bytes, all, len);
  }
  assert_int_equal(b64url_encode((const unsigned char *)"\xfb\xff", 2, text), 3);
  assert_string_equal(text, "-_8"); /* the URL-safe characters, not + and / */
  assert_false(b64url_decode("Zm9v+", 5, bytes, sizeof bytes, &n));
  assert_false(b64url_decode("Zm9v/w", 6, bytes, sizeof bytes, &n));
  assert_false(b64url_decode("Zm9vY", 5, bytes, sizeof bytes, &n)); /* a length no encoding has */
  assert_false(b64url_decode("Zm=v", 4, bytes, sizeof bytes, &n));
  assert_false(b64url_decode("Z\0m9", 4, bytes, sizeof bytes, &n));
  assert_false(b64url_decode("Zh", 2, bytes, sizeof bytes, &n)); /* "Zg" is the only encoding of "f" */
  assert_false(b64url_decode("Zm9vYmFy", 8, bytes, 5, &n));      /* more than cap */
  assert_true(b64url_decode("Zm8=", 4, bytes, sizeof bytes, &n) && n == 2);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_b64url), cmocka_unit_test(test_errno_text),
          cmocka_unit_test(test_errno_text_per_thread))
