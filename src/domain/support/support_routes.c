/* Routes and schemas of the support requests and the staff ticket desk. */
#include "core/util.h"
#include "domain/support/support.h"
#include "domain/support/support_api.h"
#include "http/paging.h"

static const char *const CATEGORIES[] = {"technical", "feedback", NULL};
static const hs_field open_fields[] = {
    {"subject", F_STRING, F_REQUIRED, LEN(1, 200)},
    {"body", F_STRING, F_REQUIRED, LEN(1, 5000)},
    {"category", F_ENUM, F_REQUIRED, .choices = CATEGORIES},
    {0},
};
static const hs_schema open_schema = {open_fields};

static const char *const TICKET_STATUSES[] = {"OPEN", "IN_PROGRESS", "RESOLVED", "CLOSED", NULL};
static const hs_field list_fields[] = {{"status", F_ENUM, 0, .choices = TICKET_STATUSES}, HS_PAGE_FIELDS, {0}};
static const hs_schema list_query = {list_fields};
static const hs_field update_fields[] = {
    {"status", F_ENUM, 0, .choices = TICKET_STATUSES},
    {"notes", F_STRING, 0, LEN(0, 5000)},
    {0},
};
static const hs_schema update_schema = {update_fields};

/* Each request emails the support inbox and opens a ticket: 5 an hour per account. */
static const hs_rate_limit open_limit = {"support-ticket", 5, 60 * 60 * 1000, .per_account = true};

const hs_route support_routes[] = {
    {HS_POST, "/users/me/support", api_support_open, ROLE_USER, &open_schema, .limit = &open_limit,
     .summary = "Ask support for help (emails the support inbox, opens a ticket)", .response = "Ok"},
    {HS_POST, "/providers/me/support", api_support_open, ROLE_PROVIDER, &open_schema, .limit = &open_limit,
     .summary = "Ask support for help (emails the support inbox, opens a ticket)", .response = "Ok"},
    {HS_GET, "/staff/tickets", api_tickets_list, ROLE_TECHNICAL_SUPPORT, .query = &list_query,
     .summary = "Support tickets, oldest first (default: OPEN and IN_PROGRESS)", .response = "SupportTicket[]"},
    {HS_PATCH, "/staff/tickets/:id", api_tickets_update, ROLE_TECHNICAL_SUPPORT, &update_schema,
     .summary = "Move a ticket or change its notes", .response = "SupportTicket", .errors = ERRORS(ERR_NOT_FOUND)},
    {0},
};
