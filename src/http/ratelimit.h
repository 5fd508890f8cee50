/* Fixed-window rate limits kept in the database, so every instance sharing it enforces one
 * limit and a restart forgets nothing. The window starts with a client's first request. */
#ifndef HTTP_RATELIMIT_H
#define HTTP_RATELIMIT_H
#include "core/errors.h"
#include "http/http.h"
#include <stdbool.h>

/* Counts one request of client (an address, or "<role>:<id>" for a per-account rule) under
 * rule. Returns ERR_OK while within the limit,
 * ERR_RATE_LIMITED with *retry_after_s (seconds until the window resets) past it, or
 * ERR_INTERNAL when the counter could not be written. */
err_t hs_rate_limit_hit(const hs_rate_limit *rule, const char *client, int *retry_after_s);
/* For metrics: calls fn with each rule's name and the requests it refused since start. */
void hs_rate_limit_refusals(void (*fn)(void *ctx, const char *rule, long n), void *ctx);

/* Deletes counters whose window started before before_ms; housekeeping passes an hour ago, so
 * every window must be an hour or shorter. ERR_INTERNAL when the database refused. */
err_t hs_rate_limit_prune(int64_t before_ms);

/* Login throttle: failed credential checks are counted per (account, client address) and
 * per client address, in 15-minute windows that start at the first failure (numbers in
 * docs/decisions.md). Past either limit the login answers 429 with Retry-After until that
 * window ends, without checking the password. A success clears the (account, address)
 * counter, never the address's own, so one valid account cannot reset a guessing run.
 * Use: hs_login_begin() before the credential check, then exactly one of hs_login_failed()
 * or hs_login_succeeded(). Any login route (customer, provider, staff, administrator) uses
 * it the same way, with an account name unique across kinds. */
typedef struct hs_login_attempt {
  const char *account_key, *address_key; /* arena strings */
  bool account_failures;                 /* the (account, address) counter is running */
} hs_login_attempt;

/* Starts an attempt at account (e.g. "provider:jane@example.com") from req->ip. ERR_OK to go
 * on; otherwise req has failed: 429 + Retry-After when throttled, 500 when the counters could
 * not be read. */
err_t hs_login_begin(hs_req *req, const char *account, hs_login_attempt *a);
/* The credentials were wrong (or the account unknown): counts one failure on both counters. */
void hs_login_failed(const hs_login_attempt *a);
/* The credentials were right: clears the (account, address) counter. */
void hs_login_succeeded(const hs_login_attempt *a);

#endif
