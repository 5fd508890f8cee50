/* The portal domain's declaration (domain/domain.h). */
#include "domain/portal/portal.h"
#include "domain/portal/portal_api.h"

const domain_def portal_domain = {.name = "portal", .routes = portal_routes};
