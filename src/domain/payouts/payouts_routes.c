/* Routes of the payouts domain: the provider's payout account and transfers, and the simulated
 * processor's onboarding page. */
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"
#include "http/paging.h"

/* Each may create an account at the payment processor and asks it for a link: per account. */
static const hs_rate_limit account_limit = {"payout-account", 10, 60 * 60 * 1000, .per_account = true};

const hs_route payouts_routes[] = {
    /* the link is a single-use secret of the processor's: never kept for an Idempotency-Key's replay */
    {HS_POST, "/providers/me/payout-account", api_payouts_account_create, ROLE_PROVIDER,
     .flags = ROUTE_SLOW | ROUTE_SECRETS, .limit = &account_limit,
     .summary = "Create the payout account at the processor if needed; a fresh onboarding link",
     .response = "PayoutOnboarding", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/payout-account", api_payouts_account_get, ROLE_PROVIDER,
     .summary = "The payout account's state: none, pending, enabled or restricted", .response = "PayoutAccount"},
    {HS_GET, "/providers/me/payouts", api_payouts_list, ROLE_PROVIDER, .query = &HS_PAGE_QUERY,
     .summary = "Transfers of the provider's earnings (jobs, tips, the Preferred Pro fee), newest first, and totals",
     .response = "Payouts"},
    {HS_GET, "/payouts/onboarding/:linkId", api_payouts_onboarding_page, ROLE_OPEN, .flags = ROUTE_DEV_ONLY,
     .summary = "The simulated processor's onboarding page (an account link; development and test only)",
     .response = "text/html", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {0},
};
