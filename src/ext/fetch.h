/* Outbound HTTP, the one transfer engine of the adapters: every request to a service outside
 * (Stripe, push, weather, routing, geocoding, and the demo seeder's requests to the API) is one
 * fetch_exchange, which holds the rules they share: http and https only, no signals (threads),
 * a user agent, a deadline for the whole exchange and one for connecting, and a cap on the
 * answer kept in memory. The JSON helpers below are exchanges with a JSON answer. S3 streams its
 * bodies through its own libcurl handle, set up by fetch_easy_setup with the same rules.
 * Thread-safe: each call uses its own handle. The caller's text never reaches the log. */
#ifndef EXT_FETCH_H
#define EXT_FETCH_H
#include <jansson.h>
#include <stddef.h>

struct buf;

typedef enum {
  FETCH_OK,          /* a 2xx answer (whose body is JSON, for the JSON helpers) */
  FETCH_TIMEOUT,     /* no complete answer within the deadline */
  FETCH_UNREACHABLE, /* connection refused, DNS failure, reset, a scheme other than http(s) ... */
  FETCH_BAD_STATUS,  /* an answer outside 2xx (its body, when JSON, is still returned) */
  FETCH_BAD_BODY,    /* a 2xx answer that is not JSON, or is larger than 1 MiB (JSON helpers) */
  FETCH_TOO_LARGE,   /* fetch_exchange: the answer passed max_answer (or memory); never retried */
} fetch_rc;

/* One file of a multipart/form-data body: the form field and the local file to send. */
typedef struct fetch_file {
  const char *field;
  const char *path;
} fetch_file;

/* One request, described once. */
typedef struct fetch_req {
  const char *method;         /* "GET", "POST", ... */
  const char *url;            /* http:// or https://; any other scheme is refused */
  const char *const *headers; /* "Name: value" lines, NULL-terminated; NULL for none */
  const char *body;           /* body_len bytes sent as they are; NULL: none (an empty body
                                 for a method other than GET) */
  size_t body_len;
  const fetch_file *files; /* instead of body: these files as multipart/form-data */
  int nfiles;
  size_t max_answer;       /* the most bytes of answer kept; 0: 1 MiB */
  long timeout_ms;         /* the whole exchange */
  long connect_timeout_ms; /* 0: the lesser of timeout_ms and 5 s */
} fetch_req;

/* What came back. */
typedef struct fetch_res {
  long status; /* the HTTP status; 0 without an answer */
  char *body;  /* the answer's bytes plus a NUL (heap, fetch_res_fini); NULL when none */
  size_t len;
  const char *error; /* without a complete answer: libcurl's reason (a static string) */
} fetch_res;

/* Sends rq and reads the answer into *res (release it with fetch_res_fini whatever the
 * result). FETCH_OK for a 2xx answer, FETCH_BAD_STATUS for any other (body kept in both
 * cases); FETCH_TIMEOUT, FETCH_UNREACHABLE or FETCH_TOO_LARGE without a usable answer (body
 * NULL, error set). Nothing is retried here: retries are the adapter's, which should not
 * retry FETCH_TOO_LARGE (the same answer would come back). */
fetch_rc fetch_exchange(const fetch_req *rq, fetch_res *res);
void fetch_res_fini(fetch_res *res);

/* For an adapter that drives a libcurl easy handle itself (S3's streamed transfers): applies
 * to curl (a CURL *) the settings every exchange shares: url, http and https only, no signals,
 * the user agent, timeout_ms for the whole transfer and connect_timeout_ms (0: the lesser of
 * timeout_ms and 5 s) to connect, and the answer's bytes appended to *answer, whose cap
 * bounds them (a refused byte ends the transfer with CURLE_WRITE_ERROR; buf_result says
 * why). */
void fetch_easy_setup(void *curl, const char *url, long timeout_ms, long connect_timeout_ms, struct buf *answer);

/* GETs url within timeout_ms. *status receives the HTTP status (0 without an answer); *out a
 * new reference to the parsed body, or NULL. */
fetch_rc fetch_json(const char *url, long timeout_ms, long *status, json_t **out);
/* POSTs payload as JSON to url within timeout_ms; the answer's body is read and dropped
 * (FETCH_OK for any 2xx). *status as for fetch_json. */
fetch_rc fetch_post_json(const char *url, const json_t *payload, long timeout_ms, long *status);
/* Sends method to url with `Authorization: Bearer <bearer>` when bearer is not NULL, and a
 * body: payload as JSON, or the nfiles files as multipart/form-data, or nothing; for the
 * service's own tools (the demo seeder) that drive the API as a client would. *status and *out
 * as for fetch_json, whatever the status (*out NULL when the body is not JSON). */
fetch_rc fetch_request(const char *method, const char *url, const char *bearer, const json_t *payload,
                       const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out);
/* URL-encodes s into a new heap string (free()). */
char *fetch_escape(const char *s);

#endif
