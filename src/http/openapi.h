/* The OpenAPI 3.1 document of the route table (GET /openapi.json, `marketplace openapi`,
 * committed as docs/openapi.json).
 *
 * Everything about an operation comes from its route row: method and path (":id" becomes a
 * path parameter), the roles (bearer security and `x-roles`), the request body from the same
 * validation rows that check requests (hs_field), multipart fields and limits from the upload
 * spec, query parameters, the success status and the response's component, and the error
 * statuses: those the row implies (401/403 with roles, 400 with input, 413 with a body, 429
 * with a limit, 409/422 and the Idempotency-Key header on idempotent routes, 431, 500, 503)
 * plus the row's `errors`. Response components (each domain object once) are JSON Schema
 * texts embedded at build time from every `<name>.schema.json` file under src/. Test-only routes
 * are left out, and so are the routes this environment does not serve (GODMODE's in
 * production), with the components only they use: the document lists what the server answers. */
#ifndef HTTP_OPENAPI_H
#define HTTP_OPENAPI_H
#include "http/http.h"

/* An event kind of the live-updates stream, as the document lists it: the component
 * `<Kind>Event` (quote.created: QuoteCreatedEvent; `id`, `event` and `data`) whose data is the
 * component `data`; every kind is one member of the stream's component (the route's
 * stream_schema, whose own `oneOf` lists the stream's control events). */
typedef struct hs_stream_event {
  const char *kind;        /* "quote.created" */
  const char *data;        /* the component of its data, e.g. "Quote" */
  const char *description; /* who receives it, and when */
  bool id_optional;        /* also delivered without an id (a banner pending before the stream opened) */
} hs_stream_event;
/* Adds an event kind to the document (borrowed; at start-up, before the document is built). */
void hs_openapi_add_event(const hs_stream_event *ev);

/* The document for the rows available in this environment (new reference). Dies when a row
 * names a component that no schema file defines, or two files define the same component. */
json_t *hs_openapi_document(const hs_route *rows, size_t n);
/* The document of the installed route table as compact JSON text, built once (borrowed;
 * thread-safe). */
const char *hs_openapi_text(size_t *len);

#endif
