/* Each domain declares its rows next to its handlers (<domain>_routes.c); this file lists
 * the domains, so adding an endpoint is one row there and adding a domain one line here. */
#include "routes.h"
#include "core/util.h"
#include "domain/admin/admin.h"
#include "domain/auth/auth.h"
#include "domain/files/files.h"
#include "domain/geo/geo.h"
#include "domain/jobs/jobs.h"
#include "domain/messages/messages.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/providers/providers.h"
#include "domain/public/public.h"
#include "domain/quotes/quotes.h"
#include "domain/staff/staff.h"
#include "domain/support/support.h"
#include "domain/system/system.h"
#include "domain/users/users.h"
#include "http/router.h"
#include <string.h>

void routes_install(void) {
  const struct {
    const hs_route *rows;
    size_t n;
  } domains[] = {
      {SYSTEM_ROUTES, SYSTEM_ROUTES_LEN},
      {AUTH_ROUTES, AUTH_ROUTES_LEN},
      {USERS_ROUTES, USERS_ROUTES_LEN},
      {PAYMENTS_ROUTES, PAYMENTS_ROUTES_LEN},
      {PROVIDERS_ROUTES, PROVIDERS_ROUTES_LEN},
      {FILES_ROUTES, FILES_ROUTES_LEN},
      {JOBS_ROUTES, JOBS_ROUTES_LEN},
      {QUOTES_ROUTES, QUOTES_ROUTES_LEN},
      {MESSAGES_ROUTES, MESSAGES_ROUTES_LEN},
      {NOTIFICATIONS_ROUTES, NOTIFICATIONS_ROUTES_LEN},
      {ADDRESSES_ROUTES, ADDRESSES_ROUTES_LEN},
      {PUBLIC_ROUTES, PUBLIC_ROUTES_LEN},
      {STAFF_ROUTES, STAFF_ROUTES_LEN},
      {ADMIN_ROUTES, ADMIN_ROUTES_LEN},
      {SUPPORT_ROUTES, SUPPORT_ROUTES_LEN},
      {GEO_ROUTES, GEO_ROUTES_LEN},
  };
  size_t total = 0;
  for (size_t i = 0; i < ARRAY_LEN(domains); i++) total += domains[i].n;
  hs_route *all = xcalloc(total, sizeof *all);
  size_t at = 0;
  for (size_t i = 0; i < ARRAY_LEN(domains); i++) {
    memcpy(all + at, domains[i].rows, domains[i].n * sizeof *all);
    at += domains[i].n;
  }
  hs_router_build(all, total);
  free(all);
}
