/* Handlers of the support domain, referenced by its route table. */
#ifndef DOMAIN_SUPPORT_API_H
#define DOMAIN_SUPPORT_API_H
#include "http/http.h"

err_t api_support_open(hs_req *req);
err_t api_tickets_list(hs_req *req);
err_t api_tickets_update(hs_req *req);

#endif
