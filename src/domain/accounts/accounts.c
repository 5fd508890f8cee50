/* The accounts domain's declaration (domain/domain.h). */
#include "domain/accounts/accounts.h"
#include "domain/accounts/accounts_api.h"

const domain_def accounts_domain = {.name = "accounts", .routes = accounts_routes};
