/* The service's one clock. Every rule that reads time (token expiry, windows, rate limits,
 * queue retries) calls clock_now_ms(), so the test clock moves all of them together.
 * Thread-safe. */
#ifndef CORE_CLOCK_H
#define CORE_CLOCK_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Milliseconds in a day and an hour (the service clock counts epoch milliseconds). */
#define DAY_MS (24LL * 3600 * 1000)
#define HOUR_MS (3600LL * 1000)

/* Milliseconds since the Unix epoch, wall clock plus the test offset. */
int64_t clock_now_ms(void);
/* Moves the service clock forward by ms (test environment only; callers enforce that). */
void clock_advance_ms(int64_t ms);
/* Stops the service clock where it is (frozen) or lets it run on from there (test environment
 * only): while frozen only clock_advance_ms moves it, so records made one after another share
 * their time and their order must come from clock_sequence. */
void clock_freeze(bool frozen);
/* A strictly increasing number (epoch ms x 1000 plus a counter) for ordering records made in
 * the same millisecond by this process. */
int64_t clock_sequence(void);
/* Milliseconds since the epoch by the real wall clock, without the test offset: for time that
 * instances compare with each other (queue leases), which a moved test clock must not expire. */
int64_t clock_real_ms(void);
/* Milliseconds from a monotonic clock, for durations; unaffected by the test offset. */
int64_t clock_mono_ms(void);
/* Initialises cv so that its timed waits count on the monotonic clock (clock_mono_ms), which
 * a change of the wall clock cannot shorten or stretch. */
void clock_cond_init(pthread_cond_t *cv);
/* Waits on cv (with mu held, as pthread_cond_wait) for at most ms milliseconds; cv was set up
 * by clock_cond_init. Wakes up early on a signal, like any condition wait. */
void clock_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);
/* Formats epoch milliseconds as ISO 8601 UTC with milliseconds ("2026-11-22T01:49:51.123Z");
 * out needs 25 bytes. */
void clock_format_iso(int64_t ms, char out[25]);
/* Parses an ISO 8601 date-time ("YYYY-MM-DDTHH:MM[:SS[.fff]](Z|±HH:MM)") or a date
 * ("YYYY-MM-DD", midnight UTC). Returns false when the text is not a valid instant. */
bool clock_parse_iso(const char *s, int64_t *ms);

#endif
