/* Handlers of the public routes (public_routes.c). */
#ifndef DOMAIN_PUBLIC_API_H
#define DOMAIN_PUBLIC_API_H
#include "http/http.h"

/* public_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route public_routes[];

err_t api_services_available(hs_req *req);
err_t api_services_check_zip(hs_req *req);
err_t api_waitlist_join(hs_req *req);

#endif
