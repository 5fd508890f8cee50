/* A provider's weekly availability: the JSON the API shows and stores
 * ({ mon: { start: "HH:MM", end: "HH:MM", on: bool }, ..., sun: {...} }, times in UTC) and the
 * test of whether an instant falls within it. Pure functions: thread-safe. */
#ifndef DOMAIN_PROVIDERS_AVAILABILITY_H
#define DOMAIN_PROVIDERS_AVAILABILITY_H
#include "core/jw.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct avail_day {
  bool on;
  int start, end; /* minutes after midnight, UTC */
} avail_day;

typedef struct avail_week {
  avail_day days[7]; /* 0 = Monday */
} avail_week;

/* The schedule from its stored text: the stored week, or Monday to Friday 08:00-17:00 when
 * unset. New reference. */
json_t *availability_json(const char *stored);
/* The same written to w. */
void availability_jw(jw *w, const char *stored);
/* Makes a whole week of a validated PUT body (days already checked by the schema): a day the
 * body leaves out is off, with the default hours. NULL with "availability.<day>: ..." in err
 * (256 bytes) when a day that is on does not end after it starts. New reference. */
json_t *availability_complete(json_t *given, char err[256]);
/* Reads a schedule JSON (as availability_json returns) into w. */
void availability_read(json_t *schedule, avail_week *w);
/* True when the instant at (epoch ms) is on a day that is on, at or after its start and
 * before its end. */
bool availability_fits(const avail_week *w, int64_t at);

#endif
