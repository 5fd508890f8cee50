/* Operational routes: GET /health (liveness), GET /ready (readiness), GET /metrics, the
 * hourly housekeeping, and the test-environment routes (the test clock, the route-coverage
 * report that the API test run checks, the queue's and the server's load). */
#ifndef DOMAIN_SYSTEM_H
#define DOMAIN_SYSTEM_H
#include "domain/domain.h"

extern const domain_def system_domain;

#endif
