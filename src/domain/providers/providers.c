/* The providers domain's declaration (domain/domain.h): its routes, document recognition and
 * the memberships that end, and at start-up premiumBilledMonth following the Preferred Pro fee
 * that payouts bill. */
#include "domain/providers/providers.h"
#include "core/clock.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"

static const domain_job jobs[] = {
    {"licence_check", providers_check_licence, JOB_HEAVY},
    {"insurance_check", providers_check_insurance, JOB_HEAVY},
    {"preferred_pro_end", providers_end_memberships, .period_ms = HOUR_MS},
    {0},
};

static void follow_premium(void) { payouts_follow_premium(prov_store_set_billed_month_in); }

const domain_def providers_domain = {
    .name = "providers", .routes = providers_routes, .jobs = jobs, .init = follow_premium};
