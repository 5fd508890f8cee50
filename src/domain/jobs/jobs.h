/* Jobs: posting, the provider feed, details, cancellation, the status lifecycle with its
 * photos, tips, reviews, dispute reports and recurring requests. */
#ifndef DOMAIN_JOBS_H
#define DOMAIN_JOBS_H
#include "db/db.h"
#include "http/http.h"

extern const hs_route JOBS_ROUTES[];
extern const size_t JOBS_ROUTES_LEN;

/* The Job JSON of the row at index row of r (a `SELECT jobs.*` result). New reference. */
json_t *jobs_json(const db_res *r, int row);
/* Reads job id; ERR_NOT_FOUND when missing. */
err_t jobs_get(arena *a, const char *id, db_res **row);
/* True when provider serves the job's service in its ZIP. */
bool jobs_provider_matches(const char *provider_id, const char *service, const char *zip);

#endif
