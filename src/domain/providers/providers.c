/* The providers domain's declaration (domain/domain.h). */
#include "domain/providers/providers.h"
#include "domain/providers/providers_api.h"

const domain_def providers_domain = {.name = "providers", .routes = providers_routes, .init = providers_domain_init};
