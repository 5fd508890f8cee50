/* The service's error codes. A handler or store returns one of these; one table maps each to
 * its HTTP status, its default message and its default machine-readable code (the `code` of
 * the error body), and one function in the HTTP layer writes every error body (http/http.h:
 * hs_fail). */
#ifndef CORE_ERRORS_H
#define CORE_ERRORS_H
#include <stdbool.h>

typedef enum {
  ERR_OK = 0,
  ERR_BAD_REQUEST,            /* 400 */
  ERR_UNAUTHORIZED,           /* 401 */
  ERR_PAYMENT_REQUIRED,       /* 402 */
  ERR_FORBIDDEN,              /* 403 */
  ERR_NOT_FOUND,              /* 404 */
  ERR_CONFLICT,               /* 409 */
  ERR_TOO_LARGE,              /* 413 */
  ERR_UNPROCESSABLE,          /* 422 */
  ERR_RATE_LIMITED,           /* 429 */
  ERR_HEADERS_TOO_LARGE,      /* 431 */
  ERR_INTERNAL,               /* 500 */
  ERR_UNAVAILABLE,            /* 503 */
  ERR_GATEWAY_TIMEOUT,        /* 504 */
  ERR_INSUFFICIENT_STORAGE,   /* 507 */
  ERR_UNSUPPORTED_MEDIA_TYPE, /* 415 */
  ERR_COUNT                   /* not an error: the number of codes above */
} err_t;

/* The HTTP status of an error code. */
int err_status(err_t e);
/* The default message of an error code ("Not found", "Unauthorized", ...). */
const char *err_default_message(err_t e);
/* The default machine-readable code of an error code ("not_found", "unauthorized", ...):
 * snake_case, one of ERR_CODES. */
const char *err_default_code(err_t e);

/* The error code whose status is status (the first in the table), or ERR_INTERNAL. */
err_t err_of_status(int status);

/* Every machine-readable code an error body may carry, NULL-terminated: each error code's
 * default, then the more precise ones handlers name (validation_failed, invalid_state, ...)
 * and the specification's own, which keep its spelling (WITHIN_CANCELLATION_WINDOW, ...). The
 * OpenAPI document lists them as the error body's `code` enum. */
extern const char *const ERR_CODES[];
/* True when code is one of ERR_CODES. */
bool err_code_known(const char *code);

/* The precise codes handlers name (each also in ERR_CODES). */
#define ERR_CODE_VALIDATION "validation_failed"                   /* 400 `<field>: <message>`, with `field` */
#define ERR_CODE_INVALID_STATE "invalid_state"                    /* the record's state does not allow the action */
#define ERR_CODE_INVALID_CREDENTIALS "invalid_credentials"        /* a login's email or password is wrong */
#define ERR_CODE_INVALID_TOKEN "invalid_token"                    /* a refresh token is unknown, expired or ended */
#define ERR_CODE_EMAIL_TAKEN "email_taken"                        /* another account has that email */
#define ERR_CODE_THREAD_FULL "thread_full"                        /* a message thread holds its 250 messages */
#define ERR_CODE_IDEMPOTENCY_IN_PROGRESS "idempotency_key_in_use" /* the key's first request still runs */
#define ERR_CODE_IDEMPOTENCY_REUSED "idempotency_key_reused"      /* the key was used for another request */
#define ERR_CODE_REFUND_PENDING "refund_pending"                  /* an earlier refund's outcome is not known yet */

#endif
