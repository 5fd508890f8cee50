/* Handlers of the portal domain and its rows. Internal to the domain. */
#ifndef DOMAIN_PORTAL_API_H
#define DOMAIN_PORTAL_API_H
#include "http/http.h"

/* portal_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route portal_routes[];

err_t api_portal_page(hs_req *req);
err_t api_portal_asset(hs_req *req); /* /portal/portal.js and /portal/portal.css */

#endif
