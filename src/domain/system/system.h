/* Operational routes: GET /health (liveness), GET /ready (readiness), and the test-environment routes (the test clock and the
 * route-coverage report that the API test run checks). */
#ifndef DOMAIN_SYSTEM_H
#define DOMAIN_SYSTEM_H
#include "http/http.h"

extern const hs_route SYSTEM_ROUTES[];
extern const size_t SYSTEM_ROUTES_LEN;

/* Registers the hourly housekeeping task: expired rate-limit counters and finished background
 * work older than a week are deleted, so neither table grows without bound. */
void system_domain_init(void);

#endif
