/* The one table from error code to HTTP status, default message and default code, and the
 * list of every code an error body may carry. */
#include "core/errors.h"
#include <string.h>

static const struct {
  int status;
  const char *message, *code;
} table[ERR_COUNT] = {
    [ERR_OK] = {200, "OK", NULL},
    [ERR_BAD_REQUEST] = {400, "Bad request", "bad_request"},
    [ERR_UNAUTHORIZED] = {401, "Unauthorized", "unauthorized"},
    [ERR_PAYMENT_REQUIRED] = {402, "Payment failed", "payment_failed"},
    [ERR_FORBIDDEN] = {403, "Forbidden", "forbidden"},
    [ERR_NOT_FOUND] = {404, "Not found", "not_found"},
    [ERR_CONFLICT] = {409, "Conflict", "conflict"},
    [ERR_TOO_LARGE] = {413, "Request body too large", "payload_too_large"},
    [ERR_UNSUPPORTED_MEDIA_TYPE] = {415, "Unsupported media type", "unsupported_media_type"},
    [ERR_UNPROCESSABLE] = {422, "Unprocessable", "unprocessable"},
    [ERR_RATE_LIMITED] = {429, "Too many requests", "rate_limited"},
    [ERR_HEADERS_TOO_LARGE] = {431, "Request header fields too large", "header_fields_too_large"},
    [ERR_INTERNAL] = {500, "Internal server error", "internal_error"},
    [ERR_UNAVAILABLE] = {503, "Server busy", "service_unavailable"},
    [ERR_GATEWAY_TIMEOUT] = {504, "Upstream service timed out", "gateway_timeout"},
    [ERR_INSUFFICIENT_STORAGE] = {507, "Insufficient storage", "insufficient_storage"},
};

const char *const ERR_CODES[] = {
    /* the defaults, in status order */
    "bad_request", "unauthorized", "payment_failed", "forbidden", "not_found", "conflict", "payload_too_large",
    "unsupported_media_type", "unprocessable", "rate_limited", "header_fields_too_large", "internal_error",
    "service_unavailable", "gateway_timeout", "insufficient_storage",
    /* named by handlers where they say more */
    ERR_CODE_VALIDATION, ERR_CODE_INVALID_STATE, ERR_CODE_INVALID_CREDENTIALS, ERR_CODE_EMAIL_TAKEN,
    ERR_CODE_THREAD_FULL, ERR_CODE_IDEMPOTENCY_IN_PROGRESS, ERR_CODE_IDEMPOTENCY_REUSED,
    /* account deletion while a job of the account runs (issue 24, account management) */
    "account_busy",
    /* a refund asked while an earlier refund of the payment is being settled (issue 30) */
    ERR_CODE_REFUND_PENDING,
    /* a refresh token refused (issue 33, sessions) */
    ERR_CODE_INVALID_TOKEN,
    /* the specification's, in its spelling */
    "WITHIN_CANCELLATION_WINDOW", "verification_required", "premium_required", "already_member", NULL};

static bool valid(err_t e) { return e > ERR_OK && e < ERR_COUNT; }

int err_status(err_t e) { return e == ERR_OK ? 200 : valid(e) ? table[e].status : 500; }

const char *err_default_message(err_t e) { return valid(e) ? table[e].message : "Internal server error"; }

const char *err_default_code(err_t e) { return valid(e) ? table[e].code : "internal_error"; }

err_t err_of_status(int status) {
  for (int e = ERR_BAD_REQUEST; e < ERR_COUNT; e++)
    if (table[e].status == status) return (err_t)e;
  return ERR_INTERNAL;
}

bool err_code_known(const char *code) {
  for (const char *const *c = ERR_CODES; code && *c; c++)
    if (!strcmp(*c, code)) return true;
  return false;
}
