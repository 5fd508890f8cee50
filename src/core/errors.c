/* The one table from error code to HTTP status and default message. */
#include "core/errors.h"

static const struct {
  int status;
  const char *message;
} table[] = {
    [ERR_OK] = {200, "OK"},
    [ERR_BAD_REQUEST] = {400, "Bad request"},
    [ERR_UNAUTHORIZED] = {401, "Unauthorized"},
    [ERR_PAYMENT_REQUIRED] = {402, "Payment failed"},
    [ERR_FORBIDDEN] = {403, "Forbidden"},
    [ERR_NOT_FOUND] = {404, "Not found"},
    [ERR_CONFLICT] = {409, "Conflict"},
    [ERR_TOO_LARGE] = {413, "Request body too large"},
    [ERR_UNPROCESSABLE] = {422, "Unprocessable"},
    [ERR_RATE_LIMITED] = {429, "Too many requests"},
    [ERR_HEADERS_TOO_LARGE] = {431, "Request header fields too large"},
    [ERR_INTERNAL] = {500, "Internal server error"},
    [ERR_UNAVAILABLE] = {503, "Server busy"},
    [ERR_GATEWAY_TIMEOUT] = {504, "Upstream service timed out"},
    [ERR_INSUFFICIENT_STORAGE] = {507, "Insufficient storage"},
};

int err_status(err_t e) { return e <= ERR_INSUFFICIENT_STORAGE ? table[e].status : 500; }

const char *err_default_message(err_t e) {
  return e <= ERR_INSUFFICIENT_STORAGE ? table[e].message : "Internal server error";
}
