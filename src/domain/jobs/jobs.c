/* The jobs domain's declaration (domain/domain.h), and its wiring into payments. */
#include "domain/jobs/jobs.h"
#include "domain/jobs/jobs_api.h"
#include "domain/payments/payments.h"

void jobs_wire_payments(void) { payments_follow_tips(jobs_set_tip_in); }

static void jobs_init(void) {
  jobs_wire_payments();
  jobs_domain_init();
}

const domain_def jobs_domain = {.name = "jobs", .routes = jobs_routes, .init = jobs_init, .stop = jobs_domain_stop};
