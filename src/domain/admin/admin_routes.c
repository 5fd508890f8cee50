/* Routes and schemas of /admin/... (GODMODE: every row is development-only). */
#include "core/util.h"
#include "domain/admin/admin.h"
#include "domain/admin/admin_api.h"
#include "domain/common.h"

static const hs_field impersonate_fields[] = {
    {"targetId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"targetRole", F_ENUM, F_REQUIRED, .choices = HS_ACCOUNT_ROLE_NAMES},
    {0},
};
static const hs_schema impersonate_schema = {impersonate_fields};

static const hs_field delete_fields[] = {{"role", F_ENUM, F_REQUIRED, .choices = HS_ACCOUNT_ROLE_NAMES}, {0}};
static const hs_schema delete_query = {delete_fields};

static const hs_field generate_fields[] = {
    {"customers", F_INT, 0, RANGE(0, 1000)},
    {"professionals", F_INT, 0, RANGE(0, 1000)},
    {"requestsPerCustomer", F_INT, 0, RANGE(0, 20)},
    {0},
};
static const hs_schema generate_schema = {generate_fields};

static const hs_field notify_fields[] = {
    {"userId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"role", F_ENUM, F_REQUIRED, .choices = HS_ACCOUNT_ROLE_NAMES},
    {"title", F_STRING, F_REQUIRED, LEN(1, 200)},
    {"body", F_STRING, F_REQUIRED, LEN(1, 2000)},
    {"icon", F_STRING, 0, LEN(0, 64)},
    {0},
};
static const hs_schema notify_schema = {notify_fields};

static const hs_rate_limit login_limit = {"admin-login", 10, 15 * 60 * 1000};

const hs_route admin_routes[] = {
    {HS_POST, "/admin/login", api_admin_login, ROLE_OPEN, &common_login_schema, .limit = &login_limit,
     .flags = ROUTE_DEV_ONLY | ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Log in as an administrator (24-hour token; GODMODE)", .response = "AdminSession",
     .errors = ERRORS(ERR_UNAUTHORIZED)},
    {HS_POST, "/admin/logout", api_admin_logout, ROLE_ADMIN, .ok = 204, .flags = ROUTE_DEV_ONLY,
     .summary = "End the presented administrator token"},
    {HS_GET, "/admin/users", api_admin_users, ROLE_ADMIN, .flags = ROUTE_DEV_ONLY,
     .summary = "Every customer and provider (newest 1000 each; GODMODE)", .response = "AdminAccounts"},
    {HS_POST, "/admin/impersonate", api_admin_impersonate, ROLE_ADMIN, &impersonate_schema,
     .flags = ROUTE_DEV_ONLY | ROUTE_SECRETS, .summary = "A 2-hour token as a customer or provider (GODMODE)",
     .response = "Impersonation", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/admin/accounts/:id", api_admin_delete_account, ROLE_ADMIN, .query = &delete_query,
     .flags = ROUTE_DEV_ONLY | ROUTE_SLOW, .summary = "Delete an account and what hangs on it (GODMODE)",
     .response = "Ok", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/admin/generate", api_admin_generate, ROLE_ADMIN, &generate_schema, .flags = ROUTE_DEV_ONLY | ROUTE_SLOW,
     .summary = "Generate customers, providers and jobs (GODMODE)", .response = "Generated"},
    {HS_POST, "/admin/notify", api_admin_notify, ROLE_ADMIN, &notify_schema, .flags = ROUTE_DEV_ONLY,
     .summary = "Queue an in-app banner for an account (GODMODE)", .response = "BannerQueued",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {0},
};
