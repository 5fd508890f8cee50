/* Route matching over the one route table. Built once at start-up, read-only afterwards,
 * so lookups need no lock. */
#ifndef HTTP_ROUTER_H
#define HTTP_ROUTER_H
#include "http/http.h"

#define HS_MAX_SEGMENTS 16

/* Compiles the table (copied by reference: rows must outlive the router). Dies on a
 * malformed pattern or two rows with the same method and pattern. */
void hs_router_build(const hs_route *routes, size_t n);
/* True when r exists in this environment: ROUTE_TEST_ONLY rows only with APP_ENV=test,
 * ROUTE_DEV_ONLY rows (GODMODE) everywhere but production. Other rows always. */
bool hs_route_available(const hs_route *r);
/* The matching row for method and path among the rows available in this environment, with
 * path parameters filled into req (values are arena copies); NULL when none. Static segments
 * win over parameters. */
const hs_route *hs_router_match(int method, const char *path, hs_req *req);
/* Bit set of HS_* methods that some available row serves for path (for CORS preflight). */
int hs_router_methods(const char *path);
/* The table, for the route listing and coverage reports. */
const hs_route *hs_router_routes(size_t *n);
/* Per-row counters of requests answered and of successful answers (2xx/3xx). */
void hs_router_count(const hs_route *r, int status);
void hs_router_counts(size_t i, long *hits, long *ok);
/* Collects the arguments of a raw query string (the part of the request target after '?',
 * still percent-encoded) into args as strings: '+' is a space, %XX a byte (a malformed
 * escape stays as it is), a key without '=' has the value "". A key given more than once
 * (`status=A&status=B`) gets the array of its values, in order (validation reads all of a
 * list field's, the first of any other's); a key or value that is not UTF-8 text (or holds a
 * NUL byte) is dropped. */
void hs_query_parse(const char *query, json_t *args);
/* Method name <-> HS_* bit. */
int hs_method_bit(const char *name);
const char *hs_method_name(int bit);

#endif
