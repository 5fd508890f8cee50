/* Unit tests for src/core/jw.c: every value the writer produces is compared with what jansson
 * (json_dumps with JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15), as the server
 * printed answers before) prints for the same value; invalid UTF-8, which jansson refuses,
 * must come out as valid JSON with U+FFFD in place of each bad byte. */
#include "core/clock.h"
#include "core/jw.h"
#include "unit.h"
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DUMP_FLAGS (JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15))

/* jansson's text of v (stolen). */
static char *jansson_text(json_t *v) {
  assert_non_null(v);
  char *t = json_dumps(v, DUMP_FLAGS);
  json_decref(v);
  assert_non_null(t);
  return t;
}

static void assert_same(const jw *w, json_t *v) {
  char *want = jansson_text(v);
  if (strcmp(jw_text(w), want)) fail_msg("writer: %s\njansson: %s", jw_text(w), want);
  assert_int_equal(jw_len(w), strlen(want));
  free(want);
}

/* Writes value with put (jw_str, jw_real, ...) on a fresh writer in arena a, and compares the text
 * with jansson's text of want. */
#define ASSERT_WRITES_AS(a, put, value, want)                                                                          \
  do {                                                                                                                 \
    jw w_;                                                                                                             \
    jw_init(&w_, (a), 0);                                                                                              \
    put(&w_, value);                                                                                                   \
    assert_same(&w_, (want));                                                                                          \
  } while (0)

static void test_strings_match_jansson(void **state) {
  (void)state;
  const char *cases[] = {"",
                         "plain text",
                         "quote \" backslash \\ slash /",
                         "\b\f\n\r\t",
                         "\x01\x02\x1f\x7f",
                         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                         "\xe2\x80\xa8 line separator kept",
                         "<script>alert(1)</script>",
                         "\xf4\x8f\xbf\xbf last code point"};
  arena a;
  arena_init(&a);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ASSERT_WRITES_AS(&a, jw_str, cases[i], json_string(cases[i]));
  /* every control character, alone and inside text */
  for (int c = 1; c < 0x20; c++) {
    char s[4] = {'a', (char)c, 'b', 0};
    ASSERT_WRITES_AS(&a, jw_str, s, json_string(s));
  }
  /* an embedded NUL, through the length-taking call */
  jw w;
  jw_init(&w, &a, 0);
  jw_strn(&w, "a\0b", 3);
  assert_same(&w, json_stringn("a\0b", 3));
  arena_fini(&a);
}

/* Decodes the writer's text with jansson and compares it with want (len bytes). */
static void assert_decodes_to(const jw *w, const char *want, size_t len) {
  json_error_t err;
  json_t *v = json_loads(jw_text(w), JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
  if (!v) fail_msg("the writer's text is not JSON (%s): %s", err.text, jw_text(w));
  assert_true(json_is_string(v));
  assert_int_equal(json_string_length(v), len);
  assert_memory_equal(json_string_value(v), want, len);
  json_decref(v);
}

static void test_invalid_utf8_replaced(void **state) {
  (void)state;
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"\xff", "\xef\xbf\xbd"},                                                 /* never a UTF-8 byte */
      {"a\x80z", "a\xef\xbf\xbdz"},                                             /* lone continuation */
      {"\xc3", "\xef\xbf\xbd"},                                                 /* truncated at the end */
      {"\xc3(", "\xef\xbf\xbd("},                                               /* bad continuation */
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                                 /* overlong '/' */
      {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong, 3 bytes */
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},                 /* a surrogate */
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* past U+10FFFF */
      {"ok \xe2\x82\xac \xfe \"", "ok \xe2\x82\xac \xef\xbf\xbd \""},
  };
  arena a;
  arena_init(&a);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_null(json_string(cases[i].in)); /* jansson refuses these */
    jw w;
    jw_init(&w, &a, 0);
    jw_str(&w, cases[i].in);
    assert_decodes_to(&w, cases[i].out, strlen(cases[i].out));
  }
  arena_fini(&a);
}

/* Random byte strings: where jansson accepts the string, the same bytes; where it does not,
 * valid JSON whose decoded text is valid UTF-8. */
static void test_random_bytes(void **state) {
  (void)state;
  unsigned seed = 12345;
  arena a;
  arena_init(&a);
  for (int round = 0; round < 20000; round++) {
    char s[24];
    size_t n = (size_t)(rand_r(&seed) % 24);
    for (size_t i = 0; i < n; i++) {
      int r = rand_r(&seed) % 4;
      s[i] = (char)(r == 0 ? rand_r(&seed) % 0x20 : r == 1 ? 0x80 + rand_r(&seed) % 0x80 : 0x20 + rand_r(&seed) % 0x60);
    }
    jw w;
    jw_init(&w, &a, 0);
    jw_strn(&w, s, n);
    json_t *ref = json_stringn(s, n);
    if (ref) {
      assert_same(&w, ref);
    } else {
      json_t *v = json_loads(jw_text(&w), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
      if (!v) fail_msg("not JSON: %s", jw_text(&w));
      assert_non_null(json_stringn(json_string_value(v), json_string_length(v))); /* valid UTF-8 */
      json_decref(v);
    }
    if (round % 1000 == 0) arena_fini(&a);
  }
  arena_fini(&a);
}

static void test_reals_match_jansson(void **state) {
  (void)state;
  const double cases[] = {0.0,
                          -0.0,
                          1.0,
                          -1.0,
                          0.1,
                          0.30000000000000004,
                          1e20,
                          1e-5,
                          1.5e-7,
                          1e15,
                          1e14,
                          123456789012345678.0,
                          3.141592653589793,
                          40.7128,
                          -73.98,
                          1e300,
                          -1e-300,
                          5e-324,
                          DBL_MAX,
                          99999.99,
                          40.123456789012345,
                          0.5,
                          2.5e+100};
  arena a;
  arena_init(&a);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ASSERT_WRITES_AS(&a, jw_real, cases[i], json_real(cases[i]));
  unsigned seed = 7;
  for (int i = 0; i < 20000; i++) {
    double v = ((double)rand_r(&seed) / RAND_MAX - 0.5) * pow(10, rand_r(&seed) % 40 - 20);
    ASSERT_WRITES_AS(&a, jw_real, v, json_real(v));
  }
  const double bad[] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < 3; i++) {
    jw w;
    jw_init(&w, &a, 0);
    jw_real(&w, bad[i]);
    assert_string_equal(jw_text(&w), "null");
  }
  arena_fini(&a);
}

static void test_integers_and_money(void **state) {
  (void)state;
  const int64_t ints[] = {0, 1, -1, 42, 1000000, INT64_MAX, INT64_MIN, -9007199254740993LL};
  arena a;
  arena_init(&a);
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    ASSERT_WRITES_AS(&a, jw_int, ints[i], json_integer(ints[i]));
  for (int64_t c = -20000; c <= 20000; c++) {
    ASSERT_WRITES_AS(&a, jw_money, c, json_real((double)c / 100.0));
    if (c % 5000 == 0) arena_fini(&a);
  }
  const int64_t big[] = {9999999999999LL, -9999999999999LL, 10000000000000LL, 123456789012345678LL, INT64_MAX / 2};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    ASSERT_WRITES_AS(&a, jw_money, big[i], json_real((double)big[i] / 100.0));
  arena_fini(&a);
}

/* Members, elements, nesting, null/true/false, timestamps and stored JSON text, against the
 * same tree built with jansson (which keeps insertion order). */
static void test_structure_matches_jansson(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  jw w;
  jw_init(&w, &a, 1); /* tiny: forces the buffer to grow many times */
  jw_obj(&w);
  jw_key(&w, "id"), jw_str(&w, "c123");
  jw_key(&w, "none"), jw_str(&w, NULL);
  jw_key(&w, "yes"), jw_bool(&w, true);
  jw_key(&w, "no"), jw_bool(&w, false);
  jw_key(&w, "at"), jw_iso(&w, 1764000000123LL);
  jw_key(&w, "details"), jw_json(&w, "{\"a\":[1,2,{\"b\":null}],\"c\":\"d\"}");
  jw_key(&w, "empty"), jw_obj(&w), jw_obj_end(&w);
  jw_key(&w, "list"), jw_arr(&w);
  for (int i = 0; i < 300; i++) {
    jw_obj(&w);
    jw_key(&w, "n"), jw_int(&w, i);
    jw_key(&w, "amount"), jw_money(&w, i * 37);
    jw_key(&w, "tags"), jw_arr(&w), jw_str(&w, "x"), jw_null(&w), jw_arr(&w), jw_arr_end(&w), jw_arr_end(&w);
    jw_obj_end(&w);
  }
  jw_arr_end(&w);
  jw_key(&w, "cells"), jw_arr(&w);
  jw_cell_iso(&w, "0"), jw_cell_iso(&w, NULL), jw_cell_real(&w, "40.5"), jw_cell_real(&w, NULL);
  jw_cell_int(&w, "-7"), jw_cell_money(&w, "1250"), jw_cell_money(&w, NULL), jw_cell_bool(&w, "1"),
      jw_cell_bool(&w, "0"), jw_cell_bool(&w, NULL);
  jw_arr_end(&w);
  jw_obj_end(&w);

  char iso[25];
  clock_format_iso(1764000000123LL, iso);
  json_t *list = json_array();
  for (int i = 0; i < 300; i++)
    json_array_append_new(list,
                          json_pack("{s:i,s:f,s:[s,n,[]]}", "n", i, "amount", (double)(i * 37) / 100.0, "tags", "x"));
  json_t *want = json_pack("{s:s,s:n,s:b,s:b,s:s,s:o,s:{},s:o,s:[s,n,f,n,i,f,n,b,b,b]}", "id", "c123", "none", "yes", 1,
                           "no", 0, "at", iso, "details", json_loads("{\"a\":[1,2,{\"b\":null}],\"c\":\"d\"}", 0, NULL),
                           "empty", "list", list, "cells", "1970-01-01T00:00:00.000Z", 40.5, -7, 12.5, 1, 0, 0);
  assert_same(&w, want);
  arena_fini(&a);
}

static void test_top_level_values(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  jw w;
  jw_init(&w, &a, 0);
  jw_arr(&w), jw_arr_end(&w);
  assert_string_equal(jw_text(&w), "[]");
  jw_init(&w, &a, 0);
  jw_json(&w, NULL);
  assert_string_equal(jw_text(&w), "null");
  jw_init(&w, &a, 0);
  jw_iso(&w, -1);
  assert_string_equal(jw_text(&w), "\"1969-12-31T23:59:59.999Z\"");
  arena_fini(&a);
}

/* jw_pack writes what json_pack builds for the same format and values. */
static void test_pack_matches_json_pack(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  jw w;
  jw_init(&w, &a, 0);
  jw_pack(&w, "{s:b, s:s}", "ok", 1, "message", "Welcome \"in\"");
  assert_same(&w, json_pack("{s:b,s:s}", "ok", 1, "message", "Welcome \"in\""));
  jw_init(&w, &a, 0);
  jw_pack(&w, "{s:i,s:I,s:f,s:n,s:b}", "a", -3, "b", (int64_t)1 << 40, "c", 40.7, "d", "e", 0);
  assert_same(&w, json_pack("{s:i,s:I,s:f,s:n,s:b}", "a", -3, "b", (json_int_t)1 << 40, "c", 40.7, "d", "e", 0));
  jw_init(&w, &a, 0);
  jw_pack(&w, "{s:[s,i,{s:s}],s:s}", "list", "x", 2, "k", "v", "after", NULL);
  assert_same(&w, json_pack("{s:[s,i,{s:s}],s:n}", "list", "x", 2, "k", "v", "after"));
  jw_init(&w, &a, 0);
  jw_pack(&w, "{s:M,s:T}", "amount", (int64_t)1250, "at", (int64_t)0);
  assert_string_equal(jw_text(&w), "{\"amount\":12.5,\"at\":\"1970-01-01T00:00:00.000Z\"}");
  arena_fini(&a);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_strings_match_jansson), cmocka_unit_test(test_invalid_utf8_replaced),
          cmocka_unit_test(test_random_bytes), cmocka_unit_test(test_reals_match_jansson),
          cmocka_unit_test(test_integers_and_money), cmocka_unit_test(test_structure_matches_jansson),
          cmocka_unit_test(test_top_level_values), cmocka_unit_test(test_pack_matches_json_pack))
