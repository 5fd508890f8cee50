/* A small JSON-over-HTTP client (libcurl) for the service's own tools, such as the demo
 * seeder, which drive the API as a client would. Thread-safe; one connection per call. */
#ifndef EXT_HTTPC_H
#define EXT_HTTPC_H
#include <jansson.h>
#include <stdbool.h>

/* One file of a multipart/form-data body: the form field and the local file to send. */
typedef struct httpc_file {
  const char *field;
  const char *path;
} httpc_file;

/* Sends method to url with `Authorization: Bearer <bearer>` when bearer is not NULL, and a
 * body: body as JSON (not stolen), or the nfiles files as multipart/form-data, or nothing.
 * On an answer: true, *status, and *answer the parsed JSON body (new reference; NULL when the
 * body is not JSON). False with err (256 bytes) when no answer came. */
bool httpc_request(const char *method, const char *url, const char *bearer, json_t *body, const httpc_file *files,
                   int nfiles, long *status, json_t **answer, char err[256]);

#endif
