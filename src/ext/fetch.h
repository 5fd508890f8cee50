/* Requests to outside JSON services (weather, router, geocoder, push), and the demo seeder's
 * requests to the API, over libcurl, with one deadline for the whole exchange. Thread-safe: each call uses its own
 * handle. */
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
/* One file of a multipart/form-data body: the form field and the local file to send. */
typedef struct fetch_file {
  const char *field;
  const char *path;
} fetch_file;
/* Sends method to url with `Authorization: Bearer <bearer>` when bearer is not NULL, and a
 * body: payload as JSON, or the nfiles files as multipart/form-data, or nothing; for the
 * service's own tools (the demo seeder) that drive the API as a client would. *status and *out
 * as for fetch_json, whatever the status (*out NULL when the body is not JSON). */
fetch_rc fetch_request(const char *method, const char *url, const char *bearer, const json_t *payload,
                       const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out);
/* URL-encodes s into a new heap string (free()). */
char *fetch_escape(const char *s);

#endif
