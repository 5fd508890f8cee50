/* The support domain's declaration (domain/domain.h). */
#include "domain/support/support.h"
#include "domain/support/support_api.h"

const domain_def support_domain = {.name = "support", .routes = support_routes};
