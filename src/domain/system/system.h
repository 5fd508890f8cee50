/* Operational routes: GET /health (liveness), GET /ready (readiness), and the test-environment routes (the test clock and the
 * route-coverage report that the API test run checks). */
#ifndef DOMAIN_SYSTEM_H
#define DOMAIN_SYSTEM_H
#include "http/http.h"

extern const hs_route SYSTEM_ROUTES[];
extern const size_t SYSTEM_ROUTES_LEN;

#endif
