/* The auth domain's declaration (domain/domain.h): its routes, and at start-up the hourly
 * pruning of ended tokens and expired email changes. */
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"

const domain_def auth_domain = {.name = "auth", .routes = auth_routes, .init = auth_init};
