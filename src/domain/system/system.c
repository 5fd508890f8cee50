/* The system domain's declaration (domain/domain.h): its routes and the hourly housekeeping. */
#include "domain/system/system.h"
#include "core/clock.h"
#include "core/config.h"
#include "domain/system/system_api.h"

static const domain_job jobs[] = {{"housekeeping", system_housekeeping, .period_from = &CFG.retain.sweep}, {0}};

const domain_def system_domain = {.name = "system", .routes = system_routes, .jobs = jobs};
