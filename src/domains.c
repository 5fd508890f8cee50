/* The one list of domains (domain/domain.h): routing, start-up and an account's export and
 * erasure iterate it, so adding a domain is one line here. The order is the order of the
 * OpenAPI document's paths; start-up runs the inits in this order (the audit trail before the
 * domains that write to it) and shutdown the stops in reverse; an erasure runs the forget_ins
 * in reverse too (a domain's rows go before those of the domains below it they name). */
#include "domains.h"
#include "core/util.h"
#include "domain/accounts/accounts.h"
#include "domain/admin/admin.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/backup/backup.h"
#include "domain/docs/docs.h"
#include "domain/events/events.h"
#include "domain/files/files.h"
#include "domain/geo/geo.h"
#include "domain/jobs/jobs.h"
#include "domain/messages/messages.h"
#include "domain/notifications/notifications.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/portal/portal.h"
#include "domain/providers/providers.h"
#include "domain/public/public.h"
#include "domain/quotes/quotes.h"
#include "domain/staff/staff.h"
#include "domain/support/support.h"
#include "domain/system/system.h"
#include "domain/users/users.h"
#include "http/openapi.h"
#include "http/router.h"
#include <stdlib.h>

static const domain_def *const DOMAINS[] = {
    &audit_domain,         &system_domain,    &events_domain, &auth_domain,   &users_domain,   &payments_domain,
    &payouts_domain,       &providers_domain, &files_domain,  &jobs_domain,   &quotes_domain,  &messages_domain,
    &notifications_domain, &public_domain,    &staff_domain,  &admin_domain,  &support_domain, &geo_domain,
    &accounts_domain,      &docs_domain,      &backup_domain, &portal_domain,
};

const domain_def *const *domains_all(size_t *n) {
  *n = ARRAY_LEN(DOMAINS);
  return DOMAINS;
}

err_t domains_export_in(db_conn *c, const account_ref *who, account_export *x) {
  err_t e = ERR_OK;
  for (size_t d = 0; !e && d < ARRAY_LEN(DOMAINS); d++)
    if (DOMAINS[d]->export_in)
      e = DOMAINS[d]->export_in(c, who, x);
    else if (DOMAINS[d]->export_parts)
      e = account_export_parts_in(c, who, x, DOMAINS[d]->export_parts);
  return e;
}

err_t domains_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  err_t e = ERR_OK;
  for (size_t d = ARRAY_LEN(DOMAINS); !e && d-- > 0;)
    if (DOMAINS[d]->forget_in) e = DOMAINS[d]->forget_in(c, who, mode);
  return e;
}

void domains_install_routes(void) {
  size_t total = 0;
  for (size_t d = 0; d < ARRAY_LEN(DOMAINS); d++)
    for (const hs_route *r = DOMAINS[d]->routes; r && r->method; r++) total++;
  hs_route *all = xcalloc(total, sizeof *all);
  size_t at = 0;
  for (size_t d = 0; d < ARRAY_LEN(DOMAINS); d++)
    for (const hs_route *r = DOMAINS[d]->routes; r && r->method; r++) all[at++] = *r;
  hs_router_build(all, total);
  free(all);
  for (size_t d = 0; d < ARRAY_LEN(DOMAINS); d++)
    for (const domain_event *ev = DOMAINS[d]->events; ev && ev->kind; ev++) hs_openapi_add_event(ev);
}

/* A domain's background work: each kind's handler on its lane, and its period. */
static void register_jobs(const domain_job *jobs) {
  for (const domain_job *j = jobs; j && j->kind; j++) {
    if (j->weight == JOB_HEAVY)
      queue_register_heavy(j->kind, j->run);
    else
      queue_register(j->kind, j->run);
    int64_t period = j->period_from ? *j->period_from : j->period_ms;
    if (period > 0) queue_every(j->kind, period);
  }
}

void domains_init(void) {
  for (size_t d = 0; d < ARRAY_LEN(DOMAINS); d++) {
    register_jobs(DOMAINS[d]->jobs);
    if (DOMAINS[d]->hooks) hs_add_hooks(DOMAINS[d]->hooks);
    for (const struct events_oneshot *const *o = DOMAINS[d]->oneshots; o && *o; o++) events_register_oneshot(*o);
  }
  for (size_t d = 0; d < ARRAY_LEN(DOMAINS); d++)
    if (DOMAINS[d]->init) DOMAINS[d]->init();
}

void domains_stop(void) {
  for (size_t d = ARRAY_LEN(DOMAINS); d-- > 0;)
    if (DOMAINS[d]->stop) DOMAINS[d]->stop();
}
