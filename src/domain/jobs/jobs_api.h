/* Handlers of the jobs domain, referenced by its route table. */
#ifndef DOMAIN_JOBS_API_H
#define DOMAIN_JOBS_API_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/http.h"

/* jobs_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route jobs_routes[];

err_t api_jobs_create(hs_req *req);
err_t api_jobs_list(hs_req *req);
err_t api_jobs_get(hs_req *req);
err_t api_jobs_cancel(hs_req *req);
err_t api_jobs_set_status(hs_req *req);
err_t api_jobs_start(hs_req *req);
err_t api_jobs_complete(hs_req *req);
err_t api_jobs_images(hs_req *req);
err_t api_jobs_reportable(hs_req *req);
err_t api_jobs_report(hs_req *req);
err_t api_jobs_tip(hs_req *req);
err_t api_jobs_recurring(hs_req *req);
err_t api_reviews_create(hs_req *req);

/* Reports are accepted this long after completion. */
#define JOBS_REPORT_WINDOW_MS (72LL * 3600 * 1000)
/* Answers with the Job JSON of job id (jobs_views.c). */
err_t jobs_write_one(hs_req *req, const char *id);
/* Answers with the Job JSON of the jobs row in r (every column). */
err_t jobs_write_row(hs_req *req, const db_res *r);

/* jobs_views.c: background work (jobs.c lists it): stored Job JSON repaired; reports whose time is over deleted */
bool jobs_repair_json(json_t *payload, char err[256]);
bool jobs_prune_reports(json_t *payload, char err[256]);
/* shutdown work (the domain's stop) */
void jobs_domain_stop(void);

/* jobs_api.c: the export's jobs, reviews, reports and recurringRequests (domain_def's
 * export_in) */
err_t jobs_export_in(db_conn *c, const account_ref *who, account_export *x);

#endif
