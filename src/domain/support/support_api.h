/* Handlers of the support domain, referenced by its route table. */
#ifndef DOMAIN_SUPPORT_API_H
#define DOMAIN_SUPPORT_API_H
#include "domain/domain.h"
#include "http/http.h"

/* support_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route support_routes[];

err_t api_support_open(hs_req *req);
err_t api_tickets_list(hs_req *req);
err_t api_tickets_update(hs_req *req);

/* The export's supportTickets (domain_def's export_parts). */
extern const account_part SUPPORT_EXPORT_PARTS[];

#endif
