/* The auth domain's declaration (domain/domain.h): its routes, the hourly pruning of ended
 * tokens and lapsed email changes, and its request hook, which checks every token
 * (auth_tokens.c). */
#include "domain/auth/auth.h"
#include "core/clock.h"
#include "domain/auth/auth_api.h"

static const domain_job jobs[] = {{"auth_prune", auth_prune, .period_ms = HOUR_MS}, {0}};

const domain_def auth_domain = {.name = "auth", .routes = auth_routes, .jobs = jobs, .hooks = &auth_hooks};
