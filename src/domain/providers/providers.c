/* The providers domain's declaration (domain/domain.h): its routes, document recognition and
 * the memberships that end, at start-up premiumBilledMonth following the Preferred Pro fee that
 * payouts bill and the rows of a new provider's services and ZIPs following its registration
 * (auth), and its part of an account (the provider's profile, services and ZIPs). */
#include "domain/providers/providers.h"
#include "core/clock.h"
#include "domain/auth/auth.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"

static const domain_job jobs[] = {
    {"licence_check", providers_check_licence, JOB_HEAVY},
    {"insurance_check", providers_check_insurance, JOB_HEAVY},
    {"preferred_pro_end", providers_end_memberships, .period_ms = HOUR_MS},
    {0},
};

static void wire(void) {
  payouts_follow_premium(prov_store_set_billed_month_in);
  auth_follow_provider_lists(prov_store_insert_lists_in);
}

static err_t forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  err_t e = prov_store_forget_in(c, who, mode);
  return e ? e : prov_tools_store_forget_in(c, who, mode);
}

const domain_def providers_domain = {.name = "providers",
                                     .routes = providers_routes,
                                     .jobs = jobs,
                                     .init = wire,
                                     .export_in = providers_export_in,
                                     .forget_in = forget_in};
