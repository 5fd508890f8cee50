/* Routes and schemas of /services/... and /waitlist. */
#include "core/util.h"
#include "domain/public/public.h"
#include "domain/public/public_api.h"

static const hs_field check_zip_fields[] = {{"zip", F_ZIP, F_REQUIRED}, {0}};
static const hs_schema check_zip_query = {check_zip_fields};

static const char *const WAITLIST_ROLES[] = {"customer", "provider", NULL};
static const hs_field waitlist_fields[] = {
    {"name", F_STRING, F_REQUIRED, LEN(1, 100)},
    {"email", F_EMAIL, F_REQUIRED},
    {"zip", F_ZIP, F_REQUIRED},
    {"role", F_ENUM, F_REQUIRED, .choices = WAITLIST_ROLES},
    {0},
};
static const hs_schema waitlist_schema = {waitlist_fields};
static const hs_rate_limit waitlist_limit = {"waitlist", 5, 15 * 60 * 1000};

const hs_route public_routes[] = {
    {HS_GET, "/services/available", api_services_available, ROLE_USER, .flags = ROUTE_DB_READ,
     .summary = "Services offered in the customer's ZIP and how many providers serve it",
     .response = "ServicesAvailable", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/services/check-zip", api_services_check_zip, ROLE_OPEN, .flags = ROUTE_DB_READ,
     .query = &check_zip_query, .summary = "Whether any provider serves a ZIP", .response = "ZipCoverage"},
    {HS_POST, "/waitlist", api_waitlist_join, ROLE_OPEN, &waitlist_schema, .limit = &waitlist_limit,
     .flags = ROUTE_CORS_ANY, .summary = "Join the waitlist (any origin); a confirmation email follows",
     .response = "Ok"},
    {0},
};
