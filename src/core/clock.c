/* Wall clock with a process-wide test offset, and ISO 8601 formatting and parsing done with
 * plain arithmetic (no timezone database, no locale). */
#include "core/clock.h"
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int64_t offset_ms;
static _Atomic int64_t frozen_ms; /* the wall clock's reading when frozen; 0: it runs */

int64_t clock_now_ms(void) {
  int64_t frozen = atomic_load(&frozen_ms);
  return (frozen ? frozen : clock_real_ms()) + atomic_load(&offset_ms);
}

void clock_freeze(bool frozen) {
  int64_t real = clock_real_ms(), was = atomic_exchange(&frozen_ms, frozen ? real : 0);
  if (was && !frozen) atomic_fetch_add(&offset_ms, was - real); /* runs on from where it stood */
  if (was && frozen) atomic_store(&frozen_ms, was);             /* already frozen: stays put */
}

int64_t clock_sequence(void) {
  static _Atomic int64_t last;
  int64_t want = clock_now_ms() * 1000, prev = atomic_load(&last), next;
  do next = want > prev ? want : prev + 1;
  while (!atomic_compare_exchange_weak(&last, &prev, next));
  return next;
}

void clock_advance_ms(int64_t ms) { atomic_fetch_add(&offset_ms, ms); }

int64_t clock_real_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void clock_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

void clock_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(cv, mu, &until);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int *y, unsigned *m, unsigned *d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = (unsigned)(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int)(yoe + era * 400 + (*m <= 2));
}

void clock_format_iso(int64_t ms, char out[25]) {
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int millis = (int)(ms - secs * 1000);
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int rem = (int)(secs - days * 86400);
  int y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  /* by hand, not snprintf: this runs for every timestamp of every answer */
  static const char layout[] = "0000-00-00T00:00:00.000Z";
  const unsigned values[7] = {(unsigned)y % 10000u,
                              m % 100u,
                              d % 100u,
                              (unsigned)(rem / 3600) % 24u,
                              (unsigned)(rem / 60) % 60u,
                              (unsigned)rem % 60u,
                              (unsigned)millis % 1000u};
  static const int ends[7] = {3, 6, 9, 12, 15, 18, 22}; /* position of each field's last digit */
  memcpy(out, layout, sizeof layout);
  for (int f = 0; f < 7; f++)
    for (unsigned v = values[f], i = (unsigned)ends[f]; v; v /= 10, i--) out[i] = (char)('0' + v % 10);
}

static bool digits(const char *s, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

static bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

bool clock_parse_iso(const char *s, int64_t *ms) {
  static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, tz = 0;
  if (strlen(s) < 10 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
      !digits(s + 8, 2, &d))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y))) return false;
  const char *p = s + 10;
  if (*p) {
    if (*p != 'T' && *p != 't' && *p != ' ') return false;
    p++;
    if (!digits(p, 2, &h) || p[2] != ':' || !digits(p + 3, 2, &mi)) return false;
    p += 5;
    if (*p == ':') {
      if (!digits(p + 1, 2, &sec)) return false;
      p += 3;
      if (*p == '.') {
        int n = 0, scale = 100;
        for (p++; isdigit((unsigned char)*p); p++, n++) frac += scale * (*p - '0'), scale /= 10;
        if (n == 0) return false;
      }
    }
    if (h > 23 || mi > 59 || sec > 60) return false;
    if (*p == 'Z' || *p == 'z') {
      p++;
    } else if (*p == '+' || *p == '-') {
      int th, tm;
      int sign = *p == '-' ? -1 : 1;
      if (!digits(p + 1, 2, &th)) return false;
      p += 3;
      if (*p == ':') p++;
      if (!digits(p, 2, &tm)) return false;
      p += 2;
      if (th > 23 || tm > 59) return false;
      tz = sign * (th * 60 + tm);
    } else if (*p) {
      return false;
    }
    if (*p) return false;
  }
  int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
  *ms = ((days * 86400 + h * 3600 + mi * 60 + sec) - (int64_t)tz * 60) * 1000 + frac;
  return true;
}
