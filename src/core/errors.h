/* The service's error codes. A handler or store returns one of these; one table maps each to
 * its HTTP status, and one function in the HTTP layer writes every error body (http/http.h: hs_fail). */
#ifndef CORE_ERRORS_H
#define CORE_ERRORS_H

typedef enum {
  ERR_OK = 0,
  ERR_BAD_REQUEST,      /* 400 */
  ERR_UNAUTHORIZED,     /* 401 */
  ERR_PAYMENT_REQUIRED, /* 402 */
  ERR_FORBIDDEN,        /* 403 */
  ERR_NOT_FOUND,        /* 404 */
  ERR_CONFLICT,         /* 409 */
  ERR_TOO_LARGE,        /* 413 */
  ERR_UNPROCESSABLE,    /* 422 */
  ERR_RATE_LIMITED,     /* 429 */
  ERR_HEADERS_TOO_LARGE, /* 431 */
  ERR_INTERNAL,         /* 500 */
  ERR_UNAVAILABLE,      /* 503 */
  ERR_GATEWAY_TIMEOUT,  /* 504 */
  ERR_INSUFFICIENT_STORAGE, /* 507 */
} err_t;

/* The HTTP status of an error code. */
int err_status(err_t e);
/* The default message of an error code ("Not found", "Unauthorized", ...). */
const char *err_default_message(err_t e);

#endif
