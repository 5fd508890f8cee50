/* The payouts domain's declaration (domain/domain.h). */
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"

const domain_def payouts_domain = {.name = "payouts", .routes = payouts_routes, .init = payouts_domain_init};
