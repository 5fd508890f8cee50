/* Writing answers, without a transport: the one error body, the JSON answer's bytes (made
 * once, by the thread that ran the request, and compressed when the client takes gzip), CORS,
 * and the header lines of every answer, handed to the transport through a callback. The
 * transport (http/server.c) only turns them into its response objects. */
#ifndef HTTP_ANSWER_H
#define HTTP_ANSWER_H
#include <stdbool.h>

typedef struct hs_call hs_call;

/* Reads CORS_ORIGINS; once, before the first request. */
void hs_answer_init(void);
/* Settles the request's outcome into its answer, once: an error (req->err) becomes its status
 * and the error body, in the spec's shape ({"error", "code"?}; a 5xx other than 503, 504 and 507
 * is {"error": "Internal server error", "requestId"}). Then the JSON answer's bytes: the
 * writer's text stays in the arena (c->out NULL) unless compressed; a value is serialised into
 * c->out (heap). The answer is recorded for the request's Idempotency-Key. Idempotent; a
 * file answer is left to the transport. */
void hs_answer_prepare(hs_call *c);
/* Forgets the answer decided so far and the bytes prepared of it (a request run again
 * elsewhere). */
void hs_answer_clear(hs_call *c);
/* A CORS preflight (OPTIONS): 204 when some route serves the path, else 404. */
void hs_answer_preflight(hs_call *c);
/* Calls add(resp, name, value) for each header line of the prepared answer: its type and
 * encoding, X-Request-Id, nosniff, Cache-Control, CORS, Vary, Idempotent-Replayed,
 * Retry-After, and a preflight's Allow and Access-Control-Allow-*. */
void hs_answer_headers(const hs_call *c, void (*add)(void *resp, const char *name, const char *value), void *resp);

#endif
