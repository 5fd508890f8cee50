/* Handlers of the geo domain, referenced by its route table. */
#ifndef DOMAIN_GEO_API_H
#define DOMAIN_GEO_API_H
#include "http/http.h"

/* geo_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route geo_routes[];

err_t api_weather(hs_req *req);
err_t api_drive_time(hs_req *req);

#endif
