/* The notifications domain's declaration (domain/domain.h). */
#include "domain/notifications/notifications.h"
#include "domain/notifications/notifications_api.h"

const domain_def notifications_domain = {
    .name = "notifications", .routes = notifications_routes, .init = notifications_init};
