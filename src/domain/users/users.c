/* The users domain's declaration: its routes, and at start-up the seasonal-alert task. */
#include "domain/users/users.h"
#include "domain/users/users_api.h"

const domain_def users_domain = {.name = "users", .routes = users_routes, .init = users_seasonal_init};
