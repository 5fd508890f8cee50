/* Fixed-window rate limits kept in the database, so every instance sharing it enforces one
 * limit and a restart forgets nothing. The window starts with a client's first request. */
#ifndef HTTP_RATELIMIT_H
#define HTTP_RATELIMIT_H
#include "core/errors.h"
#include "http/http.h"

/* Counts one request of client under rule. Returns ERR_OK while within the limit,
 * ERR_RATE_LIMITED with *retry_after_s (seconds until the window resets) past it, or
 * ERR_INTERNAL when the counter could not be written. */
err_t hs_rate_limit_hit(const hs_rate_limit *rule, const char *client, int *retry_after_s);
/* For metrics: calls fn with each rule's name and the requests it refused since start. */
void hs_rate_limit_refusals(void (*fn)(void *ctx, const char *rule, long n), void *ctx);

#endif
