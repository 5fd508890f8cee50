/* Handlers of the jobs domain, referenced by its route table. */
#ifndef DOMAIN_JOBS_API_H
#define DOMAIN_JOBS_API_H
#include "http/http.h"

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

#endif
