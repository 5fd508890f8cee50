/* The system domain's declaration (domain/domain.h). */
#include "domain/system/system.h"
#include "domain/system/system_api.h"

const domain_def system_domain = {.name = "system", .routes = system_routes, .init = system_init};
