/* Routes and schemas of /quotes/... */
#include "core/util.h"
#include "domain/common.h"
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_api.h"
#include "http/paging.h"

static const hs_field create_fields[] = {
    {"jobId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"amount", F_NUMBER, F_REQUIRED, RANGE(0.01, 100000)},
    {"note", F_STRING, 0, LEN(0, 1000)},
    {"scheduledAt", F_DATETIME},
    {0},
};
static const hs_schema create_schema = {create_fields};

static const hs_field market_fields[] = {{"service", F_ENUM, F_REQUIRED, .choices = SERVICE_NAMES}, {0}};
static const hs_schema market_query = {market_fields};

const hs_route quotes_routes[] = {
    {HS_POST, "/quotes", api_quotes_create, ROLE_PROVIDER, &create_schema, .ok = 201,
     .summary = "Quote an open job (verified providers)", .response = "Quote", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/quotes/:id/accept", api_quotes_accept, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Accept a quote: assigns the job and authorizes the card", .response = "Acceptance",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/quotes/market-rate", api_quotes_market_rate, ROLE_PROVIDER, .query = &market_query,
     .flags = ROUTE_DB_READ, .summary = "Median of the last 50 accepted quotes of a service, to the nearest 5",
     .response = "MarketRate"},
    {HS_GET, "/quotes/job/:jobId", api_quotes_for_job, ROLE_USER, .query = &HS_PAGE_QUERY, .flags = ROUTE_DB_READ,
     .summary = "A job's quotes with provider details, in the order they came", .response = "QuoteWithProvider[]",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/quotes", api_quotes_of_provider, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .query = &HS_PAGE_QUERY, .summary = "The provider's quotes with their job's status, newest first",
     .response = "ProviderQuote[]"},
    {0},
};
