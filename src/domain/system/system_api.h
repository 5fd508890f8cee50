/* Handlers of the system domain and its rows. Internal to the domain. */
#ifndef DOMAIN_SYSTEM_API_H
#define DOMAIN_SYSTEM_API_H
#include "http/http.h"

/* system_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route system_routes[];

err_t api_health(hs_req *req);
err_t api_metrics(hs_req *req);
err_t api_ready(hs_req *req);
err_t api_test_clock(hs_req *req);
err_t api_test_routes(hs_req *req);
err_t api_test_queue(hs_req *req);
err_t api_test_load(hs_req *req);
/* The hourly housekeeping (system.c lists it): expired rate-limit counters and finished
 * background work older than a week are deleted, so neither table grows without bound. */
bool system_housekeeping(json_t *payload, char err[256]);

#endif
