/* Unit tests for src/core/clock.c: ISO 8601 formatting and parsing, and the test offset. */
#include "core/clock.h"
#include "unit.h"
#include <string.h>

static void assert_formats(int64_t ms, const char *want) {
  char out[25];
  memset(out, 'x', sizeof out);
  clock_format_iso(ms, out);
  assert_string_equal(out, want);
  assert_int_equal(strlen(out), 24);
}

static void assert_parses(const char *s, int64_t want) {
  int64_t got = -1;
  if (!clock_parse_iso(s, &got)) fail_msg("clock_parse_iso rejected \"%s\"", s);
  if (got != want) fail_msg("clock_parse_iso(\"%s\") = %lld, want %lld", s, (long long)got, (long long)want);
}

static void assert_rejects(const char *s) {
  int64_t got = 12345;
  if (clock_parse_iso(s, &got)) fail_msg("clock_parse_iso accepted \"%s\" as %lld", s, (long long)got);
}

static void test_format_epoch(void **state) {
  (void)state;
  assert_formats(0, "1970-01-01T00:00:00.000Z");
}

static void test_format_known_instant(void **state) {
  (void)state;
  assert_formats(1700000000123LL, "2023-11-14T22:13:20.123Z");
  assert_formats(1795312191123LL, "2026-11-22T01:49:51.123Z");
  assert_formats(1, "1970-01-01T00:00:00.001Z");
  assert_formats(999, "1970-01-01T00:00:00.999Z");
  assert_formats(86400000LL - 1, "1970-01-01T23:59:59.999Z");
}

static void test_format_leap_day(void **state) {
  (void)state;
  assert_formats(1709210096789LL, "2024-02-29T12:34:56.789Z");
  /* the day after a leap day is March 1st */
  assert_formats(1709210096789LL + 86400000LL, "2024-03-01T12:34:56.789Z");
}

static void test_format_after_2038(void **state) {
  (void)state;
  assert_formats(2147483648000LL, "2038-01-19T03:14:08.000Z"); /* 2^31 seconds */
  assert_formats(4107542400001LL, "2100-03-01T00:00:00.001Z"); /* 2100 is not a leap year */
  assert_formats(253402300799999LL, "9999-12-31T23:59:59.999Z");
}

static void test_format_before_epoch(void **state) {
  (void)state;
  assert_formats(-1, "1969-12-31T23:59:59.999Z");
}

static void test_parse_utc_z(void **state) {
  (void)state;
  assert_parses("1970-01-01T00:00:00Z", 0);
  assert_parses("2026-11-22T01:49:51.123Z", 1795312191123LL);
  assert_parses("2026-11-22t01:49:51.123z", 1795312191123LL);
  assert_parses("2026-11-22 01:49:51.123Z", 1795312191123LL);
  assert_parses("2026-11-22T10:00Z", 1795305600000LL + 10 * 3600000LL); /* no seconds */
  assert_parses("2024-02-29T12:34:56.789Z", 1709210096789LL);
}

static void test_parse_offsets(void **state) {
  (void)state;
  /* 10:00 at +02:00 is 08:00 UTC; 10:00 at -05:30 is 15:30 UTC */
  assert_parses("2026-11-22T10:00:00+02:00", 1795334400000LL);
  assert_parses("2026-11-22T10:00:00+0200", 1795334400000LL);
  assert_parses("2026-11-22T10:00:00-05:30", 1795361400000LL);
  assert_parses("2026-11-22T10:00:00-0530", 1795361400000LL);
  assert_parses("2026-11-22T10:00-0530", 1795361400000LL);
  assert_parses("2026-11-22T10:00:00+00:00", 1795305600000LL + 10 * 3600000LL);
}

static void test_parse_fraction_digits(void **state) {
  (void)state;
  const int64_t base = 1795305600000LL + 10 * 3600000LL; /* 2026-11-22T10:00:00Z */
  assert_parses("2026-11-22T10:00:00.5Z", base + 500);
  assert_parses("2026-11-22T10:00:00.05Z", base + 50);
  assert_parses("2026-11-22T10:00:00.12Z", base + 120);
  assert_parses("2026-11-22T10:00:00.123Z", base + 123);
  assert_parses("2026-11-22T10:00:00.1239Z", base + 123); /* beyond milliseconds truncated */
  assert_parses("2026-11-22T10:00:00.123456789Z", base + 123);
  assert_parses("2026-11-22T10:00:00.250+02:00", base + 250 - 2 * 3600000LL);
  assert_rejects("2026-11-22T10:00:00.Z"); /* a dot needs at least one digit */
}

static void test_parse_date_only(void **state) {
  (void)state;
  assert_parses("2026-11-22", 1795305600000LL);
  assert_parses("1970-01-01", 0);
  assert_parses("2024-02-29", 1709164800000LL);
}

static void test_parse_round_trip(void **state) {
  (void)state;
  const int64_t samples[] = {
      0, 1, 999, 1700000000123LL, 1709210096789LL, 2147483648000LL, 4107542400001LL, 253402300799999LL};
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    char buf[25];
    clock_format_iso(samples[i], buf);
    assert_parses(buf, samples[i]);
  }
  /* and the other way round */
  const char *texts[] = {"2026-11-22T01:49:51.123Z", "2000-02-29T23:59:59.999Z", "2038-01-19T03:14:08.000Z"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    int64_t ms;
    char buf[25];
    assert_true(clock_parse_iso(texts[i], &ms));
    clock_format_iso(ms, buf);
    assert_string_equal(buf, texts[i]);
  }
}

static void test_parse_rejects(void **state) {
  (void)state;
  assert_rejects("2026-13-01");             /* month 13 */
  assert_rejects("2026-00-10");             /* month 0 */
  assert_rejects("2026-02-30");             /* February has no 30th */
  assert_rejects("2025-02-29");             /* 2025 is not a leap year */
  assert_rejects("1900-02-29");             /* century, not a leap year */
  assert_rejects("2026-04-31");             /* April has 30 days */
  assert_rejects("2026-11-00");             /* day 0 */
  assert_rejects("2026-11-22T25:00Z");      /* hour 25 */
  assert_rejects("2026-11-22T10:60Z");      /* minute 60 */
  assert_rejects("2026-11-22T10:00:61Z");   /* second 61 */
  assert_rejects("2026-11-22T10:00+24:00"); /* offset hour out of range */
  assert_rejects("");
  assert_rejects("yesterday");
  assert_rejects("2026-11-22T10:00Zjunk");
  assert_rejects("2026-11-22junk");
  assert_rejects("2026-11-22T");
  assert_rejects("2026-11-22T10");
  assert_rejects("2026-11-22T10:00:00+02");
  assert_rejects("2026/11/22");
  assert_rejects("26-11-22");
}

static void test_advance_moves_now(void **state) {
  (void)state;
  int64_t before = clock_now_ms();
  int64_t mono_before = clock_mono_ms();
  clock_advance_ms(3600 * 1000LL);
  int64_t after = clock_now_ms();
  int64_t mono_after = clock_mono_ms();
  /* moved by the hour, plus at most a little real time */
  assert_in_range(after - before, 3600 * 1000LL, 3600 * 1000LL + 5000);
  /* the monotonic clock ignores the offset */
  assert_in_range(mono_after - mono_before, 0, 5000);
  clock_advance_ms(1000);
  assert_true(clock_now_ms() >= after + 1000);
}

/* A timed wait on a clock_cond_init condition lasts its time on the monotonic clock, and a
 * signal ends it early. */
static pthread_mutex_t wait_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cv;

static void *signal_soon(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wait_mu);
  pthread_cond_signal(&wait_cv);
  pthread_mutex_unlock(&wait_mu);
  return NULL;
}

static void test_cond_wait_ms(void **state) {
  (void)state;
  clock_cond_init(&wait_cv);
  pthread_mutex_lock(&wait_mu);
  int64_t t0 = clock_mono_ms();
  clock_cond_wait_ms(&wait_cv, &wait_mu, 60);
  int64_t waited = clock_mono_ms() - t0;
  assert_true(waited >= 59 && waited < 1000);
  pthread_t t;
  pthread_create(&t, NULL, signal_soon, NULL);
  t0 = clock_mono_ms();
  clock_cond_wait_ms(&wait_cv, &wait_mu, 5000); /* the signal comes once this wait releases the mutex */
  assert_true(clock_mono_ms() - t0 < 4000);
  pthread_mutex_unlock(&wait_mu);
  pthread_join(t, NULL);
  pthread_cond_destroy(&wait_cv);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_format_epoch), cmocka_unit_test(test_format_known_instant),
          cmocka_unit_test(test_format_leap_day), cmocka_unit_test(test_format_after_2038),
          cmocka_unit_test(test_format_before_epoch), cmocka_unit_test(test_parse_utc_z),
          cmocka_unit_test(test_parse_offsets), cmocka_unit_test(test_parse_fraction_digits),
          cmocka_unit_test(test_parse_date_only), cmocka_unit_test(test_parse_round_trip),
          cmocka_unit_test(test_parse_rejects), cmocka_unit_test(test_advance_moves_now),
          cmocka_unit_test(test_cond_wait_ms))
