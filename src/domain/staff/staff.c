/* The staff domain's declaration (domain/domain.h): its routes and its request hooks. */
#include "domain/staff/staff.h"
#include "domain/staff/staff_api.h"

const domain_def staff_domain = {.name = "staff", .routes = staff_routes, .hooks = &staff_hooks};
