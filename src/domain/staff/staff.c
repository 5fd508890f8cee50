/* The staff domain's declaration (domain/domain.h): its routes, its request hooks, and the
 * pruning of lapsed elevations (ended without a session) every RETENTION_SWEEP, RETAIN_ELEVATIONS
 * after they ended. */
#include "domain/staff/staff.h"
#include "core/clock.h"
#include "core/config.h"
#include "domain/staff/staff_api.h"
#include "domain/staff/staff_store.h"
#include <stdio.h>

static bool prune(json_t *payload, char err[256]) {
  (void)payload;
  if (staff_store_prune_elevations(clock_now_ms() - CFG.retain.elevations) == ERR_OK) return true;
  snprintf(err, 256, "cannot delete ended elevations");
  return false;
}

static const domain_job jobs[] = {{"staff_prune", prune, .period_from = &CFG.retain.sweep}, {0}};

const domain_def staff_domain = {.name = "staff", .routes = staff_routes, .hooks = &staff_hooks, .jobs = jobs};
