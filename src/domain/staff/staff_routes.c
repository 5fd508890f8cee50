/* Routes and schemas of /staff/..., in the specification's field order. */
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/staff/staff.h"
#include "domain/staff/staff_api.h"
#include "http/paging.h"

static const hs_field create_fields[] = {
    {"name", F_STRING, F_REQUIRED, LEN(1, 100)},
    {"email", F_EMAIL, F_REQUIRED},
    {"password", F_STRING, F_REQUIRED, LEN(8, 72), .max_bytes = 72},
    {"role", F_ENUM, F_REQUIRED, .choices = HS_STAFF_ROLE_NAMES},
    {0},
};
const hs_schema staff_create_schema = {create_fields};

static const hs_field email_fields[] = {{"email", F_EMAIL, F_REQUIRED}, {0}};
const hs_schema staff_email_schema = {email_fields};

static const hs_field search_fields[] = {{"q", F_STRING, 0, LEN(0, 100)}, HS_PAGE_FIELDS, {0}};
static const hs_schema search_query = {search_fields};

static const hs_field elevation_fields[] = {
    {"targetId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"targetRole", F_ENUM, F_REQUIRED, .choices = HS_ACCOUNT_ROLE_NAMES},
    {"reason", F_STRING, F_REQUIRED, LEN(1, 1000)},
    {0},
};
static const hs_schema elevation_schema = {elevation_fields};

static const hs_field link_fields[] = {{"token", F_STRING, 0, LEN(0, 200)}, {0}};
static const hs_schema link_query = {link_fields};

static const hs_field impersonate_fields[] = {{"elevationId", F_STRING, F_REQUIRED, LEN(1, 64)}, {0}};
static const hs_schema impersonate_schema = {impersonate_fields};

static const hs_field impersonate_staff_fields[] = {{"staffId", F_STRING, F_REQUIRED, LEN(1, 64)}, {0}};
static const hs_schema impersonate_staff_schema = {impersonate_staff_fields};

static const char *const ELEVATION_STATUSES[] = {"PENDING",     "APPROVED", "ACTIVE", "REJECTED",
                                                 "DEACTIVATED", "EXPIRED",  NULL};
static const hs_field elevations_fields[] = {{"status", F_ENUM, 0, .choices = ELEVATION_STATUSES}, HS_PAGE_FIELDS, {0}};
static const hs_schema elevations_query = {elevations_fields};

static const char *const REPORT_LISTS[] = {"open", "resolved", NULL};
static const hs_field reports_fields[] = {{"status", F_ENUM, 0, .choices = REPORT_LISTS}, HS_PAGE_FIELDS, {0}};
static const hs_schema reports_query = {reports_fields};

/* refund: the job's payment (amount: part of it; all that is left without), the provider
 * bearing its share */
static const char *const REPORT_ACTIONS[] = {"release", "refund", NULL};
static const hs_field resolve_fields[] = {
    {"action", F_ENUM, F_REQUIRED, .choices = REPORT_ACTIONS},
    {"amount", F_NUMBER, 0, RANGE(0.01, 118000)},
    {"note", F_STRING, F_REQUIRED, LEN(1, 2000)},
    {0},
};
static const hs_schema resolve_schema = {resolve_fields};

#define SUPPORT (ROLE_CUSTOMER_SUPPORT | ROLE_PROFESSIONAL_SUPPORT)

/* Each request emails the administrator: 10 an hour per staff member. */
static const hs_rate_limit elevation_limit = {"staff-elevation", 10, 60 * 60 * 1000, .per_account = true};

const hs_route staff_routes[] = {
    {HS_POST, "/staff/login", api_staff_login, ROLE_OPEN, &common_login_schema, .flags = ROUTE_SLOW | ROUTE_SECRETS,
     .summary = "Log in as a staff member (12-hour token)", .response = "StaffSession",
     .errors = ERRORS(ERR_UNAUTHORIZED, ERR_RATE_LIMITED)},
    {HS_GET, "/staff/me", api_staff_me, ROLE_STAFF, .summary = "The signed-in staff member", .response = "Staff",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/staff/logout", api_staff_logout, ROLE_STAFF | ROLE_ADMIN, .ok = 204,
     .summary = "End the presented staff or administrator token"},
    {HS_GET, "/staff/customers", api_staff_customers, ROLE_CUSTOMER_SUPPORT, .query = &search_query,
     .summary = "Search customers by name or email (newest first; at most 100 unless paged)",
     .response = "CustomerSearchResult[]"},
    {HS_GET, "/staff/customers/:id", api_staff_customer, ROLE_CUSTOMER_SUPPORT,
     .summary = "A customer with jobs, payments and elevations", .response = "StaffCustomerDetail",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/staff/providers", api_staff_providers, ROLE_PROFESSIONAL_SUPPORT, .query = &search_query,
     .summary = "Search providers by name, email or company (newest first; at most 100 unless paged)",
     .response = "ProviderSearchResult[]"},
    {HS_GET, "/staff/providers/:id", api_staff_provider, ROLE_PROFESSIONAL_SUPPORT,
     .summary = "A provider with jobs, monthly ledger and elevations", .response = "StaffProviderDetail",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/staff/elevation", api_staff_elevation_create, SUPPORT, &elevation_schema, .ok = 201,
     .limit = &elevation_limit, .summary = "Ask the administrator to act as a customer or provider",
     .response = "ElevationRequest", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/staff/elevation/:id/approve", api_staff_elevation_approve, ROLE_OPEN, .query = &link_query,
     .summary = "Approve an elevation request (the administrator's emailed link)", .response = "text/html",
     .errors = ERRORS(ERR_FORBIDDEN, ERR_NOT_FOUND)},
    {HS_GET, "/staff/elevation/:id/deny", api_staff_elevation_deny, ROLE_OPEN, .query = &link_query,
     .summary = "Deny an elevation request (the administrator's emailed link)", .response = "text/html",
     .errors = ERRORS(ERR_FORBIDDEN, ERR_NOT_FOUND)},
    {HS_GET, "/staff/elevation", api_staff_elevation_list, ROLE_STAFF, .query = &HS_PAGE_QUERY,
     .summary = "The caller's elevation requests, newest first", .response = "ElevationRequest[]"},
    {HS_POST, "/staff/impersonate", api_staff_impersonate, SUPPORT, &impersonate_schema, .flags = ROUTE_SECRETS,
     .summary = "Start an approved elevation: a 15-minute token as the account", .response = "Impersonation",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PATCH, "/staff/elevation/:id/deactivate", api_staff_elevation_deactivate, ROLE_STAFF,
     .summary = "End an elevation early", .response = "ElevationRequest", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/staff/list", api_staff_list, ROLE_ADMIN, .query = &HS_PAGE_QUERY,
     .summary = "Every staff member, newest first (administrator)", .response = "Staff[]"},
    {HS_POST, "/staff/create", api_staff_create, ROLE_ADMIN, &staff_create_schema, .ok = 201,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .summary = "Create a staff member (administrator)", .response = "Staff",
     .errors = ERRORS(ERR_CONFLICT)},
    {HS_POST, "/staff/impersonate-staff", api_staff_impersonate_staff, ROLE_ADMIN, &impersonate_staff_schema,
     .flags = ROUTE_DEV_ONLY | ROUTE_SECRETS, .summary = "A staff token for a staff member (GODMODE)",
     .response = "StaffSession", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/staff/reports", api_staff_reports, ROLE_CUSTOMER_SUPPORT, .query = &reports_query,
     .summary = "Customers' reports of completed jobs with the money each holds (newest first)",
     .response = "JobReportCase[]"},
    {HS_POST, "/staff/reports/:id/resolve", api_staff_report_resolve, ROLE_CUSTOMER_SUPPORT, &resolve_schema,
     .flags = ROUTE_SLOW, .summary = "Resolve a report: release the money it holds, or refund the customer",
     .response = "ReportResolution", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {HS_GET, "/staff/audit/sessions", api_staff_audit_sessions, ROLE_INTERNAL_AUDIT, .query = &HS_PAGE_QUERY,
     .summary = "Every staff member's elevations with their recorded requests (staff newest first)",
     .response = "StaffAudit[]"},
    {HS_GET, "/staff/audit/me", api_staff_audit_me, ROLE_STAFF, .query = &HS_PAGE_QUERY,
     .summary = "The caller's own audit trail: actions and requests made in their elevations (newest first)",
     .response = "StaffAuditRecord[]"},
    {HS_GET, "/admin/elevations", api_admin_elevations, ROLE_ADMIN, .query = &elevations_query, .flags = ROUTE_DEV_ONLY,
     .summary = "Every staff member's elevation requests, newest first (GODMODE)", .response = "ElevationRequest[]"},
    {HS_POST, "/admin/elevations/:id/approve", api_admin_elevation_approve, ROLE_ADMIN, .flags = ROUTE_DEV_ONLY,
     .summary = "Approve a pending elevation request, as its emailed link does (GODMODE)",
     .response = "ElevationRequest", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {HS_POST, "/admin/elevations/:id/deny", api_admin_elevation_deny, ROLE_ADMIN, .flags = ROUTE_DEV_ONLY,
     .summary = "Deny a pending elevation request, or end an approved or active one (GODMODE)",
     .response = "ElevationRequest", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {0},
};
