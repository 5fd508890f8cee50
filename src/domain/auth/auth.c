/* The auth domain's declaration (domain/domain.h). */
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"

const domain_def auth_domain = {.name = "auth", .routes = auth_routes};
