/* Requests to outside JSON services (weather, router, geocoder, push) over libcurl, with one
 * deadline for the whole exchange. Thread-safe: each call uses its own handle. */
#ifndef EXT_FETCH_H
#define EXT_FETCH_H
#include <jansson.h>

typedef enum {
  FETCH_OK,          /* a 2xx answer whose body is JSON */
  FETCH_TIMEOUT,     /* no complete answer within the deadline */
  FETCH_UNREACHABLE, /* connection refused, DNS failure, reset ... */
  FETCH_BAD_STATUS,  /* an answer outside 2xx (its body, when JSON, is still returned) */
  FETCH_BAD_BODY,    /* a 2xx answer that is not JSON, or is larger than 1 MiB */
} fetch_rc;

/* GETs url within timeout_ms. *status receives the HTTP status (0 without an answer); *out a
 * new reference to the parsed body, or NULL. The caller's text never reaches the log. */
fetch_rc fetch_json(const char *url, long timeout_ms, long *status, json_t **out);
/* POSTs payload as JSON to url within timeout_ms; the answer's body is read and dropped
 * (FETCH_OK for any 2xx). *status as for fetch_json. */
fetch_rc fetch_post_json(const char *url, const json_t *payload, long timeout_ms, long *status);
/* URL-encodes s into a new heap string (free()). */
char *fetch_escape(const char *s);

#endif
