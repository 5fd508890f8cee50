/* LD_PRELOAD for the API tests (conftest.py's `stepped_clock` fixture builds and loads it):
 * CLOCK_REALTIME read through clock_gettime() moves in steps of STEPPED_CLOCK_MS milliseconds
 * (50 by default) instead of continuously, so every record a server stamps within one step
 * carries the same millisecond. Tests of the order of records created back to back use it to
 * make those ties certain instead of hoping the machine is fast enough to make some.
 *
 * The other clocks are untouched (timeouts and durations use CLOCK_MONOTONIC). Deadlines that
 * the service computes from CLOCK_REALTIME for a timed wait come out at most one step early,
 * so a step must stay well below the shortest such wait (the log flusher's 100 ms). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static long long step_ns = 50LL * 1000000;

__attribute__((constructor)) static void init(void) {
  real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  const char *ms = getenv("STEPPED_CLOCK_MS");
  if (ms && atoll(ms) > 0) step_ns = atoll(ms) * 1000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (!real_clock_gettime) init();
  int rc = real_clock_gettime(id, ts);
  if (rc == 0 && id == CLOCK_REALTIME) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
    ns -= ns % step_ns;
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
  }
  return rc;
}
