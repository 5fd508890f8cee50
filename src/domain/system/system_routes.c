/* Routes of the operational endpoints and the test-environment routes. */
#include "domain/system/system_api.h"

static const hs_field clock_fields[] = {
    {"advanceMs", F_INT, F_REQUIRED, RANGE(0, 10.0 * 365 * 24 * 3600 * 1000)},
    {"freeze", F_BOOL},
    {0},
};
static const hs_schema clock_schema = {clock_fields};

/* general: every kind but document recognition's (what an email or push waits behind) */
static const char *const QUEUE_LANE_NAMES[] = {"general", "heavy", NULL};
static const hs_field queue_fields[] = {{"lane", F_ENUM, .choices = QUEUE_LANE_NAMES}, {0}};
static const hs_schema queue_query = {queue_fields};

const hs_route system_routes[] = {
    {HS_GET, "/health", api_health, ROLE_OPEN, .flags = ROUTE_INLINE, .summary = "Liveness check",
     .response = "Health"},
    {HS_GET, "/ready", api_ready, ROLE_OPEN, .flags = ROUTE_SLOW,
     .summary = "Readiness: the database answers within 1 s and migrations are current", .response = "Ready",
     .errors = ERRORS(ERR_UNAVAILABLE), .error_schema = "NotReady"},
    {HS_GET, "/metrics", api_metrics, ROLE_OPEN,
     .summary = "Prometheus metrics (loopback callers or the METRICS_TOKEN bearer; 404 to anyone else)",
     .response = "text/plain", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/__test/clock", api_test_clock, ROLE_OPEN, &clock_schema, .flags = ROUTE_TEST_ONLY,
     .summary = "Move the service clock forward; freeze: stop it there, or let it run (APP_ENV=test only)"},
    {HS_GET, "/__test/routes", api_test_routes, ROLE_OPEN, .flags = ROUTE_TEST_ONLY,
     .summary = "Route table with hit counts (APP_ENV=test only)"},
    {HS_GET, "/__test/queue", api_test_queue, ROLE_OPEN, .query = &queue_query, .flags = ROUTE_TEST_ONLY,
     .summary = "Background work due and running, of one lane or both (APP_ENV=test only)"},
    {HS_GET, "/__test/load", api_test_load, ROLE_OPEN, .flags = ROUTE_TEST_ONLY | ROUTE_INLINE,
     .summary = "Requests in flight, handlers running, hashing pool full (APP_ENV=test only)"},
    {0},
};
