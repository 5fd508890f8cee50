/* The admin domain's declaration (domain/domain.h). */
#include "domain/admin/admin.h"
#include "domain/admin/admin_api.h"

const domain_def admin_domain = {.name = "admin", .routes = admin_routes};
