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

/* The client as the per-address limits count it (arena string): the address, or an IPv6
 * address's /64 (http/forwarded.h, hs_address_group). */
const char *hs_rate_client(hs_req *req);

/* Login throttle: every password check (logins, and the owner's current-password checks) is
 * counted against three fixed-window counters: the (account, client) pair, the client (both 15
 * minutes: 10 and 50 failures), and the account from anywhere (10 failures in 15 minutes; for
 * staff and administrators 20 in an hour, a lock an operator can lift with hs_login_unlock).
 * Clients are counted by hs_rate_client. Numbers in docs/decisions.md.
 *
 * An attempt counts itself in all three with one atomic upsert before the password is hashed,
 * so parallel attempts cannot pass a limit: while a counter is at its maximum (failures, plus
 * attempts still being checked) the attempt answers 429 with Retry-After until that window
 * ends, without checking the password, so the right one is refused too. A refused attempt
 * leaves the counters as they were; a right password takes its attempt back and clears the
 * (account, client) counter, never the account's or the client's, so neither a valid account
 * nor the owner's own login resets a guessing run. Counters are rows of rate_limits (shared by
 * every instance). Use: hs_login_begin() before the check, then hs_login_end() exactly once. */
typedef enum hs_login_kind {
  HS_LOGIN_ACCOUNT,   /* a customer or provider account */
  HS_LOGIN_PRIVILEGED /* a staff member or an administrator */
} hs_login_kind;

typedef enum hs_login_result {
  HS_LOGIN_WRONG,    /* the password did not match (or the account is unknown): a failure */
  HS_LOGIN_RIGHT,    /* the password matched */
  HS_LOGIN_UNCHECKED /* the check did not run (the hashing pool was full): not a failure */
} hs_login_result;

typedef struct hs_login_attempt {
  const char *keys[3];   /* arena strings: the (account, client), the client, the account */
  int64_t starts[3];     /* the window each counter had when this attempt counted itself */
  int64_t account_count; /* the account's count with this attempt */
  hs_login_kind kind;
} hs_login_attempt;

/* Starts an attempt at account (a kind and the email, e.g. "provider:jane@example.com", unique
 * across kinds) from the request's client. ERR_OK to go on, the attempt counted; otherwise req
 * has failed: 429 + Retry-After when throttled, 500 when the counters could not be written. */
err_t hs_login_begin(hs_req *req, const char *account, hs_login_kind kind, hs_login_attempt *a);
/* Ends a begun attempt: a failure stays counted; a right password or an unchecked attempt is
 * taken back. A privileged account's failure that fills its counter is logged (WARN, "login
 * throttle: account locked", with the account and the seconds until the lock ends). */
void hs_login_end(const hs_login_attempt *a, hs_login_result r);
/* Forgets the failures counted against account (the account's counter and its (account,
 * client) counters), so it can log in again at once: the operator's unlock. *was_locked tells
 * whether the account's counter was at its maximum in a running window. ERR_INTERNAL when the
 * database refused. For the command line (`marketplace staff unlock`); takes no request. */
err_t hs_login_unlock(const char *account, hs_login_kind kind, bool *was_locked);

#endif
