/* The providers domain's declaration (domain/domain.h). */
#include "domain/providers/providers.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"

/* Start-up: document recognition's background work, Preferred Pro memberships that end, and
 * premiumBilledMonth following the Preferred Pro fee that payouts bill. */
static void init(void) {
  providers_domain_init();
  providers_work_init();
  payouts_follow_premium(prov_store_set_billed_month_in);
}

const domain_def providers_domain = {.name = "providers", .routes = providers_routes, .init = init};
