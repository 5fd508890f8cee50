/* Routes and body schemas of /auth/..., in the specification's field order. */
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"

#include "domain/common.h"
#include "domain/links.h"

/* bcrypt reads at most 72 bytes, so longer passwords (in characters or in bytes) are refused
 * rather than cut. */
#define PASSWORD(name)                                                                                                 \
  { name, F_STRING, F_REQUIRED, LEN(8, 72), .max_bytes = 72 }

static const hs_field register_fields[] = {
    {"email", F_EMAIL, F_REQUIRED},
    PASSWORD("password"),
    {"name", F_STRING, F_REQUIRED, LEN(1, 100)},
    {"address", F_STRING, F_REQUIRED, LEN(1, 300)},
    {"zip", F_ZIP, F_REQUIRED},
    {0},
};
static const hs_schema register_schema = {register_fields};

static const hs_field provider_register_fields[] = {
    {"email", F_EMAIL, F_REQUIRED},
    PASSWORD("password"),
    {"name", F_STRING, F_REQUIRED, LEN(1, 100)},
    {"phone", F_STRING, 0, LEN(0, 20)},
    COMMON_PROVIDER_LISTS(F_REQUIRED),
    {0},
};
static const hs_schema provider_register_schema = {provider_register_fields};

static const hs_field forgot_fields[] = {
    {"email", F_EMAIL, F_REQUIRED},
    {"role", F_ENUM, F_REQUIRED, .choices = HS_ACCOUNT_ROLE_NAMES},
    LINKS_REDIRECT_FIELD,
    {0},
};
static const hs_schema forgot_schema = {forgot_fields};

static const hs_field password_fields[] = {PASSWORD("password"), {0}};
const hs_schema auth_password_schema = {password_fields};

static const hs_field reset_fields[] = {
    {"token", F_STRING, F_REQUIRED, LEN(1, 512)},
    PASSWORD("newPassword"),
    {0},
};
static const hs_schema reset_schema = {reset_fields};

/* the owner's changes: the current password is checked as a login checks one (1 to 1024) */
#define CURRENT_PASSWORD                                                                                               \
  { "currentPassword", F_STRING, F_REQUIRED, LEN(1, 1024) }

static const hs_field change_password_fields[] = {
    CURRENT_PASSWORD,
    PASSWORD("newPassword"),
    {0},
};
static const hs_schema change_password_schema = {change_password_fields};

static const hs_field change_email_fields[] = {
    CURRENT_PASSWORD,
    {"email", F_EMAIL, F_REQUIRED},
    LINKS_REDIRECT_FIELD,
    {0},
};
static const hs_schema change_email_schema = {change_email_fields};

static const hs_field refresh_fields[] = {{"refreshToken", F_STRING, F_REQUIRED, LEN(1, 512)}, {0}};
static const hs_schema refresh_schema = {refresh_fields};

static const hs_field confirm_fields[] = {{"token", F_STRING, F_REQUIRED, LEN(1, 512)}, {0}};
static const hs_schema confirm_query = {confirm_fields};

#define OWNER (ROLE_USER | ROLE_PROVIDER)

static const hs_rate_limit forgot_limit = {"forgot-password", 5, 15 * 60 * 1000};
/* Customer and provider registrations together, per client address (an IPv6 client's /64). */
static const hs_rate_limit register_limit = {"register", 20, 60 * 60 * 1000};

const hs_route auth_routes[] = {
    {HS_POST, "/auth/register", api_auth_register, ROLE_OPEN, &register_schema, .ok = 201, .limit = &register_limit,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .summary = "Register a customer account", .response = "CustomerSession",
     .errors = ERRORS(ERR_CONFLICT)},
    {HS_POST, "/auth/login", api_auth_login, ROLE_OPEN, &common_login_schema, .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Log in as a customer", .response = "CustomerSession",
     .errors = ERRORS(ERR_UNAUTHORIZED, ERR_RATE_LIMITED)},
    {HS_POST, "/auth/provider/register", api_auth_provider_register, ROLE_OPEN, &provider_register_schema, .ok = 201,
     .limit = &register_limit, .flags = ROUTE_SLOW | ROUTE_SECRETS, .summary = "Register a provider account",
     .response = "ProviderSession", .errors = ERRORS(ERR_CONFLICT)},
    {HS_POST, "/auth/provider/login", api_auth_provider_login, ROLE_OPEN, &common_login_schema,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .summary = "Log in as a provider", .response = "ProviderSession",
     .errors = ERRORS(ERR_UNAUTHORIZED, ERR_RATE_LIMITED)},
    {HS_POST, "/auth/forgot-password", api_auth_forgot_password, ROLE_OPEN, &forgot_schema, .limit = &forgot_limit,
     .flags = ROUTE_SECRETS, .summary = "Email a password-reset link", .response = "MessageAnswer"},
    {HS_POST, "/auth/reset-password", api_auth_reset_password, ROLE_OPEN, &reset_schema,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .summary = "Set a new password with a reset token",
     .response = "PasswordReset"},
    {HS_POST, "/auth/change-password", api_auth_change_password, OWNER, &change_password_schema,
     .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Change the caller's password: a new session (token and refresh token); every other token and "
                "session of the account ends",
     .response = "SessionTokens", .errors = ERRORS(ERR_RATE_LIMITED)},
    {HS_POST, "/auth/change-email", api_auth_change_email, OWNER, &change_email_schema,
     .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Ask to change the caller's email: a confirmation link goes to the new address, a cancel link to "
                "the current one (5 an hour per account, 3 a day per address)",
     .response = "MessageAnswer", .errors = ERRORS(ERR_CONFLICT, ERR_RATE_LIMITED)},
    {HS_GET, "/auth/confirm-email", api_auth_confirm_email_page, ROLE_OPEN, .query = &confirm_query,
     .summary = "The emailed confirmation link: a page whose button confirms (this GET changes nothing)",
     .response = "text/html", .errors = ERRORS(ERR_BAD_REQUEST)},
    {HS_POST, "/auth/confirm-email", api_auth_confirm_email, ROLE_OPEN, .query = &confirm_query, .flags = ROUTE_SECRETS,
     .summary = "Confirm an email change (the page's button): the account's email changes", .response = "text/html",
     .errors = ERRORS(ERR_BAD_REQUEST, ERR_CONFLICT)},
    {HS_GET, "/auth/cancel-email-change", api_auth_cancel_email_change_page, ROLE_OPEN, .query = &confirm_query,
     .summary = "The cancel link emailed to the current address: a page whose button cancels the change",
     .response = "text/html"},
    {HS_POST, "/auth/cancel-email-change", api_auth_cancel_email_change, ROLE_OPEN, .query = &confirm_query,
     .flags = ROUTE_SECRETS, .summary = "Cancel a pending email change (the page's button)", .response = "text/html",
     .errors = ERRORS(ERR_BAD_REQUEST)},
    /* the server's own pages of the emailed links (auth_pages.c): HTML whatever happens */
    {HS_GET, "/app/reset-password", api_auth_app_reset_page, ROLE_OPEN,
     .summary = "The reset link's page when APP_URL is unset (?token=): a form for the new password",
     .response = "text/html", .errors = ERRORS(ERR_BAD_REQUEST)},
    {HS_POST, "/app/reset-password", api_auth_app_reset, ROLE_OPEN, &reset_schema,
     .flags = ROUTE_RAW_BODY | ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "The reset page's form (application/x-www-form-urlencoded: token, newPassword): a page that "
                "says how it went",
     .response = "text/html", .errors = ERRORS(ERR_BAD_REQUEST)},
    {HS_GET, "/app/confirm-email", api_auth_app_confirm_page, ROLE_OPEN,
     .summary = "The confirmation link's page when APP_URL is unset (?token=): a button that confirms",
     .response = "text/html", .errors = ERRORS(ERR_BAD_REQUEST)},
    {HS_POST, "/app/confirm-email", api_auth_app_confirm, ROLE_OPEN, .flags = ROUTE_SECRETS,
     .summary = "The confirmation page's button (?token=): the account's email changes; a page that says how it "
                "went",
     .response = "text/html", .errors = ERRORS(ERR_BAD_REQUEST, ERR_CONFLICT)},
    {HS_POST, "/auth/refresh", api_auth_refresh, ROLE_OPEN, &refresh_schema, .flags = ROUTE_SECRETS,
     .summary = "Exchange a refresh token for a new token and a new refresh token (each refresh token works once: "
                "presented again, it ends its session and every token of it)",
     .response = "SessionTokens", .errors = ERRORS(ERR_UNAUTHORIZED)},
    {HS_POST, "/auth/logout", api_auth_logout, ROLE_ANY,
     .summary = "End the presented token (any kind: customer, provider, staff, administrator), its session and "
                "the push devices it registered",
     .response = "Ok"},
    {HS_POST, "/auth/logout-all", api_auth_logout_all, OWNER,
     .summary = "End every token and session of the caller's account, and remove its push devices", .response = "Ok"},
    {0},
};
