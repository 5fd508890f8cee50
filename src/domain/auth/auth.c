/* The auth domain's declaration (domain/domain.h): its routes, the pruning of ended tokens,
 * lapsed email changes and reset links every RETENTION_SWEEP (docs/operations.md, "Retention"), its request hook, which
 * checks every token (auth_tokens.c), and its part of an account (the pending email change; the account's row, its
 * reset links and email changes at an erasure). */
#include "domain/auth/auth.h"
#include "core/clock.h"
#include "core/config.h"
#include "domain/auth/auth_api.h"
#include "domain/auth/auth_store.h"

static const domain_job jobs[] = {{"auth_prune", auth_prune, .period_from = &CFG.retain.sweep}, {0}};

const domain_def auth_domain = {.name = "auth",
                                .routes = auth_routes,
                                .jobs = jobs,
                                .hooks = &auth_hooks,
                                .init = auth_tokens_init,
                                .stop = auth_tokens_stop,
                                .export_parts = AUTH_EXPORT_PARTS,
                                .forget_in = auth_store_forget_in};
