/* Routes and schemas of the owner's deletion and export of its account. */
#include "domain/accounts/accounts_api.h"

/* the current password, checked as a login checks one */
static const hs_field delete_fields[] = {{"password", F_STRING, F_REQUIRED, LEN(1, 1024)}, {0}};
static const hs_schema delete_schema = {delete_fields};

const hs_route accounts_routes[] = {
    {HS_DELETE, "/users/me", api_accounts_delete, ROLE_USER, &delete_schema, .ok = 204,
     .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Delete the caller's customer account (409 account_busy while a job runs)",
     .errors = ERRORS(ERR_CONFLICT, ERR_RATE_LIMITED)},
    {HS_DELETE, "/providers/me", api_accounts_delete, ROLE_PROVIDER, &delete_schema, .ok = 204,
     .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Delete the caller's provider account (409 account_busy while a job runs)",
     .errors = ERRORS(ERR_CONFLICT, ERR_RATE_LIMITED)},
    {HS_GET, "/users/me/export", api_accounts_export, ROLE_USER,
     .summary = "Everything the service holds about the caller's customer account, files as signed links",
     .response = "UserExport"},
    {HS_GET, "/providers/me/export", api_accounts_export, ROLE_PROVIDER,
     .summary = "Everything the service holds about the caller's provider account, files as signed links",
     .response = "ProviderExport"},
    {0},
};
