/* Handlers of the quotes domain, referenced by its route table. */
#ifndef DOMAIN_QUOTES_API_H
#define DOMAIN_QUOTES_API_H
#include "domain/domain.h"
#include "http/http.h"

/* quotes_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route quotes_routes[];

err_t api_quotes_create(hs_req *req);
err_t api_quotes_accept(hs_req *req);
err_t api_quotes_market_rate(hs_req *req);
err_t api_quotes_for_job(hs_req *req);
err_t api_quotes_of_provider(hs_req *req);

/* The export's quotes (domain_def's export_parts). */
extern const account_part QUOTES_EXPORT_PARTS[];

#endif
