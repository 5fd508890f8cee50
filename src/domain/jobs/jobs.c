/* The jobs domain's declaration (domain/domain.h): its routes, its background work, its
 * live-update kinds, at start-up its wiring into payments, and its part of an account (jobs,
 * reviews, reports, recurring requests). */
#include "domain/jobs/jobs.h"
#include "core/clock.h"
#include "domain/jobs/jobs_api.h"
#include "domain/jobs/jobs_store.h"
#include "domain/payments/payments.h"

void jobs_wire_payments(void) { payments_follow_tips(jobs_set_tip_in); }

static const domain_job jobs[] = {
    {"jobs_json", jobs_repair_json},
    {"job_reports_prune", jobs_prune_reports, .period_ms = DAY_MS},
    {0},
};

static const domain_event events[] = {
    {"job.created", "Job",
     "A new job: the customer's own, or one matching the provider's services and ZIPs (the feed)"},
    {"job.updated", "Job", "A job the account may read changed: its status, photos, provider, tip"},
    {0},
};

const domain_def jobs_domain = {.name = "jobs",
                                .routes = jobs_routes,
                                .jobs = jobs,
                                .events = events,
                                .init = jobs_wire_payments,
                                .stop = jobs_domain_stop,
                                .export_in = jobs_export_in,
                                .forget_in = jobs_store_forget_in};
