/* Prometheus metrics (text exposition format 0.0.4) for GET /metrics.
 *
 * Request counts and durations are kept per thread (each thread writes only its own table,
 * so the hot path takes no lock and shares no cache line) and summed when scraped. Pools,
 * the background queue, password hashing, rate limits and the process are read at scrape
 * time. Labels: the route is the route table's pattern ("/jobs/:id"), never the raw path;
 * requests that matched no route share the route label "unmatched". db_round_trips is a
 * histogram per route and method of the database round trips each request made (on PostgreSQL
 * network round trips, however many statements each carried; on SQLite statements). */
#ifndef HTTP_METRICS_H
#define HTTP_METRICS_H
#include "http/http.h"

/* Counts one answered request (route NULL: matched none) with its status, duration and the
 * database round trips it made (db_trips). Called once per request, from any thread. */
void hs_metrics_observe(const hs_route *route, const char *method, int status, double seconds, int db_trips);
/* True when req may read the metrics: a loopback client address (as TRUST_PROXY defines it),
 * or `Authorization: Bearer <METRICS_TOKEN>` when METRICS_TOKEN is set. */
bool hs_metrics_allowed(const hs_req *req);
/* Every metric as exposition text (heap, free()); its length in *len. */
char *hs_metrics_render(size_t *len);

#endif
