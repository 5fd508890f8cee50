/* The users domain's declaration (domain/domain.h): its routes and the seasonal alerts' daily
 * work. */
#include "domain/users/users.h"
#include "core/clock.h"
#include "domain/users/users_api.h"

static const domain_job jobs[] = {
    {"seasonal_alerts", users_seasonal_day, .period_ms = DAY_MS},
    {"seasonal_zip", users_seasonal_zip},
    {0},
};

const domain_def users_domain = {.name = "users", .routes = users_routes, .jobs = jobs};
