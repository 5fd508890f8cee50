/* The admin domain's declaration (domain/domain.h): its routes and the banner it sends. */
#include "domain/admin/admin.h"
#include "domain/admin/admin_api.h"

static const domain_event events[] = {
    {"banner", "Banner",
     "The account's queued banner, delivered at once and cleared as GET /users/me/notification would; without id when "
     "it was pending before the stream opened",
     .id_optional = true},
    {0},
};

const domain_def admin_domain = {.name = "admin", .routes = admin_routes, .events = events};
