/* The staff domain's declaration: its routes, and at start-up the HTTP hooks. */
#include "domain/staff/staff.h"
#include "domain/staff/staff_api.h"

const domain_def staff_domain = {.name = "staff", .routes = staff_routes, .init = staff_hooks_install};
