/* Quotes: providers price open jobs, the customer accepts one (the job is assigned, the
 * others rejected, the card authorized), the market rate, a job's quotes for its owner. */
#ifndef DOMAIN_QUOTES_H
#define DOMAIN_QUOTES_H
#include "db/db.h"
#include "http/http.h"

extern const hs_route QUOTES_ROUTES[];
extern const size_t QUOTES_ROUTES_LEN;

/* The Quote JSON of row i of a `SELECT quotes.*` result. New reference. */
json_t *quotes_json(const db_res *q, int i);

#endif
