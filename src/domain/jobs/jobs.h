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

/* A job to post. */
typedef struct job_new {
  const char *id, *customer_id, *service, *description, *details, *address, *zip;
  int64_t preferred_at;
  bool has_preferred, is_asap, has_coords;
  double lat, lng;
} job_new;
/* Inserts j as a new PENDING job on c, inside the caller's transaction (POST /jobs, and the
 * GODMODE generator, which posts many in one transaction). */
db_rc jobs_insert_in(db_conn *c, const job_new *j);

#endif
