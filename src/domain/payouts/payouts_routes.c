/* Routes of the payouts domain: the provider's payout account and transfers, and the simulated
 * processor's onboarding page. */
#include "domain/links.h"
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"
#include "http/paging.h"

/* Each may create an account at the payment processor and asks it for a link: per account. */
static const hs_rate_limit account_limit = {"payout-account", 10, 60 * 60 * 1000, .per_account = true};

/* { redirectUrl? }: where the processor sends the provider back (domain/links.h) */
static const hs_field account_fields[] = {LINKS_REDIRECT_FIELD, {0}};
static const hs_schema account_schema = {account_fields};

const hs_route payouts_routes[] = {
    /* the link is a single-use secret of the processor's: never kept for an Idempotency-Key's replay */
    {HS_POST, "/providers/me/payout-account", api_payouts_account_create, ROLE_PROVIDER, &account_schema,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .limit = &account_limit,
     .summary = "Create the payout account at the processor if needed; a fresh onboarding link",
     .response = "PayoutOnboarding", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/payout-account", api_payouts_account_get, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .summary = "The payout account's state: none, pending, enabled or restricted", .response = "PayoutAccount"},
    {HS_GET, "/providers/me/payouts", api_payouts_list, ROLE_PROVIDER, .flags = ROUTE_DB_READ, .query = &HS_PAGE_QUERY,
     .summary = "Transfers of the provider's earnings (jobs, tips, the Preferred Pro fee), newest first, and totals",
     .response = "Payouts"},
    {HS_GET, "/payouts/onboarding/:linkId", api_payouts_onboarding_page, ROLE_OPEN, .flags = ROUTE_DEV_ONLY,
     .summary = "The simulated processor's onboarding page (an account link; development and test only)",
     .response = "text/html", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    /* the server's own pages of the onboarding's return and refresh addresses (APP_URL unset) */
    {HS_GET, "/app/payouts/onboarding/return", api_payouts_app_return_page, ROLE_OPEN, .flags = ROUTE_INLINE,
     .summary = "Where onboarding returns the provider when APP_URL is unset: a page that says it is finished",
     .response = "text/html"},
    {HS_GET, "/app/payouts/onboarding/refresh", api_payouts_app_refresh_page, ROLE_OPEN, .flags = ROUTE_INLINE,
     .summary = "Where an expired onboarding link sends the provider when APP_URL is unset: a page that says to "
                "ask for a new one",
     .response = "text/html"},
    {0},
};
